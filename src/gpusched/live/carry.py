"""What the live scheduler carries from one cycle to the next for the core.

The simulator keeps three things between cycles that the core reads from the snapshot
(:class:`~gpusched.framework.snapshot.Snapshot`): the jobs that hold a reservation and since
when (``reserved``: backfill keeps a reservation with its job), the deadline of each job
admitted to nodes held for a reservation or to quota held for another job
(``RunningJob.deadline``: such a job may be evicted once it overruns it), and, for each job
evicted to make room, the jobs it was evicted for (``evicted_by``: it never evicts them in
return). The live scheduler rebuilds its snapshot from the API each cycle, so it keeps them
here, with when each job was last evicted (``evicted_at``, which decides what is given up first
when the state is too big to store) and when it was first submitted (``submitted``).

An evicted job comes back as new pods that its controller creates, and a job's submit time is
its pods' creation time (:mod:`.snapshot_jobs`), so the pending job looks submitted at its
return. :meth:`Carried.apply` gives it back its first submission and marks it requeued at the
return (``Job.requeued_at``): as in the simulator, it queues behind the jobs already waiting
and ages from its first submission.

The same goes for how often a job was disrupted (``disrupted``: evictions and moves), which
the pods that come back do not say. The core reads it twice, as the simulator gives it:
``Snapshot.evictions`` (evictions plus moves) for the disruption budget of preemption, reclaim
and defragmentation, and ``RunningJob.evictions`` (evictions only) for the rules that evict
a job at most once (the overdue rule and the starvation and limit guards).

Every time is the cycle's ``Snapshot.now``, which the live scheduler takes from the wall clock
(``time.time()``, Unix seconds), so the times stay meaningful in another process or on another
machine. The leader writes this state to a ConfigMap after each cycle that changed it, and a
replica that becomes leader reads it before its first cycle (:mod:`.carry_store`), so a
reservation keeps its holder, a guest on held nodes its deadline, and an evicted job its
evictors across a change of leader or a restart. With persistence off
(``gpusched run --state-configmap ''``) it is kept in memory only and a new leader starts
with none.

Entries are dropped for jobs that no longer exist (:meth:`Carried.apply`), so the state is
bounded by the jobs the cluster holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gpusched.framework import Plan, RunningJob, Snapshot
from gpusched.model import Job, JobId

__all__ = ["Carried"]


@dataclass(slots=True)
class Carried:
    """Reservation holders, deadlines and evictors from earlier cycles (module docstring).

    Two values are equal when all six maps are (the store writes only a changed state).
    ``disrupted``: per job, how often it was evicted and how often moved.
    """

    reserved: dict[JobId, float] = field(default_factory=dict)
    deadlines: dict[JobId, float] = field(default_factory=dict)
    evicted_by: dict[JobId, frozenset[JobId]] = field(default_factory=dict)
    evicted_at: dict[JobId, float] = field(default_factory=dict)
    submitted: dict[JobId, float] = field(default_factory=dict)
    disrupted: dict[JobId, tuple[int, int]] = field(default_factory=dict)

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the holders, the deadlines of its running jobs, the evictors of
        its jobs and the first submission of its evicted jobs that are pending again (module
        docstring) and how often each was disrupted; entries of jobs it no longer has are
        forgotten."""
        running = snapshot.running
        # Forget jobs that ended or were evicted (a restarted job gets a new deadline or none).
        self.deadlines = {j: d for j, d in self.deadlines.items() if j in running}
        if self.evicted_by or self.evicted_at or self.disrupted:  # and jobs that are gone
            live = set(running) | {j.id for j in snapshot.pending}
            self.evicted_by = {j: by for j, by in self.evicted_by.items() if j in live}
            self.evicted_at = {j: t for j, t in self.evicted_at.items() if j in self.evicted_by}
            self.submitted = {j: t for j, t in self.submitted.items() if j in self.evicted_by}
            self.disrupted = {j: n for j, n in self.disrupted.items() if j in live}
        if not self.reserved and not self.deadlines and not self.evicted_by and not self.disrupted:
            return snapshot
        pending = snapshot.pending
        if self.submitted:  # (most cycles have no evicted job back in the queue)
            pending = tuple(self._requeued(j) for j in pending)
        return replace(
            snapshot,
            pending=pending,
            running={j: self._running(run) for j, run in running.items()},
            reserved=dict(self.reserved),
            evicted_by=dict(self.evicted_by),
            evictions={**snapshot.evictions, **{j: e + m for j, (e, m) in self.disrupted.items()}},
        )

    def _running(self, run: RunningJob) -> RunningJob:
        """``run`` with its deadline and how often it was evicted before, where kept."""
        j = run.job.id
        evictions = self.disrupted.get(j, (run.evictions, 0))[0]
        deadline = self.deadlines.get(j, run.deadline)
        if evictions == run.evictions and deadline == run.deadline:
            return run
        return replace(run, evictions=evictions, deadline=deadline)

    def _requeued(self, job: Job) -> Job:
        """``job`` with its first submission, requeued at its pods' creation, if it was
        evicted after an earlier submission; else ``job``."""
        first = self.submitted.get(job.id)
        if first is None or first >= job.submit_time:
            return job
        return replace(job, submit_time=first, requeued_at=job.submit_time)

    def record(
        self, plan: Plan, now: float, running: Mapping[JobId, RunningJob] | None = None
    ) -> None:
        """Remember ``plan``'s reservation holders (since their first cycle as holders), the
        deadlines of the jobs it starts on held nodes, whom its evicted jobs were evicted
        for (and when), with the first submission of those among ``running`` (the snapshot's
        running jobs), and one more eviction or move of each job it evicts or moves."""
        self.reserved = {j: self.reserved.get(j, now) for j in plan.reservations}
        evicted = {e.job for e in plan.evictions if not e.tasks}
        for job_id in evicted:
            self.deadlines.pop(job_id, None)
        moved = plan.moved_jobs()
        for job_id in evicted:
            evictions, moves = self.disrupted.get(job_id, (0, 0))
            if job_id in moved:
                self.disrupted[job_id] = (evictions, moves + 1)
            else:
                self.disrupted[job_id] = (evictions + 1, moves)
        for ev in plan.evictions:
            if not ev.tasks and ev.job not in moved:
                self.evicted_by[ev.job] = self.evicted_by.get(ev.job, frozenset()) | {ev.for_job}
                self.evicted_at[ev.job] = now
                run = None if running is None else running.get(ev.job)
                if run is not None:
                    first = run.job.submit_time
                    self.submitted[ev.job] = min(first, self.submitted.get(ev.job, first))
        for job_id, (due, _) in plan.deadlines.items():
            self.deadlines[job_id] = due

    def merge(self, other: Carried) -> None:
        """Fold in ``other`` (the state stored by this or another leader): a holder keeps its
        earliest time, a deadline is taken for a job that has none here, evictors are united
        (and the latest eviction time and the earliest submission kept), and the larger count
        of evictions and of moves. Entries of jobs that are gone are dropped at the next
        :meth:`apply`."""
        for job_id, since in other.reserved.items():
            self.reserved[job_id] = min(since, self.reserved.get(job_id, since))
        for job_id, due in other.deadlines.items():
            self.deadlines.setdefault(job_id, due)
        for job_id, by in other.evicted_by.items():
            self.evicted_by[job_id] = self.evicted_by.get(job_id, frozenset()) | by
        for job_id, at in other.evicted_at.items():
            self.evicted_at[job_id] = max(at, self.evicted_at.get(job_id, at))
        for job_id, first in other.submitted.items():
            self.submitted[job_id] = min(first, self.submitted.get(job_id, first))
        for job_id, (evictions, moves) in other.disrupted.items():
            mine = self.disrupted.get(job_id, (0, 0))
            self.disrupted[job_id] = (max(evictions, mine[0]), max(moves, mine[1]))

    def copy(self) -> Carried:
        return Carried(
            dict(self.reserved),
            dict(self.deadlines),
            dict(self.evicted_by),
            dict(self.evicted_at),
            dict(self.submitted),
            dict(self.disrupted),
        )
