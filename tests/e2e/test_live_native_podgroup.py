"""Native ``scheduling.k8s.io/v1alpha2`` PodGroups, on a control plane of its own started with
``--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha2=true``
(the default fixture stays without them). gpusched finds the API by discovery at start."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from e2e.controlplane import REPO, ControlPlane, binaries
from e2e.kube import (
    JsonObj,
    check,
    condition,
    create_namespace,
    create_node,
    create_pod,
    is_ready,
    node_manifest,
    pod_manifest,
    pods_path,
    unschedulable,
    wait_for,
)
from e2e.test_live import SYSTEM_NS, Gpusched, bound_node, wait_bound

NATIVE = "/apis/scheduling.k8s.io/v1alpha2"
GATES = (
    "--feature-gates=GenericWorkload=true",
    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
)


@pytest.fixture(scope="module")
def native_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    build = bool(os.environ.get("CI")) or os.environ.get("GPUSCHED_E2E_BUILD", "1") != "0"
    plane = ControlPlane(binaries(build=build), tmp_path_factory.mktemp("native-plane"))
    plane.start(apiserver_args=GATES)
    yield plane
    plane.stop()


def _deploy(plane: ControlPlane) -> Path:
    """Install deploy/ and return a kubeconfig with the gpusched ServiceAccount's token."""
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "gpusched.yaml"))
    with plane.client() as admin:
        token = check(
            admin.post(
                f"/api/v1/namespaces/{SYSTEM_NS}/serviceaccounts/gpusched/token",
                json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
            )
        )["status"]["token"]
    return plane.write_kubeconfig("gpusched-sa", token=token)


@pytest.fixture
def native_gpusched(native_plane: ControlPlane) -> Iterator[Callable[[], Gpusched]]:
    kubeconfig = _deploy(native_plane)
    started: list[Gpusched] = []

    def start() -> Gpusched:
        log = native_plane.workdir / f"gpusched-{uuid.uuid4().hex[:6]}.log"
        native_plane.extra_logs.append(log)
        started.append(Gpusched(kubeconfig, log, "native-a"))
        return started[-1]

    yield start
    for scheduler in started:
        assert scheduler.stop() == 0


def member(name: str, group: str) -> JsonObj:
    pod = pod_manifest(name, gpus=2)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


def test_native_gang_waits_for_min_count_then_binds_whole(
    native_plane: ControlPlane, native_gpusched: Callable[[], Gpusched]
) -> None:
    with native_plane.client() as kube:
        assert "podgroups" in {r["name"] for r in check(kube.get(NATIVE))["resources"]}
        ns = f"native-{uuid.uuid4().hex[:6]}"
        create_namespace(kube, ns)
        node = node_manifest(f"native-gpu-{uuid.uuid4().hex[:5]}", gpus=8)
        create_node(kube, node)
        wait_for(kube, "/api/v1/nodes", node["metadata"]["name"], is_ready)
        group = {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "train"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        }
        check(kube.post(f"{NATIVE}/namespaces/{ns}/podgroups", json=group))
        for i in range(2):
            create_pod(kube, ns, member(f"w{i}", "train"))
        native_gpusched()

        waiting = wait_for(kube, pods_path(ns), "w0", unschedulable, 60)
        message = (condition(waiting, "PodScheduled") or {})["message"]
        assert "needs spec.schedulingPolicy.gang.minCount=3 pods; 2 exist" in message

        def reported(obj: JsonObj) -> bool:
            return (condition(obj, "PodGroupScheduled") or {}).get("status") == "False"

        podgroup = wait_for(kube, f"{NATIVE}/namespaces/{ns}/podgroups", "train", reported, 30)
        assert "minCount=3" in (condition(podgroup, "PodGroupScheduled") or {})["message"]
        events = check(kube.get(f"/api/v1/namespaces/{ns}/events"))["items"]
        assert any(
            e["reason"] == "InvalidPodGroup" and e["involvedObject"]["kind"] == "PodGroup"
            for e in events
        )
        assert not any(bound_node(p) for p in check(kube.get(pods_path(ns)))["items"])

        create_pod(kube, ns, member("w2", "train"))
        for i in range(3):
            wait_bound(kube, ns, f"w{i}")
        kube.delete(pods_path(ns), params={"gracePeriodSeconds": "0"})
        kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")


def test_default_control_plane_does_not_serve_the_native_api(kube: httpx.Client) -> None:
    """The default fixture is unchanged: without the gates there is no v1alpha2 to discover."""
    assert kube.get(NATIVE).status_code == 404
