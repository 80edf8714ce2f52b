"""From cached pods, nodes and pod groups to the :class:`Snapshot` the core schedules.

Pure and deterministic (sorted by name), so it is unit-tested without a cluster. One call:

1. nodes, sorted by name, become the :class:`ClusterState`;
2. every pod that holds resources (bound, or *assumed*: bound by us a moment ago and not yet
   seen bound in the cache; not Succeeded/Failed) is charged to its node, on the GPU indices
   recorded in its ``gpusched.dev/gpus`` annotation or, for pods placed by someone else, on the
   first GPUs with room. A pod that no longer fits (its node shrank, another scheduler
   over-committed) is left out and counted in ``overcommitted``;
3. our pending pods (``spec.schedulerName`` ours, unbound, not being deleted) become jobs: a pod
   with the label ``scheduling.x-k8s.io/pod-group: G`` joins the job ``NAMESPACE/G`` whose
   ``min_available`` is the PodGroup's ``minMember`` (its bound members count towards it);
   any other pod is a job of one. Jobs are ordered by their oldest pod's creation time;
4. pods that cannot be scheduled as written (a bad annotation, a missing PodGroup, a
   ``minMember`` larger than the pods that exist) are not given to the core: they come back in
   ``problems`` with a message saying what to fix, and stay pending.

Our fully bound jobs are passed as ``running`` (the batch actions need them for quota, backfill
and preemption), started at their pods' earliest ``status.startTime``; a job with a pod being
deleted (an eviction in progress) still holds its resources but is not offered as a victim
again. Pods of other schedulers are only allocations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpusched.framework import ClusterState, RunningJob, Snapshot
from gpusched.live.translate import PodGroupInfo, PodInfo
from gpusched.model import Job, JobId, Node, NodeName, Task, TaskId, TaskShape

__all__ = ["Assumed", "LiveSnapshot", "SnapshotMemo", "build_snapshot"]


@dataclass(frozen=True, slots=True)
class Assumed:
    """A bind we sent and have not yet seen in the cache."""

    node: str
    gpus: tuple[int, ...]
    gpu_milli: int
    uid: str


@dataclass(slots=True)
class SnapshotMemo:
    """Tasks and one-pod jobs built in earlier cycles, reused while their pod is unchanged.

    Pods in the cache are immutable values replaced on every watch event, so "unchanged" is
    object identity. Building a Task and a Job costs tens of microseconds; with thousands of
    pods that is most of a snapshot. Entries of pods not seen in a cycle are dropped.
    """

    tasks: dict[str, tuple[PodInfo, Task]] = field(default_factory=dict)
    jobs: dict[str, tuple[PodInfo, Job]] = field(default_factory=dict)

    def task(self, pod: PodInfo) -> Task:
        hit = self.tasks.get(pod.key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        task = Task(TaskId(pod.key), _job_id(pod), _shape(pod))
        self.tasks[pod.key] = (pod, task)
        return task

    def single_job(self, pod: PodInfo) -> Job:
        """The job of a pod outside any gang (its only task is the pod)."""
        hit = self.jobs.get(pod.key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        job = Job(
            id=_job_id(pod),
            tasks=(self.task(pod),),
            min_available=1,
            priority=pod.priority,
            submit_time=pod.created,
        )
        self.jobs[pod.key] = (pod, job)
        return job

    def keep_only(self, keys: set[str]) -> None:
        if len(self.tasks) > len(keys):
            self.tasks = {k: v for k, v in self.tasks.items() if k in keys}
        if len(self.jobs) > len(keys):
            self.jobs = {k: v for k, v in self.jobs.items() if k in keys}


@dataclass(slots=True)
class LiveSnapshot:
    """A snapshot plus what the driver needs to act on its plan."""

    snapshot: Snapshot
    pods: dict[TaskId, PodInfo] = field(default_factory=dict)
    job_pods: dict[JobId, list[PodInfo]] = field(default_factory=dict)
    problems: dict[str, tuple[PodInfo, str]] = field(default_factory=dict)
    overcommitted: list[str] = field(default_factory=list)


def _shape(pod: PodInfo) -> TaskShape:
    return TaskShape(
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        num_gpu=pod.num_gpu,
        gpu_milli=pod.gpu_milli,
        constraints=pod.constraints,
    )


def _job_id(pod: PodInfo) -> JobId:
    return JobId(pod.group_key or pod.key)


def _first_fit(state: ClusterState, row: int, num_gpu: int, milli: int) -> tuple[int, ...] | None:
    free = state.gpu_free[row]
    picks = [g for g in range(int(state.gpu_count[row])) if free[g] >= milli][:num_gpu]
    return tuple(picks) if len(picks) == num_gpu else None


def _charge(state: ClusterState, task: Task, node: str, gpus: tuple[int, ...] | None) -> bool:
    """Allocate a bound pod; False when it does not fit (left out of the state)."""
    row = state.index.get(NodeName(node))
    if row is None:
        return False
    shape = task.shape
    if shape.num_gpu:
        valid = gpus is not None and len(gpus) == shape.num_gpu
        count = int(state.gpu_count[row])
        if not valid or any(
            not 0 <= g < count or state.gpu_free[row][g] < shape.gpu_milli for g in gpus or ()
        ):
            gpus = _first_fit(state, row, shape.num_gpu, shape.gpu_milli)
        if gpus is None:
            return False
    else:
        gpus = ()
    if state.cpu_free[row] < shape.cpu_milli or state.mem_free[row] < shape.memory_mib:
        return False
    state.allocate(task, row, gpus)
    return True


def _gang_size(
    pod: PodInfo, members: int, groups: Mapping[str, PodGroupInfo], groups_served: bool
) -> tuple[int, str]:
    """The gang size of ``pod``'s job, or a problem saying why it cannot be scheduled."""
    if not pod.group:
        return 1, ""
    group = groups.get(pod.group_key)
    if group is None:
        why = "" if groups_served else " (the PodGroup CRD is not installed)"
        return 1, (
            f"PodGroup {pod.group_key} not found{why}; create it (scheduling.x-k8s.io/v1alpha1) "
            "or remove the label scheduling.x-k8s.io/pod-group from the pod"
        )
    if group.min_member < 1:
        return 1, f"PodGroup {group.key}: minMember={group.min_member}; expected at least 1"
    if group.min_member > members:
        return 1, (
            f"PodGroup {group.key} needs minMember={group.min_member} pods; {members} exist; "
            f"create the missing {group.min_member - members} or lower minMember"
        )
    return group.min_member, ""


def _job(
    job_id: JobId,
    pods: list[PodInfo],
    min_available: int,
    bound_ids: set[TaskId],
    memo: SnapshotMemo,
) -> tuple[list[PodInfo], Job]:
    """The job of ``pods`` (bound members first) and the pods in task order."""
    if not pods[0].group:
        return pods, memo.single_job(pods[0])
    ordered = sorted(pods, key=lambda p: (TaskId(p.key) not in bound_ids, p.name))
    job = Job(
        id=job_id,
        tasks=tuple(memo.task(p) for p in ordered),
        min_available=min_available,
        priority=max(p.priority for p in pods),
        submit_time=min(p.created for p in pods),
    )
    return ordered, job


def build_snapshot(
    nodes: Iterable[Node],
    pods: Iterable[PodInfo],
    groups: Mapping[str, PodGroupInfo],
    *,
    scheduler_name: str,
    now: float,
    seed: int = 0,
    assumed: Mapping[str, Assumed] | None = None,
    groups_served: bool = True,
    memo: SnapshotMemo | None = None,
) -> LiveSnapshot:
    """Build one cycle's snapshot (see the module docstring)."""
    assumed = assumed or {}
    memo = memo if memo is not None else SnapshotMemo()
    state = ClusterState.from_nodes(sorted(nodes, key=lambda n: n.name))
    out = LiveSnapshot(Snapshot(state, ()))
    bound: list[tuple[PodInfo, str, tuple[int, ...] | None]] = []
    pending: list[PodInfo] = []
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.terminal:
            continue
        guess = assumed.get(pod.key)
        if pod.node:
            bound.append((pod, pod.node, pod.gpus))
        elif guess is not None and guess.uid == pod.uid:
            bound.append((pod, guess.node, guess.gpus))
        elif pod.scheduler == scheduler_name and not pod.deleting:
            pending.append(pod)

    # Members of our gangs, bound or not, by job.
    members: dict[JobId, list[PodInfo]] = {}
    for pod, _, _ in bound:
        if pod.scheduler == scheduler_name:
            members.setdefault(_job_id(pod), []).append(pod)
    for pod in pending:
        members.setdefault(_job_id(pod), []).append(pod)

    bound_ids: set[TaskId] = set()
    for pod, node, gpus in bound:
        task = memo.task(pod)
        if _charge(state, task, node, gpus):
            bound_ids.add(task.id)
            out.pods[task.id] = pod
        else:
            out.overcommitted.append(pod.key)

    jobs: list[tuple[float, str, Job]] = []
    running: dict[JobId, RunningJob] = {}
    for job_id, pods_of_job in members.items():
        first = pods_of_job[0]
        waiting = [p for p in pods_of_job if TaskId(p.key) not in bound_ids]
        min_available, problem = _gang_size(first, len(pods_of_job), groups, groups_served)
        bad = [p for p in waiting if p.problem]
        if bad:
            problem = "; ".join(f"pod {p.name}: {p.problem}" for p in bad)
        if problem:
            for p in waiting:
                out.problems[p.key] = (p, problem)
            continue
        ordered, job = _job(job_id, pods_of_job, min_available, bound_ids, memo)
        out.job_pods[job_id] = ordered
        for p in waiting:
            out.pods[TaskId(p.key)] = p
        if waiting:
            jobs.append((job.submit_time, job_id, job))
        elif not any(p.deleting for p in pods_of_job):
            # Being deleted (an eviction in progress) is not a candidate victim again.
            start = min(p.started or p.created for p in pods_of_job)
            running[job_id] = RunningJob(job, start)
    jobs.sort(key=lambda j: (j[0], j[1]))
    memo.keep_only({str(t) for t in out.pods})
    out.snapshot = Snapshot(
        state, tuple(j for _, _, j in jobs), now=now, seed=seed, running=running
    )
    return out
