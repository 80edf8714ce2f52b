"""What a simulation is asked to do and what it records per job.

:class:`SimOptions` says how the simulator treats the workload (the openb protocol's one try per
job, run forever, sequential arrivals; the event log; the fair-share half-life);
:class:`JobRecord` is what happened to one job (arrival, starts, end, evictions, moves, the
scheduler's last status), which ``RunMetrics`` and the CLI read after a run. They are kept apart
from :mod:`gpusched.sim.engine` so that readers of results need not import the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpusched.framework import Cause, Status
from gpusched.model import Job

__all__ = ["JobRecord", "SimOptions"]


@dataclass(frozen=True, slots=True)
class SimOptions:
    """How the simulator treats the workload.

    Attributes:
        drop_unplaced: give every job one scheduling attempt (openb protocol); a job that does
            not fit is dropped instead of waiting.
        ignore_durations: jobs never finish (openb protocol).
        sequential_arrivals: ignore submit times; job ``i`` arrives at time ``i``.
        record_events: keep the event log (for determinism checks and debugging).
        fair_share_half_life_s: half-life of the decayed queue usage used by fair share.
        requeue_at_eviction: an evicted job rejoins the queue at its eviction
            (:attr:`~gpusched.model.Job.requeued_at`): its place in the queue order and the
            waiting time the guards count start again from there, behind the jobs that were
            already waiting; aging counts from its submission still. On by default, as in the
            live scheduler (docs/architecture.md); off, the job keeps its place by its
            submission, ahead of the jobs submitted after it. Either way its wait and
            completion time count from its arrival.
    """

    drop_unplaced: bool = False
    ignore_durations: bool = False
    sequential_arrivals: bool = False
    record_events: bool = False
    fair_share_half_life_s: float = 4 * 3600.0
    requeue_at_eviction: bool = True


@dataclass(slots=True)
class JobRecord:
    """What happened to one job.

    ``pending_by_cause``: seconds from arrival to the first start, by the cause of the status
    that held meanwhile (a status holds from the cycle that set it to the next one; the time
    before the first cycle that considered the job is not counted).
    """

    job: Job
    arrival: float
    start: float | None = None
    end: float | None = None
    status: Status | None = None
    evictions: int = 0
    first_start: float | None = None
    estimated_start: float | None = None
    moves: int = 0
    status_at: float = 0.0
    pending_by_cause: dict[Cause, float] = field(default_factory=dict)

    def set_status(self, status: Status, now: float) -> None:
        """``status`` from ``now`` on; the time the previous one held is charged to its cause
        while the job has not started yet."""
        old = self.status
        if old is not None and not old.ok and self.first_start is None:
            cause = old.cause or Cause.OTHER
            self.pending_by_cause[cause] = (
                self.pending_by_cause.get(cause, 0.0) + now - self.status_at
            )
        self.status = status
        self.status_at = now

    @property
    def wait(self) -> float | None:
        """Arrival to first start (seconds)."""
        return None if self.first_start is None else self.first_start - self.arrival
