"""Run independent simulations in forked worker processes.

The inputs (nodes, jobs, ...) are set once per worker by ``init`` before the fork's first task,
so large workloads are not pickled per run; each item is then one ``run(item)`` call. Results
come back in the order of ``items``; ``progress`` sees each as it arrives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, TypeVar

__all__ = ["map_in_workers"]

T = TypeVar("T")
R = TypeVar("R")


def map_in_workers(
    run: Callable[[T], R],
    items: Sequence[T],
    init: Callable[..., None],
    initargs: tuple[Any, ...],
    *,
    workers: int | None = None,
    progress: Callable[[R], None] | None = None,
) -> list[R]:
    """``[run(item) for item in items]`` after ``init(*initargs)``, in up to ``workers`` forked
    processes (default: CPU count; one worker runs in this process)."""
    n = workers if workers is not None else min(os.cpu_count() or 1, len(items))
    results: list[R] = []
    if n <= 1:
        init(*initargs)
        for item in items:
            results.append(run(item))
            if progress:
                progress(results[-1])
        return results
    with ProcessPoolExecutor(
        n, mp_context=get_context("fork"), initializer=init, initargs=initargs
    ) as pool:
        for fut in [pool.submit(run, item) for item in items]:
            results.append(fut.result())
            if progress:
                progress(results[-1])
    return results
