"""The scheduling config file: queues with quota, and priority classes.

Format (YAML)::

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

Resource amounts (``guaranteed``, ``limit``, ``lending_limit``) are written in user units and
converted to the units of :class:`~gpusched.model.Resources`:

* ``gpu`` and ``gpu/<MODEL>`` -- GPUs, fractions allowed (``0.5``), stored as milli-GPU;
* ``cpu`` -- cores (``8``, ``0.5``) or millicores (``"500m"``), stored as millicores;
* ``memory`` -- MiB or a quantity (``"512Gi"``), stored as MiB.

A child's guarantee is carved out of its parent's for *every* resource, so a parent must
guarantee each resource its children are guaranteed (above, ``org`` needs ``cpu`` because
``team-a`` has it).

The queue tree is checked as a whole by :meth:`~gpusched.model.QueueTree.build` (missing parent,
cycle, negative amount, limit below guarantee, children guaranteed more than their parent); its
:class:`~gpusched.errors.ConfigError` is turned into a :class:`~gpusched.errors.TraceError`
naming the file, the line of the offending queue (or of its field) and the field.

Jobs refer to this file by name: :func:`apply_priority_classes` resolves each job's
``priority_class`` to a priority value and preemptibility, and :func:`check_job_queues` checks
that every job's queue exists.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpusched.errors import ConfigError, TraceError
from gpusched.io.quantity import cpu_to_milli, memory_to_mib
from gpusched.io.yamlfile import KEY_LINES, LINE_KEY, load_yaml, validate
from gpusched.model import (
    CPU,
    GPU,
    MEMORY,
    MILLI_PER_GPU,
    Job,
    PriorityClass,
    QueueName,
    QueueSpec,
    QueueTree,
    Resources,
    SchedulingConfig,
)

__all__ = [
    "PriorityClass",
    "PriorityClassEntry",
    "QueueEntry",
    "SchedulingConfig",
    "SchedulingFile",
    "apply_priority_classes",
    "check_job_queues",
    "load_scheduling",
    "parse_scheduling",
]

Amount = int | float | str

_MODEL_PREFIX = f"{GPU}/"


def _resources(amounts: Mapping[Any, Any]) -> dict[str, int]:
    """User units to :class:`Resources` units (see module docstring); ``ValueError`` names the
    resource and the accepted forms."""
    out: dict[str, int] = {}
    for name, value in amounts.items():
        if not isinstance(name, str):
            raise ValueError(f"resource names are text; got {name!r}")
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"{name}: got {value!r}; expected a number or a quantity")
        if name == CPU:
            out[name] = cpu_to_milli(value)
        elif name == MEMORY:
            out[name] = memory_to_mib(value)
        elif name == GPU or (name.startswith(_MODEL_PREFIX) and len(name) > len(_MODEL_PREFIX)):
            out[name] = _gpu_milli(name, value)
        else:
            raise ValueError(
                f"unknown resource {name!r}; expected one of gpu, gpu/<MODEL> (e.g. gpu/H100), "
                "cpu, memory"
            )
    return out


def _gpu_milli(name: str, value: Amount) -> int:
    if not isinstance(value, int | float):
        raise ValueError(f"{name}: got {value!r}; expected a number of GPUs such as 8 or 0.5")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: got {value!r}; quotas must be finite and >= 0")
    milli = value * MILLI_PER_GPU
    if abs(milli - round(milli)) > 1e-6:
        raise ValueError(f"{name}: got {value!r}; GPUs are counted in thousandths (e.g. 0.125)")
    return round(milli)


class PriorityClassEntry(BaseModel):
    """One priority class: a name jobs refer to, and what it means."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Name jobs give as `priority_class`.")
    value: int = Field(
        strict=True, description="Priority of the class's jobs; larger runs first and may preempt."
    )
    preemptible: bool = Field(
        default=True,
        strict=True,
        description="Whether jobs of this class may be evicted for others (a job's own "
        "`preemptible: false` wins over `true` here).",
    )


class QueueEntry(BaseModel):
    """One queue of the tree."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Unique queue name; jobs name it as `queue`.")
    parent: str | None = Field(
        default=None, min_length=1, description="Parent queue (absent: a root)."
    )
    guaranteed: dict[str, Amount] = Field(
        default_factory=dict,
        description="Always available to the queue's subtree, reclaimed from borrowers by "
        "preemption: `gpu` (GPUs, 0.5 allowed), `gpu/<MODEL>`, `cpu` (cores or '500m'), "
        "`memory` ('512Gi'). Children's guarantees are carved out of the parent's.",
    )
    limit: dict[str, Amount] | None = Field(
        default=None,
        description="Hard cap on the subtree's usage, same units (absent: no cap).",
    )
    lending_limit: dict[str, Amount] | None = Field(
        default=None,
        description="How much of the queue's idle guarantee others may borrow, same units "
        "(absent: all of it).",
    )
    weight: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        strict=True,
        description="Share of capacity beyond guarantees (fair share).",
    )

    @field_validator("guaranteed", "limit", "lending_limit", mode="before")
    @classmethod
    def _amounts(cls, v: Any) -> Any:
        # Before pydantic's own coercion, which would read `true` as 1.
        if not isinstance(v, dict):
            return v
        return dict(_resources(v))

    def spec(self) -> QueueSpec:
        def res(v: Mapping[str, Amount] | None) -> Resources | None:
            return None if v is None else Resources({k: int(x) for k, x in v.items()})

        return QueueSpec(
            name=QueueName(self.name),
            parent=QueueName(self.parent) if self.parent is not None else None,
            guaranteed=res(self.guaranteed) or Resources(),
            limit=res(self.limit),
            lending_limit=res(self.lending_limit),
            weight=self.weight,
        )


class SchedulingFile(BaseModel):
    """A scheduling config file: priority classes and the queue tree (both optional)."""

    model_config = ConfigDict(extra="forbid")

    priority_classes: list[PriorityClassEntry] = Field(
        default_factory=list, description="Priority classes jobs may name."
    )
    queues: list[QueueEntry] = Field(
        default_factory=list,
        description="The queue tree; absent or empty: no queues (quota disabled).",
    )


def load_scheduling(path: str | Path) -> SchedulingConfig:
    """Read a scheduling config file; every error names the file, line and field."""
    return parse_scheduling(load_yaml(path), path)


def parse_scheduling(data: Any, path: str | Path) -> SchedulingConfig:
    """Validate ``data`` (from :func:`~gpusched.io.yamlfile.load_yaml`, possibly a part of a
    larger file) as a scheduling config; ``path`` is named in errors."""
    if data is None:
        data = {}
    spec = validate(SchedulingFile, data, path)
    classes: dict[str, PriorityClass] = {}
    for i, entry in enumerate(spec.priority_classes):
        if entry.name in classes:
            raise TraceError(
                str(path),
                _entry_line(data, "priority_classes", i),
                f"priority_classes[{i}].name",
                f"priority class {entry.name!r} is defined twice; names are unique",
            )
        classes[entry.name] = PriorityClass(entry.name, entry.value, entry.preemptible)
    return SchedulingConfig(_tree(spec.queues, data, path), classes)


_TREE_ERROR = re.compile(r"^queue '(?P<queue>[^']*)': (?:field '(?P<field>[^']*)': )?(?P<what>.*)$")


def _tree(entries: Sequence[QueueEntry], data: Any, path: str | Path) -> QueueTree | None:
    if not entries:
        return None
    where: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry.name in where:
            raise TraceError(
                str(path),
                _entry_line(data, "queues", i),
                f"queues[{i}].name",
                f"queue {entry.name!r} is defined twice (first at queues[{where[entry.name]}]); "
                "queue names are unique",
            )
        where[entry.name] = i
    try:
        return QueueTree.build(e.spec() for e in entries)
    except ConfigError as exc:
        m = _TREE_ERROR.match(str(exc))
        if m is None or m["queue"] not in where:
            raise TraceError(str(path), None, "queues", str(exc)) from None
        i = where[m["queue"]]
        field = m["field"]
        line = _entry_line(data, "queues", i, *(field.split(".") if field else ()))
        raise TraceError(
            str(path),
            line,
            f"queues[{i}].{field}" if field else f"queues[{i}]",
            f"queue {m['queue']!r}: {m['what']}",
        ) from None


def _entry_line(data: Any, key: str, i: int, *fields: str) -> int | None:
    """Line of ``data[key][i]``, or of its (nested) field ``fields`` when the file has it."""
    try:
        node = data[key][i]
    except (KeyError, IndexError, TypeError):
        return None
    line = node.get(LINE_KEY) if isinstance(node, dict) else None
    for f in fields:
        if not isinstance(node, dict):
            break
        keys = node.get(KEY_LINES)
        if isinstance(keys, dict) and isinstance(keys.get(f), int):
            line = keys[f]
        node = node.get(f)
    return line if isinstance(line, int) else None


def apply_priority_classes(
    jobs: Sequence[Job], config: SchedulingConfig, path: str | Path
) -> list[Job]:
    """``jobs`` with each ``priority_class`` resolved (jobs without one are unchanged).

    * the job's priority becomes the class's ``value``; a job that also gives a different
      non-zero ``priority`` is an error (as in Kubernetes, the class decides);
    * the job is preemptible only if both the class and the job allow it, so a job's own
      ``preemptible: false`` wins over a preemptible class.

    An unknown class is a :class:`~gpusched.errors.TraceError` naming ``path`` (the workload),
    the job and the known classes.
    """
    out: list[Job] = []
    known = ", ".join(sorted(config.priority_classes)) or "none are configured"
    for i, job in enumerate(jobs):
        if not job.priority_class:
            out.append(job)
            continue
        pc = config.priority_classes.get(job.priority_class)
        if pc is None:
            raise TraceError(
                str(path),
                None,
                f"jobs[{i}].priority_class",
                f"job {job.id!r}: unknown priority class {job.priority_class!r}; known: {known}",
            )
        if job.priority not in (0, pc.value):
            raise TraceError(
                str(path),
                None,
                f"jobs[{i}].priority",
                f"job {job.id!r}: priority {job.priority} contradicts priority class "
                f"{pc.name!r} (value {pc.value}); give the class or the priority, not both",
            )
        out.append(replace(job, priority=pc.value, preemptible=job.preemptible and pc.preemptible))
    return out


def check_job_queues(jobs: Sequence[Job], config: SchedulingConfig, path: str | Path) -> None:
    """With queues configured, every job's queue must exist: a
    :class:`~gpusched.errors.TraceError` names ``path`` (the workload), the job, its queue and
    the known queues. Without queues nothing is checked."""
    tree = config.queues
    if tree is None:
        return
    for i, job in enumerate(jobs):
        if job.queue not in tree:
            known = ", ".join(q.name for q in tree)
            raise TraceError(
                str(path),
                None,
                f"jobs[{i}].queue",
                f"job {job.id!r}: queue {job.queue!r} does not exist; known queues: {known}",
            )
