"""Struct-of-arrays cluster state: the form the scheduler's hot path works on.

Node capacity and free resources live in NumPy arrays indexed by node position, so a filter can
answer for every node with a handful of vector operations instead of a Python loop:

* ``cpu_free[n]``, ``mem_free[n]`` -- free CPU (millicores) and memory (MiB) of node ``n``;
* ``gpu_free[n, g]`` -- free share of GPU ``g`` of node ``n`` in milli-GPU (0..1000), and ``0``
  for slots beyond the node's GPU count. Every GPU request is at least 1 milli, so
  ``gpu_free >= request`` is never true there, and ``gpu_free.sum(axis=1)`` is the node's idle
  GPU share; ``gpu_cap`` tells real slots (1000) from padding (0);
* ``gpu_idle[n]`` -- ``SUM_g gpu_free[n, g]``, the node's free GPU share (kept up to date);
* ``model_id[n]`` -- index of the node's GPU model in :attr:`ClusterState.models`, ``-1`` for a
  CPU-only node;
* ``shape_count[n, c]`` -- how many tasks of GPU-shape class ``c`` (:data:`SHAPE_CLASSES`)
  node ``n`` hosts;
* ``gpu_usable_mib[n]`` -- memory of each of node ``n``'s GPUs available to tasks (GPU memory
  minus the driver's reserve; 0 when unknown), what requests by memory are converted against;
* ``version[n]`` -- a stamp that changes whenever node ``n`` changes. Stamps come from one
  :class:`VersionClock` shared by a state and all its copies, so a stamp never means two different
  contents and plugins may cache per-node results keyed on it.

Node order is meaningful: when scores tie, the scheduler may pick the first node in this order.

MIG-enabled GPUs (:mod:`gpusched.framework.mig`) keep ``gpu_cap`` 1000 but ``gpu_free`` 0, so
plain requests never fit there; their instances are in :attr:`ClusterState.mig` (``None`` when no
node has MIG), and a MIG task's :class:`Allocation` holds no plain GPU (``gpus == ()``) and
lists its instances in ``mig``. ``gpu_idle`` stays ``SUM_g gpu_free``; the MIG GPUs' idle share
(GPU-equivalents) is ``mig.idle_milli``, and :attr:`ClusterState.free_gpu_milli` adds both.

The cluster's network levels (:class:`~gpusched.model.network.NetworkTopology`) are given to
:meth:`ClusterState.from_nodes` or detected from the node labels; :meth:`ClusterState.domains`
numbers each level's domains per node (derived data of the node list, shared by all copies).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from gpusched.errors import InvariantError
from gpusched.framework.mig import MigState
from gpusched.framework.numa import NumaState
from gpusched.model import (
    MILLI_PER_GPU,
    GpuModel,
    JobId,
    NetworkTopology,
    Node,
    NodeName,
    SharingMode,
    Task,
    TaskId,
)
from gpusched.model.mig import MigSlice
from gpusched.model.network import detect_network

__all__ = [
    "SHAPE_CLASSES",
    "Allocation",
    "AllocationMap",
    "ClusterState",
    "ReleaseBatch",
    "ReleaseRows",
    "VersionClock",
    "index_ranges",
    "shape_class",
]

#: Coarse GPU-shape classes of tasks, counted per node in ``ClusterState.shape_count``.
SHAPE_CLASSES = ("cpu-only", "sharing", "1-gpu", "2-gpu", "4-gpu", "8-gpu", "other")


def shape_class(num_gpu: int, gpu_milli: int) -> int:
    """Index into :data:`SHAPE_CLASSES` of a request of ``num_gpu`` x ``gpu_milli``."""
    if num_gpu == 0:
        return 0
    if num_gpu == 1 and gpu_milli < MILLI_PER_GPU:
        return 1
    return {1: 2, 2: 3, 4: 4, 8: 5}.get(num_gpu, 6)


I64 = NDArray[np.int64]
I32 = NDArray[np.int32]


class _Layout:
    """What a state and all its copies share: derived data of the node list (built lazily)."""

    __slots__ = ("cache", "empty", "network")

    def __init__(self) -> None:
        self.empty: ClusterState | None = None
        self.cache: dict[object, object] = {}
        self.network: NetworkTopology | None = None


class VersionClock:
    """Monotonic stamp source shared by a state and its working copies."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 1

    def tick(self) -> int:
        value = self._next
        self._next += 1
        return value

    def ticks(self, count: int) -> I64:
        """``count`` fresh stamps at once."""
        start = self._next
        self._next += count
        return np.arange(start, start + count, dtype=np.int64)


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
        if task in self._added:
            return True
        return task not in self._removed and self._in_base(task)

    def get(self, task: TaskId) -> Allocation | None:
        found = self._added.get(task)
        if found is not None or task in self._removed or self._base is None:
            return found
        return self._base.get(task)

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


class ReleaseBatch:
    """Allocations as flat arrays, in a given order, for :meth:`ClusterState.free_batch`.

    Entry ``i`` is one task (node, CPU, memory, shape class); its GPUs are entries
    ``gpu_offset[i] .. gpu_offset[i + 1]`` of ``gpu_slot`` (``node * G + g``) and ``gpu_milli``.
    Entries holding MIG instances are listed by :meth:`mig_entries`.
    """

    __slots__ = (
        "_mig",
        "cpu",
        "gpu_milli",
        "gpu_offset",
        "gpu_slot",
        "mem",
        "node",
        "shape",
        "width",
    )

    def __init__(self, allocations: Sequence[Allocation], gpu_slots: int) -> None:
        node: list[int] = []
        cpu: list[int] = []
        mem: list[int] = []
        shape: list[int] = []
        width: list[int] = []
        slot: list[int] = []
        milli: list[int] = []
        self._mig: list[tuple[int, Allocation]] = []
        for i, a in enumerate(allocations):  # one pass to plain lists; arrays made at the end
            if a.mig:
                self._mig.append((i, a))
            n, k, m = a.node, len(a.gpus), a.gpu_milli
            node.append(n)
            cpu.append(a.cpu_milli)
            mem.append(a.memory_mib)
            shape.append(shape_class(k, m))
            width.append(k)
            base = n * gpu_slots
            for g in a.gpus:
                slot.append(base + g)
                milli.append(m)
        self.node: I64 = np.asarray(node, dtype=np.int64)
        self.cpu: I64 = np.asarray(cpu, dtype=np.int64)
        self.mem: I64 = np.asarray(mem, dtype=np.int64)
        self.shape: I64 = np.asarray(shape, dtype=np.int64)
        self.width: I64 = np.asarray(width, dtype=np.int64)
        self.gpu_offset: I64 = np.concatenate([[0], np.cumsum(self.width)]).astype(np.int64)
        self.gpu_slot: I64 = np.asarray(slot, dtype=np.int64)
        self.gpu_milli: I64 = np.asarray(milli, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.node)

    def mig_entries(self) -> list[tuple[int, Allocation]]:
        """``(entry, allocation)`` of each entry holding MIG instances, by entry."""
        return self._mig

    def extended(self, other: ReleaseBatch) -> ReleaseBatch:
        """This batch followed by ``other``."""
        out = ReleaseBatch((), 0)
        out._mig = [*self._mig, *((i + len(self), a) for i, a in other._mig)]
        for name in ("node", "cpu", "mem", "shape", "width", "gpu_slot", "gpu_milli"):
            setattr(out, name, np.concatenate([getattr(self, name), getattr(other, name)]))
        out.gpu_offset = np.concatenate([[0], np.cumsum(out.width)]).astype(np.int64)
        return out

    def blocks(self, starts: I64, counts: I64) -> ReleaseBatch:
        """The entries ``starts[j] .. starts[j] + counts[j]`` for each ``j`` in turn."""
        entries = index_ranges(starts, counts)
        out = ReleaseBatch((), 0)
        for name in ("node", "cpu", "mem", "shape", "width"):
            setattr(out, name, getattr(self, name)[entries])
        gpus = index_ranges(self.gpu_offset[entries], out.width)
        out.gpu_slot = self.gpu_slot[gpus]
        out.gpu_milli = self.gpu_milli[gpus]
        out.gpu_offset = np.concatenate([[0], np.cumsum(out.width)]).astype(np.int64)
        if self._mig:
            where: dict[int, list[int]] = {}
            for pos, entry in enumerate(entries.tolist()):
                where.setdefault(entry, []).append(pos)
            out._mig = sorted((p, a) for i, a in self._mig for p in where.get(i, ()))
        return out


class ReleaseRows:
    """Running jobs' allocations as one flat :class:`ReleaseBatch`, a block of entries per job
    (what reservations release, :mod:`~gpusched.framework.timeline`), kept for one cycle.

    ``block[j] = (run, start, count)``: valid while ``run`` is still the job's running record
    (a job evicted and placed again gets a new one) and no elastic member of it was evicted
    (:meth:`~gpusched.framework.session.Session.evict_members` drops the block). A driver's
    :class:`~gpusched.framework.memo.CycleMemo` keeps the rows from cycle to cycle; blocks of
    jobs that ended stay in the batch until it is laid out anew.
    """

    __slots__ = ("batch", "block", "gpu_slots")

    def __init__(self, gpu_slots: int) -> None:
        self.gpu_slots = gpu_slots
        self.batch = ReleaseBatch((), gpu_slots)
        self.block: dict[JobId, tuple[object, int, int]] = {}


def index_ranges(starts: I64, counts: I64) -> I64:
    """``concat(arange(s, s + c) for s, c in zip(starts, counts))`` without a Python loop."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    shift = np.repeat(starts - (ends - counts), counts)
    out: I64 = np.arange(total, dtype=np.int64) + shift
    return out


class ClusterState:
    """Capacity, free resources and allocations of every node, as arrays.

    Build one with :meth:`from_nodes`; change it only through :meth:`allocate` and
    :meth:`release` (or a :class:`~gpusched.framework.statement.Statement`), which keep the
    free arrays, allocations and version stamps consistent.
    """

    __slots__ = (
        "_layout",
        "_shared",
        "allocations",
        "clock",
        "cpu_cap",
        "cpu_free",
        "gpu_cap",
        "gpu_count",
        "gpu_free",
        "gpu_idle",
        "gpu_memory_mib",
        "gpu_usable_mib",
        "index",
        "mem_cap",
        "mem_free",
        "mig",
        "model_id",
        "models",
        "names",
        "nodes",
        "numa",
        "shape_count",
        "version",
    )

    nodes: tuple[Node, ...]
    names: tuple[NodeName, ...]
    index: dict[NodeName, int]
    models: tuple[GpuModel, ...]
    cpu_cap: I64
    mem_cap: I64
    gpu_count: I64
    model_id: I64
    gpu_cap: I32
    gpu_memory_mib: I64
    gpu_usable_mib: I64
    cpu_free: I64
    mem_free: I64
    gpu_free: I32
    gpu_idle: I64
    shape_count: NDArray[np.int32]
    numa: NumaState
    version: I64
    clock: VersionClock
    allocations: AllocationMap
    mig: MigState | None
    _layout: _Layout
    _shared: bool

    @classmethod
    def from_nodes(
        cls,
        nodes: Sequence[Node],
        *,
        models: Iterable[GpuModel] = (),
        network: NetworkTopology | None = None,
    ) -> ClusterState:
        """Lay ``nodes`` out as arrays, in the given order.

        ``models`` may pre-declare GPU models that no node has yet (so task model constraints
        naming them resolve); models seen on nodes are added in order of first appearance.
        ``network``: the cluster's network levels; ``None`` detects them from the labels
        (:func:`~gpusched.model.network.detect_network`).
        """
        names = tuple(n.name for n in nodes)
        index = {name: i for i, name in enumerate(names)}
        if len(index) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise InvariantError(f"duplicate node name {dup!r}")
        model_list: list[GpuModel] = list(dict.fromkeys(models))
        for node in nodes:
            if node.gpu_model is not None and node.gpu_model not in model_list:
                model_list.append(node.gpu_model)
        width = max((n.gpu_count for n in nodes), default=0)
        n = len(nodes)
        self = cls.__new__(cls)
        self.nodes = tuple(nodes)
        self.names = names
        self.index = index
        self.models = tuple(model_list)
        self.cpu_cap = np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)
        self.mem_cap = np.array([nd.memory_mib for nd in nodes], dtype=np.int64)
        self.gpu_count = np.array([nd.gpu_count for nd in nodes], dtype=np.int64)
        self.model_id = np.array(
            [model_list.index(nd.gpu_model) if nd.gpu_model is not None else -1 for nd in nodes],
            dtype=np.int64,
        )
        self.gpu_memory_mib = np.array(
            [nd.gpus[0].memory_mib if nd.gpus else 0 for nd in nodes], dtype=np.int64
        )
        self.gpu_usable_mib = np.array([nd.gpu_usable_mib for nd in nodes], dtype=np.int64)
        slots = np.arange(width)[None, :]
        self.gpu_cap = np.where(slots < self.gpu_count[:, None], MILLI_PER_GPU, 0).astype(np.int32)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        self.gpu_free = self.gpu_cap.copy()
        self.mig = MigState.build(nodes)
        for m in self.mig.gpus if self.mig is not None else ():
            self.gpu_free[m.node, m.gpu] = 0  # MIG GPUs take MIG requests only
        self.gpu_idle = self.gpu_free.sum(axis=1, dtype=np.int64)
        self.shape_count = np.zeros((n, len(SHAPE_CLASSES)), dtype=np.int32)
        self.clock = VersionClock()
        self.version = np.zeros(n, dtype=np.int64)
        self.allocations = AllocationMap()
        self.numa = NumaState.build(nodes)
        self._layout = _Layout()
        self._layout.network = network
        self._shared = False
        return self

    # -- views -----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @property
    def gpu_slots(self) -> int:
        """Width of the per-GPU arrays (the largest GPU count of any node)."""
        return int(self.gpu_free.shape[1])

    @property
    def total_gpu_milli(self) -> int:
        """Cluster GPU capacity in milli-GPU."""
        return int(self.gpu_cap.sum())

    @property
    def used_gpu_milli(self) -> int:
        """GPU share held by allocations, in milli-GPU (MIG instances in GPU-equivalents)."""
        return self.total_gpu_milli - self.free_gpu_milli

    @property
    def free_gpu_milli(self) -> int:
        """GPU share not held: ``SUM gpu_idle`` plus the MIG GPUs' idle GPU-equivalents."""
        idle = int(self.gpu_idle.sum())
        return idle if self.mig is None else idle + self.mig.idle_milli

    def copy(self, *, allocations: bool = True) -> ClusterState:
        """A working copy: arrays and allocations copied, the version clock shared.

        ``allocations=False`` gives the copy an empty allocation map: a what-if state for fit
        tests only (its free arrays may then be changed with :meth:`free_batch`), which costs no
        map layer at all. Plugins read free arrays, never the map.
        """
        other = ClusterState.__new__(ClusterState)
        other.nodes = self.nodes
        other.names = self.names
        other.index = self.index
        other.models = self.models
        other.cpu_cap = self.cpu_cap
        other.mem_cap = self.mem_cap
        other.gpu_count = self.gpu_count
        other.model_id = self.model_id
        other.gpu_cap = self.gpu_cap
        other.gpu_memory_mib = self.gpu_memory_mib
        other.gpu_usable_mib = self.gpu_usable_mib
        other.cpu_free = self.cpu_free.copy()
        other.mem_free = self.mem_free.copy()
        other.gpu_free = self.gpu_free.copy()
        other.gpu_idle = self.gpu_idle.copy()
        other.shape_count = self.shape_count.copy()
        other.numa = self.numa.copy()
        other.version = self.version.copy()
        other.clock = self.clock
        other.mig = None if self.mig is None else self.mig.copy()
        if not allocations:
            other.allocations = AllocationMap()
        else:
            # Both states now read through the current map, which must not change any more:
            # the next change to this state happens on a fresh layer (see _own_allocations).
            self._shared = True
            other.allocations = AllocationMap(self.allocations)
        other._shared = False
        other._layout = self._layout
        return other

    def empty(self) -> ClusterState:
        """The same nodes with nothing allocated (for "could this ever fit?" questions)."""
        layout = self._layout
        if layout.empty is None:
            layout.empty = ClusterState.from_nodes(
                self.nodes, models=self.models, network=layout.network
            )
            layout.empty._layout = layout
            # Stamp 0 means "nothing ever allocated" in every state of a layout; later stamps
            # of the empty state and its copies come from the same clock, so none collides.
            layout.empty.clock = self.clock
        return layout.empty

    @property
    def layout_cache(self) -> dict[object, object]:
        """A cache shared by this state, its copies and its empty state, for values that depend
        only on the node list (never on free resources)."""
        return self._layout.cache

    @property
    def node_models(self) -> list[str]:
        """GPU model name of each node (``""`` for a CPU-only node), as a plain list for
        per-task lookups in Python loops."""
        key = "node-models"
        cache = self._layout.cache
        names = cache.get(key)
        if names is None:
            names = cache[key] = [self.models[m] if m >= 0 else "" for m in self.model_id.tolist()]
        assert isinstance(names, list)
        return names

    def model_mask(self, models: frozenset[GpuModel]) -> NDArray[np.bool_]:
        """Nodes whose GPU model is one of ``models`` (all GPU nodes when empty)."""
        key = ("model-mask", models)
        mask = self._layout.cache.get(key)
        if mask is None:
            ids = [i for i, m in enumerate(self.models) if not models or m in models]
            mask = np.isin(self.model_id, ids)
            mask.setflags(write=False)
            self._layout.cache[key] = mask
        return mask  # type: ignore[return-value]

    @property
    def network(self) -> NetworkTopology:
        """The cluster's network levels, coarse to fine (given, or detected from labels)."""
        layout = self._layout
        if layout.network is None:
            layout.network = detect_network([n.labels for n in self.nodes])
        return layout.network

    def domains(self, level: int) -> I64:
        """Domain number of every node at network level ``level`` (index into
        ``network.levels``): nodes with the same label value share a number, numbered in
        order of first appearance; ``-1`` where the node lacks the label. Read-only, cached."""
        key = ("network-domains", level)
        ids = self._layout.cache.get(key)
        if ids is None:
            label = self.network.levels[level].label
            seen: dict[str, int] = {}
            ids = np.array(
                [
                    seen.setdefault(v, len(seen)) if (v := n.labels.get(label)) is not None else -1
                    for n in self.nodes
                ],
                dtype=np.int64,
            )
            ids.setflags(write=False)
            self._layout.cache[key] = ids
        return ids  # type: ignore[return-value]

    def domain_names(self, level: int) -> tuple[str, ...]:
        """Label value of each domain number of ``level`` (see :meth:`domains`)."""
        key = ("network-domain-names", level)
        names = self._layout.cache.get(key)
        if names is None:
            label = self.network.levels[level].label
            names = tuple(
                dict.fromkeys(v for n in self.nodes if (v := n.labels.get(label)) is not None)
            )
            self._layout.cache[key] = names
        return names  # type: ignore[return-value]

    def sharing_mask(self) -> NDArray[np.bool_] | None:
        """Nodes whose GPUs admit fractional requests, or ``None`` when every node does."""
        key = "sharing-mask"
        if key not in self._layout.cache:
            mask = np.array([n.gpu_sharing is not SharingMode.EXCLUSIVE for n in self.nodes])
            mask.setflags(write=False)
            self._layout.cache[key] = None if mask.all() else mask
        return self._layout.cache[key]  # type: ignore[return-value]

    # -- changes ---------------------------------------------------------------------------

    def _own_allocations(self) -> AllocationMap:
        """The allocation map, made safe to change (not read through by any live copy)."""
        if self._shared and self.allocations.shared:
            base = self.allocations
            self.allocations = (
                base.flattened() if base.depth >= AllocationMap.MAX_DEPTH else AllocationMap(base)
            )
        self._shared = False
        return self.allocations

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

    def free_batch(self, batch: ReleaseBatch, count: int) -> None:
        """Return the resources of the first ``count`` entries of ``batch`` to the free arrays,
        as vector sums, without touching the allocation map (what-if states of
        :meth:`copy` with ``allocations=False``)::

            cpu_free[n] += SUM_{i < count, node_i = n} cpu_i        (likewise memory)
            gpu_free[n, g] += SUM_{j < gcount, (node_j, gpu_j) = (n, g)} milli_j
        """
        if count <= 0:
            return
        n = self.size
        node = batch.node[:count]
        self.cpu_free += np.bincount(node, batch.cpu[:count], minlength=n).astype(np.int64)
        self.mem_free += np.bincount(node, batch.mem[:count], minlength=n).astype(np.int64)
        classes = self.shape_count.shape[1]
        self.shape_count -= (
            np.bincount(node * classes + batch.shape[:count], minlength=n * classes)
            .reshape(n, classes)
            .astype(np.int32)
        )
        gcount = int(batch.gpu_offset[count])
        if gcount:
            width = self.gpu_slots
            slot = batch.gpu_slot[:gcount]
            milli = batch.gpu_milli[:gcount]
            self.gpu_free += (
                np.bincount(slot, milli, minlength=n * width).reshape(n, width).astype(np.int32)
            )
            self.gpu_idle += np.bincount(slot // width, milli, minlength=n).astype(np.int64)
        if self.mig is not None:
            for i, a in batch.mig_entries():
                if i < count:
                    self.mig.give(a.node, a.mig)
        changed = np.unique(node)
        self.version[changed] = self.clock.ticks(len(changed))

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
