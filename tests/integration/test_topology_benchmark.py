"""The topology benchmark's claims (docs/topology.md, issue 4) hold on one of its seeds.

A change to expected ends once made preferred gangs stop waiting for a rack, and the
benchmark's rack figure fell from 95.7% to 73.4% with nothing failing; this runs the
benchmark's workload (seed 23, its shortest run) through ``gpusched-topo`` and checks the
three placement targets: gangs that fit one rack placed in one rack (>= 90%), multi-GPU tasks
on their best-connected set (>= 95%), no GPU memory overcommitted.
"""

from __future__ import annotations

from gpusched.scheduler import policy_spec
from gpusched.sim.runs import simulate
from gpusched.workloads.topology_cluster import topology_cluster, topology_workload


def test_gpusched_topo_meets_the_placement_targets_on_seed_23() -> None:
    nodes = topology_cluster()
    jobs = topology_workload(nodes, 1000, 23, 0.85)
    summary = simulate(nodes, jobs, policy_spec("gpusched-topo"), 23).summary
    assert summary["jobs_started"] == 1000
    assert summary["gangs_fitting_one_domain"]["rack"] > 50  # the check has gangs to count
    assert summary["gangs_within_one_domain_pct"]["rack"] >= 90.0
    assert summary["multi_gpu_tasks_on_best_connected_set_pct"] >= 95.0
    assert summary["gpu_memory_overcommit_events"] == 0
