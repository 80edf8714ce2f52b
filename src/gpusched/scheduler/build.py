"""Turn a validated :class:`~gpusched.framework.ProfileSpec` into a runnable profile.

A plugin named more than once (for example ``fgd`` as score and as GPU picker) is built once and
shared, so its caches serve both roles. Every plugin is checked against the extension point it is
used for; a mismatch is a :class:`~gpusched.errors.ConfigError` naming the field.
"""

from __future__ import annotations

from typing import Any

from gpusched.actions import ACTIONS
from gpusched.errors import ConfigError
from gpusched.framework import (
    FilterPlugin,
    GpuPicker,
    PluginContext,
    PluginSpec,
    Profile,
    ProfileSpec,
    QueueSortPlugin,
    ScorePlugin,
    VictimOrder,
)
from gpusched.plugins import create_plugin

__all__ = ["build_profile"]


def build_profile(spec: ProfileSpec, ctx: PluginContext | None = None) -> Profile:
    """Instantiate every plugin and action of ``spec``."""
    ctx = ctx or PluginContext()
    built: dict[tuple[str, str], object] = {}

    def get(field: str, plugin: PluginSpec, kind: Any) -> Any:
        key = (plugin.name, repr(sorted(plugin.args.items())))
        if key not in built:
            try:
                built[key] = create_plugin(plugin.name, plugin.args, ctx)
            except ConfigError as exc:
                raise ConfigError(f"profile {spec.name!r}, {field}: {exc}") from None
        obj = built[key]
        if not isinstance(obj, kind):
            raise ConfigError(
                f"profile {spec.name!r}, {field}: plugin {plugin.name!r} is not a {kind.__name__}"
            )
        return obj

    # Protocols are runtime-checkable; `kind` is one of the extension-point protocols.
    actions = []
    for i, name in enumerate(spec.actions):
        factory = ACTIONS.get(name)
        if factory is None:
            raise ConfigError(
                f"profile {spec.name!r}, actions[{i}]: unknown action {name!r}; "
                f"known: {', '.join(sorted(ACTIONS))}"
            )
        try:
            actions.append(factory(**spec.action_args.get(name, {})))
        except TypeError as exc:
            raise ConfigError(f"profile {spec.name!r}, action_args.{name}: {exc}") from None
    unknown = sorted(set(spec.action_args) - set(spec.actions))
    if unknown:
        raise ConfigError(
            f"profile {spec.name!r}, action_args: {unknown[0]!r} is not one of the profile's "
            f"actions ({', '.join(spec.actions)})"
        )
    if not spec.filters:
        raise ConfigError(f"profile {spec.name!r}, filters: at least one filter is required")
    return Profile(
        name=spec.name,
        actions=tuple(actions),
        queue_sort=get("queue_sort", PluginSpec(name=spec.queue_sort), QueueSortPlugin),
        filters=tuple(get(f"filters[{i}]", f, FilterPlugin) for i, f in enumerate(spec.filters)),
        scores=tuple(
            (get(f"scores[{i}]", s, ScorePlugin), s.weight) for i, s in enumerate(spec.scores)
        ),
        gpu_picker=get("gpu_picker", spec.gpu_picker, GpuPicker),
        victim_order=get("victim_order", PluginSpec(name=spec.victim_order), VictimOrder),
        tie_break=spec.tie_break,
        gpu_as_integer=spec.gpu_as_integer,
        spec=spec,
    )
