"""The vocabulary of gpusched: nodes, GPUs, tasks and jobs, as plain frozen values."""

from gpusched.model.ids import GpuModel, JobId, NodeName, QueueName, TaskId
from gpusched.model.node import Gpu, Node
from gpusched.model.resources import MILLI_PER_GPU
from gpusched.model.task import Job, JobKind, Task, TaskShape

__all__ = [
    "MILLI_PER_GPU",
    "Gpu",
    "GpuModel",
    "Job",
    "JobId",
    "JobKind",
    "Node",
    "NodeName",
    "QueueName",
    "Task",
    "TaskId",
    "TaskShape",
]
