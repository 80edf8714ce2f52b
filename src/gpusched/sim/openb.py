"""The openb experiment protocol of the FGD paper, run through the ordinary simulator.

For one seed:

1. sort the pods by name and shuffle them with ``random.Random(seed)``;
2. resize the list to ``tune`` (130%) of the cluster's GPU capacity: append pods drawn uniformly
   with replacement until the next one would pass ``tune * capacity``; if the list already asks
   for more, drop pods at random until it does not;
3. shuffle the node order with the same random source (ties in "first node" policies follow it);
4. schedule every pod once, in order (``sequential_arrivals``, ``drop_unplaced``,
   ``ignore_durations``), recording after each pod the arrived and the allocated milli-GPU.

KPI: the allocation rate ``placed / capacity`` when the arrived load first reaches ``p`` percent
of capacity, for ``p = 0..130`` (the paper quotes ``p = 100``), and the cluster fragmentation
(FGD's measure, :mod:`gpusched.plugins.fragmentation`) as a share of capacity at the same points.

**Through sharing by memory** (:func:`as_memory_requests`): the trace gives no GPU memory, so
every GPU gets ``M = 16,000`` MiB (no driver reserve) and every sharing pod asks ``gpu_memory =
gpu_milli * M / 1000`` MiB, keeping its ``gpu_milli`` as the nominal share. On every node
``ceil(1000 * gpu_memory / M) = gpu_milli`` exactly, so the experiment is the same while each
sharing pod goes through :mod:`gpusched.framework.sharing` (variants) and GPU memory is
accounted per GPU.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import PluginContext, ProfileSpec
from gpusched.model import Job, Node, TaskShape
from gpusched.plugins.fragmentation import TargetWorkload, cluster_fragmentation
from gpusched.scheduler import build_profile
from gpusched.sim.engine import Simulation
from gpusched.sim.records import SimOptions

__all__ = ["OPENB_POINTS", "OpenbRun", "as_memory_requests", "openb_order", "run_openb"]

#: Arrived-load percentages at which curves are recorded.
OPENB_POINTS = 131
_FRAG_EVERY = 5
#: GPU memory given to every openb GPU by :func:`as_memory_requests` (MiB; 16 per milli-GPU).
OPENB_GPU_MEMORY_MIB = 16_000


@dataclass(frozen=True, slots=True)
class OpenbRun:
    """Result of one policy on one seed."""

    policy: str
    seed: int
    alloc_pct: NDArray[np.float64]
    frag_pct: NDArray[np.float64]
    pods: int
    failed: int
    failure_reasons: dict[str, int]
    seconds: float

    def alloc_at(self, pct: int) -> float:
        return float(self.alloc_pct[pct])

    def frag_at(self, pct: int) -> float:
        return float(self.frag_pct[pct])


def openb_order(
    nodes: Sequence[Node], jobs: Sequence[Job], seed: int, tune: float = 1.3
) -> tuple[list[Node], list[Job]]:
    """Steps 1-3 of the protocol: the node order and the resized, shuffled job list."""
    rng = random.Random(seed)
    capacity = sum(n.gpu_count for n in nodes) * 1000
    ordered = sorted(jobs, key=lambda j: j.id)
    rng.shuffle(ordered)
    limit = tune * capacity
    total = sum(j.gpu_milli for j in ordered)
    if total > limit:
        while total > limit and ordered:
            victim = ordered.pop(rng.randrange(len(ordered)))
            total -= victim.gpu_milli
    elif any(j.gpu_milli > 0 for j in ordered):
        # (Without a GPU pod the list could never reach the target: leave it as it is.)
        originals = list(ordered)
        extra = 0
        while True:
            pick = originals[rng.randrange(len(originals))]
            if total + pick.gpu_milli > limit:
                break
            total += pick.gpu_milli
            extra += 1
            ordered.append(_renamed(pick, f"{pick.id}-r{extra}"))
    node_order = list(nodes)
    rng.shuffle(node_order)
    return node_order, ordered


def _renamed(job: Job, new_id: str) -> Job:
    return Job.single(new_id, job.tasks[0].shape, kind=job.kind)


class _Curves:
    """Observer that samples allocation and fragmentation as arrived load crosses each percent."""

    def __init__(self, capacity: int, target: TargetWorkload) -> None:
        self.capacity = capacity
        self.target = target
        self.alloc = np.full(OPENB_POINTS, np.nan)
        self.frag = np.full(OPENB_POINTS, np.nan)
        self.next_pct = 0

    def __call__(self, sim: Simulation) -> None:
        cap = self.capacity
        while self.next_pct < OPENB_POINTS and sim.arrived_milli * 100 >= self.next_pct * cap:
            p = self.next_pct
            self.alloc[p] = 100.0 * sim.placed_milli / cap
            if p % _FRAG_EVERY == 0 or p in (90, 100, 130):
                self.frag[p] = 100.0 * cluster_fragmentation(sim.state, self.target) / cap
            self.next_pct += 1

    def finish(self, sim: Simulation) -> None:
        """Fill points the arrived load never reached with the final values."""
        self.next_pct = OPENB_POINTS
        last = 100.0 * sim.placed_milli / self.capacity
        self.alloc = np.where(np.isnan(self.alloc), last, self.alloc)


def run_openb(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    spec: ProfileSpec,
    seed: int,
    *,
    tune: float = 1.3,
    hint: Sequence[TaskShape] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> OpenbRun:
    """Run the protocol for one policy and seed (see module docstring).

    ``hint`` is the original, untuned pod list's shapes (FGD's target workload); by default the
    shapes of ``jobs``.
    """
    started = time.perf_counter()
    shapes = list(hint) if hint is not None else [t.shape for j in jobs for t in j.tasks]
    node_order, ordered = openb_order(nodes, jobs, seed, tune)
    profile = build_profile(spec, PluginContext(workload_hint=shapes, seed=seed))
    capacity = sum(n.gpu_count for n in nodes) * 1000
    curves = _Curves(capacity, TargetWorkload.from_shapes(shapes))
    sim = Simulation(
        node_order,
        ordered,
        profile,
        seed=seed,
        options=SimOptions(drop_unplaced=True, ignore_durations=True, sequential_arrivals=True),
        observers=[curves],
    )
    sim.run(progress)
    curves.finish(sim)
    reasons: Counter[str] = Counter()
    failed = 0
    for rec in sim.records.values():
        if rec.start is None:
            failed += 1
            if rec.status is not None:
                reasons[rec.status.code.value] += 1
    return OpenbRun(
        policy=spec.name,
        seed=seed,
        alloc_pct=curves.alloc,
        frag_pct=curves.frag,
        pods=len(ordered),
        failed=failed,
        failure_reasons=dict(reasons),
        seconds=time.perf_counter() - started,
    )


def with_policy_name(run: OpenbRun, name: str) -> OpenbRun:
    return replace(run, policy=name)


def as_memory_requests(
    nodes: Sequence[Node], jobs: Sequence[Job], gpu_memory_mib: int = OPENB_GPU_MEMORY_MIB
) -> tuple[list[Node], list[Job]]:
    """The trace with GPU memory, sharing pods asking by memory (module docstring).

    ``gpu_memory_mib`` must be a multiple of 1000 MiB so that every share converts exactly.
    """
    if gpu_memory_mib <= 0 or gpu_memory_mib % 1000:
        raise ValueError(f"gpu_memory_mib: got {gpu_memory_mib}; expected a multiple of 1000")
    per_milli = gpu_memory_mib // 1000
    out_nodes = [
        replace(n, gpus=tuple(replace(g, memory_mib=gpu_memory_mib) for g in n.gpus)) for n in nodes
    ]
    out_jobs = []
    for job in jobs:
        tasks = tuple(
            replace(t, shape=replace(t.shape, gpu_memory_mib=t.shape.gpu_milli * per_milli))
            if t.shape.is_sharing
            else t
            for t in job.tasks
        )
        out_jobs.append(replace(job, tasks=tasks))
    return out_nodes, out_jobs
