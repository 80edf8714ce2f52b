"""``gpusched replay``: a workload replayed on kwok nodes against a live scheduler, reported
with ``simulate``'s metrics and compared with the simulated run (docs/live.md)."""

from __future__ import annotations

import json
import logging
import sys
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from gpusched.cli.inputs import load_inputs, resolve_profiles
from gpusched.cli.progress import progress_bar
from gpusched.cli.summary import SUMMARY_ROWS, fmt_value
from gpusched.errors import ConfigError
from gpusched.model import JobId, TaskId
from gpusched.scheduler import LIVE_POLICY

__all__ = ["replay_command"]

out = Console()

#: The ``simulate`` rows a replay reports (the rest need the simulator's own bookkeeping).
_KEYS = frozenset(
    {
        "jobs",
        "jobs_started",
        "jobs_completed",
        "gpu_allocation_pct",
        "gpu_held_pct",
        "fragmentation_pct",
        "avg_wait_s",
        "p95_wait_s",
        "avg_jct_s",
        "partially_placed_gangs_max",
        "preemptions",
    }
)
_ROWS = tuple(row for row in SUMMARY_ROWS if row[0] in _KEYS)


def replay_command(
    *,
    kubeconfig: Annotated[
        str | None,
        typer.Option(help="kubeconfig file; default: the pod's service account (in-cluster)"),
    ] = None,
    cluster: Annotated[
        str | None, typer.Option(help="Cluster file: native YAML or openb node CSV.")
    ] = None,
    workload: Annotated[
        str | None, typer.Option(help="Workload file: native YAML/CSV or openb pod CSV.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the generated workload.")] = 7,
    jobs: Annotated[
        int, typer.Option(min=1, help="Jobs to generate when no --workload is given.")
    ] = 200,
    policy: Annotated[
        str | None,
        typer.Option(
            help=f"the live scheduler's policy, for the comparison (default {LIVE_POLICY})"
        ),
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="the live scheduler's profile YAML instead of --policy")
    ] = None,
    scheduler_name: Annotated[
        str,
        typer.Option(help="pods' schedulerName (default-scheduler: replay on kube-scheduler)"),
    ] = "gpusched",
    speed: Annotated[
        float, typer.Option(min=0.001, help="trace seconds per wall second (600: a day in 144 s)")
    ] = 600.0,
    namespace: Annotated[str, typer.Option(help="namespace of the pods")] = "gpusched-replay",
    stall: Annotated[
        float,
        typer.Option(help="stop after this many wall seconds without change once all arrived"),
    ] = 60.0,
    keep: Annotated[bool, typer.Option(help="leave nodes and pods in place at the end")] = False,
    compare: Annotated[
        bool, typer.Option(help="also simulate the workload and report the differences")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Replay a workload on kwok nodes against a live scheduler (a digital twin of the cluster).

    Creates a kwok node per node of the cluster, submits every job's pods (and a PodGroup for
    gangs) at its arrival time divided by --speed, lets kwok complete each pod after its run
    time divided by --speed, and reports simulate's metrics in trace seconds (binds of one job
    less than one wall second apart count as simultaneous). Queues are not replayed: the
    comparison simulates without them. Pods carry their job's kind and user as labels and
    its run-time estimate divided by --speed; for the simulator's default run time of an
    hour, run the scheduler with --default-runtime 3600/speed (docs/live.md).
    """
    # Imported here so other commands do not pay for httpx at start-up.
    from gpusched.live.client import ApiError, KubeClient, load_credentials
    from gpusched.live.replay import ReplayOptions, replay
    from gpusched.sim.observed import (
        Kind,
        Observed,
        compare_runs,
        simulate_recorded,
        summarise_observed,
    )

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    specs = resolve_profiles(policy or (None if profile else LIVE_POLICY), profile)
    if len(specs) != 1:
        raise ConfigError("--policy: a replay compares with exactly one policy")
    spec = specs[0]
    inputs = load_inputs(cluster, workload, None, seed, jobs)
    options = ReplayOptions(
        namespace=namespace,
        scheduler_name=scheduler_name,
        shares=scheduler_name != "default-scheduler",
        speed=speed,
        stall_s=stall,
        keep=keep,
    )
    client = KubeClient(load_credentials(kubeconfig))
    try:
        with progress_bar("replaying", len(inputs.jobs), enabled=not as_json) as tick:
            result = replay(client, inputs.nodes, inputs.jobs, options, lambda d, t: tick(d))
    except ApiError as exc:
        print(f"error: the apiserver refused or could not be reached: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    finally:
        client.close()
    kinds = {"arrive": Kind.ARRIVE, "bind": Kind.BIND, "complete": Kind.COMPLETE}
    events = [
        Observed(
            e.time,
            kinds.get(e.kind, Kind.EVICT),
            JobId(e.job),
            TaskId(e.task) if e.task else None,
            e.node,
            e.gpus,
            e.gpu_milli,
        )
        for e in result.events
    ]
    statuses = {JobId(k): v for k, v in result.statuses.items()}
    observed = summarise_observed(
        inputs.nodes, inputs.jobs, events, spec, statuses=statuses, end=result.end, settle_s=speed
    )
    lag = np.asarray(result.submit_lag_s or [0.0])
    extra: dict[str, Any] = {
        "speed": speed,
        "scheduler_name": scheduler_name,
        "wall_s": round(result.wall_s, 1),
        "submit_lag_wall_s": {
            "p95": round(float(np.percentile(lag, 95)), 3),
            "max": round(float(lag.max()), 3),
        },
        "pods_recreated_after_eviction": result.recreated,
        "binds_left_out_overcommitted": len(observed.overcommitted),
        "errors": result.errors[:20],
    }
    runs: list[dict[str, Any]] = [{"policy": spec.name, "mode": "replay", **observed.summary}]
    differences = None
    if compare:
        simulated, summary, nodes_of = simulate_recorded(inputs.nodes, inputs.jobs, spec, seed)
        runs.append({"policy": spec.name, "mode": "simulate", **summary})
        differences = compare_runs(simulated, nodes_of, observed)
    if as_json:
        print(
            json.dumps(
                {
                    "cluster": cluster or "built-in",
                    "workload": workload or "built-in",
                    "config": None,
                    "seed": seed,
                    "replay": extra,
                    "results": runs,
                    "differences": differences,
                }
            )
        )
        return
    _print(inputs.title, runs, extra, differences)


def _print(
    title: str, runs: list[dict[str, Any]], extra: dict[str, Any], diff: dict[str, Any] | None
) -> None:
    table = Table(title=f"replay of {title} at speed {extra['speed']:g}", title_justify="left")
    table.add_column("metric (trace time)")
    for run in runs:
        table.add_column(f"{run['mode']} {run['policy']}", justify="right")
    for key, label, fmt in _ROWS:
        table.add_row(label, *[fmt_value(run.get(key, 0), fmt) for run in runs])
    out.print(table)
    lag = extra["submit_lag_wall_s"]
    out.print(
        f"wall time {extra['wall_s']:.0f} s; pods created late by up to {lag['max']:.2f} s wall "
        f"(p95 {lag['p95']:.2f} s); pods re-created after eviction: "
        f"{extra['pods_recreated_after_eviction']}"
    )
    if diff is not None:
        delta = diff["start_delta_s"]
        out.print(
            f"per job, replay minus simulate: start median {delta['median']:+.0f} s, p95 "
            f"{delta['p95']:+.0f} s, latest {delta['max_late']:+.0f} s, earliest "
            f"{delta['max_early']:+.0f} s over {diff['jobs_started_in_both']} jobs; "
            f"same first node for {diff['same_node_pct']}% of "
            f"{diff['tasks_bound_in_both']} tasks"
        )
    if extra["binds_left_out_overcommitted"]:
        out.print(
            f"[yellow]{extra['binds_left_out_overcommitted']} binds could not be charged (the "
            "metrics state had no room on that node); the replay's figures undercount them[/]"
        )
    for error in extra["errors"]:
        out.print(f"[red]{error}[/red]")
