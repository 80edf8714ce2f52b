"""The output of one scheduling cycle: what the driver should do, and why the rest waits.

A :class:`Plan` is data only. The simulator applies it to its cluster state; the Kubernetes
backend turns binds into Binding POSTs. Neither adds policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpusched.framework.status import Status
from gpusched.model import JobId, NodeName, TaskId

__all__ = ["Bind", "Plan"]


@dataclass(frozen=True, slots=True)
class Bind:
    """Place ``task`` of ``job`` on ``node`` using GPUs ``gpus`` (``gpu_milli`` of each)."""

    task: TaskId
    job: JobId
    node: NodeName
    gpus: tuple[int, ...]
    gpu_milli: int


@dataclass(slots=True)
class Plan:
    """Binds to apply, and a status for every job considered and left pending."""

    binds: list[Bind] = field(default_factory=list)
    pending: dict[JobId, Status] = field(default_factory=dict)

    def bound_jobs(self) -> set[JobId]:
        return {b.job for b in self.binds}
