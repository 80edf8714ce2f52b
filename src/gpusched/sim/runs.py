"""One-call runs used by the CLI and benchmarks: a workload under a profile, with metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpusched.framework import PluginContext, ProfileSpec
from gpusched.model import Job, Node, QueueTree
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.scheduler import build_profile
from gpusched.sim.engine import Simulation
from gpusched.sim.metrics import RunMetrics, Series, summarise
from gpusched.sim.records import SimOptions

__all__ = ["SimRun", "prepare", "simulate"]


@dataclass(frozen=True, slots=True)
class SimRun:
    """Result of :func:`simulate`."""

    policy: str
    seed: int
    summary: dict[str, Any]
    series: Series
    simulation: Simulation
    seconds: float


def simulate(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    spec: ProfileSpec,
    seed: int,
    *,
    queues: QueueTree | None = None,
    progress: Callable[[int, int], None] | None = None,
    options: SimOptions | None = None,
) -> SimRun:
    """Replay ``jobs`` on ``nodes`` under ``spec`` with the trace's own times (``queues``:
    the queue tree, ``None`` for no quota; ``options``: the simulator's, default ones if
    ``None``)."""
    started = time.perf_counter()
    sim = prepare(nodes, jobs, spec, seed, queues, options=options)
    shapes = [t.shape for j in jobs for t in j.tasks]
    metrics = RunMetrics(sim, TargetWorkload.from_shapes(shapes))
    sim.observers.append(metrics)
    sim.run(progress)
    summary = summarise(sim, metrics)
    seconds = time.perf_counter() - started
    summary["seconds"] = round(seconds, 3)
    return SimRun(spec.name, seed, summary, metrics.series, sim, seconds)


def prepare(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    spec: ProfileSpec,
    seed: int,
    queues: QueueTree | None = None,
    *,
    options: SimOptions | None = None,
) -> Simulation:
    """A simulation ready to run: the profile built with the workload as its hint
    (``options``: the simulator's, default ones if ``None``)."""
    shapes = [t.shape for j in jobs for t in j.tasks]
    profile = build_profile(spec, PluginContext(workload_hint=shapes, seed=seed))
    opts = SimOptions() if options is None else options
    return Simulation(nodes, jobs, profile, seed=seed, options=opts, queues=queues)
