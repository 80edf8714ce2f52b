"""`gpusched workload generate` as a user runs it: the calibration table, the scheduling config
it writes beside the workload, and bad flags."""

from __future__ import annotations

from pathlib import Path

from gpusched.io.native_workload import load_workload
from gpusched.io.scheduling import apply_priority_classes, check_job_queues, load_scheduling
from integration.test_cli import gpusched


def test_generate_writes_a_workload_and_a_matching_scheduling_config(tmp_path: Path) -> None:
    jobs_path, config_path = tmp_path / "jobs.yaml", tmp_path / "sched.yaml"
    result = gpusched(
        "workload", "generate", "--jobs", "400", "--seed", "2", "--calibration", "philly",
        "-o", str(jobs_path), "--config-out", str(config_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "calibrated to philly" in result.stdout
    assert "GPUs per job, mean" in result.stdout
    assert "18,006" in result.stdout  # Philly's published mean run time, seconds
    config = load_scheduling(config_path)
    jobs = load_workload(jobs_path)
    check_job_queues(jobs, config, jobs_path)  # every queue exists
    resolved = apply_priority_classes(jobs, config, jobs_path)  # every class exists
    critical = [j for j in resolved if j.priority_class == "inference-critical"]
    assert critical
    assert all(j.priority == 1000 and not j.preemptible for j in critical)
    assert config_path.read_text().startswith("# gpusched scheduling config")


def test_unknown_calibration_exits_2_naming_the_choices(tmp_path: Path) -> None:
    result = gpusched(
        "workload", "generate", "--calibration", "kalos", "-o", str(tmp_path / "w.yaml")
    )
    assert result.returncode == 2
    assert "--calibration" in result.stderr
    assert "helios" in result.stderr
    assert not (tmp_path / "w.yaml").exists()


def test_estimates_sets_the_share_of_users_who_declare_run_times(tmp_path: Path) -> None:
    declared = {}
    for share in ("0", "1"):
        path = tmp_path / f"jobs-{share}.yaml"
        result = gpusched(
            "workload", "generate", "--jobs", "150", "--seed", "4", "--estimates", share,
            "-o", str(path),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        jobs = load_workload(path)
        declared[share] = [j.runtime_estimate is not None for j in jobs]
    assert not any(declared["0"])
    assert all(declared["1"])


def test_estimates_outside_zero_to_one_exits_2(tmp_path: Path) -> None:
    result = gpusched("workload", "generate", "--estimates", "1.5", "-o", str(tmp_path / "w.yaml"))
    assert result.returncode == 2
    assert "--estimates" in result.stderr
    assert not (tmp_path / "w.yaml").exists()
