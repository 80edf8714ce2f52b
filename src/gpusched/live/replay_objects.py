"""The Kubernetes objects a replay creates: kwok nodes for a cluster, pods and PodGroups for a
workload, PriorityClasses for its priorities (``gpusched replay``, :mod:`.replay`).

Rules:

* a **node** keeps its name, labels and taints; it is annotated ``kwok.x-k8s.io/node: fake``
  (kwok runs it), carries capacity ``cpu``, ``memory``, ``pods`` and ``nvidia.com/gpu``, and
  the GPU Feature Discovery labels ``nvidia.com/gpu.product`` (the GPU model),
  ``nvidia.com/gpu.memory`` (MiB, when known) and ``nvidia.com/gpu.count``; network topology
  labels are whatever the cluster file gives the node;
* a **task** becomes a pod named after the task (lower-cased; characters other than
  ``a-z0-9.-`` become ``-``). Whole GPUs are requested as ``nvidia.com/gpu``; a share of one
  GPU as the annotation ``gpusched.dev/gpu-milli`` when gpusched schedules it, else as one
  whole ``nvidia.com/gpu`` (what a stock scheduler can express). GPU models become a node
  selector (one model) or a required node affinity (several) on ``nvidia.com/gpu.product``;
  the task's own selector, tolerations and affinity are copied. Its run time, divided by the
  replay's speed, goes into ``gpusched.dev/kwok-runtime`` (kwok's ``gpusched-pod-complete``
  stage turns the pod Succeeded that long after it started); a job without a duration runs
  until the replay ends. What the scheduler may know of run times is written as the simulator
  gives it to the core: the labels ``gpusched.dev/kind`` (the job's kind) and
  ``gpusched.dev/user`` (its user; none for a job without one, so the namespace stands in for
  the simulator's empty user), and the job's ``runtime_estimate``, if any, divided by the
  speed, as ``gpusched.dev/runtime-estimate`` (wall seconds, like every time in the replay);
* a job of more than one task gets a scheduler-plugins **PodGroup** named after the job with
  ``minMember`` = its ``min_available``; its pods carry ``scheduling.x-k8s.io/pod-group``;
* a job's non-zero **priority** ``p`` becomes ``priorityClassName: gpusched-replay-p`` (``-mP``
  for negative values), a PriorityClass the replay creates.

Every object carries the label ``gpusched.dev/replay: RUN`` so the replay can find and delete
what it made. Names and label values that Kubernetes would refuse raise
:class:`~gpusched.errors.ConfigError` naming the node or job and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpusched.errors import ConfigError
from gpusched.live.estimates import (
    KIND_LABEL,
    RUNTIME_ESTIMATE_ANNOTATION,
    USER_LABEL,
    format_seconds,
)
from gpusched.live.translate import (
    GPU_MEMORY_LABEL,
    GPU_MILLI_ANNOTATION,
    GPU_RESOURCE,
    POD_GROUP_LABEL,
    PRODUCT_LABEL,
)
from gpusched.model import MILLI_PER_GPU, Constraints, Expression, Job, Node, Task

__all__ = [
    "JOB_ANNOTATION",
    "REPLAY_LABEL",
    "RUNTIME_ANNOTATION",
    "TASK_ANNOTATION",
    "ReplayNames",
    "node_object",
    "pod_object",
    "podgroup_object",
    "priority_class_name",
    "priority_class_object",
]

JsonObj = dict[str, Any]

REPLAY_LABEL = "gpusched.dev/replay"
RUNTIME_ANNOTATION = "gpusched.dev/kwok-runtime"
JOB_ANNOTATION = "gpusched.dev/replay-job"
TASK_ANNOTATION = "gpusched.dev/replay-task"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
PODGROUP_API = "scheduling.x-k8s.io/v1alpha1"

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_NOT_DNS = re.compile(r"[^a-z0-9.-]+")


def _check_label(value: str, where: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise ConfigError(
            f"{where}: got {value!r}; a Kubernetes label value has at most 63 characters "
            "from A-Z a-z 0-9 - _ . and starts and ends with a letter or digit; rename it in "
            "the cluster or workload file"
        )
    return value


@dataclass(slots=True)
class ReplayNames:
    """Kubernetes names for the workload's jobs and tasks (unique, DNS-1123)."""

    taken: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def name(self, original: str, where: str) -> str:
        """A valid, unique object name for ``original`` (the same name for the same input)."""
        known = self.taken.get(original)
        if known is not None:
            return known
        base = _NOT_DNS.sub("-", original.lower()).strip("-.")[:240] or "x"
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}-{n}"
        if not _DNS_NAME.match(name):
            raise ConfigError(f"{where}: cannot make a Kubernetes name of {original!r}")
        self.taken[original] = name
        self.used.add(name)
        return name


def node_object(node: Node, run: str) -> JsonObj:
    """A kwok node for ``node`` (see the module docstring)."""
    if not _DNS_NAME.match(node.name):
        raise ConfigError(
            f"node {node.name!r}: field 'name' is not a valid Kubernetes node name (lower-case "
            "letters, digits, '-' and '.'); rename it in the cluster file"
        )
    labels = {
        k: _check_label(v, f"node {node.name!r}: label {k!r}") for k, v in node.labels.items()
    }
    labels.update({"kubernetes.io/hostname": node.name, REPLAY_LABEL: run, "type": "kwok"})
    capacity = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": "1000",
    }
    if node.gpus:
        labels[PRODUCT_LABEL] = _check_label(
            str(node.gpus[0].model), f"node {node.name!r}: field 'gpu_model'"
        )
        labels["nvidia.com/gpu.count"] = str(len(node.gpus))
        if node.gpus[0].memory_mib:
            labels[GPU_MEMORY_LABEL] = str(node.gpus[0].memory_mib)
        capacity[GPU_RESOURCE] = str(len(node.gpus))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "annotations": {KWOK_ANNOTATION: "fake"},
            "labels": labels,
        },
        "spec": {
            "taints": [
                {"key": t.key, "value": t.value, "effect": t.effect.value} for t in node.taints
            ]
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def priority_class_name(priority: int) -> str:
    return f"gpusched-replay-{priority}" if priority >= 0 else f"gpusched-replay-m{-priority}"


def priority_class_object(priority: int, run: str) -> JsonObj:
    if not -(10**9) <= priority <= 10**9:
        raise ConfigError(
            f"job priority {priority}: Kubernetes priority classes take -1000000000 to "
            "1000000000; scale the workload's priorities into that range"
        )
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(priority), "labels": {REPLAY_LABEL: run}},
        "value": priority,
        "description": "created by gpusched replay",
    }


def podgroup_object(job: Job, name: str, namespace: str, run: str) -> JsonObj:
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "labels": {REPLAY_LABEL: run}},
        "spec": {"minMember": job.min_available},
    }


def _expression(e: Expression) -> JsonObj:
    out: JsonObj = {"key": e.key, "operator": e.operator.value}
    if e.values:
        out["values"] = list(e.values)
    return out


def _placement(task: Task) -> JsonObj:
    """nodeSelector, tolerations and affinity of a task, as pod spec fields."""
    shape = task.shape
    c: Constraints = shape.constraints
    spec: JsonObj = {}
    selector = dict(c.node_selector)
    models = [
        _check_label(m, f"job {task.job!r}: field 'gpu_models'") for m in sorted(shape.gpu_models)
    ]
    required = [[_expression(e) for e in term] for term in c.required]
    if len(models) == 1:
        selector[PRODUCT_LABEL] = models[0]
    elif models:
        gpu_term = {"key": PRODUCT_LABEL, "operator": "In", "values": models}
        required = [[*term, gpu_term] for term in required] or [[gpu_term]]
    if selector:
        spec["nodeSelector"] = selector
    if c.tolerations:
        spec["tolerations"] = [
            {
                "key": t.key,
                "operator": t.operator.value,
                **({"value": t.value} if t.value else {}),
                **({"effect": t.effect.value} if t.effect else {}),
            }
            for t in c.tolerations
        ]
    affinity: JsonObj = {}
    if required:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in required]
        }
    if c.preferred:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": [_expression(e) for e in term]}}
            for w, term in c.preferred
        ]
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return spec


def pod_object(
    job: Job,
    task: Task,
    *,
    name: str,
    group: str,
    namespace: str,
    run: str,
    scheduler: str,
    speed: float,
    shares: bool = True,
) -> JsonObj:
    """The pod of ``task`` (see the module docstring); ``group``: its PodGroup, or ``""``;
    ``shares``: the scheduler reads ``gpusched.dev/gpu-milli`` (else a share asks a whole
    GPU)."""
    shape = task.shape
    requests = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi"}
    limits: dict[str, str] = {}
    annotations = {JOB_ANNOTATION: str(job.id), TASK_ANNOTATION: str(task.id)}
    if shape.num_gpu and (shape.gpu_milli >= MILLI_PER_GPU or not shares):
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(shape.num_gpu)
    elif shape.num_gpu:
        annotations[GPU_MILLI_ANNOTATION] = str(shape.gpu_milli)
    if job.duration is not None:
        annotations[RUNTIME_ANNOTATION] = f"{max(1, round(job.duration / speed * 1000))}ms"
    if job.runtime_estimate is not None:
        annotations[RUNTIME_ESTIMATE_ANNOTATION] = format_seconds(job.runtime_estimate / speed)
    labels = {REPLAY_LABEL: run, KIND_LABEL: job.kind.value}
    if job.user:
        labels[USER_LABEL] = _check_label(job.user, f"job {job.id!r}: field 'user'")
    if group:
        labels[POD_GROUP_LABEL] = group
    spec: JsonObj = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "main",
                "image": "registry.invalid/gpusched-replay:1",
                "resources": {"requests": requests, "limits": limits},
            }
        ],
        "terminationGracePeriodSeconds": 0,
        **_placement(task),
    }
    if job.priority:
        spec["priorityClassName"] = priority_class_name(job.priority)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }
