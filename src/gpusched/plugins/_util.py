"""Small vector helpers shared by placement plugins."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ClusterState
from gpusched.model import MILLI_PER_GPU

__all__ = ["Norms", "gpu_idle", "tightest_gpus"]


def gpu_idle(state: ClusterState) -> NDArray[np.int64]:
    """Free milli-GPU per node, summed over its GPUs: ``idle(n) = SUM_g gpu_free[n, g]``."""
    return state.gpu_idle


def tightest_gpus(row: NDArray[np.int64], num_gpu: int, milli: int) -> tuple[int, ...]:
    """GPUs for a task of ``num_gpu`` x ``milli`` on a node with free shares ``row``: whole
    GPUs (``milli >= 1000``) take the lowest-index fully free ones; fractions the ``num_gpu``
    GPUs with the smallest sufficient free share (lowest index among equals), in index order.

    In Python over the row's few entries (a node has a handful of GPUs: cheaper than numpy
    calls on a tiny array); ``sorted`` is stable, as a stable argsort."""
    free = row.tolist()
    cand = [g for g, f in enumerate(free) if f >= milli]
    if milli >= MILLI_PER_GPU:
        return tuple(cand[:num_gpu])
    return tuple(sorted(sorted(cand, key=free.__getitem__)[:num_gpu]))


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
