"""CPUs per NUMA node, for tasks that ask for NUMA-local CPUs.

A task with ``numa_local_cpus`` takes its CPUs from the NUMA node(s) of its GPUs, split as
:meth:`~gpusched.model.topology.NodeTopology.numa_split` says. Other tasks' CPUs come from the
node's shared pool and are not pinned. Per node ``n`` and NUMA node ``k``::

    local(n, k) = SUM of split_k over the NUMA-local tasks on n
    free(n, k)  = numa_cpu(n, k) - local(n, k)                    (kept here, never < 0)

and, as for every task, ``cpu_free(n) >= 0`` (:class:`~gpusched.framework.state.ClusterState`).
Both together are exactly what a node can honour: each NUMA node holds its pinned CPUs, and
the unpinned ones fit in what is left, ``SUM_k numa_cpu(n, k) - SUM_k local(n, k) >=
cpu_milli(n) - SUM_k local(n, k) >= unpinned``, since a node's ``cpu_milli`` is at most the
sum of its NUMA nodes' CPUs (:func:`~gpusched.model.topology.check_topology`).

A task may be placed on ``n`` with GPUs ``S`` only if ``split_k(S) <= free(n, k)`` for every
``k``: the state refuses anything else (:class:`~gpusched.errors.InvariantError`), and the
``numa-local-cpu`` filter and the ``topology-aware-gpu`` picker choose only such sets. Nodes
without a topology have no NUMA node here (``free`` is 0): they cannot host such a task.

What each pinned task took is kept by task (``pinned``), so a release returns exactly that.
What-if states built by releasing a batch of running jobs at once
(:meth:`~gpusched.framework.state.ClusterState.free_batch`, reservations) do not return pinned
CPUs: a reservation for a NUMA-local task is then conservative (later, never overcommitted).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from gpusched.errors import InvariantError
from gpusched.model import Node, TaskId

__all__ = ["NumaState"]


class NumaState:
    """``free[n, k]``: millicores of NUMA node ``k`` of node ``n`` not pinned by a task;
    ``pinned``: what each pinned task holds, ``(node, split)``."""

    __slots__ = ("free", "pinned")

    def __init__(
        self,
        free: NDArray[np.int64],
        pinned: dict[TaskId, tuple[int, tuple[int, ...]]] | None = None,
    ) -> None:
        self.free = free
        self.pinned = {} if pinned is None else pinned

    @classmethod
    def build(cls, nodes: Sequence[Node]) -> NumaState:
        width = max((n.topology.numa_count for n in nodes if n.topology is not None), default=0)
        free = np.zeros((len(nodes), width), dtype=np.int64)
        for i, node in enumerate(nodes):
            if node.topology is not None:
                cpus = node.topology.numa_cpu_milli
                free[i, : len(cpus)] = cpus
        return cls(free)

    def copy(self) -> NumaState:
        return NumaState(self.free.copy(), dict(self.pinned))

    def fits(self, node: int, split: Sequence[int]) -> bool:
        """Whether NUMA node ``k`` of ``node`` has ``split[k]`` free for every ``k``."""
        row = self.free[node]
        return all(c <= row[k] for k, c in enumerate(split) if c)

    def pin(self, task: TaskId, node: int, split: tuple[int, ...], who: str) -> None:
        """Pin ``split`` on ``node`` for ``task``; :class:`InvariantError` naming ``who`` if it
        does not fit (callers check first: a failure is a scheduler bug)."""
        if not self.fits(node, split):
            raise InvariantError(
                f"{who} needs CPUs {list(split)} millicores per NUMA node; "
                f"{self.free[node].tolist()} are free"
            )
        self.free[node, : len(split)] -= np.asarray(split, dtype=np.int64)
        self.pinned[task] = (node, split)

    def unpin(self, task: TaskId) -> None:
        """Return what ``task`` pinned."""
        node, split = self.pinned.pop(task)
        self.free[node, : len(split)] += np.asarray(split, dtype=np.int64)
