"""The openb benchmark: several policies x several seeds, in parallel worker processes.

Each (policy, seed) pair is one :func:`~gpusched.sim.openb.run_openb`. Results are aggregated per
policy as the mean and population standard deviation over seeds (the FGD paper's convention).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ProfileSpec
from gpusched.model import Job, Node
from gpusched.sim.openb import OpenbRun, run_openb
from gpusched.sim.pool import map_in_workers

__all__ = ["PolicySummary", "run_bench"]


@dataclass(frozen=True, slots=True)
class PolicySummary:
    """One policy over all seeds."""

    policy: str
    runs: tuple[OpenbRun, ...]

    def _at(self, attr: str, pct: int) -> NDArray[np.float64]:
        return np.array([getattr(r, attr)[pct] for r in self.runs])

    @property
    def alloc_mean(self) -> float:
        return float(self._at("alloc_pct", 100).mean())

    @property
    def alloc_std(self) -> float:
        return float(self._at("alloc_pct", 100).std())

    @property
    def frag_mean(self) -> float:
        return float(self._at("frag_pct", 100).mean())

    @property
    def seconds_per_run(self) -> float:
        return float(np.mean([r.seconds for r in self.runs]))

    def mean_curve(self, attr: str) -> NDArray[np.float64]:
        """Mean over seeds of ``alloc_pct`` or ``frag_pct`` at every arrived percentage
        (NaN where no run sampled that point)."""
        stack = np.stack([getattr(r, attr) for r in self.runs])
        sampled = ~np.isnan(stack)
        total = np.where(sampled, stack, 0.0).sum(axis=0)
        count = sampled.sum(axis=0)
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    def as_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "alloc_pct_at_100_mean": round(self.alloc_mean, 3),
            "alloc_pct_at_100_std": round(self.alloc_std, 3),
            "frag_pct_at_100_mean": round(self.frag_mean, 3),
            "seconds_per_run": round(self.seconds_per_run, 3),
            "failed_pods_mean": round(float(np.mean([r.failed for r in self.runs])), 1),
        }


_DATA: dict[str, Any] = {}


def _init(nodes: Sequence[Node], jobs: Sequence[Job]) -> None:
    _DATA["nodes"] = nodes
    _DATA["jobs"] = jobs


def _one(pair: tuple[ProfileSpec, int]) -> OpenbRun:
    spec, seed = pair
    return run_openb(_DATA["nodes"], _DATA["jobs"], spec, seed)


def run_bench(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    specs: Sequence[ProfileSpec],
    seeds: Sequence[int],
    *,
    workers: int | None = None,
    progress: Callable[[OpenbRun], None] | None = None,
) -> list[PolicySummary]:
    """Every spec on every seed; ``progress`` is called as each run finishes."""
    pairs = [(spec, seed) for spec in specs for seed in seeds]
    results = map_in_workers(_one, pairs, _init, (nodes, jobs), workers=workers, progress=progress)
    return [
        PolicySummary(spec.name, tuple(r for r in results if r.policy == spec.name))
        for spec in specs
    ]
