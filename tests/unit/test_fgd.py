"""FGD: scores as floor(100 * sigmoid((F(before) - F(after)) / 1000)), the GPU it picks, and
the incremental caches (scores computed after many changes equal a fresh plugin's)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from builders import (
    TaskBuilder,
    cycle_context,
    fgd_cache_mismatches,
    make_node,
    make_state,
    make_task,
    occupy,
    shape,
)
from gpusched.errors import ConfigError
from gpusched.framework import ClusterState, PluginContext
from gpusched.model import JobId, NodeName, Task, TaskId, TaskShape
from gpusched.plugins.fgd import Fgd
from gpusched.plugins.fragmentation import TargetWorkload

# Target workload: one type, a whole GPU with 1 CPU (probability 1). Then
#   F(n) = SUM of GPUs with less than 1000 free, if some GPU is fully free and cpu >= 1000,
#        = idle(n) otherwise.
WHOLE_GPU_TARGET = [shape().cpu(1).gpus(1).shape()]


def sigmoid_score(delta: float) -> float:
    return float(math.floor(100.0 / (1.0 + math.exp(-delta / 1000.0))))


def fgd() -> Fgd:
    return Fgd.from_args({}, PluginContext(workload_hint=WHOLE_GPU_TARGET))


def fgd_cluster() -> ClusterState:
    """GPU free shares (all nodes 8 CPU):

    idle-2:       [1000, 1000]   F = 0
    half-first:   [500, 1000]    F = 500
    half-last:    [1000, 500]    F = 500
    single-half:  [500]          F = 500 (no fully free GPU: all idle is fragment)
    starved:      [1000, 1000] with 1.5 CPU free   F = 0
    """
    state = make_state(
        make_node("idle-2").cpu(8).gpus(2),
        make_node("half-first").cpu(8).gpus(2),
        make_node("half-last").cpu(8).gpus(2),
        make_node("single-half").cpu(8).gpus(1),
        make_node("starved").cpu(8).gpus(2),
    )
    occupy(state, "half-first", gpus=(0,), gpu_milli=500)
    occupy(state, "half-last", gpus=(1,), gpu_milli=500)
    occupy(state, "single-half", gpus=(0,), gpu_milli=500)
    occupy(state, "starved", cpu_milli=6500)
    return state


def test_sigmoid_reference_values() -> None:
    assert [sigmoid_score(d) for d in (-2000, -500, 0, 500)] == [11.0, 37.0, 50.0, 62.0]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(0.5).share(500),
            [
                # idle-2: after [500,1000] F=500; delta = 0 - 500 = -500        -> 37
                37.0,
                # half-first: GPU0 -> [0,1000] F=0; delta = 500 - 0 = 500      -> 62
                62.0,
                # half-last: GPU1 -> [1000,0] F=0; delta 500                   -> 62
                62.0,
                # single-half: [0] has no free GPU, F = idle = 0; delta 500    -> 62
                62.0,
                # starved: 1.5 CPU - .5 = 1 CPU still hosts; like idle-2      -> 37
                37.0,
            ],
            id="half-gpu-fills-the-half-used-gpu",
        ),
        pytest.param(
            make_task().cpu(1).gpus(1),
            [
                # idle-2: after [0,1000] F=0; delta 0                          -> 50
                50.0,
                # half-first: after [500,0]: no fully free GPU, F = 500; delta 0 -> 50
                50.0,
                50.0,  # half-last: same
                0.0,  # single-half: infeasible (not scored, cached default 0)
                # starved: after cpu .5 < 1: F = idle = 1000; delta -1000     -> 26
                26.0,
            ],
            id="whole-gpu",
        ),
        pytest.param(
            make_task().cpu(1),
            [
                50.0,  # idle-2: cpu 8 -> 7 still hosts, delta 0
                50.0,  # half-first: same
                50.0,  # half-last: same
                50.0,  # single-half: F = idle = 500 before and after, delta 0
                # starved: 1.5 -> .5 CPU: the idle 2000 becomes fragment; delta -2000 -> 11
                11.0,
            ],
            id="cpu-only-task-on-a-cpu-starved-node",
        ),
    ],
)
def test_fgd_scores(task: TaskBuilder, expected: list[float]) -> None:
    state = fgd_cluster()
    t = task.build()
    feasible = np.array([True, True, True, t.shape.num_gpu == 0 or t.shape.is_sharing, True])
    assert fgd().score(cycle_context(), t, state, feasible).tolist() == expected


@pytest.mark.parametrize(
    ("task", "node", "expected"),
    [
        pytest.param(make_task().cpu(1).share(500), "half-first", (0,), id="share-fills-gpu-0"),
        pytest.param(make_task().cpu(1).share(500), "half-last", (1,), id="share-fills-gpu-1"),
        pytest.param(make_task().cpu(1).share(500), "idle-2", (0,), id="share-ties-lowest-gpu"),
        pytest.param(make_task().cpu(1).share(300), "half-last", (1,), id="share-300-best-gpu"),
        pytest.param(make_task().cpu(1).gpus(1), "half-first", (1,), id="whole-gpu-fully-free"),
        pytest.param(make_task().cpu(1).gpus(2), "idle-2", (0, 1), id="two-whole-gpus"),
        pytest.param(make_task().cpu(1), "idle-2", (), id="cpu-only-no-gpu"),
    ],
)
def test_fgd_picks_the_gpu_its_score_assumed(
    task: TaskBuilder, node: str, expected: tuple[int, ...]
) -> None:
    state = fgd_cluster()
    plugin = fgd()
    t = task.build()
    plugin.score(cycle_context(), t, state, np.ones(state.size, dtype=bool))
    assert plugin.pick(cycle_context(), t, state, state.index[NodeName(node)]) == expected


def test_fgd_pick_without_a_fresh_score_takes_the_first_sufficient_gpu() -> None:
    state = fgd_cluster()
    # Never scored: no cache entry, so the lowest-index GPU with enough free share.
    assert fgd().pick(cycle_context(), make_task().share(500).build(), state, 2) == (0,)


def test_fgd_cached_gpu_is_not_used_once_the_node_changed() -> None:
    state = fgd_cluster()
    plugin = fgd()
    task = make_task().cpu(1).share(500).build()
    plugin.score(cycle_context(), task, state, np.ones(state.size, dtype=bool))
    half_last = 2
    assert plugin.pick(cycle_context(), task, state, half_last) == (1,)
    # Fill GPU 1 of half-last: the cached choice is stale and must not be returned.
    occupy(state, "half-last", gpus=(1,), gpu_milli=500)
    assert plugin.pick(cycle_context(), task, state, half_last) == (0,)


def fits(state: ClusterState, s: TaskShape) -> NDArray[np.bool_]:
    gpu_ok = (state.gpu_free >= max(s.gpu_milli, 1)).sum(axis=1) >= s.num_gpu
    return np.asarray((state.cpu_free >= s.cpu_milli) & gpu_ok)


def test_fgd_incremental_scores_equal_a_fresh_plugin_after_every_change() -> None:
    hint = [
        shape().cpu(1).share(250).shape(),
        shape().cpu(2).share(500).shape(),
        shape().cpu(1).gpus(1).shape(),
        shape().cpu(4).gpus(2).shape(),
        shape().cpu(2).shape(),
    ]
    target = TargetWorkload.from_shapes(hint * 3 + hint[:2])
    state = make_state(
        *(make_node(f"n{i}").cpu(16).gpus(4) for i in range(6)),
        *(make_node(f"m{i}").cpu(8).gpus(2, model="T4") for i in range(4)),
    )
    long_lived = Fgd(target)
    rng = np.random.default_rng(11)
    placed: list[TaskId] = []
    compared = 0
    for step in range(40):
        # As a Session does: score on a working copy and place some tasks in it.
        work = state.copy()
        for i, s in enumerate(hint):
            task = Task(TaskId(f"w{step}-{i}"), JobId(f"w{step}-{i}"), s)
            feasible = fits(work, s)
            got = long_lived.score(cycle_context(), task, work, feasible)
            assert fgd_cache_mismatches(got, target, task, work, feasible) == [], f"step {step}"
            compared += int(feasible.sum())
            if feasible.any() and rng.random() < 0.5:
                node = int(np.argmax(np.where(feasible, got, -1)))
                work.allocate(task, node, long_lived.pick(cycle_context(), task, work, node))
        # Change the real state between cycles: release an earlier task or place a new one.
        if placed and rng.random() < 0.3:
            state.release(placed.pop(int(rng.integers(len(placed)))))
            continue
        s = hint[int(rng.integers(len(hint)))]
        candidates = np.flatnonzero(fits(state, s))
        if len(candidates):
            task = Task(TaskId(f"t{step}"), JobId(f"t{step}"), s)
            node = int(candidates[int(rng.integers(len(candidates)))])
            state.allocate(task, node, long_lived.pick(cycle_context(), task, state, node))
            placed.append(task.id)
    assert compared > 500  # the comparison ran on many (node, state) pairs


def test_fgd_cached_score_is_exact_when_delta_is_zero() -> None:
    hint = [
        shape().cpu(0.5).shape(),
        shape().cpu(2).shape(),
        shape().cpu(0.5).share(50).shape(),
        shape().cpu(1).shape(),
        shape().cpu(1).shape(),
        shape().cpu(0.5).shape(),
    ]
    target = TargetWorkload.from_shapes(hint)
    state = make_state(
        *(make_node(f"n{i}").cpu(2) for i in range(4)), make_node("g").cpu(2).gpus(4)
    )
    everywhere = np.ones(state.size, dtype=bool)
    half_cpu, one_cpu = make_task("a").cpu(0.5).build(), make_task("b").cpu(1).build()
    plugin = Fgd(target)
    plugin.score(cycle_context(), half_cpu, state, everywhere)
    occupy(state, "g", gpus=(0,), gpu_milli=50, cpu_milli=500)
    plugin.score(cycle_context(), one_cpu, state, everywhere)  # caches F(g) in a batch of 6
    # A CPU-only task changes no node's F here (every type either ignores the node's idle GPU
    # or still fits): delta is exactly 0 and every node scores floor(100 * sigmoid(0)) = 50.
    fresh = Fgd(target).score(cycle_context(), half_cpu, state, everywhere)
    assert fresh.tolist() == [50.0] * 5
    assert plugin.score(cycle_context(), half_cpu, state, everywhere).tolist() == [50.0] * 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param({"coverage": 0}, r"args.coverage must be in \(0, 1\], got 0.0", id="zero"),
        pytest.param({"coverage": 1.5}, r"must be in \(0, 1\], got 1.5", id="above-one"),
        pytest.param({"coverage": 0.9, "alpha": 1}, r"unknown argument\(s\) \['alpha'\]", id="x"),
    ],
)
def test_fgd_rejects_bad_arguments(args: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Fgd.from_args(args, PluginContext())


def test_fgd_coverage_argument_reaches_the_target_workload() -> None:
    hint = [shape().share(500).shape()] * 3 + [shape().gpus(1).shape()]
    # 3 of 4 tasks are one type: coverage .75 keeps it alone, the default .95 keeps both.
    assert len(Fgd.from_args({"coverage": 0.75}, PluginContext(workload_hint=hint)).target) == 1
    assert len(Fgd.from_args({}, PluginContext(workload_hint=hint)).target) == 2


@pytest.mark.parametrize("seed", range(6))
def test_small_batches_from_table_rows_give_the_states_batch_bit_for_bit(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small batch's F values built from the nodes' per-GPU table rows equal the values of
    the materialised after-states' batch, bit for bit, scores, chosen GPUs and F cache alike,
    through a run of placements (stale and fresh nodes mixed)."""
    rng = np.random.default_rng(seed)
    shapes = (
        [shape().cpu(4).share(int(m)).shape() for m in (250, 300, 500, 700)]
        + [shape().cpu(8).gpus(int(k)).shape() for k in (1, 2, 4)]
        + [shape().cpu(2).shape()]
    )
    hint = [shapes[int(i)] for i in rng.integers(0, len(shapes), 200)]
    nodes = [make_node(f"n{i}").gpus(8, model="G2" if i % 3 else "T4").cpu(96) for i in range(24)]
    fast, slow = (Fgd.from_args({}, PluginContext(workload_hint=hint)) for _ in range(2))
    state = make_state(*nodes)
    for _ in range(40):  # fragment the nodes a little
        name = state.names[int(rng.integers(0, 24))]
        free = np.flatnonzero(state.gpu_free[state.index[name]] >= 400)
        if len(free):
            occupy(state, name, gpus=(int(free[0]),), gpu_milli=int(rng.choice([100, 400])))
    ctx = cycle_context()
    placed = 0
    for step in range(60):
        task = Task(
            TaskId(f"t{step}"), JobId(f"t{step}"), shapes[int(rng.integers(0, len(shapes)))]
        )
        feasible = rng.random(24) < 0.8
        monkeypatch.setattr("gpusched.plugins.fgd.DEDUP_AT", 0)  # every batch materialised
        want = slow.score(ctx, task, state, feasible).copy()
        monkeypatch.undo()
        got = fast.score(ctx, task, state, feasible)
        assert np.array_equal(got[feasible].view(np.int64), want[feasible].view(np.int64))
        assert np.array_equal(fast._f.view(np.int64), slow._f.view(np.int64))
        s = task.shape
        fits = (state.cpu_free >= s.cpu_milli) & (state.mem_free >= s.memory_mib)
        fits &= (state.gpu_free >= max(s.gpu_milli, 1)).sum(axis=1) >= s.num_gpu
        node = int(np.argmax(np.where(feasible & fits, got, -1)))
        if feasible[node] and fits[node]:
            assert fast.pick(ctx, task, state, node) == slow.pick(ctx, task, state, node)
            state.allocate(task, node, fast.pick(ctx, task, state, node))
            placed += 1
    assert placed > 20
