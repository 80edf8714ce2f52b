"""``network-packing``: put work where the network domain is already busy, so that whole
domains stay free for the gangs that need one.

With ``d(n)`` the node's domain at the cluster's finest network level (the rack, say;
:mod:`gpusched.model.network`)::

    score(n) = 100 * (1 - idle(d(n)) / capacity(d(n)))       GPU tasks, in milli-GPU
    score(n) = 0                                             no level, no label, CPU-only task

Gangs asking for a domain are confined to one by the session (:mod:`gpusched.framework.
domains`); this score does the same for everything else, one task at a time: a 1-GPU job
joins a busy rack instead of opening an idle one. Cost: two ``bincount`` over the nodes per
task (O(N)).
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task

__all__ = ["NetworkPacking"]


class NetworkPacking:
    """Prefer busy domains of the finest network level (see module docstring)."""

    name = "network-packing"
    maturity = "experimental: unit test, simulated benchmark (docs/topology.md)"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        levels = len(state.network.levels)
        if not levels or not task.shape.num_gpu:
            return np.zeros(state.size)
        ids = state.domains(levels - 1)
        have = ids >= 0
        count = int(ids.max()) + 1 if have.any() else 0
        cap = np.bincount(ids[have], weights=state.gpu_cap[have].sum(axis=1), minlength=count)
        idle = np.bincount(ids[have], weights=state.gpu_idle[have], minlength=count)
        busy = np.where(cap > 0, 1.0 - idle / np.maximum(cap, 1), 0.0)
        return np.where(have, 100.0 * busy[np.maximum(ids, 0)], 0.0)
