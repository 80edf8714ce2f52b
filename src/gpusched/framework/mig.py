"""MIG in the cluster state: the instances of every MIG-enabled GPU and which are in use.

A GPU whose node gives it a :class:`~gpusched.model.mig.MigConfig` serves MIG requests only:
its plain share ``gpu_free`` stays 0, so whole-GPU and fractional requests never land on it,
while ``gpu_cap`` keeps its 1000 (quota capacity counts it). Its instances live here:

* **static** GPU: the node's layout is fixed; a request takes a free instance of its profile;
* **reconfigurable** GPU: instances exist only while a task holds them; a request creates one
  at a start where it fits beside the instances already there
  (:func:`~gpusched.model.mig_layout.feasible_starts`), so the layout is always the set in use.

Fit (per node, for ``k`` instances of profile ``P``)::

    fit(n, P) = SUM_{MIG GPUs g of n} count(g, P)
    count(g, P) = free instances of P in g's layout                      (static)
                = how many more P fit beside g's instances, greedily      (reconfigurable)

A node can host the task when ``fit(n, P) >= k`` (and CPU and memory fit). Greedy counting is
exact here: every profile's allowed starts are aligned to its size, so placing one instance
never blocks more than its own run of memory slices for the next one of the same profile.

Which instance (the slice rule), for each of the ``k`` instances in turn, over the candidates
``(g, s)`` of the chosen node, the smallest of::

    ( reconfigurable(g),             static instances first: they exist for this
      free_compute(g) after,         best fit: the fullest GPU, so empty GPUs stay whole
      -room(g) after,                reconfigurable: the layout that leaves the most room
                                     (:func:`~gpusched.model.mig_layout.layout_room`)
      g, s )                         then the lowest GPU index and start

``free_compute`` is 7 minus the compute slices in use (reconfigurable), or the compute slices of
the free instances (static). On an empty reconfigurable GPU this is exactly
:func:`~gpusched.model.mig_layout.choose_layout` for one instance (a lone ``1g.10gb`` goes to
slice 6).

Nodes choose *where*; this module only answers fit and the slice on the chosen node.

The plan (:func:`record_mig`, at the end of a cycle): every bind of a MIG task carries its
instances, and every reconfigurable GPU that gets an instance it did not have before the cycle
is listed in ``plan.mig_layouts`` with the layout it must have afterwards (``was_empty`` when
the scheduler chose it for an empty GPU). A driver creates the new instances before binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpusched.errors import ConfigError, InvariantError
from gpusched.framework.plan import MigLayout, Plan
from gpusched.model import MILLI_PER_GPU, Job, Node
from gpusched.model.mig import (
    COMPUTE_SLICES,
    MigGeometry,
    MigPlacement,
    MigSlice,
    geometry_for_gpu,
    mig_milli,
)
from gpusched.model.mig_layout import feasible_starts, layout_room

if TYPE_CHECKING:
    from gpusched.framework.state import ClusterState

__all__ = [
    "MigGpu",
    "MigState",
    "check_mig_requests",
    "mig_capable",
    "mig_fit_count",
    "offered_profiles",
    "record_mig",
]

I64 = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MigGpu:
    """One MIG-enabled GPU: where it is, its geometry, and its fixed layout (static)."""

    node: int
    gpu: int
    geometry: MigGeometry
    reconfigurable: bool
    layout: tuple[MigPlacement, ...]


class MigState:
    """Instances in use on every MIG-enabled GPU of a cluster state.

    The GPU list is shared by a state and its copies; the instances in use (``used``, per GPU,
    sorted by start) are copied with the state. ``held`` is the GPU-equivalent of all instances
    in use (milli-GPU, see :func:`~gpusched.model.mig.mig_milli`).
    """

    __slots__ = ("gpus", "held", "key", "of_node", "used")

    gpus: tuple[MigGpu, ...]
    key: dict[tuple[int, int], int]
    of_node: dict[int, tuple[int, ...]]
    used: list[tuple[MigPlacement, ...]]
    held: int

    @classmethod
    def build(cls, nodes: Sequence[Node]) -> MigState | None:
        """The MIG GPUs of ``nodes`` with nothing in use; ``None`` when no node has one."""
        gpus: list[MigGpu] = []
        for n, node in enumerate(nodes):
            for g, conf in enumerate(node.mig):
                if conf is None:
                    continue
                gpu = node.gpus[g]
                geo = geometry_for_gpu(gpu.model, gpu.memory_mib)
                if geo is None:  # Node checks this when built
                    raise InvariantError(f"node {node.name!r}: GPU {g} is not MIG-capable")
                gpus.append(MigGpu(n, g, geo, conf.reconfigurable, conf.layout))
        if not gpus:
            return None
        self = cls.__new__(cls)
        self.gpus = tuple(gpus)
        self.key = {(m.node, m.gpu): i for i, m in enumerate(gpus)}
        of_node: dict[int, list[int]] = {}
        for i, m in enumerate(gpus):
            of_node.setdefault(m.node, []).append(i)
        self.of_node = {n: tuple(ids) for n, ids in of_node.items()}
        self.used = [() for _ in gpus]
        self.held = 0
        return self

    def copy(self) -> MigState:
        other = MigState.__new__(MigState)
        other.gpus = self.gpus
        other.key = self.key
        other.of_node = self.of_node
        other.used = list(self.used)
        other.held = self.held
        return other

    # -- views -----------------------------------------------------------------------------

    @property
    def idle_milli(self) -> int:
        """GPU-equivalent of the MIG GPUs not held: ``1000 * #MIG GPUs - held``."""
        return MILLI_PER_GPU * len(self.gpus) - self.held

    def layout(self, node: int, gpu: int) -> tuple[MigPlacement, ...]:
        """The instances GPU ``gpu`` of ``node`` has now: its fixed layout (static) or the
        instances in use (reconfigurable)."""
        i = self.key[(node, gpu)]
        m = self.gpus[i]
        return self.used[i] if m.reconfigurable else m.layout

    def in_use(self, node: int, gpu: int) -> tuple[MigPlacement, ...]:
        """The instances of GPU ``gpu`` of ``node`` held by tasks."""
        return self.used[self.key[(node, gpu)]]

    def _starts(self, i: int, profile: str, used: tuple[MigPlacement, ...]) -> list[int]:
        """Starts where one more ``profile`` instance can be taken on MIG GPU ``i``."""
        m = self.gpus[i]
        if profile not in m.geometry.profiles:
            return []
        if m.reconfigurable:
            return list(feasible_starts(m.geometry, used, profile))
        taken = set(used)
        return [p.start for p in m.layout if p.profile == profile and p not in taken]

    def count(self, node: int, profile: str) -> int:
        """``fit(n, P)`` of the module docstring."""
        total = 0
        for i in self.of_node.get(node, ()):
            used = self.used[i]
            while starts := self._starts(i, profile, used):
                used = (*used, MigPlacement(profile, starts[0]))
                total += 1
        return total

    def _free_compute(self, i: int, used: tuple[MigPlacement, ...]) -> int:
        m = self.gpus[i]
        geo = m.geometry
        if m.reconfigurable:
            return COMPUTE_SLICES - sum(geo.profiles[p.profile].compute_slices for p in used)
        taken = set(used)
        return sum(geo.profiles[p.profile].compute_slices for p in m.layout if p not in taken)

    def pick(self, node: int, profile: str, count: int) -> tuple[MigSlice, ...] | None:
        """``count`` instances of ``profile`` on ``node`` by the slice rule (module docstring),
        or ``None`` when they do not fit. Changes nothing."""
        chosen: list[MigSlice] = []
        used = {i: self.used[i] for i in self.of_node.get(node, ())}
        for _ in range(count):
            best: tuple[tuple[int, int, int, int, int, int], int, int] | None = None
            for i, current in used.items():
                m = self.gpus[i]
                for s in self._starts(i, profile, current):
                    after = (*current, MigPlacement(profile, s))
                    room = layout_room(m.geometry, after) if m.reconfigurable else (0, 0)
                    key = (
                        int(m.reconfigurable),
                        self._free_compute(i, after),
                        -room[0],
                        -room[1],
                        m.gpu,
                        s,
                    )
                    if best is None or key < best[0]:
                        best = (key, i, s)
            if best is None:
                return None
            _, i, s = best
            used[i] = _sorted((*used[i], MigPlacement(profile, s)))
            chosen.append(MigSlice(self.gpus[i].gpu, profile, s))
        return tuple(chosen)

    # -- changes ---------------------------------------------------------------------------

    def take(self, node: int, slices: Iterable[MigSlice], *, who: str) -> None:
        """Mark ``slices`` of ``node`` in use; :class:`InvariantError` if one is not free."""
        for sl in slices:
            i = self.key.get((node, sl.gpu))
            if i is None:
                raise InvariantError(f"{who}: GPU {sl.gpu} of node {node} is not MIG-enabled")
            if sl.start not in self._starts(i, sl.profile, self.used[i]):
                raise InvariantError(
                    f"{who}: MIG instance {sl} is not free on node {node} "
                    f"(in use: {[f'{p.profile}@{p.start}' for p in self.used[i]]})"
                )
            self.used[i] = _sorted((*self.used[i], sl.placement))
            self.held += mig_milli(sl.profile)

    def give(self, node: int, slices: Iterable[MigSlice]) -> None:
        """Return ``slices`` of ``node`` (a reconfigurable GPU's instances disappear)."""
        for sl in slices:
            i = self.key[(node, sl.gpu)]
            used = list(self.used[i])
            used.remove(sl.placement)
            self.used[i] = tuple(used)
            self.held -= mig_milli(sl.profile)


def _sorted(layout: Iterable[MigPlacement]) -> tuple[MigPlacement, ...]:
    return tuple(sorted(layout, key=lambda p: (p.start, p.profile)))


def mig_capable(state: ClusterState, profile: str) -> NDArray[np.bool_]:
    """Nodes that could ever host an instance of ``profile``: a reconfigurable GPU whose
    geometry has it, or a static layout with one. Cached with the node list."""
    key = ("mig-capable", profile)
    cache = state.layout_cache
    mask = cache.get(key)
    if mask is None:
        mask = np.zeros(state.size, dtype=bool)
        mig = state.mig
        for m in mig.gpus if mig is not None else ():
            if m.reconfigurable:
                mask[m.node] |= profile in m.geometry.profiles
            else:
                mask[m.node] |= any(p.profile == profile for p in m.layout)
        mask.setflags(write=False)
        cache[key] = mask
    return mask  # type: ignore[return-value]


def mig_fit_count(state: ClusterState, profile: str) -> I64:
    """``fit(n, profile)`` for every node (module docstring), kept per profile with the nodes'
    version stamps like :func:`~gpusched.plugins.filters.gpu_fit_count`: only rows whose stamp
    changed are recounted. Read-only; 0 on nodes without MIG GPUs."""
    mig = state.mig
    if mig is None:
        return np.zeros(state.size, dtype=np.int64)
    cache = state.layout_cache
    key = ("mig-fit-count", profile)
    entry = cache.get(key)
    capable = np.flatnonzero(mig_capable(state, profile))
    if entry is None:
        counts = np.zeros(state.size, dtype=np.int64)
        stamps = state.version.copy()
        for n in capable.tolist():
            counts[n] = mig.count(n, profile)
        cache[key] = (stamps, counts)
    else:
        stamps, counts = entry  # type: ignore[misc]
        stale = capable[stamps[capable] != state.version[capable]]
        for n in stale.tolist():
            counts[n] = mig.count(n, profile)
        stamps[stale] = state.version[stale]
    view = counts.view()
    view.setflags(write=False)
    return view


def record_mig(plan: Plan, before: ClusterState, after: ClusterState) -> None:
    """Give the plan's MIG binds their instances and list the reconfigured GPUs (module
    docstring); ``before`` is the snapshot's state, ``after`` the cycle's working state."""
    mig = after.mig
    if mig is None:
        return
    allocations = after.allocations
    changed: dict[tuple[int, int], None] = {}
    for i, bind in enumerate(plan.binds):
        alloc = allocations.get(bind.task)
        if alloc is None or not alloc.mig:
            continue
        plan.binds[i] = replace(bind, mig=alloc.mig)
        for sl in alloc.mig:
            if mig.gpus[mig.key[(alloc.node, sl.gpu)]].reconfigurable:
                changed[(alloc.node, sl.gpu)] = None
    old = before.mig
    for node, gpu in changed:
        was = old.in_use(node, gpu) if old is not None else ()
        now = mig.in_use(node, gpu)
        if set(now) - set(was):
            plan.mig_layouts.append(MigLayout(after.names[node], gpu, now, not was))


def offered_profiles(state: ClusterState) -> tuple[str, ...]:
    """Profiles some MIG GPU of ``state`` offers (in a static layout, or in the geometry of a
    reconfigurable GPU), in geometry order."""
    mig = state.mig
    seen: dict[str, None] = {}
    for m in mig.gpus if mig is not None else ():
        if m.reconfigurable:
            seen.update(dict.fromkeys(m.geometry.profiles))
        else:
            seen.update(dict.fromkeys(p.profile for p in m.layout))
    return tuple(seen)


def check_mig_requests(state: ClusterState, jobs: Iterable[Job]) -> None:
    """:class:`ConfigError` naming the job and the field ``mig`` when a job asks a MIG profile
    that no GPU of the cluster offers (it could never run)."""
    offered: tuple[str, ...] | None = None
    for job in jobs:
        for task in job.tasks:
            profile = task.shape.mig_profile
            if not profile:
                continue
            if offered is None:
                offered = offered_profiles(state)
            if profile in offered:
                continue
            have = (
                f"the cluster's MIG GPUs offer {', '.join(offered)}"
                if offered
                else "the cluster has no MIG-enabled GPU (give nodes a `mig:` entry)"
            )
            raise ConfigError(
                f"job {job.id!r}: field 'mig': MIG profile {profile!r} is offered by no GPU "
                f"of the cluster; {have}"
            )
