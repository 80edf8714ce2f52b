"""DotProd: Tetris-style alignment of the task's demand with the node's free resources.

Both vectors are normalised by the largest node (``C`` millicores, ``G`` milli-GPU)::

    node(n) = [cpu_free[n] / C, idle(n) / G]        task = [cpu / C, gpu / G]
    score(n) = floor(100 * (1 - node(n) . task / 2))

so the node with the *smallest* dot product wins, as in the FGD paper's baseline. Scores are
integers, so close nodes tie and the profile's tie rule (first in cluster order) decides. Pair it
with ``best-fit-gpu``.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task
from gpusched.plugins._util import Norms, gpu_idle

__all__ = ["DotProductScore"]


class DotProductScore:
    """Smallest normalised dot product (see module docstring)."""

    name = "dot-product"

    def __init__(self) -> None:
        self._norms = Norms()

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        norms = self._norms.update(state)
        dot = (state.cpu_free / norms.cpu) * (s.cpu_milli / norms.cpu) + (
            gpu_idle(state) / norms.gpu
        ) * (s.total_gpu_milli / norms.gpu)
        return np.floor(100.0 * (1.0 - dot / 2.0))
