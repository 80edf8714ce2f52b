"""End-to-end checks on the real Alibaba openb trace (needs ../shared/traces)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusched.io.openb import read_openb_nodes, read_openb_pods, read_paper_results
from integration.test_cli import gpusched

pytestmark = pytest.mark.traces


def test_every_openb_file_loads(traces_dir: Path) -> None:
    openb = traces_dir / "openb"
    nodes = read_openb_nodes(openb / "openb_node_list_gpu_node.csv")
    assert len(nodes) == 1213
    assert sum(n.gpu_count for n in nodes) == 6212
    models = {n.gpu_model for n in nodes if n.gpu_model}
    files = sorted(openb.glob("openb_pod_list_*.csv"))
    assert len(files) >= 9
    for f in files:
        pods = read_openb_pods(f, known_models=models)
        assert len(pods) > 7000, f
        assert all(0 <= p.shape.gpu_milli <= 1000 for p in pods)


def test_default_trace_statistics_match_its_readme(traces_dir: Path) -> None:
    pods = read_openb_pods(traces_dir / "openb" / "openb_pod_list_default.csv")
    shapes = [p.shape for p in pods]
    assert len(pods) == 8152
    assert sum(1 for s in shapes if s.num_gpu == 0) == 1088
    assert sum(1 for s in shapes if s.is_sharing) == 3078
    assert sum(1 for s in shapes if s.num_gpu == 8) == 44


def test_bench_one_seed_orders_fgd_above_bestfit(traces_dir: Path) -> None:
    result = gpusched(
        "bench",
        "openb",
        "--trace-dir",
        str(traces_dir / "openb"),
        "--workload",
        "default",
        "--policies",
        "bestfit,fgd",
        "--seeds",
        "42",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["workload"] == "default"
    rows = {r["policy"]: r for r in payload["results"]}
    assert set(rows) == {"bestfit", "fgd"}
    for row in rows.values():
        assert set(row) >= {
            "alloc_pct_at_100_mean",
            "alloc_pct_at_100_std",
            "frag_pct_at_100_mean",
            "seconds_per_run",
        }
    # The paper's central claim: FGD allocates more and fragments less than BestFit.
    assert rows["fgd"]["alloc_pct_at_100_mean"] > rows["bestfit"]["alloc_pct_at_100_mean"]
    assert rows["fgd"]["frag_pct_at_100_mean"] < rows["bestfit"]["frag_pct_at_100_mean"]


def test_paper_results_are_read_for_every_policy(traces_dir: Path) -> None:
    paper = read_paper_results(traces_dir / "openb", "default")
    assert set(paper) == {"random", "dotprod", "clustering", "packing", "bestfit", "fgd"}
    assert paper["fgd"].alloc_mean == pytest.approx(95.23)
