"""The victims of one disruptive action as flat arrays, so a preemptor's search is vector work.

A *victim* (:class:`Victim`) is one elastic member of a running job or
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
order :func:`~gpusched.actions.victim_fit.set_cost` compares) -- is a segmented cumulative sum (a
segmented running maximum for the priority) too. :meth:`VictimIndex.first_fits` returns the
nodes with the cheapest prefixes, which the caller then refines exactly.

What every node would have free with *all* of a class's eligible victims gone -- which nodes
have a first-fit prefix at all, and how many pods of a gang's shape could fit -- is kept per
eligibility class by :mod:`.victim_room`, which also keeps each shape's first-fit keys.

Cost: building is one pass over the victims' pods; each query is a few vector operations over
the eligible entries (about the number of running pods), no Python loop over nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import Allocation, ClusterState, RunningJob
from gpusched.framework.allocation import AllocationMap
from gpusched.framework.release_batch import index_ranges
from gpusched.model import Job, JobId, QueueName, Task, TaskId, TaskShape
from gpusched.plugins.filters import row_counts

__all__ = ["Victim", "VictimIndex", "key_order"]

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
    ``priority``, ``whole``, ``gpu_milli`` and ``queue`` (an index into ``queue_names``) are
    per victim, in order.
    """

    def __init__(
        self,
        state: ClusterState,
        victims: Sequence[Victim],
        *,
        allocations: Mapping[TaskId, Allocation] | None = None,
    ) -> None:
        """``allocations``: the state's, as a plain mapping to read instead of the layered
        map (:meth:`~gpusched.framework.allocation.AllocationMap.as_dict`)."""
        self.victims: list[Victim] = list(victims)
        count = len(victims)
        jobs = [v.run.job for v in victims]
        self.priority: I64 = np.array([j.priority for j in jobs], dtype=np.int64)
        self.whole: Mask = np.array([v.whole for v in victims], dtype=np.bool_)
        self.gpu_milli: I64 = np.array([v.gpu_milli for v in victims], dtype=np.int64)
        self.alive: Mask = np.ones(count, dtype=np.bool_)
        #: ``touched[v]``: the :attr:`revision` at which victim ``v`` was last evicted or made
        #: smaller (0: never), so a kept answer (:mod:`.victim_room`) can tell whose entries
        #: changed.
        self.touched: I64 = np.zeros(count, dtype=np.int64)
        self.revision = 0
        self._low = int(self.priority.min()) if count else 0
        self.queue_names: tuple[QueueName, ...] = tuple(sorted({j.queue for j in jobs}))
        code = {q: i for i, q in enumerate(self.queue_names)}
        self.queue: I64 = np.array([code[j.queue] for j in jobs], dtype=np.int64)
        self._rank: dict[int, int] = {id(v): r for r, v in enumerate(victims)}
        #: Masks over the victims that an action keeps for this index, by its own keys
        #: (eligibility classes recur from preemptor to preemptor); read-only once made.
        self.masks: dict[object, Mask] = {}
        self._of_job: dict[JobId, list[int]] = {}
        for rank, job in enumerate(jobs):
            ranks_of = self._of_job.get(job.id)
            if ranks_of is None:
                self._of_job[job.id] = [rank]
            else:
                ranks_of.append(rank)
        self._build_entries(
            state, victims, state.allocations if allocations is None else allocations
        )

    def _build_entries(
        self,
        state: ClusterState,
        victims: Sequence[Victim],
        allocations: Mapping[TaskId, Allocation] | AllocationMap,
    ) -> None:
        """One entry per (victim, node) (module docstring), sorted by node; the victims'
        order is kept within a node. A GPU's share is summed over the entry's pods as one
        ``bincount`` over (entry, slot) pairs."""
        members: set[TaskId] = {t.id for v in victims if not v.whole for t in v.tasks}
        width = state.gpu_slots
        nodes: list[int] = []
        ranks: list[int] = []
        cpu: list[int] = []
        mem: list[int] = []
        slots: list[int] = []  # entry * width + GPU, one per GPU of each pod
        shares: list[int] = []
        for rank, v in enumerate(victims):
            tasks = v.tasks
            if len(tasks) == 1 and not (v.whole and tasks[0].id in members):  # one pod
                a = allocations[tasks[0].id]
                at = len(nodes) * width
                nodes.append(a.node)
                ranks.append(rank)
                cpu.append(a.cpu_milli)
                mem.append(a.memory_mib)
                for g in a.gpus:
                    slots.append(at + g)
                    shares.append(a.gpu_milli)
                continue
            where: dict[int, int] = {}  # node -> entry position
            for task in tasks:
                if v.whole and task.id in members:
                    continue
                a = allocations[task.id]
                pos = where.get(a.node)
                if pos is None:
                    pos = where[a.node] = len(nodes)
                    nodes.append(a.node)
                    ranks.append(rank)
                    cpu.append(0)
                    mem.append(0)
                cpu[pos] += a.cpu_milli
                mem[pos] += a.memory_mib
                for g in a.gpus:
                    slots.append(pos * width + g)
                    shares.append(a.gpu_milli)
        node = np.array(nodes, dtype=np.int64)
        order = np.argsort(node, kind="stable")
        gpu = np.bincount(
            np.array(slots, dtype=np.int64),
            np.array(shares, dtype=np.int64),
            minlength=len(nodes) * width,
        ).astype(np.int64)  # (float sums of small integers: exact)
        self.e_node: I64 = node[order]
        self.e_victim: I64 = np.array(ranks, dtype=np.int64)[order]
        self.e_cpu: I64 = np.array(cpu, dtype=np.int64)[order]
        self.e_mem: I64 = np.array(mem, dtype=np.int64)[order]
        self.e_gpu: I64 = gpu.reshape(-1, width)[order]
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
        """Positions of every victim of running job ``job`` (members, then the whole job;
        none if it is not in the index)."""
        return self._of_job.get(job, [])

    def ordered(self, eligible: Mask) -> list[Victim]:
        """The eligible victims, cheapest first."""
        return [self.victims[r] for r in np.flatnonzero(eligible & self.alive).tolist()]

    def remove(self, evicted: Sequence[Victim]) -> None:
        """Forget ``evicted``: a whole job takes its members with it; an evicted member leaves
        its job's whole victim smaller."""
        self.revision += 1
        for v in evicted:
            if v.whole:
                self.alive[self._of_job[v.job.id]] = False
                self.touched[self._of_job[v.job.id]] = self.revision
                continue
            self.alive[self._rank[id(v)]] = False
            whole = self._of_job[v.job.id][-1]  # a job's whole victim follows its members
            self.touched[[self._rank[id(v)], whole]] = self.revision
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
        hit, keys = self.fit_keys(state, shape, milli, eligible, nodes=nodes)
        return self.ranked(hit, keys, eligible & self.alive, limit)

    def fit_keys(
        self, state: ClusterState, shape: TaskShape, milli: int, eligible: Mask, *, nodes: Mask
    ) -> tuple[I64, I64]:
        """The nodes of ``nodes`` where a prefix of the eligible victims makes room, ascending,
        and each one's first-fit prefix cost: columns ``(whole jobs, top priority, GPUs freed,
        evictions, rank of its last victim)``, compared in that order (module docstring).

        A node's figures depend only on its own row and entries. Running sums restart at each
        node's first entry ``s`` from the node's free resources::

            run[i] = T[i] - (T[s] - free[node])      T[i] = SUM_{j <= i} x[j]  (T[s]: before s)
        """
        take = self._entries(eligible, nodes)
        if not len(take):
            return _NO_HITS
        node = self.e_node[take]
        victim = self.e_victim[take]
        opens = _changes(node)  # an entry that starts its node's segment
        starts = np.flatnonzero(opens)
        segment: I64 = np.cumsum(opens, dtype=np.int64) - 1
        own = node[starts]
        fit = _running(self.e_cpu[take], starts, segment, state.cpu_free[own]) >= shape.cpu_milli
        fit &= _running(self.e_mem[take], starts, segment, state.mem_free[own]) >= shape.memory_mib
        if shape.num_gpu:
            gpu = _running(self.e_gpu[take], starts, segment, state.gpu_free[own])
            fit &= row_counts(gpu >= milli) >= shape.num_gpu
        hits = np.flatnonzero(fit)
        if not len(hits):
            return _NO_HITS
        first = hits[_changes(segment[hits])]  # the first fitting entry of each node
        lead = starts[segment[first]]
        whole = self.whole[victim].astype(np.int64)
        freed = self.gpu_milli[victim]
        wholes = np.cumsum(whole)
        gpus = np.cumsum(freed)
        top = whole * (self.priority[victim] - self._low + 1)
        span = int(top.max()) + 1
        top = np.maximum.accumulate(top + segment * span) - segment * span
        keys = np.stack(
            (
                wholes[first] - wholes[lead] + whole[lead],
                top[first],
                gpus[first] - gpus[lead] + freed[lead],
                first - lead + 1,  # evictions
                victim[first],  # ties: the prefix ending earliest in the victim order
            ),
            axis=1,
        )
        return node[first], keys

    def ranked(
        self, hit: I64, keys: I64, chosen: Mask, limit: int
    ) -> list[tuple[int, list[Victim]]]:
        """The ``limit`` nodes of ``hit`` with the smallest ``keys`` (:meth:`fit_keys`; ties:
        the lower node), each with its ``chosen`` victims in order."""
        if not len(hit):
            return []
        return self.on_nodes(hit[key_order(hit, keys)[:limit]].tolist(), chosen)

    def on_nodes(self, nodes: list[int], chosen: Mask) -> list[tuple[int, list[Victim]]]:
        """Each of ``nodes`` with its ``chosen`` victims in order."""
        victims = self.victims
        out = []
        for n in nodes:
            ranks = self.e_victim[self.node_start[n] : self.node_start[n + 1]].tolist()
            out.append((n, [victims[r] for r in ranks if chosen[r]]))
        return out


def key_order(hit: I64, keys: I64) -> I64:
    """The order of nodes ``hit`` by their first-fit ``keys`` (:meth:`VictimIndex.fit_keys`),
    ties by node: a total order, the nodes being distinct."""
    order: I64 = np.lexsort((hit, *keys.T[::-1]))
    return order


_NO_HITS: tuple[I64, I64] = (np.zeros(0, dtype=np.int64), np.zeros((0, 5), dtype=np.int64))


def _running(x: NDArray[np.integer], starts: I64, segment: I64, base: NDArray[np.integer]) -> I64:
    """Segmented running sums of ``x`` (rows: entries, in segments starting at ``starts``;
    ``segment``: each row's segment) plus each segment's ``base`` (:meth:`VictimIndex.fit_keys`)."""
    total = np.zeros((len(x) + 1, *x.shape[1:]), dtype=np.int64)
    np.cumsum(x, axis=0, out=total[1:])
    out: I64 = total[1:] - (total[starts] - base)[segment]
    return out


def _changes(x: I64) -> Mask:
    """``out[i]``: whether ``x[i]`` differs from ``x[i - 1]`` (``out[0]`` is true)."""
    out = np.empty(len(x), dtype=np.bool_)
    if len(x):
        out[0] = True
        np.not_equal(x[1:], x[:-1], out=out[1:])
    return out
