"""The stock kube-scheduler's default scoring, for the baseline users run today.

``least-allocated`` (NodeResourcesFit, LeastAllocated strategy) over CPU and memory::

    score(n) = floor( mean_r (free_r(n) - req_r) / cap_r(n) * 100 )      r in {cpu, memory}

``balanced-allocation`` (NodeResourcesBalancedAllocation) over CPU and memory::

    f_r(n)   = (cap_r(n) - free_r(n) + req_r) / cap_r(n)
    score(n) = floor( (1 - std_r f_r(n)) * 100 )

Scores are integers as in kube-scheduler, so many nodes tie; the ``kube-default`` profile breaks
ties uniformly at random, treats GPUs as integer counts (``gpu_as_integer``) and takes the
lowest-index free GPUs, like the NVIDIA device plugin. GPUs play no part in the score: the default
configuration does not weigh extended resources.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task

__all__ = ["BalancedAllocationScore", "LeastAllocatedScore"]


def _fractions_free(state: ClusterState, task: Task) -> tuple[FloatArray, FloatArray]:
    cpu = (state.cpu_free - task.shape.cpu_milli) / np.maximum(state.cpu_cap, 1)
    mem = (state.mem_free - task.shape.memory_mib) / np.maximum(state.mem_cap, 1)
    return cpu, mem


class LeastAllocatedScore:
    """Spread: prefer the node with the most CPU and memory left (see module docstring)."""

    name = "least-allocated"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        cpu, mem = _fractions_free(state, task)
        return np.floor(np.clip((cpu + mem) / 2.0, 0.0, 1.0) * 100.0)


class BalancedAllocationScore:
    """Prefer nodes whose CPU and memory use stay balanced (see module docstring)."""

    name = "balanced-allocation"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        cpu, mem = _fractions_free(state, task)
        # std of two values is half their distance; used fractions are 1 - free fractions.
        std = np.abs((1.0 - cpu) - (1.0 - mem)) / 2.0
        return np.floor(np.clip(1.0 - std, 0.0, 1.0) * 100.0)
