"""Disruptive actions: ``reclaim`` (quota) and ``preempt`` (priority), gang-aware.

Both make room for a pending job ``P`` by evicting running work, chosen by the profile's
victim order (cheapest first), and place ``P`` in the same cycle on the freed capacity, so no
other job can take it (the plan *nominates* ``P`` for those nodes; a live driver binds it once
the victims are gone). A *victim* is either one elastic member of a running job (a pod beyond
its ``min_available``; the job keeps running) or a whole job with every pod (gangs go whole).
Elastic members come first, then whole jobs, each by cost. The search:

1. eligible victims ``V`` (see below), sorted; skip ``P`` if even evicting every whole job of
   ``V`` could not free enough GPU;
2. *node-local* (when ``P`` has one pod left to place): only victims on the node the pod
   lands on matter, so every node passing the non-resource filters is tried with one-row
   checks (free CPU, memory, GPUs with enough share; a gang spanning nodes frees its pods on
   that node): take victims in order until the pod fits, then *reprieve* each (most GPUs
   first) it can do without. The least disruptive set over all nodes -- fewest whole jobs,
   then the lowest highest priority among them, then fewest GPUs, then fewest evictions -- is
   verified once with the profile's full placement;
3. *global greedy* (gangs, or when step 2 finds nothing): on a scratch copy, evict ``V`` in
   order, checking with the full placement after 1, 2, 4, ... victims until ``P`` fits, then
   reprieve as above;
4. evict the set for real and place ``P``.

A job that fits as it is once this cycle's evictions have freed room (more than their
preemptors took) is placed with no eviction, as backfill would place it. Each action skips a
request identical (gang shapes, priority, queue) to one that found no victims since the last
eviction, and may be capped at ``max_attempts`` pending jobs per cycle
(default: no cap; in queue order, so the most urgent first).

A job with ``preempts`` false (Kubernetes' ``preemptionPolicy: Never``) evicts nothing.

Eligible victims, for both actions: preemptible, running at least ``min_runtime_s``, evicted
fewer than ``max_evictions`` times before (a per-job disruption budget), and not placed in this
cycle. Then:

* ``reclaim``: ``P``'s queue is within its guarantee (with ``P``; nodes held for a reservation
  are open to it: a guarantee is a promise, a reservation a plan -- but victims off those
  nodes are looked for first, so the reservation stands when they suffice; failing that, a
  ``P`` that fits as it is on nodes held for another queue's job that would borrow goes there
  with no eviction, else victims are looked for on every node), and victims belong to other
  queues that use more than their guarantee of what ``P`` is owed -- GPUs, or, when ``P`` asks
  for one GPU model, GPUs of that model (guarantees are per model too); a victim is taken only
  while its queue still borrows at least what the victim holds of it. Failing that
  (``overshoot``, on by default), victims are looked for again with a queue's victims taken
  while it still borrows anything: gangs are whole, so a borrower whose borrowed GPUs sit in a
  gang larger than what it borrows could otherwise keep an owner from its guarantee forever
  (whole-node jobs behind fragmented room); its last victim takes it below its guarantee by less
  than that victim's size, and the victim can never reclaim back (with it, its queue would
  borrow). After the reclaim ``P`` is within guarantee, so it can never be reclaimed back.
* ``preempt``: victims have strictly lower priority than ``P``; across queues only when ``P``
  stays within its queue's guarantee (otherwise ``P`` would be borrowing and could be reclaimed,
  which is how preemption loops start), and only from queues that borrow, no more than they
  borrow, as in ``reclaim`` (a queue's guaranteed work taken by priority would be reclaimed
  back, evicting ``P``).

No loops: priority only flows downwards and reclaim only from borrowers to owners, so a job
evicted to make room can never evict its evictor in return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_misses import Misses, Seen, kept_misses
from gpusched.framework import Code, RunningJob, Session, Statement, TieBreak
from gpusched.framework.sharing import variants
from gpusched.model import (
    GPU,
    MILLI_PER_GPU,
    Job,
    JobId,
    QueueName,
    Task,
    TaskId,
    TaskShape,
    gpu_model_resource,
)
from gpusched.plugins.filters import gpu_fit_count

__all__ = ["Preempt", "Reclaim", "Victim", "victims_of"]

Mask = NDArray[np.bool_]


def victims_of(session: Session, run: RunningJob) -> list[Victim]:
    """Each elastic member ``run`` holds beyond its gang (last bound first), then the whole
    job."""
    allocations = session.state.allocations
    bound = [(t, a) for t in run.job.tasks if (a := allocations.get(t.id)) is not None]
    out = []
    extra = len(bound) - run.job.min_available
    for task, alloc in reversed(bound[len(bound) - extra :] if extra > 0 else []):
        out.append(Victim(run, (task,), False, task.shape.total_gpu_milli, frozenset({alloc.node})))
    out.append(
        Victim(
            run,
            tuple(t for t, _ in bound),
            True,
            sum(t.shape.total_gpu_milli for t, _ in bound),
            frozenset(a.node for _, a in bound),
        )
    )
    return out


#: The memo table of each running record's victims (:class:`~gpusched.framework.memo.CycleMemo`).
_MEMO_TABLE = "victims"


class _Evicting:
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

    def wants(self, session: Session, job: Job) -> bool:
        raise NotImplementedError

    def eligible(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        """Which victims of ``index`` ``job`` may take (before :meth:`still_eligible`)."""
        raise NotImplementedError

    #: Whether nodes held for a reservation are open to this action's preemptors.
    ignores_reservations = False

    def execute(self, session: Session) -> None:
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

    def _execute(self, session: Session) -> None:
        pool = [r for r in session.running.values() if self._base_eligible(session, r)]
        if not pool and not self.ignores_reservations:
            return  # (a job owed quota may still fit on nodes held for a reservation)
        lowest = min((r.job.priority for r in pool), default=0)
        # Requests that found no victims, until something is evicted: an identical request
        # (shapes, priority, queue, expected end) would find none either. Exact per-node
        # misses survive evictions and are re-checked where something changed (.victim_misses).
        failed: set[tuple[object, ...]] = set()
        memo = session.snapshot.memo
        table = f"misses/{self.name}"
        misses = Misses(None if memo is None else kept_misses(memo.tables.get(table)))
        attempts = 0
        index: VictimIndex | None = None  # every victim of the pool, cheapest first
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
            if key in failed or not self.wants(session, job):
                continue
            if self._placed_as_is(session, job):
                continue  # room freed by this cycle's evictions: it fits as it is now
            if index is None:
                index = VictimIndex(session.state, self._victims(session, pool))
            attempts += 1
            evicted = self._make_room(session, job, index, misses, key)
            if evicted is None:
                failed.add(key)
                continue
            if evicted:  # (empty: placed with no eviction)
                failed.clear()
                index.remove(evicted)
        if memo is not None:
            memo.tables[table] = misses.renewed()

    def _placed_as_is(self, session: Session, job: Job) -> bool:
        """Place ``job`` with no eviction if this cycle's evictions freed room for it, under the
        reservations backfill honours (an action that ignores them restores them here)."""
        if not session.plan.evictions or not _may_fit_now(session, job):
            return False
        if not self.ignores_reservations:
            return session.place_job(job).ok
        opened, session.blocked_nodes = session.blocked_nodes, self._held
        try:
            return session.place_job(job).ok
        finally:
            session.blocked_nodes = opened

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        """A quick necessary condition for ``job`` to have any victim."""
        return True

    def seen(self, session: Session, job: Job) -> Seen:
        """What decides ``job``'s eligible victims besides the nodes (:mod:`.victim_misses`):
        the queues borrowing what it is owed, whether it is within its guarantee, and the
        reserved nodes it may not use."""
        quota = session.quota
        within = quota is not None and quota.within_guarantee(job.queue, session.request(job))
        borrowers: frozenset[QueueName] = frozenset()
        if quota is not None:
            res = _owed(session, job)
            borrowers = frozenset(
                q.name
                for q in quota.tree
                if q.name != job.queue and quota.borrowed(q.name, res) > 0
            )
        end = session.snapshot.now + session.runtime_estimate(job)
        held = frozenset(
            n
            for n, (start, owner) in session.blocked_nodes.items()
            if end > start and owner != job.id
        )
        return Seen(session.snapshot.now, borrowers, within, held)

    # What the current preemptor is owed (GPUs, or GPUs of its one model) and its queue; set
    # by :meth:`_borrowers` for :meth:`_within_borrowing`.
    _resource = GPU
    _queue = ""

    def _borrowers(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        """Victims of queues other than ``job``'s that borrow what ``job`` is owed: GPUs, or,
        when it asks for one GPU model, GPUs of that model (guarantees are per model too)."""
        quota = session.quota
        assert quota is not None
        res = self._resource = _owed(session, job)
        self._queue = job.queue
        names = index.queue_names
        borrowing = np.array(
            [q != job.queue and q in quota.tree and quota.borrowed(q, res) > 0 for q in names],
            dtype=np.bool_,
        )
        return borrowing[index.queue]

    def _within_borrowing(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        """Take a borrower only while its queue keeps borrowing at least what the victim holds
        of the resource owed (:meth:`_borrowers`), so no queue is pushed below its own
        guarantee; a victim holding none of it is no help."""
        quota = session.quota
        assert quota is not None
        res = self._resource
        q = victim.job.queue
        held = _held(session, victim, res)
        if res != GPU and not held:
            return False
        already = sum(
            _held(session, v, res)
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

    def _base_eligible(self, session: Session, run: RunningJob) -> bool:
        snap = session.snapshot
        return (
            run.job.preemptible
            and run.job.id in snap.running
            and snap.now - run.start >= self.min_runtime_s
            and snap.evictions.get(run.job.id, 0) < self.max_evictions
        )

    @staticmethod
    def _victims(session: Session, pool: list[RunningJob]) -> list[Victim]:
        """Every victim of ``pool``: elastic members first (the job keeps running), then
        whole jobs, each by the profile's cost (fixed within a cycle)."""
        order = session.profile.victim_order
        memo = session.snapshot.memo
        if memo is None:
            victims = [v for r in pool for v in victims_of(session, r)]
        else:  # a running record's victims are fixed (memo contract) unless it shrank
            old = memo.tables.get(_MEMO_TABLE, {})
            fresh: dict[JobId, tuple[object, list[Victim]]] = {}
            victims = []
            for r in pool:
                hit = old.get(r.job.id)
                if hit is not None and hit[0] is r and r.job.id not in session.shrunk:
                    found: list[Victim] = hit[1]
                else:
                    found = victims_of(session, r)
                if r.job.id not in session.shrunk:
                    fresh[r.job.id] = (r, found)
                victims.extend(found)
            memo.tables[_MEMO_TABLE] = fresh
        victims.sort(key=lambda v: (v.whole, order.cost(session, v.run)))
        return victims

    def _make_room(
        self,
        session: Session,
        job: Job,
        index: VictimIndex,
        misses: Misses,
        key: tuple[object, ...],
    ) -> list[Victim] | None:
        """Evict for ``job`` and place it; the victims evicted (``None``: none found)."""
        eligible = self.eligible(session, job, index) & index.alive
        free = int(session.state.gpu_idle.sum())
        if free + int(index.gpu_milli[eligible & index.whole].sum()) < job.gpu_milli:
            return None
        chosen = _search(session, job, index, eligible, self, misses=misses, key=key)
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


def _place_as_is(session: Session, job: Job) -> bool:
    """Place ``job`` with no eviction if it fits now (on the nodes held for reservations that
    the caller has opened); ``False``, and ``job`` left pending, otherwise."""
    session.begin_job(job)  # held nodes still closed admit it by its expected end
    if not _fits(session, job):
        return False
    del session.plan.pending[job.id]
    return session.place_job(job).ok  # a refusal puts it back in plan.pending


def _may_fit_now(session: Session, job: Job) -> bool:
    """Cheap necessary condition for ``job`` to fit as it is: some node has room for its first
    unplaced pod's GPUs (the kept per-share fit counts), or CPU for a CPU-only pod; share
    variants and MIG pods: assume yes."""
    todo = [t for t in job.tasks[: job.min_available] if t.id not in session.state.allocations]
    if not todo:
        return True
    task = todo[0]
    s = task.shape
    state = session.state
    if s.mig_profile or variants(state, s) is not None:
        return True
    if s.num_gpu:
        return int(gpu_fit_count(state, _milli(session, task)).max(initial=0)) >= s.num_gpu
    return int(state.cpu_free.max(initial=0)) >= s.cpu_milli


def _fits(session: Session, job: Job) -> bool:
    stmt = Statement(session.state)
    ok = all(
        session.place_task(t, stmt, explain=False).ok
        for t in job.tasks[: job.min_available]
        if t.id not in session.state.allocations
    )
    stmt.rollback()
    return ok


def set_cost(victims: list[Victim]) -> tuple[int, int, int, int]:
    """How disruptive a victim set is: whole jobs evicted, their highest priority, GPUs freed,
    number of evictions (compared in that order, smaller is better)."""
    whole = [v for v in victims if v.whole]
    top = max((v.job.priority for v in whole), default=-(2**62))
    return (len(whole), top, sum(v.gpu_milli for v in victims), len(victims))


def _search(
    session: Session,
    job: Job,
    index: VictimIndex,
    eligible: Mask,
    evicting: _Evicting,
    *,
    misses: Misses,
    key: tuple[object, ...],
) -> list[Victim] | None:
    """A small, cheap set of victims whose eviction lets ``job`` fit (module docstring)."""
    gang = [t for t in job.tasks[: job.min_available] if t.id not in session.state.allocations]
    if not gang:
        return None
    fit_filter = any(f.name == _FIT for f in session.profile.filters)
    state = session.state
    seen = evicting.seen(session, job)
    key = (*key, len(gang))  # a job with pods bound already searches for fewer
    miss = misses.get(key)
    changed = (
        None
        if miss is None
        else Misses.changed(
            miss, state, index, eligible, seen=seen, min_runtime_s=evicting.min_runtime_s
        )
    )
    if changed is None:
        miss = None
    if len(gang) == 1 and fit_filter:
        # One pod: only the victims on the node it lands on matter, so the node-local search
        # over every node is complete.
        task = gang[0]
        if changed is not None and not _candidates(
            session, job, task, index, eligible, nodes=changed, limit=1
        ):
            misses.record(key, state, seen)
            return None
        candidates = _candidates(session, job, task, index, eligible, memo=key)
        if not candidates:  # no node can host it, whatever is evicted: no search can succeed
            misses.record(key, state, seen)
            return None
        local = _node_local(session, job, task, candidates, evicting)
        if local is not None:
            return local or None  # empty: it fits as it is, nothing to evict
    elif fit_filter:
        may, terms = _gang_may_fit(
            session,
            job,
            gang,
            index,
            eligible,
            old=None if miss is None else miss.terms,
            changed=changed,
        )
        if not may:
            misses.record(key, state, seen, terms)
            return None
        local = _gang_node_local(session, job, gang, index, eligible=eligible, evicting=evicting)
        if local is not None:
            return local
    return _greedy(session, job, index.ordered(eligible), evicting)


def _milli(session: Session, task: Task) -> int:
    """The share a GPU must have free for ``task``."""
    s = task.shape
    return MILLI_PER_GPU if session.profile.gpu_as_integer and s.is_sharing else s.gpu_milli


#: Nodes whose first-fit prefix is cheapest that the node-local search refines exactly.
NODE_LOCAL_CANDIDATES = 8


def _candidates(
    session: Session,
    job: Job,
    task: Task,
    index: VictimIndex,
    eligible: Mask,
    *,
    nodes: Mask | None = None,
    limit: int = NODE_LOCAL_CANDIDATES,
    memo: object = None,
) -> list[tuple[int, list[Victim]]]:
    """Up to ``limit`` nodes (of ``nodes``) passing every filter but the resource fit where
    ``task`` fits once a prefix of their eligible victims is gone, cheapest prefix first
    (:meth:`VictimIndex.first_fits`), each with its eligible victims in order. ``memo``: the
    request's key, under which the index keeps each node's answer for the next query
    (:meth:`VictimIndex.kept_first_fits`)."""
    session.begin_job(job)
    static = session.feasible(task, skip=_FIT)
    if nodes is not None:
        static &= nodes
    if not static.any():
        return []
    milli = _milli(session, task)
    if memo is not None:
        return index.kept_first_fits(
            (memo, task.shape, milli),
            session.state,
            task.shape,
            milli,
            eligible,
            nodes=static,
            limit=limit,
        )
    return index.first_fits(session.state, task.shape, milli, eligible, nodes=static, limit=limit)


def _gang_may_fit(
    session: Session,
    job: Job,
    gang: list[Task],
    index: VictimIndex,
    eligible: Mask,
    *,
    old: dict[TaskShape, NDArray[np.int64]] | None = None,
    changed: Mask | None = None,
) -> tuple[bool, dict[TaskShape, NDArray[np.int64]]]:
    """Necessary condition: with every eligible victim evicted, each shape ``s`` of ``gang``
    has room for its ``k_s`` pods on nodes passing the other filters,
    ``SUM_n min(pods_n, k_s) >= k_s`` (:meth:`VictimIndex.pods_bound`). Returns the answer and
    each shape's per-node terms; ``old`` terms of a miss are updated on ``changed`` nodes only
    (:mod:`.victim_misses`)."""
    session.begin_job(job)
    by_shape: dict[TaskShape, list[Task]] = {}
    for task in gang:
        by_shape.setdefault(task.shape, []).append(task)
    terms: dict[TaskShape, NDArray[np.int64]] = {}
    for shape, tasks in by_shape.items():
        task, k = tasks[0], len(tasks)
        known = None if old is None else old.get(shape)
        if known is not None and changed is not None:
            term = known
            if changed.any():
                room = index.pods_bound(
                    session.state, shape, _milli(session, task), eligible, nodes=changed
                )
                ok = session.feasible(task, skip=_FIT)[changed]
                term[changed] = np.where(ok, np.minimum(room[changed], k), 0)
        else:
            room = index.pods_bound(session.state, shape, _milli(session, task), eligible)
            term = np.where(session.feasible(task, skip=_FIT), np.minimum(room, k), 0)
        terms[shape] = term
        if int(term.sum()) < k:
            return False, terms
    return True, terms


_FIT = "node-resources-fit"


class _Row:
    """One node's free CPU, memory and per-GPU shares, as victims are taken or given back
    (plain Python numbers: a row is a handful of values, changed a few at a time)."""

    __slots__ = ("allocations", "cpu", "gpu", "mem", "milli", "node", "shape")

    def __init__(self, session: Session, node: int, task: Task) -> None:
        state = session.state
        s = task.shape
        self.node = node
        self.allocations = state.allocations
        self.shape = s
        self.milli = (
            MILLI_PER_GPU if session.profile.gpu_as_integer and s.is_sharing else s.gpu_milli
        )
        self.cpu, self.mem = int(state.cpu_free[node]), int(state.mem_free[node])
        self.gpu: list[int] = state.gpu_free[node].tolist()

    def add(self, victim: Victim, sign: int = 1) -> None:
        for t in victim.tasks:
            a = self.allocations.get(t.id)
            if a is None or a.node != self.node:
                continue  # gone already, or a gang's pod elsewhere: frees nothing here
            self.cpu += sign * a.cpu_milli
            self.mem += sign * a.memory_mib
            for g in a.gpus:
                self.gpu[g] += sign * a.gpu_milli

    def fits(self) -> bool:
        s = self.shape
        if self.cpu < s.cpu_milli or self.mem < s.memory_mib:
            return False
        milli = self.milli
        return sum(1 for free in self.gpu if free >= milli) >= s.num_gpu


def _on_node(
    session: Session,
    node: int,
    task: Task,
    victims: list[Victim],
    evicting: _Evicting,
    *,
    prior: Sequence[Victim] = (),
) -> list[Victim] | None:
    """Victims on ``node`` taken in order until ``task`` fits there, then reprieved (most GPUs
    first) where it fits without them; ``None`` if it never fits. ``prior``: victims already
    taken for the same preemptor elsewhere (they count against per-queue budgets)."""
    row = _Row(session, node, task)
    taken: list[Victim] = []
    for v in victims:
        if not evicting.still_eligible(session, v, [*prior, *taken]):
            continue
        if v.whole:  # a whole job subsumes its members taken before
            for t in [t for t in taken if t.job.id == v.job.id]:
                row.add(t, -1)
                taken.remove(t)
        row.add(v)
        taken.append(v)
        if row.fits():
            break
    else:
        return None
    kept: list[Victim] = []
    for v in sorted(taken, key=lambda v: -v.gpu_milli):
        row.add(v, -1)
        if not row.fits():
            row.add(v)
            kept.append(v)
    return kept


def _node_local(
    session: Session,
    job: Job,
    task: Task,
    candidates: list[tuple[int, list[Victim]]],
    evicting: _Evicting,
) -> list[Victim] | None:
    """The least disruptive set of victims on one node that lets ``task`` fit there.

    Nodes must pass every filter but the resource fit. :meth:`VictimIndex.first_fits` found,
    on every such node at once, the first-fit prefix of its eligible victims (a gang spanning
    nodes is a candidate on each, freeing its pods there) and kept the
    :data:`NODE_LOCAL_CANDIDATES` nodes with the cheapest prefixes (:func:`set_cost`,
    ``candidates``, from :func:`_candidates`). Each is refined by :func:`_on_node` (per-victim
    eligibility, reprieve), and the cheapest sets are checked in turn with the profile's full
    placement. Returns the first that passes (empty: ``task`` fits as it is), or ``None`` when
    every candidate failed the full check (the caller falls back to the global search).
    """
    sets = []
    for node, victims in candidates:
        got = _on_node(session, node, task, victims, evicting)
        if got is not None:
            sets.append(got)
    sets.sort(key=set_cost)
    if sets and _row_check_is_placement(session, task):
        return sets[0]
    original = session.state
    for best in sets:
        session.state = scratch = original.copy()
        try:
            scratch.release_many(t.id for v in best for t in v.tasks)
            if _fits(session, job):
                return best
        finally:
            session.state = original
    return None


#: Filters whose verdict for a task without NUMA-local CPUs or MIG instances depends on the
#: node alone, never on its free resources: evictions cannot change it.
_STATIC_FILTERS = frozenset({"gpu-model", "node-constraints", "numa-local-cpu"})

#: Score plugins and GPU pickers known to draw nothing from the cycle's random source and to
#: keep only per-node caches stamped with node versions (or exact integer ones), so a trial
#: placement on a scratch copy's changed nodes leaves nothing that a later placement reads.
_DETERMINISTIC = frozenset(
    {
        "fgd",
        "node-preference",
        "gpu-topology",
        "network-packing",
        "best-fit-gpu",
        "first-fit-gpu",
        "topology-aware-gpu",
    }
)


def _row_check_is_placement(session: Session, task: Task) -> bool:
    """Whether :func:`_on_node`'s row test already answers :func:`_node_local`'s full check.

    The check releases the chosen victims on a scratch copy and runs the profile's placement
    for ``task`` (the job's one unplaced pod). It succeeds iff some node passes every filter
    there. The candidate node ``n`` passed the filters other than the resource fit on the
    current state (:func:`_candidates`); when those filters are static (:data:`_STATIC_FILTERS`)
    their verdict on ``n`` stands after the release, and the resource fit on ``n`` after it is
    exactly the row test::

        cpu_n + SUM cpu(v) >= c,   mem_n + SUM mem(v) >= m,
        #{g : gpu_n[g] + SUM gpu(v)[g] >= s} >= k

    (plain GPUs: no MIG, no share variants, no NUMA-local CPUs), so the check would succeed
    on its first set. Skipping it must also leave every later decision alone: with a
    ``first`` tie break and deterministic plugins (:data:`_DETERMINISTIC`) the check draws no
    random numbers, and when ``task`` fits on no node as it is the scratch placement scores
    only nodes the release changed, whose scratch version stamps no later state carries -- so
    no cache entry it would have made is ever read. Otherwise (``False``) the check is run.
    """
    profile = session.profile
    s = task.shape
    if (
        profile.tie_break is not TieBreak.FIRST
        or s.mig_profile
        or s.numa_local_cpus
        or session.restrict is not None
        or profile.gpu_picker.name not in _DETERMINISTIC
        or any(plugin.name not in _DETERMINISTIC for plugin, _ in profile.scores)
        or any(f.name != _FIT and f.name not in _STATIC_FILTERS for f in profile.filters)
        or variants(session.state, s) is not None
    ):
        return False
    if profile.gpu_as_integer and s.is_sharing:  # as place_task sees it
        task = Task(task.id, task.job, replace(s, gpu_milli=MILLI_PER_GPU))
    return not session.feasible(task).any()


def _gang_node_local(
    session: Session,
    job: Job,
    gang: list[Task],
    index: VictimIndex,
    *,
    eligible: Mask,
    evicting: _Evicting,
) -> list[Victim] | None:
    """Gangs, pod by pod on a scratch state: a pod that fits somewhere now is placed with the
    profile's placement; otherwise it takes the least disruptive victims on one node, as a
    one-pod preemptor would (:func:`_node_local`, on the state the pods before it left), and is
    placed there. The union of the victims is the answer if the whole gang then fits with the
    profile's full placement; ``None`` otherwise (the caller falls back to the global search).

    This keeps a gang's victims on few nodes: the global search takes the cheapest victims
    wherever they are, which for a gang of whole nodes can exhaust a borrower's budget on
    scattered small jobs without ever freeing a node.
    """
    original = session.state
    scratch = original.copy()
    session.state = scratch
    open_ = eligible.copy()
    taken: list[Victim] = []
    try:
        session.begin_job(job)
        stmt = Statement(scratch)
        for task in gang:
            if session.place_task(task, stmt, explain=False).ok:
                continue
            candidates = index.first_fits(
                scratch,
                task.shape,
                _milli(session, task),
                open_,
                nodes=session.feasible(task, skip=_FIT),
                limit=NODE_LOCAL_CANDIDATES,
            )
            best: list[Victim] | None = None
            where = -1
            for node, victims in candidates:
                got = _on_node(session, node, task, victims, evicting, prior=taken)
                if got is not None and (best is None or set_cost(got) < set_cost(best)):
                    best, where = got, node
            if best is None:
                return None
            for v in best:
                open_[index.rank(v)] = False
                if v.whole:
                    open_[index.ranks_of(v.job.id)] = False
            scratch.release_many(t.id for v in best for t in v.tasks if t.id in scratch.allocations)
            taken.extend(best)
            only = np.zeros(scratch.size, dtype=np.bool_)
            only[where] = True
            session.restrict = only
            try:
                if not session.place_task(task, stmt, explain=False).ok:
                    return None
            finally:
                session.restrict = None
    finally:
        session.state = original
    check = original.copy()
    session.state = check
    try:
        check.release_many(t.id for v in taken for t in v.tasks if t.id in check.allocations)
        return taken if _fits(session, job) else None
    finally:
        session.state = original


def _greedy(
    session: Session, job: Job, victims: list[Victim], evicting: _Evicting
) -> list[Victim] | None:
    """Evict ``victims`` in order on a scratch state until ``job`` fits (checked after 1, 2,
    4, ... victims), then reprieve each chosen victim (most GPUs first) that ``job`` can do
    without."""
    original = session.state
    scratch = original.copy()
    session.state = scratch
    try:
        taken: list[Victim] = []
        gone: set[TaskId] = set()
        whole: set[JobId] = set()
        members: set[JobId] = set()
        probe = 1  # fit checks after 1, 2, 4, ... victims: O(log V) placements, not O(V)
        for i, v in enumerate(victims):
            if not v.whole and v.job.id in whole:
                continue
            if not evicting.still_eligible(session, v, taken):
                continue
            if v.whole:  # a whole job subsumes its members taken before
                if v.job.id in members:
                    taken = [t for t in taken if t.job.id != v.job.id]
                whole.add(v.job.id)
            else:
                members.add(v.job.id)
            for task in v.tasks:
                if task.id not in gone:
                    scratch.release(task.id)
                    gone.add(task.id)
            taken.append(v)
            if len(taken) >= probe or i == len(victims) - 1:
                probe = 2 * len(taken)
                if _fits(session, job):
                    break
        else:
            return None
        kept: list[Victim] = []
        for v in sorted(taken, key=lambda v: -v.gpu_milli):
            stmt = Statement(scratch)
            for task in v.tasks:
                a = original.allocations[task.id]
                stmt.allocate(task, a.node, a.gpus, a.gpu_milli)
            if _fits(session, job):
                stmt.commit()  # reprieved: the job fits without evicting it
            else:
                stmt.rollback()
                kept.append(v)
        return kept
    finally:
        session.state = original


class Reclaim(_Evicting):
    """Give a queue back its guaranteed quota by evicting borrowers (module docstring)."""

    name = "reclaim"
    reason = "reclaimed guaranteed quota"
    # A guarantee is a promise; a reservation is a plan remade every cycle: owed quota may use
    # nodes held for the head-of-line job (whose start moves back accordingly).
    ignores_reservations = True

    def __init__(
        self,
        min_runtime_s: float = 300.0,
        max_evictions: int = 3,
        max_attempts: int | None = None,
        overshoot: bool = True,
    ) -> None:
        """``overshoot``: when no victim set within what borrowers borrow lets the job fit, a
        borrower's last victim may take its queue below its guarantee (module docstring)."""
        super().__init__(min_runtime_s, max_evictions, max_attempts)
        self.overshoot = overshoot

    def wants(self, session: Session, job: Job) -> bool:
        quota = session.quota
        return (
            quota is not None
            and job.queue in quota.tree
            and quota.within_guarantee(job.queue, session.request(job))
        )

    def eligible(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        return self._borrowers(session, job, index)

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        return self._within_borrowing(session, victim, taken)

    def _make_room(
        self,
        session: Session,
        job: Job,
        index: VictimIndex,
        misses: Misses,
        key: tuple[object, ...],
    ) -> list[Victim] | None:
        """Victims off the nodes held for a reservation first (the reservation stands);
        failing that, ``job`` goes as it is, with no eviction (an empty list), onto nodes
        held for jobs of other queues that would borrow; else victims are looked for on every
        node."""
        held = self._held
        if held:
            session.blocked_nodes = held
            try:  # its own key: its misses saw other nodes than the search on every node
                chosen = super()._make_room(session, job, index, misses, (*key, "off-held"))
            finally:
                session.blocked_nodes = {}
            if chosen is not None:
                return chosen
        session.blocked_nodes = _owed_to_others(session, job, held)
        try:
            if _place_as_is(session, job):
                return []
        finally:
            session.blocked_nodes = {}
        chosen = super()._make_room(session, job, index, misses, key)
        if chosen is not None or not self.overshoot:
            return chosen
        self._overshooting = True
        try:  # its own key: it may take victims the search within borrowing may not
            return super()._make_room(session, job, index, misses, (*key, "overshoot"))
        finally:
            self._overshooting = False


def _owed_to_others(
    session: Session, job: Job, held: dict[int, tuple[float, JobId]]
) -> dict[int, tuple[float, JobId]]:
    """The nodes of ``held`` that stay closed to ``job``, owed quota: those held for a job of
    its own queue, or for one within its queue's guarantee (a guarantee outranks another
    queue's plan to borrow, not its own queue's order or another promise)."""
    quota = session.quota
    assert quota is not None
    owners = {j.id: j for j in session.snapshot.pending}
    keep = {}
    for node, (start, owner_id) in held.items():
        owner = owners.get(owner_id)
        if (
            owner is None
            or owner.queue == job.queue
            or owner.queue not in quota.tree
            or quota.within_guarantee(owner.queue, session.request(owner))
        ):
            keep[node] = (start, owner_id)
    return keep


def _owed(session: Session, job: Job) -> str:
    """What ``job`` is owed by borrowers: GPUs, or GPUs of its one model."""
    models = [x for x in session.request(job) if x.startswith(f"{GPU}/")]
    return models[0] if len(models) == 1 else GPU


def _held(session: Session, victim: Victim, resource: str) -> int:
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


class Preempt(_Evicting):
    """Evict lower-priority jobs for a higher-priority one (module docstring)."""

    name = "preempt"
    reason = "preempted by higher priority"

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        return job.priority > lowest_priority

    def wants(self, session: Session, job: Job) -> bool:
        return session.quota_refusal(job) is None

    def eligible(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        self._queue = job.queue
        lower = index.priority < job.priority
        quota = session.quota
        if quota is None:
            return lower
        own = np.array([q == job.queue for q in index.queue_names], dtype=np.bool_)[index.queue]
        if not quota.within_guarantee(job.queue, session.request(job)):
            return lower & own
        # Across queues only from borrowers, and only what they borrow: evicting a queue's
        # guaranteed work would be reclaimed back, evicting the preemptor (a loop).
        return lower & (own | self._borrowers(session, job, index))

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        if session.quota is None or victim.job.queue == self._queue:
            return True
        return self._within_borrowing(session, victim, taken)
