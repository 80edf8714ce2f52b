"""What the live scheduler carries from one cycle to the next for the core.

The simulator keeps two things between cycles that the core reads from the snapshot
(:class:`~gpusched.framework.session.Snapshot`): the jobs that hold a reservation and since
when (``reserved``: backfill keeps a reservation with its job), and the deadline of each job
admitted to nodes held for a reservation (``RunningJob.deadline``: such a job may be evicted
once it overruns it); and, for each job evicted to make room, the jobs it was evicted for
(``evicted_by``: it never evicts them in return). The live scheduler rebuilds its snapshot from
the API each cycle, so it keeps them here, in memory: a new leader starts with none
(reservations are made afresh, jobs admitted under the old leader run with no deadline, and
past evictions no longer bar a job's victims).
"""

from __future__ import annotations

from dataclasses import replace

from gpusched.framework import Plan, Snapshot
from gpusched.model import JobId

__all__ = ["Carried"]


class Carried:
    """Reservation holders, deadlines and evictors from earlier cycles (module docstring)."""

    def __init__(self) -> None:
        self.reserved: dict[JobId, float] = {}
        self.deadlines: dict[JobId, float] = {}
        self.evicted_by: dict[JobId, frozenset[JobId]] = {}

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the holders, the deadlines of its running jobs and the evictors
        of its jobs."""
        running = snapshot.running
        # Forget jobs that ended or were evicted (a restarted job gets a new deadline or none).
        self.deadlines = {j: d for j, d in self.deadlines.items() if j in running}
        if self.evicted_by:  # and jobs that are gone
            live = set(running) | {j.id for j in snapshot.pending}
            self.evicted_by = {j: by for j, by in self.evicted_by.items() if j in live}
        if not self.reserved and not self.deadlines and not self.evicted_by:
            return snapshot
        with_deadlines = {
            j: replace(run, deadline=self.deadlines[j]) if j in self.deadlines else run
            for j, run in running.items()
        }
        return replace(
            snapshot,
            running=with_deadlines,
            reserved=dict(self.reserved),
            evicted_by=dict(self.evicted_by),
        )

    def record(self, plan: Plan, now: float) -> None:
        """Remember ``plan``'s reservation holders (since their first cycle as holders), the
        deadlines of the jobs it starts on held nodes and whom its evicted jobs were evicted
        for."""
        self.reserved = {j: self.reserved.get(j, now) for j in plan.reservations}
        evicted = {e.job for e in plan.evictions if not e.tasks}
        for job_id in evicted:
            self.deadlines.pop(job_id, None)
        moved = plan.moved_jobs()
        for ev in plan.evictions:
            if not ev.tasks and ev.job not in moved:
                self.evicted_by[ev.job] = self.evicted_by.get(ev.job, frozenset()) | {ev.for_job}
        for job_id, (due, _) in plan.deadlines.items():
            self.deadlines[job_id] = due
