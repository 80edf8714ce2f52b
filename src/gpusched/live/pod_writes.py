"""What the live scheduler writes on pods besides the Binding: the ``PodScheduled=False``
condition, Events, and ``status.nominatedNodeName``.

Kept apart from the cycle (:mod:`.scheduler`), which decides *when* to write (a changed
message, at most every ``report_interval_s``, a preemptor waiting for its victims); these
functions only say *what* is written. Each is sent from the scheduler's write pool and never
raises: a failed write is logged and the next cycle writes again if it still matters.
"""

from __future__ import annotations

import logging

from gpusched.live.client import ApiError, KubeClient
from gpusched.live.feedback import event_body, now_rfc3339
from gpusched.live.translate_pod import PodInfo

__all__ = ["clear_nomination", "nominate", "post_event", "write_unschedulable"]

# Logged under the scheduler's name, as before this module was split from it.
log = logging.getLogger("gpusched.live.scheduler")


def _status_path(pod: PodInfo) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"


def clear_nomination(client: KubeClient, pod: PodInfo) -> None:
    """Remove ``status.nominatedNodeName`` (a hold that expired)."""
    try:
        client.patch(_status_path(pod), {"status": {"nominatedNodeName": None}}, strategic=True)
    except ApiError as exc:
        log.warning("clearing the nomination of %s: %s", pod.key, exc)


def nominate(client: KubeClient, pod: PodInfo, node: str) -> None:
    """Set ``status.nominatedNodeName``: the node freed for this preemptor."""
    if pod.nominated == node:
        return
    patch = {"status": {"nominatedNodeName": node}}
    try:
        client.patch(_status_path(pod), patch, strategic=True)
    except ApiError as exc:
        log.warning("nominating %s for %s: %s", node, pod.key, exc)


def write_unschedulable(
    client: KubeClient, component: str, pod: PodInfo, message: str, event: bool
) -> None:
    """Set PodScheduled=False/Unschedulable with ``message`` (and a FailedScheduling Event
    when ``event``)."""
    patch = {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now_rfc3339(),
                }
            ]
        }
    }
    try:
        client.patch(_status_path(pod), patch, strategic=True)
    except ApiError as exc:
        log.warning("condition on %s: %s", pod.key, exc)
    if event:
        post_event(
            client, component, pod, kind="Warning", reason="FailedScheduling", message=message
        )


def post_event(
    client: KubeClient, component: str, pod: PodInfo, *, kind: str, reason: str, message: str
) -> None:
    """An Event on ``pod`` from ``component`` (the scheduler's name)."""
    involved = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
    }
    body = event_body(
        involved, pod.namespace, kind=kind, reason=reason, message=message, source=component
    )
    try:
        client.post(f"/api/v1/namespaces/{pod.namespace}/events", body)
    except ApiError as exc:
        log.warning("event on %s: %s", pod.key, exc)
