"""GPU topology end to end: the gpu-topology score, the gpusched-topo policy and the
simulator's best-connected-set metric."""

from __future__ import annotations

import numpy as np
import pytest

from builders import cycle_context, make_job, make_node, make_state, make_task, occupy, run_cycle
from gpusched.framework import ClusterState, PluginContext
from gpusched.model import Job, JobId, JobKind, Node, Task, TaskId, TaskShape
from gpusched.model.topology import NodeTopology
from gpusched.plugins import create_plugin
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.plugins.topology_score import NEUTRAL_SCORE, TopologyScore, score_table
from gpusched.scheduler import build_profile, policy_spec
from gpusched.sim import Simulation
from gpusched.sim.metrics import RunMetrics, summarise
from gpusched.workloads.templates import hgx_h100_node, pcie_pairs_node


def topo(node: Node) -> NodeTopology:
    assert node.topology is not None
    return node.topology


def mask(*gpus: int) -> int:
    return sum(1 << g for g in gpus)


def scores(state: ClusterState, task: Task) -> list[float]:
    plugin = create_plugin("gpu-topology", {}, PluginContext())
    assert isinstance(plugin, TopologyScore)
    values = plugin.score(cycle_context(), task, state, np.ones(state.size, dtype=bool))
    return [float(v) for v in values]


# -- the score table --------------------------------------------------------------------------


def test_two_gpus_prefer_the_last_pair_of_a_busy_board_over_an_idle_board() -> None:
    table = score_table(topo(hgx_h100_node("x")))
    denom = 7 * 9 * 50 + 8 * 50 + 49
    # Idle board, k=2: q = 7 (NVLink, one NUMA node); 6 GPUs left; V(all 8) = 7 * 7 = 49 and
    # the rest (2 GPUs on NUMA 0, 4 on NUMA 1) keeps sizes 2..6 at quality 7: V = 35, loss 14.
    idle = 100 * (7 * 450 + (8 - 6) * 50 + 49 - 14) / denom
    assert table[mask(*range(8)), 2] == pytest.approx(idle)
    # Only GPUs 0, 1 free: none left, V = 7 -> loss 7: a higher score.
    assert table[mask(0, 1), 2] == pytest.approx(100 * (7 * 450 + 8 * 50 + 49 - 7) / denom)
    assert table[mask(0, 1), 2] > idle


def test_equally_full_nodes_keep_the_numa_local_group_of_four() -> None:
    table = score_table(topo(hgx_h100_node("x")))
    # 4 free on NUMA 0 (0-3): V = 7 + 7 + 7 = 21, the 2 left: 7, loss 14.
    # 4 free split (0, 1 | 4, 5): V = 7 + 6 + 6 = 19 (3 and 4 GPUs span both NUMA nodes while
    # one would do), the pair left: 7, loss 12 -> the split node scores higher.
    assert table[mask(0, 1, 4, 5), 2] > table[mask(0, 1, 2, 3), 2]
    assert (table[mask(0, 1, 4, 5), 2] - table[mask(0, 1, 2, 3), 2]) * 3599 / 100 == pytest.approx(
        2
    )


def test_a_box_with_three_free_beats_an_idle_box_for_a_pair() -> None:
    table = score_table(topo(pcie_pairs_node("x")))
    # Both give an NVLink pair (q = 7); the 3-free box ends with 1 GPU free, the idle box
    # with 2: best fit keeps the idle box whole for a 4-GPU task.
    assert table[mask(1, 2, 3), 2] > table[mask(0, 1, 2, 3), 2]


def test_an_nvlink_pair_beats_a_split_pair_whatever_the_loss() -> None:
    table = score_table(topo(pcie_pairs_node("x")))
    # Free {0, 2}: one GPU of each bridged pair, on different sockets: SYS link, q = 0.
    # Free {0, 1, 2, 3}: the picker takes a bridged pair: q = 7.
    assert table[mask(0, 2), 2] < 100 * 499 / 3599 + 1e-9
    assert table[mask(0, 1, 2, 3), 2] > 100 * 7 * 450 / 3599


def test_node_score_uses_the_free_mask_and_is_neutral_without_topology() -> None:
    state = make_state(
        hgx_h100_node("idle"),
        hgx_h100_node("busy"),
        make_node("plain").gpus(8, model="H100").cpu(224).mem_gib(2048),
    )
    occupy(state, "busy", gpus=(2, 3, 4, 5, 6, 7))
    task = make_task().gpus(2).cpu(8).mem_gib(64).build()
    idle, busy, plain = scores(state, task)
    assert busy > idle
    assert plain == NEUTRAL_SCORE


def test_a_sharing_task_scores_full_marks_where_a_partly_used_gpu_takes_it() -> None:
    state = make_state(hgx_h100_node("shared"), hgx_h100_node("whole"))
    occupy(state, "shared", gpus=(0,), gpu_milli=500)
    task = make_task().gpus(1, milli=300).cpu(1).mem_gib(4).build()
    shared, whole = scores(state, task)
    assert shared == 100.0
    assert whole < 100.0


def test_scores_follow_changes_of_the_node() -> None:
    state = make_state(hgx_h100_node("a"), hgx_h100_node("b"))
    task = make_task().gpus(2).cpu(8).mem_gib(64).build()
    plugin = TopologyScore()
    feasible = np.ones(2, dtype=bool)
    first = plugin.score(cycle_context(), task, state, feasible).tolist()
    occupy(state, "b", gpus=(2, 3, 4, 5, 6, 7))
    second = plugin.score(cycle_context(), task, state, feasible).tolist()
    assert first[0] == first[1] == second[0]
    assert second[1] > second[0]


# -- the policy ---------------------------------------------------------------------------------


def test_gpusched_topo_puts_a_2_gpu_task_on_the_last_nvlink_pair() -> None:
    state = make_state(hgx_h100_node("idle"), hgx_h100_node("busy"))
    occupy(state, "busy", gpus=(0, 1, 2, 3, 6, 7), cpu_milli=48_000, memory_mib=1 << 18)
    plan = run_cycle(state, [make_job("j").gpus(2).cpu(8).mem_gib(64)], policy="gpusched-topo")
    (bind,) = plan.binds
    assert (bind.node, bind.gpus) == ("busy", (4, 5))


def test_gpusched_topo_is_a_built_in_policy_with_the_topology_picker() -> None:
    spec = policy_spec("gpusched-topo")
    assert spec.gpu_picker.name == "topology-aware-gpu"
    assert "gpu-topology" in [s.name for s in spec.scores]
    build_profile(spec)


def test_gpusched_topo_is_gpusched_plus_the_topology_parts() -> None:
    """Derived from gpusched: removing the two topology scores and the NUMA filter and
    restoring the picker gives gpusched's spec back, field for field (name and description
    aside)."""
    base = policy_spec("gpusched")
    topo = policy_spec("gpusched-topo")
    assert [
        (s.name, s.weight) for s in topo.scores if s.name not in {b.name for b in base.scores}
    ] == [
        ("gpu-topology", 8.0),
        ("network-packing", 2.0),
    ]
    stripped = topo.model_copy(
        update={
            "name": base.name,
            "description": base.description,
            "scores": [s for s in topo.scores if s.name not in {"gpu-topology", "network-packing"}],
            "filters": [f for f in topo.filters if f.name != "numa-local-cpu"],
            "gpu_picker": base.gpu_picker,
        }
    )
    assert stripped == base


# -- the metric ---------------------------------------------------------------------------------


def _job(name: str, gpus: int, submit: float) -> Job:
    shape = TaskShape(cpu_milli=8000, memory_mib=65536, num_gpu=gpus, gpu_milli=1000)
    return Job(
        JobId(name),
        (Task(TaskId(name), JobId(name), shape),),
        submit_time=submit,
        duration=1000.0,
        kind=JobKind.TRAINING,
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # First fit: a (3 GPUs) takes 0-2, a best set; b (2 GPUs) takes 3-4, across the two
        # NUMA nodes while 4-5 were free on one: 1 of 2 on a best set.
        pytest.param("kube-default", 50.0, id="first-fit-splits-numa"),
        pytest.param("gpusched-topo", 100.0, id="topology-picker"),
    ],
)
def test_best_connected_set_metric(policy: str, expected: float) -> None:
    jobs = [_job("a", 3, 0.0), _job("b", 2, 1.0)]
    profile = build_profile(
        policy_spec(policy), PluginContext([t.shape for j in jobs for t in j.tasks])
    )
    sim = Simulation([hgx_h100_node("n")], jobs, profile)
    metrics = RunMetrics(sim, TargetWorkload.from_shapes([t.shape for j in jobs for t in j.tasks]))
    sim.observers.append(metrics)
    sim.run()
    summary = summarise(sim, metrics)
    assert summary["multi_gpu_tasks_with_topology"] == 2
    assert summary["multi_gpu_tasks_on_best_connected_set_pct"] == expected
