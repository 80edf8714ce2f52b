"""Model values and the test builders that make them; the exception tree's message format."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from builders import make_job, make_node, make_task
from gpusched.errors import ConfigError, GpuschedError, InputError, InvariantError, TraceError
from gpusched.model import Gpu, GpuModel, Job, JobId, Node, NodeName, TaskId, TaskShape


def test_node_builder_makes_a_homogeneous_node() -> None:
    node = make_node("n1").gpus(8, model="G2").cpu(96).mem_gib(512).label("rack", "r1").build()
    assert node == Node(
        NodeName("n1"),
        96_000,
        512 * 1024,
        tuple(Gpu(i, GpuModel("G2")) for i in range(8)),
        {"rack": "r1"},
    )
    assert node.gpu_count == 8
    assert node.gpu_model == "G2"
    assert make_node("cpu").build().gpu_model is None


def test_job_builder_makes_a_gang_of_identical_tasks() -> None:
    job = make_job("train").gpus(2).cpu(8).mem_gib(32).replicas(3).at(5).runs_for(60).build()
    assert [t.id for t in job.tasks] == ["train-0", "train-1", "train-2"]
    assert {t.job for t in job.tasks} == {JobId("train")}
    assert job.tasks[0].shape == TaskShape(8000, 32 * 1024, 2, 1000)
    assert job.min_available == 3  # defaults to every task
    assert (job.submit_time, job.duration) == (5.0, 60.0)
    assert job.gpu_milli == 6000


@pytest.mark.parametrize(
    ("shape", "sharing", "total"),
    [
        pytest.param(TaskShape(1000, 1024), False, 0, id="cpu-only"),
        pytest.param(TaskShape(1000, 1024, 1, 470), True, 470, id="fraction"),
        pytest.param(TaskShape(1000, 1024, 1, 1000), False, 1000, id="one-whole-gpu"),
        pytest.param(TaskShape(1000, 1024, 4, 1000), False, 4000, id="four-gpus"),
    ],
)
def test_task_shape_properties(shape: TaskShape, sharing: bool, total: int) -> None:
    assert shape.is_sharing is sharing
    assert shape.total_gpu_milli == total


def test_single_job_uses_the_task_id_as_job_id() -> None:
    job = Job.single("pod-1", TaskShape(500, 256, 1, 250), submit_time=3.0)
    assert job.id == "pod-1"
    assert [(t.id, t.job) for t in job.tasks] == [(TaskId("pod-1"), JobId("pod-1"))]
    assert job.min_available == 1
    assert job.gpu_milli == 250


def test_task_builder_defaults_the_job_to_the_task() -> None:
    task = make_task("t").share(300).models("T4").build()
    assert task.job == "t"
    assert task.shape.gpu_models == frozenset({GpuModel("T4")})
    assert make_task("t").of_job("j").build().job == "j"


def test_exception_tree_and_trace_error_message() -> None:
    assert issubclass(TraceError, InputError)
    assert issubclass(ConfigError, InputError)
    assert issubclass(InputError, GpuschedError)
    assert issubclass(InvariantError, GpuschedError)
    err = TraceError("pods.csv", 7, "gpu_milli", "got 1200; expected a value <= 1000")
    assert str(err) == "pods.csv:7: field 'gpu_milli': got 1200; expected a value <= 1000"
    assert str(TraceError("pods.csv", None, None, "file not found")) == "pods.csv: file not found"


def test_task_shape_hash_is_the_dataclass_hash_kept_and_never_pickled() -> None:
    """A shape's hash is that of the tuple of its compared fields (what the dataclass would
    give), the same for equal shapes, worked out again after pickling or ``replace``."""
    shape = TaskShape(4000, 8192, 1, 500, frozenset({GpuModel("H100")}), mig_count=1)
    fields_ = tuple(getattr(shape, f.name) for f in dataclasses.fields(shape) if f.compare)
    assert hash(shape) == hash(fields_)
    assert hash(shape) == hash(shape)  # (kept after the first call)
    twin = TaskShape(4000, 8192, 1, 500, frozenset({GpuModel("H100")}))
    assert twin == shape
    assert hash(twin) == hash(shape)
    assert "_hash" not in repr(twin)
    back = pickle.loads(pickle.dumps(shape))
    assert back == shape
    assert back._hash is None  # (a string's hash differs between processes: not pickled)
    assert hash(back) == hash(shape)
    other = dataclasses.replace(shape, gpu_milli=1000)
    other_fields = tuple(getattr(other, f.name) for f in dataclasses.fields(other) if f.compare)
    assert other != shape
    assert hash(other) == hash(other_fields)
