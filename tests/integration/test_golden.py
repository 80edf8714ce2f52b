"""A small golden simulation: the full event log of a 12-job run, compared byte for byte.

The workload (tests/data/small_workload.yaml) is small enough to check by hand; highlights:
fractions pair up on one GPU (infer-a and infer-b on small-000 GPU 0), the 2-pod gang is placed
whole on big-001, ``too-big`` (8 GPUs per pod, nodes have 4) is rejected as unresolvable, and
train-c waits for the gang to finish at t=230. Regenerate the golden file only after checking a
behaviour change on purpose.
"""

from __future__ import annotations

from pathlib import Path

from gpusched import SimOptions, Simulation, build_profile, policy_spec
from gpusched.framework import PluginContext
from gpusched.io.native_cluster import load_cluster
from gpusched.io.native_workload import load_workload


def _run(data_dir: Path, policy: str, seed: int = 1) -> Simulation:
    nodes = load_cluster(data_dir / "small_cluster.yaml")
    jobs = load_workload(data_dir / "small_workload.yaml")
    hint = [t.shape for j in jobs for t in j.tasks]
    profile = build_profile(policy_spec(policy), PluginContext(workload_hint=hint))
    return Simulation(nodes, jobs, profile, seed=seed, options=SimOptions(record_events=True)).run()


def test_fgd_event_log_matches_golden(data_dir: Path) -> None:
    sim = _run(data_dir, "fgd")
    assert sim.event_log() == (data_dir / "golden_fgd.log").read_text()


def test_golden_run_rejects_only_the_impossible_job(data_dir: Path) -> None:
    sim = _run(data_dir, "fgd")
    never = [r.job.id for r in sim.records.values() if r.start is None]
    assert never == ["too-big"]
    status = sim.records["too-big"].status  # type: ignore[index]
    assert status is not None
    assert status.code.value == "Unresolvable"
    assert "fewer than 8 GPU(s)" in status.message


def test_kube_default_leaves_the_four_gpu_job_waiting_longer(data_dir: Path) -> None:
    # kube-default spreads pods, so no node keeps 4 whole GPUs free for train-a (t=10).
    fgd = _run(data_dir, "fgd").records["train-a"]  # type: ignore[index]
    kube = _run(data_dir, "kube-default").records["train-a"]  # type: ignore[index]
    assert fgd.wait == 0.0
    assert kube.wait is not None
    assert kube.wait > 0
