"""Evict what is in a blocked job's way, then start it: the shared last step of backfill's
overdue rules and of the starvation guard (:mod:`gpusched.actions.allocate`,
:mod:`gpusched.actions.starvation`).

Each of them picks its victims by its own rule and checks with one trial placement
(:func:`~gpusched.framework.timeline.fits_after`) that the job fits once they are gone; then
the victims with a task on the nodes the job would use are evicted (the others are left
running) and the job is placed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpusched.framework import RunningJob, Session
from gpusched.framework.allocation import AllocationMap
from gpusched.model import Job

__all__ = ["evict_for", "on_nodes", "place_now"]


def on_nodes(run: RunningJob, nodes: set[int], allocations: AllocationMap) -> bool:
    """Whether ``run`` has a task on one of ``nodes`` (node indices)."""
    return any((a := allocations.get(t.id)) is not None and a.node in nodes for t in run.job.tasks)


def evict_for(
    session: Session,
    job: Job,
    victims: Iterable[RunningJob],
    why: Callable[[RunningJob], str],
    nodes: set[int] | None = None,
) -> list[RunningJob]:
    """Evict ``victims`` for ``job`` (only those on ``nodes`` when given), each with the
    reason ``why(victim)``; the evicted ones, in order."""
    allocations = session.state.allocations
    evicted = []
    for run in victims:
        if nodes is None or on_nodes(run, nodes, allocations):
            session.evict(run.job.id, job.id, why(run))
            evicted.append(run)
    return evicted


def place_now(session: Session, job: Job) -> bool:
    """Place ``job`` now that room was made; whether it started (then it is no longer
    pending)."""
    if not session.place_job(job).ok:
        return False
    session.plan.pending.pop(job.id, None)
    return True
