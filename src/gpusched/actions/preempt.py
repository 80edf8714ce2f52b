"""Disruptive actions: ``reclaim`` (quota) and ``preempt`` (priority), gang-aware.

Both make room for a pending job ``P`` by evicting whole running jobs, chosen by the profile's
victim order (cheapest first), and place ``P`` in the same cycle on the freed capacity, so no
other job can take it (the plan *nominates* ``P`` for those nodes; a live driver binds it once
the victims are gone). The search:

1. eligible victims ``V`` (see below), sorted by cost; skip ``P`` if even evicting all of ``V``
   could not free enough GPU;
2. on a scratch copy, evict ``V`` one by one until ``P`` fits (placement uses the profile's own
   filters and scores);
3. *reprieve*: give back each chosen victim, most expensive first, if ``P`` still fits without
   evicting it -- so the final set is small and cheap;
4. evict the survivors of that set for real and place ``P``.

Eligible victims, for both actions: preemptible, running at least ``min_runtime_s``, evicted
fewer than ``max_evictions`` times before (a per-job disruption budget), and not placed in this
cycle. Then:

* ``reclaim``: ``P``'s queue is within its guarantee (with ``P``), and victims belong to other
  queues that use more than their guarantee; a victim is taken only while its queue still
  borrows. After the reclaim ``P`` is within guarantee, so it can never be reclaimed back.
* ``preempt``: victims have strictly lower priority than ``P``; across queues only when ``P``
  stays within its queue's guarantee (otherwise ``P`` would be borrowing and could be reclaimed,
  which is how preemption loops start).

No loops: priority only flows downwards and reclaim only from borrowers to owners, so a job
evicted to make room can never evict its evictor in return.
"""

from __future__ import annotations

from collections.abc import Callable

from gpusched.framework import Code, RunningJob, Session, Statement
from gpusched.framework.quota import job_request
from gpusched.model import Job

__all__ = ["Preempt", "Reclaim"]

Eligible = Callable[[Session, Job, RunningJob], bool]


class _Evicting:
    name = "abstract"
    reason = ""

    def __init__(self, min_runtime_s: float = 300.0, max_evictions: int = 3) -> None:
        self.min_runtime_s = min_runtime_s
        self.max_evictions = max_evictions

    def wants(self, session: Session, job: Job) -> bool:
        raise NotImplementedError

    def eligible(self, session: Session, job: Job, run: RunningJob) -> bool:
        raise NotImplementedError

    def execute(self, session: Session) -> None:
        pool = [r for r in session.running.values() if self._base_eligible(session, r)]
        if not pool:
            return
        lowest = min(r.job.priority for r in pool)
        for job in session.pending_jobs():
            status = session.plan.pending.get(job.id)
            if status is None or status.code is not Code.UNSCHEDULABLE:
                continue
            if job.id in session.running or not self.cheap_check(session, job, lowest):
                continue
            if not self.wants(session, job):
                continue
            pool = [r for r in pool if r.job.id in session.running]
            self._make_room(session, job, pool)

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        """A quick necessary condition for ``job`` to have any victim."""
        return True

    def still_eligible(self, session: Session, run: RunningJob, taken: list[RunningJob]) -> bool:
        """Whether ``run`` may still be taken once ``taken`` are evicted."""
        return True

    def _base_eligible(self, session: Session, run: RunningJob) -> bool:
        snap = session.snapshot
        return (
            run.job.preemptible
            and run.job.id in snap.running
            and snap.now - run.start >= self.min_runtime_s
            and snap.evictions.get(run.job.id, 0) < self.max_evictions
        )

    def _make_room(self, session: Session, job: Job, pool: list[RunningJob]) -> None:
        victims = [r for r in pool if self.eligible(session, job, r)]
        if not victims:
            return
        order = session.profile.victim_order
        victims.sort(key=lambda r: order.cost(session, r))
        free = int(session.state.gpu_idle.sum())
        if free + sum(r.job.gpu_milli for r in victims) < job.gpu_milli:
            return
        chosen = _search(session, job, victims, self)
        if chosen is None:
            return
        for run in chosen:
            session.evict(run.job.id, job.id, f"{self.reason} for {job.id}")
        del session.plan.pending[job.id]
        before = len(session.plan.binds)
        if session.place_job(job, check_quota=False).ok:
            nodes = {b.node for b in session.plan.binds[before:]}
            session.plan.nominations[job.id] = tuple(sorted(nodes))


def _fits(session: Session, job: Job) -> bool:
    stmt = Statement(session.state)
    ok = all(
        session.place_task(t, stmt).ok
        for t in job.tasks[: job.min_available]
        if t.id not in session.state.allocations
    )
    stmt.rollback()
    return ok


def _search(
    session: Session, job: Job, victims: list[RunningJob], evicting: _Evicting
) -> list[RunningJob] | None:
    """Smallest cheap set of victims whose eviction lets ``job`` fit (module docstring)."""
    original = session.state
    scratch = original.copy()
    session.state = scratch
    try:
        taken: list[RunningJob] = []
        for run in victims:
            if not evicting.still_eligible(session, run, taken):
                continue
            for task in run.job.tasks:
                if task.id in scratch.allocations:
                    scratch.release(task.id)
            taken.append(run)
            if _fits(session, job):
                break
        else:
            return None
        for run in sorted(taken, key=lambda r: -r.job.gpu_milli):
            allocs = [
                original.allocations[t.id] for t in run.job.tasks if t.id in original.allocations
            ]
            stmt = Statement(scratch)
            tasks = {t.id: t for t in run.job.tasks}
            for a in allocs:
                stmt.allocate(tasks[a.task], a.node, a.gpus, a.gpu_milli)
            if _fits(session, job):
                stmt.commit()
                taken.remove(run)
            else:
                stmt.rollback()
        return taken
    finally:
        session.state = original


class Reclaim(_Evicting):
    """Give a queue back its guaranteed quota by evicting borrowers (module docstring)."""

    name = "reclaim"
    reason = "reclaimed guaranteed quota"

    def wants(self, session: Session, job: Job) -> bool:
        quota = session.quota
        return (
            quota is not None
            and job.queue in quota.tree
            and quota.within_guarantee(job.queue, job_request(job))
        )

    def eligible(self, session: Session, job: Job, run: RunningJob) -> bool:
        quota = session.quota
        assert quota is not None
        q = run.job.queue
        return q != job.queue and q in quota.tree and quota.borrowed(q) > 0

    def still_eligible(self, session: Session, run: RunningJob, taken: list[RunningJob]) -> bool:
        # Take a borrower only while its queue keeps borrowing at least the victim's GPUs, so
        # a reclaim never pushes a queue below its own guarantee.
        quota = session.quota
        assert quota is not None
        q = run.job.queue
        already = sum(r.job.gpu_milli for r in taken if r.job.queue == q)
        return quota.borrowed(q) - already >= run.job.gpu_milli


class Preempt(_Evicting):
    """Evict lower-priority jobs for a higher-priority one (module docstring)."""

    name = "preempt"
    reason = "preempted by higher priority"

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        return job.priority > lowest_priority

    def wants(self, session: Session, job: Job) -> bool:
        return session.quota_refusal(job) is None

    def eligible(self, session: Session, job: Job, run: RunningJob) -> bool:
        if run.job.priority >= job.priority:
            return False
        if run.job.queue == job.queue or session.quota is None:
            return True
        return session.quota.within_guarantee(job.queue, job_request(job))
