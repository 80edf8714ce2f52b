"""The live scheduler's list+watch caches: which Kubernetes collections it keeps, which optional
APIs it adds once discovery finds them, and starting and waiting for them all.

Kept apart from the cycle (:mod:`.scheduler`) because it is the scheduler's only reader of the
apiserver: the cycle reads these caches, never the API. Each cache is an :class:`.Informer`
(:mod:`.cache`) whose objects are converted on arrival (:mod:`.translate`, :mod:`.translate_pod`,
:mod:`.translate_podgroup`, :mod:`.queues`, :mod:`.dra`). Pods are watched twice: those not
finished (the cluster's allocations and our pending pods), and our own Succeeded or Failed
ones (:mod:`.runtimes`: the run times it learns; one filtered watch each, so that neither
cache holds what the other does not need). The optional APIs are native
``scheduling.k8s.io/v1alpha2`` PodGroups and DRA ``resource.k8s.io/v1``; discovery runs in a
thread of its own so that a slow apiserver does not delay the start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gpusched.live.cache import Informer
from gpusched.live.client import ApiError, KubeClient
from gpusched.live.dra import (
    RESOURCE_API,
    ClaimInfo,
    ClassInfo,
    SliceInfo,
    claim_from_k8s,
    class_from_k8s,
    slice_from_k8s,
)
from gpusched.live.feedback import NATIVE_PODGROUPS
from gpusched.live.queues import (
    QUEUES_PATH,
    NamespaceInfo,
    PriorityClassInfo,
    QueueInfo,
    namespace_from_k8s,
    priorityclass_from_k8s,
    queue_from_k8s,
)
from gpusched.live.runtimes import Finished, finished_from_k8s
from gpusched.live.translate import node_from_k8s
from gpusched.live.translate_pod import PodInfo, pod_from_k8s
from gpusched.live.translate_podgroup import (
    PodGroupInfo,
    native_podgroup_from_k8s,
    podgroup_from_k8s,
)
from gpusched.model import Node

__all__ = ["PODGROUPS_PATH", "LiveCaches"]

# Logged under the scheduler's name, as before this module was split from it.
log = logging.getLogger("gpusched.live.scheduler")

PODGROUPS_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"


class LiveCaches:
    """Every cache the scheduler reads; ``wake`` is called after each change, except of
    ``finished`` (our pods of ``scheduler_name`` that ended): a pod that ends also leaves
    ``pods``, which wakes the loop, and the next cycle learns from it."""

    def __init__(
        self, client: KubeClient, wake: Callable[[], None], scheduler_name: str = "gpusched"
    ) -> None:
        self.client = client
        self._wake = wake
        self.nodes: Informer[Node] = Informer(
            client, "/api/v1/nodes", node_from_k8s, on_change=wake
        )
        self.pods: Informer[PodInfo] = Informer(
            client,
            "/api/v1/pods",
            pod_from_k8s,
            params={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
            on_change=wake,
        )
        self.finished: Informer[Finished] = Informer(
            client,
            "/api/v1/pods",
            finished_from_k8s,
            params={"fieldSelector": _finished_selector(scheduler_name)},
        )
        self.podgroups: Informer[PodGroupInfo] = Informer(
            client, PODGROUPS_PATH, podgroup_from_k8s, on_change=wake
        )
        self.namespaces: Informer[NamespaceInfo] = Informer(
            client, "/api/v1/namespaces", namespace_from_k8s, on_change=wake
        )
        self.queues: Informer[QueueInfo] = Informer(
            client, QUEUES_PATH, queue_from_k8s, on_change=wake
        )
        self.priority_classes: Informer[PriorityClassInfo] = Informer(
            client, "/apis/scheduling.k8s.io/v1/priorityclasses", priorityclass_from_k8s
        )
        # Optional APIs, created by start when discovery finds them.
        self.native_groups: Informer[PodGroupInfo] | None = None
        self.slices: Informer[SliceInfo] | None = None
        self.claims: Informer[ClaimInfo] | None = None
        self.device_classes: Informer[ClassInfo] | None = None
        self._discovered = threading.Event()
        self._threads: list[threading.Thread] = []

    def discover(self) -> None:
        """Create the caches of the optional APIs this apiserver serves (API discovery)."""
        wake = self._wake
        if "podgroups" in self._served(NATIVE_PODGROUPS):
            path = f"{NATIVE_PODGROUPS}/podgroups"
            self.native_groups = Informer(
                self.client, path, native_podgroup_from_k8s, on_change=wake
            )
        dra = self._served(RESOURCE_API)
        if {"resourceslices", "resourceclaims", "deviceclasses"} <= dra:
            self.slices = Informer(
                self.client, f"{RESOURCE_API}/resourceslices", slice_from_k8s, on_change=wake
            )
            self.claims = Informer(
                self.client, f"{RESOURCE_API}/resourceclaims", claim_from_k8s, on_change=wake
            )
            self.device_classes = Informer(
                self.client, f"{RESOURCE_API}/deviceclasses", class_from_k8s, on_change=wake
            )
        log.info(
            "optional APIs: native PodGroups %s, DRA %s",
            "served" if self.native_groups else "not served",
            "served" if self.slices else "not served",
        )

    def _served(self, group_version: str) -> set[str]:
        try:
            listing = self.client.get(group_version)
        except ApiError:
            return set()
        return {str(r.get("name")) for r in listing.get("resources") or []}

    def _informers(self) -> list[tuple[str, Informer[Any]]]:
        named: list[tuple[str, Informer[Any] | None]] = [
            ("nodes", self.nodes),
            ("pods", self.pods),
            ("finished-pods", self.finished),
            ("podgroups", self.podgroups),
            ("namespaces", self.namespaces),
            ("queues", self.queues),
            ("priorityclasses", self.priority_classes),
            ("native-podgroups", self.native_groups),
            ("resourceslices", self.slices),
            ("resourceclaims", self.claims),
            ("deviceclasses", self.device_classes),
        ]
        return [(name, informer) for name, informer in named if informer is not None]

    def start(self, stop: threading.Event, watch_timeout_s: int) -> None:
        """Start every cache; the optional APIs' once discovery (in a thread of its own, so
        a slow apiserver does not delay the caller) has found them."""
        started: set[str] = set()

        def start_all() -> None:
            for name, informer in self._informers():
                if name in started:
                    continue
                started.add(name)
                informer.watch_timeout_s = watch_timeout_s
                thread = threading.Thread(
                    target=informer.run, args=(stop,), name=f"cache-{name}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

        def discover_then_start() -> None:
            self.discover()
            start_all()
            self._discovered.set()

        start_all()
        threading.Thread(target=discover_then_start, name="discovery", daemon=True).start()

    def wait_synced(self, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        if not self._discovered.wait(timeout_s):
            return False
        for _, informer in self._informers():
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True


def _finished_selector(scheduler_name: str) -> str:
    """Our pods in phase Succeeded or Failed (a field selector has no "or": every other
    phase is excluded)."""
    return (
        f"spec.schedulerName={scheduler_name},status.phase!=Pending,"
        "status.phase!=Running,status.phase!=Unknown"
    )
