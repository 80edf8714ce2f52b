"""Queues from the ``Queue`` CRD (``gpusched.dev/v1alpha1``), who may use them, and priority
classes from ``PriorityClass`` objects.

A Queue (cluster-scoped) maps onto :class:`gpusched.model.QueueSpec`::

    spec:
      parent: org                  # optional
      weight: 2                    # optional, > 0, default 1
      guaranteed:   {gpu: 16, gpu/NVIDIA-H100-80GB-HBM3: 8, cpu: 256, memory: 2Ti}
      limit:        {gpu: 32}      # optional: no cap
      lendingLimit: {gpu: 4}       # optional: all idle guarantee may be lent
      namespaces: [team-a, team-a-dev]   # who may use it; "*" for every namespace

Amounts: ``gpu`` and ``gpu/<MODEL>`` in GPUs (``0.5`` allowed; the model is the node's
``nvidia.com/gpu.product``), ``cpu`` in cores or ``500m``, ``memory`` as a quantity (``2Ti``).

**Who may use a queue.** A namespace may use queue ``Q`` when ``Q.spec.namespaces`` lists it
(or ``"*"``), or when the namespace's label ``gpusched.dev/queue`` names ``Q`` (labelling
namespaces is a cluster-admin right, so the label is an authorisation too). **Which queue a
pod uses**: the pod's label ``gpusched.dev/queue``; else its namespace's label
``gpusched.dev/queue``; else the first Queue (by name) whose ``namespaces`` list the namespace
by name. While no usable Queue exists, pods need none (no quota applies); once one does, a pod
with none of these stays pending, told which queues its namespace may use. A pod naming a queue
its namespace may not use, or a queue that does not exist, stays pending with a message saying
which namespaces may use it and how to fix it.

**Bad queues.** A Queue with a negative amount, a bad quantity, a weight <= 0, a limit below
its guarantee, a missing or invalid parent, a parent loop, or children guaranteed more than it,
is left out of the tree: :func:`build_queues` returns why (naming the field), the scheduler
writes it as an Event and the condition ``Accepted=False`` on the Queue, and the queue's pods
stay pending with that reason. The other queues keep working.

**Priority classes.** Pods normally carry ``spec.priority`` and ``spec.preemptionPolicy``, set
by the Priority admission plugin from their ``priorityClassName``. Where a pod lacks them (the
plugin is off), the PriorityClass object gives them. ``preemptionPolicy: Never`` means the pod
never evicts others (it is still ordered by its priority).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpusched.errors import ConfigError
from gpusched.live.translate import QUEUE_LABEL, parse_quantity
from gpusched.model import CPU, GPU, MEMORY, MILLI_PER_GPU, QueueName, QueueSpec, QueueTree
from gpusched.model import Resources as ResourceAmounts

__all__ = [
    "QUEUES_PATH",
    "NamespaceInfo",
    "PriorityClassInfo",
    "QueueInfo",
    "QueueSet",
    "build_queues",
    "namespace_from_k8s",
    "priorityclass_from_k8s",
    "queue_from_k8s",
]

QUEUES_PATH = "/apis/gpusched.dev/v1alpha1/queues"
ANY_NAMESPACE = "*"
_MIB = Decimal(2**20)
_FIELDS = (("guaranteed", "guaranteed"), ("limit", "limit"), ("lendingLimit", "lending_limit"))


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A Queue object as read: its spec (``None`` when unreadable), who may use it, and
    ``problem`` (why it cannot be used, naming the field; ``""`` when it can).

    ``accepted`` is the ``(status, message)`` of its current ``Accepted`` condition, so the
    scheduler writes the condition only when it changes."""

    name: str
    uid: str
    spec: QueueSpec | None
    namespaces: frozenset[str]
    problem: str
    accepted: tuple[str, str] = ("", "")

    def allows(self, namespace: str, namespace_queue: str) -> bool:
        return (
            ANY_NAMESPACE in self.namespaces
            or namespace in self.namespaces
            or namespace_queue == self.name
        )

    def users(self) -> str:
        """Who may use the queue, in words (for messages)."""
        if ANY_NAMESPACE in self.namespaces:
            return "every namespace"
        listed = ", ".join(sorted(self.namespaces)) or "none listed"
        return f"namespaces {listed} (spec.namespaces) or labelled {QUEUE_LABEL}={self.name}"


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    """A namespace's default queue (its label ``gpusched.dev/queue``; ``""`` for none)."""

    name: str
    queue: str


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    """A PriorityClass: its value and whether its pods may evict others."""

    name: str
    value: int
    preempts: bool


def namespace_from_k8s(obj: Mapping[str, Any]) -> NamespaceInfo:
    meta = obj["metadata"]
    return NamespaceInfo(meta["name"], str((meta.get("labels") or {}).get(QUEUE_LABEL, "")))


def priorityclass_from_k8s(obj: Mapping[str, Any]) -> PriorityClassInfo:
    return PriorityClassInfo(
        obj["metadata"]["name"],
        int(obj.get("value") or 0),
        obj.get("preemptionPolicy", "PreemptLowerPriority") != "Never",
    )


def _amount(resource: str, value: object) -> int:
    """One amount in :class:`Resources` units; ``ValueError`` saying what is accepted."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"got {value!r}; expected a number or a quantity")
    number = parse_quantity(value)
    if not math.isfinite(float(number)):
        raise ValueError(f"got {value!r}; expected a finite amount")
    if number < 0:
        raise ValueError(f"got {value!r}; quotas must be >= 0")
    if resource == CPU:
        return int((number * 1000).to_integral_value(rounding="ROUND_CEILING"))
    if resource == MEMORY:
        # A plain number is bytes here, as everywhere in Kubernetes.
        return int((number / _MIB).to_integral_value(rounding="ROUND_CEILING"))
    if resource == GPU or (resource.startswith(f"{GPU}/") and len(resource) > len(GPU) + 1):
        milli = number * MILLI_PER_GPU
        if milli != milli.to_integral_value():
            raise ValueError(f"got {value!r}; GPUs are counted in thousandths (e.g. 0.125)")
        return int(milli)
    raise ValueError(
        f"unknown resource {resource!r}; expected gpu, gpu/<MODEL> (the node's "
        "nvidia.com/gpu.product), cpu or memory"
    )


def queue_from_k8s(obj: Mapping[str, Any]) -> QueueInfo:
    """The scheduling view of a Queue object; never raises on a bad spec (see ``problem``)."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    name = str(meta["name"])
    raw_namespaces = spec.get("namespaces") or []
    namespaces = frozenset(str(n) for n in raw_namespaces if isinstance(n, str))
    accepted = ("", "")
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Accepted":
            accepted = (str(cond.get("status", "")), str(cond.get("message", "")))
    info = QueueInfo(name, str(meta.get("uid", "")), None, namespaces, "", accepted)
    amounts: dict[str, ResourceAmounts | None] = {}
    for key, attr in _FIELDS:
        raw = spec.get(key)
        if raw is None:
            amounts[attr] = None
            continue
        if not isinstance(raw, Mapping):
            return _bad(info, f"spec.{key}: got {raw!r}; expected a map such as {{gpu: 8}}")
        converted: dict[str, int] = {}
        for resource, value in raw.items():
            try:
                converted[str(resource)] = _amount(str(resource), value)
            except ValueError as exc:
                return _bad(info, f"spec.{key}.{resource}: {exc}")
        amounts[attr] = ResourceAmounts(converted)
    weight = spec.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        return _bad(info, f"spec.weight: got {weight!r}; expected a number > 0")
    parent = spec.get("parent")
    queue = QueueSpec(
        name=QueueName(name),
        parent=QueueName(str(parent)) if parent else None,
        guaranteed=amounts["guaranteed"] or ResourceAmounts(),
        limit=amounts["limit"],
        lending_limit=amounts["lending_limit"],
        weight=float(weight),
    )
    try:
        QueueTree.build([QueueSpec(queue.name, None, queue.guaranteed, queue.limit, None, 1.0)])
    except ConfigError as exc:  # a limit below the guarantee
        return _bad(info, _field_message(str(exc)))
    return QueueInfo(name, info.uid, queue, namespaces, "", accepted)


def _bad(info: QueueInfo, problem: str) -> QueueInfo:
    return QueueInfo(info.name, info.uid, None, info.namespaces, problem, info.accepted)


def _field_message(core: str) -> str:
    """The core's ``queue 'q': field 'limit.gpu': ...`` as ``spec.limit.gpu: ...``."""
    marker = "field '"
    if marker not in core:
        return core
    rest = core.split(marker, 1)[1]
    path, _, what = rest.partition("': ")
    path = path.replace("lending_limit", "lendingLimit")
    return f"spec.{path}: {what}"


@dataclass(slots=True)
class QueueSet:
    """The usable queue tree of one cycle, and every Queue by name with its problem."""

    tree: QueueTree | None
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    def resolve(self, namespace: str, pod_queue: str, namespace_queue: str) -> tuple[str, str]:
        """``(queue, problem)`` for a pod (module docstring: which queue a pod uses)."""
        chosen = pod_queue or namespace_queue
        if not chosen:
            for name in sorted(self.queues):
                if namespace in self.queues[name].namespaces:
                    chosen = name
                    break
        if not chosen:
            if self.tree is None:
                return "", ""
            usable = [q for q in sorted(self.queues) if self.queues[q].allows(namespace, "")]
            hint = f"queues it may use: {', '.join(usable)}" if usable else "no queue lists it"
            return "", (
                f"no queue: namespace {namespace} has no label {QUEUE_LABEL} and the pod names "
                f"none ({hint}); label the pod {QUEUE_LABEL}=QUEUE, or ask a cluster admin to "
                f"label the namespace or add it to a Queue's spec.namespaces"
            )
        info = self.queues.get(chosen)
        via = (
            f"label {QUEUE_LABEL} on the pod"
            if pod_queue
            else f"label {QUEUE_LABEL} on namespace {namespace}"
        )
        if info is None:
            known = ", ".join(sorted(self.queues)) or "none exist"
            return chosen, (
                f"queue {chosen!r} (from the {via}) does not exist; known queues: {known}; "
                "create the Queue or name another one"
            )
        if not info.allows(namespace, namespace_queue):
            usable = [q for q in sorted(self.queues) if self.queues[q].allows(namespace, "")]
            hint = f"use one of {', '.join(usable)}" if usable else "ask for a queue of your own"
            return chosen, (
                f"namespace {namespace} may not use queue {chosen!r} (from the {via}); it is "
                f"for {info.users()}; {hint}, or ask a cluster admin to add {namespace} to the "
                f"Queue's spec.namespaces"
            )
        problem = self.problems.get(chosen)
        if problem:
            return chosen, f"queue {chosen!r} is not usable: {problem}"
        return chosen, ""


def build_queues(infos: Iterable[QueueInfo]) -> QueueSet:
    """The largest valid tree of ``infos``: bad queues (and their descendants) left out, each
    with its reason (see the module docstring)."""
    out = QueueSet(None, {q.name: q for q in infos})
    problems = out.problems
    for info in out.queues.values():
        if info.problem:
            problems[info.name] = info.problem
    while True:
        good = {n: q for n, q in out.queues.items() if n not in problems and q.spec is not None}
        changed = False
        for name, info in good.items():
            assert info.spec is not None
            parent = info.spec.parent
            if parent is not None and parent not in good:
                why = (
                    f"parent queue {parent!r} is not usable"
                    if parent in out.queues
                    else f"no Queue named {parent!r}"
                )
                problems[name] = f"spec.parent: {why}"
                changed = True
        if changed:
            continue
        if not good:
            return out
        try:
            out.tree = QueueTree.build(q.spec for q in good.values() if q.spec is not None)
        except ConfigError as exc:
            text = str(exc)
            culprit = text.split("'", 2)[1] if text.startswith("queue '") else ""
            if culprit not in good:
                culprit = sorted(good)[0]
            problems[culprit] = _field_message(text)
            continue
        return out
