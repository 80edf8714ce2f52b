"""``gpusched explain JOB``: why a job is pending, with numbers.

It simulates the same inputs as ``simulate`` up to ``--at``, runs one scheduling cycle on that
snapshot and prints :func:`gpusched.scheduler.explain.explain_job`'s account: what the job
needs, the closest nodes and what each lacks, its queue's quota, its reservation or quota hold
and its estimated start. A job that is not pending at that time gets one line saying why.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

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
from gpusched.cli.summary import duration
from gpusched.errors import ConfigError
from gpusched.model import Job
from gpusched.scheduler import BEST_POLICY, schedule
from gpusched.scheduler.explain import Explanation, explain_job
from gpusched.sim.engine import Simulation
from gpusched.sim.records import SimOptions
from gpusched.sim.runs import prepare

__all__ = ["explain_command"]


out = Console()


def _at(t: float) -> str:
    return f"t={t:,.0f} s"


def _explain_lines(exp: Explanation) -> list[str]:
    lines = [f"[bold]{exp.job.id}[/bold] is pending at {_at(exp.now)}", "", "[bold]needs[/bold]"]
    lines += [f"  {escape(n)}" for n in exp.needs]
    if exp.status is not None:
        cause = exp.status.cause
        because = f" (cause: {cause.value})" if cause is not None else ""
        lines += ["", f"[bold]status[/bold]: {exp.status.code.value}{because}"]
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
    lines += ["", "[bold]when[/bold]", *_when_lines(exp)]
    return lines


def _when_lines(exp: Explanation) -> list[str]:
    """When the job may start: its quota hold and reservation (a hold's holder reserves its
    nodes too, from the hold's end), and its estimated start."""
    lines: list[str] = []
    if exp.quota_hold is not None:
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
    if exp.reservation is not None:
        nodes = ", ".join(exp.reservation.nodes)
        lines.append(
            f"  reservation: {_at(exp.reservation.start)} on {nodes} (EASY backfill: smaller "
            "jobs may use these nodes only if they end before then)"
        )
        lines += _behind_lines(exp)
    elif exp.quota_hold is None and exp.quota_blocked:
        lines.append("  no reservation: the job waits for quota (reservations hold nodes)")
    elif exp.quota_hold is None:
        lines.append(f"  {_no_reservation(exp)}")
    lines += _guard_lines(exp)
    if exp.estimated_start is not None:
        wait = exp.estimated_start - exp.now
        lines.append(
            f"  estimated start: {_at(exp.estimated_start)} (in {duration(wait)}; from run-time "
            "estimates, ignoring packing)"
        )
    else:
        lines.append("  no estimated start (the job cannot run as requested)")
    return lines


def _no_reservation(exp: Explanation) -> str:
    """Why a job blocked for nodes holds no reservation: the profile makes none, or those it
    makes went to jobs ahead of it."""
    most = exp.reservations_max
    if most == 0:
        return "no reservation (the profile's backfill makes none)"
    held = exp.reserved_for
    if not held:
        return f"no reservation (the profile makes {most}, for the first blocked jobs in order)"
    holders = escape(", ".join(held))
    if len(held) >= most:
        which = (
            "the profile's one reservation is"
            if most == 1
            else f"all {most} of the profile's reservations are"
        )
        order = "queue order, aged jobs first" if exp.aged_from is not None else "queue order"
        return f"no reservation: {which} held by {holders}, ahead of it in {order}"
    return (
        f"no reservation this cycle ({len(held)} of the {most} the profile makes are held, "
        f"by {holders})"
    )


#: Running jobs listed under a reservation's start (the rest are counted).
_BEHIND_SHOWN = 3

_BASIS = {
    "declared": "its declared run time",
    "learned": "the mean run time of its user's finished jobs",
    "default": "the default run time",
}


def _behind_lines(exp: Explanation) -> list[str]:
    """What sets the reservation's start: the running jobs on its nodes that end then or
    later, and the reservations laid out ahead of it on the same nodes."""
    lines: list[str] = []
    behind = exp.reserved_behind
    if behind:
        lines.append(
            "    its start is set by the running job(s) on those nodes ending then or later:"
        )
    for b in behind[:_BEHIND_SHOWN]:
        basis = f"{_BASIS[b.basis]}: {duration(b.estimate)}"
        why = f"past {basis}, so as long again as it has run" if b.overrun else basis
        lines.append(
            f"      {b.job} (queue '{b.queue}', {b.gpus:g} GPUs; here on {', '.join(b.nodes)}): "
            f"started {_at(b.start)}, expected to end {_at(b.end)} ({why})"
        )
    if len(behind) > _BEHIND_SHOWN:
        lines.append(f"      and {len(behind) - _BEHIND_SHOWN} more ending then or later")
    if exp.reservations_ahead:
        lines.append("    laid out after the reservation(s) ahead of it on the same nodes:")
    for r in exp.reservations_ahead:
        lines.append(
            f"      {r.job} ({r.shared} of the nodes): from {_at(r.start)}, expected to run "
            f"{duration(r.estimate)}, to {_at(r.start + r.estimate)}"
        )
    return [escape(line) for line in lines]


def _guard_lines(exp: Explanation) -> list[str]:
    """Aging and the limit guard: from when each applies to the job, or since when."""
    lines: list[str] = []
    if exp.aged_from is not None:
        if exp.now >= exp.aged_from:
            lines.append(
                f"  aged since {_at(exp.aged_from)}: it goes before younger jobs for a "
                "reservation, oldest first"
            )
        else:
            lines.append(
                f"  aging: from {_at(exp.aged_from)} (in {duration(exp.aged_from - exp.now)}) "
                "it goes before younger jobs for a reservation"
            )
    guard = exp.limit_guard
    if guard is not None:
        what = f"may evict work of queue '{guard.queue}' started after {_at(guard.since)}"
        if exp.now >= guard.start:
            lines.append(f"  limit guard: since {_at(guard.start)} it {what}")
        else:
            wait = duration(guard.start - exp.now)
            lines.append(f"  limit guard: from {_at(guard.start)} (in {wait}) it {what}")
        if guard.victims == 0:
            lines.append("    none running now (preemptible, its priority or lower, not evicted)")
        else:
            admits = "would" if guard.admits else "would not"
            fits = "would" if guard.fits else "would not"
            lines.append(
                f"    {guard.victims} job(s), {guard.victim_gpus:g} GPUs now; with all gone the "
                f"queues {admits} admit it and the nodes {fits} fit it"
            )
    return lines


def explain_command(
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
    requeue_at_eviction: RequeueOption = True,
) -> None:
    """Why a job is pending: what it needs, the closest nodes and what each lacks, its queue's
    quota, its reservation and estimated start.

    Simulates the same inputs as ``simulate`` (with the same ``--keep-place-at-eviction``, if
    given) up to ``--at`` and explains the job as the next scheduling cycle sees it.
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
    options = SimOptions(requeue_at_eviction=requeue_at_eviction)
    sim = prepare(inputs.nodes, inputs.jobs, specs[0], seed, inputs.config.queues, options=options)
    with progress_bar(f"simulating to {_at(when)}", len(inputs.jobs)) as tick:
        sim.run(lambda d, t: tick(d), until=when)
    message = _not_pending(job, target, sim, when)
    if message is not None:
        out.print(message)
        return
    snapshot = sim.snapshot()
    plan = schedule(snapshot, sim.profile)
    exp = explain_job(snapshot, sim.profile, target.id, plan, top=top)
    for line in _explain_lines(exp):
        out.print(line, highlight=False, soft_wrap=True)


def _not_pending(job: str, target: Job, sim: Simulation, when: float) -> str | None:
    """What happened to a job that is not pending at ``when`` (not arrived, done, running or
    rejected), or ``None`` when it is pending and there is something to explain."""
    rec = sim.records[target.id]
    if when < rec.arrival:
        return f"{job} arrives at {_at(rec.arrival)}; pass --at {rec.arrival:g} or later"
    if rec.end is not None:
        return f"{job} ran from {_at(rec.start or 0)} and completed at {_at(rec.end)}"
    if rec.start is not None:
        nodes = sorted(
            {
                sim.state.names[a.node]
                for t in target.tasks
                if (a := sim.state.allocations.get(t.id))
            }
        )
        return (
            f"{job} is running since {_at(rec.start)} (waited {duration(rec.wait or 0)}) on "
            f"{', '.join(nodes)}"
        )
    if target.id not in {j.id for j in sim.pending}:
        reason = rec.status.message if rec.status else "rejected"
        return f"{job} was rejected and will never run: {escape(reason)}"
    return None
