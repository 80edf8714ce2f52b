"""Run-time estimates reaching the live scheduler on the real control plane: an annotated
estimate, and a mean learned from a pod kwok completes, each decide whether a short pod may
backfill in front of a reservation, and set the deadline the scheduler records for it.

One 8-GPU node. ``long`` holds 4 GPUs and is expected to run 10 minutes; ``big`` needs all 8,
so it holds a reservation from ``long``'s expected end; a 2-GPU pod may use the 4 free GPUs
meanwhile only if it is expected to end before then. With the default hour it may not; with
an estimate of a minute, or a learned mean of a few seconds, it may, and the scheduler then
records in the ``gpusched-state`` ConfigMap the deadline by which it must end: when the
nodes are due to ``big``, ``long``'s start plus its estimate, read back from the scheduler's
own state.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import httpx
import pytest

from e2e.conftest import NodeFactory
from e2e.controlplane import wait_until
from e2e.kube import check, create_pod, pod_manifest, pods_path, unschedulable, wait_for
from e2e.test_live import (  # noqa: F401 - fixtures used by name
    SYSTEM_NS,
    Gpusched,
    bound_node,
    deployed,
    start_gpusched,
    wait_bound,
)
from gpusched.live.estimates import KIND_LABEL, RUNTIME_ESTIMATE_ANNOTATION, USER_LABEL
from gpusched.live.replay_objects import RUNTIME_ANNOTATION
from gpusched.live.translate import parse_timestamp


def create(
    kube: httpx.Client,
    namespace: str,
    node: str,
    name: str,
    gpus: int,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    manifest = pod_manifest(name, gpus=gpus, labels=labels, annotations=annotations)
    manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    create_pod(kube, namespace, manifest)


def reserve_the_node(kube: httpx.Client, namespace: str, node: str) -> float:
    """``long`` runs on 4 of the 8 GPUs, expected for 10 minutes; ``big`` (8 GPUs) waits,
    holding the reservation. Returns when the nodes are due to ``big``: ``long``'s
    ``status.startTime`` (the start the scheduler gives running jobs) plus 600 s."""
    create(kube, namespace, node, "long", 4, annotations={RUNTIME_ESTIMATE_ANNOTATION: "10m"})
    long = wait_for(kube, pods_path(namespace), "long", lambda p: "startTime" in p["status"], 60)
    create(kube, namespace, node, "big", 8)
    wait_for(kube, pods_path(namespace), "big", unschedulable, 60)
    return parse_timestamp(long["status"]["startTime"]) + 600.0


def deadline_of(kube: httpx.Client, job: str) -> float | None:
    found = kube.get(f"/api/v1/namespaces/{SYSTEM_NS}/configmaps/gpusched-state")
    if found.status_code != 200:
        return None
    deadlines: dict[str, float] = json.loads(found.json()["data"]["state.json"])["deadlines"]
    return deadlines.get(job)


def stays_pending(kube: httpx.Client, namespace: str, name: str) -> None:
    pod = wait_for(kube, pods_path(namespace), name, unschedulable, 60)
    time.sleep(2)  # a few more cycles
    pod = check(kube.get(pods_path(namespace, name)))
    assert not bound_node(pod), f"{name} was backfilled with the default hour"


def test_an_annotated_estimate_lets_a_short_pod_backfill_until_its_deadline(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    request: pytest.FixtureRequest,
) -> None:
    start: Callable[..., Gpusched] = request.getfixturevalue("start_gpusched")
    (node,) = (n["metadata"]["name"] for n in gpu_nodes(1, gpus=8))
    start("replica-a")
    reserved_from = reserve_the_node(kube, namespace, node)
    create(kube, namespace, node, "short", 2, annotations={RUNTIME_ESTIMATE_ANNOTATION: "1m"})
    create(kube, namespace, node, "unsure", 2)  # the default hour: past the reservation
    wait_bound(kube, namespace, "short")
    stays_pending(kube, namespace, "unsure")
    job = f"{namespace}/short"
    wait_until("short's deadline in the state", lambda: deadline_of(kube, job) is not None, 20)
    assert deadline_of(kube, job) == reserved_from


def test_a_completed_pod_teaches_the_mean_of_its_user_and_kind(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    request: pytest.FixtureRequest,
) -> None:
    start: Callable[..., Gpusched] = request.getfixturevalue("start_gpusched")
    (node,) = (n["metadata"]["name"] for n in gpu_nodes(1, gpus=8))
    scheduler = start("replica-a")
    alice = {USER_LABEL: f"alice-{uuid.uuid4().hex[:6]}", KIND_LABEL: "inference"}
    create(kube, namespace, node, "first", 1, labels=alice, annotations={RUNTIME_ANNOTATION: "2s"})
    finished = wait_for(
        kube,
        pods_path(namespace),
        "first",
        lambda p: p.get("status", {}).get("phase") == "Succeeded",
        60,
    )
    wait_until(
        "the completion learned",
        lambda: "gpusched_completed_jobs_learned_total 1.0" in scheduler.metrics(),
        20,
    )
    terminated = finished["status"]["containerStatuses"][0]["state"]["terminated"]
    ran = parse_timestamp(terminated["finishedAt"]) - parse_timestamp(
        finished["status"]["startTime"]
    )
    assert 1 <= ran <= 3  # kwok ran it 2 s; the API keeps whole seconds
    reserved_from = reserve_the_node(kube, namespace, node)
    create(kube, namespace, node, "second", 2, labels=alice)  # no estimate: alice's mean
    create(kube, namespace, node, "stranger", 2, labels={**alice, USER_LABEL: "bob"})
    wait_bound(kube, namespace, "second")
    stays_pending(kube, namespace, "stranger")  # bob's inference jobs: no mean, the hour
    job = f"{namespace}/second"
    wait_until("second's deadline in the state", lambda: deadline_of(kube, job) is not None, 20)
    assert deadline_of(kube, job) == reserved_from
