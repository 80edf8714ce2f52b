"""The cycle benchmark's setups (``gpusched bench cycle``, ``--topology``), at a tiny size.

What is checked is what the benchmark builds and that it runs; no timing is asserted.
"""

from __future__ import annotations

from collections import Counter

from gpusched.framework import PluginContext
from gpusched.scheduler import build_profile, policy_spec
from gpusched.sim.cycle_bench import (
    build_cycle_setup,
    cycle_nodes,
    steady_snapshot,
    time_cycle,
    topology_cycle_nodes,
)
from gpusched.workloads.topology_cluster import BLOCK_LABEL, RACK_LABEL


def test_topology_nodes_are_hgx_boards_four_per_rack_and_128_per_block() -> None:
    nodes = topology_cycle_nodes(260)
    assert [n.topology is not None for n in nodes] == [True] * 260
    # H100 and A100 boards alternate, each with its template's topology.
    assert {n.gpus[0].model for n in nodes[0::2]} == {"H100"}
    assert {n.gpus[0].model for n in nodes[1::2]} == {"A100"}
    assert {n.topology.name for n in nodes if n.topology} == {"hgx-h100-8", "hgx-a100-80gb-8"}
    assert all(n.gpu_count == 8 for n in nodes)
    racks = Counter(n.labels[RACK_LABEL] for n in nodes)
    blocks = Counter(n.labels[BLOCK_LABEL] for n in nodes)
    assert len(racks) == 65
    assert set(racks.values()) == {4}
    assert blocks == {"b000": 128, "b001": 128, "b002": 4}
    # A rack never straddles two blocks.
    rack_blocks = {(n.labels[RACK_LABEL], n.labels[BLOCK_LABEL]) for n in nodes}
    assert len(rack_blocks) == len(racks)


def test_plain_nodes_have_no_topology_and_no_network_level() -> None:
    setup = build_cycle_setup(8, 6)
    assert all(n.topology is None for n in cycle_nodes(8))
    assert setup.snapshot.state.network.levels == ()


def test_topology_setup_has_block_and_rack_levels_and_is_filled() -> None:
    setup = build_cycle_setup(12, 10, topology=True)
    state = setup.snapshot.state
    assert state.network.names == ("block", "rack")
    assert state.domain_names(1) == ("r0000", "r0001", "r0002")
    assert state.domain_names(0) == ("b000",)
    assert all(n.topology is not None for n in state.nodes)
    assert 80 <= setup.running_gpu_pct <= 100
    assert len(setup.snapshot.pending) == 10


def test_topology_setup_runs_gpusched_topo_cold_and_steady() -> None:
    setup = build_cycle_setup(12, 10, topology=True)
    spec = policy_spec("gpusched-topo")
    results = time_cycle(setup, [spec], repeat=2, phases=("cold", "steady"))
    assert [(r.policy, r.phase) for r in results] == [
        ("gpusched-topo", "cold"),
        ("gpusched-topo", "steady"),
    ]
    for r in results:
        assert len(r.seconds) == len(r.cpu_seconds) == 2
        assert r.pending == 10
        assert 0 <= r.pending_after <= 10
    # The steady snapshot keeps the topology nodes and the network levels.
    profile = build_profile(spec, PluginContext(seed=1))
    steady = steady_snapshot(setup, profile)
    assert steady.state.network.names == ("block", "rack")
    assert all(n.topology is not None for n in steady.state.nodes)
