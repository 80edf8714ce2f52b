"""GpuClustering: keep tasks of the same GPU shape together.

Shapes are the classes of :data:`gpusched.framework.state.SHAPE_CLASSES` (CPU-only, sharing,
1, 2, 4, 8 GPUs). With ``c`` the task's class and ``count[n, .]`` the tasks node ``n`` hosts::

    band(n) = 3  if node n hosts only class c            (same shape only)
              2  if it hosts class c and others           (mixed, includes c)
              1  if it hosts nothing                      (idle)
              0  otherwise                                (other shapes only)
    score(n) = 30 * band(n) + 29 * used(n)

where ``used(n) = 1 - idle(n) / gpu_capacity(n)`` prefers the fuller node inside a band (0 for a
CPU-only node).
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.framework.state import shape_class
from gpusched.model import Task
from gpusched.plugins._util import gpu_idle

__all__ = ["GpuClusteringScore", "used_fraction"]


def used_fraction(state: ClusterState) -> FloatArray:
    """Allocated share of each node's GPU capacity (0 for CPU-only nodes)."""
    cap = state.gpu_cap.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        used = np.where(cap > 0, 1.0 - gpu_idle(state) / np.maximum(cap, 1), 0.0)
    return np.asarray(used, dtype=np.float64)


class GpuClusteringScore:
    """Same-shape tasks together (see module docstring)."""

    name = "gpu-clustering"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        c = shape_class(task.shape.num_gpu, task.shape.gpu_milli)
        counts = state.shape_count
        mine = counts[:, c] > 0
        total = counts.sum(axis=1)
        others = total - counts[:, c] > 0
        band = np.where(mine & ~others, 3, np.where(mine, 2, np.where(total == 0, 1, 0))).astype(
            np.float64
        )
        return 30.0 * band + 29.0 * used_fraction(state)
