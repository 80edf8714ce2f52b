"""The discrete-event simulator: the real ``schedule()`` under a simulated clock.

Loop::

    push ARRIVAL(job) for every job at its submit time
    while events:
        t = time of the next event
        pop every event at t:  COMPLETION -> release the job's tasks
                               ARRIVAL    -> add the job to the pending list
        plan = schedule(Snapshot(state, pending, t, seed_t), profile)
        apply plan: allocate each bind; push COMPLETION(job) at t + duration
        pending jobs marked Unresolvable are rejected (never retried);
        with ``drop_unplaced`` (the openb protocol) every job gets exactly one try
        observers see the state after the cycle

The cycle seed is derived from the run seed and the cycle number, so a run is a pure function of
(cluster, jobs, profile, seed): the same inputs give the same event log, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpusched.errors import InvariantError
from gpusched.framework import ClusterState, Code, Plan, Profile, Snapshot, Status
from gpusched.model import Job, JobId, Node, Task, TaskId
from gpusched.scheduler import schedule
from gpusched.sim.events import EventHeap, EventKind

__all__ = ["JobRecord", "SimOptions", "Simulation"]

_SEED_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class SimOptions:
    """How the simulator treats the workload.

    Attributes:
        drop_unplaced: give every job one scheduling attempt (openb protocol); a job that does
            not fit is dropped instead of waiting.
        ignore_durations: jobs never finish (openb protocol).
        sequential_arrivals: ignore submit times; job ``i`` arrives at time ``i``.
        record_events: keep the event log (for determinism checks and debugging).
    """

    drop_unplaced: bool = False
    ignore_durations: bool = False
    sequential_arrivals: bool = False
    record_events: bool = False


@dataclass(slots=True)
class JobRecord:
    """What happened to one job."""

    job: Job
    arrival: float
    start: float | None = None
    end: float | None = None
    status: Status | None = None

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.arrival


@dataclass(slots=True)
class Simulation:
    """A run in progress; call :meth:`run` once."""

    nodes: Sequence[Node]
    jobs: Sequence[Job]
    profile: Profile
    seed: int = 0
    options: SimOptions = field(default_factory=SimOptions)
    observers: list[Callable[[Simulation], None]] = field(default_factory=list)

    state: ClusterState = field(init=False)
    now: float = field(init=False, default=0.0)
    cycle: int = field(init=False, default=0)
    records: dict[JobId, JobRecord] = field(init=False, default_factory=dict)
    arrived_milli: int = field(init=False, default=0)
    placed_milli: int = field(init=False, default=0)
    events: list[tuple[float, str, str, str]] = field(init=False, default_factory=list)
    _tasks: dict[TaskId, Task] = field(init=False, default_factory=dict)
    _pending: dict[JobId, Job] = field(init=False, default_factory=dict)
    _heap: EventHeap = field(init=False, default_factory=EventHeap)

    def __post_init__(self) -> None:
        self.state = ClusterState.from_nodes(self.nodes)
        for i, job in enumerate(self.jobs):
            if job.id in self.records:
                raise InvariantError(f"duplicate job id {job.id!r}")
            t = float(i) if self.options.sequential_arrivals else job.submit_time
            self.records[job.id] = JobRecord(job, t)
            self._heap.push(t, EventKind.ARRIVAL, job.id)
            for task in job.tasks:
                self._tasks[task.id] = task

    # -- loop ------------------------------------------------------------------------------

    def run(self, progress: Callable[[int, int], None] | None = None) -> Simulation:
        """Process every event; ``progress(done, total)`` is called as arrivals are handled."""
        heap = self._heap
        total = len(self.jobs)
        arrived = 0
        while len(heap):
            now = heap.peek_time()
            self.now = now
            while len(heap) and heap.peek_time() == now:
                ev = heap.pop()
                if ev.kind is EventKind.COMPLETION:
                    self._complete(ev.job)
                else:
                    arrived += 1
                    self._arrive(ev.job)
            if self._pending:
                self._cycle()
            for obs in self.observers:
                obs(self)
            if progress is not None:
                progress(arrived, total)
        return self

    def _arrive(self, job_id: JobId) -> None:
        job = self.records[job_id].job
        self._pending[job_id] = job
        self.arrived_milli += job.gpu_milli
        if self.options.record_events:
            self.events.append((self.now, "arrive", job_id, ""))

    def _complete(self, job_id: JobId) -> None:
        rec = self.records[job_id]
        for task in rec.job.tasks:
            if task.id in self.state.allocations:
                self.state.release(task.id)
        self.placed_milli -= rec.job.gpu_milli
        rec.end = self.now
        if self.options.record_events:
            self.events.append((self.now, "complete", job_id, ""))

    def _cycle(self) -> None:
        seed = ((self.seed * _SEED_MIX) ^ self.cycle) & _MASK
        snapshot = Snapshot(self.state, tuple(self._pending.values()), self.now, seed)
        plan = schedule(snapshot, self.profile)
        self.cycle += 1
        self._apply(plan)

    def _apply(self, plan: Plan) -> None:
        index = self.state.index
        started: dict[JobId, None] = {}
        for bind in plan.binds:
            self.state.allocate(self._tasks[bind.task], index[bind.node], bind.gpus, bind.gpu_milli)
            started[bind.job] = None
            if self.options.record_events:
                self.events.append((self.now, "bind", bind.task, f"{bind.node}{list(bind.gpus)}"))
        for job_id in started:
            rec = self.records[job_id]
            rec.start = self.now
            rec.status = Status.success()
            del self._pending[job_id]
            self.placed_milli += rec.job.gpu_milli
            if rec.job.duration is not None and not self.options.ignore_durations:
                self._heap.push(self.now + rec.job.duration, EventKind.COMPLETION, job_id)
        for job_id, status in plan.pending.items():
            rec = self.records[job_id]
            rec.status = status
            if status.code is Code.UNRESOLVABLE or self.options.drop_unplaced:
                del self._pending[job_id]
                if self.options.record_events:
                    self.events.append((self.now, "reject", job_id, status.message))

    # -- results ---------------------------------------------------------------------------

    @property
    def pending(self) -> tuple[Job, ...]:
        return tuple(self._pending.values())

    def event_log(self) -> str:
        """The event log as text, one event a line (needs ``record_events``)."""
        return "".join(f"{t:.3f} {kind} {who} {what}\n" for t, kind, who, what in self.events)
