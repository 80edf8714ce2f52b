"""``gpu-topology``: prefer nodes where a task gets well-connected GPUs and breaks the fewest
well-connected free sets.

For a task of ``k`` whole GPUs on node ``n`` with free GPUs ``F`` (bit mask), let ``S`` be the
set the ``topology-aware-gpu`` picker takes there (:mod:`.topology_aware`) and, for a set ``T``
of ``j`` GPUs, its *quality*::

    q(T) = 2 * worst_link(T) + local(T)        in 0..7 (a single GPU: 7)
    local(T) = 1 if T spans as few NUMA nodes as any j GPUs of the node could, else 0

with ``worst_link`` the class ``SYS 0 < NODE 1 < PCIE 2 < NVLINK 3``. What a free set offers to
the tasks that come later is the quality of its best set of every size::

    V(M) = SUM_{j=2..|M|} q(best_j(M))          best_j: the best-key j-subset (0 <= V <= 49)
    loss(n) = V(F) - V(F \\ S)                   0 <= loss <= 49 (removing GPUs never helps)

and the score is lexicographic: the quality of the task's own set, then best fit (``left(n)``:
whole GPUs still free on the node afterwards, fewer is better), then the least loss::

    rank(n)  = q(S) * 9 * 50 + (8 - left(n)) * 50 + 49 - loss(n)
    score(n) = 100 * rank(n) / (7 * 9 * 50 + 8 * 50 + 49)          (denominator 3599)

So a node that offers an NVLink set beats one that offers only a split set whatever else
differs (12.5 points a quality step); among equals the fullest node wins, which keeps whole
boards whole for the tasks that need them (a 2-GPU task takes the last free NVLink pair of a
busy board, not two GPUs of an idle board); among nodes left equally full, the one whose best
sets of every size suffer least: on an 8-GPU board with 4 free, a 2-GPU task prefers the node
whose free GPUs are split over both NUMA nodes and keeps the NUMA-local group of 4 elsewhere.
The loss alone would not do as the second key: it counts only the best set of each size, so
taking one of two free NVLink pairs costs nothing while taking the last pair of a board does.
Sharing tasks (one GPU, less than all of it) score 100 where a partly used GPU can take them
(no whole GPU is cut), else as a 1-GPU task. Nodes without a topology, or with more than 8
GPUs, score 50; CPU-only tasks score 0 everywhere.

**Cost.** One table ``score[mask][k]`` per distinct topology (``2^G * (G + 1)`` entries from the
picker's lookup tables, built once); a node's score is a mask and one lookup, and kept per
request with each node's version stamp so only feasible nodes changed since the last request
of the same shape are recomputed: vectorised over them when there are many (the first request
of a shape), one by one in Python when a few (the usual case: one placement since the last
request), which avoids a dozen NumPy calls on one-element arrays. Both give the same floats
(the same table entries).
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import MILLI_PER_GPU, Task
from gpusched.model.topology import LinkClass, NodeTopology, SetKey
from gpusched.plugins._util import LayoutCaches
from gpusched.plugins.topology_aware import TABLE_MAX_GPUS, connectivity_tables

__all__ = ["NEUTRAL_SCORE", "TopologyScore", "score_table"]

#: Score of nodes whose topology is unknown (or above 8 GPUs).
NEUTRAL_SCORE = 50.0
_QMAX = 7
_LMAX = 49
_GMAX = TABLE_MAX_GPUS
_DENOM = _QMAX * (_GMAX + 1) * (_LMAX + 1) + _GMAX * (_LMAX + 1) + _LMAX

#: A shape's scores per node and the stamps they were computed at.
_Scores = tuple[FloatArray, NDArray[np.int64]]


def _min_span(topology: NodeTopology) -> list[int]:
    """``span[j]``: fewest NUMA nodes any ``j`` GPUs of the node span."""
    per_numa = sorted(
        (
            sum(1 for d in topology.devices if d.numa_node == n)
            for n in range(len(topology.numa_cpu_milli))
        ),
        reverse=True,
    )
    span = [0]
    for j in range(1, topology.gpu_count + 1):
        total, used = 0, 0
        for c in per_numa:
            if total >= j:
                break
            total += c
            used += 1
        span.append(used)
    return span


def _quality(key: SetKey, j: int, span: list[int]) -> int:
    worst = min(key[0], int(LinkClass.NVLINK))
    return 2 * worst + (1 if -key[2] <= span[j] else 0)


@functools.lru_cache(maxsize=64)
def score_table(topology: NodeTopology) -> NDArray[np.float64]:
    """``table[mask, k]``: the score (module docstring) of a node with this topology whose free
    GPUs are ``mask``, for a task of ``k`` GPUs (0 where ``k`` GPUs are not free)."""
    tables = connectivity_tables(topology)
    g = tables.gpu_count
    span = _min_span(topology)
    full = 1 << TABLE_MAX_GPUS
    value = [0] * (1 << g)
    for mask in range(1 << g):
        row = tables.best[mask]
        value[mask] = sum(
            _quality(key, j, span) for j in range(2, g + 1) if (key := row[j]) is not None
        )
    out = np.zeros((full, TABLE_MAX_GPUS + 1), dtype=np.float64)
    for mask in range(1 << g):
        for k in range(1, g + 1):
            chosen = tables.choice[mask][k]
            if chosen is None:
                continue
            bits = sum(1 << b for b in chosen)
            q = _quality(tables.key[bits], k, span) if k > 1 else _QMAX
            loss = value[mask] - value[mask ^ bits]
            left = bin(mask).count("1") - k
            rank = q * (_GMAX + 1) * (_LMAX + 1) + (_GMAX - left) * (_LMAX + 1) + _LMAX - loss
            out[mask, k] = 100.0 * rank / _DENOM
    out.setflags(write=False)
    return out


class _Layout:
    """Per cluster layout: each node's table index and the stacked tables."""

    __slots__ = ("index", "index_list", "neutral", "tables")

    def __init__(self, state: ClusterState) -> None:
        distinct: dict[NodeTopology, int] = {}
        index = []
        for node in state.nodes:
            topo = node.topology
            if topo is None or topo.gpu_count > TABLE_MAX_GPUS:
                index.append(-1)
            else:
                index.append(distinct.setdefault(topo, len(distinct)))
        neutral = np.full((1, 1 << TABLE_MAX_GPUS, TABLE_MAX_GPUS + 1), NEUTRAL_SCORE)
        stacked = [score_table(t)[None] for t in distinct] + [neutral]
        self.tables = np.concatenate(stacked)
        self.index = np.array([len(distinct) if i < 0 else i for i in index], dtype=np.int64)
        self.index_list: list[int] = self.index.tolist()
        self.neutral = len(distinct)

    def one(self, state: ClusterState, node: int, need: int, k: int) -> float:
        """The score of ``node`` (what :meth:`TopologyScore._compute` gives it), in Python."""
        row = state.gpu_free[node, :TABLE_MAX_GPUS].tolist()
        whole = 0
        for g, free in enumerate(row):
            if free >= MILLI_PER_GPU:
                whole |= 1 << g
        topo = self.index_list[node]
        partial = need < MILLI_PER_GPU and topo != self.neutral
        if partial and any(need <= free < MILLI_PER_GPU for free in row):
            return 100.0
        return float(self.tables[topo, whole, min(k, TABLE_MAX_GPUS)])


#: Up to this many stale nodes a request recomputes them one by one (else vectorised).
_FEW_STALE = 8


class TopologyScore:
    """Connectivity of the task's set first, least damage to free sets second (docstring)."""

    name = "gpu-topology"
    maturity = "experimental: unit tests, scenario, simulated benchmark (docs/topology.md)"

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], _Scores] = {}
        self._layout: _Layout | None = None
        # The node list and version clock the cache is for, held (not their ids: a new
        # state's arrays may reuse a freed one's id, and its clock restarts the stamps).
        self._owner: tuple[object, object] | None = None
        self._kept: LayoutCaches[tuple[_Layout, dict[tuple[int, int], _Scores]]] = LayoutCaches()

    def _bind(self, state: ClusterState) -> _Layout:
        owner = self._owner
        if (
            self._layout is None
            or owner is None
            or owner[0] is not state.cpu_cap
            or owner[1] is not state.clock
        ):

            def make() -> tuple[_Layout, dict[tuple[int, int], _Scores]]:
                cached = state.layout_cache.get("gpu-topology")
                if not isinstance(cached, _Layout):
                    cached = _Layout(state)
                    state.layout_cache["gpu-topology"] = cached
                return cached, {}

            self._layout, self._cache = self._kept.get(state, make)
            self._owner = (state.cpu_cap, state.clock)
        return self._layout

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        if s.num_gpu == 0:
            return np.zeros(state.size)
        layout = self._bind(state)
        need = min(s.gpu_milli, MILLI_PER_GPU)
        key = (need, s.num_gpu)
        entry = self._cache.get(key)
        if entry is None:
            entry = (np.zeros(state.size), np.full(state.size, -1, dtype=np.int64))
            self._cache[key] = entry
        scores, stamps = entry
        stale = (feasible & (stamps != state.version)).nonzero()[0]  # 1-D: as flatnonzero
        if len(stale) > _FEW_STALE:
            scores[stale] = self._compute(layout, state, stale, need, s.num_gpu)
            stamps[stale] = state.version[stale]
        elif len(stale):
            for node in stale.tolist():
                scores[node] = layout.one(state, node, need, s.num_gpu)
                stamps[node] = state.version[node]
        return scores

    @staticmethod
    def _compute(
        layout: _Layout, state: ClusterState, idx: NDArray[np.intp], need: int, k: int
    ) -> FloatArray:
        free = state.gpu_free[idx, :TABLE_MAX_GPUS]
        weights = 1 << np.arange(free.shape[1], dtype=np.int64)
        whole = ((free >= MILLI_PER_GPU) * weights).sum(axis=1)
        topo = layout.index[idx]
        kk = min(k, TABLE_MAX_GPUS)
        out = layout.tables[topo, whole, kk]
        if need < MILLI_PER_GPU:
            partial = ((free >= need) & (free < MILLI_PER_GPU)).any(axis=1)
            out = np.where(partial & (topo < len(layout.tables) - 1), 100.0, out)
        return np.asarray(out, dtype=np.float64)
