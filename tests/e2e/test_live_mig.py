"""A MIG pod (``nvidia.com/mig-1g.10gb``, the device plugin's mixed strategy) is bound by
``gpusched run`` to a node whose ``gpusched.dev/mig-layout`` annotation lists its instances,
with the instance it chose in the pod's ``gpusched.dev/mig`` annotation."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest

from e2e.kube import create_node, create_pod, is_ready, node_manifest, pod_manifest, wait_for
from e2e.test_live import (  # noqa: F401 - fixtures used by name
    Gpusched,
    bound_node,
    deployed,
    start_gpusched,
    wait_bound,
)

PROFILE = "1g.10gb"
RESOURCE = f"nvidia.com/mig-{PROFILE}"


def test_mig_pod_is_bound_with_its_instance(
    kube: httpx.Client, namespace: str, request: pytest.FixtureRequest
) -> None:
    start: Callable[..., Gpusched] = request.getfixturevalue("start_gpusched")
    name = f"mig-{uuid.uuid4().hex[:5]}"
    node = node_manifest(name, gpus=0, product="NVIDIA-A100-SXM4-80GB", gpu_memory_mib=81920)
    node["metadata"]["annotations"]["gpusched.dev/mig-layout"] = "0=" + ",".join(
        f"{PROFILE}@{s}" for s in range(7)
    )
    node["status"]["capacity"][RESOURCE] = "7"
    create_node(kube, node)
    try:
        wait_for(kube, "/api/v1/nodes", name, is_ready)
        pod = pod_manifest("mig-pod", gpus=0)
        resources = pod["spec"]["containers"][0]["resources"]
        resources["requests"][RESOURCE] = resources["limits"][RESOURCE] = "1"
        create_pod(kube, namespace, pod)
        start("replica-a")
        bound = wait_bound(kube, namespace, "mig-pod")
        assert bound_node(bound) == name
        annotations = bound["metadata"].get("annotations", {})
        assert "gpusched.dev/gpus" not in annotations
        text: str = annotations["gpusched.dev/mig"]
        gpu, _, instance = text.partition(":")
        profile, _, first = instance.partition("@")
        assert (gpu, profile) == ("0", PROFILE)
        assert int(first) in range(7)
    finally:
        kube.delete(f"/api/v1/nodes/{name}")
