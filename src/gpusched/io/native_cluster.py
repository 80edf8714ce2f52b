"""gpusched's native cluster format (YAML): node groups, their GPU topology and MIG, and the
network levels, read into :class:`~gpusched.model.Node` values.

The cluster is one of the two native files (the workload, :mod:`gpusched.io.native_jobs`, is the
other); this module is its schema and its loader. The ``mig`` entries are
:mod:`gpusched.io.native_mig`, the taints :mod:`gpusched.io.native_constraints`, and
:mod:`gpusched.io.native_dump` writes what :func:`load_cluster` reads back.

Cluster (YAML)::

    nodes:
      - name: h100          # with count > 1 the nodes are h100-000, h100-001, ...
        count: 16
        cpu: 192            # cores, or "500m"
        memory: 2Ti         # MiB, or a quantity: 512Gi, 2Ti
        gpus: 8
        gpu_model: H100
        gpu_memory: 80Gi
        labels: {topology.kubernetes.io/zone: z1}
        taints: [{key: dedicated, value: infer, effect: NoSchedule}]
        gpu_sharing: time-slicing   # exclusive | time-slicing | mps (fractional requests)
        gpu_reserved_memory: 1Gi    # per GPU, kept by the driver (requests by memory use the rest)
        topology:           # GPU topology inside the node (optional)
          numa_cpu: [96, 96]          # cores per NUMA node
          gpu_numa: [0, 0, 0, 0, 1, 1, 1, 1]   # NUMA node of each GPU
          pcie_root: [a, a, b, b, c, c, d, d]  # optional; default: one root per GPU
          nvlink: [[0, 1, 2, 3, 4, 5, 6, 7]]   # NVLink domains, all to all inside each
        mig:                # MIG-enabled GPUs (gpusched.io.native_mig); the rest stay plain
          - {gpus: [0, 1], layout: [3g.40gb@0, 2g.20gb@4, 1g.10gb@6]}   # static instances
          - {gpus: [2, 3], reconfigurable: true}    # instances created as the scheduler needs
      - name: dgx           # or a built-in template (hgx-h100-8, hgx-a100-8, pcie-4-pairs, l4,
        template: hgx-h100-8  # t4): GPUs, topology, CPUs and memory from the template; cpu,
        count: 4            # memory, labels, taints, gpu_sharing may still be given
        labels: {topology.gpusched.io/rack: r1}
    network_topology: gke   # optional: a preset (gke, eks, topograph, topograph-tiers,
                            # gpusched) or label keys coarse to fine; default: detected

Every error names the file, line and field (:class:`~gpusched.errors.TraceError`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusched.errors import ConfigError, TraceError
from gpusched.io.native_constraints import TaintEntry
from gpusched.io.native_mig import MigEntry, MigError, build_mig
from gpusched.io.quantity import Quantity, cpu_to_milli, memory_to_mib
from gpusched.io.yamlfile import LINE_KEY, entry_line, load_yaml, validate
from gpusched.model import (
    Effect,
    Gpu,
    GpuModel,
    NetworkTopology,
    Node,
    NodeName,
    SharingMode,
    Taint,
)
from gpusched.model.network import detect_network, network_from_spec
from gpusched.model.templates import TEMPLATES
from gpusched.model.topology import GpuDevice, NodeTopology

__all__ = ["ClusterFile", "NodeGroup", "TopologyEntry", "load_cluster", "load_cluster_spec"]


class TopologyEntry(BaseModel):
    """The GPU topology inside a node (see docs/topology.md)."""

    model_config = ConfigDict(extra="forbid")

    numa_cpu: list[Quantity] = Field(
        min_length=1, description="CPUs of each NUMA node: cores or millicores ('500m')."
    )
    gpu_numa: list[int] = Field(description="NUMA node of each GPU, in GPU order.")
    pcie_root: list[str] | None = Field(
        default=None, description="PCIe root of each GPU (default: one root per GPU)."
    )
    nvlink: list[list[int]] = Field(
        default_factory=list,
        description="NVLink domains: GPU indices connected all to all ([[0..7]]: NVSwitch).",
    )

    @field_validator("numa_cpu", mode="before")
    @classmethod
    def _cpus(cls, v: Any) -> Any:
        return [cpu_to_milli(c) for c in v] if isinstance(v, list) else v

    def build(self, model: str, memory_mib: int, where: str) -> NodeTopology:
        roots = self.pcie_root or [f"root{i}" for i in range(len(self.gpu_numa))]
        if len(roots) != len(self.gpu_numa):
            raise ConfigError(
                f"{where}: field 'topology.pcie_root': got {len(roots)} entries; expected one "
                f"per GPU ({len(self.gpu_numa)})"
            )
        devices = [
            GpuDevice(GpuModel(model), memory_mib, numa, root)
            for numa, root in zip(self.gpu_numa, roots, strict=True)
        ]
        return NodeTopology.build(
            devices, [int(c) for c in self.numa_cpu], nvlink_domains=self.nvlink, where=where
        )


class NodeGroup(BaseModel):
    """One node, or ``count`` identical nodes."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Node name, or name prefix when count > 1.")
    count: int = Field(default=1, ge=1, description="How many identical nodes.")
    template: str | None = Field(
        default=None,
        description="A built-in machine (hgx-h100-8, hgx-a100-8, pcie-4-pairs, l4, t4; "
        "hgx-h100-8-mig, hgx-a100-8-mig: every GPU MIG-enabled and reconfigurable): GPUs, "
        "GPU topology, CPUs and memory from the template; cpu and memory override it.",
    )
    cpu: Quantity | None = Field(
        default=None,
        description="Allocatable CPU: cores (8, 0.5) or millicores ('500m'); required "
        "without a template.",
    )
    memory: Quantity | None = Field(
        default=None,
        description="Allocatable memory: MiB or a quantity ('512Gi'); required without a template.",
    )
    gpus: int = Field(default=0, ge=0, le=64, description="GPUs per node.")
    gpu_model: str = Field(default="", description="GPU model name; required when gpus > 0.")
    gpu_memory: Quantity = Field(default=0, description="Memory of each GPU ('80Gi').")
    labels: dict[str, str] = Field(default_factory=dict, description="Node labels.")
    taints: list[TaintEntry] = Field(
        default_factory=list,
        description="Node taints: `{key, value, effect}`; pods need a matching toleration.",
    )
    gpu_sharing: SharingMode = Field(
        default=SharingMode.TIME_SLICING,
        description="How fractional requests share the GPUs: exclusive (none), time-slicing, mps.",
    )
    gpu_reserved_memory: Quantity | None = Field(
        default=None,
        description="GPU memory the driver keeps, per GPU (default 0; templates 1Gi).",
    )
    topology: TopologyEntry | None = Field(
        default=None,
        description="GPU topology: `{numa_cpu, gpu_numa, pcie_root, nvlink}` (docs/topology.md).",
    )
    mig: MigEntry | list[MigEntry] | None = Field(
        default=None,
        description="MIG-enabled GPUs: `{gpus, layout}` (static instances, `[3g.40gb@0, ...]` or "
        "`{1g.10gb: 7}`) or `{gpus, reconfigurable: true}`; a list, or one entry for every GPU "
        "(docs/topology.md).",
    )

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, v: Quantity | None) -> int | None:
        return None if v is None else cpu_to_milli(v)

    @field_validator("memory", "gpu_memory", "gpu_reserved_memory", mode="before")
    @classmethod
    def _mem(cls, v: Quantity | None) -> int | None:
        return None if v is None else memory_to_mib(v)

    @model_validator(mode="after")
    def _model_needed(self) -> NodeGroup:
        if self.template is not None:
            if self.template not in TEMPLATES:
                raise ValueError(
                    f"unknown template {self.template!r}; known: {', '.join(TEMPLATES)}"
                )
            if self.gpus or self.gpu_model or self.topology is not None:
                raise ValueError(
                    f"node {self.name!r} has a template; gpus, gpu_model and topology come from it"
                )
        elif self.cpu is None or self.memory is None:
            raise ValueError(f"node {self.name!r}: give cpu and memory (or a template)")
        if self.topology is not None and len(self.topology.gpu_numa) != self.gpus:
            raise ValueError(
                f"node {self.name!r}: topology.gpu_numa has {len(self.topology.gpu_numa)} "
                f"entries; expected one per GPU ({self.gpus})"
            )
        if self.gpus and not self.gpu_model:
            raise ValueError(f"node {self.name!r} has {self.gpus} GPUs; set gpu_model")
        seen: set[tuple[str, Effect]] = set()
        for t in self.taints:
            if (t.key, t.effect) in seen:
                raise ValueError(
                    f"node {self.name!r} has two taints {t.key!r} with effect {t.effect.value}; "
                    "a key may be tainted once per effect"
                )
            seen.add((t.key, t.effect))
        return self

    def build(self) -> list[Node]:
        """The group's nodes; :class:`ConfigError` naming the node and field when its GPU
        topology is inconsistent."""
        names = (
            [self.name] if self.count == 1 else [f"{self.name}-{i:03d}" for i in range(self.count)]
        )
        taints = tuple(Taint(t.key, t.value, t.effect) for t in self.taints)
        if self.template is not None:
            return self._from_template(self.template, names, taints)
        mig = build_mig(self.mig, self.gpus, self.gpu_model, int(self.gpu_memory), self.name)
        topology = (
            None
            if self.topology is None
            else self.topology.build(
                self.gpu_model, int(self.gpu_memory), where=f"node {self.name!r}"
            )
        )
        return [
            Node(
                NodeName(n),
                int(self.cpu or 0),
                int(self.memory or 0),
                tuple(
                    Gpu(i, GpuModel(self.gpu_model), int(self.gpu_memory)) for i in range(self.gpus)
                ),
                dict(self.labels),
                taints,
                topology,
                self.gpu_sharing,
                int(self.gpu_reserved_memory or 0),
                mig,
            )
            for n in names
        ]

    def _from_template(
        self, template: str, names: list[str], taints: tuple[Taint, ...]
    ) -> list[Node]:
        """The group's nodes built from ``template``, with the fields the group overrides."""
        out = []
        for n in names:
            base = TEMPLATES[template](n)
            changes: dict[str, Any] = {
                "labels": dict(self.labels),
                "taints": taints,
                "gpu_sharing": self.gpu_sharing,
            }
            if self.cpu is not None:
                changes["cpu_milli"] = int(self.cpu)
            if self.memory is not None:
                changes["memory_mib"] = int(self.memory)
            if self.gpu_reserved_memory is not None:
                changes["gpu_reserved_mib"] = int(self.gpu_reserved_memory)
            if self.mig is not None:
                model, memory = (base.gpus[0].model, base.gpus[0].memory_mib)
                changes["mig"] = build_mig(self.mig, base.gpu_count, model, memory, n)
            out.append(replace(base, **changes))
        return out


class ClusterFile(BaseModel):
    """A cluster description."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[NodeGroup] = Field(min_length=1, description="Node groups.")
    network_topology: str | list[str] | None = Field(
        default=None,
        description="Network levels: a preset (gke, eks, topograph, topograph-tiers, "
        "gpusched) or node label keys coarse to fine; default: detected from the labels.",
    )


def load_cluster(path: str | Path) -> list[Node]:
    """Nodes of a native cluster YAML file (see :func:`load_cluster_spec` for its network)."""
    return load_cluster_spec(path)[0]


def load_cluster_spec(path: str | Path) -> tuple[list[Node], NetworkTopology]:
    """Nodes of a native cluster YAML file and its network levels (``network_topology``, or
    detected from the labels). A GPU topology that contradicts itself or a network level no
    node label defines is a :class:`TraceError` naming the line and field."""
    data = load_yaml(path)
    spec = validate(ClusterFile, data, path)
    nodes: list[Node] = []
    seen: set[str] = set()
    for g, group in enumerate(spec.nodes):
        try:
            built = group.build()
        except MigError as exc:
            raise TraceError(str(path), entry_line(data, "nodes", g), "mig", str(exc)) from None
        except ConfigError as exc:
            raise TraceError(
                str(path), entry_line(data, "nodes", g), "topology", str(exc)
            ) from None
        for node in built:
            if node.name in seen:
                raise TraceError(
                    str(path),
                    entry_line(data, "nodes", g),
                    "name",
                    f"duplicate node name {node.name!r}",
                )
            seen.add(node.name)
        nodes.extend(built)
    labels = [n.labels for n in nodes]
    if spec.network_topology is None:
        network = detect_network(labels)
    else:
        try:
            network = network_from_spec(spec.network_topology, labels, where="network_topology")
        except ConfigError as exc:
            line = data.get(LINE_KEY) if isinstance(data, dict) else None
            raise TraceError(
                str(path), line if isinstance(line, int) else None, "network_topology", str(exc)
            ) from None
    return nodes, network
