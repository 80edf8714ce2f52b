"""The output of one scheduling cycle: what the driver should do, and why the rest waits.

A :class:`Plan` is data only. The simulator applies it to its cluster state; the Kubernetes
backend turns binds into Binding POSTs. Neither adds policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpusched.framework.status import Status
from gpusched.model import JobId, NodeName, QueueName, TaskId
from gpusched.model.mig import MigPlacement, MigSlice

__all__ = ["Bind", "Eviction", "MigLayout", "Move", "Plan", "QuotaHold", "Reservation"]


@dataclass(frozen=True, slots=True)
class Bind:
    """Place ``task`` of ``job`` on ``node`` using GPUs ``gpus`` (``gpu_milli`` of each), or,
    for a MIG task, the MIG instances ``mig`` (``gpus`` then empty)."""

    task: TaskId
    job: JobId
    node: NodeName
    gpus: tuple[int, ...]
    gpu_milli: int
    mig: tuple[MigSlice, ...] = ()


@dataclass(frozen=True, slots=True)
class MigLayout:
    """The instances reconfigurable MIG GPU ``gpu`` of ``node`` must have for this cycle's
    binds: the instances in use after the cycle, sorted by start. ``was_empty``: the GPU held
    no instance before (the scheduler chose its layout from scratch)."""

    node: NodeName
    gpu: int
    layout: tuple[MigPlacement, ...]
    was_empty: bool


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict tasks of ``job`` so that ``for_job`` can run.

    ``tasks`` empty: every task (gangs go whole; the job returns to pending). Otherwise only
    those tasks, which are always elastic members beyond the job's ``min_available``: the job
    keeps running with the rest.
    """

    job: JobId
    for_job: JobId
    reason: str
    tasks: tuple[TaskId, ...] = ()


@dataclass(frozen=True, slots=True)
class Move:
    """Stop task ``task`` of running job ``job`` and start it again on ``to_node`` so that
    ``for_job`` fits (defragmentation, :mod:`gpusched.actions.defrag`).

    A moved job also has an :class:`Eviction` in the plan (reason ``moved ...``): a driver
    that knows moves releases the job and restarts it at once where its moves say; one that
    does not evicts it, and the job is placed again in a later cycle like any evicted job.
    Every bound task of a moved job has a move (gangs move whole, and restart together).
    """

    task: TaskId
    job: JobId
    for_job: JobId
    from_node: NodeName
    from_gpus: tuple[int, ...]
    to_node: NodeName
    to_gpus: tuple[int, ...]
    gpu_milli: int


@dataclass(frozen=True, slots=True)
class Reservation:
    """Nodes held for a blocked job from ``start`` (seconds), EASY-backfill style."""

    job: JobId
    start: float
    nodes: tuple[NodeName, ...]


@dataclass(frozen=True, slots=True)
class QuotaHold:
    """Quota held for ``job`` until ``until`` (seconds), when it is expected to be admitted
    (:mod:`gpusched.framework.timeline`): it needs ``short`` GPU-milli more than its queues
    admit now. ``limit`` names the queue whose limit holds it back (then other jobs charged
    under that queue may start only if they end first); ``None``: borrowing holds it back
    (then any job may borrow only if it ends first)."""

    job: JobId
    until: float
    short: int
    limit: QueueName | None = None


@dataclass(slots=True)
class Plan:
    """What one cycle decided.

    Attributes:
        binds: tasks to place now.
        evictions: running jobs to evict first (preemption, reclaim); the driver applies them
            before the binds.
        nominations: jobs whose binds depend on evictions, with the nodes freed for them; a
            live driver binds them once the victims are gone, and nothing else may use them.
        reservations: blocked jobs holding nodes for a future start.
        quota_holds: the job kept waiting only by borrowing that holds the borrowable quota.
        deadlines: jobs started this cycle on nodes held for another job's reservation, or
            borrowing quota held for another job (they were admitted because they are expected
            to end first), with the time they must end by and the job the nodes or quota are
            held for. A driver keeps the deadline on the running
            record (:attr:`~gpusched.framework.snapshot.RunningJob.deadline`): a job still
            running past it may be evicted for a reservation that is due, or for the quota
            hold's holder (:class:`~gpusched.actions.allocate.Backfill`).
        pending: status of every job considered and left pending.
        estimated_start: expected start time of pending jobs (seconds).
        moves: running tasks restarted elsewhere this cycle (defragmentation); their jobs
            are also in ``evictions``.
        mig_layouts: reconfigurable MIG GPUs that get new instances for this cycle's binds,
            with the layout each must have (:mod:`gpusched.framework.mig`).
    """

    binds: list[Bind] = field(default_factory=list)
    pending: dict[JobId, Status] = field(default_factory=dict)
    evictions: list[Eviction] = field(default_factory=list)
    nominations: dict[JobId, tuple[NodeName, ...]] = field(default_factory=dict)
    reservations: dict[JobId, Reservation] = field(default_factory=dict)
    quota_holds: dict[JobId, QuotaHold] = field(default_factory=dict)
    deadlines: dict[JobId, tuple[float, JobId]] = field(default_factory=dict)
    estimated_start: dict[JobId, float] = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)
    mig_layouts: list[MigLayout] = field(default_factory=list)

    def bound_jobs(self) -> set[JobId]:
        return {b.job for b in self.binds}

    def moved_jobs(self) -> set[JobId]:
        """Jobs this plan moves (each also has an eviction)."""
        return {m.job for m in self.moves}
