"""Small vector helpers shared by placement plugins."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ClusterState

__all__ = ["Norms", "gpu_idle"]


def gpu_idle(state: ClusterState) -> NDArray[np.int64]:
    """Free milli-GPU per node, summed over its GPUs: ``idle(n) = SUM_g gpu_free[n, g]``."""
    return state.gpu_idle


class Norms:
    """Normalisers taken from the largest node: its CPU (millicores) and GPU capacity (milli).

    Cached per cluster layout (the capacity arrays are shared by a state and its copies).
    """

    __slots__ = ("_key", "cpu", "gpu")

    def __init__(self) -> None:
        self._key: object = None  # the capacity array they were taken from (held, not its id)
        self.cpu = 1.0
        self.gpu = 1.0

    def update(self, state: ClusterState) -> Norms:
        if state.cpu_cap is not self._key:
            self._key = state.cpu_cap
            self.cpu = float(max(int(state.cpu_cap.max(initial=0)), 1))
            self.gpu = float(max(int(state.gpu_cap.sum(axis=1).max(initial=0)), 1))
        return self
