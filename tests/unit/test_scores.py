"""Score plugins with closed-form formulas: best-fit, dot-product, least-allocated,
balanced-allocation and random. Every expected number is derived in a comment from the formula
in the plugin's module docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import TaskBuilder, cycle_context, make_node, make_state, make_task, occupy
from gpusched.framework import ClusterState, ScorePlugin
from gpusched.plugins.best_fit import BestFitScore
from gpusched.plugins.dot_product import DotProductScore
from gpusched.plugins.kube_default import BalancedAllocationScore, LeastAllocatedScore
from gpusched.plugins.random_choice import RandomScore


def score(plugin: ScorePlugin, task: TaskBuilder, state: ClusterState) -> list[float]:
    feasible = np.ones(state.size, dtype=bool)
    return [float(x) for x in plugin.score(cycle_context(), task.build(), state, feasible)]


def gpu_cluster() -> ClusterState:
    """C = 32000 millicores and G = 4000 milli-GPU (node ``big``) normalise every vector.

    big:   32 CPU, 4 GPUs, all free                  cpu_free 32000, idle 4000
    small: 16 CPU, 2 GPUs, all free                  cpu_free 16000, idle 2000
    used:  32 CPU, 4 GPUs, 16 CPU and 3 GPUs taken   cpu_free 16000, idle 1000
    """
    state = make_state(
        make_node("big").cpu(32).gpus(4),
        make_node("small").cpu(16).gpus(2),
        make_node("used").cpu(32).gpus(4),
    )
    occupy(state, "used", gpus=(0, 1, 2), cpu_milli=16_000)
    return state


# -- best-fit --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(8).gpus(1),
            [
                # big:   0.5*(32000-8000)/32000 + 0.5*(4000-1000)/4000 = .375+.375 = .75  -> 25
                25.0,
                # small: 0.5*(16000-8000)/32000 + 0.5*(2000-1000)/4000 = .125+.125 = .25 -> 75
                75.0,
                # used:  0.5*(16000-8000)/32000 + 0.5*(1000-1000)/4000 = .125          -> 87.5
                87.5,
            ],
            id="one-gpu-tightest-node-wins",
        ),
        pytest.param(
            make_task().cpu(16),
            [
                # big:   0.5*16000/32000 + 0.5*4000/4000 = .25+.5  = .75 -> 25
                25.0,
                # small: 0.5*0/32000     + 0.5*2000/4000 = 0+.25   = .25 -> 75
                75.0,
                # used:  0.5*0/32000     + 0.5*1000/4000 = .125        -> 87.5
                87.5,
            ],
            id="cpu-only-task-still-counts-idle-gpu",
        ),
        pytest.param(
            make_task().cpu(2).share(500),
            [
                # big:   0.5*30000/32000 + 0.5*3500/4000 = .46875+.4375 = .90625 -> 9.375
                9.375,
                # small: 0.5*14000/32000 + 0.5*1500/4000 = .21875+.1875 = .40625 -> 59.375
                59.375,
                # used:  0.5*14000/32000 + 0.5*500/4000  = .21875+.0625 = .28125 -> 71.875
                71.875,
            ],
            id="half-gpu",
        ),
    ],
)
def test_best_fit(task: TaskBuilder, expected: list[float]) -> None:
    assert score(BestFitScore(), task, gpu_cluster()) == pytest.approx(expected)


# -- dot-product -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(8).gpus(1),
            # task = [8000/32000, 1000/4000] = [.25, .25]
            [
                # big   [1, 1]:     dot = .25+.25 = .5       -> floor(100*(1-.25))    = 75
                75.0,
                # small [.5, .5]:   dot = .125+.125 = .25    -> floor(100*(1-.125))   = 87
                87.0,
                # used  [.5, .25]:  dot = .125+.0625 = .1875 -> floor(100*(1-.09375)) = 90
                90.0,
            ],
            id="one-gpu-smallest-dot-product-wins",
        ),
        pytest.param(
            make_task().cpu(16),
            # task = [.5, 0]: only CPU counts
            [
                # big   cpu 1:   dot = .5  -> floor(100*(1-.25)) = 75
                75.0,
                # small cpu .5:  dot = .25 -> floor(100*.875)    = 87
                87.0,
                # used  cpu .5:  dot = .25 -> 87 (a tie with small: cluster order decides)
                87.0,
            ],
            id="cpu-only-ties-are-integers",
        ),
    ],
)
def test_dot_product(task: TaskBuilder, expected: list[float]) -> None:
    assert score(DotProductScore(), task, gpu_cluster()) == expected


# -- kube-default: least-allocated and balanced-allocation -----------------------------------


def cpu_mem_cluster() -> ClusterState:
    return make_state(
        make_node("n1").cpu(32).mem_gib(256),
        make_node("n2").cpu(16).mem_gib(64),
        make_node("n3").cpu(64).mem_gib(128),
    )


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(8).mem_gib(64),
            [
                # n1: cpu (32-8)/32 = .75,  mem (256-64)/256 = .75 -> mean .75   -> 75
                75.0,
                # n2: cpu (16-8)/16 = .5,   mem (64-64)/64   = 0   -> mean .25   -> 25
                25.0,
                # n3: cpu (64-8)/64 = .875, mem (128-64)/128 = .5  -> mean .6875 -> 68
                68.0,
            ],
            id="spreads-to-the-emptiest-node",
        ),
        pytest.param(
            make_task().cpu(24).mem_gib(1),
            [
                # n1: cpu 8/32 = .25, mem 255/256 -> mean .623046875 -> 62
                62.0,
                # n2: cpu (16-24)/16 = -.5, mem 63/64 = .984375 -> mean .2421875 -> 24
                24.0,
                # n3: cpu 40/64 = .625, mem 127/128 = .9921875 -> mean .80859375 -> 80
                80.0,
            ],
            id="infeasible-node-still-gets-a-number",
        ),
    ],
)
def test_least_allocated(task: TaskBuilder, expected: list[float]) -> None:
    assert score(LeastAllocatedScore(), task, cpu_mem_cluster()) == expected


def test_least_allocated_is_exact_on_whole_percentages() -> None:
    state = make_state(make_node("n").cpu(100).mem_gib(100))
    # cpu (100-71)/100 = .29, mem (100-71)/100 = .29 -> mean .29 -> floor(29) = 29
    assert score(LeastAllocatedScore(), make_task().cpu(71).mem_gib(71), state) == [29.0]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(8).mem_gib(64),
            [
                # n1: used cpu 8/32 = .25,   mem 64/256 = .25 -> std 0      -> 100
                100.0,
                # n2: used cpu 8/16 = .5,    mem 64/64 = 1    -> std .25    -> 75
                75.0,
                # n3: used cpu 8/64 = .125,  mem 64/128 = .5  -> std .1875  -> 81
                81.0,
            ],
            id="balanced-use-wins",
        ),
        pytest.param(
            make_task().cpu(16).mem_gib(0),
            [
                # n1: cpu .5,  mem 0 -> std .25  -> 75
                75.0,
                # n2: cpu 1,   mem 0 -> std .5   -> 50
                50.0,
                # n3: cpu .25, mem 0 -> std .125 -> 87
                87.0,
            ],
            id="cpu-heavy-task",
        ),
    ],
)
def test_balanced_allocation(task: TaskBuilder, expected: list[float]) -> None:
    assert score(BalancedAllocationScore(), task, cpu_mem_cluster()) == expected


def test_kube_default_scores_ignore_gpus() -> None:
    state = gpu_cluster()
    with_gpu = make_task().cpu(8).gpus(2)
    without = make_task().cpu(8)
    for plugin in (LeastAllocatedScore(), BalancedAllocationScore()):
        assert score(plugin, with_gpu, state) == score(plugin, without, state)


# -- random ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "feasible",
    [
        pytest.param([True, True, True, True], id="all-feasible"),
        pytest.param([False, True, False, True], id="two-feasible"),
        pytest.param([False, False, True, False], id="one-feasible"),
    ],
)
def test_random_scores_one_feasible_node_100(feasible: list[bool]) -> None:
    state = make_state(*(make_node(f"n{i}") for i in range(4)))
    mask = np.array(feasible)
    chosen: set[int] = set()
    for seed in range(64):
        out = RandomScore().score(cycle_context(seed), make_task().build(), state, mask)
        assert sorted(out.tolist()) == [0.0, 0.0, 0.0, 100.0]
        node = int(np.argmax(out))
        assert feasible[node]
        chosen.add(node)
    # 64 draws reach every feasible node (uniform over the feasible set).
    assert chosen == {i for i, ok in enumerate(feasible) if ok}


def test_random_is_reproducible_per_seed_and_empty_without_feasible_nodes() -> None:
    state = make_state(*(make_node(f"n{i}") for i in range(8)))
    mask = np.ones(8, dtype=bool)
    task = make_task().build()
    first = RandomScore().score(cycle_context(7), task, state, mask).tolist()
    again = RandomScore().score(cycle_context(7), task, state, mask).tolist()
    assert first == again
    none = RandomScore().score(cycle_context(7), task, state, np.zeros(8, dtype=bool))
    assert none.tolist() == [0.0] * 8
