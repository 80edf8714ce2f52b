"""Simulated vs live allocation on the same workload: ``gpusched replay`` on the test control
plane, against gpusched and against kube-scheduler (docs/live.md, "Digital twin").

    .venv/bin/python scripts/replay_twin.py --jobs 300 --speeds 300,1200 --out twin.json

It writes the built-in cluster (44 nodes, 256 GPUs) and a generated workload (``--jobs``,
``--seed``, offered load ``--load``, run times clipped at ``--max-duration`` hours so a replay
ends in minutes; the built-in priorities, no queues) to files,
starts one control plane (etcd, kube-apiserver, kwok, the PodGroup CRD), and for each scheduler
and speed starts the scheduler, runs ``gpusched replay --json`` (which also simulates the same
files with the matching policy: ``gpusched`` for gpusched, ``kube-default`` for
kube-scheduler) and stops the scheduler. It prints one JSON line per replay and writes all of
them to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from bench_live import stop_scheduler  # noqa: E402

from e2e.controlplane import ControlPlane, binaries  # noqa: E402
from gpusched.io.native_dump import dump_cluster, dump_workload  # noqa: E402
from gpusched.io.scheduling import apply_priority_classes  # noqa: E402
from gpusched.model.task import DEFAULT_QUEUE  # noqa: E402
from gpusched.scheduler import LIVE_POLICY  # noqa: E402
from gpusched.workloads import (  # noqa: E402
    WorkloadParams,
    default_cluster,
    default_scheduling,
    generate_workload,
)

CLI = [sys.executable, "-c", "from gpusched.cli.main import main; main()"]


def write_inputs(args: argparse.Namespace, folder: Path) -> tuple[Path, Path]:
    """The built-in cluster and a generated workload with the built-in priorities resolved
    (``priority: N``), no queues (a replay creates none) and run times capped."""
    nodes = default_cluster()
    params = WorkloadParams(jobs=args.jobs, load=args.load, max_runtime_s=args.max_duration * 3600)
    generated = generate_workload(nodes, params, args.seed)
    resolved = apply_priority_classes(generated, default_scheduling(nodes), "generated")
    jobs = [dataclasses.replace(j, priority_class="", queue=DEFAULT_QUEUE) for j in resolved]
    cluster, workload = folder / "cluster.yaml", folder / "jobs.yaml"
    dump_cluster(nodes, cluster)
    dump_workload(jobs, workload)
    return cluster, workload


def start_scheduler(plane: ControlPlane, which: str, hint: Path | None, speed: float) -> Any:
    """kube-scheduler, or ``gpusched run`` (with ``--workload-hint hint`` when given, and the
    simulator's default run time of an hour in the replay's wall seconds)."""
    if which == "kube-scheduler":
        return plane.start_kube_scheduler(f"twin-kube-scheduler-{time.time_ns()}", qps=5000)
    log = plane.workdir / "twin-gpusched.log"
    return subprocess.Popen(
        [
            *CLI,
            "run",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--no-leader-elect",
            "--metrics-address",
            "",
            "--default-runtime",
            str(3600 / speed),
            *(("--workload-hint", str(hint)) if hint else ()),
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=1.2, help="offered GPU load")
    parser.add_argument("--max-duration", type=float, default=4.0, help="hours")
    parser.add_argument("--speeds", default="300,1200")
    parser.add_argument("--schedulers", default="gpusched,kube-scheduler")
    parser.add_argument(
        "--hint",
        action="store_true",
        help="run gpusched with --workload-hint (the workload file), as simulate weighs FGD",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gpusched-twin"))
    args = parser.parse_args()

    plane = ControlPlane(binaries(), args.workdir)
    plane.start(
        apiserver_args=(
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--enable-priority-and-fairness=false",
        )
    )
    reports = []
    try:
        cluster, workload = write_inputs(args, args.workdir)
        plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
        plane.kubectl(
            "wait",
            "--for=condition=Established",
            "crd/podgroups.scheduling.x-k8s.io",
            "--timeout=60s",
        )
        for which in args.schedulers.split(","):
            for speed in args.speeds.split(","):
                hint = workload if args.hint else None
                scheduler = start_scheduler(plane, which, hint, float(speed))
                load = subprocess.run(
                    ["uptime"], check=False, capture_output=True, text=True
                ).stdout.strip()
                done = subprocess.run(
                    [
                        *CLI,
                        "replay",
                        "--kubeconfig",
                        str(plane.kubeconfig),
                        "--cluster",
                        str(cluster),
                        "--workload",
                        str(workload),
                        "--speed",
                        speed,
                        "--scheduler-name",
                        "gpusched" if which == "gpusched" else "default-scheduler",
                        "--policy",
                        LIVE_POLICY if which == "gpusched" else "kube-default",
                        "--json",
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                stop_scheduler(scheduler)
                if done.returncode != 0:
                    raise SystemExit(f"replay failed:\n{done.stderr[-3000:]}")
                report = json.loads(done.stdout)
                report.update(scheduler=which, load_before=load)
                reports.append(report)
                print(json.dumps(report), flush=True)
    finally:
        plane.stop()
    if args.out:
        args.out.write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
