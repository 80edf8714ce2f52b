"""Charging the pods that already hold resources to a cycle's :class:`ClusterState`.

A bound pod (or one we bound a moment ago, *assumed*) is allocated on the GPU indices it
records; a pod placed by someone else, or whose recorded GPUs are no longer valid, on the first
GPUs with room; a MIG pod on its recorded instances, else those the slice rule picks. A pod
that no longer fits (its node shrank, another scheduler over-committed) is not charged, and
:func:`charge_bound` says so, so that the snapshot can count it in ``overcommitted`` instead of
failing the cycle.
"""

from __future__ import annotations

from gpusched.errors import InvariantError
from gpusched.framework import ClusterState
from gpusched.model import NodeName, Task
from gpusched.model.mig import MigSlice

__all__ = ["charge_bound"]


def _first_fit(state: ClusterState, row: int, num_gpu: int, milli: int) -> tuple[int, ...] | None:
    free = state.gpu_free[row]
    picks = [g for g in range(int(state.gpu_count[row])) if free[g] >= milli][:num_gpu]
    return tuple(picks) if len(picks) == num_gpu else None


def _charge_mig(
    state: ClusterState, task: Task, row: int, mig: tuple[MigSlice, ...] | None
) -> bool:
    """Allocate a bound MIG pod on its recorded instances, else on those the slice rule
    picks; False when neither fits."""
    if mig and state.mig is not None:
        try:  # on a copy first: a take that fails part-way leaves instances marked
            state.mig.copy().take(row, mig, who=f"task {task.id}")
        except InvariantError:
            mig = None
    for chosen in (mig, None) if mig else (None,):
        try:
            state.allocate(task, row, (), mig=chosen)
        except InvariantError:
            continue
        return True
    return False


def charge_bound(
    state: ClusterState,
    task: Task,
    node: str,
    gpus: tuple[int, ...] | None,
    mig: tuple[MigSlice, ...] | None = None,
) -> bool:
    """Allocate a bound pod; False when it does not fit (left out of the state)."""
    row = state.index.get(NodeName(node))
    if row is None:
        return False
    shape = task.shape
    if shape.mig_profile:
        return _charge_mig(state, task, row, mig)
    if shape.num_gpu:
        valid = gpus is not None and len(gpus) == shape.num_gpu
        count = int(state.gpu_count[row])
        if not valid or any(
            not 0 <= g < count or state.gpu_free[row][g] < shape.gpu_milli for g in gpus or ()
        ):
            gpus = _first_fit(state, row, shape.num_gpu, shape.gpu_milli)
        if gpus is None:
            return False
    else:
        gpus = ()
    if state.cpu_free[row] < shape.cpu_milli or state.mem_free[row] < shape.memory_mib:
        return False
    state.allocate(task, row, gpus)
    return True
