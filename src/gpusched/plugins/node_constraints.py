"""Node constraints: taints and tolerations, node selectors, required and preferred affinity.

``node-constraints`` (filter): node ``n`` is feasible for a task when::

    selects(task.node_selector, task.required_affinity, labels(n))
    and every NoSchedule/NoExecute taint of n is tolerated by the task

``node-preference`` (score)::

    score(n) = 100 * SUM{w : preferred term matches n} / SUM{w}      (0 with no preferences)
             - 50 * [n has an untolerated PreferNoSchedule taint]

Labels and taints never change during a run, so each distinct set of constraints is evaluated
over all nodes once and cached with the cluster layout; a cycle pays one array lookup. A mask
that keeps every node is the state's shared ``everywhere``, a score of 0 everywhere its shared
``zero_scores``: the session skips both instead of combining them.
The semantics of each term are in :mod:`gpusched.model.constraints`.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray
from gpusched.model import Constraints, Effect, Task

__all__ = ["NodeConstraints", "NodePreference"]


def _mask(state: ClusterState, c: Constraints) -> BoolArray:
    key = ("node-constraints", c)
    cached = state.layout_cache.get(key)
    if cached is None:
        cached = np.array(
            [
                c.selects(n.labels) and c.tolerates(n.taints, Effect.NO_SCHEDULE)
                for n in state.nodes
            ],
            dtype=bool,
        )
        cached.setflags(write=False)
        if cached.all():  # excludes no node: the shared mask callers may skip
            cached = state.everywhere
        state.layout_cache[key] = cached
    return cached  # type: ignore[return-value]


class NodeConstraints:
    """Selector, required affinity and NoSchedule taints (see module docstring)."""

    name = "node-constraints"

    def filter(self, ctx: CycleContext, task: Task, state: ClusterState) -> BoolArray:
        return _mask(state, task.shape.constraints)

    def explain(self, ctx: CycleContext, task: Task, state: ClusterState) -> str | None:
        c = task.shape.constraints
        if c.empty and not any(nd.taints for nd in state.nodes[:1]) and _mask(state, c).all():
            return None
        key = ("node-constraints-explain", c)
        cached = state.layout_cache.get(key)
        if cached is None:
            cached = state.layout_cache[key] = self._explain(c, state)
        return cached if isinstance(cached, str) else None

    def _explain(self, c: Constraints, state: ClusterState) -> str | None:
        n = state.size
        selected = sum(1 for nd in state.nodes if c.selects(nd.labels))
        tolerated = sum(1 for nd in state.nodes if c.tolerates(nd.taints, Effect.NO_SCHEDULE))
        parts = []
        if selected < n:
            parts.append(f"{n - selected}/{n} nodes do not match the node selector/affinity")
        if tolerated < n:
            taints = sorted(
                {
                    f"{t.key}={t.value}:{t.effect.value}"
                    for nd in state.nodes
                    for t in nd.taints
                    if not c.tolerates((t,), Effect.NO_SCHEDULE)
                }
            )
            parts.append(
                f"{n - tolerated}/{n} nodes have taints the task does not tolerate "
                f"({', '.join(taints[:3])}{', ...' if len(taints) > 3 else ''})"
            )
        return "; ".join(parts) or None


class NodePreference:
    """Preferred affinity and PreferNoSchedule taints (see module docstring)."""

    name = "node-preference"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        c = task.shape.constraints
        key = ("node-preference", c)
        cached = state.layout_cache.get(key)
        if cached is None:
            total = sum(w for w, _ in c.preferred) or 1
            cached = np.array(
                [
                    100.0 * c.preference(n.labels) / total
                    - (0.0 if c.tolerates(n.taints, Effect.PREFER_NO_SCHEDULE) else 50.0)
                    for n in state.nodes
                ]
            )
            cached.setflags(write=False)
            if not cached.any():  # rates every node alike: the shared zeros callers may skip
                cached = state.zero_scores
            state.layout_cache[key] = cached
        return cached  # type: ignore[return-value]
