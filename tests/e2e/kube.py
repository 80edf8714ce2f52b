"""Small helpers the e2e tests use to talk to the apiserver: manifests, create, bind, watch.

Plain JSON over httpx, no typed client: the tests check what goes over the wire (the Binding
subresource answers with a ``Status``, which typed clients fail to decode after the bind has
already happened; see ``../shared/reference/kubernetes.md``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

JsonObj = dict[str, Any]

GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class ApiError(RuntimeError):
    """A request the apiserver refused, with its status code and message."""

    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        try:
            self.body: JsonObj = response.json()
        except ValueError:
            self.body = {"message": response.text}
        super().__init__(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {self.body.get('message', '')}"
        )


def check(response: httpx.Response) -> JsonObj:
    if response.status_code >= 300:
        raise ApiError(response)
    result: JsonObj = response.json()
    return result


def node_manifest(
    name: str,
    *,
    gpus: int = 8,
    product: str = "NVIDIA-A100-SXM4-80GB",
    gpu_memory_mib: int = 81920,
    cpu: str = "96",
    memory: str = "1024Gi",
    labels: dict[str, str] | None = None,
) -> JsonObj:
    """A kwok-managed fake node with ``gpus`` GPUs as the device plugin and GFD would show it."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                PRODUCT_LABEL: product,
                MEMORY_LABEL: str(gpu_memory_mib),
                "nvidia.com/gpu.count": str(gpus),
                **(labels or {}),
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod_manifest(
    name: str,
    *,
    gpus: int = 1,
    cpu: str = "1",
    memory: str = "4Gi",
    scheduler: str = "gpusched",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str = "",
) -> JsonObj:
    requests = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    pod: JsonObj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/train:1",
                    "resources": {"requests": requests, "limits": limits},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }
    if priority_class:
        pod["spec"]["priorityClassName"] = priority_class
    return pod


def pods_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def create_pod(http: httpx.Client, namespace: str, manifest: JsonObj) -> JsonObj:
    return check(http.post(pods_path(namespace), json=manifest))


def create_namespace(http: httpx.Client, name: str) -> None:
    """A namespace and its ``default`` ServiceAccount (no controller-manager creates it)."""
    check(http.post("/api/v1/namespaces", json={"metadata": {"name": name}}))
    check(
        http.post(
            f"/api/v1/namespaces/{name}/serviceaccounts", json={"metadata": {"name": "default"}}
        )
    )


def delete_namespace(http: httpx.Client, name: str) -> None:
    """Delete the namespace and its pods (no controller-manager empties a deleted namespace)."""
    http.delete(f"/api/v1/namespaces/{name}/pods", params={"gracePeriodSeconds": "0"})
    http.delete(f"/api/v1/namespaces/{name}")


def ensure_priority_class(http: httpx.Client, name: str, value: int) -> None:
    """Create the PriorityClass unless it exists (it is cluster-scoped: tests share it)."""
    if http.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}").status_code == 404:
        check(
            http.post(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                json={"metadata": {"name": name}, "value": value},
            )
        )


def create_node(http: httpx.Client, manifest: JsonObj) -> JsonObj:
    """Create a node with its status (a Node create keeps the status, as kubelets rely on);
    kwok's node-initialize stage then adds conditions and keeps the capacity."""
    return check(http.post("/api/v1/nodes", json=manifest))


def bind(http: httpx.Client, namespace: str, pod: str, uid: str, node: str) -> httpx.Response:
    """POST the Binding subresource (raw: the answer is a Status, not a Pod)."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return http.post(f"{pods_path(namespace, pod)}/binding", json=body)


def watch(
    http: httpx.Client,
    path: str,
    resource_version: str,
    timeout_s: float,
    field_selector: str = "",
) -> Iterator[JsonObj]:
    """The watch events on ``path`` from ``resource_version``, for at most ``timeout_s``."""
    params = {
        "fieldSelector": field_selector,
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(max(1, int(timeout_s))),
    }
    with http.stream("GET", path, params=params, timeout=timeout_s + 10) as response:
        if response.status_code >= 300:
            response.read()
            raise ApiError(response)
        for line in response.iter_lines():
            if line:
                yield json.loads(line)


def wait_for(
    http: httpx.Client,
    collection: str,
    name: str,
    predicate: Callable[[JsonObj], bool],
    timeout_s: float = 30.0,
) -> JsonObj:
    """Watch one object (by field selector on ``collection``) until ``predicate`` holds."""
    deadline = time.monotonic() + timeout_s
    listing = check(http.get(collection, params={"fieldSelector": f"metadata.name={name}"}))
    items: list[JsonObj] = listing["items"]
    for item in items:
        if predicate(item):
            return item
    rv = listing["metadata"]["resourceVersion"]
    last: JsonObj = listing["items"][0] if listing["items"] else {}
    while (left := deadline - time.monotonic()) > 0:
        for event in watch(http, collection, rv, left, f"metadata.name={name}"):
            obj: JsonObj = event["object"]
            rv = obj["metadata"].get("resourceVersion", rv)
            if event["type"] in ("ADDED", "MODIFIED"):
                last = obj
                if predicate(obj):
                    return obj
            if time.monotonic() > deadline:
                break
    raise TimeoutError(
        f"{name} in {collection}: condition not met in {timeout_s:.0f} s; last seen: "
        + json.dumps(last.get("status", {}))[:1000]
    )


def condition(obj: JsonObj, kind: str) -> JsonObj | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: JsonObj = cond
            return found
    return None


def unschedulable(pod: JsonObj) -> bool:
    """The pod's PodScheduled condition says Unschedulable (the scheduler gave up, for now)."""
    return (condition(pod, "PodScheduled") or {}).get("reason") == "Unschedulable"


def is_ready(obj: JsonObj) -> bool:
    cond = condition(obj, "Ready")
    return cond is not None and cond.get("status") == "True"
