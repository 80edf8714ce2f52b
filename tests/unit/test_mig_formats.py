"""MIG in the native cluster and workload files, the templates and the simulator's checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusched.errors import ConfigError, TraceError
from gpusched.io.native_cluster import load_cluster
from gpusched.io.native_dump import dump_cluster, dump_workload
from gpusched.io.native_workload import load_workload
from gpusched.model.mig import MigPlacement
from gpusched.model.templates import TEMPLATES
from gpusched.scheduler import build_profile, policy_spec
from gpusched.sim import Simulation

CLUSTER = """\
nodes:
  - name: a
    cpu: 64
    memory: 512Gi
    gpus: 4
    gpu_model: A100
    gpu_memory: 80Gi
    mig:
      - {gpus: [0], layout: [3g.40gb@0, 2g.20gb@4, 1g.10gb@6]}
      - {gpus: [1], layout: {1g.10gb: 7}}
      - {gpus: [2], reconfigurable: true}
  - {name: m, template: hgx-a100-8-mig}
  - {name: p, cpu: 8, memory: 64Gi, gpus: 1, gpu_model: L4, gpu_memory: 24Gi}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_cluster_mig_fields(tmp_path: Path) -> None:
    nodes = load_cluster(_write(tmp_path, "c.yaml", CLUSTER))
    a, m, p = nodes
    assert a.mig[0] is not None
    assert a.mig[0].layout == (
        MigPlacement("3g.40gb", 0),
        MigPlacement("2g.20gb", 4),
        MigPlacement("1g.10gb", 6),
    )
    assert a.mig[1] is not None
    assert [pl.start for pl in a.mig[1].layout] == list(range(7))  # counts: choose_layout
    assert a.mig[2] is not None
    assert a.mig[2].reconfigurable
    assert a.mig[3] is None  # GPU 3 stays plain
    assert len(m.mig) == 8
    assert all(c is not None and c.reconfigurable for c in m.mig)
    assert p.mig == ()
    out = tmp_path / "again.yaml"
    dump_cluster(nodes, out)
    assert load_cluster(out) == nodes


@pytest.mark.parametrize(
    ("mig", "message"),
    [
        pytest.param("{layout: [3g.40gb@0, 3g.40gb@2]}", "start 2 is not allowed", id="bad-start"),
        pytest.param("{layout: [3g.40gb]}", "expected PROFILE@START", id="no-start"),
        pytest.param("{layout: {1g.10gb: 8}}", "do not fit one A100-80GB GPU", id="too-many"),
        pytest.param("{layout: [1g.5gb@0]}", "does not exist on A100-80GB", id="wrong-geometry"),
        pytest.param("{gpus: [4], reconfigurable: true}", "GPU 4 does not exist", id="no-gpu"),
        pytest.param("{}", "layout: missing", id="neither"),
        pytest.param(
            "[{gpus: [0], reconfigurable: true}, {gpus: [0], reconfigurable: true}]",
            "named by an earlier mig entry",
            id="twice",
        ),
    ],
)
def test_cluster_mig_errors_name_file_line_and_field(
    tmp_path: Path, mig: str, message: str
) -> None:
    text = (
        "nodes:\n"
        "  - {name: ok, cpu: 1, memory: 1Gi}\n"
        "  - name: bad\n"
        "    cpu: 64\n    memory: 512Gi\n    gpus: 4\n    gpu_model: A100\n"
        f"    gpu_memory: 80Gi\n    mig: {mig}\n"
    )
    with pytest.raises(TraceError) as err:
        load_cluster(_write(tmp_path, "c.yaml", text))
    assert (err.value.line, err.value.field) == (3, "mig")
    assert message in str(err.value)
    assert "node 'bad'" in str(err.value)


def test_mig_on_a_gpu_without_mig_is_an_error(tmp_path: Path) -> None:
    text = "nodes:\n  - {name: l, template: l4, mig: {reconfigurable: true}}\n"
    with pytest.raises(TraceError, match="not MIG-capable") as err:
        load_cluster(_write(tmp_path, "c.yaml", text))
    assert err.value.field == "mig"


def test_workload_mig_fields_round_trip(tmp_path: Path) -> None:
    text = """\
jobs:
  - {name: one, cpu: 1, memory: 4Gi, mig: 1g.10gb}
  - {name: two, cpu: 1, memory: 4Gi, mig: 3g.40gb, mig_count: 2, gpu_models: [A100],
     replicas: 2}
"""
    jobs = load_workload(_write(tmp_path, "w.yaml", text))
    one, two = jobs
    assert (one.tasks[0].shape.mig_profile, one.tasks[0].shape.mig_count) == ("1g.10gb", 1)
    assert one.tasks[0].shape.num_gpu == 0
    assert two.gpu_milli == 2 * 2 * 428  # two pods x two 3g.40gb, floor(3000 / 7) each
    out = tmp_path / "again.yaml"
    dump_workload(jobs, out)
    assert load_workload(out) == jobs


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        pytest.param("mig: 5g.50gb", "jobs[0].mig", "unknown MIG profile '5g.50gb'", id="unknown"),
        pytest.param("mig: 1g.10gb, gpus: 1", "jobs[0]", "remove gpus", id="with-gpus"),
        pytest.param("mig_count: 2", "jobs[0]", "mig_count without mig", id="count-alone"),
        pytest.param("mig: 1g.10gb, mig_count: 0", "jobs[0].mig_count", "", id="zero-count"),
    ],
)
def test_workload_mig_errors(tmp_path: Path, entry: str, field: str, message: str) -> None:
    text = f"jobs:\n  - {{name: j, cpu: 1, memory: 1Gi, {entry}}}\n"
    with pytest.raises(TraceError) as err:
        load_workload(_write(tmp_path, "w.yaml", text))
    assert (err.value.line, err.value.field) == (2, field)
    assert message in str(err.value)


def test_a_profile_the_cluster_does_not_offer_is_named(tmp_path: Path) -> None:
    nodes = load_cluster(_write(tmp_path, "c.yaml", CLUSTER))
    text = "jobs:\n  - {name: ok, cpu: 1, memory: 1Gi, mig: 4g.40gb}\n" + (
        "  - {name: small, cpu: 1, memory: 1Gi, mig: 1g.5gb}\n"
    )
    path = _write(tmp_path, "w.yaml", text)
    with pytest.raises(TraceError) as err:
        load_workload(path, nodes=nodes)
    assert (err.value.line, err.value.field) == (3, "mig")
    assert "job 'small' asks MIG profile '1g.5gb'" in str(err.value)
    jobs = load_workload(path)  # without the nodes: the simulator refuses it, naming the job
    with pytest.raises(ConfigError, match="job 'small': field 'mig'"):
        Simulation(nodes, jobs, build_profile(policy_spec("fgd")))


def test_mig_templates() -> None:
    for name in ("hgx-h100-8-mig", "hgx-a100-8-mig"):
        node = TEMPLATES[name]("n")
        assert node.gpu_count == 8
        assert all(c is not None and c.reconfigurable for c in node.mig)
        assert node.topology is not None


def test_simulation_replays_mig_jobs(tmp_path: Path) -> None:
    from gpusched.plugins.fragmentation import TargetWorkload
    from gpusched.sim.metrics import RunMetrics, summarise

    nodes = load_cluster(_write(tmp_path, "c.yaml", CLUSTER))[:1]  # node a: 3 MIG GPUs
    text = """\
jobs:
  - {name: a, cpu: 1, memory: 1Gi, mig: 3g.40gb, submit: 0, duration: 100}
  - {name: b, cpu: 1, memory: 1Gi, mig: 3g.40gb, submit: 0, duration: 100}
  - {name: c, cpu: 1, memory: 1Gi, mig: 3g.40gb, submit: 0, duration: 100}
  - {name: d, cpu: 1, memory: 1Gi, mig: 4g.40gb, submit: 10, duration: 100}
"""
    jobs = load_workload(_write(tmp_path, "w.yaml", text))
    sim = Simulation(nodes, jobs, build_profile(policy_spec("gpusched")))
    metrics = RunMetrics(sim, TargetWorkload.from_shapes([t.shape for j in jobs for t in j.tasks]))
    sim.observers.append(metrics)
    sim.run()
    summary = summarise(sim, metrics)
    # a takes the static 3g.40gb@0 of GPU 0; b and c fill the reconfigurable GPU 2 (3g at 4,
    # then 3g at 0); d (4g.40gb) is offered only by GPU 2, which is full until t=100
    starts = {j: sim.records[j].first_start for j in sim.records}
    assert starts == {"a": 0.0, "b": 0.0, "c": 0.0, "d": 100.0}
    assert summary["jobs_completed"] == 4
    assert summary["mig_instances_in_use_max"] == 3
    assert summary["mig_gpus_reconfigured"] == 2  # b+c in one cycle, then d: GPU 2 twice
    assert summary["mig_layouts_chosen"] == 2  # ... from empty both times
    # held over the arrival window [0, 10]: a+b+c = 3 * 428 milli of 3 MIG GPUs
    assert summary["mig_held_pct"] == pytest.approx(100 * 3 * 428 / 3000, abs=0.01)
    assert sim.state.mig is not None
    assert sim.state.mig.held == 0
