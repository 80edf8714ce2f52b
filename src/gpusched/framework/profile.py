"""Scheduling profiles: which actions and plugins run, with which weights.

:class:`ProfileSpec` is the validated, serialisable form (what a YAML profile file holds; its
field descriptions generate ``docs/profiles.md``). :class:`Profile` is the built form with plugin
instances, produced by :func:`gpusched.scheduler.build_profile` from the explicit registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpusched.framework.extension import (
    Action,
    FilterPlugin,
    GpuPicker,
    QueueSortPlugin,
    ScorePlugin,
    VictimOrder,
)

__all__ = ["PluginSpec", "Profile", "ProfileSpec", "TieBreak"]


class TieBreak(StrEnum):
    """How to choose among nodes with the same best score."""

    FIRST = "first"
    RANDOM = "random"


class PluginSpec(BaseModel):
    """One plugin in a profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Registered plugin name, e.g. `fgd` or `node-resources-fit`.")
    weight: float = Field(
        default=1.0, ge=0, description="Multiplier of this plugin's score (scores only)."
    )
    args: dict[str, Any] = Field(
        default_factory=dict, description="Plugin-specific arguments (see docs/plugins)."
    )


def _default_filters() -> list[PluginSpec]:
    return [
        PluginSpec(name="node-resources-fit"),
        PluginSpec(name="gpu-model"),
        PluginSpec(name="node-constraints"),
    ]


class ProfileSpec(BaseModel):
    """A scheduling profile as written in YAML."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Profile name shown in reports.")
    description: str = Field(default="", description="One line on what the profile is for.")
    actions: list[str] = Field(
        default_factory=lambda: ["allocate"],
        description="Actions run each cycle, least disruptive first.",
    )
    queue_sort: str = Field(default="fifo", description="Order in which pending jobs are tried.")
    filters: list[PluginSpec] = Field(
        default_factory=_default_filters, description="Filters; a node must pass all of them."
    )
    scores: list[PluginSpec] = Field(
        default_factory=list, description="Scores; a node's score is the weighted sum."
    )
    gpu_picker: PluginSpec = Field(
        default_factory=lambda: PluginSpec(name="best-fit-gpu"),
        description="Chooses the GPUs of the selected node.",
    )
    tie_break: TieBreak = Field(
        default=TieBreak.FIRST,
        description="`first`: first tied node in cluster order; `random`: uniform among ties.",
    )
    victim_order: str = Field(
        default="cheapest", description="Which running jobs preemption and reclaim evict first."
    )
    action_args: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Arguments per action name, e.g. `{preempt: {min_runtime_s: 600}}`.",
    )
    gpu_as_integer: bool = Field(
        default=False,
        description=(
            "Treat GPUs as integer counts, as the stock device plugin does: a fractional "
            "request holds a whole GPU."
        ),
    )


@dataclass(frozen=True, slots=True)
class Profile:
    """A built profile: plugin instances ready for :func:`gpusched.scheduler.schedule`."""

    name: str
    actions: tuple[Action, ...]
    queue_sort: QueueSortPlugin
    filters: tuple[FilterPlugin, ...]
    scores: tuple[tuple[ScorePlugin, float], ...]
    gpu_picker: GpuPicker
    victim_order: VictimOrder
    tie_break: TieBreak
    gpu_as_integer: bool
    spec: ProfileSpec
