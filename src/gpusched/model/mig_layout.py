"""MIG layouts: whether the instances on one GPU are valid, what else fits, and which to choose.

The profiles and their allowed starts are in :mod:`gpusched.model.mig`; this module reasons about
sets of placements on one GPU, for checking node configurations (static layouts), for the
scheduler's fit (which starts a new instance may take beside those in use) and for choosing the
layout of a GPU that may be reconfigured.

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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpusched.errors import ConfigError
from gpusched.model.mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    MigConfig,
    MigGeometry,
    MigPlacement,
    MigProfile,
    geometry_for_gpu,
)

__all__ = [
    "check_node_mig",
    "choose_layout",
    "feasible_starts",
    "layout_problem",
    "layout_room",
    "validate_layout",
]


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
