"""GpuClustering: keep tasks of the same GPU shape together.

GPU shapes are the GPU classes of :data:`gpusched.framework.allocation.SHAPE_CLASSES` (sharing,
1, 2, 4, 8 GPUs). With ``c`` the task's class, ``count[n, .]`` the GPU tasks node ``n`` hosts
and ``idle(n)`` its free milli-GPU::

    band(n)  = 3  if node n hosts GPU tasks of class c only      (same shape only)
               2  if it hosts class c and other classes           (mixed, includes c)
               1  if it hosts no GPU task                         (idle)
               0  otherwise                                       (other shapes only)
    score(n) = 25 * band(n) + floor(25 * (G - idle(n)) / G)

where ``G`` is the GPU capacity of the largest node in milli-GPU: inside a band the node with
less free GPU wins. Scores are integers (ties go to the first node in cluster order). A task
without GPUs scores 0 everywhere, i.e. it takes the first node that fits.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.framework.allocation import shape_class
from gpusched.model import Task
from gpusched.plugins._util import Norms, gpu_idle

__all__ = ["GpuClusteringScore"]


class GpuClusteringScore:
    """Same-shape tasks together (see module docstring)."""

    name = "gpu-clustering"

    def __init__(self) -> None:
        self._norms = Norms()

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        if task.shape.num_gpu == 0:
            return np.zeros(state.size)
        c = shape_class(task.shape.num_gpu, task.shape.gpu_milli)
        gpu_counts = state.shape_count[:, 1:]  # column 0 counts CPU-only tasks
        mine = gpu_counts[:, c - 1] > 0
        total = gpu_counts.sum(axis=1)
        others = total - gpu_counts[:, c - 1] > 0
        band = np.where(mine & ~others, 3, np.where(mine, 2, np.where(total == 0, 1, 0)))
        g = self._norms.update(state).gpu
        fullness = np.floor(25.0 * (g - gpu_idle(state)) / g)
        return np.asarray(25.0 * band + fullness, dtype=np.float64)
