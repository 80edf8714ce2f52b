"""Why a task fits no node: each filter's reasons, and whether it could ever fit.

"Does not fit" is a :class:`~gpusched.framework.status.Status`, never an exception. A task that
no node can host now gets ``UNSCHEDULABLE`` with every filter's ``explain()``; when not even an
empty cluster could host it, ``UNRESOLVABLE`` (waiting or preempting cannot help), with the
filters' reasons on the empty cluster. "Could it ever fit?" depends only on the node list, the
filters and the task's shape, so the answer is kept in the state's layout cache (shared by the
state's copies). A request whose share depends on the node (:mod:`.sharing`) is explained over
its variants. :class:`Diagnosis` is a mixin of :class:`~gpusched.framework.session.Session`
(:mod:`.session_base`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpusched.framework.session_base import SessionBase
from gpusched.framework.sharing import variants
from gpusched.framework.status import Cause, Code, Status
from gpusched.model import Task

__all__ = ["Diagnosis"]


class Diagnosis(SessionBase):
    """Explaining why a task fits no node (module docstring)."""

    __slots__ = ()

    def diagnose(self, task: Task) -> Status:
        """Why no node can host ``task``: each filter's reasons, and whether it could ever fit."""
        reasons = [r for f in self.profile.filters if (r := f.explain(self.ctx, task, self.state))]
        if not self._could_ever_fit(task):
            empty = self.state.empty()
            never = [r for f in self.profile.filters if (r := f.explain(self.ctx, task, empty))]
            return Status(
                Code.UNRESOLVABLE, ("cannot fit on any node even when empty", *never), Cause.NODES
            )
        return Status(Code.UNSCHEDULABLE, tuple(reasons) or ("no feasible node",), Cause.NODES)

    def _could_ever_fit(self, task: Task) -> bool:
        """Whether some node passes every filter when the cluster is empty (cached per shape)."""
        cache = self.state.layout_cache
        key = ("ever-fits", self._filters_key, task.shape)
        ever = cache.get(key)
        if ever is None:
            empty = self.state.empty()
            mask = np.ones(empty.size, dtype=bool)
            for f in self.profile.filters:
                mask &= f.filter(self.ctx, task, empty)
            ever = cache[key] = bool(mask.any())
        return bool(ever)

    def _diagnose_variants(self, task: Task, tasks: Sequence[Task]) -> Status:
        s = task.shape
        state = self.state
        if not tasks:
            if s.gpu_memory_mib:
                usable = int(state.gpu_usable_mib.max(initial=0))
                return Status(
                    Code.UNRESOLVABLE,
                    (
                        f"asks {s.gpu_memory_mib / 1024:g} GiB of GPU memory; the largest usable "
                        f"GPU memory of any node is {usable / 1024:g} GiB",
                    ),
                    Cause.NODES,
                )
            return Status(
                Code.UNRESOLVABLE,
                ("asks a fraction of a GPU; every GPU node is exclusive (no sharing)",),
                Cause.NODES,
            )
        empty = state.empty()
        ever = False
        for vtask, (_, nodes) in zip(tasks, variants(state, s) or (), strict=False):
            mask = nodes.copy()
            for f in self.profile.filters:
                mask &= f.filter(self.ctx, vtask, empty)
            ever = ever or bool(mask.any())
        reasons = tuple(
            dict.fromkeys(
                r
                for t in tasks
                for f in self.profile.filters
                if (r := f.explain(self.ctx, t, state))
            )
        )
        code = Code.UNSCHEDULABLE if ever else Code.UNRESOLVABLE
        if not ever:
            reasons = ("no node that can host its share would fit it even when empty", *reasons)
        if s.by_memory:
            reasons = (
                f"asks {s.gpu_memory_mib / 1024:g} GiB of GPU memory (a share of "
                f"{', '.join(str(t.shape.gpu_milli) for t in tasks)} milli by GPU size)",
                *reasons,
            )
        return Status(code, reasons, Cause.NODES)
