"""Small vector helpers shared by placement plugins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ClusterState
from gpusched.model import MILLI_PER_GPU

__all__ = ["LayoutCaches", "Norms", "gpu_idle", "tightest_gpus"]

_T = TypeVar("_T")


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


class LayoutCaches(Generic[_T]):
    """A plugin's caches per cluster layout: the node list (``cpu_cap``) and version clock a
    state shares with its copies, held (not their ids: a new state's arrays may reuse a freed
    one's id, and its clock restarts the stamps). The last ``kept`` layouts keep theirs, most
    recent first: a cycle goes back and forth between its cluster and the same nodes empty
    ("could this gang ever fit?"), and with one layout's caches kept each return rebuilt
    them (a third of FGD's time in the cold 5,000-node cycle)."""

    __slots__ = ("_entries", "kept")

    def __init__(self, kept: int = 4) -> None:
        self.kept = kept
        self._entries: list[tuple[object, object, _T]] = []

    def get(self, state: ClusterState, make: Callable[[], _T]) -> _T:
        """``state``'s layout's caches (``make()`` for a layout not kept)."""
        entries = self._entries
        for i, (cap, clock, caches) in enumerate(entries):
            if cap is state.cpu_cap and clock is state.clock:
                if i:
                    entries.insert(0, entries.pop(i))
                return caches
        made = make()
        del entries[self.kept - 1 :]
        entries.insert(0, (state.cpu_cap, state.clock, made))
        return made
