"""``numa-local-cpu``: nodes where a task asking for NUMA-local CPUs gets them.

A task with ``numa_local_cpus`` takes its CPUs from the NUMA node(s) of its GPUs
(:mod:`gpusched.framework.numa`). Node ``n`` passes iff the GPU set the ``topology-aware-gpu``
picker would give it there exists::

    feasible(n) = numa_local_set(n, task) is not None        (plugins.topology_aware)

so filter and picker never disagree. Every other task passes everywhere (the state's shared
``everywhere`` mask, which the session skips instead of and-ing it in). Cost: a vector
pre-check (enough whole free GPUs and enough free CPUs on the NUMA nodes together, a
topology), then a few table lookups per remaining node, in Python; only NUMA-local tasks pay
it.
"""

from __future__ import annotations

import numpy as np

from gpusched.framework import BoolArray, ClusterState, CycleContext
from gpusched.model import MILLI_PER_GPU, Task
from gpusched.plugins.topology_aware import numa_local_set

__all__ = ["NumaLocalCpu"]


def _candidates(task: Task, state: ClusterState) -> BoolArray:
    """Nodes with a topology, ``k`` whole free GPUs and the CPUs free over all NUMA nodes."""
    s = task.shape
    whole = (state.gpu_free >= MILLI_PER_GPU).sum(axis=1) >= s.num_gpu
    numa_cpu = state.numa.free.sum(axis=1) >= s.cpu_milli if state.numa.free.size else False
    return np.asarray(whole & numa_cpu, dtype=bool)


class NumaLocalCpu:
    """Filter: a NUMA-local task's GPU set and CPUs fit (see module docstring)."""

    name = "numa-local-cpu"
    maturity = "experimental: scenario and property test"

    def filter(self, ctx: CycleContext, task: Task, state: ClusterState) -> BoolArray:
        if not task.shape.numa_local_cpus:
            return state.everywhere
        out = np.zeros(state.size, dtype=bool)
        for node in np.flatnonzero(_candidates(task, state)).tolist():
            out[node] = numa_local_set(state, node, task) is not None
        return out

    def explain(self, ctx: CycleContext, task: Task, state: ClusterState) -> str | None:
        s = task.shape
        if not s.numa_local_cpus:
            return None
        whole = (state.gpu_free >= MILLI_PER_GPU).sum(axis=1) >= s.num_gpu
        topo = np.array([n.topology is not None for n in state.nodes], dtype=bool)
        rejected = np.flatnonzero(whole & ~self.filter(ctx, task, state))
        if not len(rejected):
            return None
        no_topo = int((~topo[rejected]).sum())
        short = [int(n) for n in rejected if topo[n]]
        parts = [f"needs {s.cpu_milli / 1000:g} CPUs on the NUMA node(s) of its {s.num_gpu} GPU(s)"]
        if no_topo:
            parts.append(f"{no_topo} node(s) with {s.num_gpu} free GPUs have no NUMA topology")
        if short:
            best = max(short, key=lambda n: int(state.numa.free[n].sum()))
            free = ", ".join(f"{c / 1000:g}" for c in state.numa.free[best].tolist())
            parts.append(
                f"{len(short)} node(s) with {s.num_gpu} free GPUs lack them "
                f"(e.g. {state.names[best]}: CPUs free per NUMA node {free})"
            )
        return "; ".join(parts)
