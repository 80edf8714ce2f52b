"""The test control plane itself: TLS and RBAC are real, kwok runs fake GPU nodes, the Binding
subresource behaves as the live scheduler relies on, and kube-scheduler binds as a comparison."""

from __future__ import annotations

import ssl
import time

import httpx
import pytest

from e2e.conftest import NodeFactory
from e2e.controlplane import ControlPlane
from e2e.kube import GPU, bind, check, pod_manifest, pods_path, wait_for


def test_tls_and_rbac_are_enforced(control_plane: ControlPlane) -> None:
    # No client certificate: anonymous auth is off, so 401.
    verify = ssl.create_default_context(cafile=str(control_plane.ca_cert))
    with httpx.Client(base_url=control_plane.url, verify=verify) as plain:
        assert plain.get("/api/v1/pods").status_code == 401
    # A valid certificate for a user without any role: authenticated, then forbidden by RBAC.
    with control_plane.client(control_plane.user("nobody")) as nobody:
        response = nobody.get("/api/v1/pods")
        assert response.status_code == 403
        assert 'User "nobody" cannot list resource "pods"' in response.json()["message"]


def test_kwok_node_is_ready_with_gpu_capacity(gpu_nodes: NodeFactory) -> None:
    (node,) = gpu_nodes(1, gpus=8, product="NVIDIA-H100-80GB-HBM3")
    assert node["status"]["allocatable"][GPU] == "8"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_binding_subresource_binds_once_and_kwok_runs_the_pod(
    kube: httpx.Client, namespace: str, gpu_nodes: NodeFactory
) -> None:
    (node,) = gpu_nodes(1)
    node_name = node["metadata"]["name"]
    pod = check(kube.post(pods_path(namespace), json=pod_manifest("p0", gpus=2)))
    uid = pod["metadata"]["uid"]

    # Nobody serves schedulerName "gpusched" yet: the pod waits.
    assert pod["spec"].get("nodeName") is None

    response = bind(kube, namespace, "p0", uid, node_name)
    assert response.status_code == 201, response.text
    status = response.json()
    assert status["kind"] == "Status"  # not a Pod: why typed clients fail to decode it
    assert status["status"] == "Success"

    running = wait_for(
        kube, pods_path(namespace), "p0", lambda p: p["status"].get("phase") == "Running"
    )
    assert running["spec"]["nodeName"] == node_name

    # A second bind is a conflict, never a move.
    again = bind(kube, namespace, "p0", uid, node_name)
    assert again.status_code == 409


@pytest.mark.parametrize(
    "uid",
    [
        pytest.param("00000000-0000-0000-0000-000000000000", id="stale-uid-after-recreate"),
    ],
)
def test_binding_with_wrong_uid_is_refused(
    kube: httpx.Client, namespace: str, gpu_nodes: NodeFactory, uid: str
) -> None:
    (node,) = gpu_nodes(1)
    check(kube.post(pods_path(namespace), json=pod_manifest("p1")))
    response = bind(kube, namespace, "p1", uid, node["metadata"]["name"])
    assert response.status_code == 409, response.text
    assert "Precondition failed" in response.json()["message"]
    pod = check(kube.get(pods_path(namespace, "p1")))
    assert pod["spec"].get("nodeName") is None


def test_kube_scheduler_binds_a_gpu_pod(
    control_plane: ControlPlane, kube: httpx.Client, namespace: str, gpu_nodes: NodeFactory
) -> None:
    nodes = gpu_nodes(2, gpus=4)
    scheduler = control_plane.start_kube_scheduler()
    try:
        manifest = pod_manifest("ks0", gpus=3, scheduler="default-scheduler")
        check(kube.post(pods_path(namespace), json=manifest))
        bound = wait_for(
            kube,
            pods_path(namespace),
            "ks0",
            lambda p: bool(p["spec"].get("nodeName")),
            timeout_s=60,
        )
        assert bound["spec"]["nodeName"] in {n["metadata"]["name"] for n in nodes}
    finally:
        scheduler.stop()


def test_kwok_completes_a_pod_after_its_annotated_runtime(
    kube: httpx.Client, namespace: str, gpu_nodes: NodeFactory
) -> None:
    (node,) = gpu_nodes(1)
    manifest = pod_manifest("job", annotations={"gpusched.dev/kwok-runtime": "2s"})
    pod = check(kube.post(pods_path(namespace), json=manifest))
    started = time.monotonic()
    assert bind(kube, namespace, "job", pod["metadata"]["uid"], node["metadata"]["name"]).is_success
    done = wait_for(
        kube, pods_path(namespace), "job", lambda p: p["status"].get("phase") == "Succeeded", 30
    )
    took = time.monotonic() - started
    assert 2 <= took < 15, f"completed after {took:.1f} s; the annotation says 2 s"
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
