"""MIG (Multi-Instance GPU) geometry: which GPU instances fit where on an A100 or H100.

A MIG-capable GPU is cut into 8 *memory slices* and 7 *compute slices*. A GPU-instance profile
``Ng.Mgb`` takes ``N`` compute slices and a run of memory slices that must start at one of the
profile's allowed start indices (what ``nvidia-smi mig -lgipp`` prints as
``Placements: {0,2,4}:2``, i.e. starts ``{0, 2, 4}``, size 2). From NVIDIA's MIG user guide:

======================  ======================  =======  =============  ==================
A100/H100 80 GB         A100 40 GB              compute  memory slices  allowed starts
======================  ======================  =======  =============  ==================
``1g.10gb``             ``1g.5gb``              1        1              0, 1, 2, 3, 4, 5, 6
``1g.20gb``             (none)                  1        2              0, 2, 4, 6
``2g.20gb``             ``2g.10gb``             2        2              0, 2, 4
``3g.40gb``             ``3g.20gb``             3        4              0, 4
``4g.40gb``             ``4g.20gb``             4        4              0
``7g.80gb``             ``7g.40gb``             7        8              0
======================  ======================  =======  =============  ==================

A *layout* is a list of placements ``(profile, start)``. It is valid when every start is one of
its profile's allowed starts, the memory ranges ``[start, start + memory_slices)`` are pairwise
disjoint, and ``SUM compute_slices <= 7``. (Memory slice 7 is reachable only by the profiles of
4 or 8 slices, which is why at most seven 1g instances fit.)

Choosing a layout for an empty GPU that may be reconfigured (:func:`choose_layout`) searches all
assignments of starts (at most 7 instances with at most 7 starts each, identical profiles in
increasing start order) and keeps the valid one that leaves the most room, compared
lexicographically::

    room(layout) = ( largest compute size of a profile that still fits,
                     number of (profile, start) placements that still fit )

then the smallest starts. Placing a lone ``1g.10gb`` at start 6 (not 0) is what this rule does:
it keeps ``4g.40gb`` at 0 possible.

MIG on nodes and tasks (used by :mod:`gpusched.framework.mig`):

* a node's GPU is MIG-enabled when the node gives it a :class:`MigConfig`: a *static* layout
  (the node's instances, fixed) or *reconfigurable* (instances are created where the scheduler
  chooses while they are needed, and exist only while a task holds them);
* a task asks for ``count`` instances of one profile (:class:`~gpusched.model.TaskShape`'s
  ``mig_profile``/``mig_count``). Quota and fair share charge it in GPU-equivalents::

      mig_milli(profile) = floor(1000 * compute_slices(profile) / 7)       per instance

  (1g: 142, 2g: 285, 3g: 428, 4g: 571, 7g: 1000 milli). Rounding down keeps the charge of the
  instances on one GPU at most 1000 (their compute slices sum to at most 7). The memory of a
  profile does not count: ``1g.20gb`` is charged as ``1g.10gb``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpusched.errors import ConfigError

__all__ = [
    "COMPUTE_SLICES",
    "GEOMETRIES",
    "MEMORY_SLICES",
    "MigConfig",
    "MigGeometry",
    "MigPlacement",
    "MigProfile",
    "MigSlice",
    "check_node_mig",
    "choose_layout",
    "compute_slices_of",
    "feasible_starts",
    "geometries_with",
    "geometry_for",
    "geometry_for_gpu",
    "layout_problem",
    "layout_room",
    "mig_milli",
    "parse_placement",
    "validate_layout",
]

#: Memory slices of a MIG-capable A100/H100.
MEMORY_SLICES = 8
#: Compute slices (GPCs usable by MIG) of a MIG-capable A100/H100.
COMPUTE_SLICES = 7


@dataclass(frozen=True, slots=True)
class MigProfile:
    """A GPU-instance profile.

    Attributes:
        name: e.g. ``"3g.40gb"``.
        compute_slices: compute slices it takes (the ``3`` of ``3g``).
        memory_slices: memory slices it takes (a run of this many).
        starts: memory-slice indices it may start at.
        memory_gb: its memory as the name says.
    """

    name: str
    compute_slices: int
    memory_slices: int
    starts: tuple[int, ...]
    memory_gb: int

    def span(self, start: int) -> range:
        """Memory slices taken when placed at ``start``."""
        return range(start, start + self.memory_slices)


@dataclass(frozen=True, slots=True)
class MigPlacement:
    """One GPU instance of a layout: a profile at a start memory slice."""

    profile: str
    start: int


@dataclass(frozen=True, slots=True)
class MigSlice:
    """A GPU instance a task holds: profile ``profile`` at memory slice ``start`` of GPU
    ``gpu`` of its node."""

    gpu: int
    profile: str
    start: int

    @property
    def placement(self) -> MigPlacement:
        return MigPlacement(self.profile, self.start)

    def __str__(self) -> str:
        return f"{self.gpu}:{self.profile}@{self.start}"


@dataclass(frozen=True, slots=True)
class MigConfig:
    """How one GPU of a node is partitioned (module docstring).

    Attributes:
        layout: the GPU's instances when they are fixed by the node (static); empty when
            ``reconfigurable``.
        reconfigurable: the scheduler creates instances where it chooses, beside those in use.
    """

    layout: tuple[MigPlacement, ...] = ()
    reconfigurable: bool = False


@dataclass(frozen=True, slots=True)
class MigGeometry:
    """The MIG profiles of one GPU kind (see the module docstring's table)."""

    name: str
    profiles: Mapping[str, MigProfile]

    def profile(self, name: str) -> MigProfile:
        """The profile ``name``; :class:`ConfigError` naming it and listing the valid ones."""
        found = self.profiles.get(name)
        if found is None:
            valid = ", ".join(self.profiles)
            raise ConfigError(
                f"MIG profile {name!r} does not exist on {self.name}; valid profiles: {valid}"
            )
        return found


def _geometry(name: str, slice_gb: int, one_g_two_slices: bool) -> MigGeometry:
    rows = [
        ("1g", 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        ("1g", 1, 2, (0, 2, 4, 6)),
        ("2g", 2, 2, (0, 2, 4)),
        ("3g", 3, 4, (0, 4)),
        ("4g", 4, 4, (0,)),
        ("7g", 7, 8, (0,)),
    ]
    profiles: dict[str, MigProfile] = {}
    for g, compute, memory, starts in rows:
        if g == "1g" and memory == 2 and not one_g_two_slices:
            continue
        label = f"{g}.{memory * slice_gb}gb"
        profiles[label] = MigProfile(label, compute, memory, starts, memory * slice_gb)
    return MigGeometry(name, profiles)


#: Built-in geometries by GPU kind.
GEOMETRIES: Mapping[str, MigGeometry] = {
    "A100-40GB": _geometry("A100-40GB", 5, one_g_two_slices=False),
    "A100-80GB": _geometry("A100-80GB", 10, one_g_two_slices=True),
    "H100-80GB": _geometry("H100-80GB", 10, one_g_two_slices=True),
}


def geometry_for(kind: str) -> MigGeometry:
    """The geometry of ``kind`` (``"A100-40GB"``, ``"A100-80GB"``, ``"H100-80GB"``)."""
    found = GEOMETRIES.get(kind)
    if found is None:
        raise ConfigError(f"GPU kind {kind!r} has no MIG geometry; known: {', '.join(GEOMETRIES)}")
    return found


def geometry_for_gpu(model: str, memory_mib: int) -> MigGeometry | None:
    """The geometry of a node's GPU (model ``"A100"``/``"H100"`` and its memory), or None when
    it is not MIG-capable here. Memory up to 48 GiB reads as 40 GB, more as 80 GB. A leading
    ``NVIDIA`` (GPU Feature Discovery's ``NVIDIA-A100-SXM4-80GB``) is skipped."""
    words = [w for w in model.upper().replace(" ", "-").split("-") if w]
    if words and words[0] == "NVIDIA":
        words = words[1:]
    family = words[0] if words else ""
    if family not in ("A100", "H100") or memory_mib <= 0:
        return None
    size = "40GB" if memory_mib <= 48 * 1024 else "80GB"
    return GEOMETRIES.get(f"{family}-{size}")


def geometries_with(profile: str) -> tuple[str, ...]:
    """Names of the built-in geometries that have ``profile``."""
    return tuple(name for name, geo in GEOMETRIES.items() if profile in geo.profiles)


def compute_slices_of(profile: str) -> int:
    """Compute slices of a profile name (the ``N`` of ``Ng.Mgb``); :class:`ConfigError` for a
    name no built-in geometry has."""
    for geo in GEOMETRIES.values():
        found = geo.profiles.get(profile)
        if found is not None:
            return found.compute_slices
    known = sorted({p for geo in GEOMETRIES.values() for p in geo.profiles})
    raise ConfigError(f"unknown MIG profile {profile!r}; known profiles: {', '.join(known)}")


def mig_milli(profile: str) -> int:
    """GPU-equivalent of one instance in milli-GPU: ``floor(1000 * compute_slices / 7)``."""
    return 1000 * compute_slices_of(profile) // COMPUTE_SLICES


def parse_placement(text: str) -> MigPlacement:
    """``"3g.40gb@4"`` -> ``MigPlacement("3g.40gb", 4)``; :class:`ConfigError` otherwise."""
    profile, sep, start = text.partition("@")
    if not sep or not profile or not start.strip().isdigit():
        raise ConfigError(f"MIG placement {text!r}: expected PROFILE@START, e.g. '3g.40gb@4'")
    return MigPlacement(profile.strip(), int(start))


def check_node_mig(
    where: str, models: Sequence[tuple[str, int]], mig: Sequence[MigConfig | None]
) -> None:
    """Check a node's MIG configs against its GPUs ``(model, memory MiB)``; :class:`ConfigError`
    naming ``where`` and the field ``mig[g]`` otherwise: one entry per GPU, a MIG-capable GPU
    (A100/H100 with known memory) under every config, static layouts valid and non-empty."""
    if not mig:
        return
    if len(mig) != len(models):
        raise ConfigError(
            f"{where}: field 'mig': got {len(mig)} entries; expected one per GPU ({len(models)})"
        )
    for g, (conf, (model, memory)) in enumerate(zip(mig, models, strict=True)):
        if conf is None:
            continue
        geo = geometry_for_gpu(model, memory)
        if geo is None:
            raise ConfigError(
                f"{where}: field 'mig[{g}]': GPU {g} ({model!r}, {memory} MiB) is not "
                "MIG-capable here; expected an A100 or H100 with gpu_memory 40Gi or 80Gi"
            )
        if conf.reconfigurable and conf.layout:
            raise ConfigError(
                f"{where}: field 'mig[{g}]': a reconfigurable GPU has no fixed layout; "
                "give layout or reconfigurable, not both"
            )
        if not conf.reconfigurable and not conf.layout:
            raise ConfigError(
                f"{where}: field 'mig[{g}].layout': empty; give the GPU's instances "
                "(e.g. ['3g.40gb@0', '3g.40gb@4']) or reconfigurable: true"
            )
        try:
            validate_layout(geo, conf.layout, where=f"{where}: field 'mig[{g}].layout'")
        except ConfigError as exc:
            msg = str(exc)
            if not msg.startswith(where):
                msg = f"{where}: field 'mig[{g}].layout': {msg}"
            raise ConfigError(msg) from None


def _as_placements(layout: Iterable[MigPlacement | tuple[str, int]]) -> list[MigPlacement]:
    return [p if isinstance(p, MigPlacement) else MigPlacement(p[0], p[1]) for p in layout]


def layout_problem(
    geometry: MigGeometry, layout: Iterable[MigPlacement | tuple[str, int]]
) -> str | None:
    """Why ``layout`` is invalid (a sentence naming the instance), or None when it is valid.

    Unknown profiles raise :class:`ConfigError` (see :meth:`MigGeometry.profile`).
    """
    used = [-1] * MEMORY_SLICES
    compute = 0
    for i, place in enumerate(_as_placements(layout)):
        prof = geometry.profile(place.profile)
        if place.start not in prof.starts:
            return (
                f"instance {i} ({prof.name}): start {place.start} is not allowed; "
                f"expected one of {list(prof.starts)}"
            )
        for s in prof.span(place.start):
            if used[s] >= 0:
                return (
                    f"instance {i} ({prof.name}@{place.start}) overlaps instance {used[s]} "
                    f"on memory slice {s}"
                )
            used[s] = i
        compute += prof.compute_slices
    if compute > COMPUTE_SLICES:
        return f"the layout takes {compute} compute slices; a GPU has {COMPUTE_SLICES}"
    return None


def validate_layout(
    geometry: MigGeometry,
    layout: Iterable[MigPlacement | tuple[str, int]],
    *,
    where: str = "MIG layout",
) -> None:
    """Raise :class:`ConfigError` (prefixed with ``where``) when ``layout`` is invalid."""
    problem = layout_problem(geometry, layout)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")


def _state(geometry: MigGeometry, layout: Sequence[MigPlacement]) -> tuple[int, int]:
    """Bitmask of used memory slices and compute slices used."""
    mask = 0
    compute = 0
    for place in layout:
        prof = geometry.profile(place.profile)
        for s in prof.span(place.start):
            mask |= 1 << s
        compute += prof.compute_slices
    return mask, compute


def _fits(prof: MigProfile, start: int, mask: int, compute: int) -> bool:
    run = ((1 << prof.memory_slices) - 1) << start
    return not mask & run and compute + prof.compute_slices <= COMPUTE_SLICES


def feasible_starts(
    geometry: MigGeometry,
    layout: Iterable[MigPlacement | tuple[str, int]],
    profile: str,
) -> tuple[int, ...]:
    """Starts at which one more ``profile`` instance fits beside the (valid) ``layout``."""
    prof = geometry.profile(profile)
    mask, compute = _state(geometry, _as_placements(layout))
    return tuple(s for s in prof.starts if _fits(prof, s, mask, compute))


def layout_room(
    geometry: MigGeometry, layout: Iterable[MigPlacement | tuple[str, int]]
) -> tuple[int, int]:
    """``room(layout)`` of the module docstring: (largest compute size of a profile that still
    fits, number of (profile, start) placements that still fit)."""
    return _room(geometry, *_state(geometry, _as_placements(layout)))


def _room(geometry: MigGeometry, mask: int, compute: int) -> tuple[int, int]:
    largest = 0
    count = 0
    for prof in geometry.profiles.values():
        for s in prof.starts:
            if _fits(prof, s, mask, compute):
                count += 1
                largest = max(largest, prof.compute_slices)
    return largest, count


def choose_layout(
    geometry: MigGeometry, requested: Iterable[str]
) -> tuple[MigPlacement, ...] | None:
    """A valid layout for an empty GPU holding one instance per requested profile, leaving the
    most room (rule in the module docstring); None when they cannot all fit on one GPU.

    The result lists instances by start. Cost: at most ``7^n`` partial layouts for ``n``
    requested instances (``n <= 7``), pruned by overlap; well under a millisecond in practice.
    """
    profs = sorted(
        (geometry.profile(name) for name in requested),
        key=lambda p: (-p.memory_slices, -p.compute_slices, p.name),
    )
    if sum(p.compute_slices for p in profs) > COMPUTE_SLICES:
        return None
    if sum(p.memory_slices for p in profs) > MEMORY_SLICES:
        return None
    best: tuple[tuple[int, int], tuple[int, ...], tuple[MigPlacement, ...]] | None = None
    starts: list[int] = []

    def search(i: int, mask: int, compute: int) -> None:
        nonlocal best
        if i == len(profs):
            layout = tuple(MigPlacement(p.name, s) for p, s in zip(profs, starts, strict=True))
            room = _room(geometry, mask, compute)
            order = tuple(starts)
            if best is None or (room, _neg(order)) > (best[0], _neg(best[1])):
                best = (room, order, layout)
            return
        prof = profs[i]
        low = starts[-1] + 1 if i and profs[i - 1] == prof else 0
        for s in prof.starts:
            if s >= low and _fits(prof, s, mask, compute):
                run = ((1 << prof.memory_slices) - 1) << s
                starts.append(s)
                search(i + 1, mask | run, compute + prof.compute_slices)
                starts.pop()

    search(0, 0, 0)
    if best is None:
        return None
    return tuple(sorted(best[2], key=lambda p: (p.start, p.profile)))


def _neg(order: tuple[int, ...]) -> tuple[int, ...]:
    """Sort key that makes smaller starts compare larger (so ``max`` prefers them)."""
    return tuple(-s for s in order)
