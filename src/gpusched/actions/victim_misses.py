"""Victim searches that found nothing, kept and re-checked only where something changed.

A preemptor ``P`` whose victim search failed is usually tried again: by the next pending job
with the same request (gang shapes, priority, queue) after someone else's eviction, and by
``P`` itself in the next cycle. Each eviction, bind or completion changes a few nodes only, so
instead of searching again from scratch a *miss* remembers what the failed search saw and the
retry looks only at what changed since. Misses live for the cycle, and from cycle to cycle in
the driver's :class:`~gpusched.framework.memo.CycleMemo` (dropped when not used in a cycle).

A miss records, at the failure (time ``t0``): the state's per-node version stamps ``v``, the
queues whose borrowing made their jobs eligible ``B``, whether ``P`` was within its guarantee
``w`` (it decides which queues are eligible at all) and the nodes held for reservations that
``P`` could not use ``H``. A victim eligible now but not then, on a node whose stamp is the
same, is one that has since passed the action's minimum run time ``r``, or whose queue started
borrowing; so, at a retry at time ``t`` with ``v'``, ``B'``, ``w'``, ``H'`` (``w' != w``: no
reuse, search again), the nodes whose answer may differ are::

    C = { n : v'[n] != v[n] }  U  (H' xor H)
        U { nodes of eligible victims started after t0 - r,  or of a queue in B' \\ B }

Every other node has the same free resources and a subset of the same eligible victims (a
victim disappears only by eviction or completion, which changes its nodes' stamps), so its
answer cannot have turned from "no" into "yes". Stamps come from one clock shared by the
driver's state and every working copy, so equal stamps mean equal contents across cycles too.
Two searches are exact per node and can be re-checked on ``C`` alone:

* **one pod, node-local** (:func:`~gpusched.actions.victim_local.node_local`): no node passing the
  other filters fits the pod even with every eligible victim on it gone. The retry asks
  :meth:`~gpusched.actions.victim_index.VictimIndex.first_fits` about the nodes of ``C``.
* **gang bound** (:func:`~gpusched.actions.victim_search._gang_may_fit`): per pod shape ``s`` with
  ``k_s`` pods, ``SUM_n min(pods_n, k_s) < k_s`` over feasible nodes. The miss keeps each
  node's term; the retry recomputes the terms of ``C`` and the sum.

Any other failure (of the full placement check, or of the global search) is not kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpusched.actions.victim_index import VictimIndex
from gpusched.framework import ClusterState
from gpusched.model import QueueName, TaskShape

__all__ = ["Miss", "Misses", "Seen"]

I64 = NDArray[np.int64]
Mask = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Seen:
    """What decides which victims a search may take, besides the nodes (module docstring):
    the time, the borrowing queues ``B``, the preemptor within its guarantee ``w``, and the
    reserved nodes ``H`` it may not use."""

    now: float
    borrowers: frozenset[QueueName]
    within: bool
    held: frozenset[int]


@dataclass(slots=True)
class Miss:
    """One failed search (module docstring). ``terms``: per pod shape of a gang, each node's
    ``min(pods_n, k_s)`` (zero on infeasible nodes); empty for a one-pod miss."""

    stamps: I64
    seen: Seen
    terms: dict[TaskShape, I64] = field(default_factory=dict)


class Misses:
    """The misses of one action, by request key: those of earlier cycles (``kept``, from the
    memo) and those recorded or confirmed in this one (:meth:`renewed`)."""

    __slots__ = ("_kept", "_now")

    def __init__(self, kept: dict[tuple[object, ...], Miss] | None = None) -> None:
        self._kept: dict[tuple[object, ...], Miss] = dict(kept or {})
        self._now: dict[tuple[object, ...], Miss] = {}

    def get(self, key: tuple[object, ...]) -> Miss | None:
        return self._now.get(key) or self._kept.get(key)

    def record(
        self,
        key: tuple[object, ...],
        state: ClusterState,
        seen: Seen,
        terms: dict[TaskShape, I64] | None = None,
    ) -> None:
        """Remember that the search for ``key`` found nothing on ``state`` as ``seen``."""
        self._now[key] = Miss(state.version.copy(), seen, terms or {})

    def forget(self, key: tuple[object, ...]) -> None:
        self._now.pop(key, None)
        self._kept.pop(key, None)

    def renewed(self) -> dict[tuple[object, ...], Miss]:
        """The misses recorded or confirmed in this cycle (what the memo keeps)."""
        return self._now

    @staticmethod
    def changed(
        miss: Miss,
        state: ClusterState,
        index: VictimIndex,
        eligible: Mask,
        *,
        seen: Seen,
        min_runtime_s: float,
    ) -> Mask | None:
        """The nodes ``C`` whose answer may differ since ``miss`` (module docstring), or
        ``None`` when the miss cannot be reused."""
        old = miss.seen
        if old.within != seen.within or len(miss.stamps) != state.size:
            return None
        nodes: Mask = state.version != miss.stamps
        for n in old.held ^ seen.held:
            nodes[n] = True
        newly = eligible & (index.start > old.now - min_runtime_s)
        fresh = seen.borrowers - old.borrowers
        if fresh:
            codes = [i for i, q in enumerate(index.queue_names) if q in fresh]
            newly |= eligible & np.isin(index.queue, codes)
        if newly.any():
            nodes[index.e_node[newly[index.e_victim]]] = True
        return nodes


def kept_misses(table: Any) -> dict[tuple[object, ...], Miss] | None:
    """A memo table read back as misses (``None`` when absent)."""
    return table if isinstance(table, dict) else None
