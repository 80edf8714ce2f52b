"""Mean run times learned from completed jobs: the accumulator, each job counted once, gangs
counted when their last pod ends, failed jobs left out, memory bounded."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.kube import POD_GROUP_LABEL, pod_manifest
from gpusched.live.estimates import KIND_LABEL, USER_LABEL
from gpusched.live.runtimes import CompletionLearner, Finished, RuntimeMeans, finished_from_k8s

T0 = 1_800_000_000.0


def done(
    name: str,
    seconds: float,
    *,
    job: str = "",
    user: str = "alice",
    kind: str = "batch",
    ok: bool = True,
    start: float = T0,
) -> Finished:
    key = f"ns/{name}"
    return Finished(key, f"uid-{name}", job or key, user, kind, ok, start, start + seconds)


def test_means_are_plain_means_per_user_and_kind() -> None:
    means = RuntimeMeans()
    assert means.observe("alice", "training", 100.0) == 100.0
    assert means.observe("alice", "training", 300.0) == 200.0  # (100 + 300) / 2
    means.observe("bob", "training", 50.0)
    assert means.means() == {("alice", "training"): 200.0, ("bob", "training"): 50.0}
    assert means.count("alice", "training") == 2


def test_means_forget_the_least_recently_updated_key_beyond_the_bound() -> None:
    means = RuntimeMeans(max_keys=2)
    means.observe("a", "batch", 1.0)
    means.observe("b", "batch", 2.0)
    means.observe("a", "batch", 3.0)  # a is now the most recent
    means.observe("c", "batch", 4.0)  # b goes
    assert means.means() == {("a", "batch"): 2.0, ("c", "batch"): 4.0}


def test_a_snapshot_keeps_the_means_it_was_given() -> None:
    means = RuntimeMeans()
    means.observe("a", "batch", 10.0)
    given = means.means()
    assert means.means() is given  # unchanged: the same mapping
    means.observe("a", "batch", 30.0)
    assert given == {("a", "batch"): 10.0}
    assert means.means() == {("a", "batch"): 20.0}


def test_a_completed_pod_is_counted_once() -> None:
    learner = CompletionLearner()
    finished = [done("p", 120.0)]
    assert learner.learn(finished, [], now=0.0) == 1
    assert learner.learn(finished, [], now=1.0) == 0  # seen again next cycle: not again
    assert learner.means.means() == {("alice", "batch"): 120.0}


def test_a_gang_counts_from_its_first_start_to_its_last_finish_once_all_ended() -> None:
    learner = CompletionLearner(settle_s=0.5)
    w0 = done("w0", 100.0, job="ns/train")
    w1 = done("w1", 150.0, job="ns/train", start=T0 + 10)
    # w1 still runs: nothing yet
    assert learner.learn([w0], [("ns/train", "uid-w1")], now=0.0) == 0
    # w1 has ended: waited settle_s after it was first seen finished
    assert learner.learn([w0, w1], [], now=1.0) == 0
    assert learner.learn([w0, w1], [], now=1.6) == 1
    assert learner.means.means() == {("alice", "batch"): 160.0}  # T0 to T0 + 10 + 150


def test_a_pod_seen_in_both_caches_counts_as_finished() -> None:
    # the finished watch has it, the other watch has not yet dropped it: same uid
    learner = CompletionLearner()
    assert learner.learn([done("p", 60.0)], [("ns/p", "uid-p")], now=0.0) == 1


@pytest.mark.parametrize(
    "members",
    [
        pytest.param([done("p", 60.0, ok=False)], id="failed-pod"),
        pytest.param(
            [done("w0", 60.0, job="ns/g"), done("w1", 60.0, job="ns/g", ok=False)],
            id="gang-with-a-failed-pod",
        ),
        pytest.param([done("p", 60.0, start=0.0)], id="never-started"),
        pytest.param([done("p", 0.0)], id="under-a-second"),
    ],
)
def test_what_does_not_count(members: list[Finished]) -> None:
    learner = CompletionLearner(settle_s=0.0)
    assert learner.learn(members, [], now=0.0) == 0
    assert learner.means.means() == {}
    assert learner.learn(members, [], now=1.0) == 0  # and is not looked at again


def test_memory_follows_the_finished_pods_in_the_cache() -> None:
    learner = CompletionLearner()
    learner.learn([done(f"p{i}", 60.0) for i in range(100)], [], now=0.0)
    learner.learn([done("p100", 60.0)], [], now=1.0)  # the others were deleted
    assert learner.remembered == 1
    assert learner.means.count("alice", "batch") == 101


def test_finished_from_a_pod_object() -> None:
    manifest: dict[str, Any] = pod_manifest(
        "w0",
        labels={POD_GROUP_LABEL: "train", USER_LABEL: "alice", KIND_LABEL: "training"},
    )
    manifest["metadata"].update(namespace="ns", uid="u0")
    manifest["spec"]["containers"].append({"name": "side"})
    manifest["status"] = {
        "phase": "Succeeded",
        "startTime": "2027-01-15T08:00:00Z",
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"finishedAt": "2027-01-15T09:30:00Z"}}},
            {"name": "side", "state": {"terminated": {"finishedAt": "2027-01-15T09:30:05Z"}}},
        ],
    }
    f = finished_from_k8s(manifest)
    assert (f.key, f.job, f.user, f.kind, f.succeeded) == (
        "ns/w0",
        "ns/train",
        "alice",
        "training",
        True,
    )
    assert f.finished - f.started == 5405.0  # to the last container's finish
    manifest["status"]["containerStatuses"][1]["state"] = {"running": {}}
    assert finished_from_k8s(manifest).finished == 0.0  # a container has no finish time
