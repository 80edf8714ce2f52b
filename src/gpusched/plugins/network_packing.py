"""``network-packing``: put work where the network domain is already busy, so that whole
domains stay free for the gangs that need one.

With ``d(n)`` the node's domain at the cluster's finest network level (the rack, say;
:mod:`gpusched.model.network`)::

    score(n) = 100 * (1 - idle(d(n)) / capacity(d(n)))       GPU tasks, in milli-GPU
    score(n) = 0                                             no level, no label, CPU-only task

Gangs asking for a domain are confined to one by the session (:mod:`gpusched.framework.
domains`); this score does the same for everything else, one task at a time: a 1-GPU job
joins a busy rack instead of opening an idle one.

Cost: the node-to-domain map, the labelled nodes and each domain's capacity depend only on
the node list, so they are computed once per layout (shared by every copy of the state);
a call is one ``bincount`` of the idle GPU over the labelled nodes and a gather, O(N) in
NumPy (it was two ``bincount`` plus a fancy-indexed ``N x G`` capacity sum per task).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task

__all__ = ["NetworkPacking"]


@dataclass(frozen=True, slots=True)
class _Domains:
    """The finest level's domains, fixed for a node list."""

    labelled: NDArray[np.int64]  # indices of nodes with a domain
    ids: NDArray[np.int64]  # their domain ids
    cap: FloatArray  # milli-GPU capacity per domain
    count: int

    @classmethod
    def of(cls, state: ClusterState) -> _Domains:
        key = "network-packing"
        cached = state.layout_cache.get(key)
        if isinstance(cached, _Domains):
            return cached
        ids = state.domains(len(state.network.levels) - 1)
        labelled = np.flatnonzero(ids >= 0)
        count = int(ids.max()) + 1 if len(labelled) else 0
        cap = np.bincount(
            ids[labelled], weights=state.gpu_cap[labelled].sum(axis=1), minlength=count
        )
        made = cls(labelled, ids[labelled], cap.astype(np.float64), count)
        state.layout_cache[key] = made
        return made


class NetworkPacking:
    """Prefer busy domains of the finest network level (see module docstring)."""

    name = "network-packing"
    maturity = "experimental: unit test, simulated benchmark (docs/topology.md)"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        out = np.zeros(state.size)
        if not state.network.levels or not task.shape.num_gpu:
            return out
        dom = _Domains.of(state)
        if not len(dom.labelled):
            return out
        idle = np.bincount(dom.ids, weights=state.gpu_idle[dom.labelled], minlength=dom.count)
        busy = np.where(dom.cap > 0, 1.0 - idle / np.maximum(dom.cap, 1), 0.0)
        out[dom.labelled] = 100.0 * busy[dom.ids]
        return out
