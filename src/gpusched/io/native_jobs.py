"""gpusched's native workload format: the schema of one job entry and how it becomes a
:class:`~gpusched.model.Job`.

The entry is shared by the YAML and CSV workload files; reading the files and checking jobs
against the cluster is :mod:`gpusched.io.native_workload`, writing them
:mod:`gpusched.io.native_dump`. Its fields carry the descriptions that
``scripts/gen_docs.py`` turns into ``docs/formats-reference.md``.

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


Every pod of a job has the same shape and constraints. An inconsistent entry is a validation
error the loader reports with the file, line and field (:class:`~gpusched.errors.TraceError`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusched.io.native_constraints import ExpressionEntry, PreferredEntry, TolerationEntry
from gpusched.io.native_mig import known_profiles
from gpusched.io.quantity import Quantity, cpu_to_milli, memory_to_mib
from gpusched.model import (
    MILLI_PER_GPU,
    NO_CONSTRAINTS,
    Constraints,
    Expression,
    GpuModel,
    Job,
    JobId,
    JobKind,
    QueueName,
    Task,
    TaskId,
    TaskShape,
    Toleration,
    TopologyRequest,
)
from gpusched.model.task import nominal_share

__all__ = ["JobEntry", "WorkloadFile"]


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
