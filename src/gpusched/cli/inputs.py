"""Resolving what the user passed on the command line into nodes, jobs and profiles."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from gpusched.errors import ConfigError, TraceError
from gpusched.framework import ProfileSpec
from gpusched.io.native_cluster import load_cluster
from gpusched.io.native_workload import load_workload
from gpusched.io.openb import read_openb_nodes, read_openb_pods
from gpusched.io.profiles import load_profile
from gpusched.io.scheduling import apply_priority_classes, check_job_queues, load_scheduling
from gpusched.model import Job, Node, SchedulingConfig
from gpusched.scheduler import DEFAULT_COMPARISON, policy_spec
from gpusched.workloads import (
    WorkloadParams,
    default_cluster,
    default_scheduling,
    generate_workload,
)

__all__ = [
    "DEFAULT_ESTIMATES",
    "DEFAULT_LOAD",
    "ClusterOption",
    "ConfigOption",
    "EstimatesOption",
    "Inputs",
    "JobsOption",
    "LoadOption",
    "RequeueOption",
    "SeedOption",
    "WorkloadOption",
    "load_inputs",
    "load_jobs",
    "load_nodes",
    "parse_seeds",
    "resolve_profiles",
]

# The command-line options of these inputs, shared by simulate and explain.
ClusterOption = Annotated[
    str | None, typer.Option("--cluster", help="Cluster file: native YAML or openb node CSV.")
]
WorkloadOption = Annotated[
    str | None,
    typer.Option("--workload", help="Workload file: native YAML/CSV or openb pod CSV."),
]
ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config",
        help="Scheduling config (queues, quotas, priority classes) (default: the built-in "
        "teams with the built-in workload, no queues with a workload file).",
    ),
]
SeedOption = Annotated[
    int, typer.Option("--seed", help="Seed of the run (and of the generated workload).")
]
JobsOption = Annotated[
    int, typer.Option("--jobs", min=1, help="Jobs to generate when no --workload is given.")
]
#: The generator's offered GPU load (``WorkloadParams.load``), the CLI's default.
DEFAULT_LOAD: float = WorkloadParams().load
LoadOption = Annotated[
    float,
    typer.Option(
        "--load", min=0.01, max=10.0, help="Offered GPU load of generated jobs (1.0 = capacity)."
    ),
]
RequeueOption = Annotated[
    bool,
    typer.Option(
        "--requeue-at-eviction/--keep-place-at-eviction",
        help="Where an evicted job rejoins the queue: at its eviction, behind the jobs already "
        "waiting (the default, as the live scheduler does), or at its place by submission.",
    ),
]
#: The generator's share of users who declare run times (``WorkloadParams.estimates``).
DEFAULT_ESTIMATES: float = WorkloadParams().estimates
EstimatesOption = Annotated[
    float,
    typer.Option(
        "--estimates",
        min=0.0,
        max=1.0,
        help="Share of generated users who declare run-time estimates (upper bounds); the "
        "others' jobs are estimated from completed ones.",
    ),
]


NO_CONFIG = SchedulingConfig(None, {})


@dataclass(frozen=True, slots=True)
class Inputs:
    """A cluster, a workload with priority classes resolved, the scheduling config, and a
    title saying where each came from."""

    nodes: list[Node]
    jobs: list[Job]
    config: SchedulingConfig
    title: str


def load_inputs(
    cluster: str | None,
    workload: str | None,
    config: str | None,
    seed: int,
    jobs: int,
    *,
    load: float = DEFAULT_LOAD,
    estimates: float = DEFAULT_ESTIMATES,
) -> Inputs:
    """What ``simulate`` and ``explain`` run on. Defaults: the built-in cluster; a generated
    workload (``jobs`` jobs, ``seed``, offered GPU load ``load``, by default the generator's);
    with the built-in workload, the built-in teams and priority classes; with a workload file,
    no queues unless ``config`` is given."""
    nodes = load_nodes(cluster) if cluster else default_cluster()
    if workload:
        job_list = load_jobs(workload, nodes)
    else:
        params = WorkloadParams(jobs=jobs, load=load, estimates=estimates)
        job_list = generate_workload(nodes, params, seed)
    if config:
        cfg = load_scheduling(config)
    elif not workload:
        cfg = default_scheduling(nodes)
    else:
        cfg = NO_CONFIG
    source = workload or "the built-in workload"
    hint = "" if config else " (pass the scheduling config that defines it with --config)"
    try:
        job_list = apply_priority_classes(job_list, cfg, source)
        check_job_queues(job_list, cfg, source)
    except TraceError as exc:
        raise TraceError(exc.path, exc.line, exc.field, exc.problem + hint) from None
    config_name = config or ("built-in teams" if not workload else "no queues")
    title = (
        f"{workload or f'built-in workload ({len(job_list):,} jobs, seed {seed}{_load(load)})'} on "
        f"{cluster or 'built-in cluster'} ({len(nodes)} nodes, "
        f"{sum(n.gpu_count for n in nodes)} GPUs), {config_name}"
    )
    return Inputs(nodes, job_list, cfg, title)


def _load(load: float) -> str:
    """The title's note of a load other than the generator's default."""
    return "" if load == DEFAULT_LOAD else f", offered load {load:g}"


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
