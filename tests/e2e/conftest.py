"""Fixtures for tests against a real control plane (etcd + kube-apiserver + kwok on loopback).

- ``control_plane`` (session): one control plane per pytest process, so under ``make test``
  (``-n 2``) each xdist worker that runs e2e tests starts its own (about 4 s; tests never
  depend on sharing one). Grouping all e2e tests on one worker with ``--dist loadgroup`` does
  not work with pytest 9.2 + pytest-xdist 3.8: xdist tags groups by writing ``item._nodeid``,
  which pytest 9.2 no longer reads (``Node.nodeid`` comes from ``_id``).
- ``kube`` (function): an httpx client authenticated as cluster admin.
- ``namespace`` (function): a fresh namespace with its ``default`` ServiceAccount; its pods are
  deleted afterwards (there is no controller-manager to empty a deleted namespace).
- ``gpu_nodes`` (function): a factory for kwok nodes with ``nvidia.com/gpu`` capacity and GFD
  labels, waiting until kwok marks them Ready; they are deleted afterwards.

Binaries: ``hack/controlplane/build.sh`` builds them on first use (12 min measured on 2 cores,
once per machine and version) and caches them. Outside CI, ``GPUSCHED_E2E_BUILD=0`` skips these
tests instead of building when the binaries are missing; under CI (``CI`` set) they are always
built, never skipped. When a test fails, the last lines of every control-plane log are added to
its report, and the logs stay in pytest's temporary folder.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from e2e.controlplane import ControlPlane, ControlPlaneError, binaries
from e2e.kube import (
    JsonObj,
    create_namespace,
    create_node,
    delete_namespace,
    is_ready,
    node_manifest,
    wait_for,
)

E2E_DIR = Path(__file__).resolve().parent

NodeFactory = Callable[..., list[JsonObj]]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


_PLANE_KEY = pytest.StashKey[ControlPlane]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    plane = item.config.stash.get(_PLANE_KEY, None)
    if plane is not None and report.failed and E2E_DIR in Path(str(item.fspath)).parents:
        report.sections.append(("control-plane logs", plane.logs()))
    return report


@pytest.fixture(scope="session")
def control_plane(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[ControlPlane]:
    build = bool(os.environ.get("CI")) or os.environ.get("GPUSCHED_E2E_BUILD", "1") != "0"
    try:
        bin_dir = binaries(build=build)
    except ControlPlaneError as error:
        if build:
            pytest.fail(str(error))
        pytest.skip(str(error))
    plane = ControlPlane(bin_dir, tmp_path_factory.mktemp("controlplane"))
    plane.start()
    pytestconfig.stash[_PLANE_KEY] = plane
    yield plane
    del pytestconfig.stash[_PLANE_KEY]
    plane.stop()


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[httpx.Client]:
    with control_plane.client() as http:
        yield http


@pytest.fixture
def namespace(kube: httpx.Client, request: pytest.FixtureRequest) -> Iterator[str]:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    create_namespace(kube, name)
    yield name
    delete_namespace(kube, name)


@pytest.fixture
def gpu_nodes(kube: httpx.Client) -> Iterator[NodeFactory]:
    created: list[str] = []

    def make(count: int, prefix: str = "gpu", **kwargs: Any) -> list[JsonObj]:
        tag = uuid.uuid4().hex[:5]
        nodes = []
        for i in range(count):
            manifest = node_manifest(f"{prefix}-{tag}-{i}", **kwargs)
            create_node(kube, manifest)
            created.append(manifest["metadata"]["name"])
        for i in range(count):
            nodes.append(wait_for(kube, "/api/v1/nodes", f"{prefix}-{tag}-{i}", is_ready))
        return nodes

    yield make
    for name in created:
        kube.delete(f"/api/v1/nodes/{name}")
