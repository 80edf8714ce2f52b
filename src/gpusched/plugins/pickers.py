"""GPU pickers: which GPUs of the chosen node a task gets.

* ``best-fit-gpu``: the ``k`` GPUs with the smallest free share that is still enough
  (``gpu_free[g] >= m``), lowest index first among equals. Keeps whole GPUs whole.
* ``first-fit-gpu``: the lowest-index GPUs with enough free share (what the stock NVIDIA device
  plugin does with integer GPUs).
* ``random-gpu``: ``k`` distinct GPUs with enough free share, uniformly at random.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import ClusterState, CycleContext
from gpusched.model import Task

__all__ = ["BestFitGpu", "FirstFitGpu", "RandomGpu"]


def _candidates(task: Task, state: ClusterState, node: int) -> np.ndarray:
    return np.flatnonzero(state.gpu_free[node] >= task.shape.gpu_milli)


class BestFitGpu:
    """Smallest sufficient free share first (see module docstring)."""

    name = "best-fit-gpu"

    def pick(
        self, ctx: CycleContext, task: Task, state: ClusterState, node: int
    ) -> tuple[int, ...]:
        k = task.shape.num_gpu
        if k == 0:
            return ()
        cand = _candidates(task, state, node)
        order = cand[np.argsort(state.gpu_free[node][cand], kind="stable")]
        return tuple(sorted(int(g) for g in order[:k]))


class FirstFitGpu:
    """Lowest index first (see module docstring)."""

    name = "first-fit-gpu"

    def pick(
        self, ctx: CycleContext, task: Task, state: ClusterState, node: int
    ) -> tuple[int, ...]:
        k = task.shape.num_gpu
        return tuple(int(g) for g in _candidates(task, state, node)[:k]) if k else ()


class RandomGpu:
    """Uniformly random among GPUs with enough free share (see module docstring)."""

    name = "random-gpu"

    def pick(
        self, ctx: CycleContext, task: Task, state: ClusterState, node: int
    ) -> tuple[int, ...]:
        k = task.shape.num_gpu
        if k == 0:
            return ()
        cand = [int(g) for g in _candidates(task, state, node)]
        return tuple(sorted(ctx.rng.sample(cand, k)))
