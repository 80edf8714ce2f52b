"""Queues (the gpusched ``Queue`` CRD), namespace -> queue rules, bad queues, and the room held
for a preemptor between its victims' eviction and its bind -- against the real control plane.

Queues are cluster-scoped and, once one exists, every gpusched pod must resolve to a queue;
so each test deletes its Queues when it ends (tests on one control plane run one at a time).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from e2e.conftest import NodeFactory
from e2e.controlplane import ControlPlane, wait_until
from e2e.kube import (
    JsonObj,
    check,
    condition,
    create_namespace,
    create_pod,
    delete_namespace,
    ensure_priority_class,
    pod_manifest,
    pods_path,
    unschedulable,
    wait_for,
)
from e2e.test_live import (  # noqa: F401 - fixtures used by name
    HIGH,
    Gpusched,
    bound_node,
    deployed,
    gpus_of,
    list_pods,
    preempt_now_profile,
    start_gpusched,
    wait_bound,
)

QUEUES = "/apis/gpusched.dev/v1alpha1/queues"
QUEUE_LABEL = "gpusched.dev/queue"


def message_of(pod: JsonObj) -> str:
    return str((condition(pod, "PodScheduled") or {}).get("message", ""))


@pytest.fixture
def run_gpusched(request: pytest.FixtureRequest) -> Callable[..., Gpusched]:
    """``start_gpusched`` of test_live (deploy/ installed, the ServiceAccount's token)."""
    start: Callable[..., Gpusched] = request.getfixturevalue("start_gpusched")
    return start


@pytest.fixture
def make_queue(
    control_plane: ControlPlane, kube: httpx.Client, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    request.getfixturevalue("deployed")
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/queues.gpusched.dev", "--timeout=60s"
    )
    made: list[str] = []

    def make(base: str, **spec: object) -> str:
        name = f"{base}-{uuid.uuid4().hex[:5]}"
        body = {"apiVersion": "gpusched.dev/v1alpha1", "kind": "Queue"}
        check(kube.post(QUEUES, json={**body, "metadata": {"name": name}, "spec": spec}))
        made.append(name)
        return name

    yield make
    for name in made:
        kube.delete(f"{QUEUES}/{name}")


@pytest.fixture
def other_namespace(kube: httpx.Client) -> Iterator[str]:
    name = f"other-team-{uuid.uuid4().hex[:6]}"
    create_namespace(kube, name)
    yield name
    delete_namespace(kube, name)


def test_queue_limit_holds_and_another_teams_queue_is_refused(  # noqa: PLR0917 - fixtures
    kube: httpx.Client,
    namespace: str,
    other_namespace: str,
    gpu_nodes: NodeFactory,
    make_queue: Callable[..., str],
    run_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(1, gpus=8)
    team = make_queue("team-a", guaranteed={"gpu": 2}, limit={"gpu": 2}, namespaces=[namespace])
    run_gpusched("replica-a")
    # No label: the namespace's queue is the one listing it.
    for i in range(3):
        create_pod(kube, namespace, pod_manifest(f"p{i}", gpus=1))
    # Another team names team-a's queue on its pod.
    intruder = pod_manifest("intruder", gpus=1, labels={QUEUE_LABEL: team})
    create_pod(kube, other_namespace, intruder)

    refused = wait_for(kube, pods_path(other_namespace), "intruder", unschedulable, 60)
    text = message_of(refused)
    assert f"namespace {other_namespace} may not use queue '{team}'" in text
    assert f"namespaces {namespace} (spec.namespaces)" in text
    assert f"add {other_namespace} to the Queue's spec.namespaces" in text  # how to fix

    def told() -> bool:  # the Event is posted right after the condition
        events = check(kube.get(f"/api/v1/namespaces/{other_namespace}/events"))["items"]
        return any(e["reason"] == "FailedScheduling" and team in e["message"] for e in events)

    wait_until("a FailedScheduling Event naming the queue", told, 30)

    # The limit of 2 GPUs: two pods run, the third waits with the queue's numbers.
    for name in ("p0", "p1", "p2"):
        wait_for(
            kube, pods_path(namespace), name, lambda p: bool(bound_node(p)) or unschedulable(p), 60
        )
    pods = list_pods(kube, namespace)
    assert sum(bool(bound_node(p)) for p in pods) == 2, [message_of(p) for p in pods]
    (pending,) = [p for p in pods if not bound_node(p)]
    assert f"queue '{team}'" in message_of(pending), message_of(pending)
    assert "limit" in message_of(pending), message_of(pending)
    queue = check(kube.get(f"{QUEUES}/{team}"))
    accepted = condition(queue, "Accepted") or {}
    assert accepted.get("status") == "True", queue.get("status")
    assert not bound_node(check(kube.get(pods_path(other_namespace, "intruder"))))


def test_queue_with_a_negative_quota_is_reported_and_other_queues_are_served(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    make_queue: Callable[..., str],
    run_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(1, gpus=8)
    bad = make_queue("broken", guaranteed={"gpu": -1}, namespaces=[namespace])
    good = make_queue("fine", guaranteed={"gpu": 4}, namespaces=[namespace])
    run_gpusched("replica-a")
    create_pod(kube, namespace, pod_manifest("in-bad", labels={QUEUE_LABEL: bad}))
    create_pod(kube, namespace, pod_manifest("in-good", labels={QUEUE_LABEL: good}))
    wait_bound(kube, namespace, "in-good")
    pod = wait_for(kube, pods_path(namespace), "in-bad", unschedulable, 60)
    assert f"queue '{bad}' is not usable: spec.guaranteed.gpu: got -1" in message_of(pod)

    def rejected(queue: JsonObj) -> bool:
        return (condition(queue, "Accepted") or {}).get("status") == "False"

    queue = wait_for(kube, QUEUES, bad, rejected, 30)
    assert "spec.guaranteed.gpu" in (condition(queue, "Accepted") or {})["message"]
    events = check(
        kube.get(
            "/api/v1/namespaces/default/events",
            params={"fieldSelector": f"involvedObject.name={bad}"},
        )
    )["items"]
    assert [e["reason"] for e in events] == ["InvalidQueue"]
    assert "spec.guaranteed.gpu: got -1; quotas must be >= 0" in events[0]["message"]
    assert events[0]["involvedObject"]["kind"] == "Queue"


def _without_finalizers(kube: httpx.Client, namespace: str, name: str) -> None:
    check(
        kube.patch(
            pods_path(namespace, name),
            json={"metadata": {"finalizers": None}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
    )


def test_preemptor_keeps_the_room_freed_for_it_until_it_is_bound(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    run_gpusched: Callable[..., Gpusched],
) -> None:
    ensure_priority_class(kube, HIGH, 1000)
    profile = preempt_now_profile(control_plane, "preempt-now-hold.yaml")
    (node,) = gpu_nodes(1, gpus=8)
    run_gpusched("replica-a", "--profile", str(profile))
    # Victims that stay Terminating until the test lets them go (a finalizer).
    for i in range(8):
        victim = pod_manifest(f"low{i}", gpus=1)
        victim["metadata"]["finalizers"] = ["gpusched.dev/e2e-slow-exit"]
        create_pod(kube, namespace, victim)
    for i in range(8):
        wait_bound(kube, namespace, f"low{i}")

    create_pod(kube, namespace, pod_manifest("high", gpus=8, priority_class=HIGH))
    nominated = wait_for(
        kube,
        pods_path(namespace),
        "high",
        lambda p: bool(p.get("status", {}).get("nominatedNodeName")),
        60,
    )
    assert nominated["status"]["nominatedNodeName"] == node["metadata"]["name"]

    # Half the victims are gone: 4 GPUs are free, not enough for the preemptor yet.
    for i in range(4):
        _without_finalizers(kube, namespace, f"low{i}")
    thief = pod_manifest("thief", gpus=1)  # same priority as the victims: cannot preempt
    create_pod(kube, namespace, thief)
    held = wait_for(
        kube, pods_path(namespace), "thief", lambda p: unschedulable(p) or bool(bound_node(p)), 60
    )
    assert not bound_node(held), "a later pod took the GPUs freed for the preemptor"
    assert not bound_node(check(kube.get(pods_path(namespace, "high"))))

    for i in range(4, 8):
        _without_finalizers(kube, namespace, f"low{i}")
    bound = wait_bound(kube, namespace, "high")
    assert sorted(gpus_of(bound)) == list(range(8))
    assert not bound_node(check(kube.get(pods_path(namespace, "thief"))))
