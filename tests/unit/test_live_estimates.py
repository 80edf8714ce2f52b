"""Run-time estimates in the live backend: the annotation and labels users write, what the
snapshot's jobs carry, the default for replays, and the replay's objects."""

from __future__ import annotations

import random
from typing import Any

import pytest

from e2e.kube import POD_GROUP_LABEL, node_manifest, pod_manifest
from gpusched.framework import CycleContext, Session
from gpusched.live.estimates import (
    KIND_LABEL,
    RUNTIME_ESTIMATE_ANNOTATION,
    USER_LABEL,
    format_seconds,
    parse_duration,
)
from gpusched.live.replay_objects import pod_object
from gpusched.live.snapshot import Extras, LiveSnapshot, build_snapshot
from gpusched.live.translate import node_from_k8s
from gpusched.live.translate_pod import PodInfo, pod_from_k8s
from gpusched.live.translate_podgroup import PodGroupInfo, podgroup_from_k8s
from gpusched.model import Job, JobId, JobKind, Task, TaskId, TaskShape
from gpusched.scheduler import build_profile, policy_spec, schedule

NOW = 1_800_000_000.0


def pod(
    name: str,
    *,
    gpus: int = 1,
    group: str = "",
    node: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> PodInfo:
    manifest: dict[str, Any] = pod_manifest(
        name,
        gpus=gpus,
        labels={**({POD_GROUP_LABEL: group} if group else {}), **(labels or {})},
        annotations=annotations,
    )
    manifest["metadata"].update(
        namespace="team-a", uid=f"uid-{name}", creationTimestamp="2027-01-15T08:00:00Z"
    )
    if node:
        manifest["spec"]["nodeName"] = node
        manifest["status"] = {"phase": "Running", "startTime": "2027-01-15T08:00:00Z"}
    return pod_from_k8s(manifest)


def estimate(value: str) -> dict[str, str]:
    return {RUNTIME_ESTIMATE_ANNOTATION: value}


def build(pods: list[PodInfo], gpus: int = 8, **kwargs: Any) -> LiveSnapshot:
    manifest: dict[str, Any] = node_manifest("n0", gpus=gpus)
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return build_snapshot(
        [node_from_k8s(manifest)],
        pods,
        kwargs.pop("groups", {}),
        scheduler_name="gpusched",
        now=NOW,
        extras=Extras(**kwargs),
    )


# -- the annotation and the labels ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("5400", 5400.0, id="seconds"),
        pytest.param("0.5", 0.5, id="fraction-of-a-second"),
        pytest.param("90m", 5400.0, id="minutes"),
        pytest.param("2h", 7200.0, id="hours"),
        pytest.param("1h30m", 5400.0, id="hours-and-minutes"),
        pytest.param("45s", 45.0, id="seconds-unit"),
        pytest.param("1.5h", 5400.0, id="fractional-hours"),
        pytest.param("2h45m30.5s", 9930.5, id="every-unit"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param(" 90m ", 5400.0, id="surrounding-blanks"),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert pod("p", annotations=estimate(text)).runtime_estimate == seconds


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("0", id="zero"),
        pytest.param("0s", id="zero-duration"),
        pytest.param("-5", id="negative"),
        pytest.param("two hours", id="words"),
        pytest.param("1 h", id="blank-inside"),
        pytest.param("1h30", id="number-without-unit"),
        pytest.param("1d", id="days-are-not-a-go-unit"),
        pytest.param("1e3", id="exponent"),
        pytest.param("nan", id="nan"),
        pytest.param("inf", id="infinite"),
    ],
)
def test_a_bad_estimate_keeps_the_pod_pending_with_the_fix(text: str) -> None:
    p = pod("p", annotations=estimate(text))
    assert p.runtime_estimate is None
    assert f"annotation {RUNTIME_ESTIMATE_ANNOTATION} on the pod: got {text!r}" in p.problem
    assert '"90m"' in p.problem
    assert "kubectl annotate --overwrite" in p.problem
    live = build([p])
    assert live.snapshot.pending == ()
    assert p.problem in live.problems["team-a/p"][1]


@pytest.mark.parametrize(
    ("labels", "user", "kind"),
    [
        pytest.param({}, "team-a", JobKind.BATCH, id="defaults-namespace-and-batch"),
        pytest.param({USER_LABEL: "alice"}, "alice", JobKind.BATCH, id="user-label"),
        pytest.param({KIND_LABEL: "training"}, "team-a", JobKind.TRAINING, id="kind-label"),
        pytest.param({USER_LABEL: ""}, "team-a", JobKind.BATCH, id="empty-user-is-namespace"),
    ],
)
def test_user_and_kind_labels(labels: dict[str, str], user: str, kind: JobKind) -> None:
    p = pod("p", labels=labels)
    assert (p.user, p.kind, p.problem) == (user, kind, "")
    (job,) = build([p]).snapshot.pending
    assert (job.user, job.kind, job.runtime_estimate) == (user, kind, None)


def test_an_unknown_kind_keeps_the_pod_pending_with_the_kinds() -> None:
    p = pod("p", labels={KIND_LABEL: "train"})
    assert p.problem == (
        f"label {KIND_LABEL}: got 'train'; expected one of training, inference, notebook, "
        "batch (or no label: batch); fix it (kubectl label --overwrite) or remove it"
    )
    assert build([p]).snapshot.pending == ()


# -- jobs ----------------------------------------------------------------------------------


def test_a_pod_estimate_reaches_its_job_and_a_gang_takes_its_longest() -> None:
    members = [
        pod("w0", group="train", annotations=estimate("1h")),
        pod("w1", group="train", annotations=estimate("90m")),
        pod("w2", group="train"),
    ]
    single = pod("single", annotations=estimate("45s"))
    live = build([*members, single], groups={"team-a/train": PodGroupInfo("team-a", "train", 3)})
    jobs = {j.id: j for j in live.snapshot.pending}
    assert jobs[JobId("team-a/train")].runtime_estimate == 5400.0  # its last pod ends then
    assert jobs[JobId("team-a/single")].runtime_estimate == 45.0


def podgroup(annotations: dict[str, str]) -> PodGroupInfo:
    return podgroup_from_k8s(
        {
            "metadata": {"name": "train", "namespace": "team-a", "annotations": annotations},
            "spec": {"minMember": 2},
        }
    )


def test_the_podgroup_estimate_wins_over_its_pods() -> None:
    members = [pod(f"w{i}", group="train", annotations=estimate("5h")) for i in range(2)]
    live = build(members, groups={"team-a/train": podgroup(estimate("20m"))})
    (job,) = live.snapshot.pending
    assert job.runtime_estimate == 1200.0


def test_a_bad_podgroup_estimate_is_reported_on_the_gang_and_its_podgroup() -> None:
    group = podgroup(estimate("soon"))
    assert group.runtime_estimate is None
    members = [pod(f"w{i}", group="train") for i in range(2)]
    live = build(members, groups={"team-a/train": group})
    assert live.snapshot.pending == ()
    says = f"annotation {RUNTIME_ESTIMATE_ANNOTATION} on PodGroup team-a/train: got 'soon'"
    assert all(says in message for _, message in live.problems.values())
    assert says in live.group_problems["team-a/train"][1]


def test_a_gang_whose_pods_name_different_users_is_told_so() -> None:
    members = [
        pod("w0", group="train", labels={USER_LABEL: "alice"}),
        pod("w1", group="train", labels={USER_LABEL: "bob"}),
    ]
    live = build(members, groups={"team-a/train": PodGroupInfo("team-a", "train", 2)})
    assert live.snapshot.pending == ()
    (message,) = {m for _, m in live.problems.values()}
    assert "the gang's pods name different users or kinds (alice/batch, bob/batch;" in message


@pytest.mark.parametrize(
    ("annotations", "means", "expected"),
    [
        pytest.param({}, {}, 120.0, id="neither-estimate-nor-mean-gets-the-default"),
        pytest.param({}, {("team-a", "batch"): 300.0}, 300.0, id="a-learned-mean-wins"),
        pytest.param(estimate("45s"), {}, 45.0, id="an-estimate-wins"),
    ],
)
def test_the_scaled_default_is_the_snapshots_not_the_jobs(
    annotations: dict[str, str], means: dict[tuple[str, str], float], expected: float
) -> None:
    """``--default-runtime`` replaces the core's hour on the snapshot; the job keeps only
    what its pods say, and the core prefers an estimate to the mean to the default."""
    live = build([pod("p", annotations=annotations)], runtime_stats=means, default_runtime_s=120.0)
    (job,) = live.snapshot.pending
    assert job.runtime_estimate == (45.0 if annotations else None)
    assert live.snapshot.default_runtime == 120.0
    assert live.snapshot.runtime_stats == means
    ctx = CycleContext(now=live.snapshot.now, rng=random.Random(0))
    session = Session(live.snapshot, build_profile(policy_spec("gpusched")), ctx)
    assert session.runtime_estimate(job) == expected


# -- what the core does with them ------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "means", "backfilled"),
    [
        pytest.param({}, estimate("1m"), {}, True, id="annotated-short-job-backfills"),
        pytest.param({}, {}, {}, False, id="default-hour-would-delay-the-reservation"),
        pytest.param(
            {USER_LABEL: "alice"},
            {},
            {("alice", "batch"): 60.0},
            True,
            id="learned-short-mean-backfills",
        ),
        pytest.param(
            {USER_LABEL: "bob"}, {}, {("alice", "batch"): 60.0}, False, id="another-users-mean"
        ),
    ],
)
def test_estimates_decide_what_backfills_before_a_reservation(
    labels: dict[str, str],
    annotations: dict[str, str],
    means: dict[tuple[str, str], float],
    backfilled: bool,
) -> None:
    # 8 GPUs: "long" holds 4 and is expected to end in 10 min, so "big" (8 GPUs) holds a
    # reservation from then; "short" (2 GPUs) may use the 4 free GPUs only if it is expected to
    # end before: 60 s does, the default hour does not.
    long = pod("long", gpus=4, node="n0", annotations=estimate("10m"))
    big = pod("big", gpus=8)
    short = pod("short", gpus=2, labels=labels, annotations=annotations)
    live = build([long, big, short], runtime_stats=means)
    plan = schedule(live.snapshot, build_profile(policy_spec("gpusched")))
    assert JobId("team-a/big") in plan.reservations
    assert (JobId("team-a/short") in plan.bound_jobs()) is backfilled


# -- the replay writes them --------------------------------------------------------------------


def test_a_replay_pod_carries_kind_user_and_the_estimate_in_wall_seconds() -> None:
    shape = TaskShape(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=1000)
    jid = JobId("train-1")
    job = Job(
        id=jid,
        tasks=(Task(TaskId("train-1"), jid, shape),),
        kind=JobKind.TRAINING,
        user="alice",
        runtime_estimate=3000.0,
        duration=3600.0,
    )
    common: dict[str, Any] = {"name": "train-1", "group": "", "run": "r", "scheduler": "gpusched"}
    obj = pod_object(job, job.tasks[0], namespace="ns", speed=600.0, **common)
    assert obj["metadata"]["annotations"][RUNTIME_ESTIMATE_ANNOTATION] == "5"  # 3000 s / 600
    back = pod_from_k8s(obj)
    assert (back.user, back.kind, back.runtime_estimate, back.problem) == (
        "alice",
        JobKind.TRAINING,
        5.0,
        "",
    )
    anonymous = Job(id=jid, tasks=job.tasks)  # no user, no estimate: the namespace stands in
    obj = pod_object(anonymous, job.tasks[0], namespace="ns", speed=600.0, **common)
    assert RUNTIME_ESTIMATE_ANNOTATION not in obj["metadata"]["annotations"]
    assert USER_LABEL not in obj["metadata"]["labels"]
    assert obj["metadata"]["labels"][KIND_LABEL] == "batch"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10.0, "10"), (1 / 6, "0.167"), (0.0001, "0.001"), (5400.25, "5400.25")],
)
def test_format_seconds_reads_back(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text
    assert parse_duration(text) == pytest.approx(max(seconds, 0.001), abs=5e-4)
