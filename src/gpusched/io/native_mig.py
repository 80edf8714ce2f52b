"""The ``mig`` entries of the native cluster and workload formats
(:mod:`gpusched.io.native_cluster`, :mod:`gpusched.io.native_jobs`).

A node group's ``mig`` says which GPUs are MIG-enabled and how; the other GPUs stay plain::

    mig:                                  # a list of entries, or one entry for every GPU
      - gpus: [0, 1]                      # GPU indices (default: every GPU of the node)
        layout: [3g.40gb@0, 2g.20gb@4, 1g.10gb@6]   # static instances, PROFILE@START
      - gpus: [2]
        layout: {1g.10gb: 7}              # or counts: starts chosen as choose_layout does
      - gpus: [3]
        reconfigurable: true              # the scheduler creates instances as needed

A job asks ``mig: 1g.10gb`` (and ``mig_count: 2`` for two instances per pod) instead of
``gpus``. Every error names the entry and field (``mig[1].layout``) and what is expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpusched.errors import ConfigError
from gpusched.model import Node, TaskShape
from gpusched.model.mig import (
    GEOMETRIES,
    MigConfig,
    MigPlacement,
    geometry_for_gpu,
    parse_placement,
)
from gpusched.model.mig_layout import choose_layout, validate_layout

__all__ = ["MigEntry", "MigError", "build_mig", "dump_mig", "dump_mig_request", "known_profiles"]


class MigError(ConfigError):
    """A node group's ``mig`` entry is wrong (the message names the entry and field)."""


class MigEntry(BaseModel):
    """MIG-enabled GPUs of a node: a static layout, or reconfigurable."""

    model_config = ConfigDict(extra="forbid")

    gpus: list[int] | None = Field(
        default=None, description="GPU indices this entry applies to (default: every GPU)."
    )
    layout: list[str] | dict[str, int] | None = Field(
        default=None,
        description="Static instances: `[PROFILE@START, ...]` ('3g.40gb@4'), or counts "
        "`{PROFILE: N}` placed as choose_layout places them (docs/topology.md).",
    )
    reconfigurable: bool = Field(
        default=False,
        description="The scheduler creates instances where it chooses, beside those in use.",
    )


def known_profiles() -> tuple[str, ...]:
    """Every profile of the built-in geometries, in table order."""
    return tuple(dict.fromkeys(p for geo in GEOMETRIES.values() for p in geo.profiles))


def _layout(entry: MigEntry, where: str, model: str, memory: int) -> tuple[MigPlacement, ...]:
    geo = geometry_for_gpu(model, memory)
    if geo is None:
        raise MigError(
            f"{where}: GPU model {model!r} with {memory} MiB is not MIG-capable here; "
            "expected an A100 or H100 with gpu_memory 40Gi or 80Gi"
        )
    if entry.reconfigurable:
        if entry.layout:
            raise MigError(f"{where}: give layout (static) or reconfigurable: true, not both")
        return ()
    if not entry.layout:
        raise MigError(
            f"{where}.layout: missing; give the instances ([3g.40gb@0, 3g.40gb@4]), counts "
            "({1g.10gb: 7}) or reconfigurable: true"
        )
    try:
        if isinstance(entry.layout, dict):
            wanted: list[str] = []
            for profile, count in entry.layout.items():
                geo.profile(profile)
                if count < 1:
                    raise ConfigError(f"{profile}: count {count}; expected >= 1")
                wanted.extend([profile] * count)
            chosen = choose_layout(geo, wanted)
            if chosen is None:
                raise ConfigError(f"{dict(entry.layout)} do not fit one {geo.name} GPU together")
            return chosen
        places = tuple(parse_placement(text) for text in entry.layout)
        validate_layout(geo, places, where=geo.name)
        return places
    except ConfigError as exc:
        raise MigError(f"{where}.layout: {exc}") from None


def build_mig(
    entries: MigEntry | Sequence[MigEntry] | None, gpus: int, model: str, memory: int, name: str
) -> tuple[MigConfig | None, ...]:
    """Per GPU of a node with ``gpus`` GPUs of ``model`` (``memory`` MiB each), its MIG
    config; :class:`MigError` naming node ``name`` and the entry otherwise."""
    if entries is None:
        return ()
    items = [entries] if isinstance(entries, MigEntry) else list(entries)
    out: list[MigConfig | None] = [None] * gpus
    for i, entry in enumerate(items):
        where = f"node {name!r}: mig[{i}]" if len(items) > 1 else f"node {name!r}: mig"
        if not gpus:
            raise MigError(f"{where}: the node has no GPUs")
        targets = list(range(gpus)) if entry.gpus is None else entry.gpus
        config = MigConfig(_layout(entry, where, model, memory), entry.reconfigurable)
        for g in targets:
            if not 0 <= g < gpus:
                raise MigError(f"{where}.gpus: GPU {g} does not exist; the node has 0..{gpus - 1}")
            if out[g] is not None:
                raise MigError(f"{where}.gpus: GPU {g} is named by an earlier mig entry")
            out[g] = config
    return tuple(out)


def dump_mig(node: Node) -> list[dict[str, Any]]:
    """The node's ``mig`` entries (GPUs with equal configs grouped), for :func:`dump_cluster`;
    static layouts as ``PROFILE@START`` lists, so they load back identically."""
    groups: dict[MigConfig, list[int]] = {}
    for g, conf in enumerate(node.mig):
        if conf is not None:
            groups.setdefault(conf, []).append(g)
    out: list[dict[str, Any]] = []
    for conf, gpus in groups.items():
        entry: dict[str, Any] = {"gpus": gpus}
        if conf.reconfigurable:
            entry["reconfigurable"] = True
        else:
            entry["layout"] = [f"{p.profile}@{p.start}" for p in conf.layout]
        out.append(entry)
    return out


def dump_mig_request(shape: TaskShape) -> dict[str, Any]:
    """A job entry's ``mig``, ``mig_count`` and ``gpu_models`` for a MIG shape (else empty)."""
    if not shape.mig_profile:
        return {}
    out: dict[str, Any] = {"mig": shape.mig_profile}
    if shape.mig_count != 1:
        out["mig_count"] = shape.mig_count
    if shape.gpu_models:
        out["gpu_models"] = sorted(shape.gpu_models)
    return out
