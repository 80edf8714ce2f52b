"""Scheduling configuration as values: the queue tree and the priority classes.

Loaded from YAML by :mod:`gpusched.io.scheduling`, or built in code (the built-in default of
:mod:`gpusched.workloads`). A job names its priority class; the class's ``value`` becomes the
job's priority and ``preemptible`` its default preemptibility.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusched.model.queue import QueueTree

__all__ = ["PriorityClass", "SchedulingConfig"]


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A named priority: ``value`` becomes the job's priority; ``preemptible`` its default."""

    name: str
    value: int
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class SchedulingConfig:
    """The queue tree (``None``: no queues, quota disabled) and priority classes by name."""

    queues: QueueTree | None
    priority_classes: dict[str, PriorityClass]
