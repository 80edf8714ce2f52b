"""From our pods to the core's jobs: task shapes, gang sizes from PodGroups, and the memo.

:func:`~gpusched.live.snapshot.build_snapshot` groups a cycle's pods by job; this module says
what each pod asks for (:func:`task_shape`), which job it belongs to (:func:`job_id_of`: its
PodGroup ``NAMESPACE/G``, else the pod itself), how many members its gang needs or why it cannot
be scheduled as written (:func:`gang_size`), its user, kind and run-time estimate
(:func:`gang_user_problem`, :func:`job_estimate`), and builds the :class:`Job`
(:func:`build_job`).
:class:`SnapshotMemo` keeps the Tasks and one-pod Jobs built in earlier cycles, since with
thousands of pods building them is most of a snapshot's cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpusched.live.admission import JobMeta
from gpusched.live.estimates import KIND_LABEL, USER_LABEL
from gpusched.live.translate_pod import PodInfo
from gpusched.live.translate_podgroup import PodGroupInfo
from gpusched.model import Job, JobId, QueueName, Task, TaskId, TaskShape

__all__ = [
    "SnapshotMemo",
    "build_job",
    "gang_size",
    "gang_user_problem",
    "job_estimate",
    "job_id_of",
    "task_shape",
]


@dataclass(slots=True)
class SnapshotMemo:
    """Tasks and one-pod jobs built in earlier cycles, reused while their pod is unchanged.

    Pods in the cache are immutable values replaced on every watch event, so "unchanged" is
    object identity. Building a Task and a Job costs tens of microseconds; with thousands of
    pods that is most of a snapshot. Entries of pods not seen in a cycle are dropped.
    """

    tasks: dict[str, tuple[PodInfo, Task]] = field(default_factory=dict)
    jobs: dict[str, tuple[PodInfo, JobMeta, float | None, Job]] = field(default_factory=dict)

    def task(self, pod: PodInfo) -> Task:
        hit = self.tasks.get(pod.key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        task = Task(TaskId(pod.key), job_id_of(pod), task_shape(pod))
        self.tasks[pod.key] = (pod, task)
        return task

    def single_job(self, pod: PodInfo, meta: JobMeta, estimate: float | None) -> Job:
        """The job of a pod outside any gang (its only task is the pod)."""
        hit = self.jobs.get(pod.key)
        if hit is not None and hit[0] is pod and hit[1] == meta and hit[2] == estimate:
            return hit[3]
        job = Job(
            id=job_id_of(pod),
            tasks=(self.task(pod),),
            min_available=1,
            queue=QueueName(meta.queue),
            priority=meta.priority,
            submit_time=pod.created,
            preempts=meta.preempts,
            kind=pod.kind,
            runtime_estimate=estimate,
            user=pod.user,
        )
        self.jobs[pod.key] = (pod, meta, estimate, job)
        return job

    def keep_only(self, keys: set[str]) -> None:
        if len(self.tasks) > len(keys):
            self.tasks = {k: v for k, v in self.tasks.items() if k in keys}
        if len(self.jobs) > len(keys):
            self.jobs = {k: v for k, v in self.jobs.items() if k in keys}


def task_shape(pod: PodInfo) -> TaskShape:
    if pod.mig_profile:
        return TaskShape(
            cpu_milli=pod.cpu_milli,
            memory_mib=pod.memory_mib,
            constraints=pod.constraints,
            mig_profile=pod.mig_profile,
            mig_count=pod.mig_count,
        )
    return TaskShape(
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        num_gpu=pod.num_gpu,
        gpu_milli=pod.gpu_milli,
        constraints=pod.constraints,
    )


def job_id_of(pod: PodInfo) -> JobId:
    return JobId(pod.group_key or pod.key)


def gang_size(
    pod: PodInfo, members: int, group: PodGroupInfo | None, served: bool
) -> tuple[int, str]:
    """The gang size of ``pod``'s job, or a problem saying why it cannot be scheduled."""
    if not pod.group:
        return 1, ""
    if group is None and pod.native_group:
        why = "" if served else " (this cluster does not serve scheduling.k8s.io/v1alpha2)"
        return 1, (
            f"PodGroup {pod.group_key} (scheduling.k8s.io, from spec.schedulingGroup) not "
            f"found{why}; create it"
        )
    if group is None:
        why = "" if served else " (the PodGroup CRD is not installed)"
        return 1, (
            f"PodGroup {pod.group_key} not found{why}; create it (scheduling.x-k8s.io/v1alpha1) "
            "or remove the label scheduling.x-k8s.io/pod-group from the pod"
        )
    field_name = "spec.schedulingPolicy.gang.minCount" if group.native else "minMember"
    if group.min_member < 1:
        return 1, f"PodGroup {group.key}: {field_name}={group.min_member}; expected at least 1"
    if group.min_member > members:
        return 1, (
            f"PodGroup {group.key} needs {field_name}={group.min_member} pods; {members} "
            f"exist; create the missing {group.min_member - members} or lower {field_name}"
        )
    return group.min_member, ""


def gang_user_problem(pods: Sequence[PodInfo]) -> str:
    """Why a gang's pods cannot be one job for the learned run times: they name different
    users or kinds (``""`` when they agree). Its run time is learned under one key, so every
    pod of a gang must say the same, as every pod must name the same queue."""
    named = sorted({(p.user, p.kind.value) for p in pods})
    if len(named) < 2:
        return ""
    listed = ", ".join(f"{user}/{kind}" for user, kind in named)
    return (
        f"the gang's pods name different users or kinds ({listed}; labels {USER_LABEL}, "
        f"default the namespace, and {KIND_LABEL}, default batch); give every pod of a gang "
        "the same"
    )


def job_estimate(pods: Sequence[PodInfo], group: PodGroupInfo | None) -> float | None:
    """The ``runtime_estimate`` the job gets: its PodGroup's annotation, else the largest of
    its pods' (a gang runs until its last pod ends), else ``None`` (the core then takes the
    mean learned for its user and kind, else the snapshot's default run time)."""
    if group is not None and group.runtime_estimate is not None:
        return group.runtime_estimate
    given = [p.runtime_estimate for p in pods if p.runtime_estimate is not None]
    return max(given) if given else None


def build_job(
    job_id: JobId,
    pods: list[PodInfo],
    min_available: int,
    bound_ids: set[TaskId],
    memo: SnapshotMemo,
    *,
    meta: JobMeta,
    estimate: float | None = None,
) -> tuple[list[PodInfo], Job]:
    """The job of ``pods`` (bound members first) and the pods in task order; its user and
    kind are its pods' (:func:`gang_user_problem` checked that they agree)."""
    if not pods[0].group:
        return pods, memo.single_job(pods[0], meta, estimate)
    ordered = sorted(pods, key=lambda p: (TaskId(p.key) not in bound_ids, p.name))
    job = Job(
        id=job_id,
        tasks=tuple(memo.task(p) for p in ordered),
        min_available=min_available,
        queue=QueueName(meta.queue),
        priority=meta.priority,
        submit_time=min(p.created for p in pods),
        preempts=meta.preempts,
        kind=pods[0].kind,
        runtime_estimate=estimate,
        user=pods[0].user,
    )
    return ordered, job
