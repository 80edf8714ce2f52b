"""How a cluster state changes: one task allocated or released, or many released at once.

These are the only ways a task's resources enter or leave a
:class:`~gpusched.framework.state.ClusterState` (a
:class:`~gpusched.framework.statement.Statement` calls them too). Each keeps the state's parts
consistent with one another: the free arrays (``cpu_free``, ``mem_free``, ``gpu_free``,
``gpu_idle``), the per-node ``shape_count``, the allocation map, the NUMA pins
(:mod:`gpusched.framework.numa`), the MIG instances (:mod:`gpusched.framework.mig`), and a
fresh version stamp for every node that changed. A change that does not fit is a scheduler bug
(callers check fit through filters first) and raises :class:`~gpusched.errors.InvariantError`.

:class:`StateChanges` is a mixin of ``ClusterState``: its methods work on the state's own fields,
so the hot path (one :meth:`~StateChanges.allocate` per placed task) costs what it did in the
class. What-if copies change through ``ClusterState.free_batch`` instead, which leaves the
allocation map alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpusched.errors import InvariantError
from gpusched.framework.allocation import Allocation, shape_class
from gpusched.model import Node, NodeName, Task, TaskId
from gpusched.model.mig import MigSlice

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from gpusched.framework.allocation import AllocationMap
    from gpusched.framework.mig import MigState
    from gpusched.framework.numa import NumaState
    from gpusched.framework.state import I32, I64, VersionClock

__all__ = ["StateChanges"]


class StateChanges:
    """Allocating and releasing tasks on a :class:`~gpusched.framework.state.ClusterState`
    (module docstring)."""

    __slots__ = ()

    # Fields of ClusterState these methods read and change in place.
    nodes: tuple[Node, ...]
    names: tuple[NodeName, ...]
    cpu_free: I64
    mem_free: I64
    gpu_free: I32
    gpu_idle: I64
    shape_count: NDArray[np.int32]
    numa: NumaState
    version: I64
    clock: VersionClock
    mig: MigState | None

    if TYPE_CHECKING:

        def _own_allocations(self) -> AllocationMap: ...

    def allocate(
        self,
        task: Task,
        node: int,
        gpus: tuple[int, ...],
        gpu_milli: int | None = None,
        mig: tuple[MigSlice, ...] | None = None,
    ) -> Allocation:
        """Charge ``task`` to ``node`` on the GPUs ``gpus``; raises if it does not fit.

        ``gpu_milli`` overrides the share held on each GPU (a profile that treats GPUs as
        integers holds 1000 for a fractional request). Callers check fit through filters
        first; a failure here is a scheduler bug. A MIG task (``shape.mig_profile``) takes the
        instances ``mig``, or those the slice rule of :mod:`gpusched.framework.mig` picks when
        ``mig`` is ``None`` (``gpus`` is ignored).
        """
        shape = task.shape
        if shape.mig_profile:
            return self._allocate_mig(task, node, mig)
        if gpu_milli is not None and gpu_milli != shape.gpu_milli:
            shape = replace(shape, gpu_milli=gpu_milli)
        allocations = self._own_allocations()
        if task.id in allocations:
            raise InvariantError(f"task {task.id} is already allocated")
        if len(gpus) != shape.num_gpu:
            raise InvariantError(f"task {task.id} needs {shape.num_gpu} GPUs, got {gpus}")
        if self.cpu_free[node] < shape.cpu_milli or self.mem_free[node] < shape.memory_mib:
            raise InvariantError(f"task {task.id} does not fit CPU/memory of {self.names[node]}")
        row = self.gpu_free[node]
        for g in gpus:
            if row[g] < shape.gpu_milli:
                raise InvariantError(
                    f"task {task.id} needs {shape.gpu_milli} milli on GPU {g} of "
                    f"{self.names[node]}, which has {row[g]}"
                )
        if shape.numa_local_cpus:
            self._pin_numa(task, node, gpus)
        self.cpu_free[node] -= shape.cpu_milli
        self.mem_free[node] -= shape.memory_mib
        for g in gpus:
            row[g] -= shape.gpu_milli
        self.gpu_idle[node] -= shape.total_gpu_milli
        self.shape_count[node, shape_class(shape.num_gpu, shape.gpu_milli)] += 1
        self.version[node] = self.clock.tick()
        alloc = Allocation(
            task.id, task.job, node, gpus, shape.gpu_milli, shape.cpu_milli, shape.memory_mib
        )
        allocations[task.id] = alloc
        return alloc

    def _allocate_mig(self, task: Task, node: int, mig: tuple[MigSlice, ...] | None) -> Allocation:
        shape = task.shape
        allocations = self._own_allocations()
        if task.id in allocations:
            raise InvariantError(f"task {task.id} is already allocated")
        if self.cpu_free[node] < shape.cpu_milli or self.mem_free[node] < shape.memory_mib:
            raise InvariantError(f"task {task.id} does not fit CPU/memory of {self.names[node]}")
        if self.mig is None:
            raise InvariantError(f"task {task.id} asks MIG; no node has MIG-enabled GPUs")
        slices = mig if mig is not None else self.mig.pick(node, shape.mig_profile, shape.mig_count)
        if slices is None:
            raise InvariantError(
                f"task {task.id}: {shape.mig_count} x {shape.mig_profile} do not fit "
                f"{self.names[node]}"
            )
        if len(slices) != shape.mig_count or any(sl.profile != shape.mig_profile for sl in slices):
            raise InvariantError(
                f"task {task.id} needs {shape.mig_count} x {shape.mig_profile}; got "
                f"{[str(sl) for sl in slices]}"
            )
        self.mig.take(node, slices, who=f"task {task.id}")
        self.cpu_free[node] -= shape.cpu_milli
        self.mem_free[node] -= shape.memory_mib
        self.shape_count[node, shape_class(0, 0)] += 1
        self.version[node] = self.clock.tick()
        alloc = Allocation(
            task.id, task.job, node, (), 0, shape.cpu_milli, shape.memory_mib, tuple(slices)
        )
        allocations[task.id] = alloc
        return alloc

    def _pin_numa(self, task: Task, node: int, gpus: tuple[int, ...]) -> None:
        """Take a NUMA-local task's CPUs from the NUMA nodes of ``gpus``
        (:mod:`gpusched.framework.numa`); raises if they do not fit."""
        topo = self.nodes[node].topology
        who = f"task {task.id} (numa_local_cpus)"
        if topo is None:
            raise InvariantError(f"{who}: node {self.names[node]} has no NUMA topology")
        split = topo.numa_split(gpus, task.shape.cpu_milli)
        self.numa.pin(task.id, node, split, who=f"{who} on {self.names[node]}")

    def release_many(self, task_ids: Iterable[TaskId]) -> None:
        """Release several tasks at once, with vector updates (same result as one by one)."""
        allocations = self._own_allocations()
        allocs = [a for t in task_ids if (a := allocations.pop(t)) is not None]
        if not allocs:
            return
        if self.numa.pinned:
            for a in allocs:
                if a.task in self.numa.pinned:
                    self.numa.unpin(a.task)
        nodes = np.fromiter((a.node for a in allocs), dtype=np.int64, count=len(allocs))
        np.add.at(self.cpu_free, nodes, [a.cpu_milli for a in allocs])
        np.add.at(self.mem_free, nodes, [a.memory_mib for a in allocs])
        g_nodes = [a.node for a in allocs for _ in a.gpus]
        if g_nodes:
            g_idx = [g for a in allocs for g in a.gpus]
            g_amt = [a.gpu_milli for a in allocs for _ in a.gpus]
            np.add.at(self.gpu_free, (g_nodes, g_idx), g_amt)
            np.add.at(self.gpu_idle, g_nodes, g_amt)
        classes = [shape_class(len(a.gpus), a.gpu_milli) for a in allocs]
        np.add.at(self.shape_count, (nodes, np.asarray(classes, dtype=np.int64)), -1)
        if self.mig is not None:
            for a in allocs:
                if a.mig:
                    self.mig.give(a.node, a.mig)
        for node in set(nodes.tolist()):
            self.version[node] = self.clock.tick()

    def release(self, task_id: TaskId) -> Allocation:
        """Return the resources held by ``task_id`` to its node."""
        alloc = self._own_allocations().pop(task_id)
        if alloc is None:
            raise InvariantError(f"task {task_id} holds no allocation")
        node = alloc.node
        if task_id in self.numa.pinned:
            self.numa.unpin(task_id)
        self.cpu_free[node] += alloc.cpu_milli
        self.mem_free[node] += alloc.memory_mib
        row = self.gpu_free[node]
        for g in alloc.gpus:
            row[g] += alloc.gpu_milli
        self.gpu_idle[node] += alloc.gpu_milli * len(alloc.gpus)
        self.shape_count[node, shape_class(len(alloc.gpus), alloc.gpu_milli)] -= 1
        if alloc.mig and self.mig is not None:
            self.mig.give(node, alloc.mig)
        self.version[node] = self.clock.tick()
        return alloc
