"""The vocabulary of gpusched: nodes, GPUs, tasks and jobs, as plain frozen values."""

from gpusched.model.constraints import (
    NO_CONSTRAINTS,
    Constraints,
    Effect,
    Expression,
    Operator,
    Taint,
    Toleration,
)
from gpusched.model.ids import GpuModel, JobId, NodeName, QueueName, TaskId
from gpusched.model.network import NetworkLevel, NetworkTopology, TopologyRequest
from gpusched.model.node import Gpu, Node, SharingMode
from gpusched.model.queue import QueueSpec, QueueTree
from gpusched.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU, Resources, gpu_model_resource
from gpusched.model.scheduling import PriorityClass, SchedulingConfig
from gpusched.model.task import REFERENCE_GPU_MEMORY_MIB, Job, JobKind, Task, TaskShape

__all__ = [
    "CPU",
    "GPU",
    "MEMORY",
    "MILLI_PER_GPU",
    "NO_CONSTRAINTS",
    "REFERENCE_GPU_MEMORY_MIB",
    "Constraints",
    "Effect",
    "Expression",
    "Gpu",
    "GpuModel",
    "Job",
    "JobId",
    "JobKind",
    "NetworkLevel",
    "NetworkTopology",
    "Node",
    "NodeName",
    "Operator",
    "PriorityClass",
    "QueueName",
    "QueueSpec",
    "QueueTree",
    "Resources",
    "SchedulingConfig",
    "SharingMode",
    "Taint",
    "Task",
    "TaskId",
    "TaskShape",
    "Toleration",
    "TopologyRequest",
    "gpu_model_resource",
]
