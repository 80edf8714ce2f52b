"""Loader for the Alibaba openb GPU-sharing trace (``openb_node_list_*.csv``,
``openb_pod_list_*.csv``), read from wherever the user keeps it.

Node columns: ``sn, cpu_milli, memory_mib, gpu, model``. Pod columns: ``name, cpu_milli,
memory_mib, num_gpu, gpu_milli`` and optionally ``gpu_spec`` (``|``-separated models),
``creation_time``, ``deletion_time``, ``scheduled_time`` (seconds). Every value is checked; a bad
one stops the load with the file, line and field (:class:`~gpusched.errors.TraceError`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpusched.errors import TraceError
from gpusched.io.csvtable import read_table
from gpusched.model import MILLI_PER_GPU, GpuModel, Job, JobKind, Node, TaskShape

__all__ = [
    "PAPER_POLICY",
    "OpenbPod",
    "PaperResult",
    "read_openb_nodes",
    "read_openb_pods",
    "read_paper_results",
    "workload_path",
]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One pod of an openb pod list."""

    name: str
    shape: TaskShape
    creation_time: float | None
    deletion_time: float | None
    line: int

    def to_job(self) -> Job:
        duration = None
        if self.creation_time is not None and self.deletion_time is not None:
            duration = max(self.deletion_time - self.creation_time, 0.0)
        kind = JobKind.INFERENCE if self.shape.is_sharing else JobKind.BATCH
        return Job.single(
            self.name,
            self.shape,
            submit_time=self.creation_time or 0.0,
            duration=duration,
            kind=kind,
        )


def read_openb_nodes(path: str | Path) -> list[Node]:
    """The nodes of an openb node list, in file order."""
    nodes: list[Node] = []
    seen: set[str] = set()
    for row in read_table(path, NODE_COLUMNS):
        name = row.text("sn")
        if name in seen:
            raise row.error("sn", f"duplicate node name {name!r}; node names must be unique")
        seen.add(name)
        gpus = row.integer("gpu", high=64)
        model = row.text("model", default="")
        if gpus and not model:
            raise row.error("model", f"node has {gpus} GPUs but no model; expected a model name")
        nodes.append(
            Node.with_gpus(
                name,
                cpu_milli=row.integer("cpu_milli"),
                memory_mib=row.integer("memory_mib"),
                gpu_count=gpus,
                gpu_model=model if gpus else "",
            )
        )
    if not nodes:
        raise TraceError(str(path), None, None, "no nodes; expected at least one data line")
    return nodes


def read_openb_pods(path: str | Path, known_models: Iterable[str] | None = None) -> list[OpenbPod]:
    """The pods of an openb pod list, in file order.

    ``known_models``, when given, are the GPU models of the cluster: a ``gpu_spec`` naming any
    other model is an error (it would make the pod unplaceable by a typo).
    """
    models = set(known_models) if known_models is not None else None
    pods: list[OpenbPod] = []
    for row in read_table(path, POD_COLUMNS):
        num_gpu = row.integer("num_gpu", high=64)
        gpu_milli = row.integer("gpu_milli", high=MILLI_PER_GPU)
        if num_gpu == 0:
            gpu_milli = 0
        elif gpu_milli == 0:
            raise row.error("gpu_milli", "got 0 for a GPU pod; expected 1..1000 per GPU")
        elif num_gpu > 1 and gpu_milli < MILLI_PER_GPU:
            raise row.error(
                "gpu_milli",
                f"got {gpu_milli} with num_gpu={num_gpu}; only single-GPU pods may share a GPU "
                "(expected 1000)",
            )
        spec = row.text("gpu_spec", default="") if "gpu_spec" in row.values else ""
        allowed = frozenset(GpuModel(m.strip()) for m in spec.split("|") if m.strip())
        if models is not None:
            unknown = sorted(m for m in allowed if m not in models)
            if unknown:
                raise row.error(
                    "gpu_spec",
                    f"unknown GPU model {unknown[0]!r}; "
                    f"the cluster has {', '.join(sorted(models))}",
                )
        created = row.number("creation_time", default=-1.0) if "creation_time" in row.values else -1
        deleted = row.number("deletion_time", default=-1.0) if "deletion_time" in row.values else -1
        pods.append(
            OpenbPod(
                name=row.text("name"),
                shape=TaskShape(
                    cpu_milli=row.integer("cpu_milli"),
                    memory_mib=row.integer("memory_mib"),
                    num_gpu=num_gpu,
                    gpu_milli=gpu_milli,
                    gpu_models=allowed,
                ),
                creation_time=None if created < 0 else created,
                deletion_time=None if deleted < 0 else deleted,
                line=row.line,
            )
        )
    if not pods:
        raise TraceError(str(path), None, None, "no pods; expected at least one data line")
    return pods


def workload_path(trace_dir: str | Path, workload: str) -> Path:
    """``DIR/openb_pod_list_<workload>.csv``, with a helpful error when it is not there."""
    d = Path(trace_dir)
    p = d / f"openb_pod_list_{workload}.csv"
    if not p.is_file():
        have = sorted(x.name[len("openb_pod_list_") : -4] for x in d.glob("openb_pod_list_*.csv"))
        hint = f"available: {', '.join(have)}" if have else "the directory has no pod lists"
        raise TraceError(str(p), None, None, f"no such workload {workload!r}; {hint}")
    return p


#: gpusched policy name -> the FGD authors' policy label in their expected results.
PAPER_POLICY = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


@dataclass(frozen=True, slots=True)
class PaperResult:
    """The FGD authors' published mean and std at 100% arrived load for one workload/policy."""

    alloc_mean: float
    alloc_std: float
    frag_mean: float


def read_paper_results(trace_dir: str | Path, workload: str) -> dict[str, PaperResult]:
    """Expected results for ``workload`` by gpusched policy name; empty if the trace has none."""
    p = Path(trace_dir) / "fgd-expected-results" / "summary_by_workload_policy.csv"
    if not p.is_file():
        return {}
    by_label = {v: k for k, v in PAPER_POLICY.items()}
    out: dict[str, PaperResult] = {}
    cols = (
        "workload",
        "sc_policy",
        "alloc_pct_at_arrive100_mean",
        "alloc_pct_at_arrive100_std",
        "frag_pct_of_capacity_at_arrive100_mean",
    )
    for row in read_table(p, cols):
        if row.text("workload") != f"openb_pod_list_{workload}":
            continue
        name = by_label.get(row.text("sc_policy"))
        if name is not None:
            out[name] = PaperResult(
                row.number("alloc_pct_at_arrive100_mean"),
                row.number("alloc_pct_at_arrive100_std"),
                row.number("frag_pct_of_capacity_at_arrive100_mean"),
            )
    return out
