"""The live scheduler under failures, against the real control plane: the leader killed while
pods keep arriving, kube-apiserver killed and restarted mid-run, and a watch that expires
because etcd compacted its history.

After each, the cluster must be consistent: every pod bound (each exactly once: the Binding
subresource refuses a second bind, and the scheduler's own count of successful binds is not
above the number of pods), no GPU index given to two pods on a node, no node's GPUs allocated
beyond its capacity. No timing is asserted (the takeover time is a benchmark figure,
scripts/bench_live.py).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from e2e.conftest import NodeFactory
from e2e.controlplane import ControlPlane, wait_until
from e2e.kube import (
    JsonObj,
    check,
    create_namespace,
    create_node,
    create_pod,
    ensure_priority_class,
    is_ready,
    node_manifest,
    pod_manifest,
    pods_path,
    unschedulable,
    wait_for,
)
from e2e.test_live import (
    HIGH,
    Gpusched,
    bound_node,
    gpus_of,
    list_pods,
    preempt_now_profile,
    wait_bound,
)

LEASE_NS = "gpusched-system"
# Short Lease timings so a takeover happens within seconds in the test.
FAST_LEASE = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1")


class Schedulers:
    """``gpusched run`` processes started by a test; SIGTERM at the end must exit 0."""

    def __init__(self, plane: ControlPlane, name: str) -> None:
        self.plane = plane
        self.name = name
        self.started: list[Gpusched] = []

    def start(self, identity: str, *extra: str) -> Gpusched:
        log = self.plane.workdir / f"gpusched-{self.name}-{identity}.log"
        scheduler = Gpusched(self.plane.kubeconfig, log, identity, *extra)
        self.started.append(scheduler)
        self.plane.extra_logs.append(log)
        return scheduler

    def stop(self) -> list[int]:
        codes = [s.stop() for s in self.started if s.process.poll() is None]
        for scheduler in self.started:
            self.plane.extra_logs.remove(scheduler.log)
        return codes


@pytest.fixture
def schedulers(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Schedulers]:
    running = Schedulers(control_plane, request.node.name)
    yield running
    codes = running.stop()
    assert all(code == 0 for code in codes), f"exit codes after SIGTERM: {codes}"


def create_pods(url_client: httpx.Client, namespace: str, names: list[str]) -> None:
    """Create one-GPU pods one after another, retrying while the apiserver is unreachable."""
    for name in names:
        while True:
            try:
                response = url_client.post(pods_path(namespace), json=pod_manifest(name, gpus=1))
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            if response.status_code in (201, 409):
                break
            time.sleep(0.2)  # 403/429/500 while a restarted apiserver initialises
        time.sleep(0.1)


@contextmanager
def creating_pods(plane: ControlPlane, namespace: str, names: list[str]) -> Iterator[None]:
    """:func:`create_pods` on a client of its own, in a thread, while the ``with`` body runs;
    waits for the last pod's creation when the body is done."""
    with plane.client() as http:
        creator = threading.Thread(target=create_pods, args=(http, namespace, names))
        creator.start()
        yield
        creator.join()


def wait_bound_count(http: httpx.Client, namespace: str, count: int, what: str) -> None:
    """Wait until at least ``count`` pods of ``namespace`` are bound."""
    wait_until(
        what, lambda: sum(1 for p in list_pods(http, namespace) if bound_node(p)) >= count, 60
    )


def wait_holder(http: httpx.Client, lease_path: str, identity: str) -> None:
    """Wait until ``identity`` holds the Lease at ``lease_path``."""
    wait_until(
        f"{identity} holding the Lease",
        lambda: http.get(lease_path).json().get("spec", {}).get("holderIdentity") == identity,
        60,
    )


def assert_consistent(pods: list[JsonObj], gpus_per_node: int) -> None:
    """Every pod bound, no GPU index given twice on a node, no node over its capacity."""
    unbound = [p["metadata"]["name"] for p in pods if not bound_node(p)]
    assert not unbound, f"pods never bound: {unbound}"
    used: dict[str, list[int]] = {}
    for pod in pods:
        used.setdefault(bound_node(pod), []).extend(gpus_of(pod))
    for node, indices in used.items():
        assert len(indices) == len(set(indices)), f"{node}: a GPU given twice: {indices}"
        assert len(indices) <= gpus_per_node, f"{node}: {len(indices)} GPUs of {gpus_per_node}"
        assert all(0 <= g < gpus_per_node for g in indices), f"{node}: {indices}"


def successful_binds(scheduler: Gpusched) -> float:
    match = re.search(r'gpusched_binds_total\{result="bound"\} ([0-9.]+)', scheduler.metrics())
    return float(match.group(1)) if match else 0.0


def wait_all_bound(http: httpx.Client, namespace: str, names: list[str]) -> None:
    for name in names:
        wait_bound(http, namespace, name, 120)


def test_leader_killed_under_load_leaves_every_pod_bound_once(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    schedulers: Schedulers,
) -> None:
    if kube.get(f"/api/v1/namespaces/{LEASE_NS}").status_code == 404:
        check(kube.post("/api/v1/namespaces", json={"metadata": {"name": LEASE_NS}}))
    gpu_nodes(4, gpus=8)
    lease = f"failover-{uuid.uuid4().hex[:6]}"
    flags = ("--leader-elect", "--lease-name", lease, *FAST_LEASE)
    first = schedulers.start("replica-a", *flags)
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{lease}"
    wait_holder(kube, lease_path, "replica-a")
    second = schedulers.start("replica-b", *flags)
    names = [f"p{i}" for i in range(32)]  # exactly the 32 GPUs of the four nodes
    with creating_pods(control_plane, namespace, names):
        wait_bound_count(kube, namespace, 10, "ten pods bound by the first leader")
        first.process.kill()  # mid-run, no Lease release
        first.process.wait()
    wait_all_bound(kube, namespace, names)
    assert check(kube.get(lease_path))["spec"]["holderIdentity"] == "replica-b"
    assert_consistent(list_pods(kube, namespace), 8)
    assert successful_binds(second) <= len(names)


def test_apiserver_restart_mid_run_loses_and_duplicates_nothing(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    schedulers: Schedulers,
) -> None:
    gpu_nodes(2, gpus=8)
    scheduler = schedulers.start("replica-a", "--no-leader-elect")
    names = [f"p{i}" for i in range(16)]
    with creating_pods(control_plane, namespace, names):
        wait_bound_count(kube, namespace, 4, "four pods bound")
        control_plane.restart_apiserver(down_s=2.0)  # pods keep being created around it
    with control_plane.client() as fresh:
        wait_all_bound(fresh, namespace, names)
        assert_consistent(list_pods(fresh, namespace), 8)
    assert successful_binds(scheduler) <= len(names)
    # The restarted apiserver's watch cache starts at its own list: the old pod watch is
    # refused as too old (410) and the cache re-lists.
    assert "watch version expired; re-listing" in scheduler.log.read_text()


@pytest.fixture(scope="module")
def uncached_plane(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A second control plane whose apiserver has no watch cache: watches go to etcd, so
    compacting etcd expires them (with the cache, the apiserver keeps its own history)."""
    plane = ControlPlane(control_plane.bin_dir, tmp_path_factory.mktemp("uncached"))
    plane.start(apiserver_args=("--watch-cache=false",))
    yield plane
    plane.stop()


def test_expired_watch_relists_and_loses_no_pod(uncached_plane: ControlPlane) -> None:
    plane = uncached_plane
    namespace = "expiry"
    with plane.client() as http:
        create_namespace(http, namespace)
        for i in range(2):
            create_node(http, node_manifest(f"expiry-{i}", gpus=8))
        for i in range(2):
            wait_for(http, "/api/v1/nodes", f"expiry-{i}", is_ready)
        log = plane.workdir / "gpusched-expiry.log"
        scheduler = Gpusched(
            plane.kubeconfig, log, "replica-a", "--no-leader-elect", "--watch-timeout", "3"
        )
        plane.extra_logs.append(log)
        try:
            first = [f"a{i}" for i in range(4)]
            create_pods(http, namespace, first)
            for name in first:  # kwok's last write to these pods: Running
                wait_for(
                    http,
                    pods_path(namespace),
                    name,
                    lambda p: p.get("status", {}).get("phase") == "Running",
                    60,
                )
            # Move etcd past the scheduler's last pod event, then drop that history: the next
            # time its pod watch is re-opened (within 3 s) its version is gone.
            for i in range(3):
                check(
                    http.post(
                        f"/api/v1/namespaces/{namespace}/configmaps",
                        json={"metadata": {"name": f"bump-{i}"}},
                    )
                )
            plane.compact_etcd()
            wait_until(
                "the pod cache re-listing after its watch expired",
                lambda: "/api/v1/pods: watch version expired; re-listing" in log.read_text(),
                60,
            )
            second = [f"b{i}" for i in range(8)]
            create_pods(http, namespace, second)
            wait_all_bound(http, namespace, first + second)
            assert_consistent(list_pods(http, namespace), 8)
            assert successful_binds(scheduler) == len(first + second)
        finally:
            code = scheduler.stop()
            plane.extra_logs.remove(log)
        assert code == 0


def _events_of(kube: httpx.Client, namespace: str, pod: str, reason: str) -> list[str]:
    events = check(kube.get(f"/api/v1/namespaces/{namespace}/events"))["items"]
    return [
        str(e.get("message", ""))
        for e in events
        if e["involvedObject"].get("name") == pod and e["reason"] == reason
    ]


def test_a_new_leader_keeps_the_evictors_the_old_one_stored(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    gpu_nodes: NodeFactory,
    schedulers: Schedulers,
) -> None:
    """Leader A evicts ``v`` for ``h`` and stores that in the state ConfigMap; after A is
    killed, B reads it, and a re-created ``v`` of higher priority than ``h`` does not evict it
    (no preemption loop). C, a leader started without the ConfigMap, does evict ``h`` for the
    same ``v``: the bar B kept came from what A stored."""
    if kube.get(f"/api/v1/namespaces/{LEASE_NS}").status_code == 404:
        check(kube.post("/api/v1/namespaces", json={"metadata": {"name": LEASE_NS}}))
    ensure_priority_class(kube, HIGH, 1000)
    ensure_priority_class(kube, "gpusched-e2e-higher", 2000)
    profile = preempt_now_profile(control_plane, "preempt-now.yaml")
    gpu_nodes(1, gpus=8)
    tag = uuid.uuid4().hex[:6]
    lease, state = f"carry-{tag}", f"state-{tag}"
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{lease}"
    state_path = f"/api/v1/namespaces/{LEASE_NS}/configmaps/{state}"
    flags = ("--leader-elect", "--lease-name", lease, "--profile", str(profile), *FAST_LEASE)
    began = time.time()

    first = schedulers.start("replica-a", *flags, "--state-configmap", state)
    wait_holder(kube, lease_path, "replica-a")
    second = schedulers.start("replica-b", *flags, "--state-configmap", state)
    create_pod(kube, namespace, pod_manifest("v", gpus=8))
    wait_bound(kube, namespace, "v")
    create_pod(kube, namespace, pod_manifest("h", gpus=8, priority_class=HIGH))
    wait_bound(kube, namespace, "h")
    assert any(f"for {namespace}/h" in m for m in _events_of(kube, namespace, "v", "Preempted"))

    # What A stored: v was evicted for h, at a wall-clock time (Unix seconds).
    victim, evictor = f"{namespace}/v", f"{namespace}/h"
    wait_until(
        "replica-a storing the eviction",
        lambda: victim in _stored_evictors(kube, state_path),
        30,
    )
    stored = check(kube.get(state_path))
    assert stored["metadata"]["annotations"]["gpusched.dev/written-by"] == "replica-a"
    entry = json.loads(stored["data"]["state.json"])["evictedBy"][victim]
    assert entry["by"] == [evictor]
    assert began <= entry["at"] <= time.time()

    first.process.kill()  # no Lease release, no last write
    first.process.wait()
    wait_until(
        "replica-b reading what replica-a stored",
        lambda: (
            re.search(
                rf"read the carried state from ConfigMap {LEASE_NS}/{state} \(written by "
                r"replica-a\): \d+ reservation holders, 0 deadlines, 1 evicted jobs",
                second.log.read_text(),
            )
            is not None
        ),
        60,
    )
    wait_until("v gone", lambda: kube.get(pods_path(namespace, "v")).status_code == 404, 60)
    # v comes back (its controller re-creating it), now ahead of h in priority.
    create_pod(kube, namespace, pod_manifest("v", gpus=8, priority_class="gpusched-e2e-higher"))
    waiting = wait_for(kube, pods_path(namespace), "v", unschedulable, 60)
    assert not bound_node(waiting)
    # B's cycle reported v unschedulable instead of evicting h for it: h runs on.
    h_now = check(kube.get(pods_path(namespace, "h")))
    assert bound_node(h_now)
    assert not h_now["metadata"].get("deletionTimestamp")
    assert not _events_of(kube, namespace, "h", "Preempted")
    assert check(kube.get(lease_path))["spec"]["holderIdentity"] == "replica-b"
    assert second.stop() == 0  # graceful: the Lease is released for C at once

    # C, without the state, sees only priorities: it evicts h for v.
    schedulers.start("replica-c", *flags, "--state-configmap", "")
    wait_bound(kube, namespace, "v")
    assert any(f"for {victim}" in m for m in _events_of(kube, namespace, "h", "Preempted"))


def _stored_evictors(kube: httpx.Client, path: str) -> dict[str, object]:
    found = kube.get(path)
    if found.status_code != 200:
        return {}
    evicted: dict[str, object] = json.loads(found.json()["data"]["state.json"])["evictedBy"]
    return evicted
