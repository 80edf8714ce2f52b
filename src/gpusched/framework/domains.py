"""Which network domain a gang goes to: one domain if it fits, else as few as possible.

A gang of ``need`` identical tasks asks for a level ``L`` (:class:`~gpusched.model.network.
TopologyRequest`). For every node, how many of its tasks fit right now (exact for identical
tasks: placing one lowers the node's count by exactly one)::

    fit(n) = min( cpu_free(n) // cpu,  mem_free(n) // mem,  slots(n) )   on nodes the filters pass
    slots(n) = #{g : gpu_free(n, g) >= m} // k          whole GPUs (k GPUs of m milli)
             = SUM_g gpu_free(n, g) // m                 a share m of one GPU
    room(d)  = SUM_{n in d} fit(n)                       for each domain d of a level

**Rule** (the gang's tasks are then placed by the profile's scores, restricted to the chosen
nodes):

1. *One domain, best fit.* Among the domains of ``L`` with ``room(d) >= need``, take the one
   with the least room (then the fewest nodes, then the first): a small gang fills a nearly
   full rack and leaves empty racks whole for the large gangs that need a whole rack.
2. *Preferred only, one coarser domain:* for each coarser level in turn (rack -> block), the
   best-fit domain with room, and inside it the fewest domains of ``L`` (step 3).
3. *Preferred only, fewest domains:* domains of ``L`` by room, largest first, until their room
   covers the gang; the last one is swapped for the smallest domain that still covers the
   rest. ``m`` domains are the fewest possible because no ``m - 1`` domains have room enough.
4. Otherwise a *required* gang waits (``Unschedulable``, with the best domain's room; or
   ``Unresolvable`` when no domain holds it even on an empty cluster) and a preferred one is
   placed anywhere.

Nodes without the level's label belong to no domain (they are used only by step 4).

**Bounded wait of a preferred gang** (:mod:`.domain_wait`, :func:`patience_s`). Splitting is
a last resort: before steps 2-4 split a preferred gang that one domain of ``L`` could hold on
the empty cluster, the gang may wait for one domain::

    patience(j) = DOMAIN_PATIENCE * estimate(j)          (0.25 of its estimated run time)
    t_one       = earliest start in one domain of L      (reservation search, run-time estimates)
    t_any       = earliest start anywhere                (now, if it fits split now)
    wait for one domain  iff  t_one - t_any <= patience(j)

A gang that waits holds its one-domain reservation when it is the head of the line (EASY
backfill), so small jobs do not fill that domain meanwhile. The rule is re-evaluated every
cycle from run-time estimates; the bound is on the expected extra wait at each decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.errors import ConfigError
from gpusched.framework.mig import mig_fit_count
from gpusched.framework.state import ClusterState
from gpusched.model import MILLI_PER_GPU, Job, TaskShape

__all__ = [
    "DOMAIN_PATIENCE",
    "DomainChoice",
    "choose_domain",
    "fits_one_domain",
    "patience_s",
    "task_fit",
]

BoolArray = NDArray[np.bool_]
I64 = NDArray[np.int64]

_BIG = np.iinfo(np.int64).max // 4

#: Share of its estimated run time a preferred gang may wait longer to get one domain.
DOMAIN_PATIENCE = 0.25


def task_fit(state: ClusterState, shape: TaskShape, feasible: BoolArray) -> I64:
    """``fit(n)`` of the module docstring: tasks of ``shape`` node ``n`` can take now."""
    cpu = state.cpu_free // shape.cpu_milli if shape.cpu_milli else np.full(state.size, _BIG)
    mem = state.mem_free // shape.memory_mib if shape.memory_mib else np.full(state.size, _BIG)
    fit = np.minimum(cpu, mem)
    if shape.num_gpu:
        m = shape.gpu_milli
        if m >= MILLI_PER_GPU or shape.num_gpu > 1:
            slots = (state.gpu_free >= m).sum(axis=1) // shape.num_gpu
        else:
            slots = (state.gpu_free // m).sum(axis=1)
        fit = np.minimum(fit, slots)
    elif shape.mig_profile:  # MIG instances free or creatable (framework.mig)
        fit = np.minimum(fit, mig_fit_count(state, shape.mig_profile) // shape.mig_count)
    return np.where(feasible, fit, 0).astype(np.int64)


@dataclass(frozen=True, slots=True)
class DomainChoice:
    """Where a gang may go: ``nodes`` (a mask; ``None``: anywhere) and a reason when it may
    not go anywhere now (``nodes`` is then all ``False``)."""

    nodes: BoolArray | None
    domains: tuple[str, ...] = ()
    problem: str = ""


def _room(ids: I64, fit: I64, count: int) -> I64:
    have = ids >= 0
    return np.bincount(ids[have], weights=fit[have], minlength=count).astype(np.int64)


def _best_fit(room: I64, sizes: I64, need: int) -> int | None:
    ok = np.flatnonzero(room >= need)
    if not len(ok):
        return None
    order = np.lexsort((ok, sizes[ok], room[ok]))
    return int(ok[order[0]])


def _fewest(room: I64, need: int, allowed: BoolArray) -> list[int] | None:
    """Fewest domains (step 3) among ``allowed`` ones, or ``None`` if all of them fall short."""
    cand = np.flatnonzero(allowed & (room > 0))
    order = cand[np.argsort(-room[cand], kind="stable")]
    total = 0
    picked: list[int] = []
    for d in order.tolist():
        if total >= need:
            break
        picked.append(d)
        total += int(room[d])
    if total < need:
        return None
    rest = need - (total - int(room[picked[-1]]))
    spare = [d for d in order.tolist() if d not in picked[:-1] and room[d] >= rest]
    picked[-1] = min(spare, key=lambda d: (int(room[d]), d))
    return picked


def choose_domain(
    state: ClusterState, level: int, fit: I64, need: int, *, required: bool
) -> DomainChoice:
    """Nodes a gang of ``need`` tasks may use at network level ``level`` (module docstring)."""
    net = state.network
    ids = state.domains(level)
    names = state.domain_names(level)
    count = len(names)
    room = _room(ids, fit, count)
    sizes = np.bincount(ids[ids >= 0], minlength=count).astype(np.int64)
    best = _best_fit(room, sizes, need)
    if best is not None:
        return DomainChoice(ids == best, (names[best],))
    lvl = net.levels[level].name
    if required:
        top = int(np.argmax(room)) if count else -1
        detail = (
            f"best {lvl} {names[top]!r} has room for {int(room[top])}"
            if count
            else f"no node has a {lvl} label"
        )
        return DomainChoice(
            np.zeros(state.size, dtype=bool),
            problem=f"gang needs {need} tasks in one {lvl}; {detail}",
        )
    for coarse in range(level - 1, -1, -1):
        cids = state.domains(coarse)
        cnames = state.domain_names(coarse)
        croom = _room(cids, fit, len(cnames))
        csizes = np.bincount(cids[cids >= 0], minlength=len(cnames)).astype(np.int64)
        outer = _best_fit(croom, csizes, need)
        if outer is None:
            continue
        inside = np.zeros(count, dtype=bool)
        inside[np.unique(ids[(cids == outer) & (ids >= 0)])] = True
        picked = _fewest(room, need, inside)
        if picked is not None:
            return DomainChoice(np.isin(ids, picked), tuple(names[d] for d in picked))
    picked = _fewest(room, need, np.ones(count, dtype=bool))
    if picked is not None:
        return DomainChoice(np.isin(ids, picked), tuple(names[d] for d in picked))
    return DomainChoice(None)


def fits_one_domain(state: ClusterState, level: int, shape: TaskShape, need: int) -> bool:
    """Whether ``need`` tasks of ``shape`` fit one domain of ``level`` on the empty cluster
    (model restrictions applied; cached per layout)."""
    key = ("fits-one-domain", level, shape, need)
    cache = state.layout_cache
    known = cache.get(key)
    if known is None:
        empty = state.empty()
        fit = task_fit(empty, shape, empty.model_mask(shape.gpu_models))
        ids = empty.domains(level)
        known = cache[key] = bool(
            _room(ids, fit, len(empty.domain_names(level))).max(initial=0) >= need
        )
    return bool(known)


def patience_s(state: ClusterState, job: Job, estimate: float) -> float:
    """How much later a start in one domain may be than a split start for ``job`` (module
    docstring): ``DOMAIN_PATIENCE * estimate`` for a preferred gang that one domain of its
    level could hold; 0 for every other job."""
    req = job.topology
    need = job.min_available
    if req is None or req.required or need < 2:
        return 0.0
    try:
        level = state.network.level(req.level)
    except ConfigError:
        return 0.0
    if not fits_one_domain(state, level, job.tasks[0].shape, need):
        return 0.0
    return DOMAIN_PATIENCE * estimate
