"""Reading native workload files (YAML, or CSV with the job fields as columns) and checking
each job against the cluster it will run on.

The per-job schema is :mod:`gpusched.io.native_jobs`; this module handles what is about the file
as a whole: duplicate names, GPU models, GPU memory and MIG profiles the cluster does not offer,
and CSV cells that hold YAML flow text. In CSV, ``gpu_models`` is joined by ``|`` and
``labels``, ``node_selector``, ``tolerations`` and the affinity columns hold the same values as
YAML flow text (``"{pool: infer}"``).

Every error names the file, line and field (:class:`~gpusched.errors.TraceError`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpusched.errors import TraceError
from gpusched.io.csvtable import read_table
from gpusched.io.native_jobs import JobEntry, WorkloadFile
from gpusched.io.yamlfile import LINE_KEY, entry_line, load_yaml, validate
from gpusched.model import Job, Node
from gpusched.model.mig import geometry_for_gpu

__all__ = ["load_workload"]


def load_workload(
    path: str | Path,
    known_models: Iterable[str] | None = None,
    nodes: Sequence[Node] | None = None,
) -> list[Job]:
    """Jobs of a native workload file (``.yaml``/``.yml`` or ``.csv``).

    With ``known_models``, a job naming any other GPU model is an error. With ``nodes``, so is
    a ``gpu_memory`` above the usable memory of every GPU the job may use (the error names the
    job and the field).
    """
    p = Path(path)
    entries: list[tuple[int | None, JobEntry]]
    if p.suffix.lower() == ".csv":
        entries = list(_csv_entries(p))
    else:
        data = load_yaml(p)
        spec = validate(WorkloadFile, data, p)
        entries = [(entry_line(data, "jobs", i), e) for i, e in enumerate(spec.jobs)]
    models = set(known_models) if known_models is not None else None
    jobs: list[Job] = []
    seen: set[str] = set()
    for line, entry in entries:
        if entry.name in seen:
            raise TraceError(str(p), line, "name", f"duplicate job name {entry.name!r}")
        seen.add(entry.name)
        if models is not None:
            unknown = sorted(set(entry.gpu_models) - models)
            if unknown:
                raise TraceError(
                    str(p),
                    line,
                    "gpu_models",
                    f"unknown GPU model {unknown[0]!r}; the cluster has "
                    f"{', '.join(sorted(models)) or 'no GPUs'}",
                )
        if nodes is not None and entry.gpu_memory:
            _check_gpu_memory(p, line, entry, nodes)
        if nodes is not None and entry.mig:
            _check_mig(p, line, entry, nodes)
        jobs.append(entry.build())
    return jobs


def _check_gpu_memory(path: Path, line: int | None, entry: JobEntry, nodes: Sequence[Node]) -> None:
    allowed = set(entry.gpu_models)
    usable = [n.gpu_usable_mib for n in nodes if n.gpus and (not allowed or n.gpu_model in allowed)]
    best = max(usable, default=0)
    if int(entry.gpu_memory or 0) > best:
        raise TraceError(
            str(path),
            line,
            "gpu_memory",
            f"job {entry.name!r} asks {int(entry.gpu_memory or 0)} MiB of one GPU; the largest "
            f"usable GPU memory{' of its models' if allowed else ''} is {best} MiB "
            "(GPU memory minus the driver's reserve)",
        )


def _check_mig(path: Path, line: int | None, entry: JobEntry, nodes: Sequence[Node]) -> None:
    offered: dict[str, None] = {}
    for n in nodes:
        for g, conf in enumerate(n.mig):
            if conf is None:
                continue
            if conf.reconfigurable:
                geo = geometry_for_gpu(n.gpus[g].model, n.gpus[g].memory_mib)
                offered.update(dict.fromkeys(geo.profiles if geo is not None else ()))
            else:
                offered.update(dict.fromkeys(p.profile for p in conf.layout))
    if entry.mig not in offered:
        have = (
            f"the cluster's MIG GPUs offer {', '.join(offered)}"
            if offered
            else "the cluster has no MIG-enabled GPU"
        )
        raise TraceError(
            str(path),
            line,
            "mig",
            f"job {entry.name!r} asks MIG profile {entry.mig!r}, which no GPU of the cluster "
            f"offers; {have}",
        )


_CSV_FIELDS = tuple(JobEntry.model_fields)
_CSV_STRUCTURED = {
    "labels": '"{team: a}"',
    "node_selector": '"{pool: infer}"',
    "tolerations": '"[{key: dedicated, value: infer}]"',
    "affinity_required": '"[[{key: zone, operator: In, values: [z1]}]]"',
    "affinity_preferred": '"[{weight: 10, match: [{key: zone, operator: Exists}]}]"',
}


def _csv_entries(path: Path) -> Iterable[tuple[int | None, JobEntry]]:
    for row in read_table(path, ("name", "cpu", "memory")):
        raw: dict[str, Any] = {k: v.strip() for k, v in row.values.items() if v.strip() != ""}
        unknown = sorted(set(raw) - set(_CSV_FIELDS))
        if unknown:
            raise row.error(unknown[0], f"unknown column; known: {', '.join(_CSV_FIELDS)}")
        if "gpu_models" in raw:
            raw["gpu_models"] = [m for m in raw["gpu_models"].split("|") if m]
        for name, example in _CSV_STRUCTURED.items():
            if name in raw:
                try:
                    raw[name] = yaml.safe_load(raw[name])
                except yaml.YAMLError as exc:
                    problem = getattr(exc, "problem", None) or "not YAML"
                    raise row.error(
                        name,
                        f"got {raw[name]!r}; expected YAML flow text such as {example} ({problem})",
                    ) from None
        raw[LINE_KEY] = row.line
        yield row.line, validate(JobEntry, raw, path)
