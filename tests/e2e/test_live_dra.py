"""DRA (``resource.k8s.io/v1``) whole-GPU claims allocated by gpusched on the real apiserver:
a DeviceClass and ResourceSlices for kwok nodes (as NVIDIA's driver would publish them), then
claims and pods; gpusched writes each claim's allocation and reservation, then binds."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from e2e.conftest import NodeFactory
from e2e.kube import (
    JsonObj,
    check,
    condition,
    create_pod,
    pod_manifest,
    pods_path,
    unschedulable,
    wait_for,
)
from e2e.test_live import (  # noqa: F401 - fixtures used by name
    Gpusched,
    bound_node,
    deployed,
    gpus_of,
    start_gpusched,
    wait_bound,
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ]
    },
}


def resource_slice(node: str, gpus: int) -> JsonObj:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "index": {"int": i},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "uuid": {"string": f"GPU-{node}-{i}"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(name: str, count: int) -> JsonObj:
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def claiming_pod(name: str, claim_name: str) -> JsonObj:
    pod = pod_manifest(name, gpus=0)
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim_name}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return pod


@pytest.fixture
def dra_node(kube: httpx.Client, gpu_nodes: NodeFactory) -> Iterator[str]:
    """A kwok node without nvidia.com/gpu whose 4 GPUs are published as a ResourceSlice."""
    if kube.get(f"{RESOURCE}/deviceclasses/gpu.nvidia.com").status_code == 404:
        check(kube.post(f"{RESOURCE}/deviceclasses", json=GPU_CLASS))
    (node,) = gpu_nodes(1, prefix="dra", gpus=0)
    name = node["metadata"]["name"]
    check(kube.post(f"{RESOURCE}/resourceslices", json=resource_slice(name, 4)))
    yield name
    kube.delete(f"{RESOURCE}/resourceslices/{name}-{DRIVER}")


def test_claims_are_allocated_on_the_chosen_node_and_too_big_ones_wait(
    kube: httpx.Client,
    namespace: str,
    dra_node: str,
    request: pytest.FixtureRequest,
) -> None:
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    for name, count in (("two-a", 2), ("two-b", 2), ("eight", 8)):
        check(kube.post(claims, json=claim(name, count)))
    for name, claim_name in (("a", "two-a"), ("b", "two-b"), ("big", "eight")):
        create_pod(kube, namespace, claiming_pod(name, claim_name))
    start: Callable[..., Gpusched] = request.getfixturevalue("start_gpusched")
    start("replica-a")

    devices: list[str] = []
    for pod_name, claim_name in (("a", "two-a"), ("b", "two-b")):
        pod = wait_bound(kube, namespace, pod_name)
        assert bound_node(pod) == dra_node
        allocated = check(kube.get(f"{claims}/{claim_name}"))
        status = allocated["status"]
        results = status["allocation"]["devices"]["results"]
        assert [r["driver"] for r in results] == [DRIVER, DRIVER]
        assert {r["pool"] for r in results} == {dra_node}
        assert {r["request"] for r in results} == {"gpus"}
        names = [r["device"] for r in results]
        assert names == [f"gpu-{i}" for i in gpus_of(pod)]  # the annotation names the same GPUs
        devices.extend(names)
        terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == [dra_node]
        assert status["reservedFor"] == [
            {"resource": "pods", "name": pod_name, "uid": pod["metadata"]["uid"]}
        ]
        assert "resource.kubernetes.io/delete-protection" in allocated["metadata"]["finalizers"]
    assert sorted(devices) == [f"gpu-{i}" for i in range(4)], "a device was allocated twice"

    big = wait_for(kube, pods_path(namespace), "big", unschedulable, 60)
    assert not bound_node(big)
    message = (condition(big, "PodScheduled") or {})["message"]
    # The node's 4 DRA devices are its GPUs: 8 can never fit there.
    assert "1/1 nodes have fewer than 8 GPU(s)" in message, message
    assert "(best node: 4)" in message, message
    assert "allocation" not in check(kube.get(f"{claims}/eight")).get("status", {})


def test_a_claim_of_a_class_gpusched_cannot_allocate_says_so(
    kube: httpx.Client,
    namespace: str,
    dra_node: str,
    request: pytest.FixtureRequest,
) -> None:
    other = f"other-{uuid.uuid4().hex[:5]}.example.com"
    check(
        kube.post(
            f"{RESOURCE}/deviceclasses",
            json={
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": other},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'nic.example'"}}]},
            },
        )
    )
    try:
        body = claim("nic", 1)
        body["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = other
        check(kube.post(f"{RESOURCE}/namespaces/{namespace}/resourceclaims", json=body))
        create_pod(kube, namespace, claiming_pod("wants-nic", "nic"))
        create_pod(kube, namespace, pod_manifest("plain", gpus=0))
        start: Callable[..., Gpusched] = request.getfixturevalue("start_gpusched")
        start("replica-a")
        wait_bound(kube, namespace, "plain")
        pod = wait_for(kube, pods_path(namespace), "wants-nic", unschedulable, 60)
        message = (condition(pod, "PodScheduled") or {})["message"]
        assert f"DeviceClass '{other}' is not a GPU class" in message, message
    finally:
        kube.delete(f"{RESOURCE}/deviceclasses/{other}")
