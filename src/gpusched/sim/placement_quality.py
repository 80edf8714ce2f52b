"""Placement quality the simulator measures as it applies binds (``RunMetrics`` reports it).

The scheduler decides where tasks go; this module judges, from the driver's side, how good those
places were, so that a policy's placement can be compared with another's on the same run. It is
kept apart from :mod:`gpusched.sim.engine` because it is measurement, not simulation: nothing here
changes what runs where.

* before each bind of a task with 2 or more GPUs on a node with a GPU topology: whether its GPUs
  were a best-connected set among the GPUs free for its share just then
  (:func:`~gpusched.plugins.topology_aware.is_best_connected_set`);
* when a job with 2 or more tasks starts, per network level: whether all its nodes share one
  domain, and whether it could have (some domain of the empty cluster has room for it,
  :func:`~gpusched.framework.domains.task_fit`);
* per GPU, the memory its tasks use (a request by memory uses that much; a share ``m`` uses
  ``m / 1000`` of the GPU's usable memory): a bind that takes a GPU above its usable memory is
  a GPU memory overcommit event;
* MIG: binds take the instances the plan names; ``mig_gpus_reconfigured`` counts the plan's
  reconfigured GPUs (``plan.mig_layouts``), ``mig_layouts_chosen`` those that were empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpusched.framework import ClusterState, Plan
from gpusched.framework.domains import task_fit
from gpusched.model import Job, Task, TaskId
from gpusched.plugins.topology_aware import is_best_connected_set

__all__ = ["PlacementQuality"]


@dataclass(slots=True)
class PlacementQuality:
    """The counters above for one run on ``state`` (the simulation's live cluster state).

    Attributes:
        multi_gpu_binds: binds of tasks with 2 or more GPUs on a node with a GPU topology.
        multi_gpu_best_connected: of those, binds whose GPUs were a best-connected free set.
        gpu_memory_overcommit_events: binds that took some GPU above its usable memory.
        mig_layouts_chosen: reconfigured GPUs that were empty (a layout chosen from scratch).
        mig_gpus_reconfigured: GPUs given new MIG instances by a plan (counted per cycle).
        gangs_in_one_domain: per network level, ``[started, could fit one domain, did]``.
    """

    state: ClusterState
    multi_gpu_binds: int = 0
    multi_gpu_best_connected: int = 0
    gpu_memory_overcommit_events: int = 0
    mig_layouts_chosen: int = 0
    mig_gpus_reconfigured: int = 0
    gangs_in_one_domain: dict[str, list[int]] = field(init=False, default_factory=dict)
    _gpu_mem_used: dict[tuple[int, int], float] = field(init=False, default_factory=dict)
    _task_mem: dict[TaskId, tuple[int, tuple[int, ...], float]] = field(
        init=False, default_factory=dict
    )
    _domain_fits: dict[tuple[object, ...], bool] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for level in self.state.network.names:
            self.gangs_in_one_domain[level] = [0, 0, 0]

    def check_connectivity(self, node: int, gpus: tuple[int, ...], milli: int) -> None:
        """Before a bind of ``gpus`` at share ``milli`` on ``node``: were they best connected?"""
        topo = self.state.nodes[node].topology
        if topo is None or len(gpus) < 2:
            return
        row = self.state.gpu_free[node]
        free = sum(1 << g for g in range(topo.gpu_count) if row[g] >= milli)
        self.multi_gpu_binds += 1
        if is_best_connected_set(topo, free, gpus):
            self.multi_gpu_best_connected += 1

    def use_memory(self, task: Task, node: int, gpus: tuple[int, ...]) -> bool:
        """After a bind: add ``task``'s GPU memory; True when some GPU is now overcommitted."""
        usable = int(self.state.gpu_usable_mib[node])
        shape = task.shape
        if usable <= 0 or not gpus:
            return False
        used = (
            float(shape.gpu_memory_mib) if shape.gpu_memory_mib else shape.gpu_milli * usable / 1000
        )
        over = False
        for g in gpus:
            total = self._gpu_mem_used.get((node, g), 0.0) + used
            self._gpu_mem_used[(node, g)] = total
            over = over or total > usable + 1e-6
        self._task_mem[task.id] = (node, gpus, used)
        if over:
            self.gpu_memory_overcommit_events += 1
        return over

    def forget_memory(self, task: TaskId) -> None:
        """Before ``task`` is released: its GPU memory is free again."""
        held = self._task_mem.pop(task, None)
        if held is not None:
            node, gpus, used = held
            for g in gpus:
                self._gpu_mem_used[(node, g)] -= used

    def count_mig_layouts(self, plan: Plan) -> None:
        """The GPUs ``plan`` reconfigures, and of those the ones that were empty."""
        for layout in plan.mig_layouts:
            self.mig_layouts_chosen += layout.was_empty
            self.mig_gpus_reconfigured += 1

    def count_domains(self, job: Job) -> None:
        """When ``job`` first starts: per level, could it fit one domain, and did it?"""
        allocs = [a for t in job.tasks if (a := self.state.allocations.get(t.id)) is not None]
        if len(allocs) < 2:
            return
        nodes = [a.node for a in allocs]
        for i, level in enumerate(self.state.network.names):
            ids = self.state.domains(i)[nodes]
            counts = self.gangs_in_one_domain[level]
            counts[0] += 1
            if self._fits_one_domain(job, i, len(allocs)):
                counts[1] += 1
                if ids[0] >= 0 and bool((ids == ids[0]).all()):
                    counts[2] += 1

    def _fits_one_domain(self, job: Job, level: int, need: int) -> bool:
        shape = job.tasks[0].shape
        key = (shape, need, level)
        known = self._domain_fits.get(key)
        if known is None:
            empty = self.state.empty()
            fit = task_fit(empty, shape, empty.model_mask(shape.gpu_models))
            ids = empty.domains(level)
            have = ids >= 0
            room = np.bincount(ids[have], weights=fit[have], minlength=1)
            known = self._domain_fits[key] = bool(room.max() >= need)
        return known
