"""Network levels from node labels, the gang domain rule, requests by GPU memory, and the file
format fields that carry them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from builders import make_node, make_state
from gpusched.errors import ConfigError, TraceError
from gpusched.framework.domains import choose_domain
from gpusched.framework.sharing import memory_share
from gpusched.io.native_cluster import load_cluster, load_cluster_spec
from gpusched.io.native_dump import dump_cluster, dump_workload
from gpusched.io.native_workload import load_workload
from gpusched.model import JobKind
from gpusched.model.network import PRESETS, detect_network, network_from_spec
from gpusched.scheduler import build_profile, policy_spec
from gpusched.sim import Simulation

# -- levels -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "preset", "names"),
    [
        pytest.param(
            {"cloud.google.com/gce-topology-block": "b", "cloud.google.com/gce-topology-host": "h"},
            "gke",
            ("block", "host"),
            id="gke-keeps-the-levels-nodes-define",
        ),
        pytest.param(
            {
                "topology.k8s.aws/network-node-layer-1": "a",
                "topology.k8s.aws/network-node-layer-3": "c",
            },
            "eks",
            ("layer-1", "layer-3"),
            id="eks-layer-1-is-coarsest",
        ),
        pytest.param(
            {"network.topology.nvidia.com/block": "b", "nvidia.com/gpu.clique": "c1"},
            "topograph",
            ("block", "clique"),
            id="topograph-then-clique-finest",
        ),
        pytest.param({"zone": "z"}, "", (), id="no-topology-labels"),
    ],
)
def test_detect_network(labels: dict[str, str], preset: str, names: tuple[str, ...]) -> None:
    net = detect_network([labels, {}])
    assert (net.preset, net.names) == (preset, names)


def test_every_preset_is_coarse_to_fine_and_named() -> None:
    assert list(PRESETS) == ["gke", "eks", "topograph", "topograph-tiers", "gpusched"]
    assert PRESETS["topograph-tiers"][0].label == "fabric.topograph.run/tier-3"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("gke", "no node carries any of its labels", id="preset-absent"),
        pytest.param("nope", "unknown topology preset 'nope'", id="unknown-preset"),
        pytest.param(
            ["rack", "zone"], "topology level 'zone' is defined by no node label", id="list"
        ),
    ],
)
def test_bad_network_spec_names_the_level(spec: str | list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        network_from_spec(spec, [{"rack": "r1"}])


def test_a_level_unknown_to_the_cluster_stops_the_simulation_naming_job_and_level(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "jobs: [{name: g, replicas: 2, cpu: 1, memory: 1Gi, gpus: 1, topology_required: rack}]\n"
    )
    jobs = load_workload(path)
    nodes = [make_node("a").gpus(2).build()]
    with pytest.raises(ConfigError, match="job 'g': field 'topology': topology level 'rack'"):
        Simulation(nodes, jobs, build_profile(policy_spec("gpusched-topo")))


# -- the domain rule ------------------------------------------------------------------------


def racked(*racks: int) -> list[object]:
    """Nodes in racks r0, r1, ... of the given sizes (one block)."""
    return [
        make_node(f"r{r}-{i}")
        .gpus(8)
        .label("topology.gpusched.io/block", "b")
        .label("topology.gpusched.io/rack", f"r{r}")
        for r, size in enumerate(racks)
        for i in range(size)
    ]


@pytest.mark.parametrize(
    ("racks", "fit", "need", "required", "domains", "problem"),
    [
        pytest.param((4, 2), [1] * 6, 2, True, ("r1",), "", id="best-fit-leaves-big-rack-whole"),
        pytest.param((4, 2), [1] * 6, 3, True, ("r0",), "", id="only-the-big-rack-holds-3"),
        pytest.param(
            (2, 2),
            [1] * 4,
            3,
            True,
            (),
            "gang needs 3 tasks in one rack; best rack 'r0' has room for 2",
            id="required-waits",
        ),
        pytest.param(
            (2, 1, 3), [1] * 6, 4, False, ("r2", "r1"), "", id="fewest-racks-best-fit-last"
        ),
    ],
)
def test_choose_domain(  # noqa: PLR0917 (one table row per case)
    racks: tuple[int, ...],
    fit: list[int],
    need: int,
    required: bool,
    domains: tuple[str, ...],
    problem: str,
) -> None:
    state = make_state(*racked(*racks))  # type: ignore[arg-type]
    level = state.network.level("rack")
    choice = choose_domain(state, level, np.array(fit, dtype=np.int64), need, required=required)
    assert choice.problem == problem
    assert choice.domains == domains


# -- memory shares --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mem", "usable", "share"),
    [
        pytest.param(10240, 23552, 435, id="10Gi-on-L4-24GB-less-1GiB"),
        pytest.param(10240, 80896, 127, id="10Gi-on-H100-80GB-less-1GiB"),
        pytest.param(23552, 23552, 1000, id="all-of-it"),
    ],
)
def test_memory_share_rounds_up(mem: int, usable: int, share: int) -> None:
    assert memory_share(mem, usable) == share
    assert share * usable / 1000 >= mem


# -- file formats ---------------------------------------------------------------------------


CLUSTER = """\
nodes:
  - {name: dgx, template: hgx-h100-8, count: 2, labels: {topology.gpusched.io/rack: r1}}
  - name: box
    cpu: 64
    memory: 512Gi
    gpus: 4
    gpu_model: A100
    gpu_memory: 80Gi
    gpu_sharing: mps
    gpu_reserved_memory: 1Gi
    topology: {numa_cpu: [32, 32], gpu_numa: [0, 0, 1, 1], nvlink: [[0, 1], [2, 3]]}
network_topology: gpusched
"""


def test_cluster_file_templates_topology_and_network(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER)
    nodes, network = load_cluster_spec(path)
    assert [n.name for n in nodes] == ["dgx-000", "dgx-001", "box"]
    assert nodes[0].topology is not None
    assert nodes[0].gpu_usable_mib == 79 * 1024
    box = nodes[2]
    assert box.topology is not None
    assert box.topology.nvlink_peers(0) == (1,)
    assert (box.gpu_sharing.value, box.gpu_usable_mib) == ("mps", 79 * 1024)
    assert network.names == ("rack",)
    out = tmp_path / "out.yaml"
    dump_cluster(nodes, out)
    assert load_cluster(out) == nodes


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        pytest.param(
            "nodes: [{name: b, cpu: 8, memory: 8Gi, gpus: 2, gpu_model: A100, gpu_memory: 40Gi,\n"
            "  topology: {numa_cpu: [8], gpu_numa: [0, 0], nvlink: [[0, 5]]}}]\n",
            "topology",
            "node 'b': field 'nvlink_domains[0]': got GPU 5",
            id="nvlink-peer-that-does-not-exist",
        ),
        pytest.param(
            "nodes: [{name: b, cpu: 8, memory: 8Gi, rack: 1}]\n",
            "nodes[0].rack",
            "",
            id="unknown-field",
        ),
        pytest.param(
            "nodes: [{name: b, cpu: 8, memory: 8Gi, labels: {rack: r}}]\n"
            "network_topology: [zone]\n",
            "network_topology",
            "topology level 'zone' is defined by no node label",
            id="undefined-level",
        ),
    ],
)
def test_bad_cluster_files_name_the_field(
    tmp_path: Path, text: str, field: str, message: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        load_cluster(path)
    assert err.value.field == field
    assert message in str(err.value)


def test_workload_memory_requests_and_topology_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "jobs:\n"
        "  - {name: inf, kind: inference, cpu: 1, memory: 4Gi, gpus: 1, gpu_memory: 10Gi}\n"
        "  - {name: tr, kind: training, cpu: 1, memory: 4Gi, gpus: 1, gpu_memory: 10Gi}\n"
        "  - {name: trs, kind: training, cpu: 1, memory: 4Gi, gpus: 1, gpu_memory: 10Gi,\n"
        "     share_gpu: true}\n"
        "  - {name: g, kind: training, replicas: 4, cpu: 1, memory: 4Gi, gpus: 8,\n"
        "     topology_preferred: rack}\n"
    )
    jobs = load_workload(path)
    shapes = {str(j.id): j.tasks[0].shape for j in jobs}
    assert (shapes["inf"].gpu_milli, shapes["inf"].gpu_memory_mib) == (125, 10240)  # on 80 GiB
    assert shapes["tr"].gpu_milli == 1000
    assert not shapes["tr"].by_memory
    assert shapes["trs"].by_memory
    assert jobs[2].kind is JobKind.TRAINING
    assert jobs[3].topology is not None
    assert not jobs[3].topology.required
    out = tmp_path / "out.yaml"
    dump_workload(jobs, out)
    assert load_workload(out) == jobs


def test_a_fraction_above_every_gpus_memory_names_job_and_field(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("jobs:\n  - {name: big, cpu: 1, memory: 4Gi, gpus: 1, gpu_memory: 30Gi}\n")
    nodes = [make_node("a").gpus(4, model="L4", memory_mib=24 * 1024).build()]
    with pytest.raises(TraceError) as err:
        load_workload(path, nodes=nodes)
    assert (err.value.line, err.value.field) == (2, "gpu_memory")
    assert "job 'big' asks 30720 MiB" in str(err.value)


def test_network_packing_prefers_the_busier_rack() -> None:
    from builders import cycle_context, make_task, occupy
    from gpusched.plugins.network_packing import NetworkPacking

    state = make_state(*racked(2, 2))  # type: ignore[arg-type]
    occupy(state, "r1-0", gpus=(0, 1, 2, 3))
    task = make_task().gpus(1).build()
    scores = NetworkPacking().score(cycle_context(), task, state, np.ones(4, dtype=bool))
    # r1 holds 16 GPUs with 4 in use: 25 points on both of its nodes; r0 is idle: 0.
    assert scores.tolist() == [0.0, 0.0, 25.0, 25.0]
