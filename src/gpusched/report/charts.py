"""Matplotlib charts rendered to inline SVG (no files, no JavaScript)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = ["bar_chart", "line_chart"]

_COLORS = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
]


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def line_chart(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
) -> str:
    """One line per entry of ``series`` (name -> (x, y)); returns an SVG string."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for i, (name, (x, y)) in enumerate(series.items()):
        ax.plot(x, y, label=name, color=_COLORS[i % len(_COLORS)], linewidth=1.6)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if xlim:
        ax.set_xlim(*xlim)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)


def bar_chart(
    labels: Sequence[str],
    values: Mapping[str, Sequence[float]],
    *,
    errors: Mapping[str, Sequence[float]] | None = None,
    title: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
) -> str:
    """Grouped bars: one group per label, one bar per entry of ``values``."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    width = 0.8 / max(len(values), 1)
    for i, (name, vals) in enumerate(values.items()):
        xs = [j + i * width for j in range(len(labels))]
        err = errors.get(name) if errors else None
        ax.bar(xs, vals, width, yerr=err, label=name, color=_COLORS[i % len(_COLORS)], capsize=3)
    ax.set_xticks([j + width * (len(values) - 1) / 2 for j in range(len(labels))], labels)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return _svg(fig)
