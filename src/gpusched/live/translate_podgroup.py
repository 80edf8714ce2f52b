"""Kubernetes PodGroups (decoded JSON) into :class:`PodGroupInfo`, the gang a pod belongs to.

A scheduler-plugins **PodGroup** (``scheduling.x-k8s.io/v1alpha1``) becomes
:class:`PodGroupInfo` (``minMember``); so does a native ``scheduling.k8s.io/v1alpha2``
PodGroup (``spec.schedulingPolicy.gang.minCount``), which pods join with
``spec.schedulingGroup.podGroupName``.

Either may carry the annotation ``gpusched.dev/runtime-estimate`` (:mod:`.estimates`): the
gang's expected run time, which wins over its pods' own; a malformed value keeps the gang
pending with the reason (``problem``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpusched.live.estimates import RUNTIME_ESTIMATE_ANNOTATION, parse_estimate

__all__ = ["PodGroupInfo", "native_podgroup_from_k8s", "podgroup_from_k8s"]


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """A gang: a scheduler-plugins PodGroup, or a native ``scheduling.k8s.io`` one
    (``native``), with its minimum size, for native groups its priority (``None``: the
    pods' own), its run-time estimate in seconds (``None``: none given) and ``problem``,
    what is wrong with the estimate as written."""

    namespace: str
    name: str
    min_member: int
    uid: str = ""
    native: bool = False
    priority: int | None = None
    runtime_estimate: float | None = None
    problem: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _estimate(meta: Mapping[str, Any]) -> tuple[float | None, str]:
    where = f"PodGroup {meta.get('namespace', '')}/{meta['name']}"
    annotations = meta.get("annotations") or {}
    return parse_estimate(annotations.get(RUNTIME_ESTIMATE_ANNOTATION), where)


def podgroup_from_k8s(obj: Mapping[str, Any]) -> PodGroupInfo:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    try:
        min_member = int(spec.get("minMember") or 0)
    except (TypeError, ValueError):
        min_member = 0
    estimate, problem = _estimate(meta)
    return PodGroupInfo(
        meta.get("namespace", ""),
        meta["name"],
        min_member,
        meta.get("uid", ""),
        runtime_estimate=estimate,
        problem=problem,
    )


def native_podgroup_from_k8s(obj: Mapping[str, Any]) -> PodGroupInfo:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup: ``spec.schedulingPolicy.gang.minCount`` pods
    start together; the ``basic`` policy schedules its pods one by one (a gang of 1)."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    policy = spec.get("schedulingPolicy") or {}
    try:
        min_count = int((policy.get("gang") or {}).get("minCount") or 0) if "gang" in policy else 1
    except (TypeError, ValueError):
        min_count = 0
    priority = spec.get("priority")
    estimate, problem = _estimate(meta)
    return PodGroupInfo(
        meta.get("namespace", ""),
        meta["name"],
        min_count,
        meta.get("uid", ""),
        native=True,
        priority=int(priority) if isinstance(priority, int) else None,
        runtime_estimate=estimate,
        problem=problem,
    )
