"""Placement actions: place pending jobs in queue order, each gang all or nothing.

* ``allocate`` -- greedy: every job that fits now is placed; a job that does not fit is
  skipped (so small jobs may overtake a blocked big one indefinitely).
* ``allocate-fifo`` -- strict FIFO, all or nothing: stop at the first job that does not fit
  (the classic baseline: no starvation of big jobs, but idle GPUs behind the head of line).
* ``backfill`` -- EASY backfill with reservations: like ``allocate``, but the first blocked job
  (by queue order) gets a :class:`~gpusched.framework.plan.Reservation` -- a start time and the
  nodes it will use, computed from run-time estimates -- and later jobs may use those nodes only
  if they are expected to finish before the reservation starts. The first job kept waiting only
  by borrowing gets a *quota hold* (:class:`~gpusched.framework.plan.QuotaHold`):
  every job after it in the order (in this action and in the cycle's later ones: preempt,
  reclaim) may borrow only if it is expected to end before the holder can start; the jobs
  ahead of it in the order (higher priority, or a queue further below its fair share) are not
  bound by it. The holder also reserves the nodes it will need (one of the
  ``reservations``), from the later of the hold's end and their own expected start, so it
  keeps its place when the quota comes free instead of queueing for nodes behind another
  job's reservation. With ``reservations: k`` the first ``k`` blocked jobs get one each, in
  order, each laid out after the ones before it (their nodes closed to it until they are
  expected to end; :mod:`gpusched.framework.timeline`, *reservations laid out in time*).
  Every job left pending gets an estimated start time (:mod:`gpusched.framework.timeline`).

  *Sticky reservations:* a reservation stays with its job from cycle to cycle (the driver
  passes last cycle's holders in ``Snapshot.reserved``): the holder is considered ahead of
  the jobs of its priority or lower, so it stays the first blocked job until it starts,
  unless a job of higher priority is blocked ahead of it. Handing the reservation to whichever
  job the fair-share order puts first each cycle (the order moves as usage moves) let the held
  nodes refill under every new holder; on the 5,000-job gang run the reservation changed hands
  367 times, 87 with sticky reservations (docs/benchmarks.md §4).

  *Guests on held nodes:* a job admitted to nodes held for another job's reservation (it is
  expected to end before the reservation starts) is placed there only when no other node can
  take it (:meth:`~gpusched.framework.session.Session.place_task`), so held nodes drain, and it
  gets a *deadline*, the reservation's start (``Plan.deadlines``; the driver keeps it on the
  running record). *Overdue jobs:* when the first blocked job would fit now if the jobs that
  overran their deadline were gone, those of them on the nodes it would use are evicted and it
  starts -- the end of a time limit in a batch scheduler, applied only to jobs that were let
  onto held nodes on the promise of ending first. Only preemptible jobs of the blocked job's
  priority or lower, never evicted before (a job is ended for overrunning at most once; after
  that its deadline is advisory), never one the blocked job was itself evicted for (no
  preemption loops, ``Snapshot.evicted_by``), and only with ``evict_overdue`` (default on).
  The quota hold makes the same promise: a job that borrows (or is charged under a held
  limit) while the hold binds it is admitted only because it is expected to end by the hold's
  ``until``, which becomes its deadline. When the holder is met again, still refused by its
  queues, the overdue jobs are taken (most recently started first, so the least work is
  lost) until the queues would admit it; if it then also fits the nodes they are evicted and
  it starts, else nothing is evicted. Without this, borrowers with no run-time estimate (the
  learned mean is short for a heavy-tailed job) overran the hold and it slipped every cycle.

  *Aging* (``starve_after_s``; off in the action, 24 h in the built-in ``gpusched`` profile
  with four reservations): the queue order (fair
  share) can keep a big job of a busy queue from ever being the first blocked job, so it never
  holds a reservation. A job still pending ``starve_after_s`` after it was submitted (an
  evicted job counts from its first submission too) is then considered first, ahead of the
  queue order, longest queued first (by :attr:`~gpusched.model.Job.queue_time`, so an
  evicted job among them comes after those that were waiting when it was evicted):
  the first of them that is blocked gets the reservation (or the quota hold when only borrowing
  keeps it waiting), so once it holds them its wait is bounded by the time until they end --
  when run-time estimates hold. With ``limit_holds`` (off by default) an aged job held back by
  its queue's *limit* also holds that limit EASY-style (the queue's other jobs start only if
  they end before it can); measured, that lengthened the queue's other waits more than it
  shortened the aged job's. Measured at 24 h without limit holds and with one reservation on
  the 5,000-job gang runs (seeds 1-4, 7): the largest jobs' longest wait 177.1 -> 132.4 h on
  average, average wait 78.5 -> 83.1 min, and on the main job's 8 seeds every wait a little
  longer. With four reservations laid out in time (seeds 1-12) the largest jobs' wait is
  129.9 h against 167.6 h with one reservation and no aging, and shorter than without
  reservations on every seed, at about the same average wait; not so at an offered load of
  0.6 (longer on 3 of 5 seeds; docs/benchmarks.md §4). That is the built-in ``gpusched``.

  *Disruption budget kept* (opt-in, ``guarantee_after_evictions``; off by default): a job
  evicted that many times (the reclaim and preempt actions' ``max_evictions``, 3, is the
  natural value) starts again only within its queue's guarantee, unless its request could
  never fit there (then it borrows as before). Borrowed quota is what reclaim takes back, and
  reclaim is the one action that may evict a job past its budget (its last resort), so a job
  that has spent its budget then runs to completion instead of being placed on borrowed GPUs
  and reclaimed again (a 64-GPU gang was evicted five times on one load-0.6 run). Measured
  (fifteenth session, docs/benchmarks.md §4): shorter average and p95 waits, the largest jobs'
  longest wait mixed; off by default.

  *Starvation guard* (opt-in, ``guard_after_s``; off by default): the first blocked job, once
  it has waited longer than ``guard_after_s`` since it was queued (``Job.queue_time``: its
  submission, or its last eviction), evicts the work on its reservation's nodes that started
  after that (preemptible, its priority or
  lower, never evicted before, of its own queue or one that borrows at least what it holds)
  when that lets it start now (:mod:`gpusched.actions.starvation`). With aging at the same
  threshold it cut the largest jobs' longest wait on the 5,000-job gang runs by a third and
  lengthened the p95 wait; on the main job it lengthened waits (docs/benchmarks.md §4), hence
  off. On top of the limit guard (twenty-second session) it took the gang runs' largest 1%
  from 95.9 to 91.6 h on average, with a spread either way per seed, and their p95 wait from
  92.1 to 114.5 min: still off.

  *Limit guard* (``limit_guard_after_s``; off unless set, 24 h in the built-in
  ``gpusched``): the first job in the
  order (oldest first when aging is on) of each queue limit that the limit has held back
  longer than ``limit_guard_after_s`` since it was queued evicts, when that lets it start
  now, work charged under that limit that started after that (preemptible, its
  priority or lower, never evicted before), most recent first and no more than the limit and
  the nodes need
  (:mod:`gpusched.actions.limit_guard`): a reservation holds nodes, not quota, and a
  queue's own later, smaller jobs otherwise keep refilling the limit room a big job waits
  for. Measured with evicted jobs queueing from their eviction (twentieth session,
  docs/benchmarks.md §4): on the 5,000-job gang runs (seeds 1-20) the largest jobs'
  longest wait 122.6 -> 95.9 h on average, the p95 wait 83.7 -> 92.1 min, about a third
  more preemptions; on the main job (seeds 1-32) 18.7 -> 16.5 h.
* ``allocate-pods`` -- what the stock kube-scheduler does with a gang: each pod on its own,
  no transaction, so a gang may sit partly placed holding GPUs while the rest waits.

Jobs whose status is ``Unresolvable`` could not fit even on an empty cluster.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gpusched.actions.limit_guard import evict_for_limit
from gpusched.actions.make_room import admitting_without, evict_for, place_now
from gpusched.actions.starvation import evict_for_starving
from gpusched.framework import Cause, Code, Reservation, RunningJob, Session, Statement, Status
from gpusched.framework.timeline import (
    Laid,
    estimate_starts,
    fits_after,
    limit_start,
    quota_hold,
    reserve,
)
from gpusched.model import Job, JobId, QueueName, Resources

__all__ = ["Allocate", "AllocateFifo", "AllocatePods", "Backfill"]


class Allocate:
    """Place what fits, in order, without disturbing anything running."""

    name = "allocate"

    def execute(self, session: Session) -> None:
        for job in session.pending_jobs():
            if job.id not in session.running:
                session.place_job(job)


class AllocateFifo:
    """Strict first come, first served, all or nothing."""

    name = "allocate-fifo"

    def execute(self, session: Session) -> None:
        blocked = False
        for job in session.pending_jobs():
            if job.id in session.running:
                continue
            if blocked:
                session.plan.pending[job.id] = Status.waiting("behind the head-of-line job (FIFO)")
                continue
            if not session.place_job(job).ok:
                blocked = True


class Backfill:
    """EASY backfill: place what fits without delaying the reserved head-of-line job."""

    name = "backfill"

    def __init__(
        self,
        reservations: int = 1,
        *,
        starve_after_s: float | None = None,
        evict_overdue: bool = True,
        guard_after_s: float | None = None,
        limit_holds: bool = False,
        guarantee_after_evictions: int | None = None,
        limit_guard_after_s: float | None = None,
    ) -> None:
        if reservations < 0:
            raise ValueError(f"reservations must be >= 0, got {reservations}")
        if starve_after_s is not None and starve_after_s < 0:
            raise ValueError(f"starve_after_s must be >= 0 seconds, got {starve_after_s}")
        self.reservations = reservations
        self.starve_after_s = starve_after_s
        self.evict_overdue = evict_overdue
        if guard_after_s is not None and guard_after_s < 0:
            raise ValueError(f"guard_after_s must be >= 0 seconds, got {guard_after_s}")
        self.guard_after_s = guard_after_s
        self.limit_holds = limit_holds
        if guarantee_after_evictions is not None and guarantee_after_evictions < 1:
            raise ValueError(
                f"guarantee_after_evictions must be >= 1, got {guarantee_after_evictions}"
            )
        self.guarantee_after_evictions = guarantee_after_evictions
        if limit_guard_after_s is not None and limit_guard_after_s < 0:
            raise ValueError(f"limit_guard_after_s must be >= 0 seconds, got {limit_guard_after_s}")
        self.limit_guard_after_s = limit_guard_after_s

    def _order(self, session: Session) -> list[Job]:
        """The jobs to consider, in order: the queue order, last cycle's reservation holders
        moved up (*sticky reservations*), then the jobs pending over ``starve_after_s`` since
        their first submission ahead of all, longest queued first (*aging*)."""
        order = [j for j in session.pending_jobs() if j.id not in session.running]
        now, aging = session.snapshot.now, self.starve_after_s
        starving = sorted(
            (j for j in order if aging is not None and now - j.submit_time > aging),
            key=lambda j: j.queue_time,
        )
        if self.reservations and session.snapshot.reserved:
            order = _holders_first(order, session.snapshot.reserved)
        if starving:
            first = {j.id for j in starving}
            order = [*starving, *(j for j in order if j.id not in first)]
        return order

    def execute(self, session: Session) -> None:
        order = self._order(session)
        now = session.snapshot.now
        aging = self.starve_after_s
        session.unborrowing = _unborrowing(session, order, self.guarantee_after_evictions)
        overdue = _overdue(session) if self.evict_overdue and self.reservations else []
        laid: list[Laid] = []  # this cycle's reservations, for the next ones to lay out after
        guarded: set[QueueName] = set()  # the limit guard's tries this cycle
        limit_guard = self.limit_guard_after_s
        for rank, job in enumerate(order):
            if job.id in session.evicted:
                continue
            status, refused = session.place_or_refuse(job)
            if status.ok or status.code is Code.UNRESOLVABLE:
                continue
            if refused is not None:
                if (
                    limit_guard is not None
                    and refused.cause is Cause.QUEUE_LIMIT
                    and now - job.queue_time > limit_guard
                    and evict_for_limit(session, job, guarded)
                ):
                    continue
                if self.reservations and session.quota_hold is None:
                    old = aging is not None and now - job.submit_time > aging
                    limits = old and self.limit_holds
                    hold = session.quota_hold = quota_hold(session, job, limits=limits)
                    if hold is not None:
                        session.plan.quota_holds[hold.job] = hold
                        session.quota_hold_ahead = frozenset(j.id for j in order[:rank])
                holding = session.quota_hold
                if holding is None or holding.job != job.id:
                    continue
                if overdue and _evict_overdue_borrowers(session, job, overdue):
                    continue
                if len(session.plan.reservations) < self.reservations:
                    # The holder holds nodes too, from when its queues can admit it.
                    res = reserve(session, job, ahead=laid)
                    _hold_nodes(session, job, res, laid, holding.until)
                continue
            if len(session.plan.reservations) < self.reservations:
                if overdue and _evict_overdue(session, job, overdue):
                    continue
                res = reserve(session, job, ahead=laid)
                guard = self.guard_after_s
                if (
                    res is not None
                    and guard is not None
                    and now - job.queue_time > guard
                    and evict_for_starving(session, job, res)
                ):
                    continue
                _hold_nodes(session, job, res, laid)
        waiting = [
            j
            for j in order
            if j.id in session.plan.pending
            and session.plan.pending[j.id].code is not Code.UNRESOLVABLE
        ]
        starts = estimate_starts(session, waiting)
        if session.quota is not None:
            # A job a queue limit holds back starts no earlier than that queue drains enough.
            drains: dict[QueueName, list[tuple[float, Resources]]] = {}
            for job in waiting:
                starts[job.id] = max(starts[job.id], limit_start(session, job, drains))
        for hold in session.plan.quota_holds.values():  # not before the pool can cover it
            if hold.job in starts:
                starts[hold.job] = max(starts[hold.job], hold.until)
        for job_id, res in session.plan.reservations.items():
            starts[job_id] = res.start
        session.plan.estimated_start.update({j: t for j, t in starts.items() if math.isfinite(t)})


def _hold_nodes(
    session: Session,
    job: Job,
    res: Reservation | None,
    laid: list[Laid],
    not_before: float = 0.0,
) -> None:
    """Record ``res``, ``job``'s reservation (if any), starting no earlier than
    ``not_before``, and hold its nodes; add it to ``laid`` (held until its start plus the
    job's run-time estimate) for the reservations after it."""
    if res is None:
        return
    if res.start < not_before:
        res = Reservation(res.job, not_before, res.nodes)
    session.plan.reservations[res.job] = res
    index = session.state.index
    nodes = tuple(index[name] for name in res.nodes)
    for node in nodes:
        held = session.blocked_nodes.get(node)
        if held is None or res.start < held[0]:
            session.blocked_nodes[node] = (res.start, res.job)
    laid.append(Laid(res.job, res.start + session.runtime_estimate(job), nodes))


def _unborrowing(session: Session, order: Sequence[Job], after: int | None) -> frozenset[JobId]:
    """The jobs of ``order`` evicted at least ``after`` times that could start within their
    queue's guarantee (module docstring, *disruption budget kept*; none for ``None``)."""
    quota, evictions = session.quota, session.snapshot.evictions
    if after is None or quota is None or not evictions:
        return frozenset()
    return frozenset(
        j.id
        for j in order
        if evictions.get(j.id, 0) >= after
        and j.queue in quota.tree
        and quota.within_guarantee_when_idle(j.queue, session.request(j))
    )


def _holders_first(order: list[Job], reserved: Mapping[JobId, float]) -> list[Job]:
    """``order`` with each job that held a reservation last cycle moved ahead of the jobs of
    its priority or lower (earliest holder first): it keeps its reservation unless a job of
    higher priority is blocked ahead of it (module docstring, *sticky reservations*)."""
    holders = sorted((j for j in order if j.id in reserved), key=lambda j: reserved[j.id])
    if not holders:
        return order
    rest = [j for j in order if j.id not in reserved]
    for holder in reversed(holders):
        at = next((i for i, j in enumerate(rest) if j.priority <= holder.priority), len(rest))
        rest.insert(at, holder)
    return rest


def _overdue(session: Session) -> list[RunningJob]:
    """Running jobs that may be evicted for overrunning (module docstring, *overdue jobs*):
    past their deadline, preemptible, never evicted before."""
    now = session.snapshot.now
    return [
        run
        for run in session.running.values()
        if run.deadline is not None
        and run.deadline <= now
        and run.evictions == 0
        and run.job.preemptible
    ]


def _evictable_for(session: Session, job: Job, overdue: list[RunningJob]) -> list[RunningJob]:
    """The ``overdue`` jobs ``job`` may evict: still running, of priority at most its own, and
    not a job it was evicted for (that would be a preemption loop)."""
    evictors = session.snapshot.evicted_by.get(job.id, frozenset())
    return [
        r
        for r in overdue
        if r.job.priority <= job.priority
        and r.job.id in session.running
        and r.job.id not in evictors
    ]


def _evict_overdue(session: Session, job: Job, overdue: list[RunningJob]) -> bool:
    """Evict the ``overdue`` jobs of priority at most ``job``'s on the nodes ``job`` would use
    once they are all gone, if it then fits, and place it. Evicted ones leave ``overdue``."""
    mine = _evictable_for(session, job, overdue)
    if not mine:
        return False
    nodes = fits_after(session, job, [run.job.id for run in mine])
    if nodes is None:
        return False
    now = session.snapshot.now

    def why(run: RunningJob) -> str:
        return (
            f"overdue: admitted to nodes held for a reservation until {run.deadline:.0f} s, "
            f"still running at {now:.0f} s"
        )

    for run in evict_for(session, job, mine, why, nodes):
        overdue.remove(run)
    return place_now(session, job)


def _evict_overdue_borrowers(session: Session, job: Job, overdue: list[RunningJob]) -> bool:
    """For the quota hold's holder ``job``: evict ``overdue`` jobs of priority at most its own,
    most recently started first, until the queues would admit it, if it then also fits the
    nodes, and place it (module docstring, *overdue jobs*). Nothing is evicted otherwise."""
    mine = sorted(_evictable_for(session, job, overdue), key=lambda r: -r.start)
    chosen = admitting_without(session, job, mine)
    if chosen is None:
        return False
    if fits_after(session, job, [run.job.id for run in chosen]) is None:
        return False
    now = session.snapshot.now

    def why(run: RunningJob) -> str:
        return (
            f"overdue: admitted on the promise of ending by {run.deadline:.0f} s, still "
            f"running at {now:.0f} s; {job.id} holds the quota it uses"
        )

    for run in evict_for(session, job, chosen, why):
        overdue.remove(run)
    return place_now(session, job)


class AllocatePods:
    """Pod by pod, no gang transaction (the kube-scheduler baseline)."""

    name = "allocate-pods"

    def execute(self, session: Session) -> None:
        for job in session.pending_jobs():
            if job.id in session.running:
                continue
            placed_any = False
            for task in job.tasks:
                if task.id in session.state.allocations:
                    continue
                stmt = Statement(session.state)
                status = session.place_single(task, stmt)
                if status.ok:
                    session.commit_tasks(job, stmt)
                    placed_any = True
                else:
                    session.plan.pending[job.id] = status
                    break
            if not placed_any and job.id not in session.plan.pending:
                session.plan.pending[job.id] = Status.waiting("no task placed")
