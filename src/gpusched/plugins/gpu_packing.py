"""GpuPacking: fill partly used GPUs, then partly used nodes, then the smallest idle node.

For a task asking ``m`` milli of each of ``k`` GPUs, on node ``n`` with ``N_n`` GPUs::

    band(n) = 3  if sharing task and some GPU g has 0 < used(g) and free(g) >= m
              2  if some GPU of n is in use (and n is feasible)
              1  if n is idle
    sub(n)  = 1 - min{free(g) : g partly used, free(g) >= m} / 1000     in band 3
              0                                                          in band 2
              1 - N_n / N_max                                            in band 1
    score(n) = 30 * band(n) + 29 * sub(n)

Pair it with ``best-fit-gpu``, which takes the least-free sufficient GPU.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import MILLI_PER_GPU, Task

__all__ = ["GpuPackingScore"]


class GpuPackingScore:
    """Pack shared GPUs, then used nodes, then small idle nodes (see module docstring)."""

    name = "gpu-packing"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        free = state.gpu_free
        partly = (free > 0) & (free < state.gpu_cap)
        in_use = ((free < state.gpu_cap) & (state.gpu_cap > 0)).any(axis=1)
        n_max = max(int(state.gpu_count.max(initial=0)), 1)
        band = np.where(in_use, 2.0, 1.0)
        sub = np.where(in_use, 0.0, 1.0 - state.gpu_count / n_max)
        if s.is_sharing:
            usable = partly & (free >= s.gpu_milli)
            has = usable.any(axis=1)
            tightest = np.where(usable, free, MILLI_PER_GPU).min(axis=1)
            band = np.where(has, 3.0, band)
            sub = np.where(has, 1.0 - tightest / MILLI_PER_GPU, sub)
        return np.asarray(30.0 * band + 29.0 * sub, dtype=np.float64)
