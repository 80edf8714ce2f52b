"""Write the topology benchmark's cluster and workload as native files (docs/topology.md).

    .venv/bin/python scripts/topology_evidence.py --jobs 1000 --seed 7 --out /tmp/topo
    .venv/bin/gpusched simulate --cluster /tmp/topo/cluster.yaml \\
        --workload /tmp/topo/jobs.yaml --policy kube-default,gpusched,gpusched-topo --json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpusched.io.native_dump import dump_cluster, dump_workload
from gpusched.workloads.topology_cluster import topology_cluster, topology_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=0.85)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    nodes = topology_cluster()
    jobs = topology_workload(nodes, args.jobs, args.seed, args.load)
    dump_cluster(nodes, args.out / "cluster.yaml")
    dump_workload(jobs, args.out / "jobs.yaml")
    print(f"{len(nodes)} nodes, {len(jobs)} jobs -> {args.out}")


if __name__ == "__main__":
    main()
