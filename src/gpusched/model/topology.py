"""The GPU topology inside one node: how its GPUs are wired to each other and to its CPUs.

Multi-GPU jobs run at the speed of their slowest GPU-to-GPU link (an all-reduce ring or tree
waits for its slowest hop), and feed their GPUs from the CPUs of one NUMA node. A
:class:`NodeTopology` says, per GPU, which NUMA node and PCIe root it hangs off and which GPUs it
reaches over NVLink, and how many CPUs each NUMA node has. It is optional on a
:class:`~gpusched.model.node.Node`: nodes without one are scheduled as before.

Link classes (as ``nvidia-smi topo -m`` prints them, best last)::

    SYS      0   path crosses the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)
    NODE     1   same NUMA node, different PCIe root (host bridge)
    PCIE     2   same PCIe root: through PCIe switches or the host bridge (PIX, PXB, PHB)
    NVLINK   3   NVLink, directly (a bridge, a mesh) or through NVSwitch (NV#)
    SELF     4   the diagonal: a GPU to itself (X)

The class of a pair without NVLink follows from where the two GPUs sit:
``PCIE if root_i == root_j else NODE if numa_i == numa_j else SYS``; NVLink overrides it.
The canonical form is the symmetric ``G x G`` matrix :attr:`NodeTopology.links`;
:meth:`NodeTopology.build` derives it from NVLink *domains* (each a set of GPUs connected all
to all: an NVSwitch domain of 8, or bridged pairs), and :meth:`NodeTopology.from_matrix`
accepts it as given (a hybrid cube-mesh, say); the node checks it against the GPUs' positions.

The connectivity of a set ``S`` of GPUs (``|S| >= 2``) is the key, compared lexicographically,
larger is better::

    key(S) = ( min_{i<j in S} links[i][j],      the bottleneck: collectives run at its speed
               SUM_{i<j in S} links[i][j],      then the more good links the better
               -|{numa(i) : i in S}| )          then the fewer NUMA nodes (CPU locality)

The minimum comes first because it bounds the bandwidth of every collective over the set;
the sum separates sets with the same bottleneck (one PCIe hop versus all pairs on PCIe); NUMA
span comes last because GPU-to-GPU traffic does not cross the CPUs when the links tie (an
NVSwitch box), but the task's data loading does. A single GPU has key ``(SELF, 0, -1)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import combinations

from gpusched.errors import ConfigError
from gpusched.model.ids import GpuModel

__all__ = [
    "MAX_TOPOLOGY_GPUS",
    "GpuDevice",
    "LinkClass",
    "NodeTopology",
    "SetKey",
    "check_topology",
]

#: Largest GPU count a topology may describe (NVIDIA HGX-2/DGX-2 class machines have 16).
MAX_TOPOLOGY_GPUS = 16

#: Connectivity key of a GPU set: ``(worst link, sum of links, -NUMA nodes spanned)``.
SetKey = tuple[int, int, int]


class LinkClass(IntEnum):
    """How two GPUs of a node are connected; larger is faster (see module docstring)."""

    SYS = 0
    NODE = 1
    PCIE = 2
    NVLINK = 3
    SELF = 4


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU as the topology sees it.

    Attributes:
        model: product name, e.g. ``"H100"`` (must match the node's :class:`Gpu` entry).
        memory_mib: device memory in MiB (must be positive).
        numa_node: index of the NUMA node the GPU is attached to.
        pcie_root: name of its PCIe root (host bridge), e.g. ``"pci0000:15"``.
    """

    model: GpuModel
    memory_mib: int
    numa_node: int
    pcie_root: str


def _pcie_class(a: GpuDevice, b: GpuDevice) -> LinkClass:
    if a.pcie_root == b.pcie_root:
        return LinkClass.PCIE
    return LinkClass.NODE if a.numa_node == b.numa_node else LinkClass.SYS


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """GPUs, their links and the node's CPUs per NUMA node.

    Build with :meth:`build` (NVLink domains) or :meth:`from_matrix`. Attach to a node with
    :meth:`Node.from_topology <gpusched.model.node.Node.from_topology>`; the node validates it
    (:func:`check_topology`) and names itself in any error.

    Attributes:
        devices: the GPUs in index order.
        numa_cpu_milli: CPUs of each NUMA node in millicores (index = NUMA node).
        links: symmetric ``G x G`` matrix of :class:`LinkClass` values, ``SELF`` on the diagonal.
        name: what the topology is (``"hgx-h100-8"``), for reports; optional, and not part of
            equality (two nodes wired alike have equal topologies).
    """

    devices: tuple[GpuDevice, ...]
    numa_cpu_milli: tuple[int, ...]
    links: tuple[tuple[int, ...], ...]
    name: str = field(default="", compare=False)

    @classmethod
    def build(
        cls,
        devices: Sequence[GpuDevice],
        numa_cpu_milli: Sequence[int],
        *,
        nvlink_domains: Iterable[Iterable[int]] = (),
        name: str = "",
        where: str = "GPU topology",
    ) -> NodeTopology:
        """A topology whose NVLink links are all-to-all inside each domain.

        ``nvlink_domains=[range(8)]`` is an NVSwitch board; ``[(0, 1), (2, 3)]`` are bridged
        pairs. A domain naming a GPU that does not exist, or with more NVLink peers than the
        node has GPUs, raises :class:`ConfigError` whose message starts with ``where`` (pass
        ``"node 'n1'"`` when the node is known).
        """
        g = len(devices)
        links = [
            [
                int(LinkClass.SELF if i == j else _pcie_class(devices[i], devices[j]))
                for j in range(g)
            ]
            for i in range(g)
        ]
        for d, domain in enumerate(nvlink_domains):
            members = sorted(set(domain))
            if len(members) > g:
                raise ConfigError(
                    f"{where}: field 'nvlink_domains[{d}]': got {len(members)} NVLink peers; "
                    f"expected at most the node's {g} GPUs"
                )
            for m in members:
                if not 0 <= m < g:
                    raise ConfigError(
                        f"{where}: field 'nvlink_domains[{d}]': got GPU {m}; "
                        f"expected an index in 0..{g - 1}"
                    )
            for i, j in combinations(members, 2):
                links[i][j] = links[j][i] = int(LinkClass.NVLINK)
        return cls(tuple(devices), tuple(numa_cpu_milli), tuple(tuple(r) for r in links), name=name)

    @classmethod
    def from_matrix(
        cls,
        devices: Sequence[GpuDevice],
        numa_cpu_milli: Sequence[int],
        links: Sequence[Sequence[int]],
        *,
        name: str = "",
    ) -> NodeTopology:
        """A topology with an explicit link-class matrix (checked when attached to a node)."""
        return cls(
            tuple(devices),
            tuple(numa_cpu_milli),
            tuple(tuple(int(c) for c in row) for row in links),
            name=name,
        )

    @property
    def gpu_count(self) -> int:
        return len(self.devices)

    def nvlink_peers(self, gpu: int) -> tuple[int, ...]:
        """GPUs reached from ``gpu`` over NVLink."""
        row = self.links[gpu]
        return tuple(j for j, c in enumerate(row) if j != gpu and c == LinkClass.NVLINK)

    @property
    def numa_count(self) -> int:
        return len(self.numa_cpu_milli)

    def numa_split(self, gpus: Iterable[int], cpu_milli: int) -> tuple[int, ...]:
        """CPUs a NUMA-local task with ``gpus`` takes from each NUMA node (index = NUMA node).

        In proportion to its GPUs there, rounded down; the few millicores left go one each to
        the NUMA nodes with the most of its GPUs (then the lowest index)::

            g_k     = #{ g in gpus : numa(g) = k }
            split_k = floor(cpu * g_k / |gpus|)  (+1 for the first cpu - SUM floor(...) of
                                                  the k with g_k > 0, by -g_k then k)

        Deterministic in ``gpus``, so a release returns exactly what the allocation took.
        """
        counts = [0] * self.numa_count
        members = tuple(gpus)
        for g in members:
            counts[self.devices[g].numa_node] += 1
        if not members:
            return tuple(counts)
        split = [cpu_milli * c // len(members) for c in counts]
        order = sorted((k for k, c in enumerate(counts) if c), key=lambda k: (-counts[k], k))
        for k in order[: cpu_milli - sum(split)]:
            split[k] += 1
        return tuple(split)

    def set_key(self, gpus: Iterable[int]) -> SetKey:
        """Connectivity key of a GPU set (formula in the module docstring); O(|S|^2)."""
        members = tuple(gpus)
        numa = -len({self.devices[g].numa_node for g in members})
        if len(members) < 2:
            return (int(LinkClass.SELF), 0, numa)
        worst = int(LinkClass.SELF)
        total = 0
        for a, b in combinations(members, 2):
            c = self.links[a][b]
            total += c
            worst = min(worst, c)
        return (worst, total, numa)


def check_topology(topology: NodeTopology, where: str) -> None:
    """Raise :class:`ConfigError` naming ``where`` (e.g. ``"node 'n1'"``) and the field when the
    topology is inconsistent: empty or too many GPUs, memory <= 0, a NUMA index out of range,
    negative CPUs, a matrix that is not square, not symmetric, not ``SELF`` exactly on the
    diagonal, an unknown class, or a non-NVLink class that contradicts the GPUs' NUMA nodes
    and PCIe roots."""
    problem = _first_problem(topology)
    if problem is not None:
        field, detail = problem
        raise ConfigError(f"{where}: field '{field}': {detail}")


@functools.lru_cache(maxsize=512)
def _first_problem(topo: NodeTopology) -> tuple[str, str] | None:
    """The first inconsistency as ``(field, "got ...; expected ...")``, or None (memoised:
    template nodes share one topology)."""
    g = len(topo.devices)
    if not 1 <= g <= MAX_TOPOLOGY_GPUS:
        return "topology.devices", f"got {g} GPUs; expected 1..{MAX_TOPOLOGY_GPUS}"
    numa_count = len(topo.numa_cpu_milli)
    if numa_count == 0:
        return "topology.numa_cpu_milli", "got no NUMA nodes; expected at least one"
    for n, cpus in enumerate(topo.numa_cpu_milli):
        if cpus < 0:
            return f"topology.numa_cpu_milli[{n}]", f"got {cpus}; expected >= 0 millicores"
    for i, dev in enumerate(topo.devices):
        if dev.memory_mib <= 0:
            return f"topology.devices[{i}].memory_mib", f"got {dev.memory_mib}; expected > 0 MiB"
        if not 0 <= dev.numa_node < numa_count:
            return (
                f"topology.devices[{i}].numa_node",
                f"got {dev.numa_node}; expected 0..{numa_count - 1} "
                f"(the node has {numa_count} NUMA nodes)",
            )
    if len(topo.links) != g or any(len(row) != g for row in topo.links):
        shape = f"{len(topo.links)}x" + "/".join(str(len(r)) for r in topo.links)
        return "topology.links", f"got a {shape} matrix; expected {g}x{g} (one row per GPU)"
    valid = {int(c) for c in LinkClass}
    for i in range(g):
        for j in range(g):
            c = topo.links[i][j]
            if c not in valid:
                return f"topology.links[{i}][{j}]", f"got {c}; expected a LinkClass 0..4"
            if (c == LinkClass.SELF) != (i == j):
                return (
                    f"topology.links[{i}][{j}]",
                    f"got {LinkClass(c).name}; expected SELF exactly on the diagonal",
                )
            if topo.links[j][i] != c:
                return (
                    f"topology.links[{i}][{j}]",
                    f"got {LinkClass(c).name} but links[{j}][{i}] is "
                    f"{LinkClass(topo.links[j][i]).name}; expected a symmetric matrix",
                )
            if i != j and c != LinkClass.NVLINK:
                implied = _pcie_class(topo.devices[i], topo.devices[j])
                if c != implied:
                    return (
                        f"topology.links[{i}][{j}]",
                        f"got {LinkClass(c).name}; expected {implied.name} or NVLINK "
                        f"(GPU {i}: NUMA {topo.devices[i].numa_node}, root "
                        f"{topo.devices[i].pcie_root!r}; GPU {j}: NUMA "
                        f"{topo.devices[j].numa_node}, root {topo.devices[j].pcie_root!r})",
                    )
    return None
