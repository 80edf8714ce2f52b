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

This module assembles the command tree and maps errors to exit codes; each command lives in its
own module: ``simulate`` (:mod:`gpusched.cli.simulate`), ``explain``
(:mod:`gpusched.cli.explain`), ``bench`` (:mod:`gpusched.cli.bench`), ``workload``
(:mod:`gpusched.cli.workload`), ``run`` (:mod:`gpusched.cli.live`), ``replay``
(:mod:`gpusched.cli.replay`).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpusched.cli.bench import bench_app
from gpusched.cli.explain import explain_command
from gpusched.cli.live import run_command
from gpusched.cli.replay import replay_command
from gpusched.cli.simulate import simulate_command
from gpusched.cli.workload import workload_app
from gpusched.errors import GpuschedError, InputError
from gpusched.io.profiles import dump_profile
from gpusched.scheduler import POLICIES, policy_spec

__all__ = ["app", "main"]

app = typer.Typer(
    name="gpusched",
    help="GPU-aware batch scheduler and trace-driven simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
profile_app = typer.Typer(help="Scheduling profiles.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(workload_app, name="workload")
app.add_typer(profile_app, name="profile")
app.command("run")(run_command)
app.command("replay")(replay_command)
app.command("simulate")(simulate_command)
app.command("explain")(explain_command)

out = Console()


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
