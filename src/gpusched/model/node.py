"""Nodes and their GPUs, as users describe them (readable values at the edges of the system).

The scheduler does not work on these objects in its hot path: it copies them once into the
struct-of-arrays :class:`~gpusched.framework.state.ClusterState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gpusched.errors import ConfigError
from gpusched.model.constraints import Taint
from gpusched.model.ids import GpuModel, NodeName
from gpusched.model.mig import MigConfig
from gpusched.model.mig_layout import check_node_mig
from gpusched.model.topology import NodeTopology, check_topology

__all__ = ["Gpu", "Node", "SharingMode"]


class SharingMode(StrEnum):
    """How the GPUs of a node may be shared by fractional requests.

    * ``exclusive``: one task per GPU; fractional requests do not fit (a device plugin without
      sharing, or MIG-only nodes);
    * ``time-slicing``: tasks take turns on the whole GPU; nothing isolates memory, so the
      scheduler's memory accounting is all that stops an out-of-memory: shares are counted
      against the GPU's usable memory and never overcommitted;
    * ``mps``: tasks run concurrently, each capped at its share of compute and memory (MPS
      active-thread percentage and pinned memory limit); at most :data:`MPS_MAX_CLIENTS` per
      GPU, so a share below ``1000 / 48`` milli is held as ``ceil(1000 / 48)`` = 21 milli.

    Both sharing modes admit requests by share and by memory; whole-GPU requests are the same
    everywhere.
    """

    EXCLUSIVE = "exclusive"
    TIME_SLICING = "time-slicing"
    MPS = "mps"


#: Clients one MPS server accepts per GPU (Volta and later).
MPS_MAX_CLIENTS = 48


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
        gpu_sharing: how fractional requests may share the node's GPUs (:class:`SharingMode`).
        gpu_reserved_mib: memory of each GPU the driver and CUDA context keep, not available
            to tasks (requests by memory are converted against memory minus this).
        mig: per GPU, its MIG configuration (:class:`~gpusched.model.mig.MigConfig`: a static
            layout, or reconfigurable) or ``None`` for a plain GPU; empty: no MIG at all.
            A MIG-enabled GPU serves MIG requests only. Checked when built
            (:func:`~gpusched.model.mig_layout.check_node_mig`).
    """

    name: NodeName
    cpu_milli: int
    memory_mib: int
    gpus: tuple[Gpu, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    topology: NodeTopology | None = None
    gpu_sharing: SharingMode = SharingMode.TIME_SLICING
    gpu_reserved_mib: int = 0
    mig: tuple[MigConfig | None, ...] = ()

    def __post_init__(self) -> None:
        if self.topology is not None:
            self._check_topology(self.topology)
        if self.mig:
            check_node_mig(
                f"node {self.name!r}", [(g.model, g.memory_mib) for g in self.gpus], self.mig
            )
        if self.gpu_reserved_mib < 0 or (
            self.gpus
            and self.gpus[0].memory_mib
            and self.gpu_reserved_mib >= self.gpus[0].memory_mib
        ):
            memory = self.gpus[0].memory_mib if self.gpus else 0
            raise ConfigError(
                f"node {self.name!r}: field 'gpu_reserved_memory': got {self.gpu_reserved_mib} "
                f"MiB; expected 0 <= reserve < the GPU's {memory} MiB"
            )

    @property
    def gpu_usable_mib(self) -> int:
        """Memory of each GPU available to tasks (0 when the GPU memory is unknown)."""
        memory = self.gpus[0].memory_mib if self.gpus else 0
        return max(memory - self.gpu_reserved_mib, 0) if memory else 0

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
        gpu_sharing: SharingMode = SharingMode.TIME_SLICING,
        gpu_reserved_mib: int = 0,
        mig: tuple[MigConfig | None, ...] = (),
    ) -> Node:
        """Build a homogeneous node: ``gpu_count`` GPUs of one model (``mig``: per GPU, see
        the class)."""
        gpus = tuple(Gpu(i, GpuModel(gpu_model), gpu_memory_mib) for i in range(gpu_count))
        return cls(
            NodeName(name),
            cpu_milli,
            memory_mib,
            gpus,
            dict(labels or {}),
            taints,
            gpu_sharing=gpu_sharing,
            gpu_reserved_mib=gpu_reserved_mib,
            mig=mig,
        )

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
        gpu_sharing: SharingMode = SharingMode.TIME_SLICING,
        gpu_reserved_mib: int = 0,
    ) -> Node:
        """A node whose GPUs are the topology's devices; ``cpu_milli`` defaults to all the
        CPUs of its NUMA nodes (pass less to keep some for the system)."""
        gpus = tuple(Gpu(i, d.model, d.memory_mib) for i, d in enumerate(topology.devices))
        cpus = sum(topology.numa_cpu_milli) if cpu_milli is None else cpu_milli
        return cls(
            NodeName(name),
            cpus,
            memory_mib,
            gpus,
            dict(labels or {}),
            taints,
            topology,
            gpu_sharing,
            gpu_reserved_mib,
        )
