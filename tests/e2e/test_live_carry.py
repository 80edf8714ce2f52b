"""The carried state's ConfigMap (``gpusched.live.carry_store``) against the real apiserver.

Each test drives :class:`CarryStore` objects the way two leaders would (one per replica
identity) in the test's own namespace, and checks the ConfigMap as stored: written when the
state changed and only then, read back exactly by the next leader, a conflicting write merged
instead of overwritten, a malformed state reported naming the field and replaced, a foreign
ConfigMap of that name left alone, and a state that cannot be read never overwritten. The
scheduler reading it after a real leader change is tests/e2e/test_recovery.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest

from e2e.controlplane import ControlPlane
from e2e.kube import JsonObj, check
from gpusched.live.carry import Carried
from gpusched.live.carry_store import DATA_KEY, WRITER_ANNOTATION, CarryStore, decode
from gpusched.live.client import KubeClient, load_credentials
from gpusched.model import JobId

NAME = "gpusched-state"


@pytest.fixture
def client(control_plane: ControlPlane) -> Iterator[KubeClient]:
    api = KubeClient(load_credentials(str(control_plane.kubeconfig)))
    yield api
    api.close()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="gpusched.live.carry_store")
    return caplog


def _path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/{NAME}"


def _stored(kube: httpx.Client, namespace: str) -> JsonObj:
    return check(kube.get(_path(namespace)))


def _evicted(victim: str, by: str, at: float) -> Carried:
    return Carried(
        evicted_by={JobId(victim): frozenset({JobId(by)})}, evicted_at={JobId(victim): at}
    )


def _leader(client: KubeClient, namespace: str, identity: str) -> tuple[CarryStore, Carried]:
    """A store at the start of a term, with what it read."""
    store = CarryStore(client, namespace, NAME, identity)
    carried = Carried()
    assert store.load(carried)
    return store, carried


def test_state_written_by_one_leader_is_read_exactly_by_the_next(
    kube: httpx.Client, namespace: str, client: KubeClient, logs: pytest.LogCaptureFixture
) -> None:
    first, carried = _leader(client, namespace, "replica-a")
    assert carried == Carried()
    assert kube.get(_path(namespace)).status_code == 404  # nothing written for nothing
    carried.merge(_evicted("ns/victim", "ns/owner", 1_700_000_000.5))
    carried.reserved[JobId("ns/big")] = 1_700_000_001.0
    carried.deadlines[JobId("ns/guest")] = 1_700_003_600.0
    first.save(carried)
    stored = _stored(kube, namespace)
    assert stored["metadata"]["annotations"][WRITER_ANNOTATION] == "replica-a"
    assert stored["metadata"]["labels"]["app.kubernetes.io/name"] == "gpusched"
    assert json.loads(stored["data"][DATA_KEY]) == {
        "version": 1,
        "reserved": {"ns/big": 1_700_000_001.0},
        "deadlines": {"ns/guest": 1_700_003_600.0},
        "evictedBy": {"ns/victim": {"by": ["ns/owner"], "at": 1_700_000_000.5}},
    }
    first.save(carried)  # unchanged: not written again
    assert (
        _stored(kube, namespace)["metadata"]["resourceVersion"]
        == (stored["metadata"]["resourceVersion"])
    )

    second, read = _leader(client, namespace, "replica-b")
    assert read == carried
    assert f"read the carried state from ConfigMap {namespace}/{NAME} (written by replica-a)" in (
        logs.text
    )
    second.save(read)  # what it read is what it holds: no write
    assert (
        _stored(kube, namespace)["metadata"]["resourceVersion"]
        == (stored["metadata"]["resourceVersion"])
    )


def test_a_conflicting_write_is_merged_not_overwritten(
    kube: httpx.Client, namespace: str, client: KubeClient, logs: pytest.LogCaptureFixture
) -> None:
    old, old_state = _leader(client, namespace, "replica-a")
    old_state.merge(_evicted("ns/v", "ns/h", 100.0))
    old.save(old_state)
    new, new_state = _leader(client, namespace, "replica-b")
    new_state.merge(_evicted("ns/w", "ns/x", 200.0))
    new.save(new_state)  # the new leader's write moves the resourceVersion on
    old_state.merge(_evicted("ns/u", "ns/y", 300.0))
    old.save(old_state)  # a stale leader's write: 409, re-read, merged, written once more
    assert "was written by replica-b since this replica last read or wrote it; merged" in (
        logs.text
    )
    stored = _stored(kube, namespace)
    assert decode(stored["data"][DATA_KEY]).evicted_by == {
        "ns/u": frozenset({"ns/y"}),
        "ns/v": frozenset({"ns/h"}),
        "ns/w": frozenset({"ns/x"}),
    }
    assert stored["metadata"]["annotations"][WRITER_ANNOTATION] == "replica-a"


def test_a_deleted_state_is_created_again(
    kube: httpx.Client, namespace: str, client: KubeClient
) -> None:
    store, carried = _leader(client, namespace, "replica-a")
    carried.merge(_evicted("ns/v", "ns/h", 100.0))
    store.save(carried)
    check(kube.delete(_path(namespace)))
    carried.merge(_evicted("ns/w", "ns/h", 200.0))
    store.save(carried)
    assert set(decode(_stored(kube, namespace)["data"][DATA_KEY]).evicted_by) == {"ns/v", "ns/w"}


def test_a_malformed_state_is_reported_naming_the_field_and_replaced(
    kube: httpx.Client, namespace: str, client: KubeClient, logs: pytest.LogCaptureFixture
) -> None:
    bad = '{"version": 1, "evictedBy": {"ns/v": {"by": "ns/h", "at": 1}}}'
    check(
        kube.post(
            f"/api/v1/namespaces/{namespace}/configmaps",
            json={"metadata": {"name": NAME}, "data": {DATA_KEY: bad}},
        )
    )
    store, carried = _leader(client, namespace, "replica-a")
    assert carried == Carried()  # starts with nothing rather than a guess
    warning = next(r for r in logs.records if r.levelno == logging.WARNING).getMessage()
    assert warning.startswith(
        f'ConfigMap {namespace}/{NAME}: data.state.json: evictedBy["ns/v"].by: expected a '
        "non-empty list, got 'ns/h'"
    )
    store.save(carried)  # the next write replaces it, even with nothing to carry
    assert decode(_stored(kube, namespace)["data"][DATA_KEY]) == Carried()


def test_a_foreign_configmap_of_that_name_is_left_alone(
    kube: httpx.Client, namespace: str, client: KubeClient, logs: pytest.LogCaptureFixture
) -> None:
    foreign = check(
        kube.post(
            f"/api/v1/namespaces/{namespace}/configmaps",
            json={"metadata": {"name": NAME}, "data": {"app.properties": "x=1"}},
        )
    )
    store, carried = _leader(client, namespace, "replica-a")
    assert carried == Carried()
    assert "has no data.state.json but other keys (app.properties): it is not gpusched's" in (
        logs.text
    )
    carried.merge(_evicted("ns/v", "ns/h", 100.0))
    store.save(carried)
    stored = _stored(kube, namespace)
    assert stored["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    assert stored["data"] == {"app.properties": "x=1"}


def test_a_state_that_cannot_be_read_is_never_overwritten(
    control_plane: ControlPlane,
    kube: httpx.Client,
    namespace: str,
    logs: pytest.LogCaptureFixture,
) -> None:
    good = check(
        kube.post(
            f"/api/v1/namespaces/{namespace}/configmaps",
            json={"metadata": {"name": NAME}, "data": {DATA_KEY: '{"version": 1}'}},
        )
    )
    # A replica that may write ConfigMaps here but not read them (a broken RBAC rule).
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "update"]}
    check(kube.post(f"{rbac}/roles", json={"metadata": {"name": "w"}, "rules": [rule]}))
    binding = {
        "metadata": {"name": "w"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "w"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "w"}],
    }
    check(kube.post(f"{rbac}/rolebindings", json=binding))
    config = control_plane.write_kubeconfig(f"w-{namespace}", control_plane.user("w"))
    api = KubeClient(load_credentials(str(config)))
    try:
        store = CarryStore(api, namespace, NAME, "replica-a")
        carried = _evicted("ns/v", "ns/h", 100.0)
        assert not store.load(carried)  # 403: tried again later
        assert f"ConfigMap {namespace}/{NAME}: could not read the carried state" in logs.text
        store.save(carried)  # it could write, but has not read what is there: no write
    finally:
        api.close()
    stored = _stored(kube, namespace)
    assert stored["metadata"]["resourceVersion"] == good["metadata"]["resourceVersion"]
