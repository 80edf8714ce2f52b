"""A session's side of the queues: what a job is charged, and why the queues keep it waiting.

A job is charged the resources of its bound tasks, by the GPU models they landed on
(:func:`~gpusched.framework.quota.job_request`); a gang not yet placed is charged its request.
Before a job is placed, :meth:`QuotaAdmission.quota_refusal` asks the cycle's
:class:`~gpusched.framework.quota.QuotaBook`::

    refused  iff  its queue does not exist                               (unresolvable)
              or  it could not be admitted even with every queue idle    (unresolvable)
              or  charging it now would pass a limit on its queue's path
              or  it does not fit its queue's guarantee and may not borrow what it lacks
              or  it would borrow, or use a limit, held for a job ahead of it in the order
                  (:class:`~gpusched.framework.plan.QuotaHold`) and is not expected to end
                  by then

The queues' answers are kept for the cycle per quota key (queue, quota-relevant request,
preemptible) while the book's usage version holds; the hold is checked for each job, since it
depends on the job's expected end. Requests and keys per job also go to the driver's memo; a
job the memo does not know takes them from those of its gang's task shapes, kept for the cycle.
:class:`QuotaAdmission` is a mixin of :class:`~gpusched.framework.session.Session`
(:mod:`.session_base`).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpusched.framework.quota import QuotaBook, add_request, job_request
from gpusched.framework.session_base import SessionBase
from gpusched.framework.status import Cause, Code, Status
from gpusched.model import Job, JobId, QueueName, Resources, Task, TaskShape

__all__ = ["QuotaAdmission"]


class QuotaAdmission(SessionBase):
    """Charging jobs to their queues and refusing what the queues do not admit (module
    docstring)."""

    __slots__ = ()

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
            return self._running_totals()
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

    def _running_totals(self) -> list[tuple[QueueName, Resources]]:
        """Each queue's running jobs' charges summed (no memo keeps them per job), as
        :class:`~gpusched.framework.quota.QuotaBook` sums them: the same amounts, with the
        names in the same order."""
        allocations = self.state.allocations
        model_of = self.state.node_models
        totals: dict[QueueName, dict[str, int]] = {}
        for run in self.snapshot.running.values():
            job = run.job
            total = totals.get(job.queue)
            if total is None:
                total = totals[job.queue] = {}
            models: list[str] = []
            held: list[Task] = []
            for task in job.tasks:
                alloc = allocations.get(task.id)
                if alloc is not None:
                    models.append(model_of[alloc.node])
                    held.append(task)
            add_request(total, job, models, held)
        return [(queue, Resources(total)) for queue, total in totals.items()]

    def request(self, job: Job) -> Resources:
        """``job_request(job)`` (what the gang is charged before it lands), once per cycle."""
        return self._request_entry(job)[1]

    def _request_entry(self, job: Job) -> tuple[Job, Resources, tuple[object, ...] | None]:
        entry = self._requests.get(job.id)
        if entry is None:
            entry = self._kept_requests.get(job.id)
            if entry is None or entry[0] is not job:
                req, charged = self._gang_request(job)
                key = None if self.quota is None else (job.queue, charged, job.preemptible)
                entry = (job, req, key)
            self._requests[job.id] = entry
        return entry

    def _gang_request(self, job: Job) -> tuple[Resources, tuple[tuple[str, int], ...]]:
        """``job_request(job)`` and its quota key (:meth:`QuotaBook.key`), kept per gang of
        task shapes for the cycle (the request depends on nothing else; jobs of a queue are
        mostly a few shapes). Shapes are told apart by what a request reads of them
        (:func:`_charged`), cheaper to compare than whole shapes."""
        gang = job.tasks[: job.min_available]
        first = gang[0].shape if gang else None
        key: tuple[object, ...] = (
            (len(gang), None if first is None else _charged(first))
            if len(gang) < 2 or all(t.shape is first for t in gang)
            else (None, *(_charged(t.shape) for t in gang))
        )
        known = self._gang_requests.get(key)
        if known is None:
            req = job_request(job)
            quota = self.quota
            known = self._gang_requests[key] = (req, () if quota is None else quota.key(req))
        return known

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
                Cause.OTHER,
            )
        _, req, key = self._request_entry(job)
        if key is None:
            key = (job.queue, self._gang_request(job)[1], job.preemptible)
            self._requests[job.id] = (job, req, key)
        # A kept answer stands while the usage has not changed (same version), or, when the
        # queues admitted the key, while nothing has been charged beyond the ceilings that
        # keep it admitted (QuotaBook.admit_until: the answer is monotone in usage).
        if self.unborrowing and job.id in self.unborrowing:
            # Its own answer (few jobs), not kept under the key that borrowers share.
            refused = self._refusal(job, req, key, borrow=False)
        else:
            known = self._refusals.get(key)
            if known is not None and (
                known[0] == quota.version or (known[1] is None and quota.still_admits(key))
            ):
                refused = known[1]
            else:
                refused = self._refusal(job, req, key)
                self._refusals[key] = (quota.version, refused)
                if refused is None:
                    quota.admit_until(key, job.queue, req, lent=job.preemptible)
        # The hold depends on the job (its rank, its expected end), so it is checked for every
        # job, after the kept answer for its key.
        hold = self.quota_hold
        if (
            refused is None
            and hold is not None
            and hold.job != job.id
            and job.id not in self.quota_hold_ahead
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
                    Cause.QUOTA_HELD,
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
                    Cause.QUOTA_HELD,
                )
        return refused

    def _refusal(
        self, job: Job, req: Resources, key: tuple[object, ...], *, borrow: bool = True
    ) -> Status | None:
        """Why the queues refuse ``req`` of ``job`` at the current usage (no quota hold), or
        ``None``; ``borrow=False``: it must fit its guarantees (:attr:`unborrowing`). Whether
        it could never be admitted depends on the tree and the request alone
        (:meth:`QuotaBook.never_fits`), so that answer is kept for the cycle under ``key``."""
        quota = self.quota
        assert quota is not None
        never = self._never.get(key)
        if never is None:
            never = self._never[key] = _never_status(quota, job.queue, req)
        if not never.ok:
            return never
        return self._quota_problem(
            job.queue, req, borrow=borrow, lent=job.preemptible, why=_UNBORROWING
        )

    def _quota_problem(
        self,
        queue: QueueName,
        req: Resources,
        *,
        borrow: bool = True,
        lent: bool = True,
        why: str = "the job was placed by eviction and must stay within its guarantee",
    ) -> Status | None:
        """Why ``req`` may not be charged to ``queue`` now (limit, or borrowing), or ``None``;
        ``borrow=False``: beyond its guarantee is refused, ``why``."""
        quota = self.quota
        assert quota is not None
        over = quota.over_limit(queue, req)
        if over is not None:
            return Status(Code.UNSCHEDULABLE, (over,), Cause.QUEUE_LIMIT)
        if quota.within_guarantee(queue, req):
            return None
        if not borrow:
            return _borrowing(f"{quota.describe(queue)}; {why}")
        if not quota.may_borrow(queue, req, lent=lent):
            what = (
                "can be borrowed now"
                if lent
                else ("is promised to no queue (a job that cannot be preempted borrows only that)")
            )
            return _borrowing(
                f"{quota.describe(queue)}; the job needs "
                f"{quota.beyond_guarantee(queue, req) / 1000:g} GPUs beyond it and only "
                f"{max(quota.borrowable(queue, lent=lent), 0) / 1000:g} {what}"
            )
        return None


_UNBORROWING = (
    "the job was evicted as often as its disruption budget allows and starts again only within "
    "its guarantee (borrowed quota may be reclaimed, and reclaim is what may evict it once more)"
)


def _never_status(quota: QuotaBook, queue: QueueName, req: Resources) -> Status:
    """``Unresolvable`` when ``req`` could never be admitted to ``queue``, else success."""
    limit = quota.never_within_limits(queue, req)
    if limit is not None:
        return Status(Code.UNRESOLVABLE, (limit,), Cause.QUEUE_LIMIT)
    why = quota.never_borrowable(queue, req)
    if why is not None:
        return Status(Code.UNRESOLVABLE, (why,), Cause.BORROWING)
    return Status.success()


def _borrowing(reason: str) -> Status:
    return Status(Code.UNSCHEDULABLE, (reason,), Cause.BORROWING)


def _charged(shape: TaskShape) -> tuple[object, ...]:
    """What :func:`~gpusched.framework.quota.job_request` reads of a task's shape."""
    s = shape
    return (
        s.cpu_milli,
        s.memory_mib,
        s.num_gpu,
        s.gpu_milli,
        s.mig_profile,
        s.mig_count,
        s.gpu_models,
    )
