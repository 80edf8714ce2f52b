"""The native cluster, workload and scheduling-config writers and readers: node taints, pod
tolerations, node selectors and affinity; lossless round trips; every error naming file, line
and field."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from gpusched.errors import TraceError
from gpusched.io.native_cluster import load_cluster
from gpusched.io.native_dump import dump_cluster, dump_scheduling, dump_workload
from gpusched.io.native_workload import load_workload
from gpusched.io.scheduling import load_scheduling
from gpusched.model import (
    Constraints,
    Effect,
    Expression,
    GpuModel,
    Job,
    JobId,
    JobKind,
    Node,
    Operator,
    QueueName,
    SchedulingConfig,
    Taint,
    Task,
    TaskId,
    TaskShape,
    Toleration,
)
from gpusched.workloads import (
    WorkloadParams,
    default_cluster,
    default_scheduling,
    generate_workload,
)


def write(tmp_path: Path, text: str, name: str = "f.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


CONSTRAINTS = Constraints(
    node_selector=(("gpusched.io/pool", "h100"), ("zone", "z1")),
    tolerations=(
        Toleration("dedicated", Operator.EQUAL, "infer", Effect.NO_SCHEDULE),
        Toleration("spot", Operator.EXISTS),
        Toleration(operator=Operator.EXISTS, effect=Effect.NO_EXECUTE),
    ),
    required=(
        (
            Expression("zone", Operator.IN, ("z1", "z2")),
            Expression("maint", Operator.DOES_NOT_EXIST),
        ),
        (Expression("pool", Operator.NOT_IN, ("cpu",)),),
    ),
    preferred=(
        (10, (Expression("zone", Operator.IN, ("z1",)),)),
        (1, (Expression("fast", Operator.EXISTS),)),
    ),
)


def _gang(name: str, replicas: int, min_available: int, shape: TaskShape, **kw: object) -> Job:
    jid = JobId(name)
    tasks = tuple(
        Task(TaskId(name if replicas == 1 else f"{name}-{i}"), jid, shape) for i in range(replicas)
    )
    return Job(jid, tasks, min_available, **kw)  # type: ignore[arg-type]


def _every_field() -> list[Job]:
    train = TaskShape(
        cpu_milli=96_000,
        memory_mib=1024 * 1024,
        num_gpu=8,
        gpu_milli=1000,
        gpu_models=frozenset({GpuModel("H100"), GpuModel("A100")}),
        constraints=CONSTRAINTS,
    )
    infer = TaskShape(cpu_milli=500, memory_mib=8192, num_gpu=1, gpu_milli=330)
    return [
        _gang(
            "train-elastic",
            6,
            4,
            train,
            queue=QueueName("research"),
            priority=0,
            submit_time=12.125,
            duration=3600.5,
            kind=JobKind.TRAINING,
            labels={"team": "a", "exp": "42"},
            priority_class="training-batch",
            preemptible=True,
            runtime_estimate=7200.0,
            user="research-01",
        ),
        _gang(
            "infer",
            1,
            1,
            infer,
            queue=QueueName("serving"),
            priority=5,
            submit_time=0.001,
            duration=None,
            kind=JobKind.INFERENCE,
            preemptible=False,
        ),
        _gang("cpu", 1, 1, TaskShape(cpu_milli=1, memory_mib=1)),
    ]


# -- round trips -------------------------------------------------------------------------


def test_workload_round_trip_keeps_every_field(tmp_path: Path) -> None:
    jobs = _every_field()
    path = tmp_path / "w.yaml"
    dump_workload(jobs, path)
    back = load_workload(path)
    assert back == jobs
    # Fields outside Job equality: labels and each task's shape.
    assert [j.labels for j in back] == [j.labels for j in jobs]
    assert [t.shape for j in back for t in j.tasks] == [t.shape for j in jobs for t in j.tasks]
    assert back[0].tasks[0].shape.constraints == CONSTRAINTS


def test_generated_workload_round_trips(tmp_path: Path) -> None:
    jobs = generate_workload(default_cluster(), WorkloadParams(jobs=1500), 4)
    path = tmp_path / "w.yaml"
    dump_workload(jobs, path)
    back = load_workload(path)
    assert back == jobs
    for a, b in zip(back, jobs, strict=True):
        assert (a.user, a.runtime_estimate, a.priority_class) == (
            b.user,
            b.runtime_estimate,
            b.priority_class,
        )
        assert [t.shape for t in a.tasks] == [t.shape for t in b.tasks]


def test_cluster_round_trip_keeps_taints_and_labels(tmp_path: Path) -> None:
    nodes = [
        Node.with_gpus(
            "a",
            cpu_milli=64_500,
            memory_mib=512 * 1024,
            gpu_count=8,
            gpu_model="H100",
            gpu_memory_mib=80 * 1024,
            labels={"pool": "infer", "zone": "z1"},
            taints=(
                Taint("dedicated", "infer", Effect.NO_SCHEDULE),
                Taint("spot", "", Effect.PREFER_NO_SCHEDULE),
                Taint("dedicated", "infer", Effect.NO_EXECUTE),
            ),
        ),
        Node.with_gpus("cpu", cpu_milli=8000, memory_mib=16384),
        *default_cluster()[:3],
    ]
    path = tmp_path / "c.yaml"
    dump_cluster(nodes, path)
    assert load_cluster(path) == nodes


def _queues(config: SchedulingConfig) -> list[object]:
    return list(config.queues) if config.queues is not None else []


def test_default_scheduling_config_round_trips(tmp_path: Path) -> None:
    config = default_scheduling(default_cluster())
    path = tmp_path / "s.yaml"
    dump_scheduling(config, path, comment="a comment\nover two lines")
    assert path.read_text().startswith("# a comment\n# over two lines\n")
    back = load_scheduling(path)
    assert back.priority_classes == config.priority_classes
    assert _queues(back) == _queues(config)


def test_scheduling_config_with_every_unit_round_trips(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        """
        priority_classes:
          - {name: hi, value: 1000, preemptible: false}
        queues:
          - name: org
            guaranteed: {gpu: 64.5, cpu: 512, memory: 4Ti, gpu/H100: 0.125}
          - name: team-a
            parent: org
            guaranteed: {gpu: 32, cpu: "250500m", memory: 1Ti}
            limit: {gpu: 48, memory: 2Ti}
            lending_limit: {gpu: 0.5}
            weight: 2.5
        """,
    )
    config = load_scheduling(src)
    out = tmp_path / "out.yaml"
    dump_scheduling(config, out)
    back = load_scheduling(out)
    assert back.priority_classes == config.priority_classes
    assert _queues(back) == _queues(config)


def test_the_documented_workload_example_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    block = doc.split("## Workload", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    jobs = load_workload(write(tmp_path, block))
    assert len(jobs) == 1
    c = jobs[0].tasks[0].shape.constraints
    assert c.node_selector == (("gpusched.io/pool", "h100"),)
    assert c.tolerations == (Toleration("dedicated", Operator.EQUAL, "infer", Effect.NO_SCHEDULE),)
    assert c.required == ((Expression("zone", Operator.IN, ("z1", "z2")),),)
    assert c.preferred == ((10, (Expression("zone", Operator.IN, ("z1",)),)),)
    assert c.selects({"gpusched.io/pool": "h100", "zone": "z2"})
    assert not c.selects({"gpusched.io/pool": "h100", "zone": "z3"})


def test_the_documented_cluster_example_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    block = doc.split("## Cluster", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    nodes = load_cluster(write(tmp_path, block))
    assert len(nodes) == 16
    assert nodes[0].taints == (Taint("dedicated", "train", Effect.NO_SCHEDULE),)


def test_csv_workload_takes_constraints_as_yaml_flow_text(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(
        "name,cpu,memory,gpus,node_selector,tolerations,affinity_required,affinity_preferred,"
        "labels\n"
        'a,4,8Gi,1,"{pool: infer}","[{key: dedicated, value: infer}]",'
        '"[[{key: zone, operator: In, values: [z1]}]]",'
        '"[{weight: 5, match: [{key: fast, operator: Exists}]}]","{team: a}"\n'
        "b,4,8Gi,1,,,,,\n",
        encoding="utf-8",
    )
    a, b = load_workload(path)
    c = a.tasks[0].shape.constraints
    assert c.node_selector == (("pool", "infer"),)
    assert c.tolerations == (Toleration("dedicated", Operator.EQUAL, "infer"),)
    assert c.required == ((Expression("zone", Operator.IN, ("z1",)),),)
    assert c.preferred == ((5, (Expression("fast", Operator.EXISTS),)),)
    assert a.labels == {"team": "a"}
    assert b.tasks[0].shape.constraints.empty


# -- refusals ------------------------------------------------------------------------------


def test_dump_refuses_jobs_the_format_cannot_express(tmp_path: Path) -> None:
    small = TaskShape(cpu_milli=1000, memory_mib=1024)
    big = TaskShape(cpu_milli=2000, memory_mib=1024)
    jid = JobId("mixed")
    mixed = Job(jid, (Task(TaskId("mixed-0"), jid, small), Task(TaskId("mixed-1"), jid, big)))
    with pytest.raises(ValueError, match="different shapes"):
        dump_workload([mixed], tmp_path / "w.yaml")
    odd = Job(jid, (Task(TaskId("x"), jid, small), Task(TaskId("y"), jid, small)))
    with pytest.raises(ValueError, match="pod names"):
        dump_workload([odd], tmp_path / "w.yaml")


def load_error(
    load: Callable[[Path], object], path: Path, text: str, *, line: int, field: str, says: str
) -> TraceError:
    """Write ``text`` to ``path``; ``load`` must refuse it naming the file, ``line`` and
    ``field``, with ``says`` in the problem. Returns the error."""
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as err:
        load(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)
    assert says in err.value.problem
    return err.value


JOB_HEAD = "jobs:\n  - name: j\n    cpu: 1\n    memory: 1Gi\n"


@pytest.mark.parametrize(
    ("body", "line", "field", "says"),
    [
        pytest.param(
            "    tolerations:\n      - {key: a, operator: In, value: b}\n",
            6, "jobs[0].tolerations[0]", "not valid in a toleration",
            id="toleration-operator-in",
        ),
        pytest.param(
            "    tolerations:\n      - {key: a, operator: Exists, value: b}\n",
            6, "jobs[0].tolerations[0]", "matches any value",
            id="toleration-exists-with-value",
        ),
        pytest.param(
            "    tolerations:\n      - {value: b}\n",
            6, "jobs[0].tolerations[0]", "without key must use operator Exists",
            id="toleration-without-key",
        ),
        pytest.param(
            "    tolerations:\n      - {key: a, effect: Sometimes}\n",
            6, "jobs[0].tolerations[0].effect", "NoSchedule",
            id="toleration-bad-effect",
        ),
        pytest.param(
            "    tolerations:\n      - {key: a, colour: red}\n",
            6, "jobs[0].tolerations[0].colour", "Extra inputs",
            id="toleration-unknown-field",
        ),
        pytest.param(
            "    node_selector: {pool: true}\n",
            5, "jobs[0].node_selector.pool", "valid string",
            id="selector-value-not-text",
        ),
        pytest.param(
            "    node_selector: [pool]\n",
            5, "jobs[0].node_selector", "valid dictionary",
            id="selector-not-a-mapping",
        ),
        pytest.param(
            "    affinity_required:\n      - [{key: zone, operator: In}]\n",
            6, "jobs[0].affinity_required[0][0]", "needs at least one value",
            id="in-without-values",
        ),
        pytest.param(
            "    affinity_required:\n      - [{key: zone, operator: Exists, values: [a]}]\n",
            6, "jobs[0].affinity_required[0][0]", "takes no values",
            id="exists-with-values",
        ),
        pytest.param(
            "    affinity_required:\n      - [{key: zone, operator: Equal, values: [a]}]\n",
            6, "jobs[0].affinity_required[0][0]", "not valid in node affinity",
            id="equal-in-affinity",
        ),
        pytest.param(
            "    affinity_required:\n      - [{key: zone, operator: Near}]\n",
            6, "jobs[0].affinity_required[0][0].operator", "'In'",
            id="unknown-operator",
        ),
        pytest.param(
            "    affinity_required:\n      - []\n",
            2, "jobs[0]", "empty term",
            id="empty-required-term",
        ),
        pytest.param(
            "    affinity_required: {zone: z1}\n",
            5, "jobs[0].affinity_required", "valid list",
            id="required-not-a-list",
        ),
        pytest.param(
            "    affinity_preferred:\n      - weight: 0\n"
            "        match: [{key: a, operator: Exists}]\n",
            6, "jobs[0].affinity_preferred[0].weight", "greater than or equal to 1",
            id="preferred-weight-zero",
        ),
        pytest.param(
            "    affinity_preferred:\n      - {weight: 101, match: [{key: a, operator: Exists}]}\n",
            6, "jobs[0].affinity_preferred[0].weight", "less than or equal to 100",
            id="preferred-weight-over-100",
        ),
        pytest.param(
            "    affinity_preferred:\n      - {weight: '5', match: [{key: a, operator: Exists}]}\n",
            6, "jobs[0].affinity_preferred[0].weight", "valid integer",
            id="preferred-weight-text",
        ),
        pytest.param(
            "    affinity_preferred:\n      - {weight: 5, match: []}\n",
            6, "jobs[0].affinity_preferred[0].match", "at least 1 item",
            id="preferred-empty-match",
        ),
        pytest.param(
            "    labels: {team: 7}\n",
            5, "jobs[0].labels.team", "valid string",
            id="label-value-not-text",
        ),
    ],
)  # fmt: skip
def test_bad_job_constraints_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, says: str
) -> None:
    path = tmp_path / "w.yaml"
    error = load_error(load_workload, path, JOB_HEAD + body, line=line, field=field, says=says)
    assert str(error).startswith(f"{path}:{line}: field '{field}': ")


NODE_HEAD = "nodes:\n  - name: a\n    cpu: 8\n    memory: 8Gi\n"


@pytest.mark.parametrize(
    ("body", "line", "field", "says"),
    [
        pytest.param(
            "    taints:\n      - {key: a, effect: Never}\n",
            6, "nodes[0].taints[0].effect", "PreferNoSchedule",
            id="bad-effect",
        ),
        pytest.param(
            "    taints:\n      - {value: b}\n",
            6, "nodes[0].taints[0].key", "Field required",
            id="taint-without-key",
        ),
        pytest.param(
            "    taints:\n      - {key: a, operator: Exists}\n",
            6, "nodes[0].taints[0].operator", "Extra inputs",
            id="taint-with-toleration-field",
        ),
        pytest.param(
            "    taints:\n      - {key: a, value: b}\n      - {key: a, value: c}\n",
            2, "nodes[0]", "two taints 'a' with effect NoSchedule",
            id="same-key-and-effect-twice",
        ),
        pytest.param(
            "    taints: dedicated=infer:NoSchedule\n",
            5, "nodes[0].taints", "valid list",
            id="kubectl-syntax-is-not-the-format",
        ),
    ],
)  # fmt: skip
def test_bad_taints_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, says: str
) -> None:
    load_error(
        load_cluster, tmp_path / "c.yaml", NODE_HEAD + body, line=line, field=field, says=says
    )


def test_bad_csv_constraint_cell_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(
        'name,cpu,memory,tolerations\na,1,1Gi,\nb,1,1Gi,"[{key: a, operator: Exists, value: x}]"\n',
        encoding="utf-8",
    )
    with pytest.raises(TraceError) as err:
        load_workload(path)
    assert (err.value.line, err.value.field) == (3, "tolerations[0]")
    path.write_text('name,cpu,memory,node_selector\na,1,1Gi,"{pool: [a"\n', encoding="utf-8")
    with pytest.raises(TraceError) as err:
        load_workload(path)
    assert (err.value.line, err.value.field) == (2, "node_selector")
    assert "YAML flow text" in err.value.problem
