"""The evicting actions' common cycle (``reclaim`` and ``preempt``, :mod:`.preempt`): which
pending jobs try, what victims exist, and how a chosen set is evicted and the job placed.

For each unschedulable pending job in queue order: skip it if an identical request found no
victims since the last eviction, or if the cycle's evictions freed room for it as it is (then
it is placed with none); otherwise search (:func:`~gpusched.actions.victim_search.search_victims`),
evict the set and place the job on the freed capacity, nominated for those nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from gpusched.actions.victim_fit import Mask, MostFree, fits, share_needed
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_room import Rooms
from gpusched.actions.victim_search import search_victims
from gpusched.framework import Allocation, Code, RunningJob, Session
from gpusched.framework.sharing import variants
from gpusched.model import (
    GPU,
    Job,
    JobId,
    TaskId,
    gpu_model_resource,
)

__all__ = [
    "Evicting",
    "borrowers_mask",
    "held_of",
    "kept_mask",
    "may_fit_now",
    "owed",
    "place_as_is",
    "victims_of",
]


def victims_of(
    session: Session, run: RunningJob, allocations: Mapping[TaskId, Allocation] | None = None
) -> list[Victim]:
    """Each elastic member ``run`` holds beyond its gang (last bound first), then the whole
    job. ``allocations``: the state's, as a plain mapping (faster to read than the layered
    map, for a caller asking for many jobs)."""
    get = (session.state.allocations if allocations is None else allocations).get
    job = run.job
    bound = [(t, a) for t in job.tasks if (a := get(t.id)) is not None]
    extra = len(bound) - job.min_available
    out = [
        Victim(run, (task,), False, task.shape.total_gpu_milli, frozenset((alloc.node,)))
        for task, alloc in reversed(bound[len(bound) - extra :] if extra > 0 else [])
    ]
    if len(bound) == 1:  # (most jobs: one pod)
        task, alloc = bound[0]
        whole = Victim(run, (task,), True, task.shape.total_gpu_milli, frozenset((alloc.node,)))
    else:
        whole = Victim(
            run,
            tuple([t for t, _ in bound]),
            True,
            sum([t.shape.total_gpu_milli for t, _ in bound]),
            frozenset([a.node for _, a in bound]),
        )
    out.append(whole)
    return out


#: The memo table of each running record's victims (:class:`~gpusched.framework.memo.CycleMemo`).
_MEMO_TABLE = "victims"


class Evicting:
    name = "abstract"
    reason = ""

    def __init__(
        self,
        min_runtime_s: float = 300.0,
        max_evictions: int = 3,
        max_attempts: int | None = None,
    ) -> None:
        self.min_runtime_s = min_runtime_s
        self.max_evictions = max_evictions
        self.max_attempts = max_attempts
        # Nodes held for a reservation this cycle, while an action that ignores them runs.
        self._held: dict[int, tuple[float, JobId]] = {}
        # What may_fit_now and the search ask of the state, kept for one run.
        self._most_free = MostFree()

    def wants(self, session: Session, job: Job) -> bool:
        raise NotImplementedError

    def eligible(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        """Which victims of ``index`` ``job`` may take (before :meth:`still_eligible`);
        read-only (it may be kept per index, :func:`kept_mask`)."""
        raise NotImplementedError

    #: Whether nodes held for a reservation are open to this action's preemptors.
    ignores_reservations = False

    def execute(self, session: Session) -> None:
        try:
            if not self.ignores_reservations:
                self._execute(session)
                return
            held, session.blocked_nodes = session.blocked_nodes, {}
            self._held = held
            try:
                self._execute(session)
            finally:
                session.blocked_nodes = held
                self._held = {}
        finally:
            self._most_free = MostFree()  # (it holds the session's state: not past the run)

    def _execute(self, session: Session) -> None:
        pool: list[RunningJob] | None = None
        lowest = 0
        if not self.ignores_reservations or self.uses_lowest_priority:
            pool = self._pool(session)
            if not pool and not self.ignores_reservations:
                return  # (a job owed quota may still fit on nodes held for a reservation)
            lowest = min((r.job.priority for r in pool), default=0)
        # Otherwise the pool waits for the first search: until then this action only places
        # jobs that are not running (nothing is evicted), which leaves the pool as it is.
        # Requests that found no victims, until something is evicted: an identical request
        # (shapes, priority, queue, expected end) would find none either. What each node would
        # have free without a class's eligible victims is kept and updated (.victim_room).
        failed: set[tuple[object, ...]] = set()
        attempts = 0
        index: VictimIndex | None = None  # every victim of the pool, cheapest first
        rooms: Rooms | None = None
        for job in session.pending_jobs():
            if self.max_attempts is not None and attempts >= self.max_attempts:
                break
            status = session.plan.pending.get(job.id)
            if status is None or status.code is not Code.UNSCHEDULABLE:
                continue
            if not job.preempts or job.id in session.running:
                continue
            if not self.cheap_check(session, job, lowest):
                continue
            key = (
                job.priority,
                job.queue,
                # Nodes held for a reservation admit a job by its expected end.
                *session.reservation_class(job),
                *(t.shape for t in job.tasks[: job.min_available]),
            )
            evictors = session.snapshot.evicted_by.get(job.id)
            if evictors:  # they are no victims of this job's: its requests are its own
                key = (*key, job.id)
            if key in failed or not self.wants(session, job):
                continue
            if self._placed_as_is(session, job):
                continue  # room freed by this cycle's evictions: it fits as it is now
            if index is None or rooms is None:
                if pool is None:
                    pool = self._pool(session)
                # (one flat copy of the allocations serves both passes over every victim)
                allocations = session.state.allocations.as_dict()
                victims = self._victims(session, pool, allocations)
                index = VictimIndex(session.state, victims, allocations=allocations)
                rooms = Rooms(index)
            attempts += 1
            evicted = self._make_room(session, job, index, rooms)
            if evicted is None:
                failed.add(key)
                continue
            if evicted:  # (empty: placed with no eviction)
                failed.clear()
                index.remove(evicted)

    def _placed_as_is(self, session: Session, job: Job) -> bool:
        """Place ``job`` with no eviction if this cycle's evictions freed room for it, under the
        reservations backfill honours (an action that ignores them restores them here)."""
        if not session.plan.evictions or not may_fit_now(session, job, self._most_free):
            return False
        if not self.ignores_reservations:
            return session.place_job(job).ok
        opened, session.blocked_nodes = session.blocked_nodes, self._held
        try:
            return session.place_job(job).ok
        finally:
            session.blocked_nodes = opened

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        """A quick necessary condition for ``job`` to have any victim (``lowest_priority``:
        of the victim pool, when :attr:`uses_lowest_priority`; 0 otherwise)."""
        return True

    #: Whether :meth:`cheap_check` reads the lowest priority in the pool (which is then built
    #: up front even by an action that ignores reservations).
    uses_lowest_priority = False

    # What the current preemptor is owed (GPUs, or GPUs of its one model) and its queue; set
    # by :meth:`_borrowing` for :meth:`_within_borrowing`.
    _resource = GPU
    _queue = ""

    def _borrowing(self, session: Session, job: Job, index: VictimIndex) -> tuple[bool, ...]:
        """Per queue of ``index.queue_names``: whether it is another queue than ``job``'s that
        borrows what ``job`` is owed: GPUs, or, when it asks for one GPU model, GPUs of that
        model (guarantees are per model too)."""
        quota = session.quota
        assert quota is not None
        res = self._resource = owed(session, job)
        self._queue = job.queue
        return tuple(
            q != job.queue and q in quota.tree and quota.borrowed(q, res) > 0
            for q in index.queue_names
        )

    def _within_borrowing(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        """Take a borrower only while its queue keeps borrowing at least what the victim holds
        of the resource owed (:meth:`_borrowing`), so no queue is pushed below its own
        guarantee; a victim holding none of it is no help."""
        quota = session.quota
        assert quota is not None
        res = self._resource
        q = victim.job.queue
        held = held_of(session, victim, res)
        if res != GPU and not held:
            return False
        already = sum(
            held_of(session, v, res)
            for v in taken
            if v.job.queue == q and not (victim.whole and v.job.id == victim.job.id)
        )
        left = quota.borrowed(q, res) - already
        return left > 0 if self._overshooting else left >= held

    # Whether a borrower may be taken while its queue borrows anything at all (Reclaim's
    # fallback: its last victim may take it below its guarantee), not only what the victim holds.
    _overshooting = False

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        """Whether ``victim`` may still be taken once ``taken`` are evicted."""
        return True

    def _pool(self, session: Session) -> list[RunningJob]:
        """The running jobs that may be victims: preemptible, running before this cycle for
        at least ``min_runtime_s``, and (unless :attr:`_pool_past_budget`) evicted fewer than
        ``max_evictions`` times before."""
        snap = session.snapshot
        running, evictions, now = snap.running, snap.evictions, snap.now
        min_runtime, budget = self.min_runtime_s, self.max_evictions
        past_budget = self._pool_past_budget
        return [
            r
            for r in session.running.values()
            if r.job.preemptible
            and r.job.id in running
            and now - r.start >= min_runtime
            and (past_budget or evictions.get(r.job.id, 0) < budget)
        ]

    #: Whether jobs at their disruption budget join the victim pool (``reclaim``: they are
    #: masked out of its eligible victims until its last-resort pass).
    _pool_past_budget = False

    @staticmethod
    def _victims(
        session: Session,
        pool: list[RunningJob],
        allocations: Mapping[TaskId, Allocation] | None = None,
    ) -> list[Victim]:
        """Every victim of ``pool``: elastic members first (the job keeps running), then
        whole jobs, each by the profile's cost (fixed within a cycle). ``allocations``: the
        state's, as a plain mapping (faster to read than the layered map)."""
        cost = session.profile.victim_order.cost
        memo = session.snapshot.memo
        if memo is None:
            victims = [v for r in pool for v in victims_of(session, r, allocations)]
        else:  # a running record's victims are fixed (memo contract) unless it shrank
            old = memo.tables.get(_MEMO_TABLE, {})
            fresh: dict[JobId, tuple[object, list[Victim]]] = {}
            victims = []
            for r in pool:
                hit = old.get(r.job.id)
                if hit is not None and hit[0] is r and r.job.id not in session.shrunk:
                    found: list[Victim] = hit[1]
                else:
                    found = victims_of(session, r, allocations)
                if r.job.id not in session.shrunk:
                    fresh[r.job.id] = (r, found)
                victims.extend(found)
            memo.tables[_MEMO_TABLE] = fresh
        # By (whole, cost): members by cost, then whole jobs by cost (each sort is stable).
        members = [v for v in victims if not v.whole]
        wholes = [v for v in victims if v.whole]
        members.sort(key=lambda v: cost(session, v.run))
        wholes.sort(key=lambda v: cost(session, v.run))
        return members + wholes

    def _make_room(
        self,
        session: Session,
        job: Job,
        index: VictimIndex,
        rooms: Rooms,
    ) -> list[Victim] | None:
        """Evict for ``job`` and place it; the victims evicted (``None``: none found)."""
        base = self.eligible(session, job, index)
        evictors = session.snapshot.evicted_by.get(job.id, ())
        if evictors:  # no loops: never evict one's evictor
            base = base.copy()  # (eligibility masks are kept per index: read-only)
            for evictor in evictors:
                base[index.ranks_of(evictor)] = False
        room = rooms.get(session.state, base)
        if int(session.state.gpu_idle.sum()) + room.whole_gpu < job.gpu_milli:
            return None
        chosen = search_victims(session, job, index, room, self, most_free=self._most_free)
        if chosen is None:
            return None
        reason = f"{self.reason} for {job.id}"
        for v in chosen:
            if v.whole:
                session.evict(v.job.id, job.id, reason)
            else:
                session.evict_members(v.job.id, [t.id for t in v.tasks], job.id, reason)
        del session.plan.pending[job.id]
        before = len(session.plan.binds)
        if session.place_job(job, check_quota=False).ok:
            nodes = {b.node for b in session.plan.binds[before:]}
            session.plan.nominations[job.id] = tuple(sorted(nodes))
        return chosen


def kept_mask(index: VictimIndex, key: object, build: Callable[[], Mask]) -> Mask:
    """The mask ``build`` makes, kept in ``index.masks`` under ``key`` (built once per index;
    read-only: copy it to change it)."""
    mask = index.masks.get(key)
    if mask is None:
        mask = index.masks[key] = build()
    return mask


def borrowers_mask(index: VictimIndex, borrowing: tuple[bool, ...]) -> Mask:
    """Victims of the queues ``borrowing`` marks (one flag per ``index.queue_names``), kept
    per index (:func:`kept_mask`)."""
    return kept_mask(
        index, ("borrowers", borrowing), lambda: np.array(borrowing, dtype=np.bool_)[index.queue]
    )


def place_as_is(session: Session, job: Job) -> bool:
    """Place ``job`` with no eviction if it fits now (on the nodes held for reservations that
    the caller has opened); ``False``, and ``job`` left pending, otherwise."""
    session.begin_job(job)  # held nodes still closed admit it by its expected end
    if not fits(session, job):
        return False
    del session.plan.pending[job.id]
    return session.place_job(job).ok  # a refusal puts it back in plan.pending


def may_fit_now(session: Session, job: Job, most_free: MostFree | None = None) -> bool:
    """Cheap necessary condition for ``job`` to fit as it is: some node has room for its first
    unplaced pod's GPUs (the kept per-share fit counts; ``most_free``: their maxima, kept
    between calls), or CPU for a CPU-only pod; share variants and MIG pods: assume yes."""
    todo = [t for t in job.tasks[: job.min_available] if t.id not in session.state.allocations]
    if not todo:
        return True
    task = todo[0]
    s = task.shape
    state = session.state
    if s.mig_profile or variants(state, s) is not None:
        return True
    if s.num_gpu:
        return (most_free or MostFree())(state, share_needed(session, task)) >= s.num_gpu
    return int(state.cpu_free.max(initial=0)) >= s.cpu_milli


def owed(session: Session, job: Job) -> str:
    """What ``job`` is owed by borrowers: GPUs, or GPUs of its one model."""
    models = [x for x in session.request(job) if x.startswith(f"{GPU}/")]
    return models[0] if len(models) == 1 else GPU


def held_of(session: Session, victim: Victim, resource: str) -> int:
    """GPU milli ``victim`` holds of ``resource`` (``gpu``, or ``gpu/<model>``: on nodes of
    that model)."""
    if resource == GPU:
        return victim.gpu_milli
    allocations = session.state.allocations
    models = session.state.node_models
    total = 0
    for task in victim.tasks:
        a = allocations.get(task.id)
        if a is not None and gpu_model_resource(models[a.node]) == resource:
            total += task.shape.total_gpu_milli
    return total
