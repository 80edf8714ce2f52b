"""The metric rows ``simulate``, ``bench gangs`` and ``replay`` print, and their formatting."""

from __future__ import annotations

from typing import Any

__all__ = ["SUMMARY_ROWS", "duration", "fmt_value", "top_cause"]

#: ``(summary key, label, format)``; format ``"dur"`` prints seconds as s, min or h,
#: ``"cause"`` the largest share of a ``{cause: hours}`` mapping.
SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("jobs", "jobs", "{:,}"),
    ("jobs_started", "jobs started", "{:,}"),
    ("jobs_completed", "jobs completed", "{:,}"),
    ("gpu_allocation_pct", "GPU allocation % (requested)", "{:.1f}"),
    ("gpu_held_pct", "GPU held %", "{:.1f}"),
    ("fragmentation_pct", "fragmentation % of capacity", "{:.2f}"),
    ("avg_wait_s", "average wait", "dur"),
    ("p95_wait_s", "p95 wait", "dur"),
    ("max_wait_s_top1pct_largest", "max wait, largest 1% of jobs", "dur"),
    ("max_wait_s_top1pct_largest_ties", "max wait, largest 1% + ties", "dur"),
    ("pending_h_top1pct_largest_by_cause", "largest 1% mostly wait on", "cause"),
    ("avg_jct_s", "average job completion time", "dur"),
    ("partially_placed_gangs_max", "gangs partly placed (max at once)", "{:,}"),
    ("idle_gpu_hours_held_by_partial_gangs", "GPU-hours held by partial gangs", "{:,.1f}"),
    ("preemptions", "preemptions", "{:,}"),
    ("defrag_moves", "defragmentation moves", "{:,}"),
    ("seconds", "simulation wall time", "{:.2f} s"),
)


def duration(seconds: float) -> str:
    """``42 s``, ``3.5 min`` or ``2.1 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def fmt_value(value: Any, fmt: str) -> str:
    """``value`` formatted by a row's format."""
    if fmt == "dur":
        return duration(float(value))
    if fmt == "cause":
        return top_cause(value or {})
    return fmt.format(value)


def top_cause(hours: dict[str, float]) -> str:
    """``queue-limit 81%``: the cause with the most hours and its share; ``-`` for none."""
    total = sum(hours.values())
    if total <= 0:
        return "-"
    cause, most = max(hours.items(), key=lambda kv: kv[1])
    return f"{cause} {100 * most / total:.0f}%"
