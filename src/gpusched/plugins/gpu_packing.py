"""GpuPacking: fill partly used GPUs, then partly used nodes, then the smallest idle node.

Let the task ask ``m`` milli on each of ``k`` GPUs, and take the ``k`` GPUs of node ``n`` with
the smallest sufficient free share (best fit). With ``F_n`` the node's fully free GPUs, ``N_n``
its GPU count, ``u`` how many of the chosen GPUs are fully free::

    case 1, all chosen GPUs already shared (u = 0):
        score = max(100 - floor(SUM_chosen floor(100 * free(g) / 1000) / 10), 50)
    case 2, some chosen GPU is fully free on a node already in use (F_n < N_n):
        score = max(50 - u, 33)
    case 3, the node is idle (F_n = N_n):
        score = max(33 - F_n, F_n)

Higher is better, integers, ties to the first node in cluster order. A task without GPUs scores
0 everywhere (first fit). Pair it with ``best-fit-gpu``, which takes the same GPUs.
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
        out = np.zeros(state.size)
        idx = np.flatnonzero(feasible)
        if s.num_gpu == 0 or len(idx) == 0:
            return out
        free = state.gpu_free[idx]
        real = state.gpu_cap[idx] > 0
        fully = ((free >= MILLI_PER_GPU) & real).sum(axis=1)
        count = state.gpu_count[idx]
        # The k smallest sufficient GPUs: sort ascending, take the first k sufficient ones.
        ordered = np.sort(free, axis=1)
        sufficient = ordered >= s.gpu_milli
        chosen = sufficient & (np.cumsum(sufficient, axis=1) <= s.num_gpu)
        used_full = (chosen & (ordered >= MILLI_PER_GPU)).sum(axis=1)
        ratio_sum = np.where(chosen, ordered * 100 // MILLI_PER_GPU, 0).sum(axis=1)
        case1 = np.maximum(100 - ratio_sum // 10, 50)
        case2 = np.maximum(50 - used_full, 33)
        case3 = np.maximum(33 - fully, fully)
        out[idx] = np.where(fully == count, case3, np.where(used_full > 0, case2, case1))
        return out
