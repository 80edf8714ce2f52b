"""What a GPU request holds on each node: shares by memory, sharing modes, memory minimums.

Most requests hold the same on every node (``num_gpu`` GPUs of ``gpu_milli`` each). Some do not,
and are placed as *variants*: one task shape per group of nodes, each node in at most one
group; the session scores every variant on its own nodes and takes the best node overall.

* **By memory** (``gpu_memory_mib`` with a fractional share; :class:`~gpusched.model.TaskShape`):
  on a node whose GPUs have ``usable`` MiB for tasks (memory minus the driver's reserve)::

      share(n) = ceil(1000 * gpu_memory_mib / usable(n))

  Shares are counted per GPU and never exceed 1000, so the memory of the tasks on a GPU never
  exceeds its usable memory: ``SUM_t share_t * usable / 1000 >= SUM_t gpu_memory_t``. A share of
  1000 or more is a whole GPU; above ``usable`` the node cannot host the task at all; nodes whose
  GPU memory is unknown (0) cannot host a request by memory.
* **Sharing modes** (:class:`~gpusched.model.SharingMode`): ``exclusive`` nodes host no
  fractional request; on ``mps`` nodes a share is at least ``ceil(1000 / 48)`` = 21 milli (48
  clients per GPU).
* **Memory minimum** (``gpu_memory_mib`` with whole GPUs): only nodes whose usable memory is at
  least that much.

Variants depend on the node list only, so they are cached per shape with the cluster layout.
A request with none of these features has no variants and costs nothing here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from gpusched.framework.state import ClusterState
from gpusched.model import MILLI_PER_GPU, SharingMode, TaskShape
from gpusched.model.node import MPS_MAX_CLIENTS

__all__ = ["MPS_MIN_SHARE", "Variant", "memory_share", "variants"]

BoolArray = NDArray[np.bool_]
#: The smallest share an MPS client holds.
MPS_MIN_SHARE = -(-MILLI_PER_GPU // MPS_MAX_CLIENTS)

Variant = tuple[TaskShape, BoolArray]


def memory_share(gpu_memory_mib: int, usable_mib: int) -> int:
    """``ceil(1000 * gpu_memory_mib / usable_mib)`` (module docstring); a large number when the
    usable memory is unknown."""
    if usable_mib <= 0:
        return 10 * MILLI_PER_GPU
    return -(-MILLI_PER_GPU * gpu_memory_mib // usable_mib)


def _modes(state: ClusterState) -> tuple[BoolArray, BoolArray]:
    """(nodes admitting fractions, MPS nodes), cached."""
    key = "sharing-modes"
    cached = state.layout_cache.get(key)
    if cached is None:
        share = np.array([n.gpu_sharing is not SharingMode.EXCLUSIVE for n in state.nodes])
        mps = np.array([n.gpu_sharing is SharingMode.MPS for n in state.nodes])
        cached = state.layout_cache[key] = (share, mps)
    return cached  # type: ignore[return-value]


def _plain(state: ClusterState) -> bool:
    """Whether every node admits fractions at the share asked (no exclusive or MPS node)."""
    plain = state.layout_cache.get("sharing-plain")
    if plain is None:
        share_ok, mps = _modes(state)
        plain = state.layout_cache["sharing-plain"] = bool(share_ok.all() and not mps.any())
    return bool(plain)


def _build(state: ClusterState, shape: TaskShape) -> list[Variant] | None:
    found = _variants(state, shape)
    return None if found is None else [(v, nodes) for v, nodes in found if nodes.any()]


def _variants(state: ClusterState, shape: TaskShape) -> list[Variant] | None:
    share_ok, mps = _modes(state)
    if shape.by_memory:
        out: list[Variant] = []
        usable = state.gpu_usable_mib
        for value in sorted({int(u) for u in usable if u >= shape.gpu_memory_mib}):
            milli = memory_share(shape.gpu_memory_mib, value)
            group = usable == value
            if milli >= MILLI_PER_GPU:
                out.append((replace(shape, gpu_milli=MILLI_PER_GPU), group))
                continue
            for on_mps in (False, True):
                nodes = group & share_ok & (mps == on_mps)
                if nodes.any():
                    held = max(milli, MPS_MIN_SHARE) if on_mps else milli
                    out.append((replace(shape, gpu_milli=held), nodes))
        return out
    if shape.num_gpu and shape.gpu_memory_mib:
        nodes = state.gpu_usable_mib >= shape.gpu_memory_mib
        if shape.is_sharing:
            nodes = nodes & share_ok
        return [(shape, nodes)]
    if shape.is_sharing and (not share_ok.all() or mps.any()):
        plain = share_ok & ~mps
        out = [(shape, plain)] if plain.any() else []
        if mps.any():
            out.append((replace(shape, gpu_milli=max(shape.gpu_milli, MPS_MIN_SHARE)), mps))
        return out
    return None


def variants(state: ClusterState, shape: TaskShape) -> list[Variant] | None:
    """The request's variants, or ``None`` when it holds the same everywhere (module
    docstring). An empty list: no node can ever host it."""
    if not shape.num_gpu:
        return None
    if not shape.gpu_memory_mib and (not shape.is_sharing or _plain(state)):
        return None
    key = ("share-variants", shape)
    cache = state.layout_cache
    if key not in cache:
        cache[key] = _build(state, shape)
    return cache[key]  # type: ignore[return-value]
