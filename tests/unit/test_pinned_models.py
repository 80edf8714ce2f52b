"""``spare-pinned-models``: unpinned GPU work avoids the GPU models pinned work asks for.
Every expected number is derived in a comment from the formula in the module docstring."""

from __future__ import annotations

import numpy as np
import pytest

from builders import TaskBuilder, cycle_context, make_node, make_state, make_task
from gpusched.errors import ConfigError
from gpusched.framework import ClusterState, FloatArray, PluginContext
from gpusched.model import GpuModel
from gpusched.plugins.pinned_models import SparePinnedModels, pinned_demand


def cluster() -> ClusterState:
    """h1, h2: 8 H100 each (16 GPUs); a: 8 A100; l: 4 L4; c: no GPUs."""
    return make_state(
        make_node("h1").cpu(64).gpus(8, model="H100"),
        make_node("h2").cpu(64).gpus(8, model="H100"),
        make_node("a").cpu(64).gpus(8, model="A100"),
        make_node("l").cpu(64).gpus(4, model="L4"),
        make_node("c").cpu(64),
    )


def score(plugin: SparePinnedModels, state: ClusterState, task: TaskBuilder) -> FloatArray:
    feasible = np.ones(state.size, dtype=bool)
    return plugin.score(cycle_context(), task.build(), state, feasible)


HINT = [
    # 8 H100 GPUs pinned: pinned(H100) = 8 * 1000 = 8000.
    make_task().gpus(8).models("H100").build().shape,
    # 2 GPUs that take H100 or A100: 2 * 1000 / 2 = 1000 to each.
    make_task().gpus(2).models("H100", "A100").build().shape,
    # Unpinned and CPU-only shapes count for nothing.
    make_task().gpus(4).build().shape,
    make_task().cpu(4).build().shape,
]


def test_pinned_demand_splits_multi_model_shapes() -> None:
    assert pinned_demand(HINT) == {GpuModel("H100"): 9000.0, GpuModel("A100"): 1000.0}


def test_unpinned_task_scores_by_pressure() -> None:
    plugin = SparePinnedModels.from_args({}, PluginContext(workload_hint=HINT))
    # pressure(H100) = 9000 / (1000 * 16) = 0.5625; pressure(A100) = 1000 / (1000 * 8) = 0.125;
    # top = 0.5625: H100 nodes -100, A100 -100 * 0.125 / 0.5625 = -22.22..., L4 and no-GPU 0.
    got = [float(x) for x in score(plugin, cluster(), make_task().gpus(1))]
    assert got[:2] == [-100.0, -100.0]
    assert got[2] == pytest.approx(-100 * 0.125 / 0.5625)
    assert got[3:] == [0.0, 0.0]


@pytest.mark.parametrize(
    "task",
    [
        pytest.param(make_task().gpus(8).models("H100"), id="pinned"),
        pytest.param(make_task().cpu(8), id="cpu-only"),
    ],
)
def test_pinned_and_cpu_only_tasks_get_the_shared_zeros(task: TaskBuilder) -> None:
    plugin = SparePinnedModels.from_args({}, PluginContext(workload_hint=HINT))
    state = cluster()
    assert score(plugin, state, task) is state.zero_scores


def test_no_pinned_shapes_no_preference() -> None:
    plugin = SparePinnedModels.from_args({}, PluginContext(workload_hint=HINT[2:]))
    state = cluster()
    assert score(plugin, state, make_task().gpus(1)) is state.zero_scores


def test_pinned_model_absent_from_cluster_no_preference() -> None:
    # B200 is pinned but no node has it: every pressure on the cluster's models is 0.
    hint = [make_task().gpus(8).models("B200").build().shape]
    plugin = SparePinnedModels.from_args({}, PluginContext(workload_hint=hint))
    state = cluster()
    assert score(plugin, state, make_task().gpus(1)) is state.zero_scores


def test_rejects_args() -> None:
    with pytest.raises(ConfigError, match=r"spare-pinned-models.*takes no args"):
        SparePinnedModels.from_args({"weight": 2}, PluginContext())
