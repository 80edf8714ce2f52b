"""BestFit: the node left with the least weighted free resource after placement.

With ``C`` and ``G`` the CPU (millicores) and GPU (milli) capacity of the largest node::

    leftover(n) = 0.5 * (cpu_free[n] - cpu) / C + 0.5 * (idle(n) - gpu) / G
    score(n)    = 100 * (1 - leftover(n))

where ``idle(n)`` is the node's free milli-GPU and ``gpu = num_gpu * gpu_milli``. Pair it with
``best-fit-gpu`` (smallest sufficient GPU inside the node).
"""

from __future__ import annotations

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task
from gpusched.plugins._util import Norms, gpu_idle

__all__ = ["BestFitScore"]


class BestFitScore:
    """Tightest fit by weighted CPU and GPU leftover (see module docstring)."""

    name = "best-fit"

    def __init__(self) -> None:
        self._norms = Norms()

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        norms = self._norms.update(state)
        leftover = (
            0.5 * (state.cpu_free - s.cpu_milli) / norms.cpu
            + 0.5 * (gpu_idle(state) - s.total_gpu_milli) / norms.gpu
        )
        return 100.0 * (1.0 - leftover)
