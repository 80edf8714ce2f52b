"""``spare-pinned-models`` (score): work that runs on any GPU model stays off the models that
other work can run on only.

A job pinned to one GPU model (``gpu_models = {H100}``) can use nothing else, while a job
that accepts any model can go anywhere; when both share a cluster, every unpinned pod that
lands on an H100 node is room the pinned jobs cannot get back until it ends -- and a pinned
gang that needs several whole nodes of its model starves behind a handful of them. Slurm
sites get the same effect from node weights (the scarce, sought-after nodes are used last).

From the workload hint (the simulated workload; for the live scheduler, its
``--workload-hint`` file), each model's *pinned pressure* is the GPU share of pinned task shapes
asking for it (a shape accepting several models counts a part for each) over the model's GPUs
in the cluster::

    pinned(m)    = SUM{ num_gpu * gpu_milli / |models(s)| : hint shape s, m in models(s) }
    pressure(m)  = pinned(m) / (1000 * GPUs of model m)
    score(n)     = -100 * pressure(model(n)) / max_m pressure(m)     (task accepts any model)
                 = 0                                                 (otherwise)

So an unpinned GPU task scores nodes of the most sought-after model -100 and nodes of models
nobody pins 0: with ``fgd`` (0..100) at the same weight it goes to another model whenever one
fits, and to the pinned model only when none does. Tasks that name models, CPU-only tasks and
workloads with no pinned shapes get the state's shared zeros (skipped by the session).
Node models never change, so the per-node scores are computed once per cluster layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gpusched.errors import ConfigError
from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray, PluginContext
from gpusched.model import MILLI_PER_GPU, GpuModel, Task, TaskShape

__all__ = ["SparePinnedModels", "pinned_demand"]


def pinned_demand(shapes: Sequence[TaskShape]) -> dict[GpuModel, float]:
    """``pinned(m)`` of the module docstring: GPU milli asked for by shapes that name models."""
    demand: dict[GpuModel, float] = {}
    for s in shapes:
        if s.num_gpu and s.gpu_models:
            part = s.num_gpu * s.gpu_milli / len(s.gpu_models)
            for m in s.gpu_models:
                demand[m] = demand.get(m, 0.0) + part
    return demand


class SparePinnedModels:
    """Unpinned GPU tasks avoid the models pinned work needs (module docstring)."""

    name = "spare-pinned-models"
    maturity = "new: unit tests, scenario, simulated benchmarks (docs/benchmarks.md section 4)"

    def __init__(self, pinned: Mapping[GpuModel, float]) -> None:
        self.pinned = dict(pinned)
        # The layout cache key: what the per-node scores depend on besides the layout.
        self._key = ("spare-pinned-models", tuple(sorted(self.pinned.items())))

    @classmethod
    def from_args(cls, args: Mapping[str, Any], ctx: PluginContext) -> SparePinnedModels:
        if args:
            raise ConfigError(f"plugin 'spare-pinned-models' takes no args; got {sorted(args)}")
        return cls(pinned_demand(ctx.workload_hint))

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        if not s.num_gpu or s.gpu_models or not self.pinned:
            return state.zero_scores
        cached = state.layout_cache.get(self._key)
        if cached is None:
            cached = state.layout_cache[self._key] = self._per_node(state)
        return cached  # type: ignore[return-value]

    def _per_node(self, state: ClusterState) -> FloatArray:
        has_gpus = state.model_id >= 0
        gpus = np.bincount(
            state.model_id[has_gpus], weights=state.gpu_count[has_gpus], minlength=len(state.models)
        )
        pressure = np.array(
            [
                self.pinned.get(m, 0.0) / (MILLI_PER_GPU * g) if g else 0.0
                for m, g in zip(state.models, gpus, strict=True)
            ]
        )
        top = pressure.max(initial=0.0)
        if top <= 0:
            return state.zero_scores
        per_node = np.where(has_gpus, -100.0 * pressure[state.model_id] / top, 0.0)
        per_node.setflags(write=False)
        out: FloatArray = per_node
        return out
