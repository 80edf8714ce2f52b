"""Tasks (pods) and jobs (groups of tasks scheduled all or nothing).

A *task* is one pod: it lands on exactly one node. A *job* owns one or more tasks and says how
many of them must be placed together (``min_available``, the gang size). A plain pod is a job
of one task. Queues, priorities and runtimes are carried on the job so that the batch actions
(gangs, quotas, backfill) can use them without changing this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from operator import attrgetter

from gpusched.errors import ConfigError
from gpusched.model.constraints import NO_CONSTRAINTS, Constraints
from gpusched.model.ids import GpuModel, JobId, QueueName, TaskId
from gpusched.model.mig import mig_milli as _instance_milli
from gpusched.model.network import TopologyRequest
from gpusched.model.resources import MILLI_PER_GPU

__all__ = [
    "DEFAULT_QUEUE",
    "REFERENCE_GPU_MEMORY_MIB",
    "Job",
    "JobKind",
    "Task",
    "TaskShape",
    "nominal_share",
]

DEFAULT_QUEUE = QueueName("default")

#: GPU memory a share by memory is expressed against for quota and fair share (an 80 GB GPU:
#: H100 / A100 80 GB): a 10 GiB request is charged 125 milli-GPU wherever it runs.
REFERENCE_GPU_MEMORY_MIB = 80 * 1024


def nominal_share(gpu_memory_mib: int) -> int:
    """``min(1000, ceil(1000 * gpu_memory_mib / REFERENCE_GPU_MEMORY_MIB))``, at least 1."""
    share = -(-MILLI_PER_GPU * gpu_memory_mib // REFERENCE_GPU_MEMORY_MIB)
    return max(1, min(MILLI_PER_GPU, share))


class JobKind(StrEnum):
    """What a job is for; drives defaults (training gets whole GPUs) and reporting."""

    TRAINING = "training"
    INFERENCE = "inference"
    NOTEBOOK = "notebook"
    BATCH = "batch"


@dataclass(frozen=True, slots=True)
class TaskShape:
    """The resource request of a task, without identity: what placement depends on.

    Attributes:
        cpu_milli: CPU request in millicores.
        memory_mib: memory request in MiB.
        num_gpu: number of GPUs (0 for a CPU-only task).
        gpu_milli: share of *each* GPU in thousandths; below 1000 only when ``num_gpu == 1``.
        gpu_models: GPU models the task accepts; empty means any model.
        constraints: node selector, tolerations and affinity (see :mod:`.constraints`).
        numa_local_cpus: the task's CPUs must come from the NUMA node(s) of its GPUs (whole
            GPUs only), split as :meth:`~gpusched.model.topology.NodeTopology.numa_split`
            says; only nodes with a topology can host it.
        gpu_memory_mib: GPU memory the task needs on each GPU (0: not said). With a
            fractional ``gpu_milli`` the request is *by memory*: on node ``n`` the task holds
            ``ceil(1000 * gpu_memory_mib / usable_n)`` milli, ``usable_n`` being the GPU's
            memory minus the driver's reserve (``gpu_milli`` is then the nominal share on
            :data:`REFERENCE_GPU_MEMORY_MIB`, what quota and fair share charge). With whole
            GPUs it is a minimum: only GPUs with that much usable memory qualify.
        mig_profile: a MIG GPU-instance profile (``"1g.10gb"``, see :mod:`.mig`) the task
            needs ``mig_count`` instances of, on MIG-enabled GPUs of one node; ``num_gpu`` is
            then 0 (a MIG task holds no plain GPU share). Charged ``mig_count *
            mig_milli(profile)`` milli-GPU (GPU-equivalents: compute slices / 7).
        mig_count: instances of ``mig_profile`` (ignored without one).
    """

    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[GpuModel] = frozenset()
    constraints: Constraints = NO_CONSTRAINTS
    numa_local_cpus: bool = False
    gpu_memory_mib: int = 0
    mig_profile: str = ""
    mig_count: int = 1
    # The hash of the fields above, worked out on first use: a shape is part of memo keys
    # hashed tens of thousands of times a cycle. Not compared, shown or pickled (a string's
    # hash differs from process to process).
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """The hash the dataclass would give: of the tuple of the compared fields."""
        h = self._hash
        if h is None:
            h = hash(_shape_fields(self))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> tuple[object, ...]:
        return _shape_fields(self)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(_SHAPE_FIELDS, state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_hash", None)

    def __post_init__(self) -> None:
        if self.mig_profile:
            _instance_milli(self.mig_profile)  # ConfigError for an unknown profile
            if self.num_gpu or self.mig_count < 1:
                raise ConfigError(
                    f"a MIG request ({self.mig_count} x {self.mig_profile}) needs num_gpu 0 "
                    f"and mig_count >= 1; got num_gpu {self.num_gpu}"
                )

    @property
    def mig_milli(self) -> int:
        """GPU-equivalent of the task's MIG instances: ``mig_count * mig_milli(profile)``."""
        return self.mig_count * _instance_milli(self.mig_profile) if self.mig_profile else 0

    @property
    def by_memory(self) -> bool:
        """True for a fractional request sized by GPU memory (converted per node)."""
        return self.gpu_memory_mib > 0 and self.is_sharing

    @property
    def is_sharing(self) -> bool:
        """True for a fractional request (one GPU, less than all of it)."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI_PER_GPU

    @property
    def total_gpu_milli(self) -> int:
        """GPU request in milli-GPU summed over the task's GPUs (MIG instances in
        GPU-equivalents, :attr:`mig_milli`)."""
        if self.mig_profile:
            return self.mig_milli
        return self.num_gpu * self.gpu_milli


#: The compared fields of :class:`TaskShape`, in order (what its hash and pickled state hold).
_SHAPE_FIELDS = tuple(f.name for f in fields(TaskShape) if f.compare)
_shape_fields = attrgetter(*_SHAPE_FIELDS)


@dataclass(frozen=True, slots=True)
class Task:
    """One pod of a job."""

    id: TaskId
    job: JobId
    shape: TaskShape


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of admission: its tasks start together or not at all.

    Attributes:
        id: unique job id.
        tasks: the job's pods.
        min_available: how many tasks must be placed at once (defaults to all of them).
        queue: the queue the job is charged to.
        priority: larger runs first and may preempt smaller (used by the batch actions).
        submit_time: seconds from the start of the workload (its first submission; aging
            counts from it).
        duration: seconds the job runs once started; ``None`` runs until the end. Only a
            simulator knows this; the scheduler sees ``runtime_estimate``.
        kind: what the job is for.
        priority_class: name of the job's priority class (informational once resolved).
        preemptible: whether the job may be evicted to make room for others.
        preempts: whether the job may evict others (reclaim, preempt); Kubernetes'
            ``preemptionPolicy: Never`` is ``False``.
        restartable: whether the job may be stopped and started again elsewhere at once to
            make room (a defragmentation move, :mod:`gpusched.actions.defrag`); it then
            restarts from the beginning. Moves also need ``preemptible``.
        runtime_estimate: the user's estimate of the run time in seconds, if given.
        user: who submitted the job (runtime estimates are learned per user and kind).
        topology: the network domain the gang wants to sit in (see
            :mod:`gpusched.model.network`); ``None``: anywhere.
        requeued_at: when the job rejoined the queue after its last eviction; ``None`` if it
            was never evicted. See :attr:`queue_time`.

    Tasks beyond ``min_available`` are *elastic*: placed when they fit, and the first to be
    evicted under pressure.
    """

    id: JobId
    tasks: tuple[Task, ...]
    min_available: int = 0
    queue: QueueName = DEFAULT_QUEUE
    priority: int = 0
    submit_time: float = 0.0
    duration: float | None = None
    kind: JobKind = JobKind.BATCH
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    priority_class: str = ""
    preemptible: bool = True
    preempts: bool = True
    restartable: bool = True
    runtime_estimate: float | None = None
    user: str = ""
    topology: TopologyRequest | None = None
    requeued_at: float | None = None

    gpu_milli: int = field(init=False, default=0, compare=False)
    """Total GPU request of the job's gang (``min_available`` tasks) in milli-GPU."""
    cpu_milli: int = field(init=False, default=0, compare=False)
    """Total CPU request of the job's gang in millicores."""

    def __post_init__(self) -> None:
        if self.min_available <= 0:
            object.__setattr__(self, "min_available", len(self.tasks))
        gang = self.tasks[: self.min_available]
        object.__setattr__(self, "gpu_milli", sum(t.shape.total_gpu_milli for t in gang))
        object.__setattr__(self, "cpu_milli", sum(t.shape.cpu_milli for t in gang))

    @property
    def queue_time(self) -> float:
        """When the job joined the queue it waits in: its last requeue, else its submission.

        The queue order (:mod:`gpusched.plugins.queue_sort`) and the guards' "started after
        the job was queued" count from it, so an evicted job queues behind the jobs that were
        waiting when it was evicted; aging (``starve_after_s``) counts from ``submit_time``.
        """
        return self.submit_time if self.requeued_at is None else self.requeued_at

    @classmethod
    def single(
        cls,
        task_id: str,
        shape: TaskShape,
        *,
        submit_time: float = 0.0,
        duration: float | None = None,
        kind: JobKind = JobKind.BATCH,
        queue: str = "default",
        priority: int = 0,
    ) -> Job:
        """A job of one task whose id is also the task id (a plain pod)."""
        jid = JobId(task_id)
        return cls(
            id=jid,
            tasks=(Task(TaskId(task_id), jid, shape),),
            queue=QueueName(queue),
            priority=priority,
            submit_time=submit_time,
            duration=duration,
            kind=kind,
        )
