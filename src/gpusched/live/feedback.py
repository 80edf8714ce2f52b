"""Telling users about bad objects other than pods: Queues and PodGroups.

For each object that cannot be used as written, gpusched writes

* a ``Warning`` Event on the object (reason ``InvalidQueue`` or ``InvalidPodGroup``) whose
  message names the field and the fix -- once per distinct message;
* a condition on the object: ``Accepted=False`` (reason ``Invalid``) on a Queue, and back to
  ``Accepted=True`` once it is fixed; ``PodGroupScheduled=False`` (reason ``Unschedulable``)
  on a native ``scheduling.k8s.io`` PodGroup. The scheduler-plugins PodGroup has no
  conditions in its status; it gets the Event only.

Events of cluster-scoped objects (Queues) go to the ``default`` namespace, as Kubernetes does.
Writes run on the caller's thread pool; failures are logged, never raised.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from gpusched.live.client import ApiError, KubeClient
from gpusched.live.queues import QUEUES_PATH, QueueInfo
from gpusched.live.translate_podgroup import PodGroupInfo

__all__ = ["Feedback", "event_body", "now_rfc3339"]

log = logging.getLogger(__name__)

NATIVE_PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2"


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    involved: Mapping[str, Any],
    namespace: str,
    *,
    kind: str,
    reason: str,
    message: str,
    source: str,
) -> dict[str, Any]:
    """A ``v1`` Event about ``involved`` (an object reference)."""
    now = now_rfc3339()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": {"component": source},
        "reportingComponent": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class Feedback:
    """Events and conditions on Queues and PodGroups, each written when its message changes."""

    def __init__(self, client: KubeClient, source: str) -> None:
        self.client = client
        self.source = source
        self._said: dict[str, str] = {}

    def queues(self, queues: Mapping[str, QueueInfo], problems: Mapping[str, str]) -> list[str]:
        """Report each Queue's problem (or that it is fine again); the names written."""
        written = []
        for name, info in queues.items():
            problem = problems.get(name, "")
            status = "False" if problem else "True"
            message = problem or "the queue is valid and in use"
            if info.accepted == (status, message):
                self._said[f"queue/{name}"] = problem
                continue
            if problem and self._said.get(f"queue/{name}") != problem:
                involved = {
                    "apiVersion": "gpusched.dev/v1alpha1",
                    "kind": "Queue",
                    "name": name,
                    "uid": info.uid,
                }
                self._post("default", involved, "InvalidQueue", f"Queue {name}: {problem}")
            self._condition_queue(info, status, message)  # after the Event: a reader of the
            # condition finds the Event already there
            self._said[f"queue/{name}"] = problem
            written.append(name)
        return written

    def podgroup(self, group: PodGroupInfo, problem: str) -> None:
        """Report a PodGroup that cannot be scheduled as written."""
        key = f"podgroup/{group.native}/{group.key}"
        if self._said.get(key) == problem:
            return
        self._said[key] = problem
        api = "scheduling.k8s.io/v1alpha2" if group.native else "scheduling.x-k8s.io/v1alpha1"
        involved = {
            "apiVersion": api,
            "kind": "PodGroup",
            "name": group.name,
            "namespace": group.namespace,
            "uid": group.uid,
        }
        self._post(group.namespace, involved, "InvalidPodGroup", problem)
        if group.native:
            condition = {
                "type": "PodGroupScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": problem[:32768],
                "lastTransitionTime": now_rfc3339(),
            }
            path = f"{NATIVE_PODGROUPS}/namespaces/{group.namespace}/podgroups/{group.name}/status"
            self._patch(path, {"status": {"conditions": [condition]}}, key)

    def forget(self, keep: set[str]) -> None:
        """Drop memos of PodGroups no longer reported (their problem was fixed)."""
        self._said = {
            k: v
            for k, v in self._said.items()
            if k.startswith("queue/") or k.split("/", 2)[2] in keep
        }

    def _condition_queue(self, info: QueueInfo, status: str, message: str) -> None:
        condition = {
            "type": "Accepted",
            "status": status,
            "reason": "Invalid" if status == "False" else "Valid",
            "message": message[:32768],
            "lastTransitionTime": now_rfc3339(),
        }
        self._patch(
            f"{QUEUES_PATH}/{info.name}/status",
            {"status": {"conditions": [condition]}},
            f"Queue {info.name}",
        )

    def _patch(self, path: str, body: Any, what: str) -> None:
        try:
            self.client.patch(path, body)
        except ApiError as exc:
            log.warning("condition on %s: %s", what, exc)

    def _post(self, namespace: str, involved: Mapping[str, Any], reason: str, message: str) -> None:
        body = event_body(
            involved, namespace, kind="Warning", reason=reason, message=message, source=self.source
        )
        try:
            self.client.post(f"/api/v1/namespaces/{namespace}/events", body)
        except ApiError as exc:
            log.warning("event on %s %s: %s", involved["kind"], involved["name"], exc)
