"""The cycle benchmark: one full scheduling cycle on a large, busy cluster.

Setup (seeded, nothing timed):

1. ``nodes`` 8-GPU nodes (half H100, half A100; 192 cores, 2 TiB), 4 per rack; with
   ``topology=True`` (:func:`topology_cycle_nodes`) HGX boards instead, with their intra-node
   topology and network labels, for the ``gpusched-topo`` policy;
2. the cluster is filled to ``fill`` of its GPUs with running jobs drawn from the built-in
   workload generator (priority classes resolved; with queues, each team kept within its
   limit), each task on a random node where it fits (random first-fit fragments the cluster
   the way a long-running fleet is fragmented);
3. ``pending`` more jobs from the same generator wait, arrived in order.

Two cycles are timed per policy, each ``repeat`` times on the same snapshot (the core never
changes its snapshot, so every repetition sees the same input); the figure is the median wall
time (beside it the median CPU time of the process); binds and pending counts show what the
cycle did:

* **cold start** -- the snapshot above: every pending job is new to the scheduler and about a
  tenth of the GPUs are free, so the cycle binds thousands of jobs and preempts for more (the
  worst case: a scheduler starting on a busy cluster, or a flood of submissions);
* **steady state** -- a later cycle: the simulator applies the cold-start cycle's plan
  (:meth:`~gpusched.sim.engine.Simulation.observe`), ``interval`` (30 s) passes and new jobs
  from the same generator top the queue back up to ``pending``; two more cycles are run and
  applied the same way, then the third is timed. This is the cycle a busy cluster runs over
  and over: a full cluster, a long queue of jobs the scheduler has seen before plus the ones
  that replace what it started, fewer binds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpusched.framework import (
    Bind,
    ClusterState,
    Plan,
    PluginContext,
    Profile,
    ProfileSpec,
    RunningJob,
    Snapshot,
)
from gpusched.io.scheduling import apply_priority_classes
from gpusched.model import GPU, MILLI_PER_GPU, Job, JobId, Node
from gpusched.model.templates import hgx_a100_node, hgx_h100_node
from gpusched.scheduler import build_profile, schedule
from gpusched.sim.engine import Simulation
from gpusched.workloads import WorkloadParams, default_scheduling, generate_workload
from gpusched.workloads.topology_cluster import BLOCK_LABEL, RACK_LABEL

__all__ = [
    "PHASES",
    "CycleResult",
    "CycleSetup",
    "build_cycle_setup",
    "cycle_nodes",
    "steady_snapshot",
    "time_cycle",
    "topology_cycle_nodes",
]

#: Nodes per rack and per block of :func:`topology_cycle_nodes`.
NODES_PER_RACK = 4
NODES_PER_BLOCK = 128


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


def topology_cycle_nodes(count: int) -> list[Node]:
    """``count`` HGX boards with their intra-node topology, alternating ``hgx_h100_node`` (224
    cores, 2 TiB) and ``hgx_a100_node`` (256 cores, 1 TiB), labelled with the ``gpusched``
    network preset: node ``i`` is in rack ``i // 4`` and block ``i // 128``."""
    nodes = []
    for i in range(count):
        build = hgx_h100_node if i % 2 == 0 else hgx_a100_node
        labels = {
            RACK_LABEL: f"r{i // NODES_PER_RACK:04d}",
            BLOCK_LABEL: f"b{i // NODES_PER_BLOCK:03d}",
        }
        nodes.append(build(f"node-{i:05d}", labels=labels))
    return nodes


@dataclass(frozen=True, slots=True)
class CycleSetup:
    """A filled cluster and the jobs waiting on it."""

    nodes: list[Node]
    snapshot: Snapshot
    running_gpu_pct: float
    reserve: tuple[Job, ...] = ()
    """Jobs the generator drew after the pending ones: the steady state's new arrivals."""


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
    topology: bool = False,
) -> CycleSetup:
    """The benchmark's input (see module docstring); ``queues``: the built-in teams' queue
    tree, scaled to this cluster, with quota charged for the running jobs; ``topology``: HGX
    boards in racks and blocks (:func:`topology_cycle_nodes`) instead of plain nodes."""
    cluster = topology_cycle_nodes(nodes) if topology else cycle_nodes(nodes)
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
    reserve = tuple(rest[pending : 2 * pending])
    now = max((j.submit_time for j in waiting), default=0.0)
    snapshot = Snapshot(
        state,
        waiting,
        now=now,
        seed=seed,
        running=running,
        queues=tree if queues else None,
    )
    return CycleSetup(cluster, snapshot, 100.0 * state.used_gpu_milli / capacity, reserve)


def steady_snapshot(
    setup: CycleSetup, profile: Profile, *, interval: float = 30.0, warmup: int = 2
) -> Snapshot:
    """What a busy cluster's cycle sees once past the cold start (module docstring): the
    simulator takes the filled cluster and the queue; then, ``1 + warmup`` times, ``profile``
    schedules a cycle, its plan is applied, ``interval`` seconds pass and new jobs from
    :attr:`CycleSetup.reserve` top the queue back up to its size. The snapshot after the last
    top-up is returned."""
    snap = setup.snapshot
    running = [r.job for r in snap.running.values()]
    sim = Simulation(
        setup.nodes,
        [*running, *snap.pending, *setup.reserve],
        profile,
        seed=snap.seed,
        queues=snap.queues,
    )
    state = snap.state
    fill = Plan(
        binds=[
            Bind(a.task, a.job, state.names[a.node], a.gpus, a.gpu_milli)
            for a in state.allocations.values()
        ]
    )
    sim.observe(0.0, arrived=[j.id for j in running], plan=fill)
    sim.observe(snap.now, arrived=[j.id for j in snap.pending])
    reserve = iter(setup.reserve)
    now = snap.now
    for _ in range(1 + warmup):
        plan = schedule(sim.snapshot(), profile)
        now += interval
        sim.observe(now, plan=plan)
        missing = max(0, len(snap.pending) - len(sim.pending))
        sim.observe(now, arrived=[j.id for _, j in zip(range(missing), reserve, strict=False)])
    return sim.snapshot()


@dataclass(frozen=True, slots=True)
class CycleResult:
    """Timings of one policy on one phase (``cold`` or ``steady``) of one setup."""

    policy: str
    phase: str
    seconds: list[float]
    binds: int
    evictions: int
    pending: int
    pending_after: int
    cpu_seconds: list[float] = field(default_factory=list)
    """The process's CPU time (user + system) of each timed cycle, beside its wall time."""

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cpu_median_s(self) -> float:
        return statistics.median(self.cpu_seconds) if self.cpu_seconds else 0.0


PHASES = ("cold", "steady")


def time_cycle(
    setup: CycleSetup,
    specs: Sequence[ProfileSpec],
    repeat: int = 3,
    phases: Sequence[str] = PHASES,
) -> list[CycleResult]:
    """Time one full cycle per policy and phase (see module docstring)."""
    shapes = [t.shape for j in setup.snapshot.pending for t in j.tasks]
    results = []
    for spec in specs:
        profile = build_profile(spec, PluginContext(workload_hint=shapes, seed=1))
        for phase in phases:
            snap = setup.snapshot if phase == "cold" else steady_snapshot(setup, profile)
            seconds: list[float] = []
            cpu: list[float] = []
            plan = None
            for _ in range(repeat):
                started, cpu_started = time.perf_counter(), time.process_time()
                plan = schedule(snap, profile)
                seconds.append(time.perf_counter() - started)
                cpu.append(time.process_time() - cpu_started)
            assert plan is not None
            bound_jobs = {b.job for b in plan.binds}
            results.append(
                CycleResult(
                    spec.name,
                    phase,
                    seconds,
                    len(plan.binds),
                    len(plan.evictions),
                    len(snap.pending),
                    len(snap.pending) - len(bound_jobs),
                    cpu,
                )
            )
    return results
