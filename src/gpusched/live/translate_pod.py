"""Kubernetes Pods (decoded JSON) into :class:`PodInfo`, the slim value the live scheduler keeps
of a pod, and the annotations gpusched reads and writes on pods.

A **Pod** becomes :class:`PodInfo`: its summed requests (``max`` with each init container),
GPU count from ``nvidia.com/gpu`` or MIG instances from ``nvidia.com/mig-<profile>``
(the device plugin's *mixed* strategy, e.g. ``nvidia.com/mig-1g.10gb: 1``), node
selector, tolerations and required node affinity,
the gang it belongs to (label ``scheduling.x-k8s.io/pod-group``), its priority and, once
bound, the GPU indices or MIG instances gpusched chose (annotations ``gpusched.dev/gpus``,
``gpusched.dev/mig``).

Annotations users write (docs/live.md):

``gpusched.dev/gpu-milli: "500"``
    a fractional GPU: this share (1..999 thousandths) of one GPU; the pod requests no
    ``nvidia.com/gpu`` (the device plugin only hands out whole GPUs).
``gpusched.dev/runtime-estimate: "90m"``
    the expected run time, with the labels ``gpusched.dev/user`` and ``gpusched.dev/kind``
    (:mod:`gpusched.live.estimates`).

Annotations gpusched writes when it binds (through the Binding, in the same write):

``gpusched.dev/gpus: "0,3"``
    the indices of the GPUs the pod was placed on, as the device plugin numbers them;
``gpusched.dev/gpu-milli``
    (for a fractional pod) the share held on that GPU;
``gpusched.dev/mig: "0:1g.10gb@6,1:3g.40gb@4"``
    (for a MIG pod) the instances it holds, ``GPU:PROFILE@START``, comma-separated.

A malformed annotation or request never raises: the pod carries ``problem``, a message saying
what is wrong and how to fix it, and stays pending with that reason.

Names and quantities are shared with the Node translation (:mod:`gpusched.live.translate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpusched.errors import ConfigError
from gpusched.live.estimates import job_fields
from gpusched.live.translate import (
    GPU_MILLI_ANNOTATION,
    GPU_RESOURCE,
    GPUS_ANNOTATION,
    MIG_ANNOTATION,
    MIG_RESOURCE_PREFIX,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    parse_quantity,
    parse_timestamp,
    to_mib,
    to_milli,
)
from gpusched.model import Constraints, Effect, Expression, JobKind, Operator, Toleration
from gpusched.model.mig import MigSlice, compute_slices_of, parse_placement
from gpusched.model.resources import MILLI_PER_GPU

__all__ = ["PodInfo", "mig_annotation", "parse_mig_slices", "pod_from_k8s"]


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the live scheduler keeps of a pod.

    Attributes:
        key: ``namespace/name``.
        group: the pod-group name (label ``scheduling.x-k8s.io/pod-group``), ``""`` for none.
        node: the node it is bound to, ``""`` while pending.
        created: ``metadata.creationTimestamp`` (seconds since the epoch).
        started: ``status.startTime`` (when it began running; ``0.0`` before).
        gpus: GPU indices gpusched recorded at bind time (``None`` when not recorded).
        problem: why the pod cannot be scheduled as written (bad annotation), else ``""``.
        scheduled_reason: the ``reason`` of its current ``PodScheduled`` condition.
        scheduled_message: the ``message`` of its current ``PodScheduled`` condition.
        nominated: ``status.nominatedNodeName`` (a preemptor's node while victims leave).
        queue: the queue the pod names (label ``gpusched.dev/queue``), ``""`` for none.
        priority_class: ``spec.priorityClassName``.
        has_priority: whether ``spec.priority`` is set (the Priority admission plugin sets it).
        preempts: ``spec.preemptionPolicy`` != ``Never``; ``None`` when not set.
        native_group: ``group`` comes from ``spec.schedulingGroup.podGroupName`` (the native
            ``scheduling.k8s.io`` PodGroup), not from the scheduler-plugins label.
        claims: ``(name in the pod, ResourceClaim name)`` of each DRA claim the pod uses
            (a template's claim once ``status.resourceClaimStatuses`` names it).
        mig_profile: the MIG profile of its ``nvidia.com/mig-<profile>`` request, ``""`` for
            none; ``mig_count`` instances of it (``num_gpu`` is then 0).
        mig: MIG instances gpusched recorded at bind time (``None`` when not recorded).
        user: whose job it is (label ``gpusched.dev/user``, else the namespace).
        kind: what the job is for (label ``gpusched.dev/kind``, else ``batch``).
        runtime_estimate: seconds from annotation ``gpusched.dev/runtime-estimate``, if any.
    """

    namespace: str
    name: str
    uid: str
    scheduler: str
    node: str
    phase: str
    deleting: bool
    created: float
    started: float
    priority: int
    group: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    constraints: Constraints
    gpus: tuple[int, ...] | None
    problem: str
    scheduled_reason: str
    scheduled_message: str
    nominated: str
    resource_version: str
    queue: str = ""
    priority_class: str = ""
    has_priority: bool = True
    preempts: bool | None = None
    native_group: bool = False
    claims: tuple[tuple[str, str], ...] = ()
    mig_profile: str = ""
    mig_count: int = 0
    mig: tuple[MigSlice, ...] | None = None
    user: str = ""
    kind: JobKind = JobKind.BATCH
    runtime_estimate: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def group_key(self) -> str:
        return f"{self.namespace}/{self.group}" if self.group else ""


def _requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        resources = c.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in merged.items():
            total[name] = total.get(name, Decimal(0)) + parse_quantity(value)
    for c in spec.get("initContainers") or []:
        resources = c.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in merged.items():
            total[name] = max(total.get(name, Decimal(0)), parse_quantity(value))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + parse_quantity(value)
    return total


def _expression(raw: Mapping[str, Any]) -> Expression:
    return Expression(
        str(raw["key"]), Operator(raw["operator"]), tuple(str(v) for v in raw.get("values") or ())
    )


def _constraints(spec: Mapping[str, Any]) -> Constraints:
    tolerations = []
    for raw in spec.get("tolerations") or []:
        effect = raw.get("effect") or None
        tolerations.append(
            Toleration(
                key=str(raw.get("key", "")),
                operator=Operator(raw.get("operator") or "Equal"),
                value=str(raw.get("value", "")),
                effect=Effect(effect) if effect else None,
            )
        )
    required: list[tuple[Expression, ...]] = []
    preferred: list[tuple[int, tuple[Expression, ...]]] = []
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    hard = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in hard.get("nodeSelectorTerms") or []:
        required.append(tuple(_expression(e) for e in term.get("matchExpressions") or []))
    for soft in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        term = soft.get("preference") or {}
        preferred.append(
            (
                int(soft.get("weight", 1)),
                tuple(_expression(e) for e in term.get("matchExpressions") or []),
            )
        )
    selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    return Constraints(
        node_selector=selector,
        tolerations=tuple(tolerations),
        required=tuple(required),
        preferred=tuple(preferred),
    )


def _share(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < MILLI_PER_GPU else None


def _gpu_indices(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        return None


def mig_annotation(slices: tuple[MigSlice, ...]) -> str:
    """The ``gpusched.dev/mig`` value of ``slices``: ``"0:1g.10gb@6,1:3g.40gb@4"``."""
    return ",".join(str(sl) for sl in slices)


def parse_mig_slices(text: str | None) -> tuple[MigSlice, ...] | None:
    """:func:`mig_annotation` read back; ``None`` when absent or malformed."""
    if not text:
        return None
    out = []
    for part in text.split(","):
        gpu, sep, rest = part.strip().partition(":")
        if not sep or not gpu.isdigit():
            return None
        try:
            place = parse_placement(rest)
        except ConfigError:
            return None
        out.append(MigSlice(int(gpu), place.profile, place.start))
    return tuple(out)


def _mig_request(requests: Mapping[str, Decimal], num_gpu: int) -> tuple[str, int, str]:
    """``(profile, count, problem)`` of the pod's ``nvidia.com/mig-<profile>`` requests."""
    asked = {
        name.removeprefix(MIG_RESOURCE_PREFIX): int(value)
        for name, value in requests.items()
        if name.startswith(MIG_RESOURCE_PREFIX) and value > 0
    }
    if not asked:
        return "", 0, ""
    names = ", ".join(f"{MIG_RESOURCE_PREFIX}{p}" for p in sorted(asked))
    if len(asked) > 1:
        return "", 0, f"the pod requests {names}; gpusched places one MIG profile per pod"
    ((profile, count),) = asked.items()
    if num_gpu:
        return (
            "",
            0,
            (
                f"the pod requests {names} and {GPU_RESOURCE}={num_gpu}; a pod uses MIG instances "
                f"or whole GPUs, not both: remove one of them"
            ),
        )
    try:
        compute_slices_of(profile)
    except ConfigError as exc:
        return "", 0, f"resource {MIG_RESOURCE_PREFIX}{profile}: {exc}"
    if count < 1:
        return "", 0, f"resource {names}: expected a whole number of instances, at least 1"
    return profile, count, ""


def pod_from_k8s(obj: Mapping[str, Any]) -> PodInfo:
    """The scheduling view of a Pod object (see the module docstring)."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    problems: list[str] = []
    try:
        requests = _requests(spec)
    except ValueError as exc:
        problems.append(f"resources: {exc}")
        requests = {}
    try:
        constraints = _constraints(spec)
    except (ValueError, KeyError) as exc:
        problems.append(f"tolerations or node affinity: {exc}")
        constraints = Constraints()
    share = annotations.get(GPU_MILLI_ANNOTATION)
    num_gpu, gpu_milli, share_problem = _gpu_request(
        int(requests.get(GPU_RESOURCE, Decimal(0))), share
    )
    if share_problem:
        problems.append(share_problem)
    mig_profile, mig_count, mig_problem = _mig_request(
        requests, int(requests.get(GPU_RESOURCE, Decimal(0)))
    )
    if mig_problem:
        problems.append(mig_problem)
    elif mig_profile and share is not None:
        problems.append(
            f"annotation {GPU_MILLI_ANNOTATION} with {MIG_RESOURCE_PREFIX}{mig_profile}: a MIG "
            "pod holds whole instances; remove the annotation"
        )
    scheduled: Mapping[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {}
    )
    group = labels.get(POD_GROUP_LABEL, "")
    native = str((spec.get("schedulingGroup") or {}).get("podGroupName") or "")
    if native and group:
        problems.append(_two_gangs(native, group))
    claims, claim_problem = _claims(spec, status)
    if claim_problem:
        problems.append(claim_problem)
    run = job_fields(labels, annotations, meta.get("namespace", ""))
    problems.extend(run.problems)
    policy = spec.get("preemptionPolicy")
    return PodInfo(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        scheduler=spec.get("schedulerName", "default-scheduler"),
        node=spec.get("nodeName") or "",
        phase=status.get("phase", "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        created=parse_timestamp(meta.get("creationTimestamp")),
        started=parse_timestamp(status.get("startTime")),
        priority=int(spec.get("priority") or 0),
        group=native or group,
        cpu_milli=to_milli(requests.get("cpu", 0)),
        memory_mib=to_mib(requests.get("memory", 0)),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        constraints=constraints,
        gpus=_gpu_indices(annotations.get(GPUS_ANNOTATION)),
        problem="; ".join(problems),
        scheduled_reason=str(scheduled.get("reason", "")),
        scheduled_message=str(scheduled.get("message", "")),
        nominated=str(status.get("nominatedNodeName") or ""),
        resource_version=str(meta.get("resourceVersion", "")),
        queue=str(labels.get(QUEUE_LABEL, "")),
        priority_class=str(spec.get("priorityClassName") or ""),
        has_priority=spec.get("priority") is not None,
        preempts=None if policy is None else policy != "Never",
        native_group=bool(native),
        claims=claims,
        mig_profile=mig_profile,
        mig_count=mig_count,
        mig=parse_mig_slices(annotations.get(MIG_ANNOTATION)),
        user=run.user,
        kind=run.kind,
        runtime_estimate=run.estimate,
    )


def _gpu_request(num_gpu: int, share: str | None) -> tuple[int, int, str]:
    """``(num_gpu, gpu_milli, problem)`` from the ``nvidia.com/gpu`` request and the
    ``gpusched.dev/gpu-milli`` annotation (a fractional pod asks no ``nvidia.com/gpu``)."""
    gpu_milli = MILLI_PER_GPU if num_gpu else 0
    if share is None:
        return num_gpu, gpu_milli, ""
    value = _share(share)
    if value is None:
        return (
            num_gpu,
            gpu_milli,
            f"annotation {GPU_MILLI_ANNOTATION}: got {share!r}; expected an integer "
            "share of one GPU from 1 to 999 (for whole GPUs request nvidia.com/gpu instead)",
        )
    if num_gpu:
        return (
            num_gpu,
            gpu_milli,
            f"annotation {GPU_MILLI_ANNOTATION}={share!r} with nvidia.com/gpu={num_gpu}: "
            "a fractional pod must not also request nvidia.com/gpu; remove one of them",
        )
    return 1, value, ""


def _two_gangs(native: str, group: str) -> str:
    """The problem of a pod that joins a native PodGroup and names another by label."""
    return (
        f"the pod joins PodGroup {native!r} (spec.schedulingGroup) and {group!r} (label "
        f"{POD_GROUP_LABEL}); one gang at most: remove the label"
    )


def _claims(
    spec: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[tuple[tuple[str, str], ...], str]:
    """The pod's DRA claims as ``(name, ResourceClaim name)``, and a problem for a template
    whose claim has not been created yet."""
    generated = {
        str(s.get("name")): str(s.get("resourceClaimName") or "")
        for s in status.get("resourceClaimStatuses") or []
    }
    out: list[tuple[str, str]] = []
    for ref in spec.get("resourceClaims") or []:
        name = str(ref.get("name", ""))
        claim = ref.get("resourceClaimName") or generated.get(name, "")
        if not claim:
            return (), (
                f"resource claim {name!r}: its ResourceClaimTemplate has no claim yet "
                "(kube-controller-manager creates it); waiting for it"
            )
        out.append((name, str(claim)))
    return tuple(out), ""
