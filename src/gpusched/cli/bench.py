"""``gpusched bench``: the benchmark commands (``openb``, ``gangs``, ``cycle``).

Each runs one experiment of :mod:`gpusched.sim` (the FGD paper's openb protocol, the generated
gang workload, one timed scheduling cycle on a large busy cluster) and prints a table or one JSON
object; the figures and their commands are recorded in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpusched.cli.inputs import (
    DEFAULT_ESTIMATES,
    DEFAULT_LOAD,
    EstimatesOption,
    LoadOption,
    RequeueOption,
    load_inputs,
    parse_seeds,
)
from gpusched.cli.progress import progress_bar
from gpusched.cli.summary import SUMMARY_ROWS, fmt_value
from gpusched.errors import ConfigError
from gpusched.io.openb import read_openb_nodes, read_openb_pods, read_paper_results, workload_path
from gpusched.report.html import BENCH_HEADERS, bench_report, bench_rows
from gpusched.scheduler import policy_spec
from gpusched.sim.bench import run_bench
from gpusched.sim.cycle_bench import PHASES, CycleResult, build_cycle_setup, time_cycle
from gpusched.sim.gang_bench import GANG_POLICIES, gang_specs, run_gang_bench
from gpusched.sim.machine import machine_info, machine_line
from gpusched.sim.records import SimOptions

__all__ = ["bench_app"]


bench_app = typer.Typer(help="Benchmarks on research traces.", no_args_is_help=True)

out = Console()

_PAPER_POLICIES = "random,dotprod,clustering,packing,bestfit,fgd"


@bench_app.command("openb")
def bench_openb(
    trace_dir: Annotated[
        Path, typer.Option(help="Directory with the openb CSVs (e.g. ../shared/traces/openb).")
    ],
    workload: Annotated[str, typer.Option(help="Pod list: openb_pod_list_<NAME>.csv.")] = "default",
    policies: Annotated[str, typer.Option(help="Comma-separated policies.")] = _PAPER_POLICIES,
    seeds: Annotated[str, typer.Option(help="Seeds: a range 42-51 or a list.")] = "42-51",
    workers: Annotated[
        int | None, typer.Option(min=1, help="Worker processes (default: CPU count).")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write an HTML report here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The FGD paper's experiment: GPU allocation at 100% arrived load, mean over seeds."""
    seed_list = parse_seeds(seeds)
    specs = [policy_spec(p.strip()) for p in policies.split(",") if p.strip()]
    if not specs:
        raise ConfigError("--policies: expected one or more policy names")
    nodes = read_openb_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    models = {n.gpu_model for n in nodes if n.gpu_model}
    pods = read_openb_pods(workload_path(trace_dir, workload), known_models=models)
    jobs = [p.to_job() for p in pods]
    paper = read_paper_results(trace_dir, workload)
    total = len(specs) * len(seed_list)
    with progress_bar(f"openb {workload}", total, enabled=not as_json) as tick:
        done = [0]

        def step(_: object) -> None:
            done[0] += 1
            tick(done[0])

        summaries = run_bench(nodes, jobs, specs, seed_list, workers=workers, progress=step)
    if report:
        bench_report(report, workload, summaries, paper, seed_list)
    if as_json:
        results = []
        for s in summaries:
            row = s.as_json()
            ref = paper.get(s.policy)
            if ref:
                row["paper_alloc_pct_at_100_mean"] = ref.alloc_mean
                row["paper_alloc_pct_at_100_std"] = ref.alloc_std
            results.append(row)
        print(json.dumps({"workload": workload, "seeds": seed_list, "results": results}))
        return
    table = Table(
        title=f"openb {workload}: GPU allocation % at 100% arrived load "
        f"(seeds {seeds}, {len(nodes)} nodes, {len(jobs):,} pods)",
        title_justify="left",
    )
    for col in BENCH_HEADERS:
        table.add_column(col, justify="left" if col == "policy" else "right")
    for cells in bench_rows(summaries, paper):
        table.add_row(*cells)
    out.print(table)
    if report:
        out.print(f"report: {report}")


@bench_app.command("gangs")
def bench_gangs(
    jobs: Annotated[int, typer.Option(min=1, help="Jobs to generate.")] = 5000,
    seed: Annotated[int, typer.Option(help="Seed of the workload and the runs.")] = 7,
    load: LoadOption = DEFAULT_LOAD,
    estimates: EstimatesOption = DEFAULT_ESTIMATES,
    cluster: Annotated[
        str | None, typer.Option(help="Cluster file (default: the built-in cluster).")
    ] = None,
    config: Annotated[
        str | None, typer.Option(help="Scheduling config (default: the built-in teams).")
    ] = None,
    policies: Annotated[
        str, typer.Option(help="Comma-separated; NAME-no-reservation drops backfill's hold.")
    ] = ",".join(GANG_POLICIES),
    queues: Annotated[
        bool, typer.Option(help="Queues and quotas from the config (off: no quota at all).")
    ] = True,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Worker processes (default: CPU count).")
    ] = None,
    requeue_at_eviction: RequeueOption = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """A generated gang workload under kube-default, FIFO gangs and gpusched (with and without
    the backfill reservation)."""
    specs = gang_specs([p.strip() for p in policies.split(",") if p.strip()])
    inputs = load_inputs(cluster, None, config, seed, jobs, load=load, estimates=estimates)
    tree = inputs.config.queues if queues else None
    machine = machine_info()
    with progress_bar(f"gang bench ({jobs:,} jobs)", len(specs), enabled=not as_json) as tick:
        done = [0]

        def step(_: object) -> None:
            done[0] += 1
            tick(done[0])

        results = run_gang_bench(
            inputs.nodes, inputs.jobs, tree, specs, seed, workers=workers,
            progress=step, options=SimOptions(requeue_at_eviction=requeue_at_eviction),
        )  # fmt: skip
    if as_json:
        print(
            json.dumps(
                {
                    "workload": inputs.title,
                    "queues": queues,
                    "seed": seed,
                    "requeue_at_eviction": requeue_at_eviction,
                    "machine": machine,
                    "results": results,
                }
            )
        )
        return
    title = inputs.title if queues else f"{inputs.title} (queues off)"
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for r in results:
        table.add_column(r["policy"], justify="right")
    for key, label, fmt in SUMMARY_ROWS:
        table.add_row(label, *[fmt_value(r.get(key, 0), fmt) for r in results])
    out.print(table)
    out.print(machine_line(machine))


@bench_app.command("cycle")
def bench_cycle(
    nodes: Annotated[int, typer.Option(min=1, help="8-GPU nodes.")] = 5000,
    pending: Annotated[int, typer.Option(min=1, help="Pending jobs.")] = 10000,
    fill: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of GPUs held by running jobs.")
    ] = 0.9,
    policies: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated policies [default: gpusched,fifo-gang,kube-default; with "
            "--topology: gpusched-topo,gpusched]."
        ),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Cycles timed per policy.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the cluster fill and workload.")] = 1,
    with_queues: Annotated[
        bool, typer.Option(help="Use the built-in teams' queues (scaled to the cluster).")
    ] = True,
    topology: Annotated[
        bool,
        typer.Option(
            "--topology",
            help="HGX boards with their GPU topology (H100 and A100 alternating), 4 per rack "
            "and 128 per block (labels topology.gpusched.io/rack and /block), instead of "
            "plain nodes.",
        ),
    ] = False,
    phases: Annotated[
        str,
        typer.Option(
            help="Comma-separated cycles to time: cold (every pending job new, a tenth of the "
            "GPUs free), steady (the next cycle: plan applied, queue topped up)."
        ),
    ] = "cold,steady",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Time one full scheduling cycle on a large busy cluster (median of --repeat)."""
    if policies is None:
        policies = "gpusched-topo,gpusched" if topology else "gpusched,fifo-gang,kube-default"
    specs = [policy_spec(p.strip()) for p in policies.split(",") if p.strip()]
    chosen = [p.strip() for p in phases.split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(PHASES))
    if unknown or not chosen:
        raise typer.BadParameter(
            f"unknown phase(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(PHASES)}",
            param_hint="--phases",
        )
    kind = "HGX nodes in racks of 4, blocks of 128" if topology else "nodes"
    if not as_json:
        out.print(f"building {nodes:,} {kind} filled to {fill:.0%} with {pending:,} pending ...")
    setup = build_cycle_setup(
        nodes, pending, fill=fill, seed=seed, queues=with_queues, topology=topology
    )
    results = time_cycle(setup, specs, repeat, chosen)
    rows = _cycle_rows(results)
    machine = machine_info()
    head = {
        "nodes": nodes,
        "gpus": nodes * 8,
        "running_jobs": len(setup.snapshot.running),
        "running_gpu_pct": round(setup.running_gpu_pct, 1),
        "pending": len(setup.snapshot.pending),
        "queues": with_queues,
        "topology": topology,
        "machine": machine,
    }
    if as_json:
        print(json.dumps({**head, "results": rows}))
        return
    out.print(
        f"{nodes:,} {kind} ({nodes * 8:,} GPUs, {setup.running_gpu_pct:.1f}% held by "
        f"{len(setup.snapshot.running):,} running jobs), {len(setup.snapshot.pending):,} pending"
    )
    _print_cycle_table(rows)
    out.print(machine_line(machine))


def _cycle_rows(results: list[CycleResult]) -> list[dict[str, object]]:
    """One JSON row per timed cycle (seconds rounded to milliseconds)."""
    return [
        {
            "policy": r.policy,
            "phase": r.phase,
            "pending": r.pending,
            "median_s": round(r.median_s, 3),
            "seconds": [round(x, 3) for x in r.seconds],
            "cpu_median_s": round(r.cpu_median_s, 3),
            "binds": r.binds,
            "evictions": r.evictions,
            "jobs_left_pending": r.pending_after,
        }
        for r in results
    ]


def _print_cycle_table(rows: list[dict[str, object]]) -> None:
    """The timed cycles as a table, one line per policy and phase."""
    table = Table(title_justify="left")
    cols = (
        *("policy", "cycle", "pending", "cycle (median)", "CPU (median)", "all runs"),
        *("binds", "evictions", "left pending"),
    )
    for col in cols:
        table.add_column(col, justify="left" if col in {"policy", "cycle"} else "right")
    for row in rows:
        table.add_row(
            str(row["policy"]),
            str(row["phase"]),
            f"{row['pending']:,}",
            f"{row['median_s']:.3f} s",
            f"{row['cpu_median_s']:.3f} s",
            " ".join(f"{x:.3f}" for x in row["seconds"]),  # type: ignore[attr-defined]
            f"{row['binds']:,}",
            f"{row['evictions']:,}",
            f"{row['jobs_left_pending']:,}",
        )
    out.print(table)
