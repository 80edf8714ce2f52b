"""``gpusched workload generate``: write a seeded synthetic workload file (and optionally the
matching scheduling config), and show how its statistics compare with the published ones it is
calibrated to (:mod:`gpusched.workloads`, docs/workloads.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpusched.cli.inputs import (
    DEFAULT_ESTIMATES,
    DEFAULT_LOAD,
    EstimatesOption,
    LoadOption,
    load_nodes,
)
from gpusched.errors import ConfigError
from gpusched.io.native_dump import dump_scheduling, dump_workload
from gpusched.workloads import (
    CALIBRATIONS,
    Calibration,
    WorkloadParams,
    WorkloadStats,
    calibration_for,
    default_cluster,
    default_scheduling,
    generate_workload,
    measure,
)

__all__ = ["workload_app"]


workload_app = typer.Typer(help="Workload files.", no_args_is_help=True)

out = Console()


@workload_app.command("generate")
def workload_generate(
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write (YAML).")],
    jobs: Annotated[int, typer.Option(min=1, help="Number of jobs.")] = 1500,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 7,
    load: LoadOption = DEFAULT_LOAD,
    cluster: Annotated[
        str | None, typer.Option(help="Cluster the load is scaled to (default: built-in).")
    ] = None,
    calibration: Annotated[
        str,
        typer.Option(
            help="Published statistics the job sizes and run times match: helios, philly, "
            "seren (docs/workloads.md)."
        ),
    ] = "helios",
    max_job_gpus: Annotated[
        int, typer.Option(min=1, help="Largest job in GPUs (also bounded by the cluster).")
    ] = 128,
    elastic: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Share of multi-node gangs that may grow by elastic pods beyond the minimum.",
        ),
    ] = 0.0,
    estimates: EstimatesOption = DEFAULT_ESTIMATES,
    config_out: Annotated[
        Path | None,
        typer.Option(
            help="Also write the matching scheduling config (teams' queues with quotas, "
            "priority classes) here, to edit and pass to simulate."
        ),
    ] = None,
) -> None:
    """Write a seeded gang workload calibrated to published cluster statistics.

    Training gangs, inference and notebooks, spread over the built-in teams' queues and
    users, with priority classes and users' run-time estimates. Prints the workload's
    measured statistics next to the target's.
    """
    if calibration not in CALIBRATIONS:
        raise ConfigError(
            f"--calibration: got {calibration!r}; expected one of {', '.join(CALIBRATIONS)}"
        )
    nodes = load_nodes(cluster) if cluster else default_cluster()
    if not any(n.gpu_count for n in nodes):
        raise ConfigError(f"--cluster: {cluster} has no GPU nodes; a GPU workload needs some")
    params = WorkloadParams(
        jobs=jobs,
        load=load,
        calibration=calibration,
        max_job_gpus=max_job_gpus,
        elastic=elastic,
        estimates=estimates,
    )
    job_list = generate_workload(nodes, params, seed)
    dump_workload(job_list, output)
    out.print(f"wrote {len(job_list):,} jobs to {output}")
    _print_calibration(calibration_for(nodes, params), measure(job_list))
    if config_out:
        dump_scheduling(
            default_scheduling(nodes),
            config_out,
            comment="gpusched scheduling config: the built-in teams' queues and priority "
            f"classes,\nquotas scaled to {cluster or 'the built-in cluster'} "
            "(see docs/workloads.md). Edit freely.",
        )
        out.print(f"wrote the scheduling config to {config_out}")


def _print_calibration(cal: Calibration, got: WorkloadStats) -> None:
    """The generated workload's statistics next to the published ones, and the notes."""
    target = cal.target
    table = Table(title=f"calibrated to {target.name}: {target.source}", title_justify="left")
    for col in ("statistic", "target", "generated"):
        table.add_column(col, justify="left" if col == "statistic" else "right")
    rows = (
        ("GPUs per job, mean", f"{target.mean_gpus:.2f}", f"{got.mean_gpus:.2f}"),
        ("GPUs per job, median", f"{target.median_gpus:g}", f"{got.median_gpus:g}"),
        ("largest job, GPUs", f"{target.max_gpus:,}", f"{got.max_gpus:,}"),
        ("run time, mean (s)", f"{target.mean_runtime_s:,.0f}", f"{got.mean_runtime_s:,.0f}"),
        ("run time, median (s)", f"{target.median_runtime_s:,.0f}", f"{got.median_runtime_s:,.0f}"),
    )
    for row in rows:
        table.add_row(*row)
    out.print(table)
    for note in cal.notes:
        out.print(f"[yellow]note:[/yellow] {escape(note)}")
