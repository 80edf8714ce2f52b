"""One scheduling cycle's working context, shared by the actions of that cycle.

A :class:`Session` owns a *working copy* of the snapshot's cluster state, so the snapshot itself
is never changed: :func:`gpusched.scheduler.schedule` stays a pure function. Actions place tasks
through :meth:`Session.place_task` inside a :class:`~gpusched.framework.statement.Statement` and
record outcomes on :attr:`Session.plan`.

Placement of one task (the formula every profile shares)::

    feasible(n) = AND_f filter_f(task, n)
    score(n)    = SUM_s weight_s * score_s(task, n)            for feasible n
    node        = argmax_n score(n)   (ties: first in cluster order, or uniform at random)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpusched.framework.extension import CycleContext
from gpusched.framework.plan import Bind, Plan
from gpusched.framework.profile import Profile, TieBreak
from gpusched.framework.state import ClusterState
from gpusched.framework.statement import Statement
from gpusched.framework.status import Code, Status
from gpusched.model import MILLI_PER_GPU, Job, Task

__all__ = ["Session", "Snapshot"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a cycle may read: the cluster, the pending jobs, the time and a seed.

    Attributes:
        state: node capacity, free resources and running allocations.
        pending: jobs waiting to be placed, in arrival order.
        now: the cycle's time in seconds.
        seed: seeds the cycle's random source (drivers derive it per cycle).
    """

    state: ClusterState
    pending: tuple[Job, ...]
    now: float = 0.0
    seed: int = 0


class Session:
    """Working state and plan of one cycle."""

    __slots__ = ("_failed", "ctx", "plan", "profile", "snapshot", "state")

    def __init__(self, snapshot: Snapshot, profile: Profile, ctx: CycleContext) -> None:
        self.snapshot = snapshot
        self.profile = profile
        self.ctx = ctx
        self.state = snapshot.state.copy()
        self.plan = Plan()
        # Within a cycle free resources only shrink, so a request that failed once fails again:
        # remember the failure per (task shapes, gang size) and skip the retry.
        self._failed: dict[tuple[object, ...], Status] = {}

    # -- placing ---------------------------------------------------------------------------

    def feasible(self, task: Task) -> np.ndarray:
        """Boolean mask of nodes that pass every filter for ``task``."""
        filters = self.profile.filters
        mask = filters[0].filter(self.ctx, task, self.state)
        for f in filters[1:]:
            mask = mask & f.filter(self.ctx, task, self.state)
        return mask

    def select_node(self, task: Task, feasible: np.ndarray) -> int:
        """The best feasible node for ``task`` (callers ensure one exists)."""
        scores = self.profile.scores
        if not scores:
            total = np.zeros(self.state.size)
        elif len(scores) == 1 and scores[0][1] == 1.0:
            total = scores[0][0].score(self.ctx, task, self.state, feasible)
        else:
            total = np.zeros(self.state.size)
            for plugin, weight in scores:
                total = total + weight * plugin.score(self.ctx, task, self.state, feasible)
        masked = np.where(feasible, total, -np.inf)
        if self.profile.tie_break is TieBreak.FIRST:
            return int(np.argmax(masked))
        ties = np.flatnonzero(masked == masked.max())
        return int(ties[self.ctx.rng.randrange(len(ties))])

    def place_task(self, task: Task, stmt: Statement) -> Status:
        """Try to place ``task`` inside ``stmt``; a status with reasons when it does not fit."""
        if self.profile.gpu_as_integer and task.shape.is_sharing:
            task = Task(task.id, task.job, replace(task.shape, gpu_milli=MILLI_PER_GPU))
        feasible = self.feasible(task)
        if not feasible.any():
            return self.diagnose(task)
        node = self.select_node(task, feasible)
        gpus = self.profile.gpu_picker.pick(self.ctx, task, self.state, node)
        stmt.allocate(task, node, gpus)
        return Status.success()

    def place_job(self, job: Job) -> Status:
        """Place ``job.min_available`` tasks of ``job`` all or nothing; binds go to the plan.

        Filters see only a task's shape, so two jobs with the same shapes and gang size succeed
        or fail alike; a failed request is remembered for the rest of the cycle.
        """
        key = (job.min_available, *(t.shape for t in job.tasks[: job.min_available]))
        known = self._failed.get(key)
        if known is not None:
            self.plan.pending[job.id] = known
            return known
        stmt = Statement(self.state)
        for task in job.tasks[: job.min_available]:
            status = self.place_task(task, stmt)
            if not status.ok:
                placed = len(stmt.allocations)
                stmt.rollback()
                if job.min_available > 1:
                    status = Status(
                        status.code,
                        (
                            f"gang needs {job.min_available} tasks placed together; "
                            f"{placed} could be placed",
                            *status.reasons,
                        ),
                    )
                self.plan.pending[job.id] = status
                self._failed[key] = status
                return status
        names = self.state.names
        for alloc in stmt.commit():
            self.plan.binds.append(
                Bind(alloc.task, alloc.job, names[alloc.node], alloc.gpus, alloc.gpu_milli)
            )
        return Status.success()

    # -- explaining ------------------------------------------------------------------------

    def diagnose(self, task: Task) -> Status:
        """Why no node can host ``task``: each filter's reasons, and whether it could ever fit."""
        reasons = [r for f in self.profile.filters if (r := f.explain(self.ctx, task, self.state))]
        if not self._could_ever_fit(task):
            empty = self.state.empty()
            never = [r for f in self.profile.filters if (r := f.explain(self.ctx, task, empty))]
            return Status(Code.UNRESOLVABLE, ("cannot fit on any node even when empty", *never))
        return Status(Code.UNSCHEDULABLE, tuple(reasons) or ("no feasible node",))

    def _could_ever_fit(self, task: Task) -> bool:
        """Whether some node passes every filter when the cluster is empty (cached per shape)."""
        cache = self.state.layout_cache
        key = ("ever-fits", repr(self.profile.spec.filters), task.shape)
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
        return self.profile.queue_sort.order(self.ctx, self.snapshot.pending)
