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

Before step 2, what every node would have free with all of ``V`` gone (:mod:`.victim_room`,
kept per eligibility class and updated where something changed) tells exactly which nodes a
pod could take, and bounds what a gang could: a request no eviction can help ends there.
"""

from __future__ import annotations

import numpy as np

from gpusched.actions.victim_fit import (
    FIT,
    NODE_LOCAL_CANDIDATES,
    MostFree,
    VictimRule,
    fits,
    share_needed,
)
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_local import gang_node_local, node_local
from gpusched.actions.victim_room import Room
from gpusched.framework import Session, Statement
from gpusched.model import (
    Job,
    JobId,
    Task,
    TaskId,
    TaskShape,
)

__all__ = ["search_victims"]


def search_victims(
    session: Session,
    job: Job,
    index: VictimIndex,
    room: Room,
    evicting: VictimRule,
    *,
    most_free: MostFree | None = None,
) -> list[Victim] | None:
    """A small, cheap set of ``room.chosen`` victims whose eviction lets ``job`` fit (module
    docstring; ``most_free``: the caller's kept answers, :class:`MostFree`)."""
    gang = [t for t in job.tasks[: job.min_available] if t.id not in session.state.allocations]
    if not gang:
        return None
    fit_filter = any(f.name == FIT for f in session.profile.filters)
    eligible = room.chosen
    if len(gang) == 1 and fit_filter:
        # One pod: only the victims on the node it lands on matter, so the node-local search
        # over every node is complete.
        task = gang[0]
        candidates = _candidates(session, job, task, room)
        if not candidates:  # no node can host it, whatever is evicted: no search can succeed
            return None
        local = node_local(session, job, task, candidates, evicting, most_free=most_free)
        if local is not None:
            return local or None  # empty: it fits as it is, nothing to evict
    elif fit_filter:
        if not _gang_may_fit(session, job, gang, room):
            return None
        local = gang_node_local(session, job, gang, index, eligible=eligible, evicting=evicting)
        if local is not None:
            return local
    return _greedy(session, job, index.ordered(eligible), evicting)


def _candidates(
    session: Session, job: Job, task: Task, room: Room
) -> list[tuple[int, list[Victim]]]:
    """Up to :data:`NODE_LOCAL_CANDIDATES` nodes passing every filter but the resource fit
    where ``task`` fits once a prefix of their eligible victims (``room.chosen``) is gone,
    cheapest prefix first (:meth:`Room.first_fits`), each with its eligible victims in order.
    Only the nodes whose room fits ``task`` (:meth:`Room.fits`) can have a prefix."""
    session.begin_job(job)
    milli = share_needed(session, task)
    fit = room.fits(task.shape, milli)
    if not fit.any():  # (then no need to ask the filters)
        return []
    nodes = fit & session.feasible(task, skip=FIT)
    if not nodes.any():
        return []
    return room.first_fits(
        session.state, task.shape, milli, nodes=nodes, limit=NODE_LOCAL_CANDIDATES
    )


def _gang_may_fit(session: Session, job: Job, gang: list[Task], room: Room) -> bool:
    """Necessary condition: with every eligible victim evicted, each shape ``s`` of ``gang``
    has room for its ``k_s`` pods on nodes passing the other filters,
    ``SUM_n min(pods_n, k_s) >= k_s`` (:meth:`Room.pods`)."""
    session.begin_job(job)
    by_shape: dict[TaskShape, list[Task]] = {}
    for task in gang:
        by_shape.setdefault(task.shape, []).append(task)
    for shape, tasks in by_shape.items():
        task, k = tasks[0], len(tasks)
        pods = room.pods(shape, share_needed(session, task))
        if int(np.minimum(pods, k).sum()) < k:  # even on every node (then no need to filter)
            return False
        if int(np.minimum(pods[session.feasible(task, skip=FIT)], k).sum()) < k:
            return False
    return True


def _greedy(
    session: Session, job: Job, victims: list[Victim], evicting: VictimRule
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
