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

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import BoolArray, ClusterState, CycleContext
from gpusched.framework.mig import mig_capable, mig_fit_count
from gpusched.model import Task

__all__ = [
    "GpuModelFilter",
    "NodeResourcesFit",
    "gpu_fit_count",
    "gpu_fit_mask",
    "resources_fit_mask",
    "row_counts",
]


def _cores(milli: int | np.integer[Any]) -> str:
    return f"{int(milli) / 1000:g} CPU"


def _gib(mib: int | np.integer[Any]) -> str:
    return f"{int(mib) / 1024:.1f} GiB"


#: Distinct GPU shares (fit counts) and requests (fit masks) whose per-node vectors are kept
#: (beyond it that table starts over).
_FIT_CACHE_SHARES = 64
_FIT_CACHE_REQUESTS = 64
#: Vectors kept per share or request, each for its own line of states (a cycle's working state
#: and the empty state asked whether a request could ever fit alternate; one vector would be
#: recomputed in full at every switch).
_FIT_LINEAGES = 2
#: A kept vector is updated row by row while at most ``1/_FIT_NEAR`` of the rows changed.
_FIT_NEAR = 8
#: Up to this many changed rows are recomputed one by one in Python (a few scalar reads cost
#: less than the fixed cost of the vectorised calls on a tiny batch; the values are the same).
_FIT_FEW = 4

#: Per node: the version stamps a vector was computed at, and the vector.
_Kept = tuple[NDArray[np.int64], NDArray[Any]]
#: Rows of a per-node vector: all of them for ``None``, else those listed.
_Rows = Callable[[NDArray[np.intp] | None], NDArray[Any]]
#: One row of a per-node vector, in Python (its value at one node).
_Row = Callable[[int], object]


def gpu_fit_count(state: ClusterState, gpu_milli: int) -> NDArray[np.int64]:
    """``count[n] = #{g : gpu_free[n, g] >= gpu_milli}``, kept incrementally (:func:`_kept`).

    A cycle placing thousands of tasks pays ``O(N)`` compares per task instead of
    ``O(N * G)``. The result is read-only and valid until the state changes.
    """

    def rows(idx: NDArray[np.intp] | None) -> NDArray[np.int64]:
        return _count_fit(state.gpu_free if idx is None else state.gpu_free[idx], gpu_milli)

    counts = _kept(state, "gpu-fit-count", gpu_milli, _FIT_CACHE_SHARES, rows)
    view = counts.view()
    view.setflags(write=False)
    return view


def resources_fit_mask(
    state: ClusterState, cpu_milli: int, memory_mib: int, num_gpu: int, gpu_milli: int
) -> BoolArray:
    """``cpu_free[n] >= cpu and mem_free[n] >= mem and #{g : gpu_free[n, g] >= m} >= k``
    (the GPU term only for ``k > 0``), kept incrementally (:func:`_kept`); a fresh array."""

    def rows(idx: NDArray[np.intp] | None) -> BoolArray:
        cpu, mem, gpu = (
            (state.cpu_free, state.mem_free, state.gpu_free)
            if idx is None
            else (state.cpu_free[idx], state.mem_free[idx], state.gpu_free[idx])
        )
        fit = (cpu >= cpu_milli) & (mem >= memory_mib)
        if num_gpu:
            fit &= _count_fit(gpu, gpu_milli) >= num_gpu
        return fit

    def row(n: int) -> bool:
        if state.cpu_free[n] < cpu_milli or state.mem_free[n] < memory_mib:
            return False
        return not num_gpu or sum(f >= gpu_milli for f in state.gpu_free[n].tolist()) >= num_gpu

    key = (cpu_milli, memory_mib, num_gpu, gpu_milli)
    return _kept(state, "resources-fit", key, _FIT_CACHE_REQUESTS, rows, row=row).copy()


def _kept(
    state: ClusterState,
    table: str,
    key: object,
    limit: int,
    rows: _Rows,
    *,
    row: _Row | None = None,
) -> NDArray[Any]:
    """The per-node vector ``rows(None)`` of ``state``, from the vectors kept under ``key`` in
    the layout cache's ``table`` with the version stamps they were computed at: only rows whose
    stamp changed since are recomputed (after a bind, one row; up to :data:`_FIT_FEW` of them
    by ``row``, one node at a time, when given). Stamps never repeat across a
    state's copies, so any kept vector serves any of them: the one with the fewest changed rows
    is used, or a fresh one while fewer than :data:`_FIT_LINEAGES` are kept and none is near.
    Valid until the state changes (the next call may update it in place)."""
    cache = state.layout_cache
    kept = cast("dict[object, list[_Kept]] | None", cache.get(table))
    if kept is None:
        kept = {}
        cache[table] = kept
    entries = kept.get(key)
    if entries is None:
        if len(kept) >= limit:
            kept.clear()
        entries = kept[key] = []
    return _nearest(entries, state, rows, row)


def _nearest(
    entries: list[_Kept], state: ClusterState, rows: _Rows, row: _Row | None = None
) -> NDArray[Any]:
    """The kept vector nearest ``state`` (most recently used first), brought up to date; the
    vector used moves to the front."""
    near = state.size // _FIT_NEAR
    best: tuple[int, NDArray[np.intp]] | None = None
    for i, (stamps, _) in enumerate(entries):
        changed = (stamps != state.version).nonzero()[0]
        if best is None or len(changed) < len(best[1]):
            best = (i, changed)
        if len(changed) <= near:
            break
    if best is None or (len(best[1]) > near and len(entries) < _FIT_LINEAGES):
        fresh = (state.version.copy(), rows(None))
        entries.insert(0, fresh)
        return fresh[1]
    i, changed = best
    stamps, values = entry = entries.pop(i)
    entries.insert(0, entry)
    if len(changed) > near:
        values[:] = rows(None)
        stamps[:] = state.version
    elif row is not None and len(changed) <= _FIT_FEW:
        version = state.version
        for n in changed.tolist():
            values[n] = row(n)
            stamps[n] = version[n]
    elif len(changed):
        values[changed] = rows(changed)
        stamps[changed] = state.version[changed]
    return values


def _count_fit(gpu_free: NDArray[np.integer[Any]], gpu_milli: int) -> NDArray[np.int64]:
    """``#{g : gpu_free[n, g] >= gpu_milli}`` per row (:func:`row_counts`)."""
    counts: NDArray[np.int64] = row_counts(gpu_free >= gpu_milli).astype(np.int64, copy=False)
    return counts


#: Unsigned integers as wide as a row of 1, 2, 4 or 8 booleans.
_ROW_WORDS: dict[int, type[np.unsignedinteger]] = {
    1: np.uint8,
    2: np.uint16,
    4: np.uint32,
    8: np.uint64,
}


def row_counts(mask: BoolArray) -> NDArray[np.integer[Any]]:
    """``out[i] = #{g : mask[i, g]}``. A row of up to 8 booleans is one machine word whose set
    bits are the true entries (each stored as byte 1), so a population count per word gives
    the counts in one pass (far faster than ``count_nonzero`` or a sum along an axis: for
    5,000 rows of 8, about 5 us against 70 us)."""
    word = _ROW_WORDS.get(mask.shape[1])
    if word is None or not mask.flags.c_contiguous or not hasattr(np, "bitwise_count"):
        counts: NDArray[np.integer[Any]] = np.asarray(np.count_nonzero(mask, axis=1))
        return counts
    return np.bitwise_count(mask.view(word))[:, 0]


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
        if s.mig_profile and not s.num_gpu:
            mask = (state.cpu_free >= s.cpu_milli) & (state.mem_free >= s.memory_mib)
            mask &= mig_fit_count(state, s.mig_profile) >= s.mig_count
            return mask
        return resources_fit_mask(state, s.cpu_milli, s.memory_mib, s.num_gpu, s.gpu_milli)

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
            return state.everywhere
        return state.model_mask(s.gpu_models)

    def explain(self, ctx: CycleContext, task: Task, state: ClusterState) -> str | None:
        s = task.shape
        if not s.gpu_models or not (s.num_gpu or s.mig_profile):
            return None
        ok = int(state.model_mask(s.gpu_models).sum())
        wanted = "|".join(sorted(s.gpu_models))
        return f"only {ok}/{state.size} nodes have GPU model {wanted}"
