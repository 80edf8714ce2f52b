"""Data derived from a cluster's node list alone, shared by a state and all its copies.

A :class:`~gpusched.framework.state.ClusterState` is copied for every cycle and every what-if
question, but its node list never changes: the nodes' GPU models, network domains, sharing
modes and the empty state are the same for every copy. They are computed once, on first use,
and kept in one :class:`Layout` that a state passes on to its copies (and to its empty state).
:class:`LayoutViews` is the part of ``ClusterState`` that reads them; plugins key their own
node-list-derived values on :attr:`LayoutViews.layout_cache` (never on free resources, which
differ between copies). Two shared read-only arrays stand for "no node excluded" and "every
node scores 0" (:attr:`LayoutViews.everywhere`, :attr:`LayoutViews.zero_scores`): plugins
answer with them so the session can skip combining them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpusched.model import GpuModel, NetworkTopology, Node, SharingMode
from gpusched.model.network import detect_network

if TYPE_CHECKING:
    from gpusched.framework.state import I64, ClusterState

__all__ = ["Layout", "LayoutViews"]


class Layout:
    """What a state and all its copies share: derived data of the node list (built lazily)."""

    __slots__ = ("cache", "empty", "everywhere", "network", "zero_scores")

    def __init__(self) -> None:
        self.empty: ClusterState | None = None
        self.everywhere: NDArray[np.bool_] | None = None
        self.zero_scores: NDArray[np.float64] | None = None
        self.cache: dict[object, object] = {}
        self.network: NetworkTopology | None = None


class LayoutViews:
    """The views of :class:`~gpusched.framework.state.ClusterState` that depend only on its node
    list (a mixin: they read the state's own fields, so a call costs what it did in the class).
    """

    __slots__ = ()

    # Fields of ClusterState these views read (laid out by ClusterState.from_nodes).
    nodes: tuple[Node, ...]
    models: tuple[GpuModel, ...]
    model_id: I64
    _layout: Layout

    @property
    def layout_cache(self) -> dict[object, object]:
        """A cache shared by this state, its copies and its empty state, for values that depend
        only on the node list (never on free resources)."""
        return self._layout.cache

    @property
    def everywhere(self) -> NDArray[np.bool_]:
        """Every node, as a read-only mask shared by the state and its copies: what a filter
        that excludes no node returns (callers may skip and-ing it in)."""
        mask = self._layout.everywhere
        if mask is None:
            mask = self._layout.everywhere = np.ones(len(self.nodes), dtype=bool)
            mask.setflags(write=False)
        return mask

    @property
    def zero_scores(self) -> NDArray[np.float64]:
        """A score of 0 on every node, read-only and shared by the state and its copies: what
        a score plugin that rates every node alike returns (callers may skip adding it)."""
        zeros = self._layout.zero_scores
        if zeros is None:
            zeros = self._layout.zero_scores = np.zeros(len(self.nodes))
            zeros.setflags(write=False)
        return zeros

    @property
    def node_models(self) -> list[str]:
        """GPU model name of each node (``""`` for a CPU-only node), as a plain list for
        per-task lookups in Python loops."""
        key = "node-models"
        cache = self._layout.cache
        names = cache.get(key)
        if names is None:
            names = cache[key] = [self.models[m] if m >= 0 else "" for m in self.model_id.tolist()]
        assert isinstance(names, list)
        return names

    def model_mask(self, models: frozenset[GpuModel]) -> NDArray[np.bool_]:
        """Nodes whose GPU model is one of ``models`` (all GPU nodes when empty)."""
        key = ("model-mask", models)
        mask = self._layout.cache.get(key)
        if mask is None:
            ids = [i for i, m in enumerate(self.models) if not models or m in models]
            mask = np.isin(self.model_id, ids)
            mask.setflags(write=False)
            self._layout.cache[key] = mask
        return mask  # type: ignore[return-value]

    @property
    def network(self) -> NetworkTopology:
        """The cluster's network levels, coarse to fine (given, or detected from labels)."""
        layout = self._layout
        if layout.network is None:
            layout.network = detect_network([n.labels for n in self.nodes])
        return layout.network

    def domains(self, level: int) -> I64:
        """Domain number of every node at network level ``level`` (index into
        ``network.levels``): nodes with the same label value share a number, numbered in
        order of first appearance; ``-1`` where the node lacks the label. Read-only, cached."""
        key = ("network-domains", level)
        ids = self._layout.cache.get(key)
        if ids is None:
            label = self.network.levels[level].label
            seen: dict[str, int] = {}
            ids = np.array(
                [
                    seen.setdefault(v, len(seen)) if (v := n.labels.get(label)) is not None else -1
                    for n in self.nodes
                ],
                dtype=np.int64,
            )
            ids.setflags(write=False)
            self._layout.cache[key] = ids
        return ids  # type: ignore[return-value]

    def domain_names(self, level: int) -> tuple[str, ...]:
        """Label value of each domain number of ``level`` (see :meth:`domains`)."""
        key = ("network-domain-names", level)
        names = self._layout.cache.get(key)
        if names is None:
            label = self.network.levels[level].label
            names = tuple(
                dict.fromkeys(v for n in self.nodes if (v := n.labels.get(label)) is not None)
            )
            self._layout.cache[key] = names
        return names  # type: ignore[return-value]

    def sharing_mask(self) -> NDArray[np.bool_] | None:
        """Nodes whose GPUs admit fractional requests, or ``None`` when every node does."""
        key = "sharing-mask"
        if key not in self._layout.cache:
            mask = np.array([n.gpu_sharing is not SharingMode.EXCLUSIVE for n in self.nodes])
            mask.setflags(write=False)
            self._layout.cache[key] = None if mask.all() else mask
        return self._layout.cache[key]  # type: ignore[return-value]
