"""``gpusched run``: the live scheduler in a Kubernetes cluster (see docs/live.md)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpusched.cli.inputs import resolve_profiles
from gpusched.errors import ConfigError
from gpusched.framework import PluginContext
from gpusched.io.native_workload import load_workload
from gpusched.io.openb import read_openb_pods
from gpusched.model import TaskShape
from gpusched.scheduler import LIVE_POLICY, build_profile

__all__ = ["run_command"]


def run_command(
    *,
    kubeconfig: Annotated[
        str | None,
        typer.Option(help="kubeconfig file; default: the pod's service account (in-cluster)"),
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help=f"built-in policy (default {LIVE_POLICY})")
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="profile YAML file instead of --policy")
    ] = None,
    scheduler_name: Annotated[
        str, typer.Option(help="serve pods whose spec.schedulerName is this")
    ] = "gpusched",
    leader_elect: Annotated[
        bool, typer.Option(help="run only while holding the Lease (for several replicas)")
    ] = True,
    lease_namespace: Annotated[
        str, typer.Option(help="namespace of the Lease")
    ] = "gpusched-system",
    lease_name: Annotated[str, typer.Option(help="name of the Lease")] = "gpusched",
    state_configmap: Annotated[
        str,
        typer.Option(
            help="ConfigMap in --lease-namespace where the leader keeps what a new leader needs "
            "(reservation holders, deadlines, evictors); empty: memory only"
        ),
    ] = "gpusched-state",
    identity: Annotated[
        str | None, typer.Option(help="this replica's name in the Lease (default: POD_NAME)")
    ] = None,
    lease_duration: Annotated[
        float,
        typer.Option(
            min=1,
            help="seconds a standby waits after the Lease last changed before taking over",
        ),
    ] = 15.0,
    renew_deadline: Annotated[
        float, typer.Option(min=0.5, help="a leader that cannot renew this long steps down")
    ] = 10.0,
    retry_period: Annotated[
        float, typer.Option(min=0.1, help="seconds between Lease renewals and attempts")
    ] = 2.0,
    watch_timeout: Annotated[
        int,
        typer.Option(min=1, help="seconds each cache's watch request lasts before it is re-opened"),
    ] = 300,
    workload_hint: Annotated[
        str | None,
        typer.Option(
            help="workload file (native YAML/CSV or openb pod CSV) whose task shapes FGD's "
            "fragmentation measure weighs and whose GPU-model-pinned shapes spare-pinned-models "
            "keeps other work away from, as simulate does with its workload; default: none "
            "(one whole GPU, no model preference)"
        ),
    ] = None,
    default_runtime: Annotated[
        str | None,
        typer.Option(
            help="run time of jobs with neither a gpusched.dev/runtime-estimate nor a mean "
            "learned from completed jobs of their user and kind, in seconds or as a duration "
            "('90m'); default: the core's 1h. Under a replay at --speed S, 3600/S gives the "
            "simulator's hour in wall seconds"
        ),
    ] = None,
    metrics_address: Annotated[
        str, typer.Option(help="HOST:PORT serving /metrics; empty to disable")
    ] = "0.0.0.0:10261",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log every cycle")] = False,
) -> None:
    """Schedule pods with schedulerName gpusched in a live cluster, until SIGTERM."""
    # Imported here so other commands do not pay for httpx and prometheus_client at start-up.
    from gpusched.live import LiveOptions, RunConfig, run
    from gpusched.live.client import ApiError
    from gpusched.live.estimates import parse_duration
    from gpusched.live.run import default_identity

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    specs = resolve_profiles(policy or (None if profile else LIVE_POLICY), profile)
    if len(specs) != 1:
        raise ConfigError("--policy: the live scheduler runs exactly one policy")
    if not retry_period < renew_deadline < lease_duration:
        raise ConfigError(
            f"--retry-period {retry_period:g} < --renew-deadline {renew_deadline:g} < "
            f"--lease-duration {lease_duration:g} must hold (a leader steps down before a "
            "standby may take over)"
        )
    default_s = None
    if default_runtime is not None:
        try:
            default_s = parse_duration(default_runtime)
        except ValueError:
            default_s = 0.0
        if default_s <= 0:
            raise ConfigError(
                f"--default-runtime: got {default_runtime!r}; expected seconds ('5400') or a "
                "duration ('90m', '1h30m'), more than 0"
            )
    options = LiveOptions(
        scheduler_name=scheduler_name, watch_timeout_s=watch_timeout, default_runtime_s=default_s
    )
    config = RunConfig(
        kubeconfig=kubeconfig,
        options=options,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
        state_name=state_configmap,
        identity=identity or default_identity(),
        metrics_address=metrics_address,
        lease_s=lease_duration,
        renew_deadline_s=renew_deadline,
        retry_s=retry_period,
    )
    try:
        context = PluginContext(workload_hint=_shapes(workload_hint) if workload_hint else ())
        code = run(config, build_profile(specs[0], context))
    except ApiError as exc:
        print(f"error: the apiserver refused or could not be reached: {exc}", file=sys.stderr)
        code = 1
    raise typer.Exit(code)


def _shapes(path: str) -> list[TaskShape]:
    """The task shapes of a workload file (an openb pod list when its header has num_gpu)."""
    if path.lower().endswith(".csv") and Path(path).is_file():
        with open(path, encoding="utf-8") as fh:
            header = fh.readline()
        if "num_gpu" in header:
            return [t.shape for pod in read_openb_pods(path) for t in pod.to_job().tasks]
    return [t.shape for job in load_workload(path) for t in job.tasks]
