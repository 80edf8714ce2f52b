"""What one task holds on one node, and the layered task -> allocation map of a cluster state.

An :class:`Allocation` is the record :meth:`~gpusched.framework.state.ClusterState.allocate`
returns and :meth:`~gpusched.framework.state.ClusterState.release` gives back: the node, the
GPUs and the share held on each, CPU, memory and MIG instances. A working copy of the state
must cost O(1), so its allocations live in an :class:`AllocationMap` that reads through to the
map it was copied from instead of copying it.

:func:`shape_class` sorts a request into the coarse GPU-shape classes of :data:`SHAPE_CLASSES`,
which the state counts per node (``ClusterState.shape_count``) as tasks are allocated and
released.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from gpusched.model import MILLI_PER_GPU, JobId, TaskId
from gpusched.model.mig import MigSlice

__all__ = ["SHAPE_CLASSES", "Allocation", "AllocationMap", "shape_class"]

#: Coarse GPU-shape classes of tasks, counted per node in ``ClusterState.shape_count``.
SHAPE_CLASSES = ("cpu-only", "sharing", "1-gpu", "2-gpu", "4-gpu", "8-gpu", "other")


def shape_class(num_gpu: int, gpu_milli: int) -> int:
    """Index into :data:`SHAPE_CLASSES` of a request of ``num_gpu`` x ``gpu_milli``."""
    if num_gpu == 0:
        return 0
    if num_gpu == 1 and gpu_milli < MILLI_PER_GPU:
        return 1
    return {1: 2, 2: 3, 4: 4, 8: 5}.get(num_gpu, 6)


class AllocationMap:
    """Task -> allocation, layered over a frozen base so a working copy costs O(1).

    A layer records its own additions and removals and reads through to its base for the rest.
    A base is never changed while another layer reads through it: before changing a map that a
    live copy reads, :class:`ClusterState` gives itself a fresh layer on top (see
    ``ClusterState._own_allocations``). Copies are usually short-lived (one cycle), so once
    they are gone the state changes its map in place again and chains stay shallow; a chain
    deeper than :data:`MAX_DEPTH` is flattened.
    """

    @property
    def shared(self) -> bool:
        """Whether a live layer reads through this one."""
        return len(self._readers) > 0

    __slots__ = ("__weakref__", "_added", "_base", "_readers", "_removed", "depth")

    MAX_DEPTH = 64

    def __init__(self, base: AllocationMap | Mapping[TaskId, Allocation] | None = None) -> None:
        if base is not None and not isinstance(base, AllocationMap):
            root = AllocationMap()
            root._added = dict(base)
            base = root
        self._base = base
        # Layers reading through this one; while any is alive, this layer must not change.
        self._readers: weakref.WeakSet[AllocationMap] = weakref.WeakSet()
        if base is not None:
            base._readers.add(self)
        self._added: dict[TaskId, Allocation] = {}
        self._removed: set[TaskId] = set()
        self.depth: int = 0 if base is None else base.depth + 1

    def _in_base(self, task: object) -> bool:
        return self._base is not None and task in self._base

    def __contains__(self, task: object) -> bool:
        layer: AllocationMap | None = self
        while layer is not None:  # down the layers: the first that knows the task answers
            if task in layer._added:
                return True
            if task in layer._removed:
                return False
            layer = layer._base
        return False

    def get(self, task: TaskId) -> Allocation | None:
        layer: AllocationMap | None = self
        while layer is not None:
            found = layer._added.get(task)
            if found is not None:
                return found
            if task in layer._removed:
                return None
            layer = layer._base
        return None

    def __getitem__(self, task: TaskId) -> Allocation:
        found = self.get(task)
        if found is None:
            raise KeyError(task)
        return found

    def __setitem__(self, task: TaskId, alloc: Allocation) -> None:
        self._added[task] = alloc

    def pop(self, task: TaskId) -> Allocation | None:
        found = self._added.pop(task, None)
        if found is not None:
            if self._in_base(task):
                self._removed.add(task)  # keep the base's entry hidden
            return found
        if task in self._removed or self._base is None:
            return None
        found = self._base.get(task)
        if found is not None:
            self._removed.add(task)
        return found

    def _entries(self) -> dict[TaskId, Allocation]:
        """All visible entries, built layer by layer from the root (linear in their size)."""
        chain: list[AllocationMap] = []
        layer: AllocationMap | None = self
        while layer is not None:
            chain.append(layer)
            layer = layer._base
        out: dict[TaskId, Allocation] = {}
        for layer in reversed(chain):
            for task in layer._removed:
                out.pop(task, None)
            out.update(layer._added)
        return out

    def values(self) -> Iterator[Allocation]:
        return iter(self._entries().values())

    def items(self) -> Iterator[tuple[TaskId, Allocation]]:
        for alloc in self.values():
            yield alloc.task, alloc

    def __iter__(self) -> Iterator[TaskId]:
        for alloc in self.values():
            yield alloc.task

    def __len__(self) -> int:
        return len(self._entries())

    def as_dict(self) -> dict[TaskId, Allocation]:
        """Every visible entry as a fresh plain dict (one pass over the layers): for a caller
        about to look up many tasks at once, each then a dict lookup instead of a walk down
        the layers. A copy: later changes to the map do not show in it."""
        return self._entries()

    def flattened(self) -> AllocationMap:
        """One layer holding the same entries."""
        flat = AllocationMap()
        flat._added = self._entries()
        return flat


@dataclass(frozen=True, slots=True)
class Allocation:
    """Resources one task holds on one node (``mig``: its MIG instances; ``gpus`` is then
    empty and ``gpu_milli`` 0)."""

    task: TaskId
    job: JobId
    node: int
    gpus: tuple[int, ...]
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    mig: tuple[MigSlice, ...] = ()
