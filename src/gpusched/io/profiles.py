"""Profile files: YAML validated against :class:`~gpusched.framework.ProfileSpec`."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpusched.framework import ProfileSpec
from gpusched.io.yamlfile import load_yaml, validate

__all__ = ["dump_profile", "load_profile"]


def load_profile(path: str | Path) -> ProfileSpec:
    """Read a profile file; errors name file, line and field."""
    return validate(ProfileSpec, load_yaml(path), path)


def dump_profile(spec: ProfileSpec) -> str:
    """The YAML text of ``spec`` (what ``gpusched profile show`` prints)."""
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
