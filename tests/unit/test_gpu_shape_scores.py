"""gpu-clustering and gpu-packing: integer scores by GPU shape and by how used a GPU/node is.
Expected numbers are derived in comments from the formulas in the plugins' docstrings.
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import TaskBuilder, cycle_context, make_node, make_state, make_task, occupy
from gpusched.framework import ClusterState, ScorePlugin
from gpusched.plugins.gpu_clustering import GpuClusteringScore
from gpusched.plugins.gpu_packing import GpuPackingScore


def score(
    plugin: ScorePlugin, task: TaskBuilder, state: ClusterState, feasible: list[bool] | None = None
) -> list[float]:
    mask = np.ones(state.size, dtype=bool) if feasible is None else np.array(feasible)
    return [float(x) for x in plugin.score(cycle_context(), task.build(), state, mask)]


# -- gpu-clustering --------------------------------------------------------------------------


def clustering_cluster() -> ClusterState:
    """Five 4-GPU nodes, G = 4000 milli-GPU.

    only-1gpu:  one whole-GPU task                         idle 3000
    mixed:      one whole-GPU task, one 500 sharing task   idle 2500
    idle:       nothing                                    idle 4000
    only-2gpu:  one 2-GPU task                             idle 2000
    cpu-task:   one CPU-only task (does not count)         idle 4000
    """
    state = make_state(
        *(make_node(n).gpus(4) for n in ("only-1gpu", "mixed", "idle", "only-2gpu", "cpu-task"))
    )
    occupy(state, "only-1gpu", gpus=(0,))
    occupy(state, "mixed", gpus=(0,))
    occupy(state, "mixed", gpus=(1,), gpu_milli=500)
    occupy(state, "only-2gpu", gpus=(0, 1))
    occupy(state, "cpu-task", cpu_milli=4000)
    return state


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().gpus(1),
            [
                # only-1gpu: band 3 (same shape only) -> 75 + floor(25*1000/4000 = 6.25)  = 81
                81.0,
                # mixed:     band 2 (includes 1-gpu)  -> 50 + floor(25*1500/4000 = 9.375) = 59
                59.0,
                # idle:      band 1                   -> 25 + 0                            = 25
                25.0,
                # only-2gpu: band 0 (other shape)     ->  0 + floor(25*2000/4000 = 12.5)  = 12
                12.0,
                # cpu-task:  band 1 (CPU-only tasks are not a GPU shape) -> 25 + 0         = 25
                25.0,
            ],
            id="whole-gpu-task",
        ),
        pytest.param(
            make_task().share(250),
            [
                # only-1gpu: band 0 (hosts 1-gpu, not sharing) -> 0 + 6   = 6
                6.0,
                # mixed:     band 2 (hosts sharing and 1-gpu)  -> 50 + 9  = 59
                59.0,
                # idle:      band 1                            -> 25
                25.0,
                # only-2gpu: band 0                            -> 0 + 12  = 12
                12.0,
                # cpu-task:  band 1                            -> 25
                25.0,
            ],
            id="sharing-task",
        ),
        pytest.param(
            make_task().gpus(2),
            [
                6.0,  # only-1gpu: band 0 -> 0 + 6
                9.0,  # mixed:     band 0 -> 0 + 9
                25.0,  # idle:     band 1 -> 25
                87.0,  # only-2gpu: band 3 -> 75 + 12
                25.0,  # cpu-task: band 1 -> 25
            ],
            id="two-gpu-task",
        ),
        pytest.param(make_task().cpu(2), [0.0] * 5, id="cpu-only-task-scores-zero"),
    ],
)
def test_gpu_clustering(task: TaskBuilder, expected: list[float]) -> None:
    assert score(GpuClusteringScore(), task, clustering_cluster()) == expected


def test_gpu_clustering_measures_fullness_against_the_largest_node() -> None:
    # G = 8000 (the 8-GPU node). Fullness is G - idle(n), so a small node's missing GPUs count
    # as used: the 2-GPU node with one GPU taken has idle 1000.
    state = make_state(make_node("eight").gpus(8), make_node("two").gpus(2))
    occupy(state, "two", gpus=(0,))
    # eight: band 1, 25 + floor(25*(8000-8000)/8000) = 25
    # two:   band 3, 75 + floor(25*(8000-1000)/8000 = 21.875) = 96
    assert score(GpuClusteringScore(), make_task().gpus(1), state) == [25.0, 96.0]


# -- gpu-packing -----------------------------------------------------------------------------


def packing_cluster() -> ClusterState:
    """GPU free shares per node (``N_n`` GPUs, ``F_n`` fully free):

    shared-600:   [600, 1000, 1000, 1000]   N=4, F=3
    shared-200:   [200, 1000, 1000, 1000]   N=4, F=3
    idle-4:       [1000, 1000, 1000, 1000]  N=4, F=4
    idle-2:       [1000, 1000]              N=2, F=2
    idle-8:       8 x 1000                  N=8, F=8
    shared-550:   [1000, 550]               N=2, F=1
    """
    state = make_state(
        make_node("shared-600").gpus(4),
        make_node("shared-200").gpus(4),
        make_node("idle-4").gpus(4),
        make_node("idle-2").gpus(2),
        make_node("idle-8").gpus(8),
        make_node("shared-550").gpus(2),
    )
    occupy(state, "shared-600", gpus=(0,), gpu_milli=400)
    occupy(state, "shared-200", gpus=(0,), gpu_milli=800)
    occupy(state, "shared-550", gpus=(1,), gpu_milli=450)
    return state


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().share(500),
            [
                # shared-600: best fit GPU has 600 (u=0), case 1:
                #   max(100 - floor(floor(100*600/1000) / 10), 50) = 100 - 6 = 94
                94.0,
                # shared-200: 200 < 500, so a fully free GPU is taken (u=1), node in use, case 2:
                #   max(50 - 1, 33) = 49
                49.0,
                # idle-4: case 3, max(33 - 4, 4) = 29
                29.0,
                # idle-2: case 3, max(33 - 2, 2) = 31 (the smaller idle node wins)
                31.0,
                # idle-8: case 3, max(33 - 8, 8) = 25
                25.0,
                # shared-550: best fit 550 (u=0), case 1: 100 - floor(55/10) = 95
                95.0,
            ],
            id="sharing-task-fills-shared-gpus-first",
        ),
        pytest.param(
            make_task().gpus(2),
            [
                48.0,  # shared-600: two fully free GPUs on a used node, case 2: max(50-2, 33)
                48.0,  # shared-200: same
                29.0,  # idle-4: case 3, max(33-4, 4)
                31.0,  # idle-2: case 3, max(33-2, 2)
                25.0,  # idle-8: case 3, max(33-8, 8)
                0.0,  # shared-550: only one GPU has 1000 free -> infeasible, left at 0
            ],
            id="two-gpu-task-prefers-used-nodes",
        ),
        pytest.param(make_task().cpu(4), [0.0] * 6, id="cpu-only-task-scores-zero"),
    ],
)
def test_gpu_packing(task: TaskBuilder, expected: list[float]) -> None:
    feasible = [True, True, True, True, True, task.build().shape.num_gpu < 2]
    assert score(GpuPackingScore(), task, packing_cluster(), feasible) == expected


def test_gpu_packing_scores_only_feasible_nodes() -> None:
    state = packing_cluster()
    feasible = [False, True, False, False, True, False]
    out = score(GpuPackingScore(), make_task().share(500), state, feasible)
    # shared-200 case 2 (49) and idle-8 case 3 (25) as in the table above; the rest stay 0.
    assert out == [0.0, 49.0, 0.0, 0.0, 25.0, 0.0]


def test_gpu_packing_idle_node_score_floor_is_its_gpu_count() -> None:
    # case 3 with F_n = 32: max(33 - 32, 32) = 32 -- a huge idle node scores like a 1-GPU one.
    state = make_state(make_node("huge").gpus(32), make_node("one").gpus(1))
    assert score(GpuPackingScore(), make_task().gpus(1), state) == [32.0, 32.0]
