"""Built-in node templates: common GPU machines with their intra-node topology.

Each function returns a :class:`~gpusched.model.Node` carrying a
:class:`~gpusched.model.topology.NodeTopology`. Nodes built from one template share one
topology object, so the topology-aware GPU picker builds its lookup tables once per template.
GPU model names match the built-in cluster (``"H100"``, ``"A100"``, ``"L4"``, ``"T4"``) so task
model constraints keep working.

==================  ====  ===========================  ===========================  ======
template            GPUs  GPU links                    NUMA (GPUs: CPUs)            memory
==================  ====  ===========================  ===========================  ======
``hgx_h100_node``   8     NVSwitch, all to all         0: 0-3, 1: 4-7; 112 + 112    2 TiB
``hgx_a100_node``   8     NVSwitch, all to all         0: 0-3, 1: 4-7; 128 + 128    1 TiB
``pcie_pairs_node`` 4     NVLink bridges 0-1 and 2-3   0: 0-1, 1: 2-3; 32 + 32      512 GiB
``l4_node``         4/8   PCIe only                    halves; 24 + 24 (4 GPUs)     192 GiB
``t4_node``         4     PCIe only                    halves; 24 + 24              192 GiB
==================  ====  ===========================  ===========================  ======

Template nodes keep 1 GiB of each GPU for the driver and CUDA context
(``gpu_reserved_mib``), which requests by GPU memory are converted against.

MIG: ``hgx_h100_node`` and ``hgx_a100_node`` take ``mig=MigConfig(...)`` for all eight GPUs;
the templates ``hgx-h100-8-mig`` and ``hgx-a100-8-mig`` are those boards with every GPU
MIG-enabled and reconfigurable (see :mod:`gpusched.framework.mig`).

(Here in :mod:`gpusched.model` so that the file formats can build them; also importable from
:mod:`gpusched.workloads.templates`.)

PCIe roots: the HGX boards put each GPU pair behind one PCIe switch (as on DGX A100; DGX H100
gives each GPU its own switch, which changes nothing here because NVSwitch links dominate);
the PCIe boxes give every GPU its own root port. The A100 board is modelled with one NUMA node
per socket; a DGX A100 in AMD's NPS4 mode reports four per socket (pairs on NUMA 3, 1, 7, 5),
which matters only for CPU placement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import replace

from gpusched.errors import ConfigError
from gpusched.model.constraints import Taint
from gpusched.model.ids import GpuModel
from gpusched.model.mig import MigConfig
from gpusched.model.node import Node
from gpusched.model.topology import GpuDevice, NodeTopology

__all__ = [
    "DRIVER_RESERVED_MIB",
    "TEMPLATES",
    "hgx_a100_node",
    "hgx_h100_node",
    "l4_node",
    "pcie_pairs_node",
    "t4_node",
]

_GIB = 1024
#: GPU memory a template node keeps for the driver and CUDA context, per GPU.
DRIVER_RESERVED_MIB = 1024


def _devices(
    model: str, memory_gib: int, count: int, numa_nodes: int, gpus_per_root: int
) -> tuple[GpuDevice, ...]:
    per_numa = count // numa_nodes
    return tuple(
        GpuDevice(
            model=GpuModel(model),
            memory_mib=memory_gib * _GIB,
            numa_node=i // per_numa,
            pcie_root=f"pci{i // gpus_per_root:04x}",
        )
        for i in range(count)
    )


@functools.cache
def _nvswitch8(model: str, memory_gib: int, cpus_per_numa: int, name: str) -> NodeTopology:
    return NodeTopology.build(
        _devices(model, memory_gib, 8, 2, 2),
        (cpus_per_numa * 1000,) * 2,
        nvlink_domains=[range(8)],
        name=name,
    )


@functools.cache
def _pcie(
    model: str, memory_gib: int, count: int, cpus_per_numa: int, *, pairs: bool, name: str
) -> NodeTopology:
    domains = [(i, i + 1) for i in range(0, count, 2)] if pairs else []
    return NodeTopology.build(
        _devices(model, memory_gib, count, 2, 1),
        (cpus_per_numa * 1000,) * 2,
        nvlink_domains=domains,
        name=name,
    )


def _node(
    name: str,
    topo: NodeTopology,
    memory_gib: int,
    labels: Mapping[str, str] | None,
    taints: tuple[Taint, ...],
) -> Node:
    """A node of ``topo`` with the driver's reserve on every GPU (what each template builds)."""
    return Node.from_topology(
        name,
        topo,
        memory_mib=memory_gib * _GIB,
        labels=labels,
        taints=taints,
        gpu_reserved_mib=DRIVER_RESERVED_MIB,
    )


def hgx_h100_node(
    name: str,
    *,
    memory_gib: int = 2048,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    mig: MigConfig | None = None,
) -> Node:
    """8 x H100 SXM 80 GB on an NVSwitch board, 2 sockets x 112 CPUs (DGX/HGX H100);
    ``mig``: every GPU MIG-enabled so."""
    topo = _nvswitch8("H100", 80, 112, "hgx-h100-8")
    node = _node(name, topo, memory_gib, labels, taints)
    return node if mig is None else replace(node, mig=(mig,) * node.gpu_count)


def hgx_a100_node(
    name: str,
    *,
    gpu_memory_gib: int = 80,
    memory_gib: int = 1024,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    mig: MigConfig | None = None,
) -> Node:
    """8 x A100 SXM (80 GB, or 40 GB) on an NVSwitch board, 2 sockets x 128 CPUs (DGX A100);
    ``mig``: every GPU MIG-enabled so."""
    topo = _nvswitch8("A100", gpu_memory_gib, 128, f"hgx-a100-{gpu_memory_gib}gb-8")
    node = _node(name, topo, memory_gib, labels, taints)
    return node if mig is None else replace(node, mig=(mig,) * node.gpu_count)


def pcie_pairs_node(
    name: str,
    *,
    model: str = "A100",
    gpu_memory_gib: int = 80,
    memory_gib: int = 512,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
) -> Node:
    """4 PCIe GPUs with NVLink bridges on 0-1 and 2-3, one pair per socket (32 CPUs each)."""
    topo = _pcie(model, gpu_memory_gib, 4, 32, pairs=True, name=f"pcie-{model.lower()}-4-pairs")
    return _node(name, topo, memory_gib, labels, taints)


def l4_node(
    name: str,
    *,
    gpus: int = 4,
    memory_gib: int = 192,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
) -> Node:
    """An inference node with ``gpus`` (2, 4 or 8) L4 24 GB on PCIe, no NVLink; 12 CPUs per
    GPU split over 2 sockets (as GCP's g2-standard machines)."""
    if gpus not in (2, 4, 8):
        raise ConfigError(f"node {name!r}: field 'gpus': got {gpus}; expected 2, 4 or 8")
    topo = _pcie("L4", 24, gpus, 6 * gpus, pairs=False, name=f"pcie-l4-{gpus}")
    return _node(name, topo, memory_gib, labels, taints)


def t4_node(
    name: str,
    *,
    memory_gib: int = 192,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
) -> Node:
    """An inference node with 4 x T4 16 GB on PCIe, no NVLink, 2 sockets x 24 CPUs."""
    topo = _pcie("T4", 16, 4, 24, pairs=False, name="pcie-t4-4")
    return _node(name, topo, memory_gib, labels, taints)


_RECONFIGURABLE = MigConfig(reconfigurable=True)

#: Template name -> builder taking the node name (for cluster files and generators).
TEMPLATES: Mapping[str, Callable[[str], Node]] = {
    "hgx-h100-8": hgx_h100_node,
    "hgx-a100-8": hgx_a100_node,
    "hgx-h100-8-mig": functools.partial(hgx_h100_node, mig=_RECONFIGURABLE),
    "hgx-a100-8-mig": functools.partial(hgx_a100_node, mig=_RECONFIGURABLE),
    "pcie-4-pairs": pcie_pairs_node,
    "l4": l4_node,
    "t4": t4_node,
}
