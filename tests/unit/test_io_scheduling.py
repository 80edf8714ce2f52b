"""The scheduling config file (queues, priority classes): loading, unit conversion, every error
naming file, line and field, and resolving jobs' priority classes and queues."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from builders import make_job
from gpusched.errors import InputError, TraceError
from gpusched.io.native_workload import load_workload
from gpusched.io.scheduling import (
    PriorityClass,
    SchedulingConfig,
    apply_priority_classes,
    check_job_queues,
    load_scheduling,
    parse_scheduling,
)
from gpusched.io.yamlfile import load_yaml
from gpusched.model import Job, QueueName, QueueSpec, QueueTree, Resources


def write(tmp_path: Path, text: str, name: str = "sched.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


EXAMPLE = """
priority_classes:
  - {name: inference-critical, value: 1000, preemptible: false}
  - {name: training-batch, value: 100}
queues:
  - name: org
    guaranteed: {gpu: 64, cpu: 512}
  - name: team-a
    parent: org
    guaranteed: {gpu: 32, cpu: 256}
    limit: {gpu: 48}
    lending_limit: {gpu: 8}
    weight: 2
"""


def test_the_documented_example_loads(tmp_path: Path) -> None:
    config = load_scheduling(write(tmp_path, EXAMPLE))
    assert config.priority_classes == {
        "inference-critical": PriorityClass("inference-critical", 1000, preemptible=False),
        "training-batch": PriorityClass("training-batch", 100, preemptible=True),
    }
    tree = config.queues
    assert tree is not None
    assert [q.name for q in tree] == ["org", "team-a"]
    assert tree[QueueName("org")] == QueueSpec(
        QueueName("org"), guaranteed=Resources({"gpu": 64_000, "cpu": 512_000})
    )
    assert tree[QueueName("team-a")] == QueueSpec(
        QueueName("team-a"),
        parent=QueueName("org"),
        guaranteed=Resources({"gpu": 32_000, "cpu": 256_000}),
        limit=Resources({"gpu": 48_000}),
        lending_limit=Resources({"gpu": 8_000}),
        weight=2.0,
    )
    assert tree.path(QueueName("team-a")) == ("team-a", "org")


@pytest.mark.parametrize(
    ("amounts", "expected"),
    [
        pytest.param("{gpu: 8}", {"gpu": 8000}, id="whole-gpus-to-milli"),
        pytest.param("{gpu: 0.5}", {"gpu": 500}, id="fractional-gpu"),
        pytest.param("{gpu: 0.125}", {"gpu": 125}, id="eighth-of-a-gpu"),
        pytest.param("{gpu: 0}", {"gpu": 0}, id="explicit-zero-kept"),
        pytest.param("{gpu/H100: 4}", {"gpu/H100": 4000}, id="per-model-gpus"),
        pytest.param("{cpu: 16}", {"cpu": 16_000}, id="cpu-cores"),
        pytest.param("{cpu: 0.5}", {"cpu": 500}, id="fractional-cores"),
        pytest.param('{cpu: "500m"}', {"cpu": 500}, id="millicores"),
        pytest.param("{memory: 512Gi}", {"memory": 512 * 1024}, id="memory-gibibytes"),
        pytest.param("{memory: 2048}", {"memory": 2048}, id="memory-plain-mib"),
        pytest.param("{}", {}, id="nothing"),
    ],
)
def test_amounts_are_converted_to_resource_units(
    tmp_path: Path, amounts: str, expected: dict[str, int]
) -> None:
    text = f"queues:\n  - name: q\n    guaranteed: {amounts}\n    limit: {amounts}\n"
    tree = load_scheduling(write(tmp_path, text)).queues
    assert tree is not None
    spec = tree[QueueName("q")]
    assert dict(spec.guaranteed) == expected
    assert spec.limit is not None
    assert dict(spec.limit) == expected
    assert spec.lending_limit is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty-file"),
        pytest.param("queues: []\n", id="empty-queue-list"),
        pytest.param("priority_classes: [{name: p, value: 1}]\n", id="classes-only"),
    ],
)
def test_no_queues_means_no_tree(tmp_path: Path, text: str) -> None:
    assert load_scheduling(write(tmp_path, text)).queues is None


def test_a_section_of_a_larger_file_parses_with_its_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        other: 1
        scheduling:
          queues:
            - {name: a, guaranteed: {gpu: 4}}
            - {name: b, parent: nope}
        """,
    )
    data = load_yaml(path)
    assert parse_scheduling(None, path) == SchedulingConfig(None, {})
    with pytest.raises(TraceError) as err:
        parse_scheduling(data["scheduling"], path)
    assert err.value.line == 5
    assert err.value.field == "queues[1].parent"


# -- bad input: every error names the file, the line and the field -------------------------


@pytest.mark.parametrize(
    ("text", "line", "field", "problem"),
    [
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpus: 4}
            """,
            3,
            "queues[0].guaranteed",
            "unknown resource 'gpus'; expected one of gpu, gpu/<MODEL> (e.g. gpu/H100), cpu, "
            "memory",
            id="unknown-resource",
        ),
        pytest.param(
            """
            queues:
              - name: a
                limit: {gpu/: 4}
            """,
            3,
            "queues[0].limit",
            "unknown resource 'gpu/'",
            id="per-model-resource-without-model",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpu: lots}
            """,
            3,
            "queues[0].guaranteed",
            "gpu: got 'lots'; expected a number of GPUs such as 8 or 0.5",
            id="gpu-not-a-number",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpu: true}
            """,
            3,
            "queues[0].guaranteed",
            "gpu: got True; expected a number or a quantity",
            id="gpu-boolean",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpu: -1}
            """,
            3,
            "queues[0].guaranteed",
            "gpu: got -1; quotas must be finite and >= 0",
            id="negative-gpus",
        ),
        pytest.param(
            """
            queues:
              - name: a
                lending_limit: {gpu: .inf}
            """,
            3,
            "queues[0].lending_limit",
            "gpu: got inf; quotas must be finite and >= 0",
            id="infinite-gpus",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpu: 0.0001}
            """,
            3,
            "queues[0].guaranteed",
            "GPUs are counted in thousandths",
            id="gpu-finer-than-milli",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {cpu: many}
            """,
            3,
            "queues[0].guaranteed",
            "'many' is not a CPU quantity; expected e.g. 8 (cores), 0.5 or '500m'",
            id="cpu-not-a-quantity",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {memory: -5Gi}
            """,
            3,
            "queues[0].guaranteed",
            "'-5Gi' is not a memory quantity",
            id="negative-memory",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: [gpu, 4]
            """,
            3,
            "queues[0].guaranteed",
            "Input should be a valid dictionary",
            id="amounts-not-a-mapping",
        ),
        pytest.param(
            """
            queues:
              - name: a
                weight: 0
            """,
            3,
            "queues[0].weight",
            "got 0; Input should be greater than 0",
            id="zero-weight",
        ),
        pytest.param(
            """
            queues:
              - name: a
                weight: true
            """,
            3,
            "queues[0].weight",
            "Input should be a valid number",
            id="boolean-weight",
        ),
        pytest.param(
            """
            queues:
              - name: a
                gauranteed: {gpu: 4}
            """,
            3,
            "queues[0].gauranteed",
            "Extra inputs are not permitted",
            id="misspelt-field",
        ),
        pytest.param(
            """
            queues:
              - guaranteed: {gpu: 4}
            """,
            2,
            "queues[0].name",
            "Field required",
            id="queue-without-name",
        ),
        pytest.param(
            """
            queue:
              - name: a
            """,
            1,
            "queue",
            "Extra inputs are not permitted",
            id="misspelt-section",
        ),
        pytest.param(
            """
            priority_classes:
              - {name: high}
            """,
            2,
            "priority_classes[0].value",
            "Field required",
            id="class-without-value",
        ),
        pytest.param(
            """
            priority_classes:
              - {name: high, value: true}
            """,
            2,
            "priority_classes[0].value",
            "Input should be a valid integer",
            id="class-value-boolean",
        ),
        pytest.param(
            """
            priority_classes:
              - {name: high, value: 10}
              - {name: low, value: 0}
              - {name: high, value: 20}
            """,
            4,
            "priority_classes[2].name",
            "priority class 'high' is defined twice; names are unique",
            id="class-defined-twice",
        ),
        pytest.param(
            """
            queues:
              - name: a
              - name: b
              - name: a
                weight: 2
            """,
            4,
            "queues[2].name",
            "queue 'a' is defined twice (first at queues[0]); queue names are unique",
            id="queue-defined-twice",
        ),
        pytest.param(
            """
            queues:
              - name: a
              - name: b
                parent: nope
            """,
            4,
            "queues[1].parent",
            "queue 'b': no queue named 'nope'",
            id="missing-parent",
        ),
        pytest.param(
            """
            queues:
              - name: a
                parent: c
              - name: b
                parent: a
              - name: c
                parent: b
            """,
            3,
            "queues[0].parent",
            "queue 'a': the parent chain loops (a -> c -> b -> a); a queue tree must not have "
            "cycles",
            id="parent-cycle",
        ),
        pytest.param(
            """
            queues:
              - name: a
                parent: a
            """,
            3,
            "queues[0].parent",
            "queue 'a': the parent chain loops (a -> a)",
            id="own-parent",
        ),
        pytest.param(
            """
            queues:
              - name: org
                guaranteed:
                  cpu: 64
                  gpu: 16
              - {name: a, parent: org, guaranteed: {gpu: 8}}
              - {name: b, parent: org, guaranteed: {gpu: 12}}
            """,
            5,
            "queues[0].guaranteed.gpu",
            "queue 'org': children a, b are guaranteed 20000 in all, more than the parent's 16000",
            id="children-guaranteed-more-than-parent",
        ),
        pytest.param(
            """
            queues:
              - name: org
                guaranteed: {gpu: 64}
              - name: team-a
                parent: org
                guaranteed: {gpu: 32, cpu: 256}
            """,
            3,
            "queues[0].guaranteed.cpu",
            "queue 'org': children team-a are guaranteed 256000 in all, more than the parent's 0",
            id="child-guarantees-a-resource-the-parent-does-not",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpu: 8}
                limit: {gpu: 4}
            """,
            4,
            "queues[0].limit.gpu",
            "queue 'a': 4000 is below the guarantee 8000; a limit must be at least the guarantee",
            id="limit-below-guarantee",
        ),
        pytest.param(
            """
            queues:
              - name: a
                guaranteed: {gpu: [8
            """,
            4,
            None,
            "invalid YAML",
            id="broken-yaml",
        ),
    ],
)
def test_bad_config_names_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str | None, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as err:
        load_scheduling(path)
    assert err.value.path == str(path)
    assert err.value.line == line, str(err.value)
    assert err.value.field == field, str(err.value)
    assert problem in err.value.problem, str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_scheduling(tmp_path / "absent.yaml")


# -- resolving jobs ---------------------------------------------------------------------------

CLASSES = SchedulingConfig(
    queues=QueueTree.build(
        [QueueSpec(QueueName("team-a")), QueueSpec(QueueName("team-b"), QueueName("team-a"))]
    ),
    priority_classes={
        "critical": PriorityClass("critical", 1000, preemptible=False),
        "batch": PriorityClass("batch", 100),
    },
)


def job(
    name: str,
    *,
    priority_class: str = "",
    priority: int = 0,
    preemptible: bool = True,
    queue: str = "team-a",
) -> Job:
    built = make_job(name).gpus(1).queue(queue).priority(priority).build()
    return replace(built, priority_class=priority_class, preemptible=preemptible)


@pytest.mark.parametrize(
    ("given", "priority", "preemptible"),
    [
        pytest.param(job("j"), 0, True, id="no-class-unchanged"),
        pytest.param(job("j", priority=7), 7, True, id="no-class-keeps-own-priority"),
        pytest.param(job("j", priority_class="batch"), 100, True, id="class-sets-priority"),
        pytest.param(
            job("j", priority_class="batch", priority=100), 100, True, id="same-priority-as-class"
        ),
        pytest.param(job("j", priority_class="critical"), 1000, False, id="non-preemptible-class"),
        pytest.param(
            job("j", priority_class="batch", preemptible=False),
            100,
            False,
            id="job-preemptible-false-wins-over-class",
        ),
        pytest.param(
            job("j", priority_class="critical", preemptible=True),
            1000,
            False,
            id="class-preemptible-false-wins-over-default",
        ),
    ],
)
def test_priority_classes_resolve(given: Job, priority: int, preemptible: bool) -> None:
    (resolved,) = apply_priority_classes([given], CLASSES, "jobs.yaml")
    assert resolved.priority == priority
    assert resolved.preemptible is preemptible
    assert resolved.priority_class == given.priority_class
    assert (resolved.id, resolved.tasks, resolved.queue) == (given.id, given.tasks, given.queue)
    assert resolved.gpu_milli == given.gpu_milli


@pytest.mark.parametrize(
    ("jobs", "config", "field", "problem"),
    [
        pytest.param(
            [job("ok", priority_class="batch"), job("train-7", priority_class="urgent")],
            CLASSES,
            "jobs[1].priority_class",
            "job 'train-7': unknown priority class 'urgent'; known: batch, critical",
            id="unknown-class",
        ),
        pytest.param(
            [job("train-7", priority_class="batch")],
            SchedulingConfig(None, {}),
            "jobs[0].priority_class",
            "job 'train-7': unknown priority class 'batch'; known: none are configured",
            id="no-classes-configured",
        ),
        pytest.param(
            [job("train-7", priority_class="batch", priority=5)],
            CLASSES,
            "jobs[0].priority",
            "job 'train-7': priority 5 contradicts priority class 'batch' (value 100); give the "
            "class or the priority, not both",
            id="priority-contradicts-class",
        ),
    ],
)
def test_bad_priority_classes_name_the_job(
    jobs: list[Job], config: SchedulingConfig, field: str, problem: str
) -> None:
    with pytest.raises(TraceError) as err:
        apply_priority_classes(jobs, config, "jobs.yaml")
    assert (err.value.path, err.value.field, err.value.problem) == ("jobs.yaml", field, problem)


def test_job_queues_must_exist() -> None:
    check_job_queues([job("a", queue="team-a"), job("b", queue="team-b")], CLASSES, "w.yaml")
    with pytest.raises(TraceError) as err:
        check_job_queues([job("a"), job("train-7", queue="team-c")], CLASSES, "w.yaml")
    assert err.value.field == "jobs[1].queue"
    assert err.value.problem == (
        "job 'train-7': queue 'team-c' does not exist; known queues: team-a, team-b"
    )


def test_without_queues_any_queue_name_is_accepted() -> None:
    check_job_queues([job("a", queue="anything")], SchedulingConfig(None, {}), "w.yaml")


def test_a_native_workload_resolves_against_a_config_file(tmp_path: Path) -> None:
    config = load_scheduling(write(tmp_path, EXAMPLE))
    workload = write(
        tmp_path,
        """
        jobs:
          - {name: serve, queue: team-a, priority_class: inference-critical, cpu: 4,
             memory: 16Gi, gpus: 1}
          - {name: train, queue: team-a, priority_class: training-batch, preemptible: false,
             cpu: 8, memory: 64Gi, gpus: 8}
          - {name: adhoc, queue: org, priority: 3, cpu: 1, memory: 1Gi}
        """,
        name="jobs.yaml",
    )
    jobs = load_workload(workload)
    check_job_queues(jobs, config, workload)
    resolved = {str(j.id): j for j in apply_priority_classes(jobs, config, workload)}
    assert (resolved["serve"].priority, resolved["serve"].preemptible) == (1000, False)
    assert (resolved["train"].priority, resolved["train"].preemptible) == (100, False)
    assert (resolved["adhoc"].priority, resolved["adhoc"].preemptible) == (3, True)
