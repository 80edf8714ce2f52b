"""Nodes and their GPUs, as users describe them (readable values at the edges of the system).

The scheduler does not work on these objects in its hot path: it copies them once into the
struct-of-arrays :class:`~gpusched.framework.state.ClusterState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpusched.model.constraints import Taint
from gpusched.model.ids import GpuModel, NodeName

__all__ = ["Gpu", "Node"]


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU of a node.

    Attributes:
        index: position on the node (0-based, as the device plugin numbers them).
        model: product name, e.g. ``"H100"`` or the trace's ``"G2"``.
        memory_mib: device memory; ``0`` when unknown (the openb trace does not say).
    """

    index: int
    model: GpuModel
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    """A schedulable machine.

    Attributes:
        name: unique node name.
        cpu_milli: allocatable CPU in millicores.
        memory_mib: allocatable memory in MiB.
        gpus: the node's GPUs in index order (empty for a CPU-only node).
        labels: Kubernetes-style labels (topology, pools, ...).
        taints: Kubernetes-style taints; tasks need matching tolerations.
    """

    name: NodeName
    cpu_milli: int
    memory_mib: int
    gpus: tuple[Gpu, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def gpu_model(self) -> GpuModel | None:
        """The node's GPU model, or ``None`` for a CPU-only node (nodes are homogeneous)."""
        return self.gpus[0].model if self.gpus else None

    @classmethod
    def with_gpus(
        cls,
        name: str,
        *,
        cpu_milli: int,
        memory_mib: int,
        gpu_count: int = 0,
        gpu_model: str = "",
        gpu_memory_mib: int = 0,
        labels: Mapping[str, str] | None = None,
        taints: tuple[Taint, ...] = (),
    ) -> Node:
        """Build a homogeneous node: ``gpu_count`` GPUs of one model."""
        gpus = tuple(Gpu(i, GpuModel(gpu_model), gpu_memory_mib) for i in range(gpu_count))
        return cls(NodeName(name), cpu_milli, memory_mib, gpus, dict(labels or {}), taints)
