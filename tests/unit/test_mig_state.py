"""MIG in the cluster state, the filter, the plan and quota: fit, the slice rule, release."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched.errors import ConfigError, InvariantError
from gpusched.framework import ClusterState, Code, Plan, Snapshot
from gpusched.framework.mig import mig_fit_count
from gpusched.framework.quota import job_request
from gpusched.framework.release_batch import ReleaseBatch
from gpusched.model import GPU, GpuModel, Job, JobId, Node, Task, TaskId, TaskShape
from gpusched.model.mig import MigConfig, MigPlacement, MigSlice, geometry_for
from gpusched.model.mig_layout import layout_problem
from gpusched.scheduler import build_profile, policy_spec, schedule

P = MigPlacement
STATIC = MigConfig(layout=(P("3g.40gb", 0), P("2g.20gb", 4), P("1g.10gb", 6)))
RECONF = MigConfig(reconfigurable=True)


def mig_node(name: str, *configs: MigConfig | None, model: str = "A100", gib: int = 80) -> Node:
    return Node.with_gpus(
        name,
        cpu_milli=64_000,
        memory_mib=512 * 1024,
        gpu_count=len(configs),
        gpu_model=model,
        gpu_memory_mib=gib * 1024,
        mig=tuple(configs),
    )


def mig_task(name: str, profile: str, count: int = 1) -> Task:
    shape = TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile=profile, mig_count=count)
    return Job.single(name, shape).tasks[0]


def test_mig_gpus_hold_no_plain_share_but_count_as_capacity() -> None:
    state = ClusterState.from_nodes([mig_node("a", STATIC, None, RECONF)])
    # GPU 1 is plain: 1000 free; the MIG GPUs 0 and 2 show 0 free but 1000 capacity
    assert state.gpu_free[0].tolist() == [0, 1000, 0]
    assert state.gpu_cap[0].tolist() == [1000, 1000, 1000]
    assert (state.total_gpu_milli, state.used_gpu_milli, state.free_gpu_milli) == (3000, 0, 3000)
    state.allocate(mig_task("t", "3g.40gb"), 0, ())
    # 3g.40gb = floor(1000 * 3 / 7) = 428 milli-GPU
    assert (state.used_gpu_milli, state.free_gpu_milli) == (428, 2572)
    assert int(state.gpu_idle[0]) == 1000  # plain idle only


@pytest.mark.parametrize(
    ("configs", "held", "profile", "expected"),
    [
        pytest.param((STATIC,), [], "1g.10gb", 1, id="static-one-1g-instance"),
        pytest.param((STATIC,), [], "4g.40gb", 0, id="static-layout-lacks-profile"),
        pytest.param((RECONF,), [], "1g.10gb", 7, id="reconfigurable-seven-1g"),
        pytest.param((RECONF,), [], "3g.40gb", 2, id="reconfigurable-two-3g"),
        pytest.param((RECONF,), [("3g.40gb", 4)], "3g.40gb", 1, id="beside-3g-at-4"),
        pytest.param((RECONF,), [("1g.10gb", 6)], "4g.40gb", 1, id="1g-at-6-keeps-4g"),
        pytest.param((RECONF,), [("1g.10gb", 0)], "4g.40gb", 0, id="1g-at-0-blocks-4g"),
        pytest.param((RECONF,), [("4g.40gb", 0)], "1g.10gb", 3, id="compute-caps-1g"),
        pytest.param((RECONF, STATIC), [], "2g.20gb", 4, id="sum-over-gpus"),
    ],
)
def test_fit_count(
    configs: tuple[MigConfig, ...],
    held: list[tuple[str, int]],
    profile: str,
    expected: int,
) -> None:
    state = ClusterState.from_nodes([mig_node("a", *configs), mig_node("plain", None)])
    for i, (prof, start) in enumerate(held):
        state.allocate(mig_task(f"h{i}", prof), 0, (), mig=(MigSlice(0, prof, start),))
    assert mig_fit_count(state, profile).tolist() == [expected, 0]


@pytest.mark.parametrize(
    ("configs", "held", "profile", "expected"),
    [
        # lone 1g on an empty reconfigurable GPU: slice 6 (keeps 4g.40gb at 0)
        pytest.param((RECONF,), [], "1g.10gb", "0:1g.10gb@6", id="empty-gpu-1g-at-6"),
        # lone 3g: start 4 leaves room (4, 10) against (3, 7) at start 0
        pytest.param((RECONF,), [], "3g.40gb", "0:3g.40gb@4", id="empty-gpu-3g-at-4"),
        # the fuller GPU first (best fit): GPU 1 holds a 4g, GPU 0 is empty
        pytest.param((RECONF, RECONF), [(1, "4g.40gb", 0)], "1g.10gb", "1:1g.10gb@6", id="fullest"),
        # static instances before creating one on a reconfigurable GPU
        pytest.param((RECONF, STATIC), [], "1g.10gb", "1:1g.10gb@6", id="static-first"),
    ],
)
def test_slice_rule(
    configs: tuple[MigConfig, ...],
    held: list[tuple[int, str, int]],
    profile: str,
    expected: str,
) -> None:
    state = ClusterState.from_nodes([mig_node("a", *configs)])
    for i, (gpu, prof, start) in enumerate(held):
        state.allocate(mig_task(f"h{i}", prof), 0, (), mig=(MigSlice(gpu, prof, start),))
    alloc = state.allocate(mig_task("t", profile), 0, ())
    assert [str(s) for s in alloc.mig] == [expected]
    assert alloc.gpus == ()
    assert alloc.gpu_milli == 0


def test_release_paths_restore_the_state() -> None:
    state = ClusterState.from_nodes([mig_node("a", STATIC, RECONF)])
    tasks = [mig_task("x", "3g.40gb"), mig_task("y", "1g.10gb", 2), mig_task("z", "2g.20gb")]
    allocs = [state.allocate(t, 0, ()) for t in tasks]
    assert state.mig is not None
    assert state.mig.held == 428 + 2 * 142 + 285
    what_if = state.copy(allocations=False)
    what_if.free_batch(ReleaseBatch(allocs, state.gpu_slots), 2)  # x and y come back
    assert what_if.mig is not None
    assert what_if.mig.held == 285
    assert state.mig.held == 428 + 2 * 142 + 285  # the copy is independent
    state.release(TaskId("x"))
    state.release_many([TaskId("y"), TaskId("z")])
    assert state.mig.held == 0
    assert state.mig.in_use(0, 0) == ()
    assert state.mig.in_use(0, 1) == ()
    assert int(state.cpu_free[0]) == 64_000
    assert state.shape_count[0].sum() == 0


def test_allocating_a_taken_or_wrong_instance_is_a_bug() -> None:
    state = ClusterState.from_nodes([mig_node("a", STATIC)])
    state.allocate(mig_task("x", "1g.10gb"), 0, (), mig=(MigSlice(0, "1g.10gb", 6),))
    with pytest.raises(InvariantError, match="not free"):
        state.allocate(mig_task("y", "1g.10gb"), 0, (), mig=(MigSlice(0, "1g.10gb", 6),))
    with pytest.raises(InvariantError, match=r"needs 1 x 2g\.20gb"):
        state.allocate(mig_task("z", "2g.20gb"), 0, (), mig=(MigSlice(0, "3g.40gb", 0),))
    with pytest.raises(InvariantError, match="do not fit"):
        state.allocate(mig_task("w", "1g.10gb"), 0, ())


def _cycle(nodes: list[Node], shapes: dict[str, TaskShape], policy: str = "gpusched") -> Plan:
    state = ClusterState.from_nodes(nodes)
    jobs = tuple(
        Job.single(name, s, submit_time=float(i)) for i, (name, s) in enumerate(shapes.items())
    )
    return schedule(Snapshot(state, jobs), build_profile(policy_spec(policy)))


@pytest.mark.parametrize("policy", ["gpusched", "fgd", "kube-default", "fifo-gang"])
def test_plain_and_mig_requests_stay_apart(policy: str) -> None:
    nodes = [mig_node("m", RECONF, RECONF), mig_node("p", None)]
    whole = TaskShape(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=1000)
    half = TaskShape(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=500)
    mig = TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="7g.80gb", mig_count=1)
    plan = _cycle(nodes, {"whole": whole, "m1": mig, "m2": mig, "half": half}, policy)
    where = {str(b.task): (b.node, b.gpus, [str(s) for s in b.mig]) for b in plan.binds}
    assert where["whole"][0] == "p"
    assert "half" not in where  # the only plain GPU is taken whole
    assert sorted(where[t][2][0] for t in ("m1", "m2")) == ["0:7g.80gb@0", "1:7g.80gb@0"]
    assert {where[t][0] for t in ("m1", "m2")} == {"m"}


def test_plan_lists_reconfigured_gpus_only() -> None:
    nodes = [mig_node("s", STATIC), mig_node("r", RECONF)]
    one = TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="1g.10gb")
    two = TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="2g.20gb", mig_count=2)
    plan = _cycle(nodes, {"a": one, "b": two})
    # a takes the static 1g.10gb@6; b needs 2 x 2g: the static GPU has one, the empty
    # reconfigurable GPU holds both -> r, starts by the room rule
    binds = {str(b.task): [str(s) for s in b.mig] for b in plan.binds}
    assert binds["a"] == ["0:1g.10gb@6"]
    assert len(binds["b"]) == 2
    assert all(s.startswith("0:2g.20gb@") for s in binds["b"])
    [layout] = plan.mig_layouts
    assert (layout.node, layout.gpu, layout.was_empty) == ("r", 0, True)
    assert layout_problem(geometry_for("A100-80GB"), layout.layout) is None
    assert sorted(f"{p.profile}@{p.start}" for p in layout.layout) == sorted(
        s.split(":")[1] for s in binds["b"]
    )


def test_statuses_say_why() -> None:
    nodes = [mig_node("s", STATIC)]
    shapes = {
        "fits": TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="3g.40gb"),
        "taken": TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="3g.40gb"),
        "never": TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="7g.80gb"),
    }
    plan = _cycle(nodes, shapes)
    pending = {str(j): status for j, status in plan.pending.items()}
    assert plan.bound_jobs() == {"fits"}
    assert pending["taken"].code is Code.UNSCHEDULABLE
    assert "fewer than 1 instance(s) free" in pending["taken"].message
    assert pending["never"].code is Code.UNRESOLVABLE
    assert "no node has a MIG-enabled GPU that offers 7g.80gb" in pending["never"].message


def test_gang_of_mig_pods_is_all_or_nothing() -> None:
    shape = TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile="3g.40gb")
    job = Job(
        id=JobId("g"), tasks=tuple(Task(TaskId(f"g-{i}"), JobId("g"), shape) for i in range(3))
    )
    state = ClusterState.from_nodes([mig_node("r", RECONF)])  # room for two 3g only
    plan = schedule(Snapshot(state, (job,)), build_profile(policy_spec("gpusched")))
    assert plan.binds == []
    assert plan.pending[JobId("g")].code is Code.UNRESOLVABLE
    two = ClusterState.from_nodes([mig_node("r", RECONF, RECONF)])
    plan = schedule(Snapshot(two, (job,)), build_profile(policy_spec("gpusched")))
    assert len(plan.binds) == 3


@pytest.mark.parametrize(
    ("profile", "count", "milli"),
    [
        pytest.param("1g.10gb", 1, 142, id="1g"),  # floor(1000 * 1 / 7)
        pytest.param("1g.20gb", 1, 142, id="1g-double-memory"),  # memory does not count
        pytest.param("3g.40gb", 2, 856, id="2x3g"),  # 2 * floor(3000 / 7)
        pytest.param("7g.80gb", 1, 1000, id="7g"),
        pytest.param("2g.10gb", 1, 285, id="a100-40gb-2g"),
    ],
)
def test_quota_charges_gpu_equivalents(profile: str, count: int, milli: int) -> None:
    shape = TaskShape(cpu_milli=1000, memory_mib=1024, mig_profile=profile, mig_count=count)
    job = Job.single("j", shape)
    assert job.gpu_milli == milli
    assert job_request(job)[GPU] == milli


def test_gpu_model_filter_applies_to_mig_requests() -> None:
    nodes = [mig_node("a", RECONF), mig_node("h", RECONF, model="H100")]
    shape = TaskShape(
        cpu_milli=1000,
        memory_mib=1024,
        mig_profile="1g.10gb",
        gpu_models=frozenset({GpuModel("H100")}),
    )
    plan = _cycle(nodes, {"t": shape})
    assert [b.node for b in plan.binds] == ["h"]


@pytest.mark.parametrize(
    ("configs", "model", "gib", "message"),
    [
        pytest.param((RECONF,), "L4", 24, "not MIG-capable", id="l4"),
        pytest.param((RECONF,), "A100", 0, "not MIG-capable", id="unknown-memory"),
        pytest.param(
            (MigConfig(layout=(P("3g.40gb", 0), P("3g.40gb", 2))),),
            "A100",
            80,
            "start 2 is not allowed",
            id="bad-start",
        ),
        pytest.param((MigConfig(),), "A100", 80, r"'mig\[0\]\.layout': empty", id="empty-static"),
        pytest.param(
            (MigConfig(layout=(P("1g.10gb", 0),), reconfigurable=True),),
            "A100",
            80,
            "not both",
            id="both",
        ),
    ],
)
def test_node_mig_is_checked(
    configs: tuple[MigConfig, ...], model: str, gib: int, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        mig_node("bad", *configs, model=model, gib=gib)
    assert "node 'bad'" in str(err.value)


def test_mig_entries_must_match_the_gpus() -> None:
    with pytest.raises(ConfigError, match="expected one per GPU"):
        Node.with_gpus(
            "n", cpu_milli=1, memory_mib=1, gpu_count=2, gpu_model="A100",
            gpu_memory_mib=80 * 1024, mig=(RECONF,),
        )  # fmt: skip


def test_task_shape_checks_its_mig_request() -> None:
    with pytest.raises(ConfigError, match=r"unknown MIG profile '5g\.50gb'"):
        TaskShape(cpu_milli=1, memory_mib=1, mig_profile="5g.50gb")
    with pytest.raises(ConfigError, match="needs num_gpu 0"):
        TaskShape(cpu_milli=1, memory_mib=1, num_gpu=1, gpu_milli=1000, mig_profile="1g.10gb")


def test_fit_counts_follow_version_stamps_across_copies() -> None:
    state = ClusterState.from_nodes([mig_node("a", RECONF), mig_node("b", RECONF)])
    assert mig_fit_count(state, "3g.40gb").tolist() == [2, 2]
    work = state.copy()
    work.allocate(mig_task("x", "3g.40gb"), 1, ())
    assert mig_fit_count(work, "3g.40gb").tolist() == [2, 1]
    assert mig_fit_count(state, "3g.40gb").tolist() == [2, 2]  # the original is unchanged
    assert np.array_equal(mig_fit_count(state.empty(), "3g.40gb"), [2, 2])
