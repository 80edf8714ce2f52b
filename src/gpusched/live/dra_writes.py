"""Writing a DRA allocation: the claim's finalizer, ``status.allocation`` and
``status.reservedFor`` (see :mod:`.dra` for the rules), before the pod's Binding."""

from __future__ import annotations

import datetime as dt
import logging

from gpusched.live.client import ApiError, KubeClient
from gpusched.live.dra import DELETE_PROTECTION, RESOURCE_API, ClaimInfo, DraView
from gpusched.live.translate_pod import PodInfo

__all__ = ["allocate_claims"]

log = logging.getLogger(__name__)


def allocate_claims(
    client: KubeClient,
    view: DraView,
    pod: PodInfo,
    where: tuple[str, tuple[int, ...]],
    claims: tuple[ClaimInfo, ...],
) -> str:
    """Allocate ``claims`` on the GPUs ``where`` = (node, indices), in the claims' order, and
    reserve them for ``pod``; an error message naming the claim, or ``""``.

    Both writes carry the claim's resourceVersion: a claim changed meanwhile (409) is not
    overwritten; the next cycle sees it and tries again."""
    node, gpus = where
    left = list(gpus)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for claim in claims:
        allocation, left = view.allocation(claim, node, left, now)
        path = f"{RESOURCE_API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        version = claim.resource_version
        try:
            if DELETE_PROTECTION not in claim.finalizers:
                meta = {
                    "resourceVersion": version,
                    "finalizers": [*claim.finalizers, DELETE_PROTECTION],
                }
                answer = client.patch(path, {"metadata": meta})
                version = str(answer["metadata"]["resourceVersion"])
            reserved = {"resource": "pods", "name": pod.name, "uid": pod.uid}
            body = {
                "metadata": {"resourceVersion": version},
                "status": {"allocation": allocation, "reservedFor": [reserved]},
            }
            client.patch(f"{path}/status", body)
        except ApiError as exc:
            log.warning("allocating claim %s for %s: %s", claim.key, pod.key, exc)
            return f"allocating ResourceClaim {claim.key} failed: {exc.status_code} {exc.message}"
    return ""
