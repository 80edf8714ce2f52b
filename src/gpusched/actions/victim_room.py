"""What every node would have free were all of a preemptor's eligible victims gone, kept per
eligibility class and brought up to date where something changed, so that a request no
eviction can help is turned down with a few vector operations.

A *class* is one eligibility mask ``B`` over the index's victims (before liveness): preemptors
that may take the same victims (same action rule, priority, queue, borrowing queues, evictors)
share it. With ``E_n`` the entries on node ``n`` of alive victims of ``B``
(:mod:`.victim_index`), the node's *room* is::

    room_n = free_n + SUM_{e in E_n} freed(e)       (CPU, memory, each GPU's share)

and it answers two questions exactly:

* **one pod** of CPU ``c``, memory ``m`` and ``k`` GPUs of share ``s``: node ``n`` has a
  first-fit prefix (:meth:`~gpusched.actions.victim_index.VictimIndex.first_fits`) iff ``E_n``
  is not empty and ``room_n`` fits the pod -- running sums only grow, so some prefix fits iff
  the whole of ``E_n`` does (:meth:`Room.fits`);
* **gang bound**: with every victim of ``B`` gone, how many pods of one shape could fit on
  node ``n`` (:meth:`Room.pods`; a gang whose pods of some shape exceed ``SUM_n pods_n`` over
  feasible nodes has no victim set at all, so the costly global search is skipped)::

      pods_n = min( cpu_n / c, mem_n / m, (SUM_g floor(gpu_n[g] / s)) / k )   (integer division)

**Keeping it.** ``room_n`` depends on node ``n``'s row of the state and on which of its entries
are alive. A row changes only with the node's version stamp; an entry dies only when its victim
is evicted, which releases the victim's pods and so changes its nodes' stamps too (its nodes are
marked as well, from the index's ``touched`` record). So from one query to the next only the
nodes::

    C = {n : version[n] changed}  U  {nodes of victims evicted or made smaller since}

are recomputed. Each answer per pod shape is kept too, and brought up to date on the nodes
recomputed since it was (:class:`Room` keeps, per node, the update that last recomputed it).
So are each shape's first-fit keys (:meth:`~gpusched.actions.victim_index.VictimIndex.fit_keys`):
a node's keys depend on its row and on its chosen entries with their figures (a whole victim's
GPUs shrink when one of its members is evicted, which marks its nodes), so :meth:`Room.first_fits`
recomputes only the nodes recomputed since, or asked now and not then (or the other way).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpusched.actions.victim_index import (
    Victim,
    VictimIndex,
    _changes,
    key_order,
)
from gpusched.framework import ClusterState
from gpusched.framework.release_batch import index_ranges
from gpusched.model import TaskShape
from gpusched.plugins.filters import row_counts

__all__ = ["KEPT_ROOMS", "Room", "Rooms"]

I64 = NDArray[np.int64]
Mask = NDArray[np.bool_]

#: Eligibility classes whose rooms :class:`Rooms` keeps at once.
KEPT_ROOMS = 64

#: Beyond this many victims evicted or made smaller since the last update, their nodes are
#: marked with one pass over the entries rather than one by one.
_FEW_MOVED = 32


class Room:
    """The room of every node for one eligibility class ``base`` (module docstring).

    ``chosen`` (``base`` and alive) and ``whole_gpu`` (GPU milli of the chosen whole victims)
    are as of the last :meth:`refresh`; arrays returned by :meth:`fits` and :meth:`pods` are
    valid until the next one.
    """

    __slots__ = (
        "_answers",
        "_first",
        "_recomputed",
        "_revision",
        "_seen",
        "_stamps",
        "_updates",
        "_whole",
        "base",
        "chosen",
        "count",
        "cpu",
        "gpu",
        "index",
        "mem",
        "whole_gpu",
    )

    def __init__(self, index: VictimIndex, state: ClusterState, base: Mask) -> None:
        self.index = index
        self.base = base
        self.chosen: Mask = base & index.alive
        #: Per victim: the GPU milli it adds to ``whole_gpu`` (a chosen whole victim's, else
        #: 0), so an update adds the change of the victims touched since instead of summing
        #: them all again (only touched victims change liveness or size: ``index.touched``).
        self._whole: I64 = np.where(self.chosen & index.whole, index.gpu_milli, 0)
        self.whole_gpu = int(self._whole.sum())
        self._revision = index.revision
        self._stamps: I64 = state.version.copy()
        #: The state and its clock (:attr:`~gpusched.framework.state.VersionClock.now`) as of
        #: the last refresh: while both stand, no version stamp has moved since.
        self._seen: tuple[ClusterState, int] = (state, state.clock.now)
        self.count, self.cpu, self.mem, self.gpu = _rows(index, state, self.chosen, None)
        #: Updates so far, and the one that last recomputed each node (an answer kept at update
        #: ``u`` is brought up to date on the nodes with ``_recomputed > u``).
        self._updates = 0
        self._recomputed: I64 = np.zeros(state.size, dtype=np.int64)
        self._answers: dict[tuple[str, TaskShape, int], tuple[int, Any]] = {}
        self._first: dict[tuple[TaskShape, int], _Kept] = {}

    def refresh(self, state: ClusterState) -> None:
        """Bring the rooms up to date with ``state`` and the index's liveness (module
        docstring)."""
        index = self.index
        seen = (state, state.clock.now)
        if (
            index.revision == self._revision
            and seen[0] is self._seen[0]
            and seen[1] == self._seen[1]
        ):
            return  # (nothing changed: a state the clock has not moved for, no eviction)
        self._seen = seen
        changed: Mask = state.version != self._stamps
        if index.revision != self._revision:
            chosen = self.chosen = self.base & index.alive
            moved = np.flatnonzero(index.touched > self._revision)
            whole = self._whole
            if len(moved) > _FEW_MOVED:
                changed[index.e_node[np.isin(index.e_victim, moved)]] = True
                now = np.where(chosen[moved] & index.whole[moved], index.gpu_milli[moved], 0)
                self.whole_gpu += int(now.sum()) - int(whole[moved].sum())
                whole[moved] = now
            else:
                for r in moved.tolist():
                    changed[list(index.victims[r].nodes)] = True
                    milli = int(index.gpu_milli[r]) if chosen[r] and index.whole[r] else 0
                    self.whole_gpu += milli - int(whole[r])
                    whole[r] = milli
            self._revision = index.revision
        nodes = np.flatnonzero(changed)
        if not len(nodes):
            return
        self._stamps = state.version.copy()
        count, cpu, mem, gpu = _rows(index, state, self.chosen, nodes)
        self.count[nodes] = count
        self.cpu[nodes] = cpu
        self.mem[nodes] = mem
        self.gpu[nodes] = gpu
        self._updates += 1
        self._recomputed[nodes] = self._updates

    def fits(self, shape: TaskShape, milli: int) -> Mask:
        """Per node: whether some prefix of its chosen entries lets one pod of ``shape`` fit
        (each GPU with ``milli`` free; module docstring)."""
        mask: Mask = self._answer("fits", shape, milli)
        return mask

    def pods(self, shape: TaskShape, milli: int) -> I64:
        """Per node: pods of ``shape`` that could fit were every chosen victim evicted (each
        GPU's share counted in units of ``milli``; module docstring)."""
        pods: I64 = self._answer("pods", shape, milli)
        return pods

    def first_fits(
        self, state: ClusterState, shape: TaskShape, milli: int, *, nodes: Mask, limit: int
    ) -> list[tuple[int, list[Victim]]]:
        """:meth:`~gpusched.actions.victim_index.VictimIndex.first_fits` with the chosen
        victims, on ``state`` as of the last :meth:`refresh`; each node's keys are kept from
        the last query of the same shape and recomputed only where they may differ (module
        docstring)."""
        index = self.index
        kept = self._first.get((shape, milli))
        if kept is None:
            hit, keys = _in_key_order(
                *index.fit_keys(state, shape, milli, self.chosen, nodes=nodes)
            )
        else:
            changed = (self._recomputed > kept.update) | (nodes != kept.nodes)
            stay = ~changed[kept.hit]
            hit, keys = kept.hit[stay], kept.keys[stay]  # (still in key order)
            ask = changed & nodes
            if ask.any():
                new, more = index.fit_keys(state, shape, milli, self.chosen, nodes=ask)
                if len(new):
                    hit, keys = _in_key_order(
                        np.concatenate((hit, new)), np.concatenate((keys, more))
                    )
        self._first[shape, milli] = _Kept(hit, keys, nodes.copy(), self._updates)
        return index.on_nodes(hit[:limit].tolist(), self.chosen)

    def _answer(self, kind: str, shape: TaskShape, milli: int) -> Any:
        key = (kind, shape, milli)
        kept = self._answers.get(key)
        done = self._updates
        compute = _fit if kind == "fits" else _pods
        if kept is None:
            out = compute(self, shape, milli, None)
        else:
            out = kept[1]
            if kept[0] == done:
                return out
            nodes = np.flatnonzero(self._recomputed > kept[0])
            out[nodes] = compute(self, shape, milli, nodes)
        self._answers[key] = (done, out)
        return out


class _Kept:
    """One shape's first-fit keys: nodes ``hit`` with their ``keys`` among the asked
    ``nodes``, as of update ``update`` of the room; in key order
    (:func:`~gpusched.actions.victim_index.key_order`, a total order), so the cheapest nodes
    of any subset that keeps its order lead it: when an update finds no new nodes, the nodes
    kept are ranked already."""

    __slots__ = ("hit", "keys", "nodes", "update")

    def __init__(self, hit: I64, keys: I64, nodes: Mask, update: int) -> None:
        self.hit = hit
        self.keys = keys
        self.nodes = nodes
        self.update = update


class Rooms:
    """The rooms of one index by eligibility class; at most :data:`KEPT_ROOMS`, the least
    recently asked dropped."""

    __slots__ = ("_rooms", "index")

    def __init__(self, index: VictimIndex) -> None:
        self.index = index
        self._rooms: dict[bytes, Room] = {}

    def get(self, state: ClusterState, base: Mask) -> Room:
        """The room of class ``base`` (victims ``base`` may take, before liveness), up to date
        with ``state``."""
        key = np.packbits(base).tobytes()
        room = self._rooms.pop(key, None)
        if room is None:
            room = Room(self.index, state, base)
        else:
            room.refresh(state)
        self._rooms[key] = room
        if len(self._rooms) > KEPT_ROOMS:
            del self._rooms[next(iter(self._rooms))]
        return room


def _in_key_order(hit: I64, keys: I64) -> tuple[I64, I64]:
    """``hit`` and ``keys`` sorted by :func:`~gpusched.actions.victim_index.key_order`."""
    if len(hit) < 2:
        return hit, keys
    order = key_order(hit, keys)
    return hit[order], keys[order]


def _rows(
    index: VictimIndex, state: ClusterState, chosen: Mask, nodes: I64 | None
) -> tuple[I64, I64, I64, I64]:
    """Chosen entries and room (CPU, memory, GPU rows) of ``nodes`` (ascending; ``None``:
    every node). Entries are sorted by node, so each node's sums are one segment."""
    if nodes is None:
        entries = np.flatnonzero(chosen[index.e_victim])
        where = index.e_node[entries]
        size = state.size
        cpu = state.cpu_free.astype(np.int64)
        mem = state.mem_free.astype(np.int64)
        gpu = state.gpu_free.astype(np.int64)
    else:
        first = index.node_start[nodes]
        counts = index.node_start[nodes + 1] - first
        entries = index_ranges(first, counts)
        where = np.repeat(np.arange(len(nodes)), counts)
        keep = chosen[index.e_victim[entries]]
        entries, where = entries[keep], where[keep]
        size = len(nodes)
        cpu = state.cpu_free[nodes].astype(np.int64)
        mem = state.mem_free[nodes].astype(np.int64)
        gpu = state.gpu_free[nodes].astype(np.int64)
    count: I64 = np.bincount(where, minlength=size)
    if len(entries):
        starts = np.flatnonzero(_changes(where))
        at = where[starts]
        cpu[at] += np.add.reduceat(index.e_cpu[entries], starts)
        mem[at] += np.add.reduceat(index.e_mem[entries], starts)
        gpu[at] += np.add.reduceat(index.e_gpu[entries], starts, axis=0)
    return count, cpu, mem, gpu


def _fit(room: Room, shape: TaskShape, milli: int, nodes: I64 | None) -> Mask:
    """:meth:`Room.fits` on ``nodes`` (``None``: every node)."""
    pick = slice(None) if nodes is None else nodes
    fit: Mask = (room.count[pick] > 0) & (room.cpu[pick] >= shape.cpu_milli)
    fit &= room.mem[pick] >= shape.memory_mib
    if shape.num_gpu:
        fit &= row_counts(room.gpu[pick] >= milli) >= shape.num_gpu
    return fit


def _pods(room: Room, shape: TaskShape, milli: int, nodes: I64 | None) -> I64:
    """:meth:`Room.pods` on ``nodes`` (``None``: every node; formula in the module
    docstring)."""
    pick = slice(None) if nodes is None else nodes
    cpu = room.cpu[pick]
    pods: I64 = np.full(len(cpu), np.iinfo(np.int64).max, dtype=np.int64)
    if shape.cpu_milli:
        pods = np.minimum(pods, cpu // shape.cpu_milli)
    if shape.memory_mib:
        pods = np.minimum(pods, room.mem[pick] // shape.memory_mib)
    if shape.num_gpu:
        units = (room.gpu[pick] // milli).sum(axis=1)
        pods = np.minimum(pods, units // shape.num_gpu)
    return pods
