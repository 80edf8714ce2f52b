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

A *layout* (the instances on one GPU) is checked and chosen in :mod:`gpusched.model.mig_layout`.

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

from collections.abc import Mapping
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
    "compute_slices_of",
    "geometries_with",
    "geometry_for",
    "geometry_for_gpu",
    "mig_milli",
    "parse_placement",
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
