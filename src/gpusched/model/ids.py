"""Typed identifiers, so that a node name can never be passed where a task id is expected."""

from __future__ import annotations

from typing import NewType

__all__ = ["GpuModel", "JobId", "NodeName", "QueueName", "TaskId"]

NodeName = NewType("NodeName", str)
TaskId = NewType("TaskId", str)
JobId = NewType("JobId", str)
GpuModel = NewType("GpuModel", str)
QueueName = NewType("QueueName", str)
