"""Turn a validated :class:`~gpusched.framework.ProfileSpec` into a runnable profile.

A plugin named more than once (for example ``fgd`` as score and as GPU picker) is built once and
shared, so its caches serve both roles. Every plugin is checked against the extension point it is
used for; a mismatch is a :class:`~gpusched.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict, ValidationError, create_model

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
        args = _action_args(spec.name, name, factory, spec.action_args.get(name, {}))
        try:
            actions.append(factory(**args))
        except (TypeError, ValueError) as exc:  # a value the action itself refuses
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


def _action_args(
    profile: str, name: str, factory: Callable[..., object], args: dict[str, Any]
) -> dict[str, Any]:
    """``args`` checked against the action's constructor (names and types, from its signature
    and annotations); a wrong one is a :class:`ConfigError` naming ``action_args.<action>.<arg>``,
    what was given and what is expected."""
    fields: dict[str, Any] = {}
    for param in inspect.signature(factory, eval_str=True).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = ... if param.default is param.empty else param.default
        annotation = Any if param.annotation is param.empty else param.annotation
        fields[param.name] = (annotation, default)
    model = create_model(f"{name}-args", __config__=ConfigDict(extra="forbid"), **fields)
    try:
        checked = model(**args)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = f"profile {profile!r}, action_args.{name}." + ".".join(map(str, err["loc"]))
        if err["type"] == "extra_forbidden":
            known = ", ".join(fields) or "none"
            raise ConfigError(f"{where}: unknown argument (the action takes: {known})") from None
        raise ConfigError(f"{where}: {err['msg']}, got {err.get('input')!r}") from None
    return {k: getattr(checked, k) for k in args}
