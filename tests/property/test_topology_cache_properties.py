"""The topology scores kept between calls equal the scores computed from scratch, whatever happened.

``gpu-topology`` and ``network-packing`` keep their scores between calls and recompute only
the nodes whose version stamp changed (one by one for a few, all at once for many). For random
clusters (HGX boards, PCIe boxes, L4 boxes, nodes without a topology; racks and blocks, some
nodes unlabelled) and random runs of allocations, releases, working copies (scored out of
order) and fresh states of the same nodes (a new version clock), a long-lived plugin's scores
equal ``network-packing``'s formula computed from scratch on every node, and ``gpu-topology``'s
vectorised computation of every feasible node (the session reads no other).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import cycle_context
from gpusched.framework import ClusterState
from gpusched.model import MILLI_PER_GPU, JobId, Node, Task, TaskId, TaskShape
from gpusched.model.templates import hgx_a100_node, hgx_h100_node, l4_node, pcie_pairs_node
from gpusched.plugins.network_packing import NetworkPacking
from gpusched.plugins.topology_score import TopologyScore, _Layout
from gpusched.workloads.topology_cluster import BLOCK_LABEL, RACK_LABEL

_MAKERS: list[Callable[..., Node]] = [hgx_h100_node, hgx_a100_node, pcie_pairs_node, l4_node]


def _plain(name: str, labels: dict[str, str]) -> Node:
    return Node.with_gpus(
        name, cpu_milli=64_000, memory_mib=512 * 1024, gpu_count=4, gpu_model="H100",
        gpu_memory_mib=80 * 1024, labels=labels,
    )  # fmt: skip


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    nodes = []
    for i in range(draw(st.integers(1, 60))):
        rack = draw(st.integers(-1, 5))  # -1: no labels
        labels = {} if rack < 0 else {RACK_LABEL: f"r{rack}", BLOCK_LABEL: f"b{rack // 3}"}
        kind = draw(st.integers(0, len(_MAKERS)))
        name = f"n{i}"
        nodes.append(
            _plain(name, labels) if kind == len(_MAKERS) else _MAKERS[kind](name, labels=labels)
        )
    return nodes


_SHAPES = [
    TaskShape(1000, 1024, k, milli) for k, milli in ((1, 1000), (2, 1000), (4, 1000), (8, 1000),
                                                     (1, 300), (1, 500))
]  # fmt: skip


def _allocate(state: ClusterState, rng: np.random.Generator, serial: int) -> None:
    shape = _SHAPES[int(rng.integers(len(_SHAPES)))]
    node = int(rng.integers(state.size))
    fits = np.flatnonzero(state.gpu_free[node] >= shape.gpu_milli)
    if len(fits) < shape.num_gpu or state.cpu_free[node] < shape.cpu_milli:
        return
    gpus = tuple(int(g) for g in rng.permutation(fits)[: shape.num_gpu])
    task = Task(TaskId(f"t{serial}"), JobId(f"j{serial}"), shape)
    state.allocate(task, node, tuple(sorted(gpus)))


def _step(
    states: list[ClusterState], nodes: list[Node], rng: np.random.Generator, serial: int
) -> int:
    """One random change; returns the index of the state to score next."""
    roll = rng.random()
    # Mostly the newest state; sometimes an older one, far behind what the plugins last saw.
    current = len(states) - 1 if rng.random() < 0.7 else int(rng.integers(len(states)))
    state = states[current]
    if roll < 0.6:
        _allocate(state, rng, serial)
    elif roll < 0.85:
        held = list(state.allocations)
        if held:
            state.release(held[int(rng.integers(len(held)))])
    elif roll < 0.95:
        states.append(state.copy())
        current = len(states) - 1
    else:
        states.append(ClusterState.from_nodes(nodes))  # a new clock: caches start afresh
        current = len(states) - 1
    return current


def _topology(state: ClusterState, shape: TaskShape, feasible: np.ndarray) -> np.ndarray:
    """``gpu-topology``'s scores of the feasible nodes, all computed at once (vectorised)."""
    layout = _Layout(state)
    need = min(shape.gpu_milli, MILLI_PER_GPU)
    return TopologyScore._compute(layout, state, np.flatnonzero(feasible), need, shape.num_gpu)


def _packing(state: ClusterState) -> np.ndarray:
    """``network-packing``'s formula computed from scratch (for GPU tasks)."""
    out = np.zeros(state.size)
    if not state.network.levels:
        return out
    ids = state.domains(len(state.network.levels) - 1)
    have = np.flatnonzero(ids >= 0)
    if not len(have):
        return out
    count = int(ids.max()) + 1
    cap = np.bincount(ids[have], weights=state.gpu_cap[have].sum(axis=1), minlength=count)
    idle = np.bincount(ids[have], weights=state.gpu_idle[have], minlength=count)
    busy = np.where(cap > 0, 1.0 - idle / np.maximum(cap, 1), 0.0)
    out[have] = 100.0 * busy[ids[have]]
    return out


@settings(max_examples=60, deadline=None)
@given(
    clusters(), st.integers(0, 2**32 - 1), st.lists(st.integers(1, 120), min_size=1, max_size=12)
)
def test_kept_topology_scores_equal_fresh_ones(
    nodes: list[Node], seed: int, batches: list[int]
) -> None:
    rng = np.random.default_rng(seed)
    states = [ClusterState.from_nodes(nodes)]
    topo, packing = TopologyScore(), NetworkPacking()
    ctx = cycle_context()
    serial = 0
    for batch in batches:
        current = len(states) - 1
        for _ in range(batch):
            serial += 1
            current = _step(states, nodes, rng, serial)
        state = states[current]
        for _ in range(2):
            shape = _SHAPES[int(rng.integers(len(_SHAPES)))]
            task = Task(TaskId("probe"), JobId("probe"), shape)
            feasible = rng.random(state.size) < 0.7
            got = np.array(topo.score(ctx, task, state, feasible))
            assert np.array_equal(got[feasible], _topology(state, shape, feasible))
            got = np.array(packing.score(ctx, task, state, feasible))
            assert np.array_equal(got, _packing(state))
