"""When could a blocked job start? Reservations and start-time estimates from run-time estimates.

**Expected ends.** A running job is expected to end at ``start + est``. Once it overruns
that, the estimate was wrong and says little more; run times are heavy-tailed (a job that has
already run long is likely to run long again), so it is expected to run as long again as it
has run so far, and at least a tenth of its estimate more::

    end = start + est                           if now < start + est
    end = now + max(0.1 * est, now - start)     otherwise

(The earlier rule, ``now + 0.1 * est``, kept a job 60 h into a 1 h estimate "about to end"
every cycle: reservations were placed on its node and slipped by minutes each cycle. With
this rule the main job over 8 seeds: average wait 17.3 -> 14.2 min, p95 22.9 -> 8.8 min,
guarantee violations 1 -> 0; docs/benchmarks.md §4.)

*Optimistic ends*, for one question only -- whether a gang that prefers a network domain
should wait for one (:mod:`~gpusched.framework.domain_wait`): an overrun job is expected to end
a tenth of its estimate later (``now + 0.1 * est``, the earlier rule). A domain has room once
*any* of the several jobs in it ends, which comes much sooner than each job's own expected
end; the per-job rule above made every domain look hours away, and gangs split. Measured on
the topology benchmark (docs/topology.md): gangs in one rack 73.4 / 66.3 / 71.6% (seeds 7 /
11 / 23) with the per-job rule, 95.7 / 98.8 / 100.0% with this one, at longer waits.

**Reservation (exact, for the head-of-line job).** On scratch copies of
the working state, release them in order of expected end and place the job with the profile's
own filters and scores; the earliest release after which it fits (found by binary search) is
the reservation's start, and the nodes it would use are held (EASY backfill).

**Reservations laid out in time** (a backfill with more than one reservation). The second
and later reservations of a cycle are made against the ones before them: reservation ``r``
(start ``s_r``, nodes ``N_r``, the job's run-time estimate ``est_r``) holds ``N_r`` until
``e_r = s_r + est_r``, so a later search tries, besides the running jobs' ends, each
``e_r``, and in the trial at time ``t`` the nodes of every earlier ``r`` with ``e_r > t``
are closed::

    points = sorted({end_i : running job i} U {e_r : earlier reservation r})
    trial(t): release the running jobs with end_i <= t; close N_r for every r with e_r > t

A later reservation never starts on an earlier one's nodes before that one is expected to
end (it does not slot in ahead of it, which keeps the trials monotone in ``t``: each later
point releases more and closes less). Before, a later search closed the earlier nodes for
good whenever its job would still run at ``s_r`` and left them open otherwise, so it either
ignored nodes that would come free or booked them twice.

**Estimate (fluid, for every pending job).** In queue order, each job needs ``d_j`` GPU-milli
(CPU-only jobs count CPU). With ``free`` the idle capacity now and a heap of future releases
(running jobs, then the jobs estimated ahead of this one)::

    while free < d_j: t, amount = pop earliest release; free += amount
    start_j = max(now, t);  free -= d_j;  push release (start_j + est_j, d_j)

This ignores packing (a job may need a specific node shape), so it is an estimate, labelled as
such wherever it is shown; the head-of-line job's reservation is exact under the estimates.

**Quota hold (for the head-of-line job blocked by borrowing, or, once it has waited long, by a
queue limit).** A job whose queue is within
its limits but that needs ``b`` GPU-milli beyond its guarantees while only ``B < b`` can be
borrowed (:mod:`~gpusched.framework.quota`) is not helped by holding nodes: every smaller job
that borrows takes from the same pool as capacity frees, and a large job could wait forever.
So the first such job in queue order holds the pool, EASY-style, in GPU-milli instead of
nodes: with the running jobs in order of expected end ``e_1 <= e_2 <= ...`` holding ``g_i``,
its quota start is the fluid estimate::

    T_q = min { e_k : SUM_{i <= k} g_i >= b - B }

and until it starts, another job may *borrow* (go beyond its own queue's guarantee) only if
it is expected to end by ``T_q`` (``now + estimate <= T_q``). Jobs within their guarantee are
never held back: the hold only keeps others from draining the pool the head job waits for.
A job a queue limit ``L_a`` holds back is admitted once the queue drains (:func:`limit_start`,
``T_l``); a *limit hold* for it (given only to jobs waiting long, see
:class:`~gpusched.actions.allocate.Backfill`) lets other jobs charged under queue ``a`` start
only if they end by ``T_l``, so the queue's small jobs cannot keep refilling the room.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpusched.framework.domains import patience_s
from gpusched.framework.plan import QuotaHold, Reservation
from gpusched.framework.release_batch import ReleaseBatch, ReleasePrefix, running_releases
from gpusched.framework.snapshot import RunningJob
from gpusched.framework.statement import Statement
from gpusched.model import GPU, Job, JobId, NodeName, QueueName, Resources

if TYPE_CHECKING:
    from gpusched.framework.session import Session

__all__ = [
    "Laid",
    "estimate_starts",
    "expected_ends",
    "fits_after",
    "limit_start",
    "quota_hold",
    "reserve",
]

_OVERRUN = 0.1


def quota_hold(session: Session, job: Job, *, limits: bool = False) -> QuotaHold | None:
    """A hold for ``job`` if only borrowing keeps it waiting (within its queues' limits, more
    beyond its guarantees than can be borrowed now), else ``None``; ``None`` too when no
    running job's end would make up the shortfall. ``limits``: a job a queue limit keeps
    waiting gets a limit hold until :func:`limit_start` (module docstring)."""
    quota = session.quota
    if quota is None or job.queue not in quota.tree:
        return None
    req = session.request(job)
    limiting = quota.limiting_queue(job.queue, req)
    if limiting is not None:
        if not limits:
            return None
        start = limit_start(session, job)
        if not math.isfinite(start):
            return None
        limit = quota.tree[limiting].limit
        assert limit is not None
        short = max(quota.usage[limiting][GPU] + req[GPU] - limit[GPU], 0) if GPU in limit else 0
        return QuotaHold(job.id, start, short, limiting)
    if quota.within_guarantee(job.queue, req):
        return None
    short = quota.beyond_guarantee(job.queue, req) - max(
        quota.borrowable(job.queue, lent=job.preemptible), 0
    )
    if short <= 0:
        return None
    freed = 0
    for end, job_id in expected_ends(session):
        freed += session.running[job_id].job.gpu_milli
        if freed >= short:
            return QuotaHold(job.id, end, short)
    return None


@dataclass(frozen=True, slots=True)
class Laid:
    """A reservation made earlier in the cycle, as later reservations see it: ``job`` holds
    ``nodes`` (node indices) until ``end``, its reservation's start plus its run-time estimate
    (module docstring, *reservations laid out in time*)."""

    job: JobId
    end: float
    nodes: tuple[int, ...]


#: Sorts after every job id (for bisecting ``(end, job)`` pairs by end alone).
_LAST_ID = JobId("\U0010ffff")


def expected_ends(session: Session) -> list[tuple[float, JobId]]:
    """Running jobs by expected end time (earliest first), as ``(end, job)`` pairs.

    Kept on the session with the number of starts and evictions it reflects
    (:attr:`RunningOverlay.changes <gpusched.framework.snapshot.RunningOverlay>`): a later
    call drops the pairs of the jobs changed since, works out the ends of those still running
    and merges them in. The pairs are ordered by ``(end, job)``, a total order, so the list is
    the one a fresh computation gives."""
    return _kept_ends(session, optimistic=False)


def optimistic_ends(session: Session) -> list[tuple[float, JobId]]:
    """:func:`expected_ends` with overrun jobs at their optimistic ends (module docstring),
    ``now + 0.1 * est``; kept on the session the same way, apart from the expected ends."""
    return _kept_ends(session, optimistic=True)


def _kept_ends(session: Session, *, optimistic: bool) -> list[tuple[float, JobId]]:
    running = session.running
    changes = running.changes
    cached = session.optimistic_ends_cache if optimistic else session.ends_cache
    ends: list[tuple[float, JobId]] | None = None
    if cached is not None:
        seen, kept = cached
        if seen == len(changes):
            return kept
        changed = set(changes[seen:])
        if 4 * len(changed) < len(kept):
            ends = [pair for pair in kept if pair[1] not in changed]
            fresh = ((j, running[j]) for j in changed if j in running)
            ends.extend(sorted(_ends(session, fresh, optimistic=optimistic)))
            ends.sort()  # two sorted runs: one linear merge
    if ends is None:
        ends = _ends(session, running.as_dict().items(), optimistic=optimistic)
        ends.sort()
    if optimistic:
        session.optimistic_ends_cache = (len(changes), ends)
    else:
        session.ends_cache = (len(changes), ends)
    return ends


def _ends(
    session: Session, runs: Iterable[tuple[JobId, RunningJob]], *, optimistic: bool = False
) -> list[tuple[float, JobId]]:
    """``(end, job)`` of each of ``runs`` (module docstring, *expected ends*, or *optimistic
    ends*), unordered; each job's end is kept in :attr:`Session.end_of` (or
    :attr:`Session.optimistic_end_of`) for the rest of the cycle."""
    now = session.snapshot.now
    known = session.optimistic_end_of if optimistic else session.end_of
    ends = []
    for job_id, run in runs:
        end = known.get(job_id)
        if end is None:
            est = session.runtime_estimate(run.job)
            end = run.start + est
            if end <= now:
                overrun = _OVERRUN * est
                end = now + (overrun if optimistic else max(overrun, now - run.start))
            known[job_id] = end
        ends.append((end, job_id))
    return ends


def reserve(
    session: Session,
    job: Job,
    *,
    one_domain: bool = False,
    until: float = math.inf,
    exact: bool = True,
    optimistic: bool = False,
    ahead: Sequence[Laid] = (),
) -> Reservation | None:
    """Earliest start of ``job`` as running jobs end, with the nodes it would use.

    A gang asking for a network domain is confined as :meth:`Session.place_job` confines it
    (``one_domain``: to one domain of its level even when it only prefers one). A preferred
    gang's reservation is the one-domain start when that is at most its patience later than
    the start anywhere (:func:`~gpusched.framework.domains.patience_s`). ``until``: consider
    only releases expected by then (``None`` if the job does not fit by then); ``exact=False``:
    one trial with all of them released, the start reported as the last of them (a yes/no
    answer to "does it fit by ``until``?", with no nodes). ``optimistic``: running jobs end
    at their optimistic ends (module docstring). ``ahead``: reservations made before this one
    (module docstring, *reservations laid out in time*).
    """
    found = _search(session, job, one_domain, until, exact, optimistic=optimistic, ahead=ahead)
    if one_domain or found is None:
        return found
    patience = patience_s(session.state, job, session.runtime_estimate(job))
    if patience <= 0:
        return found
    one = _search(
        session,
        job,
        True,
        min(until, found.start + patience),
        exact,
        optimistic=optimistic,
        ahead=ahead,
    )
    return found if one is None else one


def _search(
    session: Session,
    job: Job,
    one_domain: bool,
    until: float,
    exact: bool = True,
    *,
    optimistic: bool = False,
    ahead: Sequence[Laid] = (),
) -> Reservation | None:
    """:func:`reserve` without the preferred-gang comparison.

    The running jobs' allocations are laid out as flat arrays in order of expected end
    (:class:`~gpusched.framework.release_batch.ReleaseBatch`), as far as the search reaches
    (:class:`~gpusched.framework.release_batch.ReleasePrefix`); the state after the first
    ``p`` releases is then one vector sum over a prefix (:meth:`ClusterState.free_batch`),
    with no allocation-map work. Galloping search over the release points: try
    ``k = 1, 2, 4, 8, ...`` (``O(log R)`` trials), then bisect inside the last doubling.
    Fitting is (near enough) monotone in the points: each later one releases more, and an
    earlier reservation's nodes (``ahead``) once closed only open. A gang confined to one
    network domain is tested by the domain's room alone
    (:mod:`~gpusched.framework.domains`: room is exact for identical tasks) and placed once,
    at the point found, for its nodes.
    """
    ends = optimistic_ends(session) if optimistic else expected_ends(session)
    if math.isfinite(until):
        ends = ends[: bisect.bisect_right(ends, (until, _LAST_ID))]
    points = _Points(ends, ahead, until)
    if not points.count:
        return None
    prefix = ReleasePrefix(session, ends)
    confining = job.topology is not None and (one_domain or job.topology.required)

    def fits(k: int, *, place: bool = False) -> tuple[NodeName, ...] | None:
        at, releases = points.at(k)
        batch, upto = prefix.upto(releases)
        kept = session.blocked_nodes
        if ahead:
            session.blocked_nodes = _closed_at(at, ahead)
        try:
            return _trial(session, job, batch, upto, one_domain, quick=confining and not place)
        finally:
            session.blocked_nodes = kept

    count = points.count
    if not exact:
        return None if fits(count) is None else Reservation(job.id, points.at(count)[0], ())
    done, step, before_done = 0, 1, 0
    found: tuple[NodeName, ...] | None = None
    while True:
        before_done, done = done, min(step, count)
        found = fits(done)
        if found is not None or done == count:
            break
        step *= 2
    if found is None:
        return None
    # The first fitting point is in (before_done, done]: bisect.
    lo, hi, best = before_done + 1, done, found
    while lo < hi:
        mid = (lo + hi) // 2
        got = fits(mid)
        if got is None:
            lo = mid + 1
        else:
            hi, best = mid, got
    if confining:
        placed = fits(lo, place=True)
        if placed is None:
            return None
        best = placed
    return Reservation(job.id, points.at(lo)[0], best)


class _Points:
    """The release points a reservation search tries, in time order, numbered from 1: point
    ``k`` is ``(t, p)``, a time and how many of ``ends`` have been released by then. One per
    running job's end, and with ``ahead``, one at each earlier reservation's end (by
    ``until``) too, after the running jobs' ends at or before it. Worked out per point asked
    for, so a search that tries ``O(log R)`` points does not build all ``R``."""

    __slots__ = ("count", "ends", "phantoms")

    def __init__(
        self, ends: Sequence[tuple[float, JobId]], ahead: Sequence[Laid], until: float
    ) -> None:
        self.ends = ends
        # (time, running ends at or before it), by time; its point number is p + j + 1.
        self.phantoms = sorted(
            (laid.end, bisect.bisect_right(ends, (laid.end, _LAST_ID)))
            for laid in ahead
            if laid.end <= until
        )
        self.count = len(ends) + len(self.phantoms)

    def at(self, k: int) -> tuple[float, int]:
        """Point ``k`` (``1 <= k <= count``)."""
        before = 0  # phantom points ahead of point k
        for j, (end, releases) in enumerate(self.phantoms):
            number = releases + j + 1
            if number == k:
                return end, releases
            if number > k:
                break
            before = j + 1
        releases = k - before
        return self.ends[releases - 1][0], releases


def _closed_at(at: float, ahead: Sequence[Laid]) -> dict[int, tuple[float, JobId]]:
    """The nodes of the reservations ``ahead`` not yet over at time ``at``, as
    :attr:`Session.blocked_nodes` entries closed to every other job."""
    closed: dict[int, tuple[float, JobId]] = {}
    for laid in ahead:
        if laid.end > at:
            for node in laid.nodes:
                closed[node] = (-math.inf, laid.job)
    return closed


def fits_after(session: Session, job: Job, releasing: Sequence[JobId]) -> set[int] | None:
    """The nodes ``job`` would use now if the running jobs ``releasing`` ended at once
    (node indices), or ``None`` if it would not fit even then: one trial placement, as the
    reservation search makes (:func:`reserve`)."""
    if not releasing:
        return None
    batch, offsets = running_releases(session, [(0.0, j) for j in releasing])
    nodes = _trial(session, job, batch, offsets[-1], one_domain=False, quick=False)
    index = session.state.index
    return None if nodes is None else {index[n] for n in nodes}


def _trial(
    session: Session,
    job: Job,
    batch: ReleaseBatch,
    upto: int,
    one_domain: bool,
    *,
    quick: bool,
) -> tuple[NodeName, ...] | None:
    """Place ``job``'s gang on a scratch copy of the working state with the first ``upto``
    entries of ``batch`` released; the nodes it would use, or ``None`` if it does not fit.
    ``quick``: a gang confined to a network domain answers from the domain's room alone
    (``()`` when it has room) without placing."""
    original = session.state
    tasks = job.tasks[: job.min_available]
    scratch = original.copy(allocations=False)
    scratch.free_batch(batch, upto)
    if int(scratch.gpu_idle.sum()) < job.gpu_milli:
        return None
    session.state = scratch
    try:
        # Network domain of a gang that asks for one (None: no request, no restriction).
        if session.confine(job, tasks, one_domain=one_domain, wait=False) is not None:
            return None
        if quick and session.restrict is not None:
            return ()
        stmt = Statement(scratch)
        ok = all(session.place_task(t, stmt, explain=False).ok for t in tasks)
        nodes = tuple(dict.fromkeys(scratch.names[a.node] for a in stmt.allocations))
        stmt.rollback()
    finally:
        session.state = original
        session.restrict = None
    return nodes if ok else None


def estimate_starts(session: Session, jobs: Iterable[Job]) -> dict[JobId, float]:
    """Fluid start-time estimates for ``jobs`` in the given order (see module docstring).

    The heap of releases is kept as two sources: the running jobs' releases, already in
    order (read in turn), and a heap of the estimated jobs' releases; the earlier of the two
    heads is taken each time, which is what one heap of both would pop (equal entries are
    interchangeable)."""
    now = session.snapshot.now
    state = session.state
    runs = session.running.as_dict()
    releases = [
        (end, (j := runs[job_id].job).gpu_milli, j.cpu_milli)
        for end, job_id in expected_ends(session)
    ]
    first, count = 0, len(releases)
    later: list[tuple[float, int, int]] = []
    free_gpu = int(state.gpu_idle.sum())
    free_cpu = int(state.cpu_free.sum())
    out: dict[JobId, float] = {}
    t = now
    pop, push, estimate = heapq.heappop, heapq.heappush, session.runtime_estimate
    for job in jobs:
        need_gpu, need_cpu = job.gpu_milli, job.cpu_milli
        while free_gpu < need_gpu or free_cpu < need_cpu:
            if later and (first == count or later[0] < releases[first]):
                t, g, c = pop(later)
            elif first < count:
                t, g, c = releases[first]
                first += 1
            else:
                break
            free_gpu += g
            free_cpu += c
        start = max(now, t)
        out[job.id] = start
        free_gpu -= need_gpu
        free_cpu -= need_cpu
        push(later, (start + estimate(job), need_gpu, need_cpu))
    return out


def limit_start(
    session: Session,
    job: Job,
    drains: dict[QueueName, list[tuple[float, Resources]]] | None = None,
) -> float:
    """When ``job``'s queues would admit it under their limits, as running jobs end.

    With ``a`` the first queue on the job's path whose limit ``L_a`` the request ``r`` breaks,
    release the running jobs charged to ``a``'s subtree in order of expected end until
    ``U_a + r <= L_a``; the end of the last one released is the answer (``now`` when no
    limit binds; ``inf`` if even an empty queue could not admit it). ``drains`` caches each
    queue's usage after each release, for many jobs in one cycle.
    """
    quota = session.quota
    now = session.snapshot.now
    if quota is None:
        return now
    req = session.request(job)
    limiting = quota.limiting_queue(job.queue, req)
    if limiting is None:
        return now
    limit = quota.tree[limiting].limit
    assert limit is not None
    drains = {} if drains is None else drains
    steps = drains.get(limiting)
    if steps is None:
        steps = []
        usage = quota.usage[limiting]
        for end, job_id in expected_ends(session):
            run = session.running[job_id].job
            if limiting in quota.tree.path(run.queue):
                usage = usage - session.charge_of(run)
                steps.append((end, usage))
        drains[limiting] = steps
    for end, usage in steps:
        if all(usage[x] + req[x] <= cap for x, cap in limit.items()):
            return max(now, end)
    return math.inf
