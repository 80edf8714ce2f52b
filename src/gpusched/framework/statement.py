"""All-or-nothing changes to a working state: the transaction a gang is placed in.

Members of a gang are allocated one by one inside a :class:`Statement`; if any member fails the
statement is rolled back and the state is exactly what it was (free arrays and allocations; the
version stamps of touched nodes move forward, which only makes caches recompute). Nothing reads a
half-placed gang out of a statement: binds are emitted only after :meth:`Statement.commit`.
"""

from __future__ import annotations

from gpusched.framework.allocation import Allocation
from gpusched.framework.state import ClusterState
from gpusched.model import Task
from gpusched.model.mig import MigSlice

__all__ = ["Statement"]


class Statement:
    """Tentative allocations on ``state``: kept by :meth:`commit`, undone by :meth:`rollback`."""

    __slots__ = ("_done", "_open", "state")

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._done: list[Allocation] = []
        self._open = True

    @property
    def allocations(self) -> tuple[Allocation, ...]:
        return tuple(self._done)

    def allocate(
        self,
        task: Task,
        node: int,
        gpus: tuple[int, ...],
        gpu_milli: int | None = None,
        mig: tuple[MigSlice, ...] | None = None,
    ) -> Allocation:
        alloc = self.state.allocate(task, node, gpus, gpu_milli, mig)
        self._done.append(alloc)
        return alloc

    def adopt(self, other: Statement) -> None:
        """Take over the allocations of ``other`` (committed into this statement)."""
        self._done.extend(other.commit())

    def commit(self) -> tuple[Allocation, ...]:
        self._open = False
        return tuple(self._done)

    def rollback(self) -> None:
        for alloc in reversed(self._done):
            self.state.release(alloc.task)
        self._done.clear()
        self._open = False
