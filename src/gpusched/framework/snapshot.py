"""What a scheduling cycle reads: the :class:`Snapshot`, and the running jobs as a cycle sees them.

A driver (the simulator, the live backend) builds one :class:`Snapshot` per cycle and hands it
to :func:`gpusched.scheduler.schedule`; nothing in it is changed by the cycle. A job holding
allocations is a :class:`RunningJob` record; drivers give a job a new record whenever its
allocations change (the contract of :mod:`~gpusched.framework.memo`). The
:class:`~gpusched.framework.session.Session` of the cycle sees the running jobs through a
:class:`RunningOverlay`: the snapshot's, plus the jobs it starts, minus those it evicts, without
copying the snapshot's mapping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from gpusched.framework.memo import CycleMemo
from gpusched.framework.state import ClusterState
from gpusched.model import Job, JobId, QueueName, QueueTree

__all__ = ["DEFAULT_RUNTIME_S", "RunningJob", "RunningOverlay", "Snapshot", "cycle_seed"]

#: Run time assumed for a job with no estimate and no history (seconds), unless the driver
#: says otherwise (:attr:`Snapshot.default_runtime`).
DEFAULT_RUNTIME_S = 3600.0

_SEED_MIX = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: consecutive cycles spread apart
_MASK = (1 << 63) - 1


def cycle_seed(seed: int, cycle: int) -> int:
    """The seed of cycle ``cycle`` of a run seeded ``seed`` (a driver's :attr:`Snapshot.seed`)::

        ((seed * 0x9E3779B97F4A7C15) XOR cycle) AND (2**63 - 1)

    Different cycles of one run, and the same cycle of different runs, get different seeds;
    the same run replays the same ones."""
    return ((seed * _SEED_MIX) ^ cycle) & _MASK


class RunningOverlay:
    """The cycle's view of running jobs: the snapshot's, plus starts, minus evictions.

    O(1) to create (the snapshot's mapping is read through, never copied or changed).
    ``changes`` lists the job of every start and eviction in order, so what a cycle derives
    from the running jobs can be brought up to date from the jobs changed since
    (:func:`~gpusched.framework.timeline.expected_ends`).
    """

    __slots__ = ("_added", "_base", "_removed", "changes")

    def __init__(self, base: Mapping[JobId, RunningJob]) -> None:
        self._base = base
        self._added: dict[JobId, RunningJob] = {}
        self._removed: set[JobId] = set()
        self.changes: list[JobId] = []

    def __contains__(self, job: object) -> bool:
        return job in self._added or (job in self._base and job not in self._removed)

    def __getitem__(self, job: JobId) -> RunningJob:
        if job in self._added:
            return self._added[job]
        if job in self._removed:
            raise KeyError(job)
        return self._base[job]

    def __setitem__(self, job: JobId, run: RunningJob) -> None:
        self._added[job] = run
        self._removed.discard(job)
        self.changes.append(job)

    def pop(self, job: JobId) -> RunningJob:
        run = self[job]
        self._added.pop(job, None)
        if job in self._base:
            self._removed.add(job)
        self.changes.append(job)
        return run

    def values(self) -> Iterator[RunningJob]:
        for job, run in self._base.items():
            if job not in self._removed and job not in self._added:
                yield run
        yield from self._added.values()

    def items(self) -> Iterator[tuple[JobId, RunningJob]]:
        for run in self.values():
            yield run.job.id, run

    def as_dict(self) -> dict[JobId, RunningJob]:
        """The running jobs as a plain mapping (a copy: for many lookups in a row)."""
        out = dict(self._base)
        for job in self._removed:
            out.pop(job, None)
        out.update(self._added)
        return out

    def __len__(self) -> int:
        return sum(1 for _ in self.values())


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job with tasks on nodes: when it started and how often it was evicted before.

    ``deadline``: set for a job started on nodes held for another job's reservation, or
    borrowing quota held for another job (:attr:`~gpusched.framework.plan.Plan.deadlines`):
    the time it was expected to end by.
    """

    job: Job
    start: float
    evictions: int = 0
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a cycle may read: the cluster, the jobs, the queues, the time and a seed.

    Attributes:
        state: node capacity, free resources and running allocations.
        pending: jobs waiting to be placed, in arrival order. A job may already have some
            tasks bound (a driver placing pods one by one); those count towards its gang.
        now: the cycle's time in seconds.
        seed: seeds the cycle's random source (drivers derive it per cycle).
        running: jobs holding allocations in ``state``, for quota, preemption and backfill.
        queues: the queue tree; ``None`` disables quota.
        usage_history: decayed past usage per queue (fair share), kept by the driver.
        runtime_stats: mean observed run time per ``(user, kind)``, kept by the driver.
        default_runtime: run time assumed for a job with neither an estimate nor a mean in
            ``runtime_stats`` (seconds; a driver whose clock runs faster than the workload's,
            like a replay, scales it).
        evictions: how often each pending job was evicted before (disruption budgets).
        evicted_by: for each job, the jobs it was evicted to make room for; it never evicts
            them in return (no preemption loops, :mod:`~gpusched.actions.evicting`).
        reserved: jobs that held a reservation at the end of the driver's previous cycle,
            with the time they first got it; backfill keeps the reservation with them
            (:class:`~gpusched.actions.allocate.Backfill`).
        memo: results about running jobs kept from the driver's previous cycle (speed only;
            see :mod:`~gpusched.framework.memo` for the contract), or ``None``.
    """

    state: ClusterState
    pending: tuple[Job, ...]
    now: float = 0.0
    seed: int = 0
    running: Mapping[JobId, RunningJob] = field(default_factory=dict)
    queues: QueueTree | None = None
    usage_history: Mapping[QueueName, Mapping[str, float]] = field(default_factory=dict)
    runtime_stats: Mapping[tuple[str, str], float] = field(default_factory=dict)
    default_runtime: float = DEFAULT_RUNTIME_S
    evictions: Mapping[JobId, int] = field(default_factory=dict)
    evicted_by: Mapping[JobId, frozenset[JobId]] = field(default_factory=dict)
    reserved: Mapping[JobId, float] = field(default_factory=dict)
    memo: CycleMemo | None = field(default=None, compare=False, repr=False)
