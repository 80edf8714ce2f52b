"""MIG in the live scheduler: ``nvidia.com/mig-<profile>`` pod requests, the node annotation
``gpusched.dev/mig-layout``, the bind annotation ``gpusched.dev/mig`` and bound MIG pods in the
snapshot."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from e2e.kube import node_manifest, pod_manifest
from gpusched.errors import ConfigError
from gpusched.live.snapshot import Assumed, build_snapshot
from gpusched.live.translate import (
    GPU_MILLI_ANNOTATION,
    MIG_ANNOTATION,
    MIG_LAYOUT_ANNOTATION,
    node_from_k8s,
    parse_mig_layout,
)
from gpusched.live.translate_pod import PodInfo, mig_annotation, parse_mig_slices, pod_from_k8s
from gpusched.model import Node
from gpusched.model.mig import MigConfig, MigPlacement, MigSlice
from gpusched.scheduler import build_profile, policy_spec, schedule

SEVEN = ",".join(f"1g.10gb@{s}" for s in range(7))


def mig_node(name: str, layout: str, *, plain: int = 0, **kwargs: Any) -> Node:
    manifest: dict[str, Any] = node_manifest(name, gpus=plain, **kwargs)
    manifest["metadata"]["annotations"][MIG_LAYOUT_ANNOTATION] = layout
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return node_from_k8s(manifest)


def mig_pod(
    name: str,
    resources: dict[str, str],
    *,
    node: str = "",
    annotations: dict[str, str] | None = None,
) -> PodInfo:
    manifest: dict[str, Any] = pod_manifest(name, gpus=0, annotations=annotations)
    manifest["metadata"].update(namespace="ns", uid=f"uid-{name}")
    container = manifest["spec"]["containers"][0]["resources"]
    container["requests"].update(resources)
    container["limits"].update(resources)
    if node:
        manifest["spec"]["nodeName"] = node
        manifest["status"] = {"phase": "Running"}
    return pod_from_k8s(manifest)


# -- pods ------------------------------------------------------------------------------------


def test_mig_request_becomes_profile_and_count() -> None:
    pod = mig_pod("p", {"nvidia.com/mig-1g.10gb": "2"})
    assert (pod.mig_profile, pod.mig_count, pod.num_gpu, pod.problem) == ("1g.10gb", 2, 0, "")
    assert pod.mig is None


@pytest.mark.parametrize(
    ("resources", "annotations", "says"),
    [
        pytest.param({"nvidia.com/mig-5g.99gb": "1"}, {}, "unknown MIG profile", id="unknown"),
        pytest.param(
            {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/gpu": "1"},
            {},
            "MIG instances or whole GPUs, not both",
            id="with-whole-gpu",
        ),
        pytest.param(
            {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-3g.40gb": "1"},
            {},
            "one MIG profile per pod",
            id="two-profiles",
        ),
        pytest.param(
            {"nvidia.com/mig-1g.10gb": "1"},
            {GPU_MILLI_ANNOTATION: "500"},
            "remove the annotation",
            id="with-gpu-milli",
        ),
    ],
)
def test_bad_mig_requests_are_problems(
    resources: dict[str, str], annotations: dict[str, str], says: str
) -> None:
    pod = mig_pod("p", resources, annotations=annotations)
    assert says in pod.problem


def test_mig_annotation_round_trips() -> None:
    slices = (MigSlice(0, "1g.10gb", 6), MigSlice(1, "3g.40gb", 4))
    text = mig_annotation(slices)
    assert text == "0:1g.10gb@6,1:3g.40gb@4"
    assert parse_mig_slices(text) == slices
    assert parse_mig_slices("x:1g.10gb@6") is None
    assert parse_mig_slices("0:1g.10gb") is None
    assert parse_mig_slices(None) is None


def test_bound_pod_reads_its_recorded_instances() -> None:
    pod = mig_pod("p", {"nvidia.com/mig-1g.10gb": "1"}, annotations={MIG_ANNOTATION: "0:1g.10gb@3"})
    assert pod.mig == (MigSlice(0, "1g.10gb", 3),)


# -- nodes -----------------------------------------------------------------------------------


def test_parse_mig_layout() -> None:
    assert parse_mig_layout("0=1g.10gb@0,3g.40gb@4; 2=reconfigurable") == {
        0: MigConfig((MigPlacement("1g.10gb", 0), MigPlacement("3g.40gb", 4))),
        2: MigConfig(reconfigurable=True),
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("0:1g.10gb@0", "expected INDEX=", id="no-equals"),
        pytest.param("0=1g.10gb", "PROFILE@START", id="no-start"),
        pytest.param("0=reconfigurable;0=1g.10gb@0", "named twice", id="twice"),
    ],
)
def test_parse_mig_layout_rejects(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_mig_layout(text)


def test_node_gets_plain_and_mig_gpus() -> None:
    node = mig_node("n", "1=3g.40gb@0,3g.40gb@4;2=reconfigurable", plain=1)
    assert node.gpu_count == 3
    assert node.mig == (
        None,
        MigConfig((MigPlacement("3g.40gb", 0), MigPlacement("3g.40gb", 4))),
        MigConfig(reconfigurable=True),
    )


@pytest.mark.parametrize(
    ("layout", "kwargs"),
    [
        pytest.param("0=1g.10gb@1,2g.20gb@0", {}, id="overlap"),
        pytest.param("3=reconfigurable", {}, id="index-out-of-range"),
        pytest.param("0=nonsense", {}, id="garbage"),
        pytest.param("0=reconfigurable", {"product": "NVIDIA-L4"}, id="not-mig-capable"),
    ],
)
def test_malformed_layout_gives_a_node_without_mig_and_is_logged(
    layout: str, kwargs: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="gpusched.live.translate"):
        node = mig_node(f"bad-{layout}", layout, plain=2, **kwargs)
    assert node.mig == ()
    assert node.gpu_count == 2
    assert MIG_LAYOUT_ANNOTATION in caplog.text


# -- snapshot and bind -----------------------------------------------------------------------


def build(pods: list[PodInfo], node_list: list[Node], **kwargs: Any) -> Any:
    return build_snapshot(node_list, pods, {}, scheduler_name="gpusched", now=1e9, **kwargs)


def test_core_binds_a_mig_pod_on_an_instance_of_the_layout() -> None:
    node = mig_node("n0", f"0={SEVEN}")
    live = build([mig_pod("p", {"nvidia.com/mig-1g.10gb": "2"})], [node])
    plan = schedule(live.snapshot, build_profile(policy_spec("gpusched")))
    (bind,) = plan.binds
    assert bind.gpus == ()
    assert len(bind.mig) == 2
    assert all(sl.gpu == 0 and sl.profile == "1g.10gb" for sl in bind.mig)
    assert len({sl.start for sl in bind.mig}) == 2


def test_bound_mig_pods_hold_their_recorded_instances() -> None:
    node = mig_node("n0", "0=1g.10gb@0,1g.10gb@1")
    ours = mig_pod(
        "ours",
        {"nvidia.com/mig-1g.10gb": "1"},
        node="n0",
        annotations={MIG_ANNOTATION: "0:1g.10gb@1"},
    )
    stale = mig_pod(
        "stale",
        {"nvidia.com/mig-1g.10gb": "1"},
        node="n0",
        annotations={MIG_ANNOTATION: "0:1g.10gb@1"},  # taken: falls back to the free one
    )
    too_many = mig_pod("third", {"nvidia.com/mig-1g.10gb": "1"}, node="n0")
    live = build([ours, stale, too_many], [node])
    mig = live.snapshot.state.mig
    assert mig is not None
    assert mig.in_use(0, 0) == (MigPlacement("1g.10gb", 0), MigPlacement("1g.10gb", 1))
    assert live.overcommitted == ["ns/third"]


def test_assumed_mig_bind_counts_as_bound() -> None:
    node = mig_node("n0", "0=1g.10gb@0,1g.10gb@1")
    p = mig_pod("p", {"nvidia.com/mig-1g.10gb": "1"})
    slices = (MigSlice(0, "1g.10gb", 1),)
    live = build([p], [node], assumed={"ns/p": Assumed("n0", (), 0, p.uid, slices)})
    assert live.snapshot.pending == ()
    mig = live.snapshot.state.mig
    assert mig is not None
    assert mig.in_use(0, 0) == (MigPlacement("1g.10gb", 1),)
