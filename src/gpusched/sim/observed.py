"""Metrics of a run that happened elsewhere (a replay on a live cluster), and how it differs
from the simulated run of the same workload.

A replay (``gpusched replay``, :mod:`gpusched.live.replay`) reports what the cluster did as
:class:`Observed` events in trace seconds: arrivals, binds (task, node, GPU indices),
task completions and evictions. :func:`summarise_observed` feeds them, in time order, into a
:class:`~gpusched.sim.engine.Simulation` through :meth:`~Simulation.observe` instead of
``schedule()``, so the summary comes from the same bookkeeping and has the same keys as
``gpusched simulate``'s (:func:`gpusched.sim.metrics.summarise`):

* a job starts when ``min_available`` of its tasks are bound and ends when the last of its
  bound tasks has completed;
* at equal times completions come first, then evictions, arrivals and binds (the
  simulator's order);
* binds of one job that follow each other within ``settle_s`` count at the time of the last
  of them: a scheduler binds a gang's members in parallel and the watch shows them some
  milliseconds apart, which is not a gang left partly placed;
* a bind whose GPU indices are unknown (another scheduler wrote none) or taken is charged on
  the first GPUs with room; one that does not fit at all is counted in ``overcommitted`` and
  left out;
* an eviction (a pod deleted before it finished) of a running job evicts the job, as in the
  simulator (it returns to the queue; its other pods, if a scheduler left them running, are
  no longer counted); a deleted or completed pod of a job that is not running (a stock
  scheduler's partly placed gang) just leaves its node;
* a job that never started takes its status from what the scheduler wrote on its pods.

:func:`compare_runs` lines the two runs up job by job: start-time differences (observed minus
simulated, over jobs that started in both) and, per task, whether it landed on the same node.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from gpusched.framework import (
    Bind,
    Cause,
    Code,
    Eviction,
    Plan,
    PluginContext,
    ProfileSpec,
    Status,
)
from gpusched.model import Job, JobId, Node, NodeName, Task, TaskId
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.scheduler import build_profile
from gpusched.sim.engine import Simulation
from gpusched.sim.metrics import RunMetrics, summarise
from gpusched.sim.records import SimOptions

__all__ = [
    "Kind",
    "Observed",
    "ObservedRun",
    "compare_runs",
    "simulate_recorded",
    "summarise_observed",
]


class Kind(IntEnum):
    """What happened; the value orders events at equal times."""

    COMPLETE = 0
    EVICT = 1
    ARRIVE = 2
    BIND = 3


@dataclass(frozen=True, slots=True)
class Observed:
    """One event seen on the cluster, at ``time`` trace seconds.

    ``job`` always; ``task``, ``node``, ``gpus`` and ``gpu_milli`` for binds (``gpus`` ``None``:
    not recorded; ``gpu_milli`` 0: the task's share; 1000 for a fractional task that holds a
    whole GPU, as under kube-scheduler); ``task`` for completions.
    """

    time: float
    kind: Kind
    job: JobId
    task: TaskId | None = None
    node: str = ""
    gpus: tuple[int, ...] | None = None
    gpu_milli: int = 0


@dataclass(slots=True)
class ObservedRun:
    """The simulation the observed events were fed into, its summary, and per-task nodes."""

    simulation: Simulation
    summary: dict[str, Any]
    nodes: dict[TaskId, str] = field(default_factory=dict)
    overcommitted: list[TaskId] = field(default_factory=list)


def _gpus_for(
    event: Observed, free: np.ndarray, num_gpu: int, milli: int
) -> tuple[int, ...] | None:
    """The recorded GPUs when they have ``milli`` free, else the first GPUs with room, else
    ``None`` (``free``: milli-GPU free per GPU of the node)."""
    count = len(free)
    gpus = event.gpus
    if (
        gpus is not None
        and len(gpus) == num_gpu
        and all(0 <= g < count and free[g] >= milli for g in gpus)
    ):
        return gpus
    picks = [g for g in range(count) if free[g] >= milli][:num_gpu]
    return tuple(picks) if len(picks) == num_gpu else None


@dataclass(slots=True)
class _Feeder:
    """Turns the events of one instant into completions, arrivals and a plan."""

    sim: Simulation
    out: ObservedRun
    tasks: dict[TaskId, Task]
    bound: dict[JobId, set[TaskId]] = field(default_factory=dict)
    _taken: dict[int, tuple[np.ndarray, list[int]]] = field(default_factory=dict)

    def step(self, now: float, batch: list[Observed]) -> None:
        """Completions, evictions and arrivals first; then the binds, checked against the
        state they left (a bind often takes what a completion at the same instant freed)."""
        completed: list[JobId] = []
        arrived: list[JobId] = []
        released: list[TaskId] = []
        evictions = Plan()
        for event in batch:
            if event.kind is Kind.ARRIVE:
                arrived.append(event.job)
            elif event.kind is Kind.EVICT and event.job in self.sim.running:
                evictions.evictions.append(Eviction(event.job, JobId(""), "observed eviction"))
                self.bound.pop(event.job, None)
            elif event.kind is Kind.EVICT and event.task is not None:
                released.append(event.task)  # a pod of a job not (or no longer) running
                self.bound.get(event.job, set()).discard(event.task)
            elif event.kind is Kind.COMPLETE and event.task is not None:
                members = self.bound.get(event.job)
                if event.job not in self.sim.running:
                    released.append(event.task)  # a partly placed gang's pod ran and ended
                    if members is not None:
                        members.discard(event.task)
                elif members is not None and event.task in members:
                    members.discard(event.task)
                    if not members:
                        completed.append(event.job)
                        del self.bound[event.job]
        binds = [e for e in batch if e.kind is Kind.BIND and e.task is not None]
        if completed or arrived or released or evictions.evictions or not binds:
            self.sim.observe(
                now, completed=completed, arrived=arrived, plan=evictions, released=released
            )
        if binds:
            plan = Plan()
            self._taken.clear()
            for event in binds:
                self._bind(event, plan)
            self.sim.observe(now, plan=plan)

    def _bind(self, event: Observed, plan: Plan) -> None:
        """Add ``event`` to ``plan`` if it fits next to the plan's earlier binds."""
        assert event.task is not None
        state = self.sim.state
        if event.task in state.allocations or any(b.task == event.task for b in plan.binds):
            return
        shape = self.tasks[event.task].shape
        milli = event.gpu_milli or shape.gpu_milli
        row = state.index.get(NodeName(event.node))
        if row is None:
            self.out.overcommitted.append(event.task)
            return
        taken = self._taken.setdefault(row, (np.zeros(int(state.gpu_count[row]), np.int64), [0, 0]))
        free = state.gpu_free[row][: len(taken[0])] - taken[0]
        gpus = _gpus_for(event, free, shape.num_gpu, milli) if shape.num_gpu else ()
        if (
            gpus is None
            or state.cpu_free[row] - taken[1][0] < shape.cpu_milli
            or state.mem_free[row] - taken[1][1] < shape.memory_mib
        ):
            self.out.overcommitted.append(event.task)
            return
        for g in gpus:
            taken[0][g] += milli
        taken[1][0] += shape.cpu_milli
        taken[1][1] += shape.memory_mib
        plan.binds.append(Bind(event.task, event.job, NodeName(event.node), gpus, milli))
        self.bound.setdefault(event.job, set()).add(event.task)
        self.out.nodes.setdefault(event.task, event.node)


def summarise_observed(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    events: Sequence[Observed],
    spec: ProfileSpec,
    *,
    statuses: dict[JobId, str] | None = None,
    end: float | None = None,
    settle_s: float = 0.0,
) -> ObservedRun:
    """Feed ``events`` into a simulation of ``nodes`` and ``jobs`` and summarise it (see the
    module docstring). ``statuses``: why each job that never started is pending, as the
    scheduler wrote it; ``end``: when observation stopped (trace seconds)."""
    events = _settle(events, settle_s)
    started = time.perf_counter()
    shapes = [t.shape for j in jobs for t in j.tasks]
    profile = build_profile(spec, PluginContext(workload_hint=shapes))
    sim = Simulation(nodes, jobs, profile, options=SimOptions(record_events=True))
    metrics = RunMetrics(sim, TargetWorkload.from_shapes(shapes))
    sim.observers.append(metrics)
    out = ObservedRun(sim, {})
    feeder = _Feeder(sim, out, {t.id: t for j in jobs for t in j.tasks})
    ordered = sorted(events, key=lambda e: (e.time, e.kind))
    i = 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j].time == ordered[i].time:
            j += 1
        feeder.step(ordered[i].time, ordered[i:j])
        i = j
    if end is not None and end > sim.now:
        sim.observe(end)
    for job_id, message in (statuses or {}).items():
        record = sim.records.get(job_id)
        if record is not None and record.first_start is None:
            record.status = Status(Code.UNSCHEDULABLE, (message,), Cause.OTHER)
    out.summary = summarise(sim, metrics)
    out.summary["seconds"] = round(time.perf_counter() - started, 3)
    return out


def _settle(events: Sequence[Observed], settle_s: float) -> list[Observed]:
    """Binds of a job within ``settle_s`` of the previous one moved to the last one's time."""
    if settle_s <= 0:
        return list(events)
    binds: dict[JobId, list[int]] = {}
    for i, event in enumerate(events):
        if event.kind is Kind.BIND:
            binds.setdefault(event.job, []).append(i)
    out = list(events)
    for indices in binds.values():
        indices.sort(key=lambda i: events[i].time)
        run = [indices[0]]
        for i in [*indices[1:], -1]:
            if i >= 0 and events[i].time - events[run[-1]].time <= settle_s:
                run.append(i)
                continue
            last = events[run[-1]].time
            for j in run:
                out[j] = dataclasses.replace(events[j], time=last)
            run = [i]
    return out


def simulate_recorded(
    nodes: Sequence[Node], jobs: Sequence[Job], spec: ProfileSpec, seed: int
) -> tuple[Simulation, dict[str, Any], dict[TaskId, str]]:
    """``gpusched simulate``'s run of one policy, keeping each task's first node."""
    started = time.perf_counter()
    shapes = [t.shape for j in jobs for t in j.tasks]
    profile = build_profile(spec, PluginContext(workload_hint=shapes, seed=seed))
    sim = Simulation(nodes, jobs, profile, seed=seed, options=SimOptions(record_events=True))
    metrics = RunMetrics(sim, TargetWorkload.from_shapes(shapes))
    sim.observers.append(metrics)
    sim.run()
    summary = summarise(sim, metrics)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    first: dict[TaskId, str] = {}
    for _, kind, who, what in sim.events:
        if kind == "bind":
            first.setdefault(TaskId(who), what.split("[", 1)[0])
    return sim, summary, first


def compare_runs(
    simulated: Simulation,
    simulated_nodes: dict[TaskId, str],
    observed: ObservedRun,
) -> dict[str, Any]:
    """Job-by-job differences between a simulated and an observed run of the same workload.

    ``start_delta_s``: observed minus simulated first start, over jobs that started in both
    (median, p95, largest late and early, mean of absolute values); ``started_only_in``:
    jobs that started in one run only; ``same_node_pct``: of the tasks bound in both runs, the
    share on the same node the first time.
    """
    deltas: list[float] = []
    only_sim = only_obs = 0
    for job_id, rec in simulated.records.items():
        seen = observed.simulation.records[job_id]
        if rec.first_start is not None and seen.first_start is not None:
            deltas.append(seen.first_start - rec.first_start)
        elif rec.first_start is not None:
            only_sim += 1
        elif seen.first_start is not None:
            only_obs += 1
    both = [t for t in observed.nodes if t in simulated_nodes]
    same = sum(1 for t in both if observed.nodes[t] == simulated_nodes[t])
    arr = np.asarray(deltas) if deltas else np.zeros(1)
    return {
        "jobs_started_in_both": len(deltas),
        "started_only_in": {"simulate": only_sim, "replay": only_obs},
        "start_delta_s": {
            "median": round(float(np.median(arr)), 3),
            "p95": round(float(np.percentile(arr, 95)), 3),
            "max_late": round(float(arr.max()), 3),
            "max_early": round(float(arr.min()), 3),
            "mean_abs": round(float(np.abs(arr).mean()), 3),
        },
        "tasks_bound_in_both": len(both),
        "same_node_pct": round(100.0 * same / len(both), 2) if both else None,
    }
