"""``gpusched run`` against the real control plane, installed from ``deploy/`` as a user would.

The manifests are applied with ``kubectl apply --server-side``; the scheduler then runs as a
local process (kwok nodes run no containers) with the token of the ServiceAccount the manifests
create, so every request it makes passes the least-privilege ClusterRole for real.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from e2e.conftest import NodeFactory
from e2e.controlplane import REPO, ControlPlane, free_port, wait_until
from e2e.kube import (
    POD_GROUP_LABEL,
    JsonObj,
    check,
    condition,
    create_pod,
    ensure_priority_class,
    pod_manifest,
    pods_path,
    unschedulable,
    wait_for,
)

SYSTEM_NS = "gpusched-system"


@pytest.fixture(scope="session")
def deployed(control_plane: ControlPlane) -> Path:
    """Install deploy/ server-side; return a kubeconfig holding the gpusched SA's token."""
    control_plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=60s"
    )
    control_plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "gpusched.yaml"))
    with control_plane.client() as admin:
        token = check(
            admin.post(
                f"/api/v1/namespaces/{SYSTEM_NS}/serviceaccounts/gpusched/token",
                json={
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 86400},
                },
            )
        )["status"]["token"]
    return control_plane.write_kubeconfig("gpusched-sa", token=token)


class Gpusched:
    """A ``gpusched run`` process and its log."""

    def __init__(self, kubeconfig: Path, log: Path, identity: str, *extra: str) -> None:
        self.metrics_port = free_port()
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from gpusched.cli.main import main; main()",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--identity",
                identity,
                "--metrics-address",
                f"127.0.0.1:{self.metrics_port}",
                *extra,
            ],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture
def start_gpusched(
    deployed: Path, control_plane: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Gpusched]]:
    started: list[Gpusched] = []

    def start(identity: str = "replica-a", *extra: str) -> Gpusched:
        log = control_plane.workdir / f"gpusched-{request.node.name}-{identity}.log"
        scheduler = Gpusched(deployed, log, identity, *extra)
        started.append(scheduler)
        control_plane.extra_logs.append(log)
        return scheduler

    yield start
    codes = [scheduler.stop() for scheduler in started if scheduler.process.poll() is None]
    # Logs stay in failure reports of this test's teardown when the shutdown was not clean.
    assert all(code == 0 for code in codes), (
        f"gpusched exit codes {codes} after SIGTERM (expected 0, a graceful shutdown)"
    )
    for scheduler in started:
        control_plane.extra_logs.remove(scheduler.log)


def bound_node(pod: JsonObj) -> str:
    return str(pod["spec"].get("nodeName") or "")


def wait_bound(http: httpx.Client, namespace: str, name: str, timeout_s: float = 60) -> JsonObj:
    """Wait until pod ``name`` is bound to a node; return it."""
    return wait_for(http, pods_path(namespace), name, lambda p: bool(bound_node(p)), timeout_s)


def gpus_of(pod: JsonObj) -> list[int]:
    text = pod["metadata"].get("annotations", {}).get("gpusched.dev/gpus", "")
    return [int(g) for g in text.split(",")] if text else []


def podgroup(namespace: str, name: str, min_member: int) -> JsonObj:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


def create_podgroup(kube: httpx.Client, namespace: str, name: str, min_member: int) -> None:
    check(
        kube.post(
            f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
            json=podgroup(namespace, name, min_member),
        )
    )


def list_pods(kube: httpx.Client, namespace: str) -> list[JsonObj]:
    items: list[JsonObj] = check(kube.get(pods_path(namespace)))["items"]
    return items


def test_manifests_install_and_grant_least_privilege(
    control_plane: ControlPlane, deployed: Path
) -> None:
    with control_plane.client() as admin:
        deployment = check(admin.get(f"/apis/apps/v1/namespaces/{SYSTEM_NS}/deployments/gpusched"))
        assert deployment["spec"]["replicas"] == 2
    (token,) = _kubeconfig_tokens(deployed)
    with httpx.Client(
        base_url=control_plane.url,
        verify=ssl.create_default_context(cafile=str(control_plane.ca_cert)),
        headers={"Authorization": f"Bearer {token}"},
    ) as sa:
        assert sa.get("/api/v1/pods").status_code == 200
        assert sa.get("/api/v1/nodes").status_code == 200
        assert sa.get("/api/v1/secrets").status_code == 403
        assert sa.delete("/api/v1/namespaces/default/pods/x").status_code == 403
        lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
        assert sa.post(lease, json={"metadata": {"name": "x"}}).status_code == 403
        # The carried state's ConfigMap, and no other (create cannot be limited by name).
        maps = f"/api/v1/namespaces/{SYSTEM_NS}/configmaps"
        assert sa.get(f"{maps}/gpusched-state").status_code in (200, 404)
        assert sa.get(f"{maps}/gpusched-profile").status_code == 403
        assert sa.get(maps).status_code == 403
        dry = {"dryRun": "All"}
        made = sa.post(maps, params=dry, json={"metadata": {"name": "gpusched-state-new"}})
        assert made.status_code == 201
        elsewhere = "/api/v1/namespaces/default/configmaps"
        assert sa.post(elsewhere, params=dry, json={"metadata": {"name": "x"}}).status_code == 403


def _kubeconfig_tokens(path: Path) -> list[str]:
    return [u["user"]["token"] for u in json.loads(path.read_text())["users"]]


def test_plain_pods_are_bound_with_gpu_indices(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    nodes = {n["metadata"]["name"] for n in gpu_nodes(2, gpus=8)}
    for i in range(6):
        create_pod(kube, namespace, pod_manifest(f"p{i}", gpus=2))
    scheduler = start_gpusched("replica-a")
    for i in range(6):
        wait_bound(kube, namespace, f"p{i}")
    used: dict[str, list[int]] = {}
    for pod in list_pods(kube, namespace):
        assert bound_node(pod) in nodes
        assert len(gpus_of(pod)) == 2
        used.setdefault(bound_node(pod), []).extend(gpus_of(pod))
    for indices in used.values():
        assert len(indices) == len(set(indices)), f"a GPU was given twice: {used}"
    wait_until(
        "binds in /metrics",
        lambda: 'gpusched_binds_total{result="bound"} 6.0' in scheduler.metrics(),
        10,
    )


def test_gang_of_four_is_bound_all_together(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(2, gpus=8)
    start_gpusched("replica-a")
    create_podgroup(kube, namespace, "train", 4)
    # The members arrive one by one: nothing may be bound before the fourth exists.
    for i in range(3):
        create_pod(
            kube, namespace, pod_manifest(f"w{i}", gpus=4, labels={POD_GROUP_LABEL: "train"})
        )
    time.sleep(3)
    assert not any(bound_node(p) for p in list_pods(kube, namespace))
    waiting = wait_for(kube, pods_path(namespace), "w0", unschedulable, 30)
    assert "minMember=4" in (condition(waiting, "PodScheduled") or {})["message"]
    create_pod(kube, namespace, pod_manifest("w3", gpus=4, labels={POD_GROUP_LABEL: "train"}))
    for i in range(4):
        wait_bound(kube, namespace, f"w{i}")


def test_gang_that_does_not_fit_stays_pending_and_says_why(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(2, gpus=8)
    create_podgroup(kube, namespace, "big", 4)
    for i in range(4):
        create_pod(kube, namespace, pod_manifest(f"b{i}", gpus=8, labels={POD_GROUP_LABEL: "big"}))
    scheduler = start_gpusched("replica-a")
    for i in range(4):
        pod = wait_for(kube, pods_path(namespace), f"b{i}", unschedulable, 60)
        scheduled = condition(pod, "PodScheduled") or {}
        assert scheduled["status"] == "False"
        assert "the gang of 4 tasks cannot fit together" in scheduled["message"]
    time.sleep(2)
    assert not any(bound_node(p) for p in list_pods(kube, namespace)), "partial gang placed"
    events = check(kube.get(f"/api/v1/namespaces/{namespace}/events"))["items"]
    assert any(e["reason"] == "FailedScheduling" for e in events)
    # The four pods are counted under the cause that keeps them: the nodes (never enough).
    wait_until(
        "the cause in /metrics",
        lambda: 'gpusched_unschedulable_pods_by_cause{cause="nodes"} 4.0' in scheduler.metrics(),
        10,
    )


def test_malformed_annotation_is_reported_on_the_pod_and_others_are_served(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(1, gpus=8)
    bad = pod_manifest("bad", gpus=0, annotations={"gpusched.dev/gpu-milli": "half"})
    create_pod(kube, namespace, bad)
    create_pod(kube, namespace, pod_manifest("good", gpus=1))
    start_gpusched("replica-a")
    wait_bound(kube, namespace, "good")
    pod = wait_for(kube, pods_path(namespace), "bad", unschedulable, 60)
    message = (condition(pod, "PodScheduled") or {})["message"]
    assert "annotation gpusched.dev/gpu-milli: got 'half'" in message
    assert not bound_node(pod)


def test_standby_takes_over_when_the_leader_is_killed(
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(1, gpus=8)
    first = start_gpusched("replica-a")
    create_pod(kube, namespace, pod_manifest("before", gpus=1))
    wait_bound(kube, namespace, "before")
    second = start_gpusched("replica-b")
    time.sleep(3)
    # On two busy cores the second process may still be starting; wait for its /metrics.
    wait_until("the standby's /metrics", lambda: bool(second.metrics()), 30)
    assert "gpusched_is_leader 0.0" in second.metrics()  # a standby schedules nothing

    first.process.kill()  # no graceful release: the standby must wait the lease out
    killed_at = time.monotonic()
    first.process.wait()
    create_pod(kube, namespace, pod_manifest("after", gpus=1))
    wait_bound(kube, namespace, "after")
    took = time.monotonic() - killed_at
    assert took < 15 + 2 + 3, f"standby took {took:.1f} s to take over"  # lease + retry + cycle
    lease = check(kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/gpusched"))
    assert lease["spec"]["holderIdentity"] == "replica-b"
    pods = list_pods(kube, namespace)
    gpus = [g for p in pods for g in gpus_of(p)]
    assert len(gpus) == len(set(gpus)) == 2


PREEMPT_NOW_PROFILE = """
name: gpusched-preempt-now
actions: [backfill, reclaim, preempt]
queue_sort: fair-share
filters: [{name: node-resources-fit}, {name: gpu-model}, {name: node-constraints}]
scores: [{name: fgd}]
gpu_picker: {name: fgd}
action_args: {preempt: {min_runtime_s: 0}}
"""
#: A PriorityClass above the default 0: its pods may preempt (``ensure_priority_class``).
HIGH = "gpusched-e2e-high"


def preempt_now_profile(plane: ControlPlane, filename: str) -> Path:
    """:data:`PREEMPT_NOW_PROFILE` written to ``filename`` in the plane's work folder."""
    profile = plane.workdir / filename
    profile.write_text(PREEMPT_NOW_PROFILE)
    return profile


def test_higher_priority_pod_preempts_through_the_eviction_api(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    ensure_priority_class(kube, HIGH, 1000)
    profile = preempt_now_profile(control_plane, "preempt-now.yaml")
    gpu_nodes(1, gpus=8)
    scheduler = start_gpusched("replica-a", "--profile", str(profile))
    for i in range(8):
        create_pod(kube, namespace, pod_manifest(f"low{i}", gpus=1))
    created: dict[str, dt.datetime] = {}  # each victim's submission, as the API states it
    for i in range(8):
        stamp = wait_bound(kube, namespace, f"low{i}")["metadata"]["creationTimestamp"]
        created[f"{namespace}/low{i}"] = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    create_pod(kube, namespace, pod_manifest("high", gpus=8, priority_class=HIGH))
    bound = wait_bound(kube, namespace, "high")
    assert sorted(gpus_of(bound)) == list(range(8))
    left = [p["metadata"]["name"] for p in list_pods(kube, namespace)]
    assert left == ["high"], f"victims still there: {left}"
    events = check(kube.get(f"/api/v1/namespaces/{namespace}/events"))["items"]
    assert sum(e["reason"] == "Preempted" for e in events) == 8
    # The evictions are in the carried state's ConfigMap, written under the deployed RBAC.
    state = f"/api/v1/namespaces/{SYSTEM_NS}/configmaps/gpusched-state"
    victims = {f"{namespace}/low{i}" for i in range(8)}

    def stored(section: str = "evictedBy") -> dict[str, JsonObj]:
        found = kube.get(state)
        if found.status_code != 200:
            return {}
        doc = json.loads(found.json()["data"]["state.json"])
        entries: dict[str, JsonObj] = doc.get(section, {})
        return {job: entry for job, entry in entries.items() if job in victims}

    wait_until("the evictions stored", lambda: len(stored()) == 8, 30)
    assert all(entry["by"] == [f"{namespace}/high"] for entry in stored().values())
    # With each victim's first submission, which a re-created pod's creation time would hide,
    # and its disruptions, which the disruption budget counts.
    assert {job: e["submitted"] for job, e in stored().items()} == {
        job: when.timestamp() for job, when in created.items()
    }
    assert stored("disrupted") == {job: {"evictions": 1, "moves": 0} for job in victims}
    assert "could not write the carried state" not in scheduler.log.read_text()


def test_scheduler_recovers_when_the_apiserver_restarts(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    start_gpusched: Callable[..., Gpusched],
) -> None:
    gpu_nodes(1, gpus=8)
    start_gpusched("replica-a")
    create_pod(kube, namespace, pod_manifest("before", gpus=4))
    wait_bound(kube, namespace, "before")

    control_plane.restart_apiserver()  # every watch and connection breaks

    with control_plane.client() as fresh:
        create_pod(fresh, namespace, pod_manifest("after", gpus=4))
        wait_bound(fresh, namespace, "after")
        gpus = [g for p in list_pods(fresh, namespace) for g in gpus_of(p)]
    assert sorted(gpus) == list(range(8)), f"GPU indices after the restart: {gpus}"
