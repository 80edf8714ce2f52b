"""Metrics of a simulated run: what platform teams ask of a GPU scheduler.

Time series (sampled after every event time):

* ``alloc_pct(t) = 100 * placed_gpu_milli(t) / capacity`` -- GPU share *requested* by running
  tasks;
* ``held_pct(t)  = 100 * held_gpu_milli(t) / capacity`` -- GPU share *held* (larger than
  ``alloc_pct`` when a policy gives a fractional request a whole GPU);
* ``frag_pct(t)  = 100 * F(t) / capacity`` -- FGD's fragmentation against the workload's own task
  mix (sampled at most ``frag_samples`` times).

Summary (``summarise``), with ``[a, b]`` the arrival window (first to last arrival; after it the
cluster only drains, which says nothing about the policy):

* ``gpu_allocation_pct``: time-average of ``alloc_pct`` over ``[a, b]`` (step function);
* ``gpu_held_pct``: time-average of ``held_pct``;
* ``avg_wait_s`` / ``p95_wait_s``: start minus arrival, over jobs that started;
* ``avg_jct_s``: end minus arrival, over jobs that finished;
* ``unplaced`` jobs by status code with the most common reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpusched.plugins.fragmentation import Fragmentation, TargetWorkload
from gpusched.sim.engine import Simulation

__all__ = ["RunMetrics", "Series", "summarise"]


@dataclass(slots=True)
class Series:
    """Sampled time series of one run."""

    time: list[float] = field(default_factory=list)
    alloc_pct: list[float] = field(default_factory=list)
    held_pct: list[float] = field(default_factory=list)
    frag_time: list[float] = field(default_factory=list)
    frag_pct: list[float] = field(default_factory=list)


class RunMetrics:
    """Observer for :class:`Simulation` that samples the series."""

    def __init__(self, sim: Simulation, target: TargetWorkload, frag_samples: int = 400) -> None:
        self.capacity = max(sim.state.total_gpu_milli, 1)
        self.series = Series()
        self._frag = Fragmentation(target, sim.state.models)
        horizon = max((j.submit_time for j in sim.jobs), default=0.0)
        self._frag_step = horizon / frag_samples if horizon > 0 else 0.0
        self._next_frag = 0.0

    def __call__(self, sim: Simulation) -> None:
        s = self.series
        cap = self.capacity
        s.time.append(sim.now)
        s.alloc_pct.append(100.0 * sim.placed_milli / cap)
        s.held_pct.append(100.0 * sim.state.used_gpu_milli / cap)
        if sim.now >= self._next_frag:
            st = sim.state
            f = float(self._frag(st.cpu_free, st.gpu_free, st.model_id).sum())
            s.frag_time.append(sim.now)
            s.frag_pct.append(100.0 * f / cap)
            self._next_frag = sim.now + self._frag_step if self._frag_step else float("inf")


def _time_average(t: list[float], v: list[float], end: float) -> float:
    """Average of the step function ``v`` over ``[t[0], end]``."""
    ta = np.asarray(t)
    va = np.asarray(v)
    keep = ta <= end
    ta, va = np.append(ta[keep], end), va[keep]
    if len(va) == 0:
        return 0.0
    va = np.append(va, va[-1])
    dt = np.diff(ta)
    span = ta[-1] - ta[0]
    return float((va[:-1] * dt).sum() / span) if span > 0 else float(va[-1])


def summarise(sim: Simulation, metrics: RunMetrics) -> dict[str, Any]:
    """The run's summary numbers (see module docstring)."""
    waits = [r.wait for r in sim.records.values() if r.wait is not None]
    jcts = [r.end - r.arrival for r in sim.records.values() if r.end is not None]
    unplaced: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = {}
    for rec in sim.records.values():
        if rec.start is None:
            code = rec.status.code.value if rec.status else "NeverTried"
            unplaced[code] += 1
            if rec.status is not None and rec.status.reasons:
                reasons.setdefault(code, Counter())[rec.status.reasons[0]] += 1
    s = metrics.series
    end = max((r.arrival for r in sim.records.values()), default=0.0)
    frag = [f for t, f in zip(s.frag_time, s.frag_pct, strict=True) if t <= end] or s.frag_pct
    return {
        "jobs": len(sim.records),
        "jobs_started": len(waits),
        "jobs_completed": len(jcts),
        "jobs_unplaced": dict(unplaced),
        "unplaced_top_reason": {k: c.most_common(1)[0][0] for k, c in reasons.items()},
        "gpu_allocation_pct": round(_time_average(s.time, s.alloc_pct, end), 3),
        "gpu_held_pct": round(_time_average(s.time, s.held_pct, end), 3),
        "fragmentation_pct": round(float(np.mean(frag)) if frag else 0.0, 3),
        "avg_wait_s": round(float(np.mean(waits)), 3) if waits else 0.0,
        "p95_wait_s": round(float(np.percentile(waits, 95)), 3) if waits else 0.0,
        "avg_jct_s": round(float(np.mean(jcts)), 3) if jcts else 0.0,
        "makespan_s": round(s.time[-1] - s.time[0], 3) if s.time else 0.0,
        "cycles": sim.cycle,
    }
