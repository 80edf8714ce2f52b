"""Rerun the comparison of docs/research/beyond-fgd.md: FGD against ``fgd-ss`` on openb.

For every workload with published FGD results and every seed (42..51 by default), run the openb
protocol (:func:`gpusched.sim.openb.run_openb`) with each policy and print, per workload, the
mean and population standard deviation over seeds of the GPU allocation rate at 100% arrived,
the mean per-seed difference to the first policy and the mean seconds per run.

    python scripts/research_beyond_fgd.py                       # full table, one process
    python scripts/research_beyond_fgd.py --seeds 42,43,44 --workloads default
    python scripts/research_beyond_fgd.py --runs runs.jsonl     # keep (and reuse) each run
    python scripts/research_beyond_fgd.py --variant 'cap-off={"cpu_share_cap": false}'

A full run is 2 policies x 9 workloads x 10 seeds = 180 runs, about 15-20 minutes on one core.
``--variant LABEL=JSON`` adds ``fgd-ss`` with those plugin arguments as a further column.
``--runs`` appends one JSON line per run and skips runs already in the file, so an interrupted
sweep can be resumed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from gpusched.framework import PluginSpec, ProfileSpec
from gpusched.io.openb import read_openb_nodes, read_openb_pods
from gpusched.scheduler import policy_spec
from gpusched.sim.openb import run_openb

WORKLOADS = (
    "default",
    "cpu050",
    "cpu100",
    "gpushare40",
    "gpushare80",
    "gpuspec10",
    "gpuspec20",
    "multigpu20",
    "multigpu30",
)
ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces" / "openb"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-dir", type=Path, default=TRACES)
    ap.add_argument("--policies", default="fgd,fgd-ss", help="comma-separated; first = baseline")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--seeds", default=",".join(str(s) for s in range(42, 52)))
    ap.add_argument("--runs", type=Path, help="JSON-lines file of runs to append to and reuse")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=JSON",
        help="fgd-ss with these plugin args, reported as LABEL (repeatable)",
    )
    args = ap.parse_args(argv)
    specs = {name: policy_spec(name) for name in args.policies.split(",")}
    for item in args.variant:
        label, _, raw = item.partition("=")
        plugin = PluginSpec(name="fgd-ss", args=json.loads(raw))
        specs[label] = ProfileSpec(name=label, scores=[plugin], gpu_picker=plugin)
    policies = list(specs)
    workloads = args.workloads.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]

    done: dict[tuple[str, str, int], dict[str, float]] = {}
    if args.runs and args.runs.is_file():
        for line in args.runs.read_text().splitlines():
            rec = json.loads(line)
            done[(rec["policy"], rec["workload"], rec["seed"])] = rec
    nodes = read_openb_nodes(args.trace_dir / "openb_node_list_gpu_node.csv")
    for wl in workloads:
        pods = read_openb_pods(args.trace_dir / f"openb_pod_list_{wl}.csv")
        jobs = [p.to_job() for p in pods]
        for name, spec in specs.items():
            for seed in seeds:
                if (name, wl, seed) in done:
                    continue
                run = run_openb(nodes, jobs, spec, seed)
                rec = {
                    "policy": name,
                    "workload": wl,
                    "seed": seed,
                    "alloc100": run.alloc_at(100),
                    "seconds": run.seconds,
                }
                done[(name, wl, seed)] = rec
                if args.runs:
                    with args.runs.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                print(f"{wl:11s} {name:8s} seed {seed}: {rec['alloc100']:.2f}", file=sys.stderr)

    base = policies[0]
    head = " | ".join(f"{p} (mean ± std)" for p in policies)
    diffs = " | ".join(f"{p} − {base}" for p in policies[1:])
    print(f"| workload | {head} | {diffs} |")
    print("|---" * (1 + 2 * len(policies) - 1) + "|")
    seconds: dict[str, list[float]] = {p: [] for p in policies}
    for wl in workloads:
        cells, deltas = [], []
        for p in policies:
            vals = [done[(p, wl, s)]["alloc100"] for s in seeds]
            seconds[p] += [done[(p, wl, s)]["seconds"] for s in seeds]
            cells.append(f"{statistics.mean(vals):.2f} ± {statistics.pstdev(vals):.2f}")
            if p != base:
                d = [done[(p, wl, s)]["alloc100"] - done[(base, wl, s)]["alloc100"] for s in seeds]
                deltas.append(f"{statistics.mean(d):+.2f}")
        print(f"| {wl} | {' | '.join(cells)} | {' | '.join(deltas)} |")
    print()
    for p in policies:
        print(f"{p}: {statistics.mean(seconds[p]):.2f} s per run (mean over {len(seconds[p])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
