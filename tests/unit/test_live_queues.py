"""Queue CRD objects into the core's queue tree, who may use a queue, and preemptor holds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpusched.framework import ClusterState
from gpusched.live.admission import Admission
from gpusched.live.holds import Hold, apply_holds
from gpusched.live.queues import NamespaceInfo, build_queues, queue_from_k8s
from gpusched.live.translate_podgroup import PodGroupInfo
from gpusched.model import JobId, Node, Task, TaskId, TaskShape
from unit.test_live_snapshot import pod


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param({"guaranteed": {"gpu": -1}}, "spec.guaranteed.gpu: got -1", id="negative"),
        pytest.param({"limit": {"cpu": "lots"}}, "spec.limit.cpu: 'lots' is not", id="bad-cpu"),
        pytest.param({"guaranteed": {"tpu": 1}}, "unknown resource 'tpu'", id="unknown"),
        pytest.param({"weight": 0}, "spec.weight: got 0", id="zero-weight"),
        pytest.param(
            {"guaranteed": {"gpu": 4}, "limit": {"gpu": 2}},
            "spec.limit.gpu: 2000 is below the guarantee 4000",
            id="limit-below-guarantee",
        ),
        pytest.param({"lendingLimit": {"gpu": 0.0001}}, "thousandths", id="gpu-too-fine"),
    ],
)
def test_a_bad_queue_names_its_field(spec: dict[str, Any], problem: str) -> None:
    info = queue_from_k8s(queue("q", **spec))
    assert info.spec is None
    assert problem in info.problem


def test_amounts_are_converted_to_core_units() -> None:
    info = queue_from_k8s(
        queue("q", guaranteed={"gpu": 1.5, "gpu/H100": 1, "cpu": "500m", "memory": "2Gi"})
    )
    assert info.spec is not None
    assert dict(info.spec.guaranteed.items()) == {
        "gpu": 1500,
        "gpu/H100": 1000,
        "cpu": 500,
        "memory": 2048,
    }


def test_bad_parents_and_their_children_are_left_out_and_the_rest_kept() -> None:
    queues = build_queues(
        queue_from_k8s(q)
        for q in [
            queue("org", guaranteed={"gpu": 4}),
            queue("a", parent="org", guaranteed={"gpu": 2}),
            queue("broken", guaranteed={"gpu": -1}),
            queue("child", parent="broken"),
            queue("orphan", parent="nobody"),
            queue("greedy", guaranteed={"gpu": 1}),
            queue("kid", parent="greedy", guaranteed={"gpu": 2}),
        ]
    )
    assert queues.tree is not None
    assert sorted(q.name for q in queues.tree) == ["a", "org"]
    assert queues.problems["child"] == "spec.parent: parent queue 'broken' is not usable"
    assert queues.problems["orphan"] == "spec.parent: no Queue named 'nobody'"
    assert "children kid are guaranteed" in queues.problems["greedy"]
    assert queues.problems["kid"] == "spec.parent: parent queue 'greedy' is not usable"


def test_which_queue_a_pod_uses_and_who_may_use_it() -> None:
    queues = build_queues(
        [
            queue_from_k8s(queue("team-a", namespaces=["a"])),
            queue_from_k8s(queue("shared", namespaces=["*"])),
            queue_from_k8s(queue("labelled")),
        ]
    )
    assert queues.resolve("a", "", "") == ("team-a", "")  # listed by name
    assert queues.resolve("b", "shared", "") == ("shared", "")
    assert queues.resolve("c", "", "labelled") == ("labelled", "")  # the namespace label
    chosen, problem = queues.resolve("b", "team-a", "")
    assert chosen == "team-a"
    assert "namespace b may not use queue 'team-a'" in problem
    assert "use one of shared" in problem
    assert "does not exist" in queues.resolve("a", "nope", "")[1]
    assert "no queue: namespace z" in queues.resolve("z", "", "")[1]


def test_a_job_gets_its_queue_a_native_groups_priority_and_never_preempts() -> None:
    admission = Admission(
        build_queues([queue_from_k8s(queue("q", namespaces=["ns"]))]),
        {"ns": NamespaceInfo("ns", "")},
    )
    meta = admission.job([pod("p")], None)
    assert (meta.queue, meta.priority, meta.preempts, meta.problem) == ("q", 0, True, "")
    group = PodGroupInfo("ns", "g", 2, native=True, priority=7)
    meta = admission.job([pod("a"), replace(pod("b"), preempts=False)], group)
    assert (meta.priority, meta.preempts) == (7, False)
    mixed = admission.job([pod("a"), replace(pod("b"), queue="q")], group)
    assert "name different queues" in mixed.problem


def _state() -> ClusterState:
    return ClusterState.from_nodes(
        [Node.with_gpus("n0", cpu_milli=8000, memory_mib=8192, gpu_count=4, gpu_model="A")]
    )


def _task(name: str, gpus: int) -> Task:
    return Task(TaskId(name), JobId(name), TaskShape(1000, 1024, gpus, 1000))


def test_a_hold_binds_when_its_room_is_free_and_holds_what_is_free_until_then() -> None:
    state = _state()
    victim = _task("victim", 2)
    state.allocate(victim, 0, (0, 1))
    preemptor = _task("p", 4)
    held = apply_holds(state, {TaskId("p"): (Hold("p", "n0", (0, 1, 2, 3), "u"), preemptor)})
    assert held.ready == {}
    assert held.held == {TaskId("p")}
    assert list(state.gpu_free[0]) == [0, 0, 0, 0]  # GPUs 2 and 3 held for the preemptor

    state = _state()
    held = apply_holds(state, {TaskId("p"): (Hold("p", "n0", (0, 1, 2, 3), "u"), preemptor)})
    assert held.ready == {TaskId("p"): ("n0", (0, 1, 2, 3))}
    assert TaskId("p") in state.allocations
