"""Fluent builders for the unit and property tests: nodes, tasks, jobs, states and one cycle.

Every builder starts from a small, explicit default and is changed by named setters, so a test
reads like the situation it sets up::

    node = make_node("n1").gpus(8, model="G2").cpu(96).mem_gib(512).build()
    job = make_job("train").gpus(2).cpu(8).replicas(4).build()          # a gang of 4
    state = make_state(node, make_node("n2").gpus(2))
    occupy(state, "n1", gpus=(0,), gpu_milli=500)                       # half of GPU 0 in use
    plan = run_cycle(state, [job], policy="fgd")

Units follow the model: CPU setters take cores (``cpu(4)`` = 4000 millicores), memory setters
take GiB or MiB, GPU shares are in milli-GPU (1000 = a whole GPU).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence
from typing import Self

import numpy as np

from gpusched.framework import (
    Allocation,
    BoolArray,
    ClusterState,
    CycleContext,
    FloatArray,
    Plan,
    PluginContext,
    Profile,
    Snapshot,
)
from gpusched.model import (
    Gpu,
    GpuModel,
    Job,
    JobId,
    JobKind,
    Node,
    NodeName,
    QueueName,
    Task,
    TaskId,
    TaskShape,
)
from gpusched.plugins.fgd import Fgd
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.scheduler import POLICIES, build_profile, policy_spec, schedule

__all__ = [
    "JobBuilder",
    "NodeBuilder",
    "TaskBuilder",
    "cycle_context",
    "fgd_cache_mismatches",
    "gang_policies",
    "make_job",
    "make_node",
    "make_state",
    "make_task",
    "occupy",
    "policy_profile",
    "run_cycle",
    "shape",
    "state_contents",
]


def _milli(cores: float) -> int:
    return round(cores * 1000)


class _CpuMemSetters:
    """The CPU and memory setters nodes and task requests share; each sets its own defaults."""

    _cpu_milli: int
    _memory_mib: int

    def cpu(self, cores: float) -> Self:
        self._cpu_milli = _milli(cores)
        return self

    def cpu_milli(self, milli: int) -> Self:
        self._cpu_milli = milli
        return self

    def mem_gib(self, gib: float) -> Self:
        self._memory_mib = round(gib * 1024)
        return self

    def mem_mib(self, mib: int) -> Self:
        self._memory_mib = mib
        return self


class NodeBuilder(_CpuMemSetters):
    """A node: 32 CPUs, 256 GiB and no GPUs unless told otherwise."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cpu_milli = 32_000
        self._memory_mib = 256 * 1024
        self._gpu_count = 0
        self._gpu_model = "G2"
        self._gpu_memory_mib = 0
        self._labels: dict[str, str] = {}

    def gpus(self, count: int, *, model: str = "G2", memory_mib: int = 0) -> Self:
        self._gpu_count = count
        self._gpu_model = model
        self._gpu_memory_mib = memory_mib
        return self

    def label(self, key: str, value: str) -> Self:
        self._labels[key] = value
        return self

    def build(self) -> Node:
        gpus = tuple(
            Gpu(i, GpuModel(self._gpu_model), self._gpu_memory_mib) for i in range(self._gpu_count)
        )
        return Node(
            NodeName(self._name), self._cpu_milli, self._memory_mib, gpus, dict(self._labels)
        )


class _ShapeBuilder(_CpuMemSetters):
    """Shared setters of a task's resource request: 1 CPU, 1 GiB, no GPU by default."""

    def __init__(self) -> None:
        self._cpu_milli = 1000
        self._memory_mib = 1024
        self._num_gpu = 0
        self._gpu_milli = 0
        self._models: frozenset[GpuModel] = frozenset()

    def gpus(self, count: int, *, milli: int = 1000) -> Self:
        """``count`` GPUs of ``milli`` each (``gpus(1, milli=500)`` shares half a GPU)."""
        self._num_gpu = count
        self._gpu_milli = milli if count else 0
        return self

    def share(self, milli: int) -> Self:
        """One GPU, ``milli`` of it."""
        return self.gpus(1, milli=milli)

    def models(self, *names: str) -> Self:
        self._models = frozenset(GpuModel(n) for n in names)
        return self

    def shape(self) -> TaskShape:
        return TaskShape(
            cpu_milli=self._cpu_milli,
            memory_mib=self._memory_mib,
            num_gpu=self._num_gpu,
            gpu_milli=self._gpu_milli,
            gpu_models=self._models,
        )


class TaskBuilder(_ShapeBuilder):
    """One task; its job id is the task id unless :meth:`of_job` says otherwise."""

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self._id = task_id
        self._job = task_id

    def of_job(self, job_id: str) -> Self:
        self._job = job_id
        return self

    def build(self) -> Task:
        return Task(TaskId(self._id), JobId(self._job), self.shape())


class JobBuilder(_ShapeBuilder):
    """A job of ``replicas`` identical tasks (one by default), placed all or nothing.

    Tasks are named ``<job>`` for a single task and ``<job>-0``, ``<job>-1``, ... otherwise.
    """

    def __init__(self, job_id: str) -> None:
        super().__init__()
        self._id = job_id
        self._replicas = 1
        self._min_available = 0
        self._submit = 0.0
        self._duration: float | None = None
        self._priority = 0
        self._queue = "default"
        self._kind = JobKind.BATCH

    def replicas(self, count: int) -> Self:
        self._replicas = count
        return self

    def min_available(self, count: int) -> Self:
        self._min_available = count
        return self

    def at(self, submit_time: float) -> Self:
        self._submit = submit_time
        return self

    def runs_for(self, seconds: float | None) -> Self:
        self._duration = seconds
        return self

    def priority(self, value: int) -> Self:
        self._priority = value
        return self

    def queue(self, name: str) -> Self:
        self._queue = name
        return self

    def kind(self, kind: JobKind) -> Self:
        self._kind = kind
        return self

    def task_ids(self) -> list[TaskId]:
        if self._replicas == 1:
            return [TaskId(self._id)]
        return [TaskId(f"{self._id}-{i}") for i in range(self._replicas)]

    def build(self) -> Job:
        jid = JobId(self._id)
        shape = self.shape()
        return Job(
            id=jid,
            tasks=tuple(Task(t, jid, shape) for t in self.task_ids()),
            min_available=self._min_available,
            queue=QueueName(self._queue),
            priority=self._priority,
            submit_time=self._submit,
            duration=self._duration,
            kind=self._kind,
        )


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_task(task_id: str = "t") -> TaskBuilder:
    return TaskBuilder(task_id)


def make_job(job_id: str) -> JobBuilder:
    return JobBuilder(job_id)


def shape() -> TaskBuilder:
    """A request without identity: ``shape().gpus(2).cpu(8).shape()``."""
    return TaskBuilder("shape")


def make_state(*nodes: Node | NodeBuilder, models: Iterable[str] = ()) -> ClusterState:
    """A cluster state of ``nodes`` in the given order, nothing allocated."""
    built = [n.build() if isinstance(n, NodeBuilder) else n for n in nodes]
    return ClusterState.from_nodes(built, models=[GpuModel(m) for m in models])


def state_contents(state: ClusterState, *, versions: bool = True) -> tuple[object, ...]:
    """Everything a state holds, comparable with ``==``; ``versions=False`` leaves out the
    per-node version stamps (which a rollback advances although it restores the rest)."""
    return (
        state.cpu_free.tolist(),
        state.mem_free.tolist(),
        state.gpu_free.tolist(),
        state.gpu_idle.tolist(),
        state.shape_count.tolist(),
        *([state.version.tolist()] if versions else []),
        sorted(state.allocations.items()),
    )


_filler_ids = itertools.count()


def occupy(
    state: ClusterState,
    node: str,
    *,
    gpus: tuple[int, ...] = (),
    gpu_milli: int = 1000,
    cpu_milli: int = 0,
    memory_mib: int = 0,
) -> Allocation:
    """Charge a filler task to ``node`` (by name): ``gpu_milli`` on each GPU in ``gpus``."""
    tid = f"used-{node}-{next(_filler_ids)}"
    task = Task(
        TaskId(tid),
        JobId(tid),
        TaskShape(
            cpu_milli=cpu_milli,
            memory_mib=memory_mib,
            num_gpu=len(gpus),
            gpu_milli=gpu_milli if gpus else 0,
        ),
    )
    return state.allocate(task, state.index[NodeName(node)], gpus)


#: Actions that place a job's pods one by one, as the stock kube-scheduler does; a policy using
#: one of them does not promise that gangs are placed all or nothing.
POD_BY_POD_ACTIONS = frozenset({"allocate-pods"})


def gang_policies() -> list[str]:
    """Built-in policies that place every job's ``min_available`` tasks all or nothing."""
    return sorted(
        name for name, spec in POLICIES.items() if not POD_BY_POD_ACTIONS & set(spec.actions)
    )


def cycle_context(seed: int = 0, now: float = 0.0) -> CycleContext:
    return CycleContext(now=now, rng=random.Random(seed))


def policy_profile(policy: str, hint: Sequence[TaskShape] = ()) -> Profile:
    """A built-in policy built the way drivers build it, with ``hint`` as the workload."""
    return build_profile(policy_spec(policy), PluginContext(workload_hint=tuple(hint)))


def run_cycle(
    state: ClusterState,
    jobs: Sequence[Job | JobBuilder],
    *,
    policy: str = "fgd",
    hint: Sequence[TaskShape] | None = None,
    profile: Profile | None = None,
    now: float = 0.0,
    seed: int = 0,
) -> Plan:
    """One ``schedule()`` cycle of ``jobs`` on ``state`` under a built-in policy.

    The workload hint defaults to the shapes of ``jobs`` (what the simulator passes).
    """
    built = tuple(j.build() if isinstance(j, JobBuilder) else j for j in jobs)
    if profile is None:
        shapes = [t.shape for j in built for t in j.tasks] if hint is None else hint
        profile = policy_profile(policy, shapes)
    return schedule(Snapshot(state, built, now=now, seed=seed), profile)


def fgd_cache_mismatches(
    scores: FloatArray,
    target: TargetWorkload,
    task: Task,
    state: ClusterState,
    feasible: BoolArray,
) -> list[str]:
    """Feasible nodes where ``scores`` (from a long-lived FGD plugin) differ from a fresh one's."""
    reference = Fgd(target)
    fresh = reference.score(cycle_context(), task, state, feasible)
    out = []
    for node in np.flatnonzero(feasible):
        got, want = float(scores[node]), float(fresh[node])
        if got != want:
            out.append(f"{state.names[node]}: cached {got}, fresh {want}")
    return out
