"""Resolving what the user passed on the command line into nodes, jobs and profiles."""

from __future__ import annotations

import csv
from pathlib import Path

from gpusched.errors import ConfigError, TraceError
from gpusched.framework import ProfileSpec
from gpusched.io.native import load_cluster, load_workload
from gpusched.io.openb import read_openb_nodes, read_openb_pods
from gpusched.io.profiles import load_profile
from gpusched.model import Job, Node
from gpusched.scheduler import DEFAULT_COMPARISON, policy_spec

__all__ = ["load_jobs", "load_nodes", "parse_seeds", "resolve_profiles"]


def _header(path: Path) -> list[str]:
    if not path.is_file():
        raise TraceError(str(path), None, None, "file not found")
    with path.open(newline="", encoding="utf-8") as fh:
        return [h.strip() for h in next(csv.reader(fh), [])]


def load_nodes(path: str) -> list[Node]:
    """A cluster: an openb node list (CSV) or a native cluster file (YAML)."""
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return read_openb_nodes(p)
    return load_cluster(p)


def load_jobs(path: str, nodes: list[Node]) -> list[Job]:
    """A workload: an openb pod list, a native CSV or a native YAML file."""
    p = Path(path)
    models = {n.gpu_model for n in nodes if n.gpu_model}
    if p.suffix.lower() == ".csv" and "num_gpu" in _header(p):
        return [pod.to_job() for pod in read_openb_pods(p, known_models=models)]
    return load_workload(p, known_models=models)


def resolve_profiles(policy: str | None, profile: str | None) -> list[ProfileSpec]:
    """Profiles to run: ``--profile FILE`` or a comma-separated ``--policy`` list."""
    if policy and profile:
        raise ConfigError("give either --policy or --profile, not both")
    if profile:
        return [load_profile(profile)]
    names = [n.strip() for n in (policy or ",".join(DEFAULT_COMPARISON)).split(",") if n.strip()]
    if not names:
        raise ConfigError("--policy: expected one or more policy names separated by commas")
    return [policy_spec(n) for n in names]


def parse_seeds(text: str) -> list[int]:
    """``"42-51"``, ``"42,43,50"`` or ``"7"`` as a list of seeds."""
    seeds: list[int] = []
    try:
        for raw in text.split(","):
            part = raw.strip()
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise ConfigError(
            f"--seeds: got {text!r}; expected a range like 42-51 or a list like 42,43"
        ) from None
    if not seeds:
        raise ConfigError(f"--seeds: got {text!r}; expected at least one seed")
    return seeds
