"""One scheduling cycle's working context, shared by the actions of that cycle.

A :class:`Session` owns a *working copy* of the snapshot's cluster state, so the snapshot itself
is never changed: :func:`gpusched.scheduler.schedule` stays a pure function. Actions place tasks
through :meth:`Session.place_task` inside a :class:`~gpusched.framework.statement.Statement` and
record outcomes on :attr:`Session.plan`.

Placement of one task (the formula every profile shares)::

    feasible(n) = AND_f filter_f(task, n)
    score(n)    = SUM_s weight_s * score_s(task, n)            for feasible n
    node        = argmax_n score(n)   (ties: first in cluster order, or uniform at random)

A request that holds different shares on different nodes (by GPU memory, sharing modes; see
:mod:`.sharing`) is scored per variant on the variant's nodes and the best node overall wins.
A gang that asks for a network domain is placed inside the nodes :mod:`.domains` chooses.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpusched.errors import ConfigError
from gpusched.framework.allocation import Allocation
from gpusched.framework.domain_wait import wait_for_domain
from gpusched.framework.domains import choose_domain, task_fit
from gpusched.framework.extension import CycleContext
from gpusched.framework.memo import CycleMemo
from gpusched.framework.plan import Bind, Eviction, Plan, QuotaHold
from gpusched.framework.profile import Profile, TieBreak
from gpusched.framework.quota import QuotaBook, job_request
from gpusched.framework.release_batch import ReleaseRows
from gpusched.framework.sharing import variants
from gpusched.framework.state import ClusterState
from gpusched.framework.statement import Statement
from gpusched.framework.status import Code, Status
from gpusched.model import (
    MILLI_PER_GPU,
    Job,
    JobId,
    QueueName,
    QueueTree,
    Resources,
    Task,
    TaskId,
    TaskShape,
)

__all__ = ["RunningJob", "Session", "Snapshot"]

_NO_FIT = Status(Code.UNSCHEDULABLE, ("no feasible node",))

#: Run time assumed for a job with no estimate and no history (seconds).
DEFAULT_RUNTIME_S = 3600.0


class RunningOverlay:
    """The cycle's view of running jobs: the snapshot's, plus starts, minus evictions.

    O(1) to create (the snapshot's mapping is read through, never copied or changed).
    """

    __slots__ = ("_added", "_base", "_removed")

    def __init__(self, base: Mapping[JobId, RunningJob]) -> None:
        self._base = base
        self._added: dict[JobId, RunningJob] = {}
        self._removed: set[JobId] = set()

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

    def pop(self, job: JobId) -> RunningJob:
        run = self[job]
        self._added.pop(job, None)
        if job in self._base:
            self._removed.add(job)
        return run

    def values(self) -> Iterator[RunningJob]:
        for job, run in self._base.items():
            if job not in self._removed and job not in self._added:
                yield run
        yield from self._added.values()

    def items(self) -> Iterator[tuple[JobId, RunningJob]]:
        for run in self.values():
            yield run.job.id, run

    def __len__(self) -> int:
        return sum(1 for _ in self.values())


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job with tasks on nodes: when it started and how often it was evicted before.

    ``deadline``: set for a job started on nodes held for another job's reservation
    (:attr:`~gpusched.framework.plan.Plan.deadlines`): the time it was expected to end by.
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
    evictions: Mapping[JobId, int] = field(default_factory=dict)
    evicted_by: Mapping[JobId, frozenset[JobId]] = field(default_factory=dict)
    reserved: Mapping[JobId, float] = field(default_factory=dict)
    memo: CycleMemo | None = field(default=None, compare=False, repr=False)


_NUMA_FILTER = "numa-local-cpu"
#: The memo table of pending jobs' requests and quota keys.
_REQUESTS = "requests"


class Session:
    """Working state and plan of one cycle."""

    __slots__ = (
        "_current_job",
        "_end_estimate",
        "_failed",
        "_filters_key",
        "_kept_requests",
        "_never",
        "_refusals",
        "_requests",
        "blocked_nodes",
        "ctx",
        "default_runtime",
        "end_of",
        "ends_cache",
        "evicted",
        "plan",
        "profile",
        "quota",
        "quota_hold",
        "release_rows",
        "restrict",
        "running",
        "running_epoch",
        "shrunk",
        "snapshot",
        "state",
    )

    def __init__(self, snapshot: Snapshot, profile: Profile, ctx: CycleContext) -> None:
        self.snapshot = snapshot
        self.profile = profile
        self.ctx = ctx
        self.state = snapshot.state.copy()
        self.plan = Plan()
        # Within a cycle free resources only shrink, so a request that failed once fails again:
        # remember the failure per (task shapes, gang size) and skip the retry.
        self._failed: dict[tuple[object, ...], Status] = {}
        # The filters' identity in the state's layout cache ("could it ever fit?" answers).
        self._filters_key = repr(profile.spec.filters)
        self.running: RunningOverlay = RunningOverlay(snapshot.running)
        self.evicted: set[JobId] = set()
        # Quota answers per (queue, quota-relevant request, preemptible), valid while the
        # usage version they were computed at holds; gang requests per job.
        self._refusals: dict[tuple[object, ...], tuple[int, Status | None]] = {}
        # Per quota key: why it could never be admitted ("": it could), whatever the usage.
        self._never: dict[tuple[object, ...], str] = {}
        # Per job: (the job, its gang request, its quota-memo key); kept by the memo for the
        # next cycle (a job is immutable, so its entry holds while the job object is the same).
        self._requests: dict[JobId, tuple[Job, Resources, tuple[object, ...] | None]] = {}
        self._kept_requests: dict[JobId, tuple[Job, Resources, tuple[object, ...] | None]] = {}
        # Running jobs whose elastic members were evicted in this cycle (their allocations
        # no longer match what the memo knows of them).
        self.shrunk: set[JobId] = set()
        self.quota: QuotaBook | None = None
        if snapshot.queues is not None:
            self.quota = QuotaBook(
                snapshot.queues, self.state, self._running_charges(), snapshot.usage_history
            )
        # EASY backfill: nodes held for a reservation, and the reservation's start time.
        self.blocked_nodes: dict[int, tuple[float, JobId]] = {}
        self._end_estimate = 0.0
        self._current_job: JobId | None = None
        self.default_runtime = DEFAULT_RUNTIME_S
        # Bumped whenever the set of running jobs changes (caches of expected ends key on it).
        self.running_epoch = 0
        self.ends_cache: tuple[int, list[tuple[float, JobId]]] | None = None
        # Expected end of each running job (fixed within a cycle: start and estimate are).
        self.end_of: dict[JobId, float] = {}
        # Nodes the gang being placed is confined to (its network domain), or None.
        self.restrict: np.ndarray | None = None
        self.release_rows: ReleaseRows | None = None
        memo = snapshot.memo
        if memo is not None:  # requests and quota keys of jobs seen last cycle (same tree)
            relevant = None if self.quota is None else self.quota.relevant
            kept = memo.tables.get(_REQUESTS)
            if kept is not None and kept[0] == relevant:
                self._kept_requests = kept[1]
            memo.tables[_REQUESTS] = (relevant, self._requests)
        if memo is not None and memo.release_rows is not None:
            # The previous cycle's rows, without the blocks of jobs no longer running.
            rows = self.release_rows = memo.release_rows
            running = snapshot.running
            rows.block = {j: b for j, b in rows.block.items() if running.get(j) is b[0]}
        # Borrowable quota held for a job that waits only for borrowing (plan.QuotaHold).
        self.quota_hold: QuotaHold | None = None

    # -- placing ---------------------------------------------------------------------------

    def feasible(self, task: Task, *, skip: str | None = None) -> np.ndarray:
        """Boolean mask of nodes that pass every filter for ``task`` (``skip``: all but the
        filter of that name) and are not held for another job's reservation."""
        filters = [f for f in self.profile.filters if f.name != skip]
        mask = (
            filters[0].filter(self.ctx, task, self.state)
            if filters
            else np.ones(self.state.size, dtype=bool)
        )
        for f in filters[1:]:
            mask = mask & f.filter(self.ctx, task, self.state)
        if self.restrict is not None:
            mask = mask & self.restrict
        if self.blocked_nodes:
            for node, (start, owner) in self.blocked_nodes.items():
                if self._end_estimate > start and owner != self._current_job:
                    mask[node] = False
        return mask

    def _spare_held(self, feasible: np.ndarray) -> np.ndarray:
        """``feasible`` without the nodes held for another job's reservation, unless only
        those are left: a job admitted to held nodes (it ends before the reservation starts)
        uses them as a last resort, so they drain for their reservation."""
        if not self.blocked_nodes:
            return feasible
        held = [n for n, (_, owner) in self.blocked_nodes.items() if owner != self._current_job]
        if not held or not feasible[held].any():
            return feasible
        spared = feasible.copy()
        spared[held] = False
        return spared if spared.any() else feasible

    def select_node(self, task: Task, feasible: np.ndarray) -> int:
        """The best feasible node for ``task`` (callers ensure one exists)."""
        return self._argmax(self.node_scores(task, feasible))

    def _argmax(self, masked: np.ndarray) -> int:
        if self.profile.tie_break is TieBreak.FIRST:
            return int(np.argmax(masked))
        ties = np.flatnonzero(masked == masked.max())
        return int(ties[self.ctx.rng.randrange(len(ties))])

    def node_scores(self, task: Task, feasible: np.ndarray) -> np.ndarray:
        """Weighted score sum on feasible nodes, ``-inf`` elsewhere.

        The sum is ``((0 + w_1 * s_1) + w_2 * s_2) + ...`` in profile order, accumulated in
        place (one buffer for the sum, one for the products): the same operations in the same
        order as a fresh array per step, so the same bits. The leading ``0 +`` is dropped; it
        changes only the sign of a zero, which no comparison sees.
        """
        scores = self.profile.scores
        ctx, state = self.ctx, self.state
        if not scores:
            total = np.zeros(state.size)
        elif len(scores) == 1 and scores[0][1] == 1.0:
            total = scores[0][0].score(ctx, task, state, feasible)
        else:
            (first, w_first), *rest = scores
            total, product = np.empty(state.size), np.empty(state.size)
            np.multiply(first.score(ctx, task, state, feasible), w_first, out=total)
            for plugin, weight in rest:
                np.multiply(plugin.score(ctx, task, state, feasible), weight, out=product)
                np.add(total, product, out=total)
        return np.where(feasible, total, -np.inf)

    def place_single(self, task: Task, stmt: Statement) -> Status:
        """:meth:`place_task` with the per-cycle failure memo (for pod-by-pod placement)."""
        key = ("task", task.shape)
        known = self._failed.get(key)
        if known is not None:
            return known
        status = self.place_task(task, stmt)
        if not status.ok:
            self._failed[key] = status
        return status

    def place_task(self, task: Task, stmt: Statement, *, explain: bool = True) -> Status:
        """Try to place ``task`` inside ``stmt``; a status with reasons when it does not fit
        (``explain=False``: a bare status, for trial placements that only ask "does it fit?")."""
        if self.profile.gpu_as_integer and task.shape.is_sharing:
            task = Task(task.id, task.job, replace(task.shape, gpu_milli=MILLI_PER_GPU))
        if task.shape.numa_local_cpus and not any(
            f.name == _NUMA_FILTER for f in self.profile.filters
        ):
            # Without the filter the picker may choose GPUs whose NUMA nodes cannot give the
            # CPUs, and the allocation would fail: say so instead.
            return Status(
                Code.UNRESOLVABLE,
                (
                    f"task {task.id} asks for NUMA-local CPUs (numa_local_cpus) but profile "
                    f"{self.profile.name!r} has no {_NUMA_FILTER} filter; use the gpusched-topo "
                    f"policy or add the filter to the profile",
                ),
            )
        options = variants(self.state, task.shape)
        if options is not None:
            return self._place_variants(task, options, stmt, explain)
        feasible = self.feasible(task)
        if not feasible.any():
            return self.diagnose(task) if explain else _NO_FIT
        node = self.select_node(task, self._spare_held(feasible))
        gpus = self.profile.gpu_picker.pick(self.ctx, task, self.state, node)
        stmt.allocate(task, node, gpus)
        return Status.success()

    def _place_variants(
        self,
        task: Task,
        options: Sequence[tuple[TaskShape, np.ndarray]],
        stmt: Statement,
        explain: bool,
    ) -> Status:
        """Place a request whose share depends on the node (:mod:`.sharing`): each variant
        scored on its own nodes, the best node overall; ties as the profile says."""
        combined = np.full(self.state.size, -np.inf)
        owner = np.full(self.state.size, -1, dtype=np.int64)
        tasks = [Task(task.id, task.job, shape) for shape, _ in options]
        for i, (vtask, (_, nodes)) in enumerate(zip(tasks, options, strict=True)):
            feasible = self.feasible(vtask) & nodes
            if feasible.any():
                combined = np.where(feasible, self.node_scores(vtask, feasible), combined)
                owner[feasible] = i
        if not (owner >= 0).any():
            return self._diagnose_variants(task, tasks) if explain else _NO_FIT
        node = self._argmax(combined)
        vtask = tasks[int(owner[node])]
        gpus = self.profile.gpu_picker.pick(self.ctx, vtask, self.state, node)
        stmt.allocate(vtask, node, gpus)
        return Status.success()

    def _diagnose_variants(self, task: Task, tasks: Sequence[Task]) -> Status:
        s = task.shape
        state = self.state
        if not tasks:
            if s.gpu_memory_mib:
                usable = int(state.gpu_usable_mib.max(initial=0))
                return Status(
                    Code.UNRESOLVABLE,
                    (
                        f"asks {s.gpu_memory_mib / 1024:g} GiB of GPU memory; the largest usable "
                        f"GPU memory of any node is {usable / 1024:g} GiB",
                    ),
                )
            return Status(
                Code.UNRESOLVABLE,
                ("asks a fraction of a GPU; every GPU node is exclusive (no sharing)",),
            )
        empty = state.empty()
        ever = False
        for vtask, (_, nodes) in zip(tasks, variants(state, s) or (), strict=False):
            mask = nodes.copy()
            for f in self.profile.filters:
                mask &= f.filter(self.ctx, vtask, empty)
            ever = ever or bool(mask.any())
        reasons = tuple(
            dict.fromkeys(
                r
                for t in tasks
                for f in self.profile.filters
                if (r := f.explain(self.ctx, t, state))
            )
        )
        code = Code.UNSCHEDULABLE if ever else Code.UNRESOLVABLE
        if not ever:
            reasons = ("no node that can host its share would fit it even when empty", *reasons)
        if s.by_memory:
            reasons = (
                f"asks {s.gpu_memory_mib / 1024:g} GiB of GPU memory (a share of "
                f"{', '.join(str(t.shape.gpu_milli) for t in tasks)} milli by GPU size)",
                *reasons,
            )
        return Status(code, reasons)

    def begin_job(self, job: Job) -> None:
        """Placements that follow are for ``job``: reserved nodes admit it only if it is
        expected to end before their reservation starts (or the reservation is its own)."""
        self._end_estimate = self.snapshot.now + self.runtime_estimate(job)
        self._current_job = job.id

    def reservation_class(self, job: Job) -> tuple[int, JobId | None]:
        """Which nodes held for reservations ``job`` may use (:meth:`feasible`) depends only
        on how many reservation starts precede its expected end, and on whether it owns one:
        jobs of one class see the same nodes."""
        if not self.blocked_nodes:
            return 0, None
        end = self.snapshot.now + self.runtime_estimate(job)
        starts = sorted({start for start, _ in self.blocked_nodes.values()})
        owner = any(owner == job.id for _, owner in self.blocked_nodes.values())
        return bisect.bisect_left(starts, end), job.id if owner else None

    def place_job(self, job: Job, *, check_quota: bool = True) -> Status:
        """Place ``job.min_available`` tasks of ``job`` all or nothing; binds go to the plan.

        Tasks already bound count towards the gang. Filters see only a task's shape, so two
        jobs with the same shapes and gang size succeed or fail alike; a failed request is
        remembered for the rest of the cycle. With queues configured, the job must also pass
        its queue's limit and either fit its guarantee or be allowed to borrow.
        """
        if check_quota and self.quota is not None:
            refused = self.quota_refusal(job)
            if refused is not None:
                self.plan.pending[job.id] = refused
                return refused
        todo = [t for t in job.tasks if t.id not in self.state.allocations]
        need = job.min_available - (len(job.tasks) - len(todo))
        self.begin_job(job)
        key: tuple[object, ...] = (
            max(need, 0),
            job.topology,
            *(t.shape for t in todo[: max(need, 0)]),
        )
        if job.topology is not None and not job.topology.required:
            # A preferred gang's patience for one domain is a share of its run time: the
            # outcome depends on the job's expected end.
            key = (*key, self._end_estimate)
        elif self.blocked_nodes:
            # Reserved nodes admit only jobs ending before the reservation (or its owner):
            # what matters is which reservations start before the job's expected end.
            key = (*key, *self.reservation_class(job))
        known = self._failed.get(key)
        if known is not None:
            self.plan.pending[job.id] = known
            return known
        stmt = Statement(self.state)
        gang_tasks = todo[: max(need, 0)]
        failed = self.confine(job, gang_tasks)
        try:
            for task in gang_tasks if failed is None else ():
                status = self.place_task(task, stmt)
                if not status.ok:
                    failed = status
                    break
        finally:
            self.restrict = None
        if failed is not None:
            status = failed
            placed = len(stmt.allocations)
            stmt.rollback()
            if job.min_available > 1:
                status = Status(
                    status.code,
                    (
                        f"gang needs {job.min_available} tasks placed together; "
                        f"{placed + len(job.tasks) - len(todo)} could be placed",
                        *status.reasons,
                    ),
                )
            if (
                status.code is Code.UNSCHEDULABLE
                and need > 1
                and not self._gang_ever_fits(job, need)
            ):
                status = Status(
                    Code.UNRESOLVABLE,
                    (
                        f"the gang of {need} tasks cannot fit together even on an empty cluster",
                        *status.reasons[1:],
                    ),
                )
            self.plan.pending[job.id] = status
            self._failed[key] = status
            return status
        # Elastic members beyond the gang: best effort, one by one, each within the queue's
        # limit and guarantee-or-borrowing rules like the gang itself.
        gang = {t.id for t in todo[: max(need, 0)]}
        members = [t for t in job.tasks if t.id in gang or t.id in self.state.allocations]
        for task in todo[max(need, 0) :]:
            if self.quota is not None:
                # A job placed by eviction (check_quota=False) must stay within its guarantee,
                # so its members may not borrow (it could be reclaimed back: a loop).
                req = job_request(job, tasks=[*members, task])
                if self._quota_problem(job.queue, req, borrow=check_quota, lent=job.preemptible):
                    break
            single = Statement(self.state)
            if self.place_task(task, single).ok:
                stmt.adopt(single)
                members.append(task)
        self._commit(job, stmt)
        return Status.success()

    def confine(
        self, job: Job, tasks: Sequence[Task], *, one_domain: bool = False, wait: bool = True
    ) -> Status | None:
        """Confine the gang to the network domain :mod:`.domains` chooses (sets
        :attr:`restrict`); a status when a required domain has no room, or when a preferred
        gang waits a bounded time for one domain instead of splitting (``wait``;
        :mod:`.domain_wait`). ``one_domain``: treat a preferred gang as required."""
        req = job.topology
        if req is None or len(tasks) < 2:
            return None
        try:
            level = self.state.network.level(req.level, where=f"job {job.id!r}: field 'topology'")
        except ConfigError as exc:
            return Status(Code.UNRESOLVABLE, (str(exc),))
        fit = self._gang_fit(self.state, tasks[0], blocked=True)
        required = req.required or one_domain
        choice = choose_domain(self.state, level, fit, len(tasks), required=required)
        if wait and not required and len(choice.domains) != 1:
            waiting = wait_for_domain(self, job, self.state.network.levels[level].name)
            if waiting is not None:
                return waiting
        if choice.problem:
            empty = self.state.empty()
            ever = choose_domain(
                empty, level, self._gang_fit(empty, tasks[0]), len(tasks), required=True
            )
            if ever.problem:
                return Status(Code.UNRESOLVABLE, (f"{ever.problem} even on an empty cluster",))
            return Status(Code.UNSCHEDULABLE, (choice.problem,))
        self.restrict = choice.nodes
        return None

    def _gang_fit(self, state: ClusterState, task: Task, *, blocked: bool = False) -> np.ndarray:
        """How many tasks of ``task``'s shape each node of ``state`` can take now
        (:func:`~gpusched.framework.domains.task_fit`), per share variant."""
        options = variants(state, task.shape)
        shapes = [(task.shape, None)] if options is None else list(options)
        fit = np.zeros(state.size, dtype=np.int64)
        for shape, nodes in shapes:
            probe = Task(task.id, task.job, shape)
            if blocked:
                mask = self.feasible(probe)
            else:
                mask = np.ones(state.size, dtype=bool)
                for f in self.profile.filters:
                    mask &= f.filter(self.ctx, probe, state)
            if nodes is not None:
                mask = mask & nodes
            fit = np.maximum(fit, task_fit(state, shape, mask))
        return fit

    def _commit(self, job: Job, stmt: Statement) -> None:
        names = self.state.names
        allocs = stmt.commit()
        for alloc in allocs:
            self.plan.binds.append(
                Bind(alloc.task, alloc.job, names[alloc.node], alloc.gpus, alloc.gpu_milli)
            )
        if self.quota is not None:
            self.quota.charge(job.queue, self.charge_of(job))
        deadline = self._deadline(job, allocs)
        self.running[job.id] = RunningJob(job, self.snapshot.now, deadline=deadline)
        self.running_epoch += 1

    def _deadline(self, job: Job, allocs: Sequence[Allocation]) -> float | None:
        """The earliest start of the reservations whose held nodes ``job`` was admitted to
        (it was expected to end by then; :attr:`Plan.deadlines`), or ``None``."""
        held = self.blocked_nodes
        if not held:
            return None
        found: tuple[float, JobId] | None = None
        for alloc in allocs:
            entry = held.get(alloc.node)
            if entry is not None and entry[1] != job.id and (found is None or entry < found):
                found = entry
        if found is None:
            return None
        self.plan.deadlines[job.id] = found
        return found[0]

    def commit_tasks(self, job: Job, stmt: Statement) -> None:
        """Bind the tasks in ``stmt`` without the gang check (pod-by-pod placement); the job
        counts as running once ``min_available`` of its tasks are bound."""
        names = self.state.names
        for alloc in stmt.commit():
            self.plan.binds.append(
                Bind(alloc.task, alloc.job, names[alloc.node], alloc.gpus, alloc.gpu_milli)
            )
        bound = sum(1 for t in job.tasks if t.id in self.state.allocations)
        if bound >= job.min_available and job.id not in self.running:
            if self.quota is not None:
                self.quota.charge(job.queue, self.charge_of(job))
            self.running[job.id] = RunningJob(job, self.snapshot.now)
        self.running_epoch += 1

    def charge_of(self, job: Job, tasks: Sequence[Task] | None = None) -> Resources:
        """The quota charge of ``job``'s bound tasks (or of ``tasks``, bound ones), with the
        GPU models they landed on: gang and elastic members alike."""
        allocations = self.state.allocations
        model_of = self.state.node_models
        models: list[str] = []
        held: list[Task] = []
        for task in job.tasks if tasks is None else tasks:
            alloc = allocations.get(task.id)
            if alloc is None:
                continue
            models.append(model_of[alloc.node])
            held.append(task)
        return job_request(job, models, held)

    def _running_charges(self) -> list[tuple[QueueName, Resources]]:
        """Each running job's queue and charge; charges the memo holds for the same running
        record are reused, and the memo's table is renewed."""
        running = self.snapshot.running
        memo = self.snapshot.memo
        if memo is None:
            return [(r.job.queue, self.charge_of(r.job)) for r in running.values()]
        old = memo.charges
        fresh: dict[JobId, tuple[object, Resources]] = {}
        out = []
        for job_id, run in running.items():
            hit = old.get(job_id)
            charge = hit[1] if hit is not None and hit[0] is run else self.charge_of(run.job)
            fresh[job_id] = (run, charge)
            out.append((run.job.queue, charge))
        memo.charges = fresh
        return out

    def request(self, job: Job) -> Resources:
        """``job_request(job)`` (what the gang is charged before it lands), once per cycle."""
        return self._request_entry(job)[1]

    def _request_entry(self, job: Job) -> tuple[Job, Resources, tuple[object, ...] | None]:
        entry = self._requests.get(job.id)
        if entry is None:
            entry = self._kept_requests.get(job.id)
            if entry is None or entry[0] is not job:
                entry = (job, job_request(job), None)
            self._requests[job.id] = entry
        return entry

    def quota_refusal(self, job: Job) -> Status | None:
        """Why the queues keep ``job`` waiting right now, or ``None``."""
        quota = self.quota
        if quota is None:
            return None
        if job.queue not in quota.tree:
            return Status(
                Code.UNRESOLVABLE,
                (
                    f"queue {job.queue!r} does not exist; "
                    f"known: {', '.join(q.name for q in quota.tree)}",
                ),
            )
        _, req, key = self._request_entry(job)
        if key is None:
            key = (job.queue, quota.key(req), job.preemptible)
            self._requests[job.id] = (job, req, key)
        known = self._refusals.get(key)
        if known is not None and known[0] == quota.version:
            return known[1]
        refused = self._refusal(job, req, key)
        self._refusals[key] = (quota.version, refused)
        hold = self.quota_hold
        if (
            refused is None
            and hold is not None
            and hold.job != job.id
            and self.snapshot.now + self.runtime_estimate(job) > hold.until
        ):
            if hold.limit is None and not quota.within_guarantee(job.queue, req):
                return Status(
                    Code.UNSCHEDULABLE,
                    (
                        f"it would borrow quota held for {hold.job}, which needs "
                        f"{hold.short / 1000:g} more borrowable GPUs (expected by "
                        f"t={hold.until:.0f} s); a job may borrow meanwhile only if it ends by "
                        "then",
                    ),
                )
            if hold.limit is not None and hold.limit in quota.tree.path(job.queue):
                return Status(
                    Code.UNSCHEDULABLE,
                    (
                        f"queue {hold.limit!r}'s limit is held for {hold.job}, which has waited "
                        f"longest and needs {hold.short / 1000:g} GPUs more room (expected by "
                        f"t={hold.until:.0f} s); a job of this queue may start meanwhile only if "
                        "it ends by then",
                    ),
                )
        return refused

    def _refusal(self, job: Job, req: Resources, key: tuple[object, ...]) -> Status | None:
        """Why the queues refuse ``req`` of ``job`` at the current usage (no quota hold), or
        ``None``. Whether it could never be admitted depends on the tree and the request alone
        (:meth:`QuotaBook.never_fits`), so that answer is kept for the cycle under ``key``."""
        quota = self.quota
        assert quota is not None
        never = self._never.get(key)
        if never is None:
            never = self._never[key] = quota.never_fits(job.queue, req) or ""
        if never:
            return Status(Code.UNRESOLVABLE, (never,))
        problem = self._quota_problem(job.queue, req, lent=job.preemptible)
        return None if problem is None else Status(Code.UNSCHEDULABLE, (problem,))

    def _quota_problem(
        self, queue: QueueName, req: Resources, *, borrow: bool = True, lent: bool = True
    ) -> str | None:
        """Why ``req`` may not be charged to ``queue`` now (limit, or borrowing), or ``None``."""
        quota = self.quota
        assert quota is not None
        over = quota.over_limit(queue, req)
        if over is not None:
            return over
        if quota.within_guarantee(queue, req):
            return None
        if not borrow:
            return (
                f"{quota.describe(queue)}; the job was placed by eviction and must stay "
                "within its guarantee"
            )
        if not quota.may_borrow(queue, req, lent=lent):
            what = (
                "can be borrowed now"
                if lent
                else ("is promised to no queue (a job that cannot be preempted borrows only that)")
            )
            return (
                f"{quota.describe(queue)}; the job needs "
                f"{quota.beyond_guarantee(queue, req) / 1000:g} GPUs beyond it and only "
                f"{max(quota.borrowable(queue, lent=lent), 0) / 1000:g} {what}"
            )
        return None

    def runtime_estimate(self, job: Job) -> float:
        """The job's run time as the scheduler may know it: the user's estimate, else the
        mean of completed jobs of the same user and kind, else the default."""
        if job.runtime_estimate is not None:
            return job.runtime_estimate
        learned = self.snapshot.runtime_stats.get((job.user, job.kind.value))
        return learned if learned is not None else self.default_runtime

    def evict_members(
        self, job_id: JobId, tasks: Sequence[TaskId], for_job: JobId, reason: str
    ) -> None:
        """Release elastic members ``tasks`` of running job ``job_id``; the job keeps running
        with the rest (at least its ``min_available``)."""
        run = self.running[job_id]
        by_id = {t.id: t for t in run.job.tasks}
        if self.quota is not None:
            self.quota.refund(run.job.queue, self.charge_of(run.job, [by_id[t] for t in tasks]))
        for task_id in tasks:
            self.state.release(task_id)
        if self.release_rows is not None:
            self.release_rows.block.pop(job_id, None)
        self.shrunk.add(job_id)
        self._failed.clear()
        self.plan.evictions.append(Eviction(job_id, for_job, reason, tuple(tasks)))

    def evict(self, job_id: JobId, for_job: JobId, reason: str) -> None:
        """Release every task of running job ``job_id`` in the working state (whole gang)."""
        run = self.running.pop(job_id)
        self.running_epoch += 1
        self.end_of.pop(job_id, None)
        if self.quota is not None:
            self.quota.refund(run.job.queue, self.charge_of(run.job))
        for task in run.job.tasks:
            if task.id in self.state.allocations:
                self.state.release(task.id)
        self.evicted.add(job_id)
        self._failed.clear()  # resources grew: earlier failures in this cycle may now fit
        self.plan.evictions.append(Eviction(job_id, for_job, reason))

    # -- explaining ------------------------------------------------------------------------

    def diagnose(self, task: Task) -> Status:
        """Why no node can host ``task``: each filter's reasons, and whether it could ever fit."""
        reasons = [r for f in self.profile.filters if (r := f.explain(self.ctx, task, self.state))]
        if not self._could_ever_fit(task):
            empty = self.state.empty()
            never = [r for f in self.profile.filters if (r := f.explain(self.ctx, task, empty))]
            return Status(Code.UNRESOLVABLE, ("cannot fit on any node even when empty", *never))
        return Status(Code.UNSCHEDULABLE, tuple(reasons) or ("no feasible node",))

    def _gang_ever_fits(self, job: Job, need: int) -> bool:
        """Whether the ``need`` unplaced pods of the gang fit an empty cluster together (no
        reservations either); cached per filters and pod shapes."""
        original = self.state
        todo = [t for t in job.tasks if t.id not in original.allocations][:need]
        cache = original.layout_cache
        ckey = ("gang-ever-fits", self._filters_key, tuple(t.shape for t in todo))
        ever = cache.get(ckey)
        if ever is None:
            blocked, self.blocked_nodes = self.blocked_nodes, {}
            self.state = original.empty().copy()
            try:
                stmt = Statement(self.state)
                ever = all(self.place_task(t, stmt, explain=False).ok for t in todo)
                stmt.rollback()
            finally:
                self.state = original
                self.blocked_nodes = blocked
            cache[ckey] = ever
        return bool(ever)

    def _could_ever_fit(self, task: Task) -> bool:
        """Whether some node passes every filter when the cluster is empty (cached per shape)."""
        cache = self.state.layout_cache
        key = ("ever-fits", self._filters_key, task.shape)
        ever = cache.get(key)
        if ever is None:
            empty = self.state.empty()
            mask = np.ones(empty.size, dtype=bool)
            for f in self.profile.filters:
                mask &= f.filter(self.ctx, task, empty)
            ever = cache[key] = bool(mask.any())
        return bool(ever)

    def pending_jobs(self) -> Sequence[Job]:
        """Pending jobs in the profile's queue order."""
        return self.profile.queue_sort.order(self, self.snapshot.pending)
