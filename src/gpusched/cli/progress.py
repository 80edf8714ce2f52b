"""A progress bar on standard error for long runs, silent when output is not a terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(
    description: str, total: int, *, enabled: bool = True
) -> Iterator[Callable[[int], None]]:
    """Yield ``update(done)``; shows a bar only on an interactive terminal."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda done: None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)
