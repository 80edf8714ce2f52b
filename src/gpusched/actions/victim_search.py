"""The victim search of ``reclaim`` and ``preempt``: a small, cheap set of victims whose
eviction lets a pending job ``P`` fit.

1. eligible victims ``V`` (the action's rule), sorted cheapest first; the caller skips ``P``
   if even evicting every whole job of ``V`` could not free enough GPU;
2. *node-local* (when ``P`` has one pod left to place): only victims on the node the pod
   lands on matter, so every node passing the non-resource filters is tried with one-row
   checks (free CPU, memory, GPUs with enough share; a gang spanning nodes frees its pods on
   that node): take victims in order until the pod fits, then *reprieve* each (most GPUs
   first) it can do without. The least disruptive set over all nodes
   (:func:`~gpusched.actions.victim_fit.set_cost`) is verified once with the profile's full
   placement (:mod:`.victim_local`); gangs go pod by pod on one node each first;
3. *global greedy* (gangs, or when step 2 finds nothing): on a scratch copy, evict ``V`` in
   order, checking with the full placement after 1, 2, 4, ... victims until ``P`` fits, then
   reprieve as above.

Requests that found nothing are remembered per node (:mod:`.victim_misses`) and re-checked
only where something changed.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from gpusched.actions.victim_fit import (
    FIT,
    NODE_LOCAL_CANDIDATES,
    Mask,
    VictimRule,
    fits,
    share_needed,
)
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_local import gang_node_local, node_local
from gpusched.actions.victim_misses import Misses, Seen
from gpusched.framework import Session, Statement
from gpusched.model import (
    Job,
    JobId,
    Task,
    TaskId,
    TaskShape,
)


class SearchRule(VictimRule, Protocol):
    """An evicting action as the search sees it: its per-victim rule, what decides its
    eligible victims besides the nodes (:mod:`.victim_misses`), and its disruption floor."""

    min_runtime_s: float

    def seen(self, session: Session, job: Job) -> Seen:
        """What decides ``job``'s eligible victims besides the nodes."""
        ...


__all__ = ["SearchRule", "search_victims"]


def search_victims(
    session: Session,
    job: Job,
    index: VictimIndex,
    eligible: Mask,
    evicting: SearchRule,
    *,
    misses: Misses,
    key: tuple[object, ...],
) -> list[Victim] | None:
    """A small, cheap set of victims whose eviction lets ``job`` fit (module docstring)."""
    gang = [t for t in job.tasks[: job.min_available] if t.id not in session.state.allocations]
    if not gang:
        return None
    fit_filter = any(f.name == FIT for f in session.profile.filters)
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
        local = node_local(session, job, task, candidates, evicting)
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
        local = gang_node_local(session, job, gang, index, eligible=eligible, evicting=evicting)
        if local is not None:
            return local
    return _greedy(session, job, index.ordered(eligible), evicting)


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
    static = session.feasible(task, skip=FIT)
    if nodes is not None:
        static &= nodes
    if not static.any():
        return []
    milli = share_needed(session, task)
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
                    session.state, shape, share_needed(session, task), eligible, nodes=changed
                )
                ok = session.feasible(task, skip=FIT)[changed]
                term[changed] = np.where(ok, np.minimum(room[changed], k), 0)
        else:
            room = index.pods_bound(session.state, shape, share_needed(session, task), eligible)
            term = np.where(session.feasible(task, skip=FIT), np.minimum(room, k), 0)
        terms[shape] = term
        if int(term.sum()) < k:
            return False, terms
    return True, terms


def _greedy(
    session: Session, job: Job, victims: list[Victim], evicting: SearchRule
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
                if fits(session, job):
                    break
        else:
            return None
        kept: list[Victim] = []
        for v in sorted(taken, key=lambda v: -v.gpu_milli):
            stmt = Statement(scratch)
            for task in v.tasks:
                a = original.allocations[task.id]
                stmt.allocate(task, a.node, a.gpus, a.gpu_milli)
            if fits(session, job):
                stmt.commit()  # reprieved: the job fits without evicting it
            else:
                stmt.rollback()
                kept.append(v)
        return kept
    finally:
        session.state = original
