"""DRA in a cycle's snapshot: GPUs published as devices, pods' claims, and orphan claims.

With Dynamic Resource Allocation a node's GPUs are the devices its ResourceSlices publish, and
a pod asks for GPUs through ResourceClaims instead of ``nvidia.com/gpu``. Before the core sees
them: a node that publishes devices gets those as its GPUs (:func:`dra_nodes`); a pod with
claims gets their GPU count as its request, or the allocated devices when bound, or a problem
saying what to fix (:func:`with_claims`); and allocated devices no pod of ours accounts for are
charged as placeholders, so nothing else is put on them (:func:`charge_claim_placeholders`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpusched.framework import ClusterState
from gpusched.live.dra import DraView, PodClaims
from gpusched.live.translate_pod import PodInfo
from gpusched.model import MILLI_PER_GPU, JobId, Node, NodeName, Task, TaskId, TaskShape

__all__ = ["charge_claim_placeholders", "dra_nodes", "with_claims"]


def dra_nodes(nodes: Iterable[Node], dra: DraView | None) -> list[Node]:
    """``nodes`` by name, each with its DRA GPUs (when it publishes any) as its GPUs."""
    out = []
    for raw in sorted(nodes, key=lambda n: n.name):
        node = raw
        devices = dra.devices.get(node.name) if dra is not None else None
        if devices:
            first = devices[0]
            node = Node.with_gpus(
                node.name,
                cpu_milli=node.cpu_milli,
                memory_mib=node.memory_mib,
                gpu_count=len(devices),
                gpu_model=first.product or (node.gpus[0].model if node.gpus else "unknown"),
                gpu_memory_mib=first.memory_mib,
                labels=node.labels,
                taints=node.taints,
            )
        out.append(node)
    return out


def with_claims(pod: PodInfo, dra: DraView | None) -> tuple[PodInfo, PodClaims]:
    """``pod`` with the GPUs of its DRA claims as its request (bound: those allocated)."""
    if not pod.claims:
        return pod, PodClaims()
    if dra is None:
        why = "this cluster does not serve resource.k8s.io/v1 (DRA)"
        return replace(pod, problem=pod.problem or why), PodClaims(problem=why)
    claims = dra.pod(pod.namespace, pod.uid, pod.claims)
    if claims.problem:
        return replace(pod, problem="; ".join(filter(None, (pod.problem, claims.problem)))), claims
    gpus = len(claims.allocated) if (pod.node or claims.allocated) else claims.count
    if gpus and pod.num_gpu:
        why = "the pod requests nvidia.com/gpu and GPUs through DRA claims; use one of them"
        return replace(pod, problem=why), replace(claims, problem=why)
    if not gpus:
        return pod, claims
    found = claims.allocated if claims.allocated else pod.gpus
    return replace(pod, num_gpu=gpus, gpu_milli=MILLI_PER_GPU, gpus=found), claims


def charge_claim_placeholders(
    state: ClusterState, dra: DraView | None, charged_uids: set[str], pending_uids: set[str]
) -> None:
    """Charge allocated DRA GPUs that no bound or pending pod of ours accounts for (a claim
    allocated by another scheduler, or whose pod is gone) as placeholders."""
    if dra is None:
        return
    for key, claim in sorted(dra.claims.items()):
        if not claim.allocated or any(u in charged_uids | pending_uids for u in claim.reserved_for):
            continue
        for i, (_, pool, device) in enumerate(claim.allocated):
            found = dra.gpu_index(pool, device)
            if found is None:
                continue
            row = state.index.get(NodeName(found[0]))
            if row is None or state.gpu_free[row][found[1]] < MILLI_PER_GPU:
                continue
            shape = TaskShape(0, 0, 1, MILLI_PER_GPU)
            task = Task(TaskId(f"claim:{key}:{i}"), JobId(f"claim:{key}"), shape)
            state.allocate(task, row, (found[1],))
