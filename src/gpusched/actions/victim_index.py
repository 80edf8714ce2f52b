"""The victims of one disruptive action as flat arrays, so a preemptor's search is vector work.

A *victim* (:class:`~gpusched.actions.preempt.Victim`) is one elastic member of a running job or
a whole job. The index holds one *entry* per (victim, node): what evicting the victim frees on
that node. Entries are ordered by node, then by the victim order (cheapest first). An elastic
member's entry holds its one pod; a whole job's entry holds its pods on the node *except* its
elastic members' (each has an entry of its own, earlier in the order, with the same eligibility),
so the sum over any prefix of a node's entries counts every pod once.

**One-pod search.** For a pod asking ``c`` CPU, ``m`` memory and ``k`` GPUs of share ``s``, an
eligibility mask over victims and a mask of nodes passing every non-resource filter, node ``n``'s
resources after taking its eligible entries ``e_1 .. e_j`` in order are::

    cpu_n(j)    = cpu_free[n]    + SUM_{i <= j} cpu(e_i)             (memory likewise)
    gpu_n(j)[g] = gpu_free[n, g] + SUM_{i <= j} gpu(e_i)[g]

all computed at once as one segmented cumulative sum over the entries. The first ``j`` with
``cpu_n(j) >= c``, ``mem_n(j) >= m`` and ``#{g : gpu_n(j)[g] >= s} >= k`` ends node ``n``'s
*first-fit prefix*; its cost -- whole jobs, their highest priority, GPUs freed, evictions (the
order :func:`~gpusched.actions.preempt.set_cost` compares) -- is a segmented cumulative sum (a
segmented running maximum for the priority) too. :meth:`VictimIndex.first_fits` returns the
nodes with the cheapest prefixes, which the caller then refines exactly.

**Gang bound.** :meth:`VictimIndex.pods_bound` gives, per node, how many pods of one shape could
fit were *every* eligible victim evicted::

    pods_n = min( cpu_n / c, mem_n / m, (SUM_g floor(gpu_n[g] / s)) / k )   (integer division)

a necessary condition: a gang whose pods of some shape exceed ``SUM_n pods_n`` over feasible
nodes has no victim set at all, so the costly global search is skipped.

Cost: building is one pass over the victims' pods; each query is a few vector operations over
the eligible entries (about the number of running pods), no Python loop over nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ClusterState, RunningJob
from gpusched.framework.state import index_ranges
from gpusched.model import Job, JobId, QueueName, Task, TaskId, TaskShape

__all__ = ["Victim", "VictimIndex"]

I64 = NDArray[np.int64]
Mask = NDArray[np.bool_]


@dataclass(frozen=True, slots=True, eq=False)
class Victim:
    """What one eviction frees: a whole running job, or one elastic member of it.

    ``tasks`` are the bound tasks released; ``nodes`` the nodes they are on.
    """

    run: RunningJob
    tasks: tuple[Task, ...]
    whole: bool
    gpu_milli: int
    nodes: frozenset[int]

    @property
    def job(self) -> Job:
        return self.run.job


class VictimIndex:
    """Entries of ``victims`` (already in victim order) on ``state`` (module docstring).

    ``alive[v]`` is cleared for victims evicted since (:meth:`remove`); the arrays
    ``priority``, ``whole``, ``gpu_milli``, ``start`` (of the running job) and ``queue`` (an
    index into ``queue_names``) are per victim, in order.
    """

    def __init__(self, state: ClusterState, victims: Sequence[Victim]) -> None:
        self.victims: list[Victim] = list(victims)
        count = len(victims)
        self.priority: I64 = np.fromiter((v.job.priority for v in victims), np.int64, count)
        self.whole: Mask = np.fromiter((v.whole for v in victims), np.bool_, count)
        self.gpu_milli: I64 = np.fromiter((v.gpu_milli for v in victims), np.int64, count)
        self.alive: Mask = np.ones(count, dtype=np.bool_)
        self._low = int(self.priority.min()) if count else 0
        self.start: NDArray[np.float64] = np.fromiter((v.run.start for v in victims), float, count)
        self.queue_names: tuple[QueueName, ...] = tuple(sorted({v.job.queue for v in victims}))
        code = {q: i for i, q in enumerate(self.queue_names)}
        self.queue: I64 = np.fromiter((code[v.job.queue] for v in victims), np.int64, count)
        self._rank: dict[int, int] = {id(v): r for r, v in enumerate(victims)}
        self._of_job: dict[JobId, list[int]] = {}
        members: set[TaskId] = {t.id for v in victims if not v.whole for t in v.tasks}
        allocations = state.allocations
        width = state.gpu_slots
        nodes: list[int] = []
        ranks: list[int] = []
        cpu: list[int] = []
        mem: list[int] = []
        gpu: list[list[int]] = []
        for rank, v in enumerate(victims):
            self._of_job.setdefault(v.job.id, []).append(rank)
            at: dict[int, int] = {}  # node -> entry position
            for task in v.tasks:
                if v.whole and task.id in members:
                    continue
                a = allocations[task.id]
                pos = at.get(a.node)
                if pos is None:
                    pos = at[a.node] = len(nodes)
                    nodes.append(a.node)
                    ranks.append(rank)
                    cpu.append(0)
                    mem.append(0)
                    gpu.append([0] * width)
                cpu[pos] += a.cpu_milli
                mem[pos] += a.memory_mib
                row = gpu[pos]
                for g in a.gpus:
                    row[g] += a.gpu_milli
        order = np.argsort(np.asarray(nodes, dtype=np.int64), kind="stable")
        self.e_node: I64 = np.asarray(nodes, dtype=np.int64)[order]
        self.e_victim: I64 = np.asarray(ranks, dtype=np.int64)[order]
        self.e_cpu: I64 = np.asarray(cpu, dtype=np.int64)[order]
        self.e_mem: I64 = np.asarray(mem, dtype=np.int64)[order]
        self.e_gpu: I64 = np.asarray(gpu, dtype=np.int64).reshape(-1, width)[order]
        #: Entries of node ``n`` are ``node_start[n] .. node_start[n + 1]``.
        self.node_start: I64 = np.searchsorted(self.e_node, np.arange(state.size + 1))

    def _entries(self, eligible: Mask, nodes: Mask | None) -> I64:
        """Positions of the entries of alive, eligible victims on ``nodes`` (all nodes:
        ``None``), in entry order. A few nodes are gathered by their entry ranges rather
        than by a pass over every entry."""
        chosen = eligible & self.alive
        if nodes is None:
            return np.flatnonzero(chosen[self.e_victim])
        picked = np.flatnonzero(nodes)
        if len(picked) * 8 >= len(nodes):
            return np.flatnonzero(chosen[self.e_victim] & nodes[self.e_node])
        first = self.node_start[picked]
        idx = index_ranges(first, self.node_start[picked + 1] - first)
        return idx[chosen[self.e_victim[idx]]]

    def __len__(self) -> int:
        return len(self.victims)

    def rank(self, victim: Victim) -> int:
        """Position of ``victim`` in the order."""
        return self._rank[id(victim)]

    def ranks_of(self, job: JobId) -> list[int]:
        """Positions of every victim of running job ``job`` (members, then the whole job)."""
        return self._of_job[job]

    def ordered(self, eligible: Mask) -> list[Victim]:
        """The eligible victims, cheapest first."""
        return [self.victims[r] for r in np.flatnonzero(eligible & self.alive).tolist()]

    def remove(self, evicted: Sequence[Victim]) -> None:
        """Forget ``evicted``: a whole job takes its members with it; an evicted member leaves
        its job's whole victim smaller."""
        for v in evicted:
            if v.whole:
                self.alive[self._of_job[v.job.id]] = False
                continue
            self.alive[self._rank[id(v)]] = False
            whole = self._of_job[v.job.id][-1]  # a job's whole victim follows its members
            old = self.victims[whole]
            gone = {t.id for t in v.tasks}
            tasks = tuple(t for t in old.tasks if t.id not in gone)
            self.victims[whole] = smaller = Victim(
                old.run, tasks, True, old.gpu_milli - v.gpu_milli, old.nodes
            )
            self._rank[id(smaller)] = whole
            self.gpu_milli[whole] = smaller.gpu_milli

    def first_fits(
        self,
        state: ClusterState,
        shape: TaskShape,
        milli: int,
        eligible: Mask,
        *,
        nodes: Mask,
        limit: int,
    ) -> list[tuple[int, list[Victim]]]:
        """Up to ``limit`` nodes in ``nodes`` (cheapest first-fit prefix first), each with its
        eligible victims in order (module docstring). ``milli`` is the share each GPU must
        have free (the request's, or a whole GPU when the profile counts GPUs as integers)."""
        take = self._entries(eligible, nodes)
        if not len(take):
            return []
        node = self.e_node[take]
        victim = self.e_victim[take]
        count = len(take)
        opens = _changes(node)  # an entry that starts its node's segment
        starts = np.flatnonzero(opens)
        segment: I64 = np.cumsum(opens, dtype=np.int64) - 1
        head = starts[segment]  # each entry's segment start

        def running(x: I64) -> I64:
            total = np.cumsum(x, axis=0)
            return total - (total[starts] - x[starts])[segment]

        fit = state.cpu_free[node] + running(self.e_cpu[take]) >= shape.cpu_milli
        fit &= state.mem_free[node] + running(self.e_mem[take]) >= shape.memory_mib
        if shape.num_gpu:
            gpu = state.gpu_free[node] + running(self.e_gpu[take])
            fit &= np.count_nonzero(gpu >= milli, axis=1) >= shape.num_gpu
        hits = np.flatnonzero(fit)
        if not len(hits):
            return []
        first = hits[_changes(segment[hits])]  # the first fitting entry of each node
        lead = head[first]
        whole = self.whole[victim].astype(np.int64)
        freed = self.gpu_milli[victim]
        wholes = np.cumsum(whole)
        gpus = np.cumsum(freed)
        top = whole * (self.priority[victim] - self._low + 1)
        span = int(top.max()) + 1
        top = np.maximum.accumulate(top + segment * span) - segment * span
        best = np.lexsort(
            (
                victim[first],  # ties: the prefix ending earliest in the victim order
                first - lead + 1,  # evictions
                gpus[first] - gpus[lead] + freed[lead],
                top[first],
                wholes[first] - wholes[lead] + whole[lead],
            )
        )[:limit]
        out = []
        for pos in first[best].tolist():
            s = int(segment[pos])
            stop = int(starts[s + 1]) if s + 1 < len(starts) else count
            ranks = victim[int(starts[s]) : stop].tolist()
            out.append((int(node[pos]), [self.victims[r] for r in ranks]))
        return out

    def pods_bound(
        self,
        state: ClusterState,
        shape: TaskShape,
        milli: int,
        eligible: Mask,
        *,
        nodes: Mask | None = None,
    ) -> NDArray[np.int64]:
        """Per node: pods of ``shape`` that could fit were every eligible victim evicted
        (module docstring); ``milli`` as in :meth:`first_fits`. ``nodes``: only these nodes'
        figures are wanted (the others are returned as if they had no victims)."""
        take = self._entries(eligible, nodes)
        node = self.e_node[take]
        size = state.size
        cpu = state.cpu_free + np.bincount(node, self.e_cpu[take], minlength=size).astype(np.int64)
        mem = state.mem_free + np.bincount(node, self.e_mem[take], minlength=size).astype(np.int64)
        big = np.iinfo(np.int64).max
        pods = np.full(size, big, dtype=np.int64)
        if shape.cpu_milli:
            pods = np.minimum(pods, cpu // shape.cpu_milli)
        if shape.memory_mib:
            pods = np.minimum(pods, mem // shape.memory_mib)
        if shape.num_gpu:
            gpu = state.gpu_free.astype(np.int64)
            if len(take):  # entries are sorted by node: one segmented sum per node
                starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
                gpu[node[starts]] += np.add.reduceat(self.e_gpu[take], starts, axis=0)
            units = (gpu // milli).sum(axis=1)
            pods = np.minimum(pods, units // shape.num_gpu)
        return pods


def _changes(x: I64) -> Mask:
    """``out[i]``: whether ``x[i]`` differs from ``x[i - 1]`` (``out[0]`` is true)."""
    out = np.empty(len(x), dtype=np.bool_)
    if len(x):
        out[0] = True
        np.not_equal(x[1:], x[:-1], out=out[1:])
    return out
