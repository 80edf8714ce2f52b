"""The ``gpusched`` command line.

Commands::

    gpusched simulate              replay a workload through the scheduler (default: built-in)
    gpusched explain JOB           why a job is pending, with numbers (on a simulation)
    gpusched bench openb           the FGD paper's experiment on the Alibaba openb trace
    gpusched bench gangs           a generated gang workload: baselines vs gpusched
    gpusched bench cycle           time one scheduling cycle on a large busy cluster
    gpusched workload generate     write a seeded synthetic workload file
    gpusched run                   the live scheduler in a Kubernetes cluster
    gpusched replay                a workload replayed on kwok nodes against a live scheduler
    gpusched policies              list the built-in placement policies
    gpusched profile show NAME     print a built-in policy as a profile YAML to start from

Bad input (files, flags, profiles) exits with code 2 and one message naming what was wrong,
where, and what is expected; no traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpusched.cli.inputs import load_inputs, load_nodes, parse_seeds, resolve_profiles
from gpusched.cli.live import run_command
from gpusched.cli.progress import progress_bar
from gpusched.cli.replay import replay_command
from gpusched.cli.summary import SUMMARY_ROWS, duration, fmt_value
from gpusched.errors import ConfigError, GpuschedError, InputError
from gpusched.io.native_dump import dump_workload
from gpusched.io.openb import read_openb_nodes, read_openb_pods, read_paper_results, workload_path
from gpusched.io.profiles import dump_profile
from gpusched.report.html import BENCH_HEADERS, bench_report, bench_rows, simulate_report
from gpusched.scheduler import BEST_POLICY, DEFAULT_COMPARISON, POLICIES, policy_spec, schedule
from gpusched.scheduler.explain import Explanation, explain_job
from gpusched.sim.bench import run_bench
from gpusched.sim.cycle_bench import PHASES, build_cycle_setup, time_cycle
from gpusched.sim.gang_bench import GANG_POLICIES, gang_specs, run_gang_bench
from gpusched.sim.runs import SimRun, prepare, simulate
from gpusched.workloads import WorkloadParams, default_cluster, generate_workload

__all__ = ["app", "main"]

app = typer.Typer(
    name="gpusched",
    help="GPU-aware batch scheduler and trace-driven simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(help="Benchmarks on research traces.", no_args_is_help=True)
workload_app = typer.Typer(help="Workload files.", no_args_is_help=True)
profile_app = typer.Typer(help="Scheduling profiles.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(workload_app, name="workload")
app.add_typer(profile_app, name="profile")
app.command("run")(run_command)
app.command("replay")(replay_command)

out = Console()

_PAPER_POLICIES = "random,dotprod,clustering,packing,bestfit,fgd"


# -- simulate --------------------------------------------------------------------------------

# Options shared by simulate and explain (they run on the same inputs, see cli/inputs.py).
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


@app.command("simulate")
def simulate_cmd(
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
) -> None:
    """Replay a workload through the scheduler and compare policies side by side.

    With no arguments: the built-in cluster (256 GPUs), its three teams with quotas and
    priority classes, and a generated gang workload, under kube-default, a FIFO gang baseline
    and gpusched's best policy.
    """
    specs = resolve_profiles(policy, profile)
    inputs = load_inputs(cluster, workload, config, seed, jobs)
    nodes, job_list, title = inputs.nodes, inputs.jobs, inputs.title
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
                    "results": [{"policy": r.policy, **r.summary} for r in runs],
                }
            )
        )
        return
    _print_runs(runs, title)
    if report:
        out.print(f"report: {report}")


# -- explain ---------------------------------------------------------------------------------


def _at(t: float) -> str:
    return f"t={t:,.0f} s"


def _explain_lines(exp: Explanation) -> list[str]:
    lines = [f"[bold]{exp.job.id}[/bold] is pending at {_at(exp.now)}", "", "[bold]needs[/bold]"]
    lines += [f"  {escape(n)}" for n in exp.needs]
    if exp.status is not None:
        lines += ["", f"[bold]status[/bold]: {exp.status.code.value}"]
        lines += [f"  {escape(r)}" for r in exp.status.reasons]
    lines += ["", "[bold]nodes[/bold]"]
    lines.append(
        f"  the gang: {exp.gang_placeable} of {exp.gang_needed} pod(s) could be placed together now"
    )
    lines.append(f"  {exp.fitting_nodes} node(s) could host its next pod now")
    lines += [f"  {escape(r)}" for r in exp.filtered_out]
    if exp.candidates:
        lines.append("  closest nodes (what each lacks):")
        for c in exp.candidates:
            lacks = "; ".join(c.lacks) if c.lacks else "fits now"
            lines.append(f"    {c.node:<14} {escape(lacks)}")
    lines += ["", "[bold]quota[/bold]"] + [f"  {escape(q)}" for q in exp.quota]
    lines += ["", "[bold]when[/bold]"]
    if exp.reservation is not None:
        nodes = ", ".join(exp.reservation.nodes)
        lines.append(
            f"  reservation: {_at(exp.reservation.start)} on {nodes} (EASY backfill: smaller "
            "jobs may use these nodes only if they end before then)"
        )
    elif exp.quota_hold is not None:
        hold = exp.quota_hold
        if hold.limit is None:
            lines.append(
                f"  quota hold: it needs {hold.short / 1000:g} more borrowable GPUs, expected by "
                f"{_at(hold.until)}; until then other jobs may borrow only if they end before it"
            )
        else:
            lines.append(
                f"  limit hold: queue {hold.limit!r} is expected to have room by "
                f"{_at(hold.until)}; until then its other jobs may start only if they end first"
            )
    elif exp.quota_blocked:
        lines.append("  no reservation: the job waits for quota (reservations hold nodes)")
    else:
        lines.append("  no reservation (only the first blocked job in queue order holds one)")
    if exp.estimated_start is not None:
        wait = exp.estimated_start - exp.now
        lines.append(
            f"  estimated start: {_at(exp.estimated_start)} (in {duration(wait)}; from run-time "
            "estimates, ignoring packing)"
        )
    else:
        lines.append("  no estimated start (the job cannot run as requested)")
    return lines


@app.command("explain")
def explain_cmd(
    job: Annotated[str, typer.Argument(help="The job to explain (its id in the workload).")],
    at: Annotated[
        float | None,
        typer.Option(help="Simulated time in seconds (default: the job's arrival).", min=0),
    ] = None,
    cluster: ClusterOption = None,
    workload: WorkloadOption = None,
    config: ConfigOption = None,
    policy: Annotated[str, typer.Option(help="Policy to simulate.")] = BEST_POLICY,
    profile: Annotated[str | None, typer.Option(help="A profile YAML file instead.")] = None,
    seed: SeedOption = 7,
    jobs: JobsOption = 1500,
    top: Annotated[int, typer.Option(min=1, help="Closest nodes to show.")] = 5,
) -> None:
    """Why a job is pending: what it needs, the closest nodes and what each lacks, its queue's
    quota, its reservation and estimated start.

    Simulates the same inputs as ``simulate`` up to ``--at`` and explains the job as the next
    scheduling cycle sees it.
    """
    specs = resolve_profiles(None if profile else policy, profile)
    if len(specs) != 1:
        raise ConfigError("--policy: explain runs one policy; give a single name")
    inputs = load_inputs(cluster, workload, config, seed, jobs)
    target = next((j for j in inputs.jobs if j.id == job), None)
    if target is None:
        sample = ", ".join(j.id for j in inputs.jobs[:3])
        raise ConfigError(
            f"job {job!r} is not in the workload ({len(inputs.jobs):,} jobs, e.g. {sample})"
        )
    when = target.submit_time if at is None else at
    sim = prepare(inputs.nodes, inputs.jobs, specs[0], seed, inputs.config.queues)
    with progress_bar(f"simulating to {_at(when)}", len(inputs.jobs)) as tick:
        sim.run(lambda d, t: tick(d), until=when)
    rec = sim.records[target.id]
    if when < rec.arrival:
        out.print(f"{job} arrives at {_at(rec.arrival)}; pass --at {rec.arrival:g} or later")
        return
    if rec.end is not None:
        out.print(f"{job} ran from {_at(rec.start or 0)} and completed at {_at(rec.end)}")
        return
    if rec.start is not None:
        nodes = sorted(
            {
                sim.state.names[a.node]
                for t in target.tasks
                if (a := sim.state.allocations.get(t.id))
            }
        )
        out.print(
            f"{job} is running since {_at(rec.start)} (waited {duration(rec.wait or 0)}) on "
            f"{', '.join(nodes)}"
        )
        return
    if target.id not in {j.id for j in sim.pending}:
        reason = rec.status.message if rec.status else "rejected"
        out.print(f"{job} was rejected and will never run: {escape(reason)}")
        return
    snapshot = sim.snapshot()
    plan = schedule(snapshot, sim.profile)
    exp = explain_job(snapshot, sim.profile, target.id, plan, top=top)
    for line in _explain_lines(exp):
        out.print(line, highlight=False, soft_wrap=True)


# -- bench -----------------------------------------------------------------------------------


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
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """A generated gang workload under kube-default, FIFO gangs and gpusched (with and without
    the backfill reservation)."""
    specs = gang_specs([p.strip() for p in policies.split(",") if p.strip()])
    inputs = load_inputs(cluster, None, config, seed, jobs)
    tree = inputs.config.queues if queues else None
    with progress_bar(f"gang bench ({jobs:,} jobs)", len(specs), enabled=not as_json) as tick:
        done = [0]

        def step(_: object) -> None:
            done[0] += 1
            tick(done[0])

        results = run_gang_bench(
            inputs.nodes, inputs.jobs, tree, specs, seed, workers=workers,
            progress=step,
        )  # fmt: skip
    if as_json:
        print(
            json.dumps(
                {"workload": inputs.title, "queues": queues, "seed": seed, "results": results}
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
    rows = [
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
    head = {
        "nodes": nodes,
        "gpus": nodes * 8,
        "running_jobs": len(setup.snapshot.running),
        "running_gpu_pct": round(setup.running_gpu_pct, 1),
        "pending": len(setup.snapshot.pending),
        "queues": with_queues,
        "topology": topology,
    }
    if as_json:
        print(json.dumps({**head, "results": rows}))
        return
    out.print(
        f"{nodes:,} {kind} ({nodes * 8:,} GPUs, {setup.running_gpu_pct:.1f}% held by "
        f"{len(setup.snapshot.running):,} running jobs), {len(setup.snapshot.pending):,} pending"
    )
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


# -- workload, policies, profiles ------------------------------------------------------------


@workload_app.command("generate")
def workload_generate(
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write (YAML).")],
    jobs: Annotated[int, typer.Option(min=1, help="Number of jobs.")] = 1500,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 7,
    load: Annotated[
        float, typer.Option(min=0.01, max=10.0, help="Offered GPU load (1.0 = capacity).")
    ] = 0.9,
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
    from gpusched.io.native_dump import dump_scheduling
    from gpusched.workloads import CALIBRATIONS, calibration_for, default_scheduling, measure

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
    )
    job_list = generate_workload(nodes, params, seed)
    dump_workload(job_list, output)
    out.print(f"wrote {len(job_list):,} jobs to {output}")
    cal = calibration_for(nodes, params)
    got = measure(job_list)
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
    if config_out:
        dump_scheduling(
            default_scheduling(nodes),
            config_out,
            comment="gpusched scheduling config: the built-in teams' queues and priority "
            f"classes,\nquotas scaled to {cluster or 'the built-in cluster'} "
            "(see docs/workloads.md). Edit freely.",
        )
        out.print(f"wrote the scheduling config to {config_out}")


@app.command("policies")
def policies_cmd() -> None:
    """List the built-in placement policies."""
    table = Table(title="built-in policies", title_justify="left")
    table.add_column("name")
    table.add_column("what it does")
    for name, spec in POLICIES.items():
        table.add_row(name, spec.description)
    out.print(table)


@profile_app.command("show")
def profile_show(name: Annotated[str, typer.Argument(help="A built-in policy name.")]) -> None:
    """Print a built-in policy as profile YAML (a starting point for --profile)."""
    print(dump_profile(policy_spec(name)), end="")


def main() -> None:
    """Entry point: run the CLI, turning input errors into exit code 2 with one message."""
    try:
        app()
    except InputError as exc:
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False
        )
        sys.exit(2)
    except GpuschedError as exc:
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]internal error:[/bold red] {escape(str(exc))} (this is a bug)"
        )
        sys.exit(3)
