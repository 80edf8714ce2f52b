"""The stock kube-scheduler's default scoring, for the baseline users run today.

``least-allocated`` (NodeResourcesFit, LeastAllocated strategy) over CPU and memory::

    score_r(n) = floor( (free_r(n) - req_r) * 100 / cap_r(n) )   (integers)   r in {cpu, memory}
    score(n)   = floor( (score_cpu(n) + score_memory(n)) / 2 )

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
from numpy.typing import NDArray

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Task

__all__ = ["BalancedAllocationScore", "LeastAllocatedScore"]

I64 = NDArray[np.int64]


def _free_percent(free: I64, request: int, cap: I64) -> I64:
    """``floor((free - request) * 100 / cap)`` in integers, 0 for a zero capacity."""
    return np.where(cap > 0, (free - request) * 100 // np.maximum(cap, 1), 0)


class LeastAllocatedScore:
    """Spread: prefer the node with the most CPU and memory left (see module docstring).

    Integer arithmetic as in kube-scheduler: each resource's score is
    ``floor((free - req) * 100 / cap)`` and the node's score their integer mean.
    """

    name = "least-allocated"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        cpu = _free_percent(state.cpu_free, s.cpu_milli, state.cpu_cap)
        mem = _free_percent(state.mem_free, s.memory_mib, state.mem_cap)
        return np.asarray(np.clip((cpu + mem) // 2, 0, 100), dtype=np.float64)


class BalancedAllocationScore:
    """Prefer nodes whose CPU and memory use stay balanced (see module docstring)."""

    name = "balanced-allocation"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        s = task.shape
        cpu = (state.cpu_free - s.cpu_milli) / np.maximum(state.cpu_cap, 1)
        mem = (state.mem_free - s.memory_mib) / np.maximum(state.mem_cap, 1)
        # std of two values is half their distance; used fractions are 1 - free fractions.
        std = np.abs(cpu - mem) / 2.0
        return np.floor(np.clip(1.0 - std, 0.0, 1.0) * 100.0)
