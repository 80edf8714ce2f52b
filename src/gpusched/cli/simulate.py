"""``gpusched simulate``: replay a workload through the scheduler under each policy and compare
them side by side (a table, one JSON object, or an HTML report).

The inputs (cluster, workload, scheduling config) are resolved by :mod:`gpusched.cli.inputs`,
the runs by :mod:`gpusched.sim.runs`; this module only drives them and prints the comparison.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpusched.cli.inputs import (
    ClusterOption,
    ConfigOption,
    JobsOption,
    RequeueOption,
    SeedOption,
    WorkloadOption,
    load_inputs,
    resolve_profiles,
)
from gpusched.cli.progress import progress_bar
from gpusched.cli.summary import SUMMARY_ROWS, duration, fmt_value
from gpusched.report.html import simulate_report
from gpusched.scheduler import DEFAULT_COMPARISON
from gpusched.sim.records import SimOptions
from gpusched.sim.runs import SimRun, simulate

__all__ = ["simulate_command"]


out = Console()


def _print_runs(runs: list[SimRun], title: str) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for r in runs:
        table.add_column(r.policy, justify="right")
    for key, label, fmt in SUMMARY_ROWS:
        table.add_row(label, *[fmt_value(r.summary.get(key, 0), fmt) for r in runs])
    unplaced = [sum(r.summary["jobs_unplaced"].values()) for r in runs]
    if any(unplaced):
        table.add_row("jobs never placed", *[f"{u:,}" for u in unplaced])
    out.print(table)
    if len(runs) >= 2:
        base, best = runs[0].summary, runs[-1].summary
        d_alloc = best["gpu_allocation_pct"] - base["gpu_allocation_pct"]
        out.print(
            f"{runs[-1].policy} vs {runs[0].policy}: GPU allocation {d_alloc:+.1f} points, "
            f"average wait {duration(base['avg_wait_s'])} -> {duration(best['avg_wait_s'])}, "
            f"p95 wait {duration(base['p95_wait_s'])} -> {duration(best['p95_wait_s'])}."
        )
    for r in runs:
        for code, reason in r.summary["unplaced_top_reason"].items():
            out.print(f"[dim]{r.policy}: {code}: e.g. {reason}[/dim]")


def simulate_command(
    cluster: ClusterOption = None,
    workload: WorkloadOption = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help=f"Policies to compare, comma-separated (default: {','.join(DEFAULT_COMPARISON)})."
        ),
    ] = None,
    profile: Annotated[str | None, typer.Option(help="A profile YAML file instead.")] = None,
    config: ConfigOption = None,
    seed: SeedOption = 7,
    jobs: JobsOption = 1500,
    report: Annotated[Path | None, typer.Option(help="Write an HTML report here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    requeue_at_eviction: RequeueOption = True,
) -> None:
    """Replay a workload through the scheduler and compare policies side by side.

    With no arguments: the built-in cluster (256 GPUs), its three teams with quotas and
    priority classes, and a generated gang workload, under kube-default, a FIFO gang baseline
    and gpusched's best policy.
    """
    specs = resolve_profiles(policy, profile)
    inputs = load_inputs(cluster, workload, config, seed, jobs)
    nodes, job_list, title = inputs.nodes, inputs.jobs, inputs.title
    options = SimOptions(requeue_at_eviction=requeue_at_eviction)
    runs = []
    for spec in specs:
        with progress_bar(f"simulating {spec.name}", len(job_list), enabled=not as_json) as tick:
            runs.append(
                simulate(
                    nodes,
                    job_list,
                    spec,
                    seed,
                    queues=inputs.config.queues,
                    progress=lambda d, t: tick(d),
                    options=options,
                )
            )
    if report:
        simulate_report(report, title, runs)
    if as_json:
        print(
            json.dumps(
                {
                    "cluster": cluster or "built-in",
                    "workload": workload or "built-in",
                    "config": config or ("built-in" if not workload else None),
                    "seed": seed,
                    "requeue_at_eviction": requeue_at_eviction,
                    "results": [{"policy": r.policy, **r.summary} for r in runs],
                }
            )
        )
        return
    _print_runs(runs, title)
    if report:
        out.print(f"report: {report}")
