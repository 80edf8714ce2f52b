"""``topology-aware-gpu``: give a task the best-connected free GPUs of its node, and keep the
well-connected sets that remain whole for the tasks that need them.

Connectivity of a GPU set ``S`` (from :mod:`gpusched.model.topology`), larger is better::

    key(S) = ( min_{i<j in S} link(i, j),  SUM_{i<j in S} link(i, j),  -#NUMA nodes of S )

with ``link`` the pair's class ``SYS 0 < NODE 1 < PCIE 2 < NVLINK 3`` (an NVLink clique
before a split set, then more good links, then NUMA locality as the tie-break).

**Rule.** Let ``F`` be the node's GPUs with at least the task's share free and ``k`` the task's
GPU count. Among the ``k``-subsets of ``F`` with the best key, take the one whose removal
damages the rest least: maximise, lexicographically,

    damage_guard(F \\ S) = ( best_k'(F \\ S)  for k' = |F \\ S|, |F \\ S| - 1, ..., 2 )

where ``best_k'(R)`` is the best key among ``k'``-subsets of ``R``: the remainder stays as well
connected as possible for the largest tasks first. Remaining ties go to the lowest GPU indices.
A single GPU always has the best key, so for 1-GPU tasks only the second step acts (on an
8-GPU NVSwitch board with 2 NUMA nodes, a 1-GPU task goes to the NUMA node that has fewer free
GPUs, so the other keeps a NUMA-local group of 4).

**Sharing tasks** (one GPU, less than all of it) first go by best fit: the GPU with the smallest
sufficient free share; only when that is a whole free GPU does the rule above choose which.

**NUMA-local CPUs** (``numa_local_cpus``, :mod:`gpusched.framework.numa`): the set is
:func:`numa_local_set`, the best-connected set whose CPU split fits the free CPUs of its NUMA
nodes.

**Nodes without a topology** fall back to ``best-fit-gpu``. Nodes with more than 8 GPUs use a
greedy set (grow from each free GPU by the best next key) without the damage step.

**Cost.** For a topology of ``G <= 8`` GPUs, lookup tables over all free masks (``2^G``) and
sizes are built once per distinct topology: every (mask, submask) pair is visited twice,
``3^G`` = 6,561 pairs for ``G = 8`` (about 20 ms in CPython). A pick is then O(G) to build the
mask plus one table lookup; tables are shared by all nodes with an equal topology.

:func:`is_best_connected_set` answers, for a metric, whether a placed set was the best
available: ``key(chosen) == best_k(free)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from itertools import combinations

from gpusched.errors import InvariantError
from gpusched.framework import ClusterState, CycleContext
from gpusched.model import MILLI_PER_GPU, Task
from gpusched.model.topology import NodeTopology, SetKey
from gpusched.plugins.pickers import BestFitGpu

__all__ = [
    "ConnectivityTables",
    "TopologyAwareGpu",
    "best_connected_key",
    "connectivity_tables",
    "is_best_connected_set",
    "numa_local_set",
]

#: Largest GPU count for which full lookup tables are built.
TABLE_MAX_GPUS = 8


def _bits(mask: int) -> tuple[int, ...]:
    return tuple(g for g in range(mask.bit_length()) if mask >> g & 1)


class ConnectivityTables:
    """Best key and chosen set for every free mask and size, for one topology (``G <= 8``).

    Attributes:
        key: ``key[s]`` is the connectivity key of the GPU set with bitmask ``s``.
        best: ``best[mask][k]`` is the best key among ``k``-subsets of ``mask`` (None if none).
        choice: ``choice[mask][k]`` is the set the picker's rule takes (None if none).
    """

    __slots__ = ("best", "choice", "gpu_count", "key")

    def __init__(self, topology: NodeTopology) -> None:
        g = topology.gpu_count
        if g > TABLE_MAX_GPUS:
            raise InvariantError(f"tables are for <= {TABLE_MAX_GPUS} GPUs, got {g}")
        full = 1 << g
        self.gpu_count = g
        members = [_bits(s) for s in range(full)]
        self.key: tuple[SetKey, ...] = tuple(topology.set_key(m) for m in members)
        best: list[list[SetKey | None]] = [[None] * (g + 1) for _ in range(full)]
        for mask in range(full):
            row = best[mask]
            sub = mask
            while sub:
                k = len(members[sub])
                cur = row[k]
                if cur is None or self.key[sub] > cur:
                    row[k] = self.key[sub]
                sub = (sub - 1) & mask
        guard = [tuple(best[r][j] for j in range(len(members[r]), 1, -1)) for r in range(full)]
        choice: list[list[tuple[int, ...] | None]] = [[None] * (g + 1) for _ in range(full)]
        for mask in range(full):
            chosen: list[int] = [0] * (g + 1)
            sub = mask
            while sub:
                k = len(members[sub])
                if self.key[sub] == best[mask][k]:
                    prev = chosen[k]
                    if not prev:
                        chosen[k] = sub
                    else:
                        mine, theirs = guard[mask ^ sub], guard[mask ^ prev]
                        if mine > theirs or (mine == theirs and members[sub] < members[prev]):
                            chosen[k] = sub
                sub = (sub - 1) & mask
            choice[mask] = [members[s] if s else None for s in chosen]
        self.best: tuple[tuple[SetKey | None, ...], ...] = tuple(tuple(r) for r in best)
        self.choice: tuple[tuple[tuple[int, ...] | None, ...], ...] = tuple(
            tuple(r) for r in choice
        )


@functools.lru_cache(maxsize=64)
def connectivity_tables(topology: NodeTopology) -> ConnectivityTables:
    """The lookup tables of ``topology`` (built once per distinct topology, then cached)."""
    return ConnectivityTables(topology)


def _mask(gpus: Iterable[int]) -> int:
    m = 0
    for g in gpus:
        m |= 1 << g
    return m


def best_connected_key(topology: NodeTopology, free_mask: int, k: int) -> SetKey | None:
    """The best connectivity key among ``k``-subsets of the GPUs in ``free_mask`` (bit ``g`` =
    GPU ``g``), or None when fewer than ``k`` are free."""
    if k <= 0 or k > bin(free_mask).count("1"):
        return None
    if topology.gpu_count <= TABLE_MAX_GPUS:
        return connectivity_tables(topology).best[free_mask][k]
    return max(topology.set_key(c) for c in combinations(_bits(free_mask), k))


def is_best_connected_set(
    topology: NodeTopology, free_mask: int, chosen: Iterable[int], *, include_numa: bool = True
) -> bool:
    """Whether ``chosen`` is a best-connected set among the GPUs free before it was placed.

    ``free_mask`` has bit ``g`` set when GPU ``g`` could have been given (it must include every
    chosen GPU). With ``include_numa=False`` only the link part ``(worst, sum)`` of the key is
    compared. Cost: one table lookup for ``G <= 8`` GPUs, else ``C(G, k)`` keys.
    """
    members = tuple(sorted(set(chosen)))
    if _mask(members) & ~free_mask:
        raise ValueError(f"chosen GPUs {members} are not all in free mask {free_mask:#b}")
    best = best_connected_key(topology, free_mask, len(members))
    if best is None:
        return False
    mine = topology.set_key(members)
    return mine[:2] == best[:2] if not include_numa else mine == best


@functools.lru_cache(maxsize=64)
def _numa_groups(topology: NodeTopology) -> tuple[int, ...]:
    """GPU masks of every non-empty set of NUMA nodes, fewest NUMA nodes first."""
    per_numa = [0] * topology.numa_count
    for g, dev in enumerate(topology.devices):
        per_numa[dev.numa_node] |= 1 << g
    sets = range(1, 1 << topology.numa_count)
    out = []
    for numa_set in sorted(sets, key=lambda t: (bin(t).count("1"), t)):
        out.append(sum(m for k, m in enumerate(per_numa) if numa_set >> k & 1))
    return tuple(out)


def numa_local_set(state: ClusterState, node: int, task: Task) -> tuple[int, ...] | None:
    """The GPUs a task asking for NUMA-local CPUs gets on ``node``, or ``None`` if none fit.

    With ``F`` the node's whole free GPUs and ``k`` the task's count, for each set ``T`` of
    NUMA nodes (fewest first): ``S_T`` = the picker's choice among ``F`` restricted to the
    GPUs of ``T`` (best key, least damage); it qualifies if ``numa_split(S_T, cpu)`` fits the
    free CPUs of every NUMA node (:mod:`gpusched.framework.numa`). The answer is the
    qualifying ``S_T`` with the best key (ties: the first, i.e. fewer NUMA nodes). Whole GPUs
    on topologies of at most 8 GPUs only (else ``None``).
    """
    topo = state.nodes[node].topology
    k = task.shape.num_gpu
    if topo is None or topo.gpu_count > TABLE_MAX_GPUS or not k:
        return None
    tables = connectivity_tables(topo)
    row = state.gpu_free[node]
    free = sum(1 << g for g in range(topo.gpu_count) if row[g] >= MILLI_PER_GPU)
    best: tuple[SetKey, tuple[int, ...]] | None = None
    for group in _numa_groups(topo):
        mask = free & group
        if bin(mask).count("1") < k:
            continue
        chosen = tables.choice[mask][k]
        if chosen is None:
            continue
        if not state.numa.fits(node, topo.numa_split(chosen, task.shape.cpu_milli)):
            continue
        key = topo.set_key(chosen)
        if best is None or key > best[0]:
            best = (key, chosen)
    return None if best is None else best[1]


def _greedy(topology: NodeTopology, free: tuple[int, ...], k: int) -> tuple[int, ...]:
    """Best set grown greedily from each free GPU (for topologies above 8 GPUs)."""
    best: tuple[SetKey, tuple[int, ...]] | None = None
    for start in free:
        group = [start]
        while len(group) < k:
            rest = [g for g in free if g not in group]
            nxt = max(rest, key=lambda g: (topology.set_key([*group, g]), -g))
            group.append(nxt)
        members = tuple(sorted(group))
        cand = (topology.set_key(members), members)
        if best is None or cand[0] > best[0]:
            best = cand
    if best is None:
        raise InvariantError("no free GPU to grow a set from")
    return best[1]


class TopologyAwareGpu:
    """Best-connected set, least damage to the rest (see module docstring)."""

    name = "topology-aware-gpu"
    maturity = "experimental: unit and property tests; not yet in a built-in policy"

    def __init__(self) -> None:
        self._fallback = BestFitGpu()

    def _tables(self, state: ClusterState, node: int) -> ConnectivityTables | None:
        cache = state.layout_cache
        per_node = cache.get("topology-aware-gpu:tables")
        if per_node is None:
            per_node = [None] * state.size
            cache["topology-aware-gpu:tables"] = per_node
        assert isinstance(per_node, list)
        tables = per_node[node]
        if tables is None:
            topo = state.nodes[node].topology
            if topo is None or topo.gpu_count > TABLE_MAX_GPUS:
                return None
            tables = per_node[node] = connectivity_tables(topo)
        assert isinstance(tables, ConnectivityTables)
        return tables

    def pick(
        self, ctx: CycleContext, task: Task, state: ClusterState, node: int
    ) -> tuple[int, ...]:
        k = task.shape.num_gpu
        if k == 0:
            return ()
        if task.shape.numa_local_cpus:
            chosen_local = numa_local_set(state, node, task)
            if chosen_local is None:
                raise InvariantError(
                    f"{state.names[node]} has no {k} free GPUs whose NUMA nodes have "
                    f"{task.shape.cpu_milli} millicores free for task {task.id}"
                )
            return chosen_local
        topo = state.nodes[node].topology
        if topo is None:
            return self._fallback.pick(ctx, task, state, node)
        free = state.gpu_free[node].tolist()
        need = task.shape.gpu_milli
        if k == 1 and need < MILLI_PER_GPU:
            fit = min((f for f in free if f >= need), default=None)
            if fit is None:
                raise InvariantError(f"no GPU of {state.names[node]} has {need} milli free")
            if fit < MILLI_PER_GPU:
                return (free.index(fit),)
            need = MILLI_PER_GPU
        tables = self._tables(state, node)
        if tables is None:
            ok = tuple(g for g in range(topo.gpu_count) if free[g] >= need)
            if len(ok) < k:
                raise InvariantError(f"{state.names[node]} has {len(ok)} GPUs free, task needs {k}")
            return _greedy(topo, ok, k)
        mask = 0
        for g in range(tables.gpu_count):
            if free[g] >= need:
                mask |= 1 << g
        chosen = tables.choice[mask][k] if k <= tables.gpu_count else None
        if chosen is None:
            raise InvariantError(
                f"{state.names[node]} has {bin(mask).count('1')} GPUs with {need} milli free; "
                f"task {task.id} needs {k}"
            )
        return chosen
