"""The discrete-event simulator: the real ``schedule()`` under a simulated clock.

Loop::

    push ARRIVAL(job) for every job at its submit time
    while events:
        t = time of the next event
        pop every event at t:  COMPLETION -> release the job's tasks (stale ones are ignored)
                               ARRIVAL    -> add the job to the pending list
        plan = schedule(Snapshot(state, pending, t, seed_t, running, queues, ...), profile)
        apply plan: evictions first (release, requeue, count), then binds; a job starts when
        min_available of its tasks are bound, and gets COMPLETION at t + duration;
        a moved job (defragmentation) is released and started again at once where its moves
        say: it restarts from the beginning (no checkpoint), COMPLETION at t + duration
        pending jobs marked Unresolvable are rejected (never retried);
        with ``drop_unplaced`` (the openb protocol) every job gets exactly one try
        observers see the state after the cycle

Placement quality (best-connected GPU sets, gangs within one network domain, GPU memory
overcommit, MIG reconfigurations) is measured as binds are applied, by
:class:`~gpusched.sim.placement_quality.PlacementQuality` (``Simulation.quality``).

The cycle seed is derived from the run seed and the cycle number, so a run is a pure function of
(cluster, jobs, profile, seed): the same inputs give the same event log, byte for byte.

What the driver keeps for the scheduler between cycles (the scheduler itself keeps nothing but
what it derives, in the memo):
running jobs and their start times (a new ``RunningJob`` record whenever a job's allocations
change, so the scheduler's :class:`~gpusched.framework.memo.CycleMemo` may reuse what it derived
from a record), per-job eviction counts, the mean observed run time per
``(user, kind)`` (for backfill estimates), and each queue's decayed usage for fair share, an
exponentially weighted average of its usage (:mod:`gpusched.sim.usage_history`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gpusched.errors import InvariantError
from gpusched.framework import (
    ClusterState,
    Code,
    Move,
    Plan,
    Profile,
    RunningJob,
    Snapshot,
    Status,
    cycle_seed,
)
from gpusched.framework.memo import CycleMemo
from gpusched.framework.mig import check_mig_requests
from gpusched.model import (
    Job,
    JobId,
    NetworkTopology,
    Node,
    QueueName,
    QueueTree,
    Task,
    TaskId,
)
from gpusched.scheduler import schedule
from gpusched.sim.events import EventHeap, EventKind
from gpusched.sim.placement_quality import PlacementQuality
from gpusched.sim.records import JobRecord, SimOptions
from gpusched.sim.usage_history import decay_usage

__all__ = ["Simulation"]


@dataclass(slots=True)
class Simulation:
    """A run in progress; call :meth:`run` once."""

    nodes: Sequence[Node]
    jobs: Sequence[Job]
    profile: Profile
    seed: int = 0
    options: SimOptions = field(default_factory=SimOptions)
    observers: list[Callable[[Simulation], None]] = field(default_factory=list)
    queues: QueueTree | None = None
    network: NetworkTopology | None = None

    state: ClusterState = field(init=False)
    now: float = field(init=False, default=0.0)
    cycle: int = field(init=False, default=0)
    records: dict[JobId, JobRecord] = field(init=False, default_factory=dict)
    arrived_milli: int = field(init=False, default=0)
    placed_milli: int = field(init=False, default=0)
    events: list[tuple[float, str, str, str]] = field(init=False, default_factory=list)
    running: dict[JobId, RunningJob] = field(init=False, default_factory=dict)
    preemptions: int = field(init=False, default=0)
    preemption_pairs: set[tuple[JobId, JobId]] = field(init=False, default_factory=set)
    preemption_loops: int = field(init=False, default=0)
    elastic_members_evicted: int = field(init=False, default=0)
    defrag_moves: int = field(init=False, default=0)
    defrag_tasks_moved: int = field(init=False, default=0)
    defrag_gpu_seconds_lost: float = field(init=False, default=0.0)
    last_plan: Plan | None = field(init=False, default=None)
    usage_history: dict[QueueName, dict[str, float]] = field(init=False, default_factory=dict)
    reserved: dict[JobId, float] = field(init=False, default_factory=dict)
    _tasks: dict[TaskId, Task] = field(init=False, default_factory=dict)
    _pending: dict[JobId, Job] = field(init=False, default_factory=dict)
    _heap: EventHeap = field(init=False, default_factory=EventHeap)
    _generation: dict[JobId, int] = field(init=False, default_factory=dict)
    _runtime_sum: dict[tuple[str, str], tuple[float, int]] = field(init=False, default_factory=dict)
    _history_time: float = field(init=False, default=0.0)
    _evicted_counts: dict[JobId, int] = field(init=False, default_factory=dict)
    _evicted_by: dict[JobId, frozenset[JobId]] = field(init=False, default_factory=dict)
    _placed_of: dict[JobId, int] = field(init=False, default_factory=dict)
    _runtime_means: dict[tuple[str, str], float] = field(init=False, default_factory=dict)
    #: Placement quality measured as binds are applied (``RunMetrics`` reports it).
    quality: PlacementQuality = field(init=False)
    #: Results about running jobs the scheduler keeps from cycle to cycle (speed only).
    memo: CycleMemo = field(init=False, default_factory=CycleMemo)

    def __post_init__(self) -> None:
        self.state = ClusterState.from_nodes(self.nodes, network=self.network)
        for job in self.jobs:
            if job.topology is not None:
                self.state.network.level(
                    job.topology.level, where=f"job {job.id!r}: field 'topology'"
                )
        self.quality = PlacementQuality(self.state)
        check_mig_requests(self.state, self.jobs)
        for i, job in enumerate(self.jobs):
            if job.id in self.records:
                raise InvariantError(f"duplicate job id {job.id!r}")
            t = float(i) if self.options.sequential_arrivals else job.submit_time
            self.records[job.id] = JobRecord(job, t)
            self._heap.push(t, EventKind.ARRIVAL, job.id)
            for task in job.tasks:
                self._tasks[task.id] = task

    # -- loop ------------------------------------------------------------------------------

    def run(
        self, progress: Callable[[int, int], None] | None = None, *, until: float | None = None
    ) -> Simulation:
        """Process every event (``until``: only those at or before that time, leaving the run
        paused there; :meth:`snapshot` then shows what the next cycle would see);
        ``progress(done, total)`` is called as arrivals are handled."""
        heap = self._heap
        total = len(self.jobs)
        arrived = 0
        while len(heap):
            now = heap.peek_time()
            if until is not None and now > until:
                break
            self._decay_history(now)
            self.now = now
            while len(heap) and heap.peek_time() == now:
                ev = heap.pop()
                if ev.kind is EventKind.COMPLETION:
                    if ev.tag == self._generation.get(ev.job):
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

    def observe(
        self,
        now: float,
        *,
        completed: Sequence[JobId] = (),
        arrived: Sequence[JobId] = (),
        plan: Plan | None = None,
        released: Sequence[TaskId] = (),
    ) -> None:
        """Advance to ``now`` with what a real cluster did instead of what ``schedule()``
        decides (:mod:`gpusched.sim.observed` drives a replay's metrics through this, so they
        come from the same bookkeeping as a simulated run's): ``completed`` jobs end,
        ``released`` tasks of jobs not running leave their node (a partly placed gang's pod
        deleted), ``arrived`` jobs join the queue, ``plan``'s evictions then binds are
        applied, then the observers run. Do not mix with :meth:`run`."""
        self._decay_history(now)
        self.now = now
        for job_id in completed:
            if job_id in self.running:
                self._complete(job_id)
        for task in released:
            if task in self.state.allocations:
                self.quality.forget_memory(task)
                self.state.release(task)
        for job_id in arrived:
            self._arrive(job_id)
        if plan is not None:
            self._apply(plan)
            self._keep_holders(plan)
        for obs in self.observers:
            obs(self)

    def _log(self, kind: str, who: str, what: str = "") -> None:
        if self.options.record_events:
            self.events.append((self.now, kind, who, what))

    def _arrive(self, job_id: JobId) -> None:
        job = self.records[job_id].job
        self._pending[job_id] = job
        self.arrived_milli += job.gpu_milli
        self._log("arrive", job_id)

    def _release(self, job: Job) -> None:
        for task in job.tasks:
            if task.id in self.state.allocations:
                self.quality.forget_memory(task.id)
                self.state.release(task.id)

    def _use_memory(self, task: Task, node: int, gpus: tuple[int, ...]) -> None:
        if self.quality.use_memory(task, node, gpus):
            self._log("gpu-memory-overcommit", task.id, f"{self.state.names[node]}{list(gpus)}")

    def _complete(self, job_id: JobId) -> None:
        rec = self.records[job_id]
        run = self.running.pop(job_id)
        self._release(rec.job)
        self.placed_milli -= self._placed_of.pop(job_id, 0)
        rec.end = self.now
        key = (rec.job.user, rec.job.kind.value)
        total, count = self._runtime_sum.get(key, (0.0, 0))
        self._runtime_sum[key] = (total + self.now - run.start, count + 1)
        self._runtime_means[key] = (total + self.now - run.start) / (count + 1)
        self._log("complete", job_id)

    def snapshot(self) -> Snapshot:
        """What the next cycle reads (the cluster now, the pending jobs, the queues, ...)."""
        seed = cycle_seed(self.seed, self.cycle)
        return Snapshot(
            self.state,
            tuple(self._pending.values()),
            self.now,
            seed,
            running=self.running,
            queues=self.queues,
            usage_history=self.usage_history,
            runtime_stats=self._runtime_means,
            evictions=self._evicted_counts,
            evicted_by=self._evicted_by,
            reserved=self.reserved,
            memo=self.memo,
        )

    def _cycle(self) -> None:
        plan = schedule(self.snapshot(), self.profile)
        self.cycle += 1
        self.last_plan = plan
        self._keep_holders(plan)
        self._apply(plan)

    def _keep_holders(self, plan: Plan) -> None:
        """Who holds a reservation after ``plan``, since when (the next ``Snapshot.reserved``)."""
        self.reserved = {j: self.reserved.get(j, self.now) for j in plan.reservations}

    def _apply(self, plan: Plan) -> None:
        moved = plan.moved_jobs()
        for ev in plan.evictions:
            if ev.job in moved and not ev.tasks:
                self._move_out(ev.job)
            elif ev.tasks:
                self._evict_members(ev.job, ev.tasks, ev.for_job)
            else:
                self._evict(ev.job, ev.for_job)
        if plan.moves:
            self._move_in(plan.moves)  # before the binds they make room for
        index = self.state.index
        touched: dict[JobId, None] = {}
        for bind in plan.binds:
            node = index[bind.node]
            task = self._tasks[bind.task]
            self.quality.check_connectivity(node, bind.gpus, bind.gpu_milli)
            self.state.allocate(task, node, bind.gpus, bind.gpu_milli, bind.mig or None)
            self._use_memory(task, node, bind.gpus)
            touched[bind.job] = None
            where = f" mig {[str(sl) for sl in bind.mig]}" if bind.mig else ""
            self._log("bind", bind.task, f"{bind.node}{list(bind.gpus)}{where}")
        self.quality.count_mig_layouts(plan)
        for job_id in touched:
            rec = self.records[job_id]
            if job_id in self.running:
                continue  # elastic members joining a running job
            bound = sum(1 for t in rec.job.tasks if t.id in self.state.allocations)
            if bound >= rec.job.min_available:
                due = plan.deadlines.get(job_id)
                self._start(rec, None if due is None else due[0])
        for job_id, status in plan.pending.items():
            rec = self.records[job_id]
            rec.set_status(status, self.now)
            final = status.code is Code.UNRESOLVABLE or self.options.drop_unplaced
            if final and job_id in self._pending:
                self._release(rec.job)
                del self._pending[job_id]
                self._log("reject", job_id, status.message)
        for job_id, start in plan.estimated_start.items():
            self.records[job_id].estimated_start = start

    def _start(self, rec: JobRecord, deadline: float | None = None) -> None:
        job = rec.job
        rec.start = self.now
        rec.set_status(Status.success(), self.now)
        if rec.first_start is None:
            rec.first_start = self.now
        if rec.evictions == 0 and rec.moves == 0:  # first start only
            self.quality.count_domains(job)
        self._pending.pop(job.id, None)
        self.running[job.id] = RunningJob(job, self.now, rec.evictions, deadline)
        # Requested GPU of what runs: the gang and any elastic members bound with it.
        placed = sum(t.shape.total_gpu_milli for t in job.tasks if t.id in self.state.allocations)
        self._placed_of[job.id] = placed
        self.placed_milli += placed
        if job.duration is not None and not self.options.ignore_durations:
            gen = self._generation.get(job.id, 0) + 1
            self._generation[job.id] = gen
            self._heap.push(self.now + job.duration, EventKind.COMPLETION, job.id, gen)

    def _evict(self, job_id: JobId, for_job: JobId) -> None:
        rec = self.records[job_id]
        self.running.pop(job_id, None)
        self._release(rec.job)
        self._generation[job_id] = self._generation.get(job_id, 0) + 1
        self.placed_milli -= self._placed_of.pop(job_id, 0)
        rec.evictions += 1
        self._evicted_counts[job_id] = rec.evictions
        rec.start = None
        self.preemptions += 1
        if (job_id, for_job) in self.preemption_pairs:
            self.preemption_loops += 1
        self.preemption_pairs.add((for_job, job_id))
        self._evicted_by[job_id] = self._evicted_by.get(job_id, frozenset()) | {for_job}
        # Back in the queue from now (SimOptions.requeue_at_eviction); the record keeps the
        # job as submitted, for its wait and the metrics.
        requeued = self.options.requeue_at_eviction
        self._pending[job_id] = replace(rec.job, requeued_at=self.now) if requeued else rec.job
        self._log("evict", job_id, f"for {for_job}")

    def _move_out(self, job_id: JobId) -> None:
        """First half of a move: release the job (it restarts in :meth:`_move_in`); the
        progress it loses is counted, and the move counts against its disruption budget."""
        rec = self.records[job_id]
        run = self.running.pop(job_id)
        held = sum(
            a.gpu_milli * len(a.gpus)
            for t in rec.job.tasks
            if (a := self.state.allocations.get(t.id)) is not None
        )
        self.defrag_gpu_seconds_lost += held / 1000 * (self.now - run.start)
        self._release(rec.job)
        self.placed_milli -= self._placed_of.pop(job_id, 0)
        rec.moves += 1
        self._evicted_counts[job_id] = rec.evictions + rec.moves
        rec.start = None
        self.defrag_moves += 1

    def _move_in(self, moves: Sequence[Move]) -> None:
        """Second half of a move: bind each task where its move says, restart the job."""
        index = self.state.index
        jobs: dict[JobId, None] = {}
        for mv in moves:
            node = index[mv.to_node]
            task = self._tasks[mv.task]
            self.quality.check_connectivity(node, mv.to_gpus, mv.gpu_milli)
            self.state.allocate(task, node, mv.to_gpus, mv.gpu_milli)
            self._use_memory(task, node, mv.to_gpus)
            self.defrag_tasks_moved += 1
            jobs[mv.job] = None
            self._log(
                "move",
                mv.task,
                f"{mv.from_node}{list(mv.from_gpus)} -> {mv.to_node}{list(mv.to_gpus)} "
                f"for {mv.for_job}",
            )
        for job_id in jobs:
            self._start(self.records[job_id])

    def _evict_members(self, job_id: JobId, tasks: tuple[TaskId, ...], for_job: JobId) -> None:
        """Elastic members leave; the job runs on with the rest (members are not re-added:
        the job continues smaller, as an elastic training job does)."""
        freed = sum(self._tasks[t].shape.total_gpu_milli for t in tasks)
        self._placed_of[job_id] = self._placed_of.get(job_id, 0) - freed
        self.placed_milli -= freed
        for task in tasks:
            self.quality.forget_memory(task)
        self.state.release_many(tasks)
        run = self.running[job_id]  # new allocations, new record (memo contract)
        self.running[job_id] = RunningJob(run.job, run.start, run.evictions, run.deadline)
        self.elastic_members_evicted += len(tasks)
        self._log("evict-members", job_id, f"{','.join(tasks)} for {for_job}")

    def _decay_history(self, now: float) -> None:
        if self.queues is None:
            return
        dt = now - self._history_time
        self._history_time = now
        if dt <= 0:
            return
        decay_usage(
            self.usage_history,
            self.queues,
            self.running.values(),
            dt,
            self.options.fair_share_half_life_s,
        )

    # -- results ---------------------------------------------------------------------------

    @property
    def pending(self) -> tuple[Job, ...]:
        return tuple(self._pending.values())

    def partial_gangs(self) -> list[Job]:
        """Pending jobs holding some, but not enough, bound tasks."""
        out = []
        for job in self._pending.values():
            if job.min_available > 1 and any(t.id in self.state.allocations for t in job.tasks):
                out.append(job)
        return out

    def event_log(self) -> str:
        """The event log as text, one event a line (needs ``record_events``)."""
        return "".join(f"{t:.3f} {kind} {who} {what}\n" for t, kind, who, what in self.events)
