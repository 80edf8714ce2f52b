"""Queue order plugins: in which order an action tries pending jobs.

``fifo``: by submit time, then by the order the driver listed them (stable).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpusched.framework import CycleContext
from gpusched.model import Job

__all__ = ["Fifo"]


class Fifo:
    """First come, first served (see module docstring)."""

    name = "fifo"

    def order(self, ctx: CycleContext, jobs: Sequence[Job]) -> list[Job]:
        return sorted(jobs, key=lambda j: j.submit_time)
