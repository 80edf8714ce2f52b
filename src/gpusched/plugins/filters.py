"""Feasibility filters: which nodes can host a task right now.

``node-resources-fit``: node ``n`` is feasible for a task asking ``cpu``, ``mem`` and ``k`` GPUs
of ``m`` milli each when::

    cpu_free[n] >= cpu  and  mem_free[n] >= mem  and  #{g : gpu_free[n, g] >= m} >= k

and for a task asking ``k`` MIG instances of profile ``P`` (no plain GPUs), in place of the
GPU term, ``fit(n, P) >= k``: free instances of ``P`` on static MIG GPUs plus room for new ones
on reconfigurable GPUs (:mod:`gpusched.framework.mig`).

``gpu-model``: a task restricted to GPU models ``S`` (non-empty) may use node ``n`` only when
``model(n) in S``; tasks without GPUs (or MIG instances) or without a restriction pass every
node.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import BoolArray, ClusterState, CycleContext
from gpusched.framework.mig import mig_capable, mig_fit_count
from gpusched.model import Task

__all__ = ["GpuModelFilter", "NodeResourcesFit", "gpu_fit_count", "gpu_fit_mask"]


def _cores(milli: int | np.integer[Any]) -> str:
    return f"{int(milli) / 1000:g} CPU"


def _gib(mib: int | np.integer[Any]) -> str:
    return f"{int(mib) / 1024:.1f} GiB"


#: Distinct GPU shares whose per-node fit counts are kept (beyond it the cache starts over).
_FIT_CACHE_SHARES = 64


def gpu_fit_count(state: ClusterState, gpu_milli: int) -> NDArray[np.int64]:
    """``count[n] = #{g : gpu_free[n, g] >= gpu_milli}``, kept incrementally.

    One count vector per share lives in the layout cache with the version stamps it was computed
    at; a call recomputes only the rows whose stamp changed since (after a bind, one row), so a
    cycle placing thousands of tasks pays ``O(N)`` compares per task instead of ``O(N * G)``.
    Stamps never repeat across a state's copies, so the cache serves them all. The result is
    read-only and valid until the state changes.
    """
    cache = state.layout_cache
    key = ("gpu-fit-count", gpu_milli)
    entry = cache.get(key)
    if entry is None:
        if sum(1 for k in cache if isinstance(k, tuple) and k[0] == key[0]) >= _FIT_CACHE_SHARES:
            for k in [k for k in cache if isinstance(k, tuple) and k[0] == key[0]]:
                del cache[k]
        counts = (state.gpu_free >= gpu_milli).sum(axis=1)
        stamps = state.version.copy()
        cache[key] = (stamps, counts)
    else:
        stamps, counts = entry  # type: ignore[misc]
        changed = np.flatnonzero(stamps != state.version)
        if len(changed):
            counts[changed] = (state.gpu_free[changed] >= gpu_milli).sum(axis=1)
            stamps[changed] = state.version[changed]
    view = counts.view()
    view.setflags(write=False)
    return view  # type: ignore[no-any-return]


def gpu_fit_mask(state: ClusterState, num_gpu: int, gpu_milli: int) -> BoolArray:
    """Nodes with at least ``num_gpu`` GPUs each having ``gpu_milli`` or more free."""
    if num_gpu == 0:
        return np.ones(state.size, dtype=bool)
    return gpu_fit_count(state, gpu_milli) >= num_gpu


class NodeResourcesFit:
    """CPU, memory and per-GPU share must all fit (see module docstring)."""

    name = "node-resources-fit"

    def filter(self, ctx: CycleContext, task: Task, state: ClusterState) -> BoolArray:
        s = task.shape
        mask = (state.cpu_free >= s.cpu_milli) & (state.mem_free >= s.memory_mib)
        if s.num_gpu:
            mask &= gpu_fit_mask(state, s.num_gpu, s.gpu_milli)
        elif s.mig_profile:
            mask &= mig_fit_count(state, s.mig_profile) >= s.mig_count
        return mask

    def explain(self, ctx: CycleContext, task: Task, state: ClusterState) -> str | None:
        s = task.shape
        n = state.size
        parts: list[str] = []
        cpu_ok = state.cpu_free >= s.cpu_milli
        mem_ok = state.mem_free >= s.memory_mib
        cpu_short = n - int(np.count_nonzero(cpu_ok))
        if cpu_short:
            parts.append(
                f"{cpu_short}/{n} nodes have less than {_cores(s.cpu_milli)} free "
                f"(most free: {_cores(state.cpu_free.max(initial=0))})"
            )
        mem_short = n - int(np.count_nonzero(mem_ok))
        if mem_short:
            parts.append(
                f"{mem_short}/{n} nodes have less than {_gib(s.memory_mib)} memory free "
                f"(most free: {_gib(state.mem_free.max(initial=0))})"
            )
        if s.num_gpu:
            counts = gpu_fit_count(state, s.gpu_milli)  # kept incrementally, no N x G pass
            fits = counts >= s.num_gpu
            short = n - int(np.count_nonzero(fits))
            if short:
                parts.append(
                    f"{short}/{n} nodes have fewer than {s.num_gpu} GPU(s) with "
                    f"{s.gpu_milli}/1000 free (best node: {int(counts.max(initial=0))})"
                )
            if cpu_short or mem_short:
                both = int(np.count_nonzero(fits & ~(cpu_ok & mem_ok)))
                if both:
                    parts.append(f"{both} nodes with enough GPU lack CPU or memory")
        elif s.mig_profile:
            parts.extend(_explain_mig(state, s.mig_profile, s.mig_count))
        return "; ".join(parts) or None


def _explain_mig(state: ClusterState, profile: str, count: int) -> list[str]:
    n = state.size
    capable = mig_capable(state, profile)
    if not capable.any():
        return [
            f"no node has a MIG-enabled GPU that offers {profile} "
            "(a static layout with it, or a reconfigurable GPU of a kind that has it)"
        ]
    fit = mig_fit_count(state, profile)
    short = int((capable & (fit < count)).sum())
    if not short:
        return []
    return [
        f"{short}/{int(capable.sum())} nodes that offer {profile} have fewer than {count} "
        f"instance(s) free (best node: {int(fit.max(initial=0))}; "
        f"{n - int(capable.sum())} nodes offer none)"
    ]


class GpuModelFilter:
    """Only nodes whose GPU model the task accepts (see module docstring)."""

    name = "gpu-model"

    def filter(self, ctx: CycleContext, task: Task, state: ClusterState) -> BoolArray:
        s = task.shape
        if not s.gpu_models or not (s.num_gpu or s.mig_profile):
            return np.ones(state.size, dtype=bool)
        return state.model_mask(s.gpu_models)

    def explain(self, ctx: CycleContext, task: Task, state: ClusterState) -> str | None:
        s = task.shape
        if not s.gpu_models or not (s.num_gpu or s.mig_profile):
            return None
        ok = int(state.model_mask(s.gpu_models).sum())
        wanted = "|".join(sorted(s.gpu_models))
        return f"only {ok}/{state.size} nodes have GPU model {wanted}"
