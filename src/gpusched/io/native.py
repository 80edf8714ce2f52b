"""gpusched's own cluster and workload formats (YAML, and CSV for workloads).

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

Workload (YAML, or CSV with the same field names as columns and ``gpu_models`` joined by
``|``)::

    jobs:
      - name: train-0001
        kind: training      # training | inference | notebook | batch
        submit: 120         # seconds from the start
        duration: 3600      # seconds once started; omit to run forever
        replicas: 2         # pods of the job (a gang when min_available > 1); pods beyond
        min_available: 2    #   min_available are elastic (default: replicas)
        queue: team-a
        priority: 0
        priority_class: training-batch   # resolved by the scheduling config
        preemptible: true
        runtime_estimate: 3000           # user's estimate (backfill); else learned
        user: alice
        cpu: 16             # per pod
        memory: 128Gi       # per pod
        gpus: 8             # per pod
        gpu_share: 1000     # milli-GPU of each GPU; < 1000 only with gpus: 1
        gpu_models: [H100]  # allowed models; empty = any
        gpu_memory: 10Gi    # GPU memory per GPU: with gpus: 1 a share *by memory* (converted
                            # per node), except for training, which gets whole GPUs with at
                            # least this memory unless share_gpu: true; with gpu_share: 1000
                            # or gpus > 1 a minimum
        share_gpu: true     # training only: may share a GPU (default false for training)
        topology_required: rack    # the gang in one domain of this network level, or wait
        topology_preferred: block  # one domain if possible, else as few as possible
        mig: 1g.10gb        # instead of gpus: MIG instances of this profile per pod,
        mig_count: 1        #   this many (charged compute slices / 7 of a GPU each)
        labels: {team: a}   # job labels (informational)
        node_selector: {gpusched.io/pool: h100}
        tolerations: [{key: dedicated, operator: Equal, value: infer, effect: NoSchedule}]
        affinity_required:  # terms ORed; the expressions of a term ANDed
          - [{key: zone, operator: In, values: [z1, z2]}]
        affinity_preferred: # weight added to the score of nodes matching every expression
          - {weight: 10, match: [{key: zone, operator: In, values: [z1]}]}

In CSV, ``labels``, ``node_selector``, ``tolerations`` and the affinity columns hold the same
values as YAML flow text (``"{pool: infer}"``). Every pod of a job has the same shape and
constraints. :func:`dump_workload` and :func:`dump_cluster` write what the loaders read back
identically (round trip without loss).

Every error names the file, line and field (:class:`~gpusched.errors.TraceError`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusched.errors import ConfigError, TraceError
from gpusched.io.csvtable import read_table
from gpusched.io.native_constraints import (
    ExpressionEntry,
    PreferredEntry,
    TaintEntry,
    TolerationEntry,
    dump_constraints,
)
from gpusched.io.native_mig import (
    MigEntry,
    MigError,
    build_mig,
    dump_mig,
    dump_mig_request,
    known_profiles,
)
from gpusched.io.quantity import cpu_to_milli, memory_to_mib
from gpusched.io.yamlfile import LINE_KEY, load_yaml, validate
from gpusched.model import (
    CPU,
    GPU,
    MEMORY,
    MILLI_PER_GPU,
    NO_CONSTRAINTS,
    Constraints,
    Effect,
    Expression,
    Gpu,
    GpuModel,
    Job,
    JobId,
    JobKind,
    NetworkTopology,
    Node,
    NodeName,
    QueueName,
    Resources,
    SchedulingConfig,
    SharingMode,
    Taint,
    Task,
    TaskId,
    TaskShape,
    Toleration,
    TopologyRequest,
)
from gpusched.model.mig import geometry_for_gpu
from gpusched.model.network import detect_network, network_from_spec
from gpusched.model.task import nominal_share
from gpusched.model.templates import TEMPLATES
from gpusched.model.topology import GpuDevice, LinkClass, NodeTopology

__all__ = [
    "ClusterFile",
    "ExpressionEntry",
    "JobEntry",
    "NodeGroup",
    "PreferredEntry",
    "TaintEntry",
    "TolerationEntry",
    "WorkloadFile",
    "dump_cluster",
    "dump_scheduling",
    "dump_workload",
    "load_cluster",
    "load_cluster_spec",
    "load_workload",
]

Quantity = int | float | str


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
            out = []
            for n in names:
                base = TEMPLATES[self.template](n)
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


class ClusterFile(BaseModel):
    """A cluster description."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[NodeGroup] = Field(min_length=1, description="Node groups.")
    network_topology: str | list[str] | None = Field(
        default=None,
        description="Network levels: a preset (gke, eks, topograph, topograph-tiers, "
        "gpusched) or node label keys coarse to fine; default: detected from the labels.",
    )


class JobEntry(BaseModel):
    """One job: ``replicas`` identical pods."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Unique job name.")
    kind: JobKind = Field(
        default=JobKind.BATCH, description="training, inference, notebook, batch."
    )
    submit: float = Field(default=0.0, ge=0, description="Submit time, seconds from the start.")
    duration: float | None = Field(default=None, gt=0, description="Run time in seconds.")
    replicas: int = Field(default=1, ge=1, description="Pods in the job.")
    min_available: int | None = Field(
        default=None, ge=1, description="Pods that must start together (default: replicas)."
    )
    queue: str = Field(default="default", min_length=1, description="Queue charged.")
    priority: int = Field(default=0, strict=True, description="Larger is more important.")
    priority_class: str = Field(
        default="",
        description="Priority class name; sets priority and preemptible from the "
        "scheduling config.",
    )
    preemptible: bool | None = Field(
        default=None, description="May be evicted for others (default: from the class, else yes)."
    )
    restartable: bool = Field(
        default=True,
        description="May be stopped and restarted elsewhere at once to make room for a "
        "fragmented-blocked job (defragmentation; also needs preemptible).",
    )
    runtime_estimate: float | None = Field(
        default=None, gt=0, description="User's run-time estimate in seconds (for backfill)."
    )
    user: str = Field(default="", description="Submitting user (run times are learned per user).")
    cpu: Quantity = Field(description="CPU per pod.")
    memory: Quantity = Field(description="Memory per pod.")
    gpus: int = Field(default=0, ge=0, le=64, description="GPUs per pod.")
    gpu_share: int = Field(
        default=MILLI_PER_GPU, ge=1, le=MILLI_PER_GPU, description="Milli-GPU of each GPU."
    )
    gpu_models: list[str] = Field(default_factory=list, description="Allowed GPU models.")
    labels: dict[str, str] = Field(default_factory=dict, description="Job labels.")
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels every pod requires (`key: value`)."
    )
    tolerations: list[TolerationEntry] = Field(
        default_factory=list,
        description="Tolerations of the pods: `{key, operator, value, effect}`, operator "
        "Equal or Exists.",
    )
    affinity_required: list[list[ExpressionEntry]] = Field(
        default_factory=list,
        description="Required node affinity: terms ORed, each a list of expressions ANDed "
        "(`{key, operator, values}`, operator In, NotIn, Exists or DoesNotExist).",
    )
    affinity_preferred: list[PreferredEntry] = Field(
        default_factory=list,
        description="Preferred node affinity: `{weight: 1..100, match: [expressions]}`.",
    )
    gpu_memory: Quantity | None = Field(
        default=None,
        description="GPU memory per GPU ('10Gi'). With gpus: 1 a share by memory, converted "
        "on each node against its GPU memory minus the driver's reserve (training: a whole GPU "
        "with at least this memory unless share_gpu); with gpu_share: 1000 or gpus > 1 a "
        "minimum.",
    )
    share_gpu: bool | None = Field(
        default=None,
        description="Whether a request by gpu_memory may share a GPU (default: yes, except "
        "for training).",
    )
    numa_local_cpus: bool = Field(
        default=False,
        description="Take the pod's CPUs from the NUMA node(s) of its GPUs (whole GPUs on "
        "nodes with a topology; honoured by profiles with the numa-local-cpu filter, such as "
        "gpusched-topo).",
    )
    topology_required: str | None = Field(
        default=None,
        description="Network level (name or label) the gang must sit in one domain of.",
    )
    topology_preferred: str | None = Field(
        default=None,
        description="Network level the gang prefers one domain of (else as few as possible).",
    )
    mig: str | None = Field(
        default=None,
        description="A MIG profile each pod needs instances of ('1g.10gb', '3g.40gb', ...; the "
        "A100 40 GB has '1g.5gb', ...) instead of gpus; charged compute slices / 7 of a GPU.",
    )
    mig_count: int = Field(default=1, ge=1, le=7, description="MIG instances per pod.")

    @field_validator("mig")
    @classmethod
    def _mig(cls, v: str | None) -> str | None:
        if v is not None and v not in known_profiles():
            raise ValueError(
                f"unknown MIG profile {v!r}; known profiles: {', '.join(known_profiles())}"
            )
        return v

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, v: Quantity) -> int:
        return cpu_to_milli(v)

    @field_validator("memory", mode="before")
    @classmethod
    def _mem(cls, v: Quantity) -> int:
        return memory_to_mib(v)

    @field_validator("gpu_memory", mode="before")
    @classmethod
    def _gpu_mem(cls, v: Quantity | None) -> int | None:
        return None if v is None else memory_to_mib(v)

    def gpu_request(self) -> tuple[int, int]:
        """``(gpu_milli, gpu_memory_mib)`` of each pod (see the field descriptions)."""
        if not self.gpus:
            return 0, 0
        mem = int(self.gpu_memory or 0)
        if not mem:
            return self.gpu_share, 0
        if "gpu_share" in self.model_fields_set or self.gpus > 1:
            return self.gpu_share, mem
        shares = self.share_gpu if self.share_gpu is not None else self.kind != JobKind.TRAINING
        return (nominal_share(mem) if shares else MILLI_PER_GPU), mem

    def topology(self) -> TopologyRequest | None:
        if self.topology_required:
            return TopologyRequest(self.topology_required, required=True)
        if self.topology_preferred:
            return TopologyRequest(self.topology_preferred, required=False)
        return None

    @model_validator(mode="after")
    def _consistent(self) -> JobEntry:
        if self.gpus > 1 and self.gpu_share < MILLI_PER_GPU:
            raise ValueError(
                f"gpu_share {self.gpu_share} with gpus: {self.gpus}; only single-GPU pods may "
                "share a GPU (use gpu_share: 1000)"
            )
        if self.min_available is not None and self.min_available > self.replicas:
            raise ValueError(f"min_available {self.min_available} exceeds replicas {self.replicas}")
        if self.numa_local_cpus and not self.gpus:
            raise ValueError(
                f"job {self.name!r}: numa_local_cpus without gpus: a pod's CPUs are "
                "NUMA-local to its GPUs; give gpus: 1 (or more), or remove numa_local_cpus"
            )
        if self.numa_local_cpus and self.gpu_request()[0] < MILLI_PER_GPU:
            raise ValueError(
                f"job {self.name!r}: numa_local_cpus with a shared GPU; NUMA-local CPUs need "
                "whole GPUs (remove gpu_share / gpu_memory's share, or numa_local_cpus)"
            )
        if self.gpu_memory is not None:
            if int(self.gpu_memory) <= 0:
                raise ValueError(f"gpu_memory {self.gpu_memory} MiB; expected > 0")
            if not self.gpus:
                raise ValueError("gpu_memory without gpus; give gpus: 1 (or more)")
            if "gpu_share" in self.model_fields_set and self.gpu_share < MILLI_PER_GPU:
                raise ValueError(
                    f"gpu_share {self.gpu_share} and gpu_memory both size the share; give one "
                    "(gpu_memory alone, or gpu_share: 1000 for a whole GPU with that memory)"
                )
        if self.topology_required and self.topology_preferred:
            raise ValueError("give topology_required or topology_preferred, not both")
        if self.mig is not None:
            other = [f for f in ("gpus", "gpu_share", "gpu_memory") if f in self.model_fields_set]
            if other:
                raise ValueError(
                    f"mig {self.mig!r} with {', '.join(other)}; a MIG pod asks instances, not "
                    "GPUs: remove " + ", ".join(other)
                )
        elif "mig_count" in self.model_fields_set:
            raise ValueError("mig_count without mig; give mig: PROFILE (e.g. 1g.10gb)")
        for i, term in enumerate(self.affinity_required):
            if not term:
                raise ValueError(
                    f"affinity_required[{i}] is an empty term, which matches no node in "
                    "Kubernetes; give at least one expression or remove the term"
                )
        return self

    def constraints(self) -> Constraints:
        """The pods' node constraints."""

        def expr(e: ExpressionEntry) -> Expression:
            return Expression(e.key, e.operator, tuple(e.values))

        return Constraints(
            node_selector=tuple(sorted(self.node_selector.items())),
            tolerations=tuple(
                Toleration(t.key, t.operator, t.value, t.effect) for t in self.tolerations
            ),
            required=tuple(tuple(expr(e) for e in term) for term in self.affinity_required),
            preferred=tuple(
                (p.weight, tuple(expr(e) for e in p.match)) for p in self.affinity_preferred
            ),
        )

    def build(self) -> Job:
        constraints = self.constraints()
        milli, gpu_mem = self.gpu_request()
        shape = TaskShape(
            cpu_milli=int(self.cpu),
            memory_mib=int(self.memory),
            num_gpu=self.gpus,
            gpu_milli=milli,
            gpu_models=frozenset(GpuModel(m) for m in self.gpu_models),
            constraints=NO_CONSTRAINTS if constraints.empty else constraints,
            numa_local_cpus=self.numa_local_cpus,
            gpu_memory_mib=gpu_mem,
            mig_profile=self.mig or "",
            mig_count=self.mig_count,
        )
        jid = JobId(self.name)
        tasks = tuple(
            Task(TaskId(self.name if self.replicas == 1 else f"{self.name}-{i}"), jid, shape)
            for i in range(self.replicas)
        )
        return Job(
            id=jid,
            tasks=tasks,
            min_available=self.min_available or self.replicas,
            queue=QueueName(self.queue),
            priority=self.priority,
            submit_time=self.submit,
            duration=self.duration,
            kind=self.kind,
            labels=dict(self.labels),
            priority_class=self.priority_class,
            preemptible=True if self.preemptible is None else self.preemptible,
            restartable=self.restartable,
            runtime_estimate=self.runtime_estimate,
            user=self.user,
            topology=self.topology(),
        )


class WorkloadFile(BaseModel):
    """A workload description."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[JobEntry] = Field(min_length=1, description="Jobs.")


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
            raise TraceError(str(path), _entry_line(data, "nodes", g), "mig", str(exc)) from None
        except ConfigError as exc:
            raise TraceError(
                str(path), _entry_line(data, "nodes", g), "topology", str(exc)
            ) from None
        for node in built:
            if node.name in seen:
                raise TraceError(
                    str(path),
                    _entry_line(data, "nodes", g),
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


def load_workload(
    path: str | Path,
    known_models: Iterable[str] | None = None,
    nodes: Sequence[Node] | None = None,
) -> list[Job]:
    """Jobs of a native workload file (``.yaml``/``.yml`` or ``.csv``).

    With ``known_models``, a job naming any other GPU model is an error. With ``nodes``, so is
    a ``gpu_memory`` above the usable memory of every GPU the job may use (the error names the
    job and the field).
    """
    p = Path(path)
    entries: list[tuple[int | None, JobEntry]]
    if p.suffix.lower() == ".csv":
        entries = list(_csv_entries(p))
    else:
        data = load_yaml(p)
        spec = validate(WorkloadFile, data, p)
        entries = [(_entry_line(data, "jobs", i), e) for i, e in enumerate(spec.jobs)]
    models = set(known_models) if known_models is not None else None
    jobs: list[Job] = []
    seen: set[str] = set()
    for line, entry in entries:
        if entry.name in seen:
            raise TraceError(str(p), line, "name", f"duplicate job name {entry.name!r}")
        seen.add(entry.name)
        if models is not None:
            unknown = sorted(set(entry.gpu_models) - models)
            if unknown:
                raise TraceError(
                    str(p),
                    line,
                    "gpu_models",
                    f"unknown GPU model {unknown[0]!r}; the cluster has "
                    f"{', '.join(sorted(models)) or 'no GPUs'}",
                )
        if nodes is not None and entry.gpu_memory:
            _check_gpu_memory(p, line, entry, nodes)
        if nodes is not None and entry.mig:
            _check_mig(p, line, entry, nodes)
        jobs.append(entry.build())
    return jobs


def _check_gpu_memory(path: Path, line: int | None, entry: JobEntry, nodes: Sequence[Node]) -> None:
    allowed = set(entry.gpu_models)
    usable = [n.gpu_usable_mib for n in nodes if n.gpus and (not allowed or n.gpu_model in allowed)]
    best = max(usable, default=0)
    if int(entry.gpu_memory or 0) > best:
        raise TraceError(
            str(path),
            line,
            "gpu_memory",
            f"job {entry.name!r} asks {int(entry.gpu_memory or 0)} MiB of one GPU; the largest "
            f"usable GPU memory{' of its models' if allowed else ''} is {best} MiB "
            "(GPU memory minus the driver's reserve)",
        )


def _check_mig(path: Path, line: int | None, entry: JobEntry, nodes: Sequence[Node]) -> None:
    offered: dict[str, None] = {}
    for n in nodes:
        for g, conf in enumerate(n.mig):
            if conf is None:
                continue
            if conf.reconfigurable:
                geo = geometry_for_gpu(n.gpus[g].model, n.gpus[g].memory_mib)
                offered.update(dict.fromkeys(geo.profiles if geo is not None else ()))
            else:
                offered.update(dict.fromkeys(p.profile for p in conf.layout))
    if entry.mig not in offered:
        have = (
            f"the cluster's MIG GPUs offer {', '.join(offered)}"
            if offered
            else "the cluster has no MIG-enabled GPU"
        )
        raise TraceError(
            str(path),
            line,
            "mig",
            f"job {entry.name!r} asks MIG profile {entry.mig!r}, which no GPU of the cluster "
            f"offers; {have}",
        )


_CSV_FIELDS = tuple(JobEntry.model_fields)
_CSV_STRUCTURED = {
    "labels": '"{team: a}"',
    "node_selector": '"{pool: infer}"',
    "tolerations": '"[{key: dedicated, value: infer}]"',
    "affinity_required": '"[[{key: zone, operator: In, values: [z1]}]]"',
    "affinity_preferred": '"[{weight: 10, match: [{key: zone, operator: Exists}]}]"',
}


def _csv_entries(path: Path) -> Iterable[tuple[int | None, JobEntry]]:
    for row in read_table(path, ("name", "cpu", "memory")):
        raw: dict[str, Any] = {k: v.strip() for k, v in row.values.items() if v.strip() != ""}
        unknown = sorted(set(raw) - set(_CSV_FIELDS))
        if unknown:
            raise row.error(unknown[0], f"unknown column; known: {', '.join(_CSV_FIELDS)}")
        if "gpu_models" in raw:
            raw["gpu_models"] = [m for m in raw["gpu_models"].split("|") if m]
        for name, example in _CSV_STRUCTURED.items():
            if name in raw:
                try:
                    raw[name] = yaml.safe_load(raw[name])
                except yaml.YAMLError as exc:
                    problem = getattr(exc, "problem", None) or "not YAML"
                    raise row.error(
                        name,
                        f"got {raw[name]!r}; expected YAML flow text such as {example} ({problem})",
                    ) from None
        raw[LINE_KEY] = row.line
        yield row.line, validate(JobEntry, raw, path)


def _entry_line(data: Any, key: str, i: int) -> int | None:
    try:
        line = data[key][i][LINE_KEY]
    except (KeyError, IndexError, TypeError):
        return None
    return line if isinstance(line, int) else None


def _check_dumpable(job: Job) -> None:
    """Raise ``ValueError`` for a job the format cannot express (it would not round-trip)."""
    shape = job.tasks[0].shape
    if any(t.shape != shape for t in job.tasks):
        raise ValueError(
            f"job {job.id!r}: its pods have different shapes; the native format gives one "
            "shape per job (split it into jobs of identical pods)"
        )
    ids = [job.id] if len(job.tasks) == 1 else [f"{job.id}-{i}" for i in range(len(job.tasks))]
    if [t.id for t in job.tasks] != ids:
        raise ValueError(
            f"job {job.id!r}: pod names {[t.id for t in job.tasks][:3]} differ from the "
            f"native format's {ids[:3]}; they would be renamed on loading"
        )


def dump_workload(jobs: Sequence[Job], path: str | Path) -> None:
    """Write ``jobs`` as a native YAML workload (the inverse of :func:`load_workload`).

    ``ValueError`` for a job the format cannot express: pods of different shapes, or pod
    names other than the format's (``NAME`` for one pod, ``NAME-0``, ``NAME-1``, ... else).
    """
    out = []
    for job in jobs:
        _check_dumpable(job)
        s = job.tasks[0].shape
        entry: dict[str, Any] = {"name": job.id, "kind": job.kind.value, "submit": job.submit_time}
        if job.duration is not None:
            entry["duration"] = job.duration
        if len(job.tasks) > 1:
            entry["replicas"] = len(job.tasks)
            entry["min_available"] = job.min_available
        if job.queue != "default":
            entry["queue"] = job.queue
        if job.priority:
            entry["priority"] = job.priority
        if job.priority_class:
            entry["priority_class"] = job.priority_class
        if not job.preemptible:
            entry["preemptible"] = False
        if not job.restartable:
            entry["restartable"] = False
        if job.runtime_estimate is not None:
            entry["runtime_estimate"] = job.runtime_estimate
        if job.user:
            entry["user"] = job.user
        entry["cpu"] = f"{s.cpu_milli}m"
        entry["memory"] = f"{s.memory_mib}Mi"
        if s.numa_local_cpus:
            entry["numa_local_cpus"] = True
        if s.num_gpu:
            entry["gpus"] = s.num_gpu
            if s.gpu_memory_mib:
                entry["gpu_memory"] = f"{s.gpu_memory_mib}Mi"
                training = job.kind == JobKind.TRAINING
                if s.by_memory and training:
                    entry["share_gpu"] = True
                elif not s.by_memory and s.num_gpu == 1 and not training:
                    entry["gpu_share"] = MILLI_PER_GPU
            elif s.gpu_milli != MILLI_PER_GPU:
                entry["gpu_share"] = s.gpu_milli
            if s.gpu_models:
                entry["gpu_models"] = sorted(s.gpu_models)
        entry.update(dump_mig_request(s))
        if job.labels:
            entry["labels"] = dict(job.labels)
        if job.topology is not None:
            key = "topology_required" if job.topology.required else "topology_preferred"
            entry[key] = job.topology.level
        entry.update(dump_constraints(s.constraints))
        out.append(entry)
    Path(path).write_text(yaml.safe_dump({"jobs": out}, sort_keys=False), encoding="utf-8")


def dump_cluster(nodes: Sequence[Node], path: str | Path) -> None:
    """Write ``nodes`` as a native YAML cluster, one entry per node (the inverse of
    :func:`load_cluster` for nodes whose GPUs are alike, as the format describes them)."""
    out = []
    for n in nodes:
        entry: dict[str, Any] = {
            "name": n.name,
            "cpu": f"{n.cpu_milli}m",
            "memory": f"{n.memory_mib}Mi",
        }
        if n.gpus:
            entry.update(gpus=n.gpu_count, gpu_model=n.gpu_model)
            if n.gpus[0].memory_mib:
                entry["gpu_memory"] = f"{n.gpus[0].memory_mib}Mi"
            if n.gpu_sharing is not SharingMode.TIME_SLICING:
                entry["gpu_sharing"] = n.gpu_sharing.value
            if n.gpu_reserved_mib:
                entry["gpu_reserved_memory"] = f"{n.gpu_reserved_mib}Mi"
            if n.topology is not None:
                entry["topology"] = _dump_topology(n.topology)
            if n.mig:
                entry["mig"] = dump_mig(n)
        if n.labels:
            entry["labels"] = dict(n.labels)
        if n.taints:
            entry["taints"] = [
                {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect.value}
                for t in n.taints
            ]
        out.append(entry)
    Path(path).write_text(yaml.safe_dump({"nodes": out}, sort_keys=False), encoding="utf-8")


def _dump_topology(topo: NodeTopology) -> dict[str, Any]:
    """A topology as the ``topology`` entry (NVLink links as pairs: the same matrix)."""
    g = topo.gpu_count
    return {
        "numa_cpu": [f"{c}m" for c in topo.numa_cpu_milli],
        "gpu_numa": [d.numa_node for d in topo.devices],
        "pcie_root": [d.pcie_root for d in topo.devices],
        "nvlink": [
            [i, j]
            for i in range(g)
            for j in range(i + 1, g)
            if topo.links[i][j] == LinkClass.NVLINK
        ],
    }


def _amounts(res: Resources) -> dict[str, Any]:
    """Resource amounts in the user units of :mod:`gpusched.io.scheduling`."""
    out: dict[str, Any] = {}
    for name, value in res.items():
        if name == CPU:
            out[name] = f"{value}m"
        elif name == MEMORY:
            out[name] = f"{value}Mi"
        elif name == GPU or name.startswith(f"{GPU}/"):
            whole, rest = divmod(value, MILLI_PER_GPU)
            out[name] = whole if not rest else value / MILLI_PER_GPU
        else:
            raise ValueError(f"resource {name!r} has no file form (expected gpu, cpu, memory)")
    return out


def dump_scheduling(config: SchedulingConfig, path: str | Path, comment: str = "") -> None:
    """Write ``config`` as a scheduling config file, the format
    :func:`gpusched.io.scheduling.load_scheduling` reads back identically; ``comment`` goes
    on top as ``#`` lines."""
    classes = [
        {"name": pc.name, "value": pc.value, **({} if pc.preemptible else {"preemptible": False})}
        for pc in config.priority_classes.values()
    ]
    queues: list[dict[str, Any]] = []
    for q in config.queues or ():
        entry: dict[str, Any] = {"name": q.name}
        if q.parent is not None:
            entry["parent"] = q.parent
        entry["guaranteed"] = _amounts(q.guaranteed)
        if q.limit is not None:
            entry["limit"] = _amounts(q.limit)
        if q.lending_limit is not None:
            entry["lending_limit"] = _amounts(q.lending_limit)
        entry["weight"] = q.weight
        queues.append(entry)
    text = yaml.safe_dump(
        {"priority_classes": classes, "queues": queues}, sort_keys=False, default_flow_style=None
    )
    head = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    Path(path).write_text(head + text, encoding="utf-8")
