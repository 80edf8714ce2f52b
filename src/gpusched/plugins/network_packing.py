"""``network-packing``: put work where the network domain is already busy, so that whole
domains stay free for the gangs that need one.

With ``d(n)`` the node's domain at the cluster's finest network level (the rack, say;
:mod:`gpusched.model.network`)::

    score(n) = 100 * (1 - idle(d(n)) / capacity(d(n)))       GPU tasks, in milli-GPU
    score(n) = 0                                             no level, no label, CPU-only task

Gangs asking for a domain are confined to one by the session (:mod:`gpusched.framework.
domains`); this score does the same for everything else, one task at a time: a 1-GPU job
joins a busy rack instead of opening an idle one.

Cost: the node-to-domain map, the labelled nodes, each domain's members and capacity depend
only on the node list, so they are computed once per layout (shared by every copy of the
state). The scores are kept between calls, with each node's idle GPU and version stamp::

    stale      = { n : version(n) != stamp(n) }                  one O(N) compare
    idle(d)   += SUM_{n in stale, d(n) = d} gpu_idle(n) - idle_then(n)   (exact, integers)
    score(m)   = 100 * (1 - idle(d) / capacity(d))   for m in the domains d whose idle changed

so a call after one placement is a vector compare and a few small updates, not a ``bincount``
over every node and an ``N``-sized gather. When many nodes are stale (the first call, a
what-if state) everything is recomputed as one ``bincount``. The scores are the same floats
either way: the sums are exact integers and the division is the same. They are valid for any
state of one version clock (a stamp never means two contents); another clock or node list
starts afresh.
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
    node_dom: NDArray[np.int64]  # every node's domain id, -1 without one
    members: NDArray[np.int64]  # labelled nodes grouped by domain (stable)
    starts: NDArray[np.int64]  # domain d's nodes: members[starts[d]:starts[d + 1]]

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
        members = labelled[np.argsort(ids[labelled], kind="stable")]
        starts = np.zeros(count + 1, dtype=np.int64)
        starts[1:] = np.cumsum(np.bincount(ids[labelled], minlength=count))
        made = cls(labelled, ids[labelled], cap.astype(np.float64), count, ids, members, starts)
        state.layout_cache[key] = made
        return made

    def busy_score(self, idle: NDArray[np.int64]) -> FloatArray:
        """``100 * busy share`` of every domain, ``idle`` its idle milli-GPU (module
        docstring); 0 for a domain without GPUs."""
        busy = np.where(self.cap > 0, 1.0 - idle / np.maximum(self.cap, 1), 0.0)
        return np.asarray(100.0 * busy, dtype=np.float64)


#: Above this many stale nodes a call recomputes every domain (one ``bincount``); up to it,
#: the stale nodes and their domains are updated one by one.
_FULL_RECOMPUTE = 16


class _Scores:
    """Scores of every node, kept up to date from version stamps (module docstring)."""

    __slots__ = ("clock", "dom_idle", "fresh", "layout", "node_idle", "out", "stamps", "view")

    def __init__(self, state: ClusterState, dom: _Domains) -> None:
        self.clock = state.clock
        self.layout = state.layout_cache
        self.stamps = np.full(state.size, -1, dtype=np.int64)
        self.node_idle = np.zeros(state.size, dtype=np.int64)
        self.dom_idle = np.zeros(dom.count, dtype=np.int64)
        self.out = np.zeros(state.size)
        #: ``out`` read-only, what callers get (``out`` is only ever changed in place).
        self.view = self.out.view()
        self.view.flags.writeable = False
        self.fresh = True

    def matches(self, state: ClusterState) -> bool:
        return self.clock is state.clock and self.layout is state.layout_cache

    def refresh(self, state: ClusterState, dom: _Domains) -> None:
        stale = (self.stamps != state.version).nonzero()[0]  # 1-D: flatnonzero's answer, cheaper
        if not len(stale):
            return
        if self.fresh or len(stale) > _FULL_RECOMPUTE:
            self.fresh = False
            self.node_idle[:] = state.gpu_idle
            self.stamps[:] = state.version
            idle = np.bincount(dom.ids, weights=self.node_idle[dom.labelled], minlength=dom.count)
            self.dom_idle = idle.astype(np.int64)
            self.out[dom.labelled] = dom.busy_score(self.dom_idle)[dom.ids]
            return
        changed: set[int] = set()
        for n in stale.tolist():
            self.stamps[n] = state.version[n]
            delta = int(state.gpu_idle[n] - self.node_idle[n])
            d = int(dom.node_dom[n])
            if delta and d >= 0:
                self.node_idle[n] += delta
                self.dom_idle[d] += delta
                changed.add(d)
        for d in changed:
            # The formula of busy_score on one domain, in Python floats (the same IEEE ops).
            cap = float(dom.cap[d])
            value = 100.0 * (1.0 - int(self.dom_idle[d]) / max(cap, 1.0)) if cap > 0 else 0.0
            self.out[dom.members[dom.starts[d] : dom.starts[d + 1]]] = value


class NetworkPacking:
    """Prefer busy domains of the finest network level (see module docstring)."""

    name = "network-packing"
    maturity = "experimental: unit test, simulated benchmark (docs/topology.md)"

    def __init__(self) -> None:
        self._scores: _Scores | None = None

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        if not state.network.levels or not task.shape.num_gpu:
            return np.zeros(state.size)
        dom = _Domains.of(state)
        if not len(dom.labelled):
            return np.zeros(state.size)
        kept = self._scores
        if kept is None or not kept.matches(state):
            kept = self._scores = _Scores(state, dom)
        kept.refresh(state, dom)
        return kept.view
