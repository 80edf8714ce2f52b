"""Node-local victim search: the victims on one node that let a pod fit there.

A one-pod preemptor only needs room on the node it lands on, so its search is complete over
nodes: :meth:`~gpusched.actions.victim_index.VictimIndex.first_fits` finds, on every node at
once, the cheapest prefix of eligible victims that makes the pod fit; :func:`node_local`
refines the best few (:func:`on_node`: per-victim eligibility, then reprieve) and checks the
cheapest with the profile's placement -- a check :func:`row_check_is_placement` proves
redundant for plain pods. Gangs go pod by pod (:func:`gang_node_local`), so their victims sit
on few nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from gpusched.actions.victim_fit import (
    FIT,
    NODE_LOCAL_CANDIDATES,
    Mask,
    MostFree,
    VictimRule,
    fits,
    set_cost,
    share_needed,
)
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.framework import Session, Statement, TieBreak
from gpusched.framework.sharing import variants
from gpusched.model import (
    MILLI_PER_GPU,
    Job,
    Task,
)

__all__ = [
    "DETERMINISTIC",
    "STATIC_FILTERS",
    "gang_node_local",
    "node_local",
    "on_node",
    "row_check_is_placement",
]


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


def on_node(
    session: Session,
    node: int,
    task: Task,
    victims: list[Victim],
    evicting: VictimRule,
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


def node_local(
    session: Session,
    job: Job,
    task: Task,
    candidates: list[tuple[int, list[Victim]]],
    evicting: VictimRule,
    *,
    most_free: MostFree | None = None,
) -> list[Victim] | None:
    """The least disruptive set of victims on one node that lets ``task`` fit there
    (``most_free``: kept answers for :func:`row_check_is_placement`).

    Nodes must pass every filter but the resource fit. :meth:`VictimIndex.first_fits` found,
    on every such node at once, the first-fit prefix of its eligible victims (a gang spanning
    nodes is a candidate on each, freeing its pods there) and kept the
    :data:`NODE_LOCAL_CANDIDATES` nodes with the cheapest prefixes (:func:`set_cost`):
    ``candidates``. Each is refined by :func:`on_node` (per-victim eligibility, reprieve), and
    the cheapest sets are checked in turn with the profile's full placement. Returns the first
    that passes (empty: ``task`` fits as it is), or ``None`` when
    every candidate failed the full check (the caller falls back to the global search).

    When the row test is the full check (:func:`row_check_is_placement`) only the first
    cheapest set is wanted, and ``task`` fits on no node as it is, so every set holds a
    victim: a node whose cheapest single victim already costs at least the best set so far
    (:func:`_floor`) cannot give a cheaper one (a later equal one loses the tie) and is
    skipped.
    """
    if candidates and row_check_is_placement(session, task, most_free):
        best: list[Victim] | None = None
        cost = (0, 0, 0, 0)
        for node, victims in candidates:
            if best is not None and _floor(victims) >= cost:
                continue
            got = on_node(session, node, task, victims, evicting)
            if got is None:
                continue
            got_cost = set_cost(got)
            if best is None or got_cost < cost:
                best, cost = got, got_cost
        return best
    sets = []
    for node, victims in candidates:
        got = on_node(session, node, task, victims, evicting)
        if got is not None:
            sets.append(got)
    sets.sort(key=set_cost)
    original = session.state
    for best in sets:
        session.state = scratch = original.copy()
        try:
            scratch.release_many(t.id for v in best for t in v.tasks)
            if fits(session, job):
                return best
        finally:
            session.state = original
    return None


def _floor(victims: list[Victim]) -> tuple[int, int, int, int]:
    """A floor under :func:`set_cost` of every non-empty subset of ``victims``: the cheapest
    one-victim set, ``min_v set_cost([v])``. A set with a whole job has at least one, and a top
    priority at least that job's; one without has members only; either frees at least one
    victim's GPUs and evicts at least one."""
    return min(
        (1, v.run.job.priority, v.gpu_milli, 1) if v.whole else (0, _NO_TOP, v.gpu_milli, 1)
        for v in victims
    )


#: :func:`set_cost`'s top priority of a set without whole jobs.
_NO_TOP = -(2**62)


#: Filters whose verdict for a task without NUMA-local CPUs or MIG instances depends on the
#: node alone, never on its free resources: evictions cannot change it.
STATIC_FILTERS = frozenset({"gpu-model", "node-constraints", "numa-local-cpu"})

#: Score plugins and GPU pickers known to draw nothing from the cycle's random source and to
#: keep only per-node caches stamped with node versions (or exact integer ones, or, as
#: node-preference and spare-pinned-models, per-layout values free resources never change),
#: so a trial placement on a scratch copy's changed nodes leaves nothing that a later
#: placement reads.
DETERMINISTIC = frozenset(
    {
        "fgd",
        "node-preference",
        "spare-pinned-models",
        "gpu-topology",
        "network-packing",
        "best-fit-gpu",
        "first-fit-gpu",
        "topology-aware-gpu",
    }
)


def row_check_is_placement(session: Session, task: Task, most_free: MostFree | None = None) -> bool:
    """Whether :func:`on_node`'s row test already answers :func:`node_local`'s full check
    (``most_free``: kept answers to the GPU term below).

    The check releases the chosen victims on a scratch copy and runs the profile's placement
    for ``task`` (the job's one unplaced pod). It succeeds iff some node passes every filter
    there. The candidate node ``n`` passed the filters other than the resource fit on the
    current state (a candidate); when those filters are static (:data:`STATIC_FILTERS`) their
    verdict on ``n`` stands after the release, and the resource fit on ``n`` after it is
    exactly the row test::

        cpu_n + SUM cpu(v) >= c,   mem_n + SUM mem(v) >= m,
        #{g : gpu_n[g] + SUM gpu(v)[g] >= s} >= k

    (plain GPUs: no MIG, no share variants, no NUMA-local CPUs), so the check would succeed
    on its first set. Skipping it must also leave every later decision alone: with a
    ``first`` tie break and deterministic plugins (:data:`DETERMINISTIC`) the check draws no
    random numbers, and when ``task`` fits on no node as it is the scratch placement scores
    only nodes the release changed, whose scratch version stamps no later state carries -- so
    no cache entry it would have made is ever read. Otherwise (``False``) the check is run.
    (That ``task`` fits nowhere as it is shows first, cheaply, when no node has ``k`` GPUs
    with its share free: the resource fit's GPU term.)
    """
    profile = session.profile
    s = task.shape
    if (
        profile.tie_break is not TieBreak.FIRST
        or s.mig_profile
        or s.numa_local_cpus
        or session.restrict is not None
        or profile.gpu_picker.name not in DETERMINISTIC
        or any(plugin.name not in DETERMINISTIC for plugin, _ in profile.scores)
        or any(f.name != FIT and f.name not in STATIC_FILTERS for f in profile.filters)
        or variants(session.state, s) is not None
    ):
        return False
    if profile.gpu_as_integer and s.is_sharing:  # as place_task sees it
        task = Task(task.id, task.job, replace(s, gpu_milli=MILLI_PER_GPU))
    k = s.num_gpu
    if k:
        state, milli = session.state, task.shape.gpu_milli
        if (most_free or MostFree())(state, milli) < k:
            return True  # no node has the GPUs free: the resource fit fails everywhere
    return not session.feasible(task).any()


def gang_node_local(
    session: Session,
    job: Job,
    gang: list[Task],
    index: VictimIndex,
    *,
    eligible: Mask,
    evicting: VictimRule,
) -> list[Victim] | None:
    """Gangs, pod by pod on a scratch state: a pod that fits somewhere now is placed with the
    profile's placement; otherwise it takes the least disruptive victims on one node, as a
    one-pod preemptor would (:func:`node_local`, on the state the pods before it left), and is
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
                share_needed(session, task),
                open_,
                nodes=session.feasible(task, skip=FIT),
                limit=NODE_LOCAL_CANDIDATES,
            )
            best: list[Victim] | None = None
            where = -1
            for node, victims in candidates:
                got = on_node(session, node, task, victims, evicting, prior=taken)
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
        return taken if fits(session, job) else None
    finally:
        session.state = original
