"""io/openb.py loaders on small CSV fixtures, and bad input reported with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusched.errors import TraceError
from gpusched.io.openb import read_openb_nodes, read_openb_pods, workload_path
from gpusched.model import GpuModel, JobKind, TaskShape

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_nodes_load_in_file_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nodes.csv",
        NODE_HEADER,
        "node-0,64000,262144,2,P100",
        "node-1,96000,786432,8,G2",
        "",
        "node-2,32000,131072,0,",
    )
    nodes = read_openb_nodes(path)
    assert [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model) for n in nodes] == [
        ("node-0", 64000, 262144, 2, "P100"),
        ("node-1", 96000, 786432, 8, "G2"),
        ("node-2", 32000, 131072, 0, None),
    ]


def test_pods_load_with_shapes_times_and_models(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        "p0,12000,16384,1,1000,,LS,Running,0,100,0",
        "p1,6000,12288,1,460,V100M16|V100M32,LS,Running,50,80,50",
        "p2,4000,8192,0,0,,BE,Running,10,,",
        "p3,8000,8192,2,1000,,LS,Running,,,",
    )
    pods = read_openb_pods(path, known_models=["V100M16", "V100M32"])
    assert [p.name for p in pods] == ["p0", "p1", "p2", "p3"]
    assert pods[1].shape == TaskShape(
        cpu_milli=6000,
        memory_mib=12288,
        num_gpu=1,
        gpu_milli=460,
        gpu_models=frozenset({GpuModel("V100M16"), GpuModel("V100M32")}),
    )
    assert [p.line for p in pods] == [2, 3, 4, 5]
    jobs = [p.to_job() for p in pods]
    assert [(j.submit_time, j.duration) for j in jobs] == [
        (0.0, 100.0),
        (50.0, 30.0),
        (10.0, None),
        (0.0, None),
    ]
    assert [j.kind for j in jobs] == [
        JobKind.BATCH,
        JobKind.INFERENCE,
        JobKind.BATCH,
        JobKind.BATCH,
    ]


def test_optional_pod_columns_may_be_absent(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", "p,1,2,1,500")
    (pod,) = read_openb_pods(path)
    assert pod.shape == TaskShape(1, 2, 1, 500)
    assert pod.creation_time is None


@pytest.mark.parametrize(
    ("lines", "line", "field", "problem"),
    [
        pytest.param(
            ["sn,cpu_milli,gpu,model", "n,1,1,G2"],
            1,
            "memory_mib",
            "missing column; the header must include sn, cpu_milli, memory_mib, gpu, model",
            id="missing-column",
        ),
        pytest.param(
            [NODE_HEADER, "n0,64000,262144,2,G2", "n1,lots,262144,2,G2"],
            3,
            "cpu_milli",
            "got 'lots'; expected an integer",
            id="non-numeric-cpu",
        ),
        pytest.param(
            [NODE_HEADER, "n0,64000,-5,2,G2"],
            2,
            "memory_mib",
            "got -5; expected a value >= 0",
            id="negative-memory",
        ),
        pytest.param(
            [NODE_HEADER, "n0,64000,1024,2,G2", "n0,64000,1024,2,G2"],
            3,
            "sn",
            "duplicate node name 'n0'; node names must be unique",
            id="duplicate-node",
        ),
        pytest.param(
            [NODE_HEADER, "n0,64000,1024,4,"],
            2,
            "model",
            "node has 4 GPUs but no model; expected a model name",
            id="gpus-without-model",
        ),
        pytest.param(
            [NODE_HEADER, "n0,64000,1024,2.5,G2"],
            2,
            "gpu",
            "got '2.5'; expected an integer",
            id="fractional-gpu-count",
        ),
    ],
)
def test_bad_node_lists_name_file_line_and_field(
    tmp_path: Path, lines: list[str], line: int, field: str, problem: str
) -> None:
    path = write(tmp_path, "nodes.csv", *lines)
    with pytest.raises(TraceError) as info:
        read_openb_nodes(path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert str(err).startswith(f"{path}:{line}: field '{field}': {problem}")


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        pytest.param(
            "p,1000,1024,1,abc,,,,,,", "gpu_milli", "got 'abc'; expected an integer", id="nan-milli"
        ),
        pytest.param(
            "p,-100,1024,0,0,,,,,,", "cpu_milli", "got -100; expected a value >= 0", id="neg-cpu"
        ),
        pytest.param(
            "p,100,-1,0,0,,,,,,", "memory_mib", "got -1; expected a value >= 0", id="neg-mem"
        ),
        pytest.param(
            "p,100,1,1,1001,,,,,,",
            "gpu_milli",
            "got 1001; expected a value <= 1000",
            id="milli-1001",
        ),
        pytest.param(
            "p,100,1,1,-1,,,,,,", "gpu_milli", "got -1; expected a value >= 0", id="milli-negative"
        ),
        pytest.param(
            "p,100,1,1,0,,,,,,",
            "gpu_milli",
            "got 0 for a GPU pod; expected 1..1000 per GPU",
            id="gpu-pod-with-zero-milli",
        ),
        pytest.param(
            "p,100,1,2,500,,,,,,",
            "gpu_milli",
            "got 500 with num_gpu=2; only single-GPU pods may share a GPU (expected 1000)",
            id="multi-gpu-sharing",
        ),
        pytest.param(
            "p,100,1,1,500,A100,,,,,",
            "gpu_spec",
            "unknown GPU model 'A100'; the cluster has G2, T4",
            id="unknown-gpu-model",
        ),
        pytest.param(
            "p,100,1,1,500,T4|H100,,,,,",
            "gpu_spec",
            "unknown GPU model 'H100'; the cluster has G2, T4",
            id="one-unknown-model-of-two",
        ),
        pytest.param(
            "p,100,1,1,500,,,,soon,,",
            "creation_time",
            "got 'soon'; expected a number",
            id="non-numeric-time",
        ),
        pytest.param(
            "p,100,1,1,500,,,,inf,,",
            "creation_time",
            "got 'inf'; expected a finite number",
            id="infinite-time",
        ),
        pytest.param(
            "p,100,1,65,1000,,,,,,", "num_gpu", "got 65; expected a value <= 64", id="gpus-65"
        ),
    ],
)
def test_bad_pod_lists_name_file_line_and_field(
    tmp_path: Path, row: str, field: str, problem: str
) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER, "ok,1000,1024,1,500,,,,,,", row)
    with pytest.raises(TraceError) as info:
        read_openb_pods(path, known_models=["G2", "T4"])
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 3, field)
    assert str(err) == f"{path}:3: field '{field}': {problem}"


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        pytest.param("", 1, "empty file; expected a header line", id="empty-file"),
        pytest.param(
            NODE_HEADER + "\n", None, "no nodes; expected at least one data line", id="no-rows"
        ),
        pytest.param(
            NODE_HEADER + "\nn0,1,2,0\n",
            2,
            "4 values for 5 columns; expected one per column",
            id="short-row",
        ),
    ],
)
def test_structurally_bad_node_files(
    tmp_path: Path, content: str, line: int | None, problem: str
) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TraceError) as info:
        read_openb_nodes(path)
    assert info.value.line == line
    assert info.value.problem == problem


def test_missing_file_and_unknown_workload(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.csv: file not found"):
        read_openb_nodes(tmp_path / "nope.csv")
    write(tmp_path, "openb_pod_list_default.csv", POD_HEADER)
    write(tmp_path, "openb_pod_list_gpuspec33.csv", POD_HEADER)
    assert workload_path(tmp_path, "default") == tmp_path / "openb_pod_list_default.csv"
    with pytest.raises(TraceError, match="no such workload 'x'; available: default, gpuspec33"):
        workload_path(tmp_path, "x")


def test_an_empty_node_name_is_a_trace_error(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.csv", NODE_HEADER, ",64000,1024,0,")
    with pytest.raises(TraceError, match="field 'sn': missing value"):
        read_openb_nodes(path)
