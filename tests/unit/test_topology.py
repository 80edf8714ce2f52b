"""Node GPU topology: validation, templates, set keys and the topology-aware GPU picker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path

import pytest

from builders import cycle_context, make_node, make_state, make_task, occupy
from gpusched.errors import ConfigError, TraceError
from gpusched.framework import ClusterState, GpuPicker, PluginContext
from gpusched.io.native_workload import load_workload
from gpusched.model import GpuModel, Node
from gpusched.model.topology import GpuDevice, LinkClass, NodeTopology
from gpusched.plugins import create_plugin
from gpusched.plugins.pickers import BestFitGpu
from gpusched.plugins.topology_aware import (
    ConnectivityTables,
    TopologyAwareGpu,
    best_connected_key,
    is_best_connected_set,
)
from gpusched.workloads.templates import (
    TEMPLATES,
    hgx_a100_node,
    hgx_h100_node,
    l4_node,
    pcie_pairs_node,
    t4_node,
)

SYS, NODE, PCIE, NV, X = (int(c) for c in LinkClass)


def devices(numa: Sequence[int], roots: Sequence[str] | None = None) -> list[GpuDevice]:
    """One H100 80 GB per entry of ``numa``; each GPU on its own PCIe root unless told."""
    roots = roots or [f"r{i}" for i in range(len(numa))]
    return [GpuDevice(GpuModel("H100"), 81920, n, r) for n, r in zip(numa, roots, strict=True)]


def topo_node(topo: NodeTopology, name: str = "n1") -> Node:
    return Node.from_topology(name, topo, memory_mib=1 << 20)


def mask(*gpus: int) -> int:
    return sum(1 << g for g in gpus)


# -- validation -------------------------------------------------------------------------------

GOOD = NodeTopology.build(devices([0, 0, 1, 1]), (32_000, 32_000), nvlink_domains=[(0, 1), (2, 3)])


def _with_links(rows: list[list[int]]) -> Node:
    """Node n1 on four GPUs in two NUMA nodes, linked as ``rows`` say."""
    return topo_node(NodeTopology.from_matrix(devices([0, 0, 1, 1]), (32_000, 32_000), rows))


def _good_topology_on_gpus(count: int, model: str) -> Node:
    """Node n1 with ``count`` 80 GB GPUs of ``model`` under GOOD (four H100s)."""
    gpus = make_node("x").gpus(count, model=model, memory_mib=81920).build().gpus
    return Node(make_node("n1").build().name, 64_000, 1024, gpus, topology=GOOD)


BAD_TOPOLOGIES = [
    pytest.param(
        lambda: topo_node(NodeTopology.build(devices([0, 1]), (1000,), nvlink_domains=[(0, 1)])),
        "field 'topology.devices[1].numa_node': got 1; expected 0..0",
        id="numa-index-out-of-range",
    ),
    pytest.param(
        lambda: topo_node(
            NodeTopology.build(
                [GpuDevice(GpuModel("H100"), 0, 0, "r0")], (1000,), nvlink_domains=()
            )
        ),
        "field 'topology.devices[0].memory_mib': got 0; expected > 0",
        id="memory-zero",
    ),
    pytest.param(
        lambda: NodeTopology.build(
            devices([0, 0]), (1000,), nvlink_domains=[range(3)], where="node 'n1'"
        ),
        "node 'n1': field 'nvlink_domains[0]': got 3 NVLink peers; expected at most the node's 2",
        id="more-nvlink-peers-than-gpus",
    ),
    pytest.param(
        lambda: NodeTopology.build(devices([0, 0]), (1000,), nvlink_domains=[(0, 5)]),
        "field 'nvlink_domains[0]': got GPU 5; expected an index in 0..1",
        id="nvlink-peer-out-of-range",
    ),
    pytest.param(
        lambda: _with_links([[X, NV, SYS], [NV, X, SYS], [SYS, SYS, X], [0, 0, 0]]),
        "field 'topology.links': got a 4x3/3/3/3 matrix; expected 4x4",
        id="matrix-not-square",
    ),
    pytest.param(
        lambda: _with_links(
            [[X, NV, SYS, SYS], [NODE, X, SYS, SYS], [SYS, SYS, X, NV], [SYS] * 3 + [X]]
        ),
        "field 'topology.links[0][1]': got NVLINK but links[1][0] is NODE; expected a symmetric",
        id="matrix-not-symmetric",
    ),
    pytest.param(
        lambda: _with_links(
            [[X, NV, PCIE, SYS], [NV, X, SYS, SYS], [PCIE, SYS, X, NV], [SYS] * 3 + [X]]
        ),
        "field 'topology.links[0][2]': got PCIE; expected SYS or NVLINK (GPU 0: NUMA 0",
        id="pcie-class-contradicts-numa",
    ),
    pytest.param(
        lambda: _with_links(
            [[NV, NV, SYS, SYS], [NV, X, SYS, SYS], [SYS, SYS, X, NV], [SYS] * 3 + [X]]
        ),
        "field 'topology.links[0][0]': got NVLINK; expected SELF exactly on the diagonal",
        id="diagonal-not-self",
    ),
    pytest.param(
        lambda: _good_topology_on_gpus(3, "H100"),
        "node 'n1': field 'topology.devices': got 4 GPUs; expected the node's 3",
        id="gpu-count-mismatch",
    ),
    pytest.param(
        lambda: _good_topology_on_gpus(4, "A100"),
        "field 'topology.devices[0].model': got 'H100'; expected 'A100'",
        id="gpu-model-mismatch",
    ),
    pytest.param(
        lambda: Node.from_topology("n1", GOOD, memory_mib=1024, cpu_milli=65_000),
        "node 'n1': field 'cpu_milli': got 65000; expected at most 64000",
        id="more-cpus-than-numa-nodes-have",
    ),
]


@pytest.mark.parametrize(("make", "message"), BAD_TOPOLOGIES)
def test_inconsistent_topology_is_a_config_error_naming_node_and_field(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        make()
    assert message in str(err.value)


def test_a_valid_matrix_equals_the_one_built_from_domains() -> None:
    rows = [[X, NV, SYS, SYS], [NV, X, SYS, SYS], [SYS, SYS, X, NV], [SYS, SYS, NV, X]]
    assert _with_links(rows).topology == NodeTopology.from_matrix(
        GOOD.devices, GOOD.numa_cpu_milli, GOOD.links
    )
    assert GOOD.links == tuple(tuple(r) for r in rows)


def test_nodes_without_topology_still_build() -> None:
    node = make_node("plain").gpus(8).build()
    assert node.topology is None
    assert make_state(node).gpu_free.tolist() == [[1000] * 8]


# -- templates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "spec", "peers_of_0", "numa_of_gpus"),
    [
        # spec: (model, GPU count, CPUs in millicores)
        pytest.param(hgx_h100_node, ("H100", 8, 224_000), (1, 2, 3, 4, 5, 6, 7),
                     [0] * 4 + [1] * 4, id="hgx-h100"),
        pytest.param(hgx_a100_node, ("A100", 8, 256_000), (1, 2, 3, 4, 5, 6, 7),
                     [0] * 4 + [1] * 4, id="hgx-a100"),
        pytest.param(pcie_pairs_node, ("A100", 4, 64_000), (1,), [0, 0, 1, 1], id="pcie-pairs"),
        pytest.param(l4_node, ("L4", 4, 48_000), (), [0, 0, 1, 1], id="l4"),
        pytest.param(t4_node, ("T4", 4, 48_000), (), [0, 0, 1, 1], id="t4"),
    ],
)  # fmt: skip
def test_templates(
    make: Callable[[str], Node],
    spec: tuple[str, int, int],
    peers_of_0: tuple[int, ...],
    numa_of_gpus: list[int],
) -> None:
    node = make("n1")
    topo = node.topology
    assert topo is not None
    assert (node.gpu_model, node.gpu_count, node.cpu_milli) == spec
    assert topo.nvlink_peers(0) == peers_of_0
    assert [d.numa_node for d in topo.devices] == numa_of_gpus
    assert all(g.memory_mib > 0 for g in node.gpus)


def test_nodes_of_one_template_share_one_topology() -> None:
    assert hgx_h100_node("a").topology is hgx_h100_node("b").topology
    assert set(TEMPLATES) == {
        "hgx-h100-8",
        "hgx-a100-8",
        "pcie-4-pairs",
        "l4",
        "t4",
        "hgx-h100-8-mig",
        "hgx-a100-8-mig",
    }
    assert TEMPLATES["hgx-h100-8-mig"]("a").topology is hgx_h100_node("b").topology
    assert l4_node("x", gpus=8).gpu_count == 8
    with pytest.raises(ConfigError, match="field 'gpus': got 3; expected 2, 4 or 8"):
        l4_node("x", gpus=3)


def test_a100_40gb_variant() -> None:
    assert hgx_a100_node("a", gpu_memory_gib=40).gpus[0].memory_mib == 40 * 1024


# -- set keys ---------------------------------------------------------------------------------


def topology_of(node: Node) -> NodeTopology:
    assert node.topology is not None
    return node.topology


PAIRS = topology_of(pcie_pairs_node("p"))
H100 = topology_of(hgx_h100_node("h"))


@pytest.mark.parametrize(
    ("topo", "gpus", "key"),
    [
        pytest.param(PAIRS, (0,), (X, 0, -1), id="single-gpu"),
        pytest.param(PAIRS, (0, 1), (NV, NV, -1), id="nvlink-pair"),
        # pairs 0-1 (NV), 0-2 and 1-2 cross the sockets (SYS): min 0, sum 3 + 0 + 0
        pytest.param(PAIRS, (0, 1, 2), (SYS, 3, -2), id="pair-plus-one"),
        pytest.param(PAIRS, (0, 2), (SYS, 0, -2), id="split-pair"),
        # 4 GPUs of one NUMA node on NVSwitch: C(4,2) = 6 pairs of class 3
        pytest.param(H100, (0, 1, 2, 3), (NV, 18, -1), id="nvswitch-numa-local"),
        pytest.param(H100, (0, 1, 2, 4), (NV, 18, -2), id="nvswitch-two-numa"),
    ],
)
def test_set_key(topo: NodeTopology, gpus: tuple[int, ...], key: tuple[int, int, int]) -> None:
    assert topo.set_key(gpus) == key


# -- the picker -------------------------------------------------------------------------------


def state_with(
    node: Node, busy: Sequence[int] = (), shared: dict[int, int] | None = None
) -> ClusterState:
    """One node; GPUs in ``busy`` fully used, GPU g in ``shared`` with that much milli used."""
    state = make_state(node)
    for g in busy:
        occupy(state, str(node.name), gpus=(g,))
    for g, used in (shared or {}).items():
        occupy(state, str(node.name), gpus=(g,), gpu_milli=used)
    return state


PICKS = [
    pytest.param(hgx_h100_node, (), 4, (0, 1, 2, 3), id="nvswitch-4gpu-numa-local"),
    pytest.param(hgx_h100_node, (1,), 4, (4, 5, 6, 7), id="nvswitch-4gpu-to-whole-numa-node"),
    # GPU 5 busy: NUMA 1 has 3 free, NUMA 0 has 4; a 1-GPU task keeps NUMA 0's group of 4
    pytest.param(hgx_h100_node, (5,), 1, (4,), id="nvswitch-1gpu-keeps-numa-group"),
    pytest.param(hgx_h100_node, (), 1, (0,), id="nvswitch-1gpu-empty-lowest"),
    pytest.param(hgx_h100_node, (0, 1, 2), 2, (4, 5), id="nvswitch-2gpu-leaves-odd-gpu"),
    pytest.param(hgx_h100_node, (), 8, tuple(range(8)), id="nvswitch-8gpu"),
    pytest.param(pcie_pairs_node, (), 2, (0, 1), id="pairs-2gpu-nvlink-pair"),
    pytest.param(pcie_pairs_node, (1,), 2, (2, 3), id="pairs-2gpu-skips-broken-pair"),
    # free {0, 2, 3}: taking 0 leaves the NVLink pair 2-3 whole for a later 2-GPU task
    pytest.param(pcie_pairs_node, (1,), 1, (0,), id="pairs-1gpu-orphan-first"),
    pytest.param(pcie_pairs_node, (0,), 1, (1,), id="pairs-1gpu-orphan-is-1"),
    pytest.param(pcie_pairs_node, (2,), 1, (3,), id="pairs-1gpu-orphan-is-3"),
    pytest.param(l4_node, (), 2, (0, 1), id="pcie-2gpu-same-numa"),
    pytest.param(l4_node, (0,), 2, (2, 3), id="pcie-2gpu-same-numa-other-socket"),
    pytest.param(l4_node, (2,), 1, (3,), id="pcie-1gpu-keeps-numa-pair"),
]


@pytest.mark.parametrize(("make", "busy", "k", "expected"), PICKS)
def test_topology_aware_pick(
    make: Callable[[str], Node], busy: tuple[int, ...], k: int, expected: tuple[int, ...]
) -> None:
    state = state_with(make("n"), busy)
    task = make_task().gpus(k).build()
    assert TopologyAwareGpu().pick(cycle_context(), task, state, 0) == expected


def test_sharing_task_goes_to_best_fit_shared_gpu_first() -> None:
    # GPU 6 has 400 free, GPU 2 has 700: a 300-milli task takes the tighter GPU 6
    state = state_with(hgx_h100_node("n"), shared={2: 300, 6: 600})
    task = make_task().share(300).build()
    assert TopologyAwareGpu().pick(cycle_context(), task, state, 0) == (6,)


def test_sharing_task_on_whole_gpus_uses_the_damage_rule() -> None:
    # only whole GPUs fit 500 milli (GPU 0 has 300 free); among whole GPUs the rule acts:
    # GPU 1 is on the pair 0-1 whose partner is already partly used
    state = state_with(pcie_pairs_node("n"), shared={0: 700})
    task = make_task().share(500).build()
    assert TopologyAwareGpu().pick(cycle_context(), task, state, 0) == (1,)


@pytest.mark.parametrize(
    ("free", "k"),
    [([1000, 300, 600, 600], 1), ([0, 1000, 0, 1000, 1000], 2), ([1000] * 4, 4)],
)
def test_nodes_without_topology_fall_back_to_best_fit(free: list[int], k: int) -> None:
    state = make_state(make_node("n").gpus(len(free)))
    for g, f in enumerate(free):
        if f < 1000:
            occupy(state, "n", gpus=(g,), gpu_milli=1000 - f)
    task = make_task().gpus(k, milli=600 if k == 1 else 1000).build()
    ctx = cycle_context()
    assert TopologyAwareGpu().pick(ctx, task, state, 0) == BestFitGpu().pick(ctx, task, state, 0)


def test_cpu_only_task_gets_no_gpu() -> None:
    state = state_with(hgx_h100_node("n"))
    assert TopologyAwareGpu().pick(cycle_context(), make_task().cpu(2).build(), state, 0) == ()


def test_registered_as_a_gpu_picker() -> None:
    plugin = create_plugin("topology-aware-gpu", {}, PluginContext())
    assert isinstance(plugin, GpuPicker)
    with pytest.raises(ConfigError):
        create_plugin("topology-aware-gpu", {"x": 1}, PluginContext())


def test_sixteen_gpu_topology_uses_the_greedy_set() -> None:
    # two NVSwitch domains of 8 (one per socket), no NVLink between them
    topo = NodeTopology.build(
        devices([0] * 8 + [1] * 8, [f"r{i // 2}" for i in range(16)]),
        (64_000, 64_000),
        nvlink_domains=[range(8), range(8, 16)],
    )
    state = state_with(topo_node(topo), busy=(0,))
    task = make_task().gpus(8).build()
    assert TopologyAwareGpu().pick(cycle_context(), task, state, 0) == tuple(range(8, 16))
    assert is_best_connected_set(topo, mask(*range(1, 16)), range(8, 16))
    assert not is_best_connected_set(topo, mask(*range(1, 16)), range(1, 9))


# -- tables and the metric's predicate ---------------------------------------------------------


def brute_best(topo: NodeTopology, free: int, k: int) -> tuple[int, int, int] | None:
    gpus = [g for g in range(topo.gpu_count) if free >> g & 1]
    return max((topo.set_key(c) for c in combinations(gpus, k)), default=None)


def test_tables_match_brute_force_on_every_mask_of_the_pairs_box() -> None:
    tables = ConnectivityTables(PAIRS)
    for free in range(16):
        for k in range(1, 5):
            assert tables.best[free][k] == brute_best(PAIRS, free, k)
            chosen = tables.choice[free][k]
            if tables.best[free][k] is None:
                assert chosen is None
            else:
                assert chosen is not None
                assert PAIRS.set_key(chosen) == tables.best[free][k]


@pytest.mark.parametrize(
    ("topo", "free", "chosen", "best", "links_only"),
    [
        pytest.param(PAIRS, mask(0, 1, 2, 3), (0, 1), True, True, id="pair-is-best"),
        pytest.param(PAIRS, mask(0, 1, 2, 3), (1, 2), False, False, id="split-pair-is-not"),
        pytest.param(PAIRS, mask(0, 2, 3), (0, 2), False, False, id="pair-2-3-was-free"),
        pytest.param(PAIRS, mask(0, 2), (0, 2), True, True, id="only-choice"),
        pytest.param(H100, mask(*range(8)), (0, 1, 2, 4), False, True, id="nvswitch-numa-split"),
        pytest.param(H100, mask(*range(8)), (4, 5, 6, 7), True, True, id="nvswitch-numa-local"),
        pytest.param(H100, mask(0), (0,), True, True, id="single-gpu-always-best"),
    ],
)
def test_is_best_connected_set(
    topo: NodeTopology, free: int, chosen: tuple[int, ...], best: bool, links_only: bool
) -> None:
    assert is_best_connected_set(topo, free, chosen) is best
    assert is_best_connected_set(topo, free, chosen, include_numa=False) is links_only


def test_is_best_connected_set_rejects_a_busy_gpu() -> None:
    with pytest.raises(ValueError, match="not all in free mask"):
        is_best_connected_set(PAIRS, mask(0, 1), (1, 2))
    assert best_connected_key(PAIRS, mask(0, 1), 3) is None


@pytest.mark.parametrize(
    ("gpus", "cpu", "split"),
    [
        # 8 x H100 board: GPUs 0-3 on NUMA 0, 4-7 on NUMA 1.
        pytest.param((0, 1), 24_000, (24_000, 0), id="one-numa-node-takes-all"),
        pytest.param((2, 3, 4, 5), 30_000, (15_000, 15_000), id="even-split"),
        # 2 GPUs on NUMA 0, 1 on NUMA 1: floor(1000 * 2/3) = 666, floor(1000 / 3) = 333; the
        # 1 millicore left goes to the NUMA node with more of the GPUs.
        pytest.param((0, 1, 4), 1000, (667, 333), id="remainder-to-the-larger-share"),
    ],
)
def test_numa_split_follows_the_gpus(
    gpus: tuple[int, ...], cpu: int, split: tuple[int, ...]
) -> None:
    topo = hgx_h100_node("n").topology
    assert topo is not None
    assert topo.numa_split(gpus, cpu) == split


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        pytest.param(
            "{name: a, cpu: 4, memory: 8Gi, numa_local_cpus: true}",
            "job 'a': numa_local_cpus without gpus",
            id="cpu-only",
        ),
        pytest.param(
            "{name: b, kind: inference, cpu: 4, memory: 8Gi, gpus: 1, gpu_memory: 10Gi, "
            "numa_local_cpus: true}",
            "job 'b': numa_local_cpus with a shared GPU",
            id="shared-gpu",
        ),
    ],
)
def test_numa_local_cpus_field_errors(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"jobs:\n  - {entry}\n", encoding="utf-8")
    with pytest.raises(TraceError, match=message):
        load_workload(path)
