"""Placing a whole job: its gang all or nothing, then its elastic members, then the commit.

A job runs once ``min_available`` of its tasks are bound (tasks bound before count). Placement
of the gang is one :class:`~gpusched.framework.statement.Statement`: each task is placed by
:meth:`~gpusched.framework.session.Session.place_task` against the state as the earlier tasks
left it, and the statement is committed only if every task found a node; otherwise it is rolled
back and the job stays pending with a status that says how many tasks could be placed::

    placed  iff  its queues admit it (:mod:`.session_quota`)
            and  a gang that asks for a network domain is confined to the nodes :mod:`.domains`
                 chooses (a required domain must have room; a preferred gang may wait for one
                 domain instead of splitting, :mod:`.domain_wait`)
            and  each of its unplaced gang tasks finds a node in turn

Filters see only a task's shape, so a failure is remembered for the rest of the cycle under
(gang size, topology, task shapes), plus what else decides the outcome: a gang that prefers a
domain adds its expected end (its patience depends on it), any other job, while nodes are held
for reservations, which of them it may use. A gang that could not fit even an empty cluster is
``UNRESOLVABLE``. Elastic members beyond ``min_available`` are then placed one by one, as long
as the queue's limit and guarantee-or-borrowing rules admit the job with each. Committing turns
the statement's allocations into binds on the plan, charges the queue and records the job as
running (with the deadline of any reservation whose held nodes it was admitted to).
:class:`GangPlacement` is a mixin of :class:`~gpusched.framework.session.Session`
(:mod:`.session_base`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from gpusched.errors import ConfigError
from gpusched.framework.allocation import Allocation
from gpusched.framework.domain_wait import wait_for_domain
from gpusched.framework.domains import choose_domain, task_fit
from gpusched.framework.plan import Bind
from gpusched.framework.quota import job_request
from gpusched.framework.session_base import SessionBase
from gpusched.framework.sharing import variants
from gpusched.framework.snapshot import RunningJob
from gpusched.framework.state import ClusterState
from gpusched.framework.statement import Statement
from gpusched.framework.status import Cause, Code, Status
from gpusched.model import Job, JobId, Resources, Task

if TYPE_CHECKING:
    from gpusched.framework.session import Session

__all__ = ["GangPlacement"]


class GangPlacement(SessionBase):
    """Placing a job's gang all or nothing and committing it (module docstring)."""

    __slots__ = ()

    def place_job(self, job: Job, *, check_quota: bool = True) -> Status:
        """Place ``job.min_available`` tasks of ``job`` all or nothing; binds go to the plan.

        Tasks already bound count towards the gang. Filters see only a task's shape, so two
        jobs with the same shapes and gang size succeed or fail alike; a failed request is
        remembered for the rest of the cycle. With queues configured, the job must also pass
        its queue's limit and either fit its guarantee or be allowed to borrow.
        """
        return self.place_or_refuse(job, check_quota=check_quota)[0]

    def place_or_refuse(
        self, job: Job, *, check_quota: bool = True
    ) -> tuple[Status, Status | None]:
        """:meth:`place_job`, and the queues' refusal when that is why the job waits (what
        :meth:`quota_refusal` answers right after, since a job not placed changes no usage;
        ``None`` when the queues admit it or are not asked): callers that need both ask once.
        """
        if check_quota and self.quota is not None:
            refused = self.quota_refusal(job)
            if refused is not None:
                self.plan.pending[job.id] = refused
                return refused, refused
        allocations = self.state.allocations
        todo = [t for t in job.tasks if t.id not in allocations]
        need = job.min_available - (len(job.tasks) - len(todo))
        size = max(need, 0)
        gang_tasks = todo[:size]
        self.begin_job(job)
        # (gang size, topology, *shapes): built without a generator for the usual lone task.
        key: tuple[object, ...] = (
            (size, job.topology, gang_tasks[0].shape)
            if len(gang_tasks) == 1
            else (size, job.topology, *[t.shape for t in gang_tasks])
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
            return known, None
        stmt = Statement(self.state)
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
                    status.cause,
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
                    Cause.NODES,
                )
            self.plan.pending[job.id] = status
            self._failed[key] = status
            return status, None
        # Elastic members beyond the gang: best effort, one by one, each within the queue's
        # limit and guarantee-or-borrowing rules like the gang itself.
        gang = {t.id for t in gang_tasks}
        members = [t for t in job.tasks if t.id in gang or t.id in self.state.allocations]
        for task in todo[size:]:
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
        return Status.success(), None

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
            return Status(Code.UNRESOLVABLE, (str(exc),), Cause.OTHER)
        fit = self._gang_fit(self.state, tasks[0], blocked=True)
        required = req.required or one_domain
        choice = choose_domain(self.state, level, fit, len(tasks), required=required)
        if wait and not required and len(choice.domains) != 1:
            # self is a Session (this class is one of its parts), which wait_for_domain takes.
            waiting = wait_for_domain(
                cast("Session", self), job, self.state.network.levels[level].name
            )
            if waiting is not None:
                return waiting
        if choice.problem:
            empty = self.state.empty()
            ever = choose_domain(
                empty, level, self._gang_fit(empty, tasks[0]), len(tasks), required=True
            )
            if ever.problem:
                return Status(
                    Code.UNRESOLVABLE, (f"{ever.problem} even on an empty cluster",), Cause.NODES
                )
            return Status(Code.UNSCHEDULABLE, (choice.problem,), Cause.NODES)
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

    def _commit(self, job: Job, stmt: Statement) -> None:
        names = self.state.names
        allocs = stmt.commit()
        for alloc in allocs:
            self.plan.binds.append(
                Bind(alloc.task, alloc.job, names[alloc.node], alloc.gpus, alloc.gpu_milli)
            )
        if self.quota is not None:
            charge = self.charge_of(job)
            found = self._held_quota_deadline(job, charge)
            self.quota.charge(job.queue, charge)
        else:
            found = None
        deadline = self._deadline(job, allocs, found)
        self.running[job.id] = RunningJob(job, self.snapshot.now, deadline=deadline)
        self.running_epoch += 1

    def _held_quota_deadline(self, job: Job, charge: Resources) -> tuple[float, JobId] | None:
        """``(until, holder)`` if ``job``, about to be charged ``charge``, is admitted only on
        the promise of ending before the quota hold's holder can start (it borrows, or is
        charged under the held limit; see :meth:`quota_refusal`), else ``None``."""
        hold, quota = self.quota_hold, self.quota
        if hold is None or quota is None or hold.job == job.id:
            return None
        if job.id in self.quota_hold_ahead or job.queue not in quota.tree:
            return None
        if hold.limit is None:
            bound = not quota.within_guarantee(job.queue, charge)
        else:
            bound = hold.limit in quota.tree.path(job.queue)
        return (hold.until, hold.job) if bound else None

    def _deadline(
        self, job: Job, allocs: Sequence[Allocation], found: tuple[float, JobId] | None
    ) -> float | None:
        """The earliest of ``found`` (a quota hold's, :meth:`_held_quota_deadline`) and the
        starts of the reservations whose held nodes ``job`` was admitted to (it was expected
        to end by then; :attr:`Plan.deadlines`), or ``None``."""
        held = self.blocked_nodes
        for alloc in allocs if held else ():
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
