"""Kubernetes objects (decoded JSON) into slim values the live scheduler keeps in its caches.

Only the fields scheduling needs are kept, once, when a watch event arrives:

* a **Node** becomes :class:`gpusched.model.Node`: allocatable ``cpu``/``memory``, GPUs from
  allocatable ``nvidia.com/gpu``, their model from the GPU Feature Discovery label
  ``nvidia.com/gpu.product`` and memory from ``nvidia.com/gpu.memory`` (MiB), labels, taints.
  A cordoned node gets the taint ``node.kubernetes.io/unschedulable:NoSchedule`` and a node
  that is not Ready ``node.kubernetes.io/not-ready:NoSchedule`` (what the node lifecycle
  controller would add), so only pods tolerating them land there. MIG-enabled GPUs come from
  the annotation ``gpusched.dev/mig-layout`` (below).
* a **Pod** becomes :class:`PodInfo`: its summed requests (``max`` with each init container),
  GPU count from ``nvidia.com/gpu`` or MIG instances from ``nvidia.com/mig-<profile>``
  (the device plugin's *mixed* strategy, e.g. ``nvidia.com/mig-1g.10gb: 1``), node
  selector, tolerations and required node affinity,
  the gang it belongs to (label ``scheduling.x-k8s.io/pod-group``), its priority and, once
  bound, the GPU indices or MIG instances gpusched chose (annotations ``gpusched.dev/gpus``,
  ``gpusched.dev/mig``).
* a scheduler-plugins **PodGroup** (``scheduling.x-k8s.io/v1alpha1``) becomes
  :class:`PodGroupInfo` (``minMember``); so does a native ``scheduling.k8s.io/v1alpha2``
  PodGroup (``spec.schedulingPolicy.gang.minCount``), which pods join with
  ``spec.schedulingGroup.podGroupName``.

Annotations users write (docs/live.md):

``gpusched.dev/gpu-milli: "500"``
    a fractional GPU: this share (1..999 thousandths) of one GPU; the pod requests no
    ``nvidia.com/gpu`` (the device plugin only hands out whole GPUs).

Annotations an administrator writes on a Node (docs/live.md):

``gpusched.dev/mig-layout: "0=1g.10gb@0,1g.10gb@1,3g.40gb@4;1=reconfigurable"``
    the node's MIG-enabled GPUs, ``;``-separated ``INDEX=LAYOUT`` entries: ``LAYOUT`` is the
    GPU's instances as ``PROFILE@START`` (comma-separated; ``nvidia-smi mig -lgi`` shows
    them) or ``reconfigurable`` (instances created where gpusched chooses). The node has
    ``nvidia.com/gpu`` (its plain GPUs, as the mixed strategy counts them) plus one GPU per
    entry; indices run over all of them. GPUs must be A100/H100 with a known memory label.
    A malformed annotation is logged once per node and value and the node has no MIG GPUs.

Annotations gpusched writes when it binds (through the Binding, in the same write):

``gpusched.dev/gpus: "0,3"``
    the indices of the GPUs the pod was placed on, as the device plugin numbers them;
``gpusched.dev/gpu-milli``
    (for a fractional pod) the share held on that GPU;
``gpusched.dev/mig: "0:1g.10gb@6,1:3g.40gb@4"``
    (for a MIG pod) the instances it holds, ``GPU:PROFILE@START``, comma-separated.

A malformed annotation or request never raises: the pod carries ``problem``, a message saying
what is wrong and how to fix it, and stays pending with that reason.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from gpusched.errors import ConfigError
from gpusched.model import (
    Constraints,
    Effect,
    Expression,
    Node,
    Operator,
    Taint,
    Toleration,
)
from gpusched.model.mig import (
    MigConfig,
    MigSlice,
    compute_slices_of,
    parse_placement,
)
from gpusched.model.resources import MILLI_PER_GPU

__all__ = [
    "GPUS_ANNOTATION",
    "GPU_MILLI_ANNOTATION",
    "GPU_RESOURCE",
    "MIG_ANNOTATION",
    "MIG_LAYOUT_ANNOTATION",
    "MIG_RESOURCE_PREFIX",
    "POD_GROUP_LABEL",
    "PodGroupInfo",
    "PodInfo",
    "mig_annotation",
    "native_podgroup_from_k8s",
    "node_from_k8s",
    "parse_mig_layout",
    "parse_mig_slices",
    "parse_quantity",
    "pod_from_k8s",
    "podgroup_from_k8s",
]

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
QUEUE_LABEL = "gpusched.dev/queue"
GPUS_ANNOTATION = "gpusched.dev/gpus"
GPU_MILLI_ANNOTATION = "gpusched.dev/gpu-milli"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_LAYOUT_ANNOTATION = "gpusched.dev/mig-layout"
MIG_ANNOTATION = "gpusched.dev/mig"

log = logging.getLogger(__name__)
#: The last malformed ``gpusched.dev/mig-layout`` logged per node (so each is logged once).
_LOGGED_LAYOUTS: dict[str, str] = {}
UNKNOWN_MODEL = "unknown"

_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIX = {
    None: Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_MIB = Decimal(2**20)


def parse_quantity(text: object) -> Decimal:
    """A Kubernetes quantity (``"500m"``, ``"80Gi"``, ``"1k"``, ``"1e3"``) as a number;
    ``ValueError`` naming the accepted forms."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 2, 500m, 80Gi)")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 2, 500m, 80Gi)") from None


def _milli(text: object) -> int:
    return int((parse_quantity(text) * 1000).to_integral_value(rounding="ROUND_CEILING"))


def _mib(text: object) -> int:
    return int((parse_quantity(text) / _MIB).to_integral_value(rounding="ROUND_CEILING"))


def _count(text: object) -> int:
    return int(parse_quantity(text).to_integral_value(rounding="ROUND_FLOOR"))


def _timestamp(text: object) -> float:
    if not text:
        return 0.0
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


# -- nodes -----------------------------------------------------------------------------------


def _taints(spec: Mapping[str, Any]) -> list[Taint]:
    taints = []
    for raw in spec.get("taints") or []:
        try:
            effect = Effect(raw.get("effect", "NoSchedule"))
        except ValueError:
            continue
        taints.append(Taint(str(raw.get("key", "")), str(raw.get("value", "")), effect))
    return taints


def _ready(status: Mapping[str, Any]) -> bool:
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def parse_mig_layout(text: str) -> dict[int, MigConfig]:
    """``"0=1g.10gb@0,3g.40gb@4;1=reconfigurable"`` as ``{GPU index: MigConfig}``;
    :class:`ConfigError` saying what is wrong and the expected form. Layouts are checked
    against the GPU's geometry when the node is built (:func:`node_from_k8s`)."""
    form = "expected INDEX=PROFILE@START[,...] or INDEX=reconfigurable, ';'-separated"
    out: dict[int, MigConfig] = {}
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        index, sep, spec = entry.partition("=")
        if not sep or not index.strip().isdigit():
            raise ConfigError(f"entry {entry!r}: {form}")
        gpu, spec = int(index), spec.strip()
        if gpu in out:
            raise ConfigError(f"entry {entry!r}: GPU {gpu} is named twice")
        if spec == "reconfigurable":
            out[gpu] = MigConfig(reconfigurable=True)
            continue
        places = tuple(parse_placement(p.strip()) for p in spec.split(",") if p.strip())
        if not places:
            raise ConfigError(f"entry {entry!r}: no instances; {form}")
        out[gpu] = MigConfig(layout=places)
    if not out:
        raise ConfigError(f"empty; {form}")
    return out


def _mig_configs(text: str, plain: int) -> tuple[MigConfig | None, ...]:
    """Per GPU of a node with ``plain`` non-MIG GPUs and the layout ``text``."""
    layouts = parse_mig_layout(text)
    total = plain + len(layouts)
    for gpu in layouts:
        if gpu >= total:
            raise ConfigError(
                f"GPU {gpu}: the node has {total} GPUs ({plain} from {GPU_RESOURCE} and "
                f"{len(layouts)} MIG-enabled), indices 0..{total - 1}"
            )
    return tuple(layouts.get(g) for g in range(total))


def node_from_k8s(obj: Mapping[str, Any]) -> Node:
    """The scheduling view of a Node object (see the module docstring)."""
    node = _node_from_k8s(obj, mig_ok=True)
    return node if node is not None else _plain_node(obj)


def _plain_node(obj: Mapping[str, Any]) -> Node:
    node = _node_from_k8s(obj, mig_ok=False)
    assert node is not None
    return node


def _node_from_k8s(obj: Mapping[str, Any], *, mig_ok: bool) -> Node | None:
    """The node, or ``None`` when its MIG layout annotation is malformed (logged)."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    labels: dict[str, str] = dict(meta.get("labels") or {})
    alloc = status.get("allocatable") or status.get("capacity") or {}
    taints = _taints(spec)
    if spec.get("unschedulable"):
        taints.append(Taint("node.kubernetes.io/unschedulable"))
    if not _ready(status):
        taints.append(Taint("node.kubernetes.io/not-ready"))
    try:
        cpu = _milli(alloc.get("cpu", 0))
        memory = _mib(alloc.get("memory", 0))
        gpus = _count(alloc.get(GPU_RESOURCE, 0))
    except ValueError:
        cpu = memory = gpus = 0
    try:
        gpu_memory = int(labels.get(GPU_MEMORY_LABEL, "0"))
    except ValueError:
        gpu_memory = 0
    layout = (meta.get("annotations") or {}).get(MIG_LAYOUT_ANNOTATION)
    try:
        mig = _mig_configs(str(layout), gpus) if layout is not None and mig_ok else ()
        total = len(mig) or gpus
        return Node.with_gpus(
            meta["name"],
            cpu_milli=cpu,
            memory_mib=memory,
            gpu_count=total,
            gpu_model=labels.get(PRODUCT_LABEL, UNKNOWN_MODEL) if total else "",
            gpu_memory_mib=gpu_memory,
            labels=labels,
            taints=tuple(taints),
            mig=mig,
        )
    except ConfigError as exc:
        name = str(meta["name"])
        if _LOGGED_LAYOUTS.get(name) != layout:
            _LOGGED_LAYOUTS[name] = str(layout)
            log.warning(
                "node %s: annotation %s=%r ignored (the node gets no MIG GPUs): %s",
                name,
                MIG_LAYOUT_ANNOTATION,
                layout,
                exc,
            )
        return None


# -- pods ------------------------------------------------------------------------------------


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
    num_gpu = int(requests.get(GPU_RESOURCE, Decimal(0)))
    gpu_milli = MILLI_PER_GPU if num_gpu else 0
    share = annotations.get(GPU_MILLI_ANNOTATION)
    if share is not None:
        value = _share(share)
        if value is None:
            problems.append(
                f"annotation {GPU_MILLI_ANNOTATION}: got {share!r}; expected an integer "
                "share of one GPU from 1 to 999 (for whole GPUs request nvidia.com/gpu instead)"
            )
        elif num_gpu:
            problems.append(
                f"annotation {GPU_MILLI_ANNOTATION}={share!r} with nvidia.com/gpu={num_gpu}: "
                "a fractional pod must not also request nvidia.com/gpu; remove one of them"
            )
        else:
            num_gpu, gpu_milli = 1, value
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
        problems.append(
            f"the pod joins PodGroup {native!r} (spec.schedulingGroup) and {group!r} (label "
            f"{POD_GROUP_LABEL}); one gang at most: remove the label"
        )
    claims, claim_problem = _claims(spec, status)
    if claim_problem:
        problems.append(claim_problem)
    policy = spec.get("preemptionPolicy")
    return PodInfo(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        scheduler=spec.get("schedulerName", "default-scheduler"),
        node=spec.get("nodeName") or "",
        phase=status.get("phase", "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        created=_timestamp(meta.get("creationTimestamp")),
        started=_timestamp(status.get("startTime")),
        priority=int(spec.get("priority") or 0),
        group=native or group,
        cpu_milli=_milli(requests.get("cpu", 0)),
        memory_mib=_mib(requests.get("memory", 0)),
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


# -- pod groups ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """A gang: a scheduler-plugins PodGroup, or a native ``scheduling.k8s.io`` one
    (``native``), with its minimum size and, for native groups, its priority (``None``: the
    pods' own)."""

    namespace: str
    name: str
    min_member: int
    uid: str = ""
    native: bool = False
    priority: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def podgroup_from_k8s(obj: Mapping[str, Any]) -> PodGroupInfo:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    try:
        min_member = int(spec.get("minMember") or 0)
    except (TypeError, ValueError):
        min_member = 0
    return PodGroupInfo(meta.get("namespace", ""), meta["name"], min_member, meta.get("uid", ""))


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
    return PodGroupInfo(
        meta.get("namespace", ""),
        meta["name"],
        min_count,
        meta.get("uid", ""),
        native=True,
        priority=int(priority) if isinstance(priority, int) else None,
    )
