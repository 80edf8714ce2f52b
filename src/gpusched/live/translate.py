"""Kubernetes objects (decoded JSON) into slim values the live scheduler keeps in its caches:
the vocabulary they share (resource, label and annotation names, quantities) and Nodes.

Only the fields scheduling needs are kept, once, when a watch event arrives. Pods become
:class:`~gpusched.live.translate_pod.PodInfo` (:mod:`gpusched.live.translate_pod`), PodGroups
:class:`~gpusched.live.translate_podgroup.PodGroupInfo`
(:mod:`gpusched.live.translate_podgroup`); this module holds the names and quantity parsing
they all use, and the Node.

A **Node** becomes :class:`gpusched.model.Node`: allocatable ``cpu``/``memory``, GPUs from
allocatable ``nvidia.com/gpu``, their model from the GPU Feature Discovery label
``nvidia.com/gpu.product`` and memory from ``nvidia.com/gpu.memory`` (MiB), labels, taints.
A cordoned node gets the taint ``node.kubernetes.io/unschedulable:NoSchedule`` and a node
that is not Ready ``node.kubernetes.io/not-ready:NoSchedule`` (what the node lifecycle
controller would add), so only pods tolerating them land there. MIG-enabled GPUs come from
the annotation ``gpusched.dev/mig-layout`` (below).

Annotations an administrator writes on a Node (docs/live.md):

``gpusched.dev/mig-layout: "0=1g.10gb@0,1g.10gb@1,3g.40gb@4;1=reconfigurable"``
    the node's MIG-enabled GPUs, ``;``-separated ``INDEX=LAYOUT`` entries: ``LAYOUT`` is the
    GPU's instances as ``PROFILE@START`` (comma-separated; ``nvidia-smi mig -lgi`` shows
    them) or ``reconfigurable`` (instances created where gpusched chooses). The node has
    ``nvidia.com/gpu`` (its plain GPUs, as the mixed strategy counts them) plus one GPU per
    entry; indices run over all of them. GPUs must be A100/H100 with a known memory label.
    A malformed annotation is logged once per node and value and the node has no MIG GPUs.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from gpusched.errors import ConfigError
from gpusched.model import Effect, Node, Taint
from gpusched.model.mig import MigConfig, parse_placement

__all__ = [
    "GPUS_ANNOTATION",
    "GPU_MILLI_ANNOTATION",
    "GPU_RESOURCE",
    "MIG_ANNOTATION",
    "MIG_LAYOUT_ANNOTATION",
    "MIG_RESOURCE_PREFIX",
    "POD_GROUP_LABEL",
    "node_from_k8s",
    "parse_mig_layout",
    "parse_quantity",
    "parse_timestamp",
    "to_mib",
    "to_milli",
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


def to_milli(text: object) -> int:
    return int((parse_quantity(text) * 1000).to_integral_value(rounding="ROUND_CEILING"))


def to_mib(text: object) -> int:
    return int((parse_quantity(text) / _MIB).to_integral_value(rounding="ROUND_CEILING"))


def _count(text: object) -> int:
    return int(parse_quantity(text).to_integral_value(rounding="ROUND_FLOOR"))


def parse_timestamp(text: object) -> float:
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
        cpu = to_milli(alloc.get("cpu", 0))
        memory = to_mib(alloc.get("memory", 0))
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
