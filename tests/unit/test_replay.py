"""The replay's objects read back by the live scheduler as what the simulator places, and the
replay's metrics: a simulated run's own events, fed back as observations, give its summary."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpusched.errors import ConfigError
from gpusched.live.replay_objects import (
    REPLAY_LABEL,
    RUNTIME_ANNOTATION,
    ReplayNames,
    node_object,
    pod_object,
    priority_class_name,
)
from gpusched.live.translate import POD_GROUP_LABEL, node_from_k8s
from gpusched.live.translate_pod import pod_from_k8s
from gpusched.model import (
    Constraints,
    Effect,
    Expression,
    GpuModel,
    Job,
    JobId,
    Node,
    Operator,
    Task,
    TaskId,
    TaskShape,
    Toleration,
)
from gpusched.model.constraints import Taint
from gpusched.scheduler import policy_spec
from gpusched.sim.observed import (
    Kind,
    Observed,
    compare_runs,
    simulate_recorded,
    summarise_observed,
)


def _job(name: str, shape: TaskShape, *, replicas: int = 1, **kw: object) -> Job:
    jid = JobId(name)
    tasks = tuple(
        Task(TaskId(f"{name}-{i}" if replicas > 1 else name), jid, shape) for i in range(replicas)
    )
    return Job(id=jid, tasks=tasks, **kw)  # type: ignore[arg-type]


def test_node_reads_back_with_its_capacity_labels_and_taints() -> None:
    node = Node.with_gpus(
        "h100-003",
        cpu_milli=96_000,
        memory_mib=1_048_576,
        gpu_count=8,
        gpu_model="H100",
        gpu_memory_mib=81_920,
        labels={"topology.gpusched.io/rack": "r1"},
        taints=(Taint("dedicated", "train"),),
    )
    obj = node_object(node, "run1")
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    back = node_from_k8s(obj)
    assert (back.name, back.cpu_milli, back.memory_mib, back.gpu_count) == (
        "h100-003",
        96_000,
        1_048_576,
        8,
    )
    assert back.gpu_model == "H100"
    assert back.labels["topology.gpusched.io/rack"] == "r1"
    assert back.labels[REPLAY_LABEL] == "run1"
    assert back.taints == (Taint("dedicated", "train", Effect.NO_SCHEDULE),)


@pytest.mark.parametrize(
    ("shares", "num_gpu", "milli"),
    [
        pytest.param(True, 2, 1000, id="whole-gpus"),
        pytest.param(True, 1, 250, id="share-as-annotation"),
        pytest.param(False, 1, 1000, id="share-as-whole-gpu-for-kube-scheduler"),
    ],
)
def test_pod_reads_back_as_the_task_shape(shares: bool, num_gpu: int, milli: int) -> None:
    requested = TaskShape(
        cpu_milli=4000,
        memory_mib=16_384,
        num_gpu=2 if num_gpu == 2 else 1,
        gpu_milli=1000 if num_gpu == 2 else 250,
        gpu_models=frozenset({GpuModel("A100")}),
        constraints=Constraints(
            tolerations=(Toleration("dedicated", Operator.EQUAL, "infer", Effect.NO_SCHEDULE),),
            preferred=((10, (Expression("zone", Operator.IN, ("z1",)),)),),
        ),
    )
    job = _job("Infer_7", requested, duration=3600.0)
    obj = pod_object(
        job,
        job.tasks[0],
        name="infer-7",
        group="",
        namespace="ns",
        run="r",
        scheduler="gpusched",
        speed=600.0,
        shares=shares,
    )
    pod = pod_from_k8s(obj)
    assert pod.problem == ""
    assert (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli) == (
        4000,
        16_384,
        num_gpu,
        milli,
    )
    # one GPU model: a node selector on the GFD product label
    assert ("nvidia.com/gpu.product", "A100") in pod.constraints.node_selector
    assert pod.constraints.tolerations == requested.constraints.tolerations
    assert pod.constraints.preferred == requested.constraints.preferred
    # 3600 s of trace at 600x: 6 s on the cluster
    assert obj["metadata"]["annotations"][RUNTIME_ANNOTATION] == "6000ms"


def test_gang_pods_name_their_podgroup_and_models_become_an_affinity() -> None:
    shape = TaskShape(
        cpu_milli=1000,
        memory_mib=1024,
        num_gpu=8,
        gpu_milli=1000,
        gpu_models=frozenset({GpuModel("A100"), GpuModel("H100")}),
    )
    job = _job("train", shape, replicas=4, min_available=4, priority=-5)
    obj = pod_object(
        job,
        job.tasks[1],
        name="train-1",
        group="train",
        namespace="ns",
        run="r",
        scheduler="gpusched",
        speed=1.0,
    )
    pod = pod_from_k8s(obj)
    assert pod.group == "train"
    assert obj["metadata"]["labels"][POD_GROUP_LABEL] == "train"
    assert pod.constraints.required == (
        (Expression("nvidia.com/gpu.product", Operator.IN, ("A100", "H100")),),
    )
    assert obj["spec"]["priorityClassName"] == priority_class_name(-5) == "gpusched-replay-m5"
    assert RUNTIME_ANNOTATION not in obj["metadata"]["annotations"]  # no duration: runs on


def test_names_are_made_valid_and_unique() -> None:
    names = ReplayNames()
    assert names.name("Train_01/a", "job") == "train-01-a"
    assert names.name("train-01-a", "job") == "train-01-a-2"
    assert names.name("Train_01/a", "job") == "train-01-a"


def test_a_node_name_kubernetes_refuses_names_the_node_and_field() -> None:
    node = Node.with_gpus("GPU Node 1", cpu_milli=1000, memory_mib=1024, gpu_count=1)
    with pytest.raises(ConfigError, match=r"node 'GPU Node 1': field 'name'"):
        node_object(node, "r")


WORKLOAD = [
    ("a", 0.0, 300.0, 2, 4, 1000),
    ("b", 0.0, 150.0, 1, 4, 1000),
    ("c", 60.0, 150.0, 1, 2, 1000),
    ("d", 60.0, 300.0, 1, 1, 500),
    ("e", 120.0, 150.0, 2, 4, 1000),
    ("f", 180.0, 150.0, 1, 8, 1000),
]


def _workload() -> tuple[list[Node], list[Job]]:
    nodes = [
        Node.with_gpus(f"n{i}", cpu_milli=64_000, memory_mib=512 * 1024, gpu_count=8)
        for i in range(2)
    ]
    jobs = [
        _job(
            name,
            TaskShape(cpu_milli=1000, memory_mib=1024, num_gpu=gpus, gpu_milli=milli),
            replicas=replicas,
            submit_time=submit,
            duration=duration,
        )
        for name, submit, duration, replicas, gpus, milli in WORKLOAD
    ]
    return nodes, jobs


def test_a_simulated_runs_own_events_give_back_its_summary() -> None:
    nodes, jobs = _workload()
    spec = policy_spec("gpusched")
    sim, summary, first_nodes = simulate_recorded(nodes, jobs, spec, seed=1)
    tasks_of = {j.id: [t.id for t in j.tasks] for j in jobs}
    events = [Observed(r.arrival, Kind.ARRIVE, r.job.id) for r in sim.records.values()]
    for at, kind, who, what in sim.events:
        if kind == "bind":
            node, gpus = re.fullmatch(r"(.*)\[(.*)\]", what).groups()  # type: ignore[union-attr]
            task = TaskId(who)
            job = next(j for j, ts in tasks_of.items() if task in ts)
            indices = tuple(int(g) for g in gpus.split(",")) if gpus else ()
            events.append(Observed(at, Kind.BIND, job, task, node, indices))
        elif kind == "complete":
            for task in tasks_of[JobId(who)]:
                events.append(Observed(at, Kind.COMPLETE, JobId(who), task))
    observed = summarise_observed(nodes, jobs, events, spec)
    keys = ("jobs_started", "jobs_completed", "avg_wait_s", "p95_wait_s", "avg_jct_s")
    assert {k: observed.summary[k] for k in keys} == {k: summary[k] for k in keys}
    assert observed.summary["gpu_allocation_pct"] == pytest.approx(summary["gpu_allocation_pct"])
    assert observed.summary["gpu_held_pct"] == pytest.approx(summary["gpu_held_pct"])
    diff = compare_runs(sim, first_nodes, observed)
    assert diff["start_delta_s"]["mean_abs"] == 0.0
    assert diff["same_node_pct"] == 100.0
    assert diff["jobs_started_in_both"] == len(jobs)


def test_binds_of_a_gang_a_moment_apart_are_not_a_partial_gang() -> None:
    nodes, jobs = _workload()
    gang = jobs[0]
    events = [
        Observed(0.0, Kind.ARRIVE, gang.id),
        Observed(4.0, Kind.BIND, gang.id, gang.tasks[0].id, "n0", (0, 1, 2, 3)),
        Observed(4.5, Kind.BIND, gang.id, gang.tasks[1].id, "n0", (4, 5, 6, 7)),
    ]
    spec = policy_spec("gpusched")
    apart = summarise_observed(nodes, jobs, events, spec)
    settled = summarise_observed(nodes, jobs, events, spec, settle_s=1.0)
    assert apart.summary["partially_placed_gangs_max"] == 1
    assert settled.summary["partially_placed_gangs_max"] == 0
    assert settled.simulation.records[gang.id].first_start == 4.5


def test_replay_stops_on_a_bad_node_name_before_touching_the_cluster(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "nodes:\n  - {name: GPU_box, cpu: 8, memory: 64Gi, gpus: 1, gpu_model: A100}\n"
    )
    workload = tmp_path / "jobs.yaml"
    workload.write_text("jobs:\n  - {name: a, cpu: 1, memory: 1Gi, gpus: 1, duration: 10}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    done = subprocess.run(
        [
            *(sys.executable, "-c", "from gpusched.cli.main import main; main()", "replay"),
            *("--kubeconfig", str(kubeconfig), "--cluster", str(cluster)),
            *("--workload", str(workload)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "node 'GPU_box': field 'name'" in done.stderr
    assert "apiserver" not in done.stderr  # nothing was sent


def test_binds_without_gpu_indices_at_one_instant_get_distinct_gpus() -> None:
    nodes, jobs = _workload()
    gang = jobs[0]  # 2 pods of 4 GPUs; kube-scheduler writes no GPU indices
    events = [
        Observed(0.0, Kind.ARRIVE, gang.id),
        Observed(5.0, Kind.BIND, gang.id, gang.tasks[0].id, "n1"),
        Observed(5.0, Kind.BIND, gang.id, gang.tasks[1].id, "n1"),
    ]
    observed = summarise_observed(nodes, jobs, events, policy_spec("kube-default"))
    assert observed.overcommitted == []
    allocations = observed.simulation.state.allocations
    held = [g for t in gang.tasks for g in allocations[t.id].gpus]
    assert sorted(held) == list(range(8))


def test_a_deleted_pod_of_a_partly_placed_gang_leaves_its_node() -> None:
    nodes, jobs = _workload()
    gang = jobs[0]
    first, second = gang.tasks
    events = [
        Observed(0.0, Kind.ARRIVE, gang.id),
        Observed(5.0, Kind.BIND, gang.id, first.id, "n0"),  # a stock scheduler: one pod only
        Observed(9.0, Kind.EVICT, gang.id, first.id),  # preempted; the replay re-creates it
        Observed(20.0, Kind.BIND, gang.id, first.id, "n1"),
        Observed(20.0, Kind.BIND, gang.id, second.id, "n1"),
    ]
    observed = summarise_observed(nodes, jobs, events, policy_spec("kube-default"))
    assert observed.overcommitted == []
    assert {observed.simulation.state.allocations[t.id].node for t in gang.tasks} == {1}
    assert observed.simulation.records[gang.id].first_start == 20.0


def test_a_completed_pod_of_a_partly_placed_gang_leaves_its_node() -> None:
    nodes, jobs = _workload()
    gang, single = jobs[0], jobs[5]  # 2 x 4 GPUs; then 8 GPUs
    events = [
        Observed(0.0, Kind.ARRIVE, gang.id),
        Observed(5.0, Kind.BIND, gang.id, gang.tasks[0].id, "n0"),  # one member only
        Observed(305.0, Kind.COMPLETE, gang.id, gang.tasks[0].id),  # kwok ran it anyway
        Observed(306.0, Kind.ARRIVE, single.id),
        Observed(307.0, Kind.BIND, single.id, single.tasks[0].id, "n0"),
    ]
    observed = summarise_observed(nodes, jobs, events, policy_spec("kube-default"))
    assert observed.overcommitted == []
    assert observed.simulation.records[gang.id].first_start is None  # never ran as a gang
    assert observed.simulation.records[single.id].first_start == 307.0
