"""A job's queue, priority and preemption policy, from its pods, namespace, PodGroup, Queues
and PriorityClasses (the rules are in :mod:`.queues`; this applies them to one job).

* **queue**: every pod of a gang must resolve to the same queue (else the gang is told so);
  the queue must exist, be usable (no problem of its own) and allow the pods' namespace.
* **priority**: a native PodGroup's ``spec.priority`` when set; else the highest of the pods'
  ``spec.priority``; a pod without one (the Priority admission plugin is off) takes its
  ``priorityClassName``'s value from the PriorityClass objects (an unknown class: 0).
* **preempts**: ``False`` when any pod says ``preemptionPolicy: Never`` (or its class does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpusched.live.queues import NamespaceInfo, PriorityClassInfo, QueueSet
from gpusched.live.translate_pod import PodInfo
from gpusched.live.translate_podgroup import PodGroupInfo

__all__ = ["Admission", "JobMeta"]


@dataclass(frozen=True, slots=True)
class JobMeta:
    """What a job is charged to and how urgent it is; ``problem`` when it cannot be admitted."""

    queue: str
    priority: int
    preempts: bool
    problem: str = ""


@dataclass(slots=True)
class Admission:
    """One cycle's queues, namespaces and priority classes (all optional)."""

    queues: QueueSet | None = None
    namespaces: Mapping[str, NamespaceInfo] = field(default_factory=dict)
    priority_classes: Mapping[str, PriorityClassInfo] = field(default_factory=dict)

    def priority(self, pod: PodInfo) -> tuple[int, bool]:
        """The pod's priority and whether it may evict others."""
        cls = self.priority_classes.get(pod.priority_class)
        value = pod.priority if pod.has_priority or cls is None else cls.value
        preempts = pod.preempts
        if preempts is None:
            preempts = cls.preempts if cls is not None else True
        return value, preempts

    def job(self, pods: Sequence[PodInfo], group: PodGroupInfo | None) -> JobMeta:
        """The queue, priority and preemption policy of the job made of ``pods``."""
        ranks = [self.priority(p) for p in pods]
        priority = max(r[0] for r in ranks)
        if group is not None and group.priority is not None:
            priority = group.priority
        preempts = all(r[1] for r in ranks)
        if self.queues is None:
            return JobMeta("", priority, preempts)
        first = pods[0]
        ns = self.namespaces.get(first.namespace)
        ns_queue = ns.queue if ns is not None else ""
        queue, problem = self.queues.resolve(first.namespace, first.queue, ns_queue)
        named = {p.queue for p in pods}
        if len(named) > 1:
            problem = (
                f"the gang's pods name different queues ({', '.join(sorted(named))}, label "
                "gpusched.dev/queue); give every pod of a gang the same queue"
            )
        return JobMeta(queue, priority, preempts, problem)
