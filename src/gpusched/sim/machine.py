"""What machine a benchmark ran on, so its timings can be compared with another run's.

Benchmarks time pure-Python work, which tracks single-core speed: the same 5,000-node cycle
took 0.94 s on one 2-vCPU VM and 1.88 s on another of the same size (docs/benchmarks.md §5).
A figure is only comparable with one taken on the same processor, so the benches that print
timings (``bench cycle``, ``bench gangs``) report, beside them::

    cpu        the processor's model name (Linux: /proc/cpuinfo; else the platform's answer)
    cores      logical CPUs the process may run on
    python     interpreter version
    numpy      NumPy version

Reading the machine is the drivers' business, never the scheduling core's (no clock or host
reads there).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

__all__ = ["machine_info", "machine_line"]

_CPUINFO = Path("/proc/cpuinfo")


def _cpu_model(cpuinfo: Path = _CPUINFO) -> str:
    """The first ``model name`` of ``cpuinfo`` (Linux), else what :mod:`platform` says, else
    ``unknown``."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _cores() -> int:
    """Logical CPUs this process may run on (its affinity where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


def machine_info(cpuinfo: Path = _CPUINFO) -> dict[str, str | int]:
    """The module docstring's fields, for a benchmark's JSON."""
    return {
        "cpu": _cpu_model(cpuinfo),
        "cores": _cores(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def machine_line(info: dict[str, str | int]) -> str:
    """``info`` as one line for a console table's caption."""
    return (
        f"machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, "
        f"NumPy {info['numpy']}"
    )
