"""Capacity held for preemptors between the eviction of their victims and their bind.

When a cycle evicts victims for a job, the core has already placed that job on the freed
capacity (``Plan.nominations``); the victims take a while to go (graceful termination). Until
the preemptor is bound, that capacity is **held**: each later cycle, for each held pod,

* if its planned allocation (node, GPU indices, CPU, memory) fits now, it is *ready*: charged
  to the state and returned, and the driver binds it (all pods of a gang, or none);
* otherwise what is already free of it on its node -- its CPU and memory up to its request,
  and those of its planned GPUs with its share free -- is charged to a placeholder, so no
  other pending pod, of any priority, can take the room while the victims leave.

Held pods are not given to the core again. A hold ends when the pod is bound, deleted or
re-created (its uid changed), when an eviction for it was refused, or after the hold's time
to live (the driver then clears ``status.nominatedNodeName`` and the pod is scheduled afresh).
A hold from ``status.nominatedNodeName`` alone (set by an earlier leader) has no GPU indices:
the first GPUs with the pod's share free are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gpusched.framework import ClusterState
from gpusched.model import JobId, NodeName, Task, TaskId

__all__ = ["Hold", "HoldResult", "apply_holds"]


@dataclass(frozen=True, slots=True)
class Hold:
    """Room held on ``node`` for the pod with ``uid`` (GPU indices ``None``: any with room)."""

    job: str
    node: str
    gpus: tuple[int, ...] | None
    uid: str


@dataclass(slots=True)
class HoldResult:
    """Pods whose room is free now (to bind: task, node, GPU indices) and pods still held."""

    ready: dict[TaskId, tuple[str, tuple[int, ...]]]
    held: set[TaskId]


def _gpus_free(
    state: ClusterState, row: int, task: Task, gpus: tuple[int, ...] | None
) -> list[int]:
    shape = task.shape
    count = int(state.gpu_count[row])
    free = state.gpu_free[row]
    candidates = list(gpus) if gpus is not None else list(range(count))
    return [g for g in candidates if 0 <= g < count and free[g] >= shape.gpu_milli]


def _fits(state: ClusterState, row: int, task: Task, gpus: list[int]) -> bool:
    shape = task.shape
    return (
        len(gpus) >= shape.num_gpu
        and state.cpu_free[row] >= shape.cpu_milli
        and state.mem_free[row] >= shape.memory_mib
    )


def apply_holds(state: ClusterState, holds: Mapping[TaskId, tuple[Hold, Task]]) -> HoldResult:
    """Charge ``holds`` (pending pods only) to ``state``: ready jobs whole, the rest as
    placeholders of what is free of them (see the module docstring)."""
    result = HoldResult({}, set(holds))
    by_job: dict[str, list[TaskId]] = {}
    for task_id, (hold, _) in holds.items():
        by_job.setdefault(hold.job, []).append(task_id)
    for tasks in by_job.values():
        trial = state.copy()
        picks: dict[TaskId, tuple[str, tuple[int, ...]]] = {}
        for task_id in sorted(tasks):
            hold, task = holds[task_id]
            row = trial.index.get(NodeName(hold.node))
            if row is None:
                break
            gpus = _gpus_free(trial, row, task, hold.gpus)
            if not _fits(trial, row, task, gpus):
                break
            chosen = tuple(gpus[: task.shape.num_gpu])
            trial.allocate(task, row, chosen)
            picks[task_id] = (hold.node, chosen)
        else:
            for task_id, (node, chosen) in picks.items():
                state.allocate(holds[task_id][1], state.index[NodeName(node)], chosen)
            result.ready.update(picks)
            continue
        for task_id in sorted(tasks):
            _placeholder(state, *holds[task_id])
    result.held -= set(result.ready)
    return result


def _placeholder(state: ClusterState, hold: Hold, task: Task) -> None:
    """Charge what is free now of ``task`` on its held node, under a placeholder id."""
    row = state.index.get(NodeName(hold.node))
    if row is None:
        return
    shape = task.shape
    gpus = _gpus_free(state, row, task, hold.gpus)[: shape.num_gpu]
    held = replace(
        shape,
        cpu_milli=min(shape.cpu_milli, int(state.cpu_free[row])),
        memory_mib=min(shape.memory_mib, int(state.mem_free[row])),
        num_gpu=len(gpus),
        gpu_milli=shape.gpu_milli if gpus else 0,
    )
    placeholder = Task(TaskId(f"hold:{task.id}"), JobId(f"hold:{task.job}"), held)
    state.allocate(placeholder, row, tuple(gpus))
