"""From cached pods, nodes and pod groups to a Snapshot, and one cycle of the real core on it."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.kube import POD_GROUP_LABEL, node_manifest, pod_manifest
from gpusched.live.snapshot import Assumed, build_snapshot
from gpusched.live.snapshot_jobs import SnapshotMemo
from gpusched.live.translate import GPUS_ANNOTATION, node_from_k8s
from gpusched.live.translate_pod import PodInfo, pod_from_k8s
from gpusched.live.translate_podgroup import PodGroupInfo
from gpusched.model import Node
from gpusched.scheduler import build_profile, policy_spec, schedule


def nodes(count: int, gpus: int = 8) -> list[Node]:
    out = []
    for i in range(count):
        manifest: dict[str, Any] = node_manifest(f"n{i}", gpus=gpus)
        manifest["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        out.append(node_from_k8s(manifest))
    return out


def pod(
    name: str,
    *,
    gpus: int = 1,
    group: str = "",
    node: str = "",
    scheduler: str = "gpusched",
    annotations: dict[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> PodInfo:
    manifest: dict[str, Any] = pod_manifest(
        name,
        gpus=gpus,
        scheduler=scheduler,
        labels={POD_GROUP_LABEL: group} if group else {},
        annotations=annotations,
    )
    manifest["metadata"].update(namespace="ns", uid=f"uid-{name}", creationTimestamp=created)
    if node:
        manifest["spec"]["nodeName"] = node
        manifest["status"] = {"phase": "Running"}
    return pod_from_k8s(manifest)


def groups(**min_members: int) -> dict[str, PodGroupInfo]:
    return {f"ns/{name}": PodGroupInfo("ns", name, m) for name, m in min_members.items()}


def build(pods: list[PodInfo], node_list: list[Node] | None = None, **kwargs: Any) -> Any:
    return build_snapshot(
        node_list if node_list is not None else nodes(2),
        pods,
        kwargs.pop("groups", {}),
        scheduler_name="gpusched",
        now=1e9,
        **kwargs,
    )


def test_plain_pods_are_jobs_of_one_in_creation_order() -> None:
    live = build(
        [
            pod("b", created="2026-01-01T00:00:02Z"),
            pod("a", created="2026-01-01T00:00:05Z"),
            pod("other", scheduler="default-scheduler"),
        ]
    )
    assert [j.id for j in live.snapshot.pending] == ["ns/b", "ns/a"]
    assert all(j.min_available == 1 for j in live.snapshot.pending)


def test_gang_is_one_job_with_min_member() -> None:
    members = [pod(f"w{i}", gpus=4, group="train") for i in range(4)]
    live = build(members, groups=groups(train=4))
    (job,) = live.snapshot.pending
    assert job.id == "ns/train"
    assert job.min_available == 4
    assert len(job.tasks) == 4


@pytest.mark.parametrize(
    ("min_member", "says"),
    [
        pytest.param(None, "PodGroup ns/train not found", id="podgroup-missing"),
        pytest.param(5, "needs minMember=5 pods; 3 exist; create the missing 2", id="too-few"),
        pytest.param(0, "minMember=0; expected at least 1", id="zero"),
    ],
)
def test_bad_gangs_are_problems_with_the_fix(min_member: int | None, says: str) -> None:
    members = [pod(f"w{i}", group="train") for i in range(3)]
    live = build(members, groups={} if min_member is None else groups(train=min_member))
    assert live.snapshot.pending == ()
    assert set(live.problems) == {"ns/w0", "ns/w1", "ns/w2"}
    assert all(says in message for _, message in live.problems.values())


def test_bound_pods_hold_their_recorded_gpus_and_others_first_fit() -> None:
    ours = pod("ours", gpus=2, node="n0", annotations={GPUS_ANNOTATION: "5,7"})
    theirs = pod("theirs", gpus=3, node="n0", scheduler="default-scheduler")
    live = build([ours, theirs])
    state = live.snapshot.state
    row = state.index["n0"]
    assert state.gpu_free[row].tolist() == [0, 0, 0, 1000, 1000, 0, 1000, 0]
    assert live.overcommitted == []
    assert "ns/ours" in live.snapshot.running


def test_assumed_binds_count_as_bound() -> None:
    p = pod("p", gpus=8)
    live = build([p], assumed={"ns/p": Assumed("n1", tuple(range(8)), 1000, p.uid)})
    assert live.snapshot.pending == ()
    assert int(live.snapshot.state.gpu_idle[live.snapshot.state.index["n1"]]) == 0


def test_overcommitted_pod_is_left_out() -> None:
    live = build([pod("a", gpus=8, node="n0"), pod("b", gpus=8, node="n0")])
    assert live.overcommitted == ["ns/b"]


def test_core_binds_a_gang_all_or_nothing() -> None:
    profile = build_profile(policy_spec("gpusched"))
    fits = build([pod(f"w{i}", gpus=4, group="g") for i in range(4)], groups=groups(g=4))
    plan = schedule(fits.snapshot, profile)
    assert sorted(b.task for b in plan.binds) == [f"ns/w{i}" for i in range(4)]

    too_big = build([pod(f"w{i}", gpus=8, group="g") for i in range(4)], groups=groups(g=4))
    plan = schedule(too_big.snapshot, profile)
    assert plan.binds == []
    assert "ns/g" in plan.pending


def test_memo_reuses_tasks_and_jobs_of_unchanged_pods_only() -> None:
    memo = SnapshotMemo()
    a, b = pod("a"), pod("b", gpus=2)
    first = build([a, b], memo=memo)
    second = build([a, pod("b", gpus=2)], memo=memo)  # b re-read from a watch event
    (job_a1, job_b1), (job_a2, job_b2) = first.snapshot.pending, second.snapshot.pending
    assert job_a2 is job_a1
    assert job_b2 is not job_b1
    assert job_b2 == job_b1
    build([b], memo=memo)
    assert set(memo.tasks) == {"ns/b"}
