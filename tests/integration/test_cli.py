"""The command line as a user runs it: exit codes, messages, JSON and reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from integration.conftest import REPO


def gpusched(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI entry point in a subprocess."""
    code = "from gpusched.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        check=False,
        timeout=300,
    )


def test_simulate_default_json_compares_baselines_and_gpusched() -> None:
    result = gpusched("simulate", "--jobs", "150", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    policies = [r["policy"] for r in payload["results"]]
    assert policies == ["kube-default", "fifo-gang", "gpusched"]
    kube, _, fgd = payload["results"]
    for r in payload["results"]:
        assert r["jobs"] == 150
        assert r["jobs_started"] <= r["jobs"]
        assert 0 <= r["gpu_allocation_pct"] <= r["gpu_held_pct"] + 1e-9 <= 100
    # kube-default holds a whole GPU for every fractional request; gpusched holds what it is
    # asked, and never leaves a gang partly placed.
    assert fgd["partially_placed_gangs_max"] == 0
    assert kube["gpu_held_pct"] > kube["gpu_allocation_pct"]
    assert fgd["gpu_held_pct"] == pytest.approx(fgd["gpu_allocation_pct"])


def test_simulate_prints_a_side_by_side_table() -> None:
    result = gpusched("simulate", "--jobs", "100")
    assert result.returncode == 0, result.stderr
    assert "kube-default" in result.stdout
    assert "gpusched" in result.stdout
    assert "GPU allocation" in result.stdout
    assert "gpusched vs kube-default" in result.stdout


def test_generated_workload_round_trips_through_the_file_format(tmp_path: Path) -> None:
    out, config = tmp_path / "w.yaml", tmp_path / "teams.yaml"
    gen = gpusched(
        "workload", "generate", "--jobs", "120", "--seed", "3", "-o", str(out),
        "--config-out", str(config),
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    from_file = gpusched(
        "simulate", "--workload", str(out), "--config", str(config), "--policy", "gpusched",
        "--json",
    )  # fmt: skip
    built_in = gpusched(
        "simulate", "--jobs", "120", "--seed", "3", "--policy", "gpusched", "--json"
    )  # fmt: skip
    assert from_file.returncode == 0, from_file.stderr
    a = json.loads(from_file.stdout)["results"][0]
    b = json.loads(built_in.stdout)["results"][0]
    for key in ("jobs_started", "gpu_allocation_pct", "avg_wait_s", "avg_jct_s", "preemptions"):
        assert a[key] == pytest.approx(b[key], abs=1e-3), key


def test_workload_file_naming_classes_needs_its_config(tmp_path: Path) -> None:
    out = tmp_path / "w.yaml"
    assert gpusched("workload", "generate", "--jobs", "20", "-o", str(out)).returncode == 0
    result = gpusched("simulate", "--workload", str(out), "--policy", "gpusched")
    assert result.returncode == 2
    assert "unknown priority class" in result.stderr
    assert "--config" in result.stderr


TWO_H100_NODES = (
    "nodes:\n"
    "  - {name: a, cpu: 64, memory: 512Gi, gpus: 8, gpu_model: H100}\n"
    "  - {name: b, cpu: 64, memory: 512Gi, gpus: 8, gpu_model: H100}\n"
)


#: `small` (team-a, 4 GPUs, the default 1 h estimate) runs when `big` (2 x 8 GPUs) arrives.
SMALL_THEN_BIG = (
    "jobs:\n"
    "  - {name: small, submit: 0, duration: 3600, cpu: 4, memory: 32Gi, gpus: 4,"
    " queue: team-a}\n"
    "  - {name: big, submit: 10, duration: 600, replicas: 2, cpu: 4, memory: 32Gi, gpus: 8,"
    " queue: team-b, runtime_estimate: 600}\n"
)
#: team-b owns all 16 GPUs; team-a only borrows.
TEAM_B_OWNS_16 = "queues:\n  - {name: team-a}\n  - {name: team-b, guaranteed: {gpu: 16}}\n"


def explain_inputs(tmp_path: Path, *, workload: str, config: str) -> list[str]:
    """Write two 8-GPU nodes, ``workload`` and the scheduling ``config``; return the flags."""
    args: list[str] = []
    for flag, name, text in (
        ("--cluster", "c.yaml", TWO_H100_NODES),
        ("--workload", "w.yaml", workload),
        ("--config", "q.yaml", config),
    ):
        (tmp_path / name).write_text(text)
        args += [flag, str(tmp_path / name)]
    return args


def explained(job: str, args: list[str]) -> str:
    """``gpusched explain job``'s output (exit 0), its whitespace runs made single spaces."""
    result = gpusched("explain", job, *args)
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split())


def test_explain_a_pending_job_gives_needs_nodes_quota_and_start(tmp_path: Path) -> None:
    # Two 8-GPU nodes; `big` (2 x 8 GPUs, team-b guaranteed 16) arrives while `small` (team-a,
    # borrowing) holds 4 GPUs of one node.
    args = explain_inputs(tmp_path, workload=SMALL_THEN_BIG, config=TEAM_B_OWNS_16)
    text = explained("big", args)
    assert "big is pending at t=10 s" in text
    assert "gang: 2 of 2 pod(s) must start together" in text
    assert "2 pod(s) of 4 CPU, 32.0 GiB memory, 8 x whole GPU" in text
    assert "the gang: 1 of 2 pod(s) could be placed together now" in text
    assert "GPUs: needs 8 with 1000/1000 free, has 4 of 8" in text
    assert "queue 'team-b': uses 0 GPUs, guaranteed 16" in text
    assert "the job needs 16 GPUs: 0 beyond its guarantee" in text
    assert "quota admits the job" in text
    # small's run-time estimate is the 1 h default: it ends at 3600, when big can start (it
    # is too young to be reclaimed: 10 s < the 300 s minimum run time).
    assert "reservation: t=3,600 s on a, b" in text
    assert (
        "its start is set by the running job(s) on those nodes ending then or later: small "
        "(queue 'team-a', 4 GPUs; here on a): started t=0 s, expected to end t=3,600 s (the "
        "default run time: 60.0 min)"
    ) in text
    assert "estimated start: t=3,600 s" in text
    running = gpusched("explain", "small", *args)
    assert "small is running since t=0 s" in running.stdout
    missing = gpusched("explain", "nope", *args)
    assert missing.returncode == 2
    assert "job 'nope' is not in the workload" in missing.stderr


def test_explain_says_what_sets_a_reservations_start(tmp_path: Path) -> None:
    # `small` declared 10 min and has run 1,060 s: expected to run as long again (to 2,120 s).
    # Neither queue's guarantee lets `big` reclaim it. `poke` only makes a cycle at 1,000 s.
    overrun = explain_inputs(
        tmp_path,
        workload=(
            "jobs:\n"
            "  - {name: small, submit: 0, duration: 3600, cpu: 4, memory: 32Gi, gpus: 4,"
            " queue: team-a, runtime_estimate: 600}\n"
            "  - {name: big, submit: 10, duration: 600, replicas: 2, cpu: 4, memory: 32Gi, gpus: 8,"
            " queue: team-b, runtime_estimate: 600}\n"
            "  - {name: poke, submit: 1000, duration: 60, cpu: 1, memory: 1Gi, gpus: 0,"
            " queue: team-a}\n"
        ),
        config=(
            "queues:\n  - {name: team-a, guaranteed: {gpu: 8}}\n"
            "  - {name: team-b, guaranteed: {gpu: 8}}\n"
        ),
    )
    text = explained("big", ["--at", "1100", *overrun])
    assert "big is pending at t=1,060 s" in text
    assert "reservation: t=2,120 s on a, b" in text
    assert (
        "small (queue 'team-a', 4 GPUs; here on a): started t=0 s, expected to end t=2,120 s "
        "(past its declared run time: 10.0 min, so as long again as it has run)"
    ) in text
    # Two gangs reserve both nodes: the second is laid out after the first one's estimate.
    (tmp_path / "two").mkdir()
    queued = explain_inputs(
        tmp_path / "two",
        workload=SMALL_THEN_BIG
        + "  - {name: big2, submit: 20, duration: 600, replicas: 2, cpu: 4, memory: 32Gi,"
        " gpus: 8, queue: team-b, runtime_estimate: 900}\n",
        config=TEAM_B_OWNS_16,
    )
    second = explained("big2", ["--at", "30", *queued])
    assert "reservation: t=4,200 s on a, b" in second
    assert (
        "laid out after the reservation(s) ahead of it on the same nodes: big (2 of the "
        "nodes): from t=3,600 s, expected to run 10.0 min, to t=4,200 s"
    ) in second
    assert "its start is set by" not in second  # `small` ends before 4,200 s
    # With one reservation (and no aging), `big2` is told who holds it.
    easy = explained("big2", ["--at", "30", "--policy", "gpusched-easy", *queued])
    assert "no reservation: the profile's one reservation is held by big, ahead of it in" in easy
    assert "queue order estimated start: t=4,200 s" in easy


def test_explain_shows_the_quota_hold_of_a_job_waiting_to_borrow(tmp_path: Path) -> None:
    # team-b (guaranteed 8) uses 6 of 16 GPUs; `big` (team-a, guaranteed 8) needs 12: 4 beyond
    # its guarantee, and only team-b's idle 2 may be borrowed. It holds the pool until b-short
    # (4 GPUs, expected to end at t=2000) is done.
    args = explain_inputs(
        tmp_path,
        workload=(
            "jobs:\n"
            "  - {name: b-short, submit: 0, duration: 2000, runtime_estimate: 2000, cpu: 4,"
            " memory: 32Gi, gpus: 4, queue: team-b}\n"
            "  - {name: b-long, submit: 0, duration: 5000, runtime_estimate: 5000, cpu: 4,"
            " memory: 32Gi, gpus: 2, queue: team-b}\n"
            "  - {name: big, submit: 10, duration: 600, replicas: 3, cpu: 4, memory: 32Gi, gpus: 4,"
            " queue: team-a, runtime_estimate: 600}\n"
        ),
        config=(
            "queues:\n  - {name: team-a, guaranteed: {gpu: 8}}\n"
            "  - {name: team-b, guaranteed: {gpu: 8}}\n"
        ),
    )
    text = explained("big", args)
    assert "the job needs 4 GPUs beyond it and only 2 can be borrowed now" in text
    assert "quota hold: it needs 2 more borrowable GPUs, expected by t=2,000 s" in text
    # The hold's holder reserves its nodes too, from the hold's end.
    assert "reservation: t=2,000 s on a, b" in text
    assert "estimated start: t=2,000 s" in text


def test_explain_says_when_aging_and_the_limit_guard_apply(tmp_path: Path) -> None:
    # team-a may hold 8 GPUs. `early` (2 GPUs) runs from t=0; `big` (8 GPUs, t=10) breaks the
    # limit; `late` (4 GPUs, t=20) fits under it and starts. With aging and the limit guard at
    # 500 s, `big` goes first from t=510 and may then evict `late` (started after it was
    # queued) but not `early`, which alone keeps it over the limit. `other` (team-b, t=700)
    # makes events after t=510.
    args = explain_inputs(
        tmp_path,
        workload=(
            "jobs:\n"
            "  - {name: early, submit: 0, duration: 9000, cpu: 4, memory: 32Gi, gpus: 2,"
            " queue: team-a}\n"
            "  - {name: big, submit: 10, duration: 600, cpu: 4, memory: 32Gi, gpus: 8,"
            " queue: team-a}\n"
            "  - {name: late, submit: 20, duration: 9000, cpu: 4, memory: 32Gi, gpus: 4,"
            " queue: team-a}\n"
            "  - {name: other, submit: 700, duration: 60, cpu: 4, memory: 32Gi, gpus: 1,"
            " queue: team-b}\n"
        ),
        config="queues:\n  - {name: team-a, limit: {gpu: 8}}\n  - {name: team-b}\n",
    )
    shown = gpusched("profile", "show", "gpusched")
    assert shown.returncode == 0, shown.stderr
    profile = tmp_path / "p.yaml"
    profile.write_text(
        shown.stdout.replace("starve_after_s: 86400.0", "starve_after_s: 500.0").replace(
            "limit_guard_after_s: 86400.0", "limit_guard_after_s: 500.0"
        )
    )
    young = explained("big", ["--at", "30", "--profile", str(profile), *args])
    assert "big is pending at t=20 s" in young
    assert "aging: from t=510 s (in 8.2 min) it goes before younger jobs" in young
    assert (
        "limit guard: from t=510 s (in 8.2 min) it may evict work of queue 'team-a' started "
        "after t=10 s 1 job(s), 4 GPUs now; with all gone the queues would not admit it and "
        "the nodes would fit it"
    ) in young
    old = explained("big", ["--at", "800", "--profile", str(profile), *args])
    assert "big is pending at t=760 s" in old  # other ends at 760
    assert "aged since t=510 s: it goes before younger jobs for a reservation" in old
    assert "limit guard: since t=510 s it may evict work of queue 'team-a'" in old
    plain = explained("big", ["--at", "30", "--policy", "gpusched-easy", *args])
    assert "aging" not in plain
    assert "limit guard" not in plain


def test_report_is_a_self_contained_html_page_with_charts(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    result = gpusched("simulate", "--jobs", "80", "--report", str(report))
    assert result.returncode == 0, result.stderr
    page = report.read_text()
    assert page.startswith("<!doctype html>")
    assert page.count("<svg") >= 3
    assert "kube-default" in page


def test_profile_show_output_is_a_usable_profile(tmp_path: Path) -> None:
    shown = gpusched("profile", "show", "bestfit")
    assert shown.returncode == 0, shown.stderr
    path = tmp_path / "p.yaml"
    path.write_text(shown.stdout.replace("name: bestfit", "name: my-bestfit"))
    result = gpusched("simulate", "--jobs", "60", "--profile", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["results"][0]["policy"] == "my-bestfit"


BAD_POD_LISTS = [
    pytest.param(
        "name,cpu_milli,memory_mib,num_gpu\np1,1,1,1\n",
        ":1: field 'gpu_milli': missing column",
        id="missing-column",
    ),
    pytest.param(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1,1,1,500\np2,x,1,1,500\n",
        ":3: field 'cpu_milli': got 'x'; expected an integer",
        id="non-numeric",
    ),
    pytest.param(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1,-4,1,500\n",
        ":2: field 'memory_mib': got -4; expected a value >= 0",
        id="negative-request",
    ),
    pytest.param(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1,1,1,1001\n",
        ":2: field 'gpu_milli': got 1001; expected a value <= 1000",
        id="share-above-1000",
    ),
    pytest.param(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1,1,1,500,B200\n",
        ":2: field 'gpu_spec': unknown GPU model 'B200'",
        id="unknown-gpu-model",
    ),
]


@pytest.mark.parametrize(("content", "expected"), BAD_POD_LISTS)
def test_bad_trace_exits_2_naming_file_line_and_field(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(content)
    result = gpusched("simulate", "--workload", str(path))
    assert result.returncode == 2
    assert f"{path}{expected}" in result.stderr
    assert "Traceback" not in result.stderr


BAD_FLAGS = [
    pytest.param(["simulate", "--policy", "fgdd"], "unknown policy 'fgdd'", id="unknown-policy"),
    pytest.param(
        ["simulate", "--policy", "fgd", "--profile", "x.yaml"],
        "either --policy or --profile",
        id="policy-and-profile",
    ),
    pytest.param(
        ["simulate", "--cluster", "/nonexistent/c.yaml"], "file not found", id="missing-file"
    ),
]


@pytest.mark.parametrize(("args", "expected"), BAD_FLAGS)
def test_bad_flags_exit_2_with_the_fix(args: list[str], expected: str) -> None:
    result = gpusched(*args)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flag", "name", "content", "expected"),
    [
        pytest.param(
            "--profile",
            "p.yaml",
            "name: x\nscores:\n  - name: fgd\n    weight: -1\n",
            ":4: field 'scores[0].weight'",
            id="profile",
        ),
        pytest.param(
            "--workload",
            "w.yaml",
            "jobs:\n  - name: a\n    cpu: 4\n    memory: 8Zi\n",
            ":4: field 'jobs[0].memory'",
            id="workload",
        ),
    ],
)
def test_bad_yaml_field_names_file_line_and_key(
    tmp_path: Path, flag: str, name: str, content: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = gpusched("simulate", flag, str(path))
    assert result.returncode == 2
    assert f"{path}{expected}" in result.stderr


def test_unknown_plugin_in_profile_lists_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\nscores:\n  - name: fancy\n")
    result = gpusched("simulate", "--profile", str(path))
    assert result.returncode == 2
    assert "unknown plugin 'fancy'" in result.stderr
    assert "best-fit" in result.stderr


def test_bench_gangs_runs_every_policy_and_gang_policies_never_leave_gangs_partial() -> None:
    result = gpusched("bench", "gangs", "--jobs", "80", "--workers", "1", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["requeue_at_eviction"] is True  # the default; the runs: test_sim_engine.py
    rows = {r["policy"]: r for r in out["results"]}
    assert list(rows) == ["kube-default", "fifo-gang", "gpusched", "gpusched-no-reservation"]
    for name in ("fifo-gang", "gpusched", "gpusched-no-reservation"):
        assert rows[name]["partially_placed_gangs_max"] == 0, name
        assert rows[name]["idle_gpu_hours_held_by_partial_gangs"] == 0, name
    for row in rows.values():
        assert row["jobs"] == 80
        assert row["preemption_loops"] == 0


def test_bench_gangs_load_spreads_the_same_jobs_over_a_longer_window() -> None:
    from gpusched.cli.inputs import load_inputs

    dense = load_inputs(None, None, None, 3, 200)
    sparse = load_inputs(None, None, None, 3, 200, load=0.45)
    assert [j.id for j in sparse.jobs] == [j.id for j in dense.jobs]
    last = max(j.submit_time for j in dense.jobs)
    assert max(j.submit_time for j in sparse.jobs) == pytest.approx(2 * last)
    assert "offered load 0.45" in sparse.title
    assert "offered load" not in dense.title
    result = gpusched("bench", "gangs", "--jobs", "40", "--load", "0", "--json")
    assert result.returncode == 2
    assert "--load" in result.stderr


def test_bench_cycle_reports_one_timed_cycle_per_policy_and_phase() -> None:
    result = gpusched(
        "bench", "cycle", "--nodes", "40", "--pending", "60", "--repeat", "1",
        "--policies", "gpusched,kube-default", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["gpus"] == 320
    assert payload["pending"] == 60
    assert 80 <= payload["running_gpu_pct"] <= 100
    assert [(r["policy"], r["phase"]) for r in payload["results"]] == [
        ("gpusched", "cold"),
        ("gpusched", "steady"),
        ("kube-default", "cold"),
        ("kube-default", "steady"),
    ]
    for r in payload["results"]:
        assert r["median_s"] > 0
        # The steady cycle's queue is topped back up to the same size.
        assert r["pending"] == 60
        assert 0 <= r["jobs_left_pending"] <= 60
    cold = payload["results"][0]
    assert cold["binds"] > 0  # a tenth of the GPUs are free: the cold cycle places work
    # Timings are only comparable on the same processor: the run says which one it was.
    machine = payload["machine"]
    assert machine["cores"] >= 1
    assert machine["cpu"]
    assert machine["python"].count(".") == 2
    assert machine["numpy"]


def test_bench_cycle_topology_times_gpusched_topo_and_gpusched_on_hgx_nodes() -> None:
    result = gpusched(
        "bench", "cycle", "--topology", "--nodes", "12", "--pending", "10", "--repeat", "1",
        "--phases", "steady", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["topology"] is True
    assert payload["gpus"] == 96
    assert [(r["policy"], r["phase"]) for r in payload["results"]] == [
        ("gpusched-topo", "steady"),
        ("gpusched", "steady"),
    ]
    assert all(r["cpu_median_s"] >= 0 for r in payload["results"])


def test_bench_cycle_rejects_an_unknown_phase() -> None:
    result = gpusched("bench", "cycle", "--nodes", "4", "--phases", "warm")
    assert result.returncode != 0
    assert "unknown phase(s) warm" in result.stderr
    assert "cold, steady" in result.stderr


def _requeue_inputs(tmp_path: Path) -> list[str]:
    """long runs from 0; waiter arrives at 100; urgent (priority 10) preempts long at 1000 and
    ends at 1500. Without reservations the queue order then decides who gets the node."""
    cluster, workload, profile = (tmp_path / n for n in ("c.yaml", "w.yaml", "p.yaml"))
    cluster.write_text("nodes:\n  - {name: n, cpu: 64, memory: 256Gi, gpus: 8, gpu_model: A100}\n")
    workload.write_text(
        "jobs:\n"
        "  - {name: long, submit: 0, duration: 10000, cpu: 1, memory: 1Gi, gpus: 8}\n"
        "  - {name: waiter, submit: 100, duration: 100, cpu: 1, memory: 1Gi, gpus: 8}\n"
        "  - {name: urgent, priority: 10, submit: 1000, duration: 500, cpu: 1, memory: 1Gi,"
        " gpus: 8}\n"
    )
    shown = gpusched("profile", "show", "gpusched")
    assert shown.returncode == 0, shown.stderr
    profile.write_text(shown.stdout.replace("reservations: 4", "reservations: 0"))
    return ["--cluster", str(cluster), "--workload", str(workload), "--profile", str(profile)]


def test_where_an_evicted_job_rejoins_the_queue_reaches_the_simulator(tmp_path: Path) -> None:
    args = ["simulate", *_requeue_inputs(tmp_path), "--json"]
    kept, requeued = gpusched(*args, "--keep-place-at-eviction"), gpusched(*args)
    assert kept.returncode == 0, kept.stderr
    assert requeued.returncode == 0, requeued.stderr
    a, b = json.loads(kept.stdout), json.loads(requeued.stdout)
    assert (a["requeue_at_eviction"], b["requeue_at_eviction"]) == (False, True)
    assert a["results"][0]["preemptions"] == b["results"][0]["preemptions"] == 1
    # Only waiter waits: 11,400 s when long keeps its place, 1,400 s when long rejoins behind it.
    assert 3 * a["results"][0]["avg_wait_s"] == pytest.approx(11_400)
    assert 3 * b["results"][0]["avg_wait_s"] == pytest.approx(1_400)
    explicit = gpusched(*args, "--requeue-at-eviction")
    assert explicit.returncode == 0, explicit.stderr
    assert 3 * json.loads(explicit.stdout)["results"][0]["avg_wait_s"] == pytest.approx(1_400)


def test_explain_replays_with_the_same_choice(tmp_path: Path) -> None:
    inputs = _requeue_inputs(tmp_path)
    # long, evicted at 1000, says where it waits in the queue (not when it keeps its place).
    evicted = explained("long", ["--at", "1200", *inputs])
    assert "long is pending at t=1,000 s" in evicted  # the last event before 1200
    assert "back in the queue since t=1,000 s (submitted at t=0 s)" in evicted
    kept_place = explained("long", ["--at", "1200", *inputs, "--keep-place-at-eviction"])
    assert "long is pending at t=1,000 s" in kept_place
    assert "back in the queue" not in kept_place
    args = ["explain", "waiter", "--at", "1550", *inputs]
    kept, requeued = gpusched(*args, "--keep-place-at-eviction"), gpusched(*args)
    assert kept.returncode == 0, kept.stderr
    assert requeued.returncode == 0, requeued.stderr
    assert "waiter is pending" in kept.stdout
    assert "waiter is running since" in requeued.stdout
