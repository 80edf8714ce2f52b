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

The session is one object put together from parts, one responsibility each, so that every
method still reads the session's own fields directly (:mod:`.session_base`): this module places
one task; :mod:`.session_gang` places and commits a whole job (gang all or nothing, elastic
members); :mod:`.session_quota` charges jobs to their queues and says why the queues refuse one;
:mod:`.session_diagnosis` says why a task fits no node. What the cycle reads is a
:class:`~gpusched.framework.snapshot.Snapshot`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from gpusched.framework.extension import CycleContext
from gpusched.framework.plan import Eviction, Plan, QuotaHold
from gpusched.framework.profile import Profile, TieBreak
from gpusched.framework.quota import QuotaBook
from gpusched.framework.release_batch import ReleaseRows
from gpusched.framework.session_diagnosis import Diagnosis
from gpusched.framework.session_gang import GangPlacement
from gpusched.framework.session_quota import QuotaAdmission
from gpusched.framework.sharing import variants
from gpusched.framework.snapshot import RunningOverlay, Snapshot
from gpusched.framework.statement import Statement
from gpusched.framework.status import Cause, Code, Status
from gpusched.model import MILLI_PER_GPU, Job, JobId, Resources, Task, TaskId, TaskShape

__all__ = ["Session"]

_NO_FIT = Status(Code.UNSCHEDULABLE, ("no feasible node",), Cause.NODES)

_NUMA_FILTER = "numa-local-cpu"
#: Where a job's run-time estimate comes from (:meth:`Session.runtime_basis`).
RuntimeBasis = Literal["declared", "learned", "default"]
#: The memo table of pending jobs' requests and quota keys.
_REQUESTS = "requests"


class Session(GangPlacement, QuotaAdmission, Diagnosis):
    """Working state and plan of one cycle."""

    __slots__ = ()

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
        self._never: dict[tuple[object, ...], Status] = {}
        # Per job: (the job, its gang request, its quota-memo key); kept by the memo for the
        # next cycle (a job is immutable, so its entry holds while the job object is the same).
        self._requests: dict[JobId, tuple[Job, Resources, tuple[object, ...] | None]] = {}
        self._kept_requests: dict[JobId, tuple[Job, Resources, tuple[object, ...] | None]] = {}
        # Per gang of task shapes: its request and quota key (jobs the memo does not know).
        self._gang_requests: dict[
            tuple[object, ...], tuple[Resources, tuple[tuple[str, int], ...]]
        ] = {}
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
        self.default_runtime = snapshot.default_runtime
        # Bumped whenever the set of running jobs changes.
        self.running_epoch = 0
        # Running jobs by expected end, and how many of running.changes that reflects.
        self.ends_cache: tuple[int, list[tuple[float, JobId]]] | None = None
        # Expected end of each running job (fixed within a cycle: start and estimate are).
        self.end_of: dict[JobId, float] = {}
        # The same for optimistic ends (framework.timeline: asked by the domain wait only).
        self.optimistic_ends_cache: tuple[int, list[tuple[float, JobId]]] | None = None
        self.optimistic_end_of: dict[JobId, float] = {}
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
            self.release_rows = memo.release_rows
            self.release_rows.keep_running(snapshot.running)
        # Borrowable quota held for a job that waits only for borrowing (plan.QuotaHold), and
        # the jobs ahead of it in the order that set it (the hold does not bind them).
        self.quota_hold: QuotaHold | None = None
        self.quota_hold_ahead: frozenset[JobId] = frozenset()
        # Jobs that may start only within their queue's guarantee (Backfill's
        # guarantee_after_evictions; session_quota).
        self.unborrowing: frozenset[JobId] = frozenset()

    # -- placing ---------------------------------------------------------------------------

    def feasible(self, task: Task, *, skip: str | None = None) -> np.ndarray:
        """Boolean mask of nodes that pass every filter for ``task`` (``skip``: all but the
        filter of that name) and are not held for another job's reservation (a fresh array).

        A filter that excludes no node answers with the state's shared ``everywhere`` mask,
        which is skipped instead of and-ed in."""
        filters = self.profile.filters
        state, ctx = self.state, self.ctx
        everywhere = state.everywhere
        mask: np.ndarray | None = None
        fresh = False  # whether mask is this call's own array
        for i, f in enumerate(filters):
            if f.name == skip:
                continue
            kept = f.filter(ctx, task, state)
            if kept is everywhere:
                continue
            if mask is None:
                # The first filter's answer is the mask itself, as it always was.
                mask, fresh = kept, i == 0 and kept.flags.writeable
            else:
                mask, fresh = mask & kept, True
        if self.restrict is not None:
            mask = self.restrict.copy() if mask is None else mask & self.restrict
            fresh = True
        if mask is None:
            mask = np.ones(state.size, dtype=bool)
        elif not fresh:
            mask = mask.copy()
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
        """The best feasible node for ``task`` (callers ensure one exists).

        :meth:`node_scores` and :meth:`_argmax` over the feasible nodes only: each node's sum
        is the same operations on the same numbers, and the feasible nodes keep their order,
        so the first best (or the ties drawn from) are the same nodes.
        """
        nodes = feasible.nonzero()[0]
        return int(nodes[self._argmax(self._score_sum(task, feasible, nodes))])

    def _argmax(self, masked: np.ndarray) -> int:
        if self.profile.tie_break is TieBreak.FIRST:
            return int(masked.argmax())
        ties = (masked == masked.max()).nonzero()[0]
        return int(ties[self.ctx.rng.randrange(len(ties))])

    def node_scores(self, task: Task, feasible: np.ndarray) -> np.ndarray:
        """Weighted score sum on feasible nodes, ``-inf`` elsewhere.

        The sum is ``((0 + w_1 * s_1) + w_2 * s_2) + ...`` in profile order, accumulated in
        place (one buffer for the sum, one for the products): the same operations in the same
        order as a fresh array per step, so the same bits. The leading ``0 +`` is dropped, and
        so is a score that is zero on every node (the state's shared ``zero_scores``) and a
        weight of 1 on a gathered float64 score; each changes only the sign of a zero, which
        no comparison sees.
        """
        return np.where(feasible, self._score_sum(task, feasible, None), -np.inf)

    def _score_sum(self, task: Task, feasible: np.ndarray, nodes: np.ndarray | None) -> np.ndarray:
        """The weighted score sum of :meth:`node_scores` at ``nodes`` (``None``: every node)."""
        scores = self.profile.scores
        ctx, state = self.ctx, self.state
        size = state.size if nodes is None else len(nodes)
        if len(scores) == 1 and scores[0][1] == 1.0:
            only = scores[0][0].score(ctx, task, state, feasible)
            return only if nodes is None else only[nodes]
        zero = state.zero_scores
        total: np.ndarray | None = None
        product: np.ndarray | None = None
        for plugin, weight in scores:
            values = plugin.score(ctx, task, state, feasible)
            if values is zero:
                continue
            part = values if nodes is None else values[nodes]
            if total is None:
                if weight == 1.0 and nodes is not None and part.dtype == np.float64:
                    total = part  # this call's own gathered array; x * 1.0 is x
                else:
                    total = np.empty(size)
                    np.multiply(part, weight, out=total)
                continue
            if product is None:
                product = np.empty(size)
            np.multiply(part, weight, out=product)
            np.add(total, product, out=total)
        return np.zeros(size) if total is None else total

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
                Cause.OTHER,
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
        # One pass, no sort: the class is the number of distinct starts before ``end``
        # (what ``bisect_left`` on the sorted distinct starts gives).
        earlier: set[float] = set()
        owner = False
        me = job.id
        for start, held_by in self.blocked_nodes.values():
            if start < end:
                earlier.add(start)
            if held_by == me:
                owner = True
        return len(earlier), me if owner else None

    def runtime_estimate(self, job: Job) -> float:
        """The job's run time as the scheduler may know it: the user's estimate, else the
        mean of completed jobs of the same user and kind, else the default
        (:meth:`runtime_basis` says which)."""
        if job.runtime_estimate is not None:
            return job.runtime_estimate
        stats = self.snapshot.runtime_stats
        learned = stats.get((job.user, job.kind.value)) if stats else None
        return learned if learned is not None else self.default_runtime

    def runtime_basis(self, job: Job) -> RuntimeBasis:
        """Which source :meth:`runtime_estimate` takes the job's run time from, in its order
        (for explanations; the hot path asks only for the number)."""
        if job.runtime_estimate is not None:
            return "declared"
        stats = self.snapshot.runtime_stats
        return "learned" if stats and (job.user, job.kind.value) in stats else "default"

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
            self.release_rows.drop(job_id)
        self.shrunk.add(job_id)
        self._failed.clear()
        self.plan.evictions.append(Eviction(job_id, for_job, reason, tuple(tasks)))

    def evict(self, job_id: JobId, for_job: JobId, reason: str) -> None:
        """Release every task of running job ``job_id`` in the working state (whole gang)."""
        run = self.running.pop(job_id)
        self.running_epoch += 1
        self.end_of.pop(job_id, None)
        self.optimistic_end_of.pop(job_id, None)
        if self.quota is not None:
            self.quota.refund(run.job.queue, self.charge_of(run.job))
        for task in run.job.tasks:
            if task.id in self.state.allocations:
                self.state.release(task.id)
        self.evicted.add(job_id)
        self._failed.clear()  # resources grew: earlier failures in this cycle may now fit
        self.plan.evictions.append(Eviction(job_id, for_job, reason))

    def pending_jobs(self) -> Sequence[Job]:
        """Pending jobs in the profile's queue order."""
        return self.profile.queue_sort.order(self, self.snapshot.pending)
