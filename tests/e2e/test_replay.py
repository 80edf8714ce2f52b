"""``gpusched replay`` against the real control plane: a small workload replayed on kwok nodes
with ``gpusched run`` scheduling it, compared with ``gpusched simulate`` of the same files.

Tolerance. The replay compresses time by ``SPEED``; every start on the cluster comes later than
in the simulation by the live scheduler's reaction time (watch event, 50 ms batching, the cycle,
the Binding POST, the watch event back), at most about one second of wall time when the machine
is idle and a few under load. Waits may therefore differ by ``LAG_WALL_S * SPEED`` trace seconds
per job; allocation, counted over the arrival window, by the GPU-seconds those lags shift. The
workload is spaced so that a lag of that size does not reorder jobs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from e2e.controlplane import REPO, ControlPlane
from e2e.kube import check
from gpusched.scheduler import LIVE_POLICY

SPEED = 30.0
LAG_WALL_S = 4.0

CLUSTER = """
nodes:
  - name: replay-a100
    count: 2
    cpu: 64
    memory: 512Gi
    gpus: 8
    gpu_model: A100
    gpu_memory: 80Gi
"""

# 16 GPUs. Arrivals 60 s (2 s of wall time) apart; run times of 150-300 s (5-10 s).
WORKLOAD = """
jobs:
  - {name: train-a, submit: 0, duration: 300, replicas: 2, cpu: 8, memory: 64Gi, gpus: 4}
  - {name: single-b, submit: 0, duration: 150, cpu: 4, memory: 32Gi, gpus: 4}
  - {name: single-c, submit: 60, duration: 150, cpu: 2, memory: 16Gi, gpus: 2}
  - {name: infer-d, submit: 60, duration: 300, cpu: 1, memory: 8Gi, gpus: 1, gpu_share: 500}
  - {name: train-e, submit: 120, duration: 150, replicas: 2, cpu: 8, memory: 64Gi, gpus: 4}
  - {name: whole-f, submit: 180, duration: 150, cpu: 8, memory: 64Gi, gpus: 8}
  - {name: single-g, submit: 240, duration: 150, cpu: 1, memory: 8Gi, gpus: 1}
"""


@pytest.fixture
def live_scheduler(control_plane: ControlPlane) -> Iterator[subprocess.Popen[bytes]]:
    """``gpusched run`` (one replica, no leader election) with the PodGroup CRD installed."""
    control_plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=60s"
    )
    log = control_plane.workdir / "gpusched-replay-scheduler.log"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gpusched.cli.main import main; main()",
            "run",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--no-leader-elect",
            "--metrics-address",
            "",
            # The simulator's default hour, in the replay's wall seconds.
            "--default-runtime",
            str(3600 / SPEED),
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    control_plane.extra_logs.append(log)
    yield process
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    control_plane.extra_logs.remove(log)


def _gpusched(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", "from gpusched.cli.main import main; main()", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_replay_completes_every_job_and_agrees_with_simulate(
    control_plane: ControlPlane,
    kube: httpx.Client,
    live_scheduler: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    cluster, workload = tmp_path / "cluster.yaml", tmp_path / "jobs.yaml"
    cluster.write_text(CLUSTER)
    workload.write_text(WORKLOAD)
    report = _gpusched(
        "replay",
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--cluster",
        str(cluster),
        "--workload",
        str(workload),
        "--speed",
        str(SPEED),
        "--stall",
        "20",
        "--json",
    )
    simulated = _gpusched(
        "simulate",
        "--cluster",
        str(cluster),
        "--workload",
        str(workload),
        "--policy",
        LIVE_POLICY,
        "--json",
    )
    results = report["results"]
    assert isinstance(results, list)
    live, sim = results[0], results[1]
    plain_results = simulated["results"]
    assert isinstance(plain_results, list)
    plain_sim = plain_results[0]
    # replay reports simulate's keys, and its own simulation is simulate's run
    assert set(plain_sim) - {"seconds"} <= set(live)
    for key in ("jobs_started", "jobs_completed", "avg_wait_s", "gpu_allocation_pct"):
        assert sim[key] == plain_sim[key], key

    assert live["jobs"] == live["jobs_started"] == live["jobs_completed"] == 7
    assert live["partially_placed_gangs_max"] == 0
    assert report["replay"]["errors"] == []  # type: ignore[index]
    lag = LAG_WALL_S * SPEED
    assert abs(live["avg_wait_s"] - sim["avg_wait_s"]) <= lag, (live, sim)
    assert abs(live["avg_jct_s"] - sim["avg_jct_s"]) <= lag, (live, sim)
    assert abs(live["gpu_allocation_pct"] - sim["gpu_allocation_pct"]) <= 10.0, (live, sim)
    differences = report["differences"]
    assert isinstance(differences, dict)
    assert differences["jobs_started_in_both"] == 7
    assert differences["start_delta_s"]["max_late"] <= lag
    # everything the replay created is gone again
    nodes = check(kube.get("/api/v1/nodes", params={"labelSelector": "gpusched.dev/replay"}))
    assert nodes["items"] == []
