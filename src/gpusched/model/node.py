"""Nodes and their GPUs, as users describe them (readable values at the edges of the system).

The scheduler does not work on these objects in its hot path: it copies them once into the
struct-of-arrays :class:`~gpusched.framework.state.ClusterState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpusched.errors import ConfigError
from gpusched.model.constraints import Taint
from gpusched.model.ids import GpuModel, NodeName
from gpusched.model.topology import NodeTopology, check_topology

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
        topology: how the GPUs are wired (NVLink, PCIe, NUMA), see :mod:`.topology`;
            ``None`` when unknown (placement then ignores it). When given, it is checked
            against ``gpus`` and ``cpu_milli`` and a mismatch raises
            :class:`~gpusched.errors.ConfigError` naming the node and field.
    """

    name: NodeName
    cpu_milli: int
    memory_mib: int
    gpus: tuple[Gpu, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    topology: NodeTopology | None = None

    def __post_init__(self) -> None:
        if self.topology is not None:
            self._check_topology(self.topology)

    def _check_topology(self, topo: NodeTopology) -> None:
        where = f"node {self.name!r}"
        check_topology(topo, where)
        if topo.gpu_count != len(self.gpus):
            raise ConfigError(
                f"{where}: field 'topology.devices': got {topo.gpu_count} GPUs; "
                f"expected the node's {len(self.gpus)}"
            )
        for i, (gpu, dev) in enumerate(zip(self.gpus, topo.devices, strict=True)):
            if gpu.model != dev.model:
                raise ConfigError(
                    f"{where}: field 'topology.devices[{i}].model': got {dev.model!r}; "
                    f"expected {gpu.model!r} (the node's GPU {i})"
                )
            if gpu.memory_mib and gpu.memory_mib != dev.memory_mib:
                raise ConfigError(
                    f"{where}: field 'topology.devices[{i}].memory_mib': got {dev.memory_mib}; "
                    f"expected {gpu.memory_mib} (the node's GPU {i})"
                )
        numa_total = sum(topo.numa_cpu_milli)
        if self.cpu_milli > numa_total:
            raise ConfigError(
                f"{where}: field 'cpu_milli': got {self.cpu_milli}; expected at most "
                f"{numa_total}, the CPUs of its NUMA nodes {list(topo.numa_cpu_milli)}"
            )

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

    @classmethod
    def from_topology(
        cls,
        name: str,
        topology: NodeTopology,
        *,
        memory_mib: int,
        cpu_milli: int | None = None,
        labels: Mapping[str, str] | None = None,
        taints: tuple[Taint, ...] = (),
    ) -> Node:
        """A node whose GPUs are the topology's devices; ``cpu_milli`` defaults to all the
        CPUs of its NUMA nodes (pass less to keep some for the system)."""
        gpus = tuple(Gpu(i, d.model, d.memory_mib) for i, d in enumerate(topology.devices))
        cpus = sum(topology.numa_cpu_milli) if cpu_milli is None else cpu_milli
        return cls(NodeName(name), cpus, memory_mib, gpus, dict(labels or {}), taints, topology)
