"""Victim order: evict the cheapest running jobs first.

``cheapest``::

    cost(j) = (priority_j, gpu_milli_j, elapsed_j)       smallest first

i.e. the lowest priority, then the fewest GPUs, then the least progress lost (the job that
started most recently). Whole gangs are evicted together by the actions.
"""

from __future__ import annotations

from gpusched.framework import RunningJob, Session

__all__ = ["CheapestVictims"]


class CheapestVictims:
    """Lowest priority, fewest GPUs, least progress first (see module docstring)."""

    name = "cheapest"

    def cost(self, session: Session, run: RunningJob) -> tuple[float, ...]:
        elapsed = session.snapshot.now - run.start
        return (float(run.job.priority), float(run.job.gpu_milli), elapsed)
