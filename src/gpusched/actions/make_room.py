"""Evict what is in a blocked job's way, then start it: the shared last step of backfill's
overdue rules and of the starvation and limit guards (:mod:`gpusched.actions.allocate`,
:mod:`gpusched.actions.starvation`, :mod:`gpusched.actions.limit_guard`).

Each of them picks its victims by its own rule (those that make room under a queue limit
with :func:`admitting_without`) and checks with one trial placement
(:func:`~gpusched.framework.timeline.fits_after`) that the job fits once they are gone; then
the victims with a task on the nodes the job would use are evicted (the others are left
running) and the job is placed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gpusched.framework import RunningJob, Session
from gpusched.framework.allocation import AllocationMap
from gpusched.model import Job, Resources

__all__ = [
    "admitting_without",
    "evict_for",
    "evict_newer_and_place",
    "newer_evictable",
    "on_nodes",
    "place_now",
]


def on_nodes(run: RunningJob, nodes: set[int], allocations: AllocationMap) -> bool:
    """Whether ``run`` has a task on one of ``nodes`` (node indices)."""
    return any((a := allocations.get(t.id)) is not None and a.node in nodes for t in run.job.tasks)


def newer_evictable(session: Session, job: Job) -> list[RunningJob]:
    """What a guard may evict for ``job`` (:mod:`gpusched.actions.starvation`,
    :mod:`gpusched.actions.limit_guard`): running jobs placed before this cycle that started
    after ``job`` was queued (``Job.queue_time``: submitted, or last evicted), preemptible,
    of its priority or lower, never evicted before
    and not one it was evicted for (no preemption loops); most recently started first, so the
    least work is lost."""
    evictors = session.snapshot.evicted_by.get(job.id, frozenset())
    placed = session.snapshot.running
    return sorted(
        (
            r
            for r in session.running.values()
            if r.start > job.queue_time
            and r.job.preemptible
            and r.job.priority <= job.priority
            and r.evictions == 0
            and r.job.id not in evictors
            and r.job.id in placed
        ),
        key=lambda r: -r.start,
    )


def admitting_without(
    session: Session, job: Job, runs: Sequence[RunningJob]
) -> list[RunningJob] | None:
    """The shortest prefix of ``runs`` whose end would let the queues admit ``job``, or
    ``None`` if not even all of them would: a trial, their charges refunded in turn and then
    charged back, so the queues are left as they were."""
    quota = session.quota
    assert quota is not None
    chosen: list[RunningJob] = []
    charges: list[Resources] = []
    admitted = False
    for run in runs:
        charge = session.charge_of(run.job)
        quota.refund(run.job.queue, charge)
        chosen.append(run)
        charges.append(charge)
        if session.quota_refusal(job) is None:
            admitted = True
            break
    for run, charge in zip(chosen, charges, strict=True):
        quota.charge(run.job.queue, charge)
    return chosen if admitted else None


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


def evict_newer_and_place(
    session: Session,
    job: Job,
    victims: Iterable[RunningJob],
    guard: str,
    context: str,
    *,
    nodes: set[int] | None = None,
) -> bool:
    """A guard's last step: evict ``victims`` (of :func:`newer_evictable`) for ``job`` as
    :func:`evict_for` does, each with the reason "``guard``: ``job`` has waited N s
    ``context``; ``victim`` started after it was queued", and place ``job``."""
    waited = session.snapshot.now - job.queue_time

    def why(run: RunningJob) -> str:
        return (
            f"{guard}: {job.id} has waited {waited:.0f} s{context}; {run.job.id} started "
            "after it was queued"
        )

    evict_for(session, job, victims, why, nodes)
    return place_now(session, job)


def place_now(session: Session, job: Job) -> bool:
    """Place ``job`` now that room was made; whether it started (then it is no longer
    pending)."""
    if not session.place_job(job).ok:
        return False
    session.plan.pending.pop(job.id, None)
    return True
