"""Random placement: a uniformly random feasible node (the literature's weakest baseline).

    score(n) = 100 for one node drawn uniformly from the feasible set, 0 elsewhere

The draw uses the cycle's seeded random source, so a run is reproducible. Pair it with
``random-gpu`` to choose the GPU inside the node at random too.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task

__all__ = ["RandomScore"]


class RandomScore:
    """Uniform over feasible nodes (see module docstring)."""

    name = "random"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        out = np.zeros(state.size)
        idx = np.flatnonzero(feasible)
        if len(idx):
            out[idx[ctx.rng.randrange(len(idx))]] = 100.0
        return out
