"""Writing gpusched's native files: workloads, clusters and scheduling configs.

The writers are the inverse of the loaders (:mod:`gpusched.io.native_workload`,
:mod:`gpusched.io.native_cluster`, :mod:`gpusched.io.scheduling`): what they write reads back
identically (round trip without loss). A value the format cannot express is a ``ValueError``
rather than a file that would load as something else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gpusched.io.native_constraints import dump_constraints
from gpusched.io.native_mig import dump_mig, dump_mig_request
from gpusched.model import (
    CPU,
    GPU,
    MEMORY,
    MILLI_PER_GPU,
    Job,
    JobKind,
    Node,
    Resources,
    SchedulingConfig,
    SharingMode,
)
from gpusched.model.topology import LinkClass, NodeTopology

__all__ = ["dump_cluster", "dump_scheduling", "dump_workload"]


def _check_dumpable(job: Job) -> None:
    """Raise ``ValueError`` for a job the format cannot express (it would not round-trip)."""
    shape = job.tasks[0].shape
    if any(t.shape != shape for t in job.tasks):
        raise ValueError(
            f"job {job.id!r}: its pods have different shapes; the native format gives one "
            "shape per job (split it into jobs of identical pods)"
        )
    ids = [job.id] if len(job.tasks) == 1 else [f"{job.id}-{i}" for i in range(len(job.tasks))]
    if [t.id for t in job.tasks] != ids:
        raise ValueError(
            f"job {job.id!r}: pod names {[t.id for t in job.tasks][:3]} differ from the "
            f"native format's {ids[:3]}; they would be renamed on loading"
        )


def dump_workload(jobs: Sequence[Job], path: str | Path) -> None:
    """Write ``jobs`` as a native YAML workload (the inverse of
    :func:`~gpusched.io.native_workload.load_workload`).

    ``ValueError`` for a job the format cannot express: pods of different shapes, or pod
    names other than the format's (``NAME`` for one pod, ``NAME-0``, ``NAME-1``, ... else).
    """
    out = [_job_entry(job) for job in jobs]
    Path(path).write_text(yaml.safe_dump({"jobs": out}, sort_keys=False), encoding="utf-8")


def _job_entry(job: Job) -> dict[str, Any]:
    """One job as a ``jobs[]`` entry: the fields that differ from their defaults."""
    _check_dumpable(job)
    s = job.tasks[0].shape
    entry: dict[str, Any] = {"name": job.id, "kind": job.kind.value, "submit": job.submit_time}
    if job.duration is not None:
        entry["duration"] = job.duration
    if len(job.tasks) > 1:
        entry["replicas"] = len(job.tasks)
        entry["min_available"] = job.min_available
    if job.queue != "default":
        entry["queue"] = job.queue
    if job.priority:
        entry["priority"] = job.priority
    if job.priority_class:
        entry["priority_class"] = job.priority_class
    if not job.preemptible:
        entry["preemptible"] = False
    if not job.restartable:
        entry["restartable"] = False
    if job.runtime_estimate is not None:
        entry["runtime_estimate"] = job.runtime_estimate
    if job.user:
        entry["user"] = job.user
    entry["cpu"] = f"{s.cpu_milli}m"
    entry["memory"] = f"{s.memory_mib}Mi"
    if s.numa_local_cpus:
        entry["numa_local_cpus"] = True
    if s.num_gpu:
        entry["gpus"] = s.num_gpu
        if s.gpu_memory_mib:
            entry["gpu_memory"] = f"{s.gpu_memory_mib}Mi"
            training = job.kind == JobKind.TRAINING
            if s.by_memory and training:
                entry["share_gpu"] = True
            elif not s.by_memory and s.num_gpu == 1 and not training:
                entry["gpu_share"] = MILLI_PER_GPU
        elif s.gpu_milli != MILLI_PER_GPU:
            entry["gpu_share"] = s.gpu_milli
        if s.gpu_models:
            entry["gpu_models"] = sorted(s.gpu_models)
    entry.update(dump_mig_request(s))
    if job.labels:
        entry["labels"] = dict(job.labels)
    if job.topology is not None:
        key = "topology_required" if job.topology.required else "topology_preferred"
        entry[key] = job.topology.level
    entry.update(dump_constraints(s.constraints))
    return entry


def dump_cluster(nodes: Sequence[Node], path: str | Path) -> None:
    """Write ``nodes`` as a native YAML cluster, one entry per node (the inverse of
    :func:`~gpusched.io.native_cluster.load_cluster` for nodes whose GPUs are alike, as the
    format describes them)."""
    out = []
    for n in nodes:
        entry: dict[str, Any] = {
            "name": n.name,
            "cpu": f"{n.cpu_milli}m",
            "memory": f"{n.memory_mib}Mi",
        }
        if n.gpus:
            entry.update(gpus=n.gpu_count, gpu_model=n.gpu_model)
            if n.gpus[0].memory_mib:
                entry["gpu_memory"] = f"{n.gpus[0].memory_mib}Mi"
            if n.gpu_sharing is not SharingMode.TIME_SLICING:
                entry["gpu_sharing"] = n.gpu_sharing.value
            if n.gpu_reserved_mib:
                entry["gpu_reserved_memory"] = f"{n.gpu_reserved_mib}Mi"
            if n.topology is not None:
                entry["topology"] = _dump_topology(n.topology)
            if n.mig:
                entry["mig"] = dump_mig(n)
        if n.labels:
            entry["labels"] = dict(n.labels)
        if n.taints:
            entry["taints"] = [
                {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect.value}
                for t in n.taints
            ]
        out.append(entry)
    Path(path).write_text(yaml.safe_dump({"nodes": out}, sort_keys=False), encoding="utf-8")


def _dump_topology(topo: NodeTopology) -> dict[str, Any]:
    """A topology as the ``topology`` entry (NVLink links as pairs: the same matrix)."""
    g = topo.gpu_count
    return {
        "numa_cpu": [f"{c}m" for c in topo.numa_cpu_milli],
        "gpu_numa": [d.numa_node for d in topo.devices],
        "pcie_root": [d.pcie_root for d in topo.devices],
        "nvlink": [
            [i, j]
            for i in range(g)
            for j in range(i + 1, g)
            if topo.links[i][j] == LinkClass.NVLINK
        ],
    }


def _amounts(res: Resources) -> dict[str, Any]:
    """Resource amounts in the user units of :mod:`gpusched.io.scheduling`."""
    out: dict[str, Any] = {}
    for name, value in res.items():
        if name == CPU:
            out[name] = f"{value}m"
        elif name == MEMORY:
            out[name] = f"{value}Mi"
        elif name == GPU or name.startswith(f"{GPU}/"):
            whole, rest = divmod(value, MILLI_PER_GPU)
            out[name] = whole if not rest else value / MILLI_PER_GPU
        else:
            raise ValueError(f"resource {name!r} has no file form (expected gpu, cpu, memory)")
    return out


def dump_scheduling(config: SchedulingConfig, path: str | Path, comment: str = "") -> None:
    """Write ``config`` as a scheduling config file, the format
    :func:`gpusched.io.scheduling.load_scheduling` reads back identically; ``comment`` goes
    on top as ``#`` lines."""
    classes = [
        {"name": pc.name, "value": pc.value, **({} if pc.preemptible else {"preemptible": False})}
        for pc in config.priority_classes.values()
    ]
    queues: list[dict[str, Any]] = []
    for q in config.queues or ():
        entry: dict[str, Any] = {"name": q.name}
        if q.parent is not None:
            entry["parent"] = q.parent
        entry["guaranteed"] = _amounts(q.guaranteed)
        if q.limit is not None:
            entry["limit"] = _amounts(q.limit)
        if q.lending_limit is not None:
            entry["lending_limit"] = _amounts(q.lending_limit)
        entry["weight"] = q.weight
        queues.append(entry)
    text = yaml.safe_dump(
        {"priority_classes": classes, "queues": queues}, sort_keys=False, default_flow_style=None
    )
    head = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    Path(path).write_text(head + text, encoding="utf-8")
