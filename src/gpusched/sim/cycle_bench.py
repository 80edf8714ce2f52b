"""The cycle benchmark: one full scheduling cycle on a large, busy cluster.

Setup (seeded, nothing timed):

1. ``nodes`` 8-GPU nodes (half H100, half A100; 192 cores, 2 TiB), 4 per rack;
2. the cluster is filled to ``fill`` of its GPUs with running jobs drawn from the built-in
   workload generator (priority classes resolved; with queues, each team kept within its
   limit), each task on a random node where it fits (random first-fit fragments the cluster
   the way a long-running fleet is fragmented);
3. ``pending`` more jobs from the same generator wait, arrived in order.

Timed: ``schedule(snapshot, profile)`` for each policy, ``repeat`` times on the same snapshot
(the core never changes its snapshot, so every repetition sees the same input). The figure is
the median wall time of a cycle; binds and pending counts show what the cycle did.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpusched.framework import ClusterState, PluginContext, ProfileSpec, RunningJob, Snapshot
from gpusched.io.scheduling import apply_priority_classes
from gpusched.model import GPU, MILLI_PER_GPU, Job, JobId, Node
from gpusched.scheduler import build_profile, schedule
from gpusched.workloads import WorkloadParams, default_scheduling, generate_workload

__all__ = ["CycleResult", "CycleSetup", "build_cycle_setup", "cycle_nodes", "time_cycle"]


def cycle_nodes(count: int) -> list[Node]:
    """``count`` 8-GPU nodes, alternating H100 and A100, 4 per rack."""
    nodes = []
    for i in range(count):
        model = "H100" if i % 2 == 0 else "A100"
        nodes.append(
            Node.with_gpus(
                f"node-{i:05d}",
                cpu_milli=192_000,
                memory_mib=2048 * 1024,
                gpu_count=8,
                gpu_model=model,
                gpu_memory_mib=80 * 1024,
                labels={"gpusched.io/rack": f"r{i // 4:04d}"},
            )
        )
    return nodes


@dataclass(frozen=True, slots=True)
class CycleSetup:
    """A filled cluster and the jobs waiting on it."""

    nodes: list[Node]
    snapshot: Snapshot
    running_gpu_pct: float


def _fits(
    state: ClusterState, job: Job, rng: np.random.Generator
) -> list[tuple[int, tuple[int, ...]]] | None:
    """Random-node placement of every task of ``job`` in ``state`` (charged as it goes); ``None``
    (and nothing charged) if some task finds no node."""
    placed: list[tuple[int, tuple[int, ...]]] = []
    for task in job.tasks:
        s = task.shape
        ok = (state.cpu_free >= s.cpu_milli) & (state.mem_free >= s.memory_mib)
        if s.num_gpu:
            ok &= (state.gpu_free >= s.gpu_milli).sum(axis=1) >= s.num_gpu
            if s.gpu_models:
                ok &= state.model_mask(s.gpu_models)
        candidates = np.flatnonzero(ok)
        if not len(candidates):
            state.release_many(t.id for t in job.tasks if t.id in state.allocations)
            return None
        node = int(candidates[rng.integers(len(candidates))])
        free = np.flatnonzero(state.gpu_free[node] >= s.gpu_milli)[: s.num_gpu]
        gpus = tuple(int(g) for g in free) if s.num_gpu else ()
        state.allocate(task, node, gpus)
        placed.append((node, gpus))
    return placed


def build_cycle_setup(
    nodes: int,
    pending: int,
    *,
    fill: float = 0.9,
    seed: int = 1,
    queues: bool = True,
) -> CycleSetup:
    """The benchmark's input (see module docstring); ``queues``: the built-in teams' queue
    tree, scaled to this cluster, with quota charged for the running jobs."""
    cluster = cycle_nodes(nodes)
    state = ClusterState.from_nodes(cluster)
    capacity = state.total_gpu_milli
    # Enough jobs to fill the cluster and leave `pending` waiting.
    mean_milli = 2.5 * MILLI_PER_GPU
    draw = int(capacity * fill / mean_milli * 1.6) + 2 * pending
    config = default_scheduling(cluster)
    jobs = apply_priority_classes(
        generate_workload(cluster, WorkloadParams(jobs=draw), seed), config, "generated"
    )
    tree = config.queues
    assert tree is not None
    limits = {q.name: q.limit[GPU] for q in tree if q.limit is not None and GPU in q.limit}
    used: dict[str, int] = {}
    rng = np.random.default_rng(seed)
    running: dict[JobId, RunningJob] = {}
    rest: list[Job] = []
    for job in jobs:
        room = not queues or used.get(job.queue, 0) + job.gpu_milli <= limits.get(
            job.queue, capacity
        )
        if room and state.used_gpu_milli < capacity * fill and _fits(state, job, rng) is not None:
            running[job.id] = RunningJob(job, start=0.0)
            used[job.queue] = used.get(job.queue, 0) + job.gpu_milli
        else:
            rest.append(job)
    waiting = tuple(rest[:pending])
    now = max((j.submit_time for j in waiting), default=0.0)
    snapshot = Snapshot(
        state,
        waiting,
        now=now,
        seed=seed,
        running=running,
        queues=tree if queues else None,
    )
    return CycleSetup(cluster, snapshot, 100.0 * state.used_gpu_milli / capacity)


@dataclass(frozen=True, slots=True)
class CycleResult:
    """Timings of one policy on one setup."""

    policy: str
    seconds: list[float]
    binds: int
    evictions: int
    pending_after: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)


def time_cycle(
    setup: CycleSetup, specs: Sequence[ProfileSpec], repeat: int = 3
) -> list[CycleResult]:
    """Time one full cycle per policy (see module docstring)."""
    shapes = [t.shape for j in setup.snapshot.pending for t in j.tasks]
    results = []
    for spec in specs:
        profile = build_profile(spec, PluginContext(workload_hint=shapes, seed=1))
        seconds = []
        plan = None
        for _ in range(repeat):
            started = time.perf_counter()
            plan = schedule(setup.snapshot, profile)
            seconds.append(time.perf_counter() - started)
        assert plan is not None
        bound_jobs = {b.job for b in plan.binds}
        results.append(
            CycleResult(
                spec.name,
                seconds,
                len(plan.binds),
                len(plan.evictions),
                len(setup.snapshot.pending) - len(bound_jobs),
            )
        )
    return results
