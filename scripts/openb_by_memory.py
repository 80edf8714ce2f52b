"""The openb experiment with sharing pods asking by GPU memory (docs/benchmarks.md §1, §2).

Runs the FGD paper's protocol (:mod:`gpusched.sim.openb`) on the trace converted by
:func:`~gpusched.sim.openb.as_memory_requests`: every sharing pod goes through the
sharing-by-memory path (:mod:`gpusched.framework.sharing`). Prints one JSON line per policy
and workload, with the authors' mean where they published one::

    .venv/bin/python scripts/openb_by_memory.py --workloads gpushare40,gpushare80 \\
        --policies fgd,bestfit --seeds 42-51
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

from gpusched.io.openb import read_openb_nodes, read_openb_pods
from gpusched.scheduler import policy_spec
from gpusched.sim.bench import run_bench
from gpusched.sim.openb import as_memory_requests

_AUTHORS = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


def _expected(trace_dir: Path, workload: str, policy: str) -> float | None:
    path = trace_dir / "fgd-expected-results" / "summary_by_workload_policy.csv"
    if not path.exists():
        return None
    with path.open() as fh:
        for row in csv.DictReader(fh):
            if row["workload"] == f"openb_pod_list_{workload}" and row["sc_policy"] == (
                _AUTHORS.get(policy)
            ):
                return float(row["alloc_pct_at_arrive100_mean"])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", type=Path, default=Path("../shared/traces/openb"))
    parser.add_argument("--workloads", default="gpushare40,gpushare80")
    parser.add_argument("--policies", default="fgd,bestfit")
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    nodes = read_openb_nodes(args.trace_dir / "openb_node_list_gpu_node.csv")
    specs = [policy_spec(p) for p in args.policies.split(",")]
    for workload in args.workloads.split(","):
        pods = read_openb_pods(args.trace_dir / f"openb_pod_list_{workload}.csv")
        mem_nodes, mem_jobs = as_memory_requests(nodes, [p.to_job() for p in pods])
        started = time.perf_counter()
        for summary in run_bench(mem_nodes, mem_jobs, specs, seeds, workers=args.workers):
            out = {"workload": workload, "path": "by-memory", **summary.as_json()}
            out["authors_mean"] = _expected(args.trace_dir, workload, summary.policy)
            print(json.dumps(out), flush=True)
        print(json.dumps({"workload": workload, "wall_s": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
