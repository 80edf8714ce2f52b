"""Kubernetes objects into gpusched values: quantities, nodes (GFD labels), pods (requests,
annotations, constraints), pod groups."""

from __future__ import annotations

from decimal import Decimal

import pytest

from e2e.kube import node_manifest, pod_manifest
from gpusched.live.translate import GPU_MILLI_ANNOTATION, node_from_k8s, parse_quantity
from gpusched.live.translate_pod import pod_from_k8s
from gpusched.live.translate_podgroup import podgroup_from_k8s
from gpusched.model import Effect, Operator, Taint


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("2", Decimal(2), id="plain"),
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("1k", Decimal(1000), id="kilo-decimal"),
        pytest.param("80Gi", Decimal(80 * 2**30), id="gibi"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("1.5Mi", Decimal(int(1.5 * 2**20)), id="fraction-with-binary-suffix"),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "two", "5 Gi", "1Zi"])
def test_parse_quantity_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def ready(manifest: dict[str, object]) -> dict[str, object]:
    status = manifest["status"]
    assert isinstance(status, dict)
    status["conditions"] = [{"type": "Ready", "status": "True"}]
    return manifest


def test_node_gpus_from_capacity_and_gfd_labels() -> None:
    node = node_from_k8s(
        ready(node_manifest("n1", gpus=8, product="NVIDIA-H100-80GB-HBM3", cpu="96"))
    )
    assert node.name == "n1"
    assert node.cpu_milli == 96_000
    assert node.memory_mib == 1024 * 1024
    assert node.gpu_count == 8
    assert node.gpu_model == "NVIDIA-H100-80GB-HBM3"
    assert node.gpus[0].memory_mib == 81920
    assert node.taints == ()


def test_cordoned_or_not_ready_node_is_tainted() -> None:
    manifest = node_manifest("n1")  # no Ready condition yet
    manifest["spec"] = {"unschedulable": True}
    node = node_from_k8s(manifest)
    assert Taint("node.kubernetes.io/unschedulable") in node.taints
    assert Taint("node.kubernetes.io/not-ready") in node.taints


def test_pod_requests_sum_containers_and_take_max_of_init() -> None:
    manifest = pod_manifest("p", gpus=2, cpu="1500m", memory="2Gi")
    spec = manifest["spec"]
    spec["containers"].append(
        {"name": "side", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    )
    spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    manifest["metadata"].update(namespace="ns", uid="u1")
    pod = pod_from_k8s(manifest)
    assert (pod.cpu_milli, pod.memory_mib) == (4000, 3072)  # max(1.5 + 0.5, 4) cores; 2+1 GiB
    assert (pod.num_gpu, pod.gpu_milli) == (2, 1000)
    assert pod.key == "ns/p"
    assert pod.problem == ""


def test_fractional_gpu_annotation() -> None:
    manifest = pod_manifest("p", gpus=0, annotations={GPU_MILLI_ANNOTATION: "250"})
    pod = pod_from_k8s(manifest)
    assert (pod.num_gpu, pod.gpu_milli) == (1, 250)


@pytest.mark.parametrize(
    ("gpus", "share", "says"),
    [
        pytest.param(0, "half", "expected an integer share of one GPU from 1 to 999", id="text"),
        pytest.param(0, "1000", "from 1 to 999", id="whole-gpu-as-share"),
        pytest.param(2, "500", "must not also request nvidia.com/gpu", id="both-share-and-count"),
    ],
)
def test_malformed_gpu_annotation_is_a_problem_not_an_error(
    gpus: int, share: str, says: str
) -> None:
    pod = pod_from_k8s(pod_manifest("p", gpus=gpus, annotations={GPU_MILLI_ANNOTATION: share}))
    assert says in pod.problem


def test_pod_constraints() -> None:
    manifest = pod_manifest("p")
    manifest["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "H100"}
    manifest["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    manifest["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    c = pod_from_k8s(manifest).constraints
    assert c.node_selector == (("nvidia.com/gpu.product", "H100"),)
    assert c.tolerations[0].operator is Operator.EXISTS
    assert c.tolerations[0].effect is Effect.NO_SCHEDULE
    assert c.selects({"nvidia.com/gpu.product": "H100", "zone": "a"})
    assert not c.selects({"nvidia.com/gpu.product": "H100", "zone": "b"})


def test_podgroup() -> None:
    group = podgroup_from_k8s(
        {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 4}}
    )
    assert (group.key, group.min_member) == ("ns/g", 4)
