"""The two writes that move pods: the Binding (with its GPU annotations and DRA claims) and the
Eviction.

Kept apart from the cycle (:mod:`.scheduler`), which decides *what* is bound and evicted and
what a failure means for the next cycle (a bind assumed until the watch shows it, a preemptor
whose victim a PodDisruptionBudget protects); these functions only say *how* one pod is bound
or evicted. A bind is never retried blindly: a 409 means the pod was bound or re-created, and
the next cycle sees the truth.
"""

from __future__ import annotations

import logging

from gpusched.framework import Bind
from gpusched.live.client import ApiError, KubeClient
from gpusched.live.dra import DraView, PodClaims
from gpusched.live.dra_writes import allocate_claims
from gpusched.live.metrics import Metrics
from gpusched.live.translate import GPU_MILLI_ANNOTATION, GPUS_ANNOTATION, MIG_ANNOTATION
from gpusched.live.translate_pod import PodInfo, mig_annotation
from gpusched.model import MILLI_PER_GPU

__all__ = ["bind_pod", "evict_pod"]

# Logged under the scheduler's name, as before this module was split from it.
log = logging.getLogger("gpusched.live.scheduler")


def bind_pod(
    client: KubeClient,
    metrics: Metrics,
    dra: DraView | None,
    pod: PodInfo,
    bind: Bind,
    *,
    claims: PodClaims | None = None,
) -> str | None:
    """Allocate ``pod``'s DRA claims, then bind it with its GPU annotations; the error to
    report on the pod, or None when it is bound."""
    milli = bind.gpu_milli or pod.gpu_milli
    annotations = {GPUS_ANNOTATION: ",".join(str(g) for g in bind.gpus)} if bind.gpus else {}
    if bind.gpus and milli < MILLI_PER_GPU:
        annotations[GPU_MILLI_ANNOTATION] = str(milli)
    if bind.mig:
        annotations[MIG_ANNOTATION] = mig_annotation(bind.mig)
    if claims is not None and claims.claims and dra is not None:
        error = allocate_claims(client, dra, pod, (str(bind.node), bind.gpus), claims.claims)
        if error:
            metrics.binds.labels("error").inc()
            return error
    try:
        client.bind(pod.namespace, pod.name, pod.uid, bind.node, annotations)
    except ApiError as exc:
        metrics.binds.labels("conflict" if exc.status_code == 409 else "error").inc()
        log.warning("bind %s -> %s: %s", pod.key, bind.node, exc)
        return f"binding to {bind.node} failed: {exc.status_code} {exc.message}"
    metrics.binds.labels("bound").inc()
    return None


def evict_pod(client: KubeClient, pod: PodInfo) -> None:
    """POST the Eviction subresource of ``pod``; :class:`ApiError` as the apiserver answers
    (429: a PodDisruptionBudget forbids it)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
    }
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
    client.post(path, body)
