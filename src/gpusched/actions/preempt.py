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

Each action skips a request identical (gang shapes, priority, queue) to one that found no
victims since the last eviction, and may be capped at ``max_attempts`` pending jobs per cycle
(default: no cap; in queue order, so the most urgent first).

A job with ``preempts`` false (Kubernetes' ``preemptionPolicy: Never``) evicts nothing.

Eligible victims, for both actions: preemptible, running at least ``min_runtime_s``, evicted
fewer than ``max_evictions`` times before (a per-job disruption budget), and not placed in this
cycle. Then:

* ``reclaim``: ``P``'s queue is within its guarantee (with ``P``), and victims belong to other
  queues that use more than their guarantee; a victim is taken only while its queue still
  borrows. After the reclaim ``P`` is within guarantee, so it can never be reclaimed back.
* ``preempt``: victims have strictly lower priority than ``P``; across queues only when ``P``
  stays within its queue's guarantee (otherwise ``P`` would be borrowing and could be reclaimed,
  which is how preemption loops start).

No loops: priority only flows downwards and reclaim only from borrowers to owners, so a job
evicted to make room can never evict its evictor in return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import Code, RunningJob, Session, Statement
from gpusched.framework.quota import job_request
from gpusched.model import MILLI_PER_GPU, Job, JobId, Task, TaskId

__all__ = ["Preempt", "Reclaim", "Victim", "victims_of"]

Eligible = Callable[[Session, Job, RunningJob], bool]


@dataclass(frozen=True, slots=True, eq=False)
class Victim:
    """What one eviction frees: a whole running job, or one elastic member of it.

    ``tasks`` are the bound tasks released; ``nodes`` the nodes they are on.
    """

    run: RunningJob
    tasks: tuple[Task, ...]
    whole: bool
    gpu_milli: int
    nodes: frozenset[int]

    @property
    def job(self) -> Job:
        return self.run.job


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
        self._within: tuple[JobId | None, bool] = (None, False)

    def wants(self, session: Session, job: Job) -> bool:
        raise NotImplementedError

    def eligible(self, session: Session, job: Job, run: RunningJob) -> bool:
        raise NotImplementedError

    def execute(self, session: Session) -> None:
        self._within = (None, False)  # per-preemptor memo; quota differs between cycles
        pool = [r for r in session.running.values() if self._base_eligible(session, r)]
        if not pool:
            return
        lowest = min(r.job.priority for r in pool)
        # Requests that found no victims, until something is evicted: an identical request
        # (shapes, priority, queue) would find none either.
        failed: set[tuple[object, ...]] = set()
        attempts = 0
        ordered: list[Victim] | None = None  # every victim of the pool, cheapest first
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
                *(t.shape for t in job.tasks[: job.min_available]),
            )
            if key in failed or not self.wants(session, job):
                continue
            if ordered is None:
                ordered = self._victims(session, pool)
            attempts += 1
            evicted = self._make_room(session, job, ordered)
            if evicted is None:
                failed.add(key)
                continue
            failed.clear()
            if any(not v.whole for v in evicted):  # jobs that shrank: their victims change
                pool = [r for r in pool if r.job.id in session.running]
                ordered = self._victims(session, pool)
            else:
                gone = {v.job.id for v in evicted}
                ordered = [v for v in ordered if v.job.id not in gone]

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        """A quick necessary condition for ``job`` to have any victim."""
        return True

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
        victims = [v for r in pool for v in victims_of(session, r)]
        victims.sort(key=lambda v: (v.whole, order.cost(session, v.run)))
        return victims

    def _make_room(self, session: Session, job: Job, ordered: list[Victim]) -> list[Victim] | None:
        """Evict for ``job`` and place it; the victims evicted (``None``: none found)."""
        cache: dict[JobId, bool] = {}
        victims = []
        for v in ordered:
            ok = cache.get(v.job.id)
            if ok is None:
                ok = cache[v.job.id] = self.eligible(session, job, v.run)
            if ok:
                victims.append(v)
        if not victims:
            return None
        free = int(session.state.gpu_idle.sum())
        if free + sum(v.gpu_milli for v in victims if v.whole) < job.gpu_milli:
            return None
        chosen = _search(session, job, victims, self)
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


def _fits(session: Session, job: Job) -> bool:
    stmt = Statement(session.state)
    ok = all(
        session.place_task(t, stmt, explain=False).ok
        for t in job.tasks[: job.min_available]
        if t.id not in session.state.allocations
    )
    stmt.rollback()
    return ok


def _set_cost(victims: list[Victim]) -> tuple[int, int, int, int]:
    """How disruptive a victim set is: whole jobs evicted, their highest priority, GPUs freed,
    number of evictions (compared in that order, smaller is better)."""
    whole = [v for v in victims if v.whole]
    top = max((v.job.priority for v in whole), default=-(2**62))
    return (len(whole), top, sum(v.gpu_milli for v in victims), len(victims))


def _search(
    session: Session, job: Job, victims: list[Victim], evicting: _Evicting
) -> list[Victim] | None:
    """A small, cheap set of victims whose eviction lets ``job`` fit (module docstring)."""
    found: list[list[Victim]] = []
    gang = [t for t in job.tasks[: job.min_available] if t.id not in session.state.allocations]
    if len(gang) == 1 and any(f.name == _FIT for f in session.profile.filters):
        # One pod: only the victims on the node it lands on matter, so the node-local search
        # over every node is complete; it checks one row of the arrays per step.
        local = _node_local(session, job, gang[0], victims, evicting)
        if local is not None:
            return local
    got = _greedy(session, job, victims, evicting)
    if got is not None:
        found.append(got)
    return min(found, key=_set_cost) if found else None


_FIT = "node-resources-fit"


class _Row:
    """One node's free CPU, memory and per-GPU shares, as victims are taken or given back."""

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
        self.gpu: NDArray[np.int32] = state.gpu_free[node].copy()

    def add(self, victim: Victim, sign: int = 1) -> None:
        for t in victim.tasks:
            a = self.allocations[t.id]
            if a.node != self.node:
                continue  # a gang's pods elsewhere free nothing here
            self.cpu += sign * a.cpu_milli
            self.mem += sign * a.memory_mib
            for g in a.gpus:
                self.gpu[g] += sign * a.gpu_milli

    def fits(self) -> bool:
        s = self.shape
        return (
            self.cpu >= s.cpu_milli
            and self.mem >= s.memory_mib
            and int((self.gpu >= self.milli).sum()) >= s.num_gpu
        )


def _on_node(
    session: Session, node: int, task: Task, victims: list[Victim], evicting: _Evicting
) -> list[Victim] | None:
    """Victims on ``node`` taken in order until ``task`` fits there, then reprieved (most GPUs
    first) where it fits without them; ``None`` if it never fits."""
    row = _Row(session, node, task)
    taken: list[Victim] = []
    for v in victims:
        if not evicting.still_eligible(session, v, taken):
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
    session: Session, job: Job, task: Task, victims: list[Victim], evicting: _Evicting
) -> list[Victim] | None:
    """The least disruptive set of victims on one node that lets ``task`` fit there.

    Nodes must pass every filter but the resource fit (computed once); on each node with
    victims (a gang spanning nodes is a candidate on each, freeing its pods there),
    :func:`_on_node` checks one row of the arrays per step (``cpu``, memory and
    ``#{g : free_g >= m} >= k``). The best set over all nodes (:func:`_set_cost`) is then
    checked once with the profile's full placement; ``None`` if no node works or the check
    fails (the caller falls back to the global search).
    """
    session.begin_job(job)
    static = session.feasible(task, skip=_FIT)
    on_node: dict[int, list[Victim]] = {}
    for v in victims:
        for node in v.nodes:
            if static[node]:
                on_node.setdefault(node, []).append(v)
    best: list[Victim] | None = None
    for node, vs in on_node.items():
        got = _on_node(session, node, task, vs, evicting)
        if got is not None and (best is None or _set_cost(got) < _set_cost(best)):
            best = got
    if best is None:
        return None
    original = session.state
    session.state = scratch = original.copy()
    try:
        scratch.release_many(t.id for v in best for t in v.tasks)
        return best if _fits(session, job) else None
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

    def wants(self, session: Session, job: Job) -> bool:
        quota = session.quota
        return (
            quota is not None
            and job.queue in quota.tree
            and quota.within_guarantee(job.queue, job_request(job))
        )

    def eligible(self, session: Session, job: Job, run: RunningJob) -> bool:
        quota = session.quota
        assert quota is not None
        q = run.job.queue
        return q != job.queue and q in quota.tree and quota.borrowed(q) > 0

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        # Take a borrower only while its queue keeps borrowing at least the victim's GPUs, so
        # a reclaim never pushes a queue below its own guarantee.
        quota = session.quota
        assert quota is not None
        q = victim.job.queue
        already = sum(
            v.gpu_milli
            for v in taken
            if v.job.queue == q and not (victim.whole and v.job.id == victim.job.id)
        )
        return quota.borrowed(q) - already >= victim.gpu_milli


class Preempt(_Evicting):
    """Evict lower-priority jobs for a higher-priority one (module docstring)."""

    name = "preempt"
    reason = "preempted by higher priority"

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        return job.priority > lowest_priority

    def wants(self, session: Session, job: Job) -> bool:
        return session.quota_refusal(job) is None

    def eligible(self, session: Session, job: Job, run: RunningJob) -> bool:
        if run.job.priority >= job.priority:
            return False
        if run.job.queue == job.queue or session.quota is None:
            return True
        if self._within[0] != job.id:  # constant for one preemptor: computed once
            self._within = (job.id, session.quota.within_guarantee(job.queue, job_request(job)))
        return self._within[1]
