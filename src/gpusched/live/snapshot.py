"""From cached pods, nodes and pod groups to the :class:`Snapshot` the core schedules.

Pure and deterministic (sorted by name), so it is unit-tested without a cluster. One call:

1. nodes, sorted by name, become the :class:`ClusterState`;
2. every pod that holds resources (bound, or *assumed*: bound by us a moment ago and not yet
   seen bound in the cache; not Succeeded/Failed) is charged to its node, on the GPU indices
   recorded in its ``gpusched.dev/gpus`` annotation or, for pods placed by someone else, on the
   first GPUs with room (a MIG pod: on the instances in its ``gpusched.dev/mig`` annotation,
   or those the slice rule picks). A pod that no longer fits (its node shrank, another scheduler
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
from dataclasses import dataclass, field, replace

from gpusched.errors import InvariantError
from gpusched.framework import ClusterState, RunningJob, Snapshot
from gpusched.live.admission import Admission, JobMeta
from gpusched.live.dra import DraView, PodClaims
from gpusched.live.holds import Hold, apply_holds
from gpusched.live.translate_pod import PodInfo
from gpusched.live.translate_podgroup import PodGroupInfo
from gpusched.model import (
    MILLI_PER_GPU,
    Job,
    JobId,
    Node,
    NodeName,
    QueueName,
    Task,
    TaskId,
    TaskShape,
)
from gpusched.model.mig import MigSlice

__all__ = ["Assumed", "Extras", "LiveSnapshot", "SnapshotMemo", "build_snapshot"]


@dataclass(frozen=True, slots=True)
class Assumed:
    """A bind we sent and have not yet seen in the cache."""

    node: str
    gpus: tuple[int, ...]
    gpu_milli: int
    uid: str
    mig: tuple[MigSlice, ...] = ()


@dataclass(slots=True)
class SnapshotMemo:
    """Tasks and one-pod jobs built in earlier cycles, reused while their pod is unchanged.

    Pods in the cache are immutable values replaced on every watch event, so "unchanged" is
    object identity. Building a Task and a Job costs tens of microseconds; with thousands of
    pods that is most of a snapshot. Entries of pods not seen in a cycle are dropped.
    """

    tasks: dict[str, tuple[PodInfo, Task]] = field(default_factory=dict)
    jobs: dict[str, tuple[PodInfo, JobMeta, Job]] = field(default_factory=dict)

    def task(self, pod: PodInfo) -> Task:
        hit = self.tasks.get(pod.key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        task = Task(TaskId(pod.key), _job_id(pod), _shape(pod))
        self.tasks[pod.key] = (pod, task)
        return task

    def single_job(self, pod: PodInfo, meta: JobMeta) -> Job:
        """The job of a pod outside any gang (its only task is the pod)."""
        hit = self.jobs.get(pod.key)
        if hit is not None and hit[0] is pod and hit[1] == meta:
            return hit[2]
        job = Job(
            id=_job_id(pod),
            tasks=(self.task(pod),),
            min_available=1,
            queue=QueueName(meta.queue),
            priority=meta.priority,
            submit_time=pod.created,
            preempts=meta.preempts,
        )
        self.jobs[pod.key] = (pod, meta, job)
        return job

    def keep_only(self, keys: set[str]) -> None:
        if len(self.tasks) > len(keys):
            self.tasks = {k: v for k, v in self.tasks.items() if k in keys}
        if len(self.jobs) > len(keys):
            self.jobs = {k: v for k, v in self.jobs.items() if k in keys}


@dataclass(slots=True)
class Extras:
    """Inputs beyond nodes, pods and PodGroups, each optional: queues and priority classes,
    native PodGroups (by ``namespace/name``), holds for preemptors (by pod key) and DRA."""

    admission: Admission = field(default_factory=Admission)
    native_groups: Mapping[str, PodGroupInfo] = field(default_factory=dict)
    native_served: bool = False
    holds: Mapping[str, Hold] = field(default_factory=dict)
    dra: DraView | None = None


@dataclass(slots=True)
class LiveSnapshot:
    """A snapshot plus what the driver needs to act on its plan.

    ``ready``: held pods whose room is free now, to bind (node, GPU indices); ``held``: pods
    whose room is still held; ``claims``: the DRA claims to allocate per pending pod;
    ``group_problems``: PodGroups that cannot be scheduled as written, with the reason.
    """

    snapshot: Snapshot
    pods: dict[TaskId, PodInfo] = field(default_factory=dict)
    job_pods: dict[JobId, list[PodInfo]] = field(default_factory=dict)
    problems: dict[str, tuple[PodInfo, str]] = field(default_factory=dict)
    overcommitted: list[str] = field(default_factory=list)
    ready: dict[TaskId, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    claims: dict[TaskId, PodClaims] = field(default_factory=dict)
    group_problems: dict[str, tuple[PodGroupInfo, str]] = field(default_factory=dict)


def _shape(pod: PodInfo) -> TaskShape:
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


def _job_id(pod: PodInfo) -> JobId:
    return JobId(pod.group_key or pod.key)


def _first_fit(state: ClusterState, row: int, num_gpu: int, milli: int) -> tuple[int, ...] | None:
    free = state.gpu_free[row]
    picks = [g for g in range(int(state.gpu_count[row])) if free[g] >= milli][:num_gpu]
    return tuple(picks) if len(picks) == num_gpu else None


def _charge_mig(
    state: ClusterState, task: Task, row: int, mig: tuple[MigSlice, ...] | None
) -> bool:
    """Allocate a bound MIG pod on its recorded instances, else on those the slice rule
    picks; False when neither fits."""
    if mig and state.mig is not None:
        try:  # on a copy first: a take that fails part-way leaves instances marked
            state.mig.copy().take(row, mig, who=f"task {task.id}")
        except InvariantError:
            mig = None
    for chosen in (mig, None) if mig else (None,):
        try:
            state.allocate(task, row, (), mig=chosen)
        except InvariantError:
            continue
        return True
    return False


def _charge(
    state: ClusterState,
    task: Task,
    node: str,
    gpus: tuple[int, ...] | None,
    mig: tuple[MigSlice, ...] | None = None,
) -> bool:
    """Allocate a bound pod; False when it does not fit (left out of the state)."""
    row = state.index.get(NodeName(node))
    if row is None:
        return False
    shape = task.shape
    if shape.mig_profile:
        return _charge_mig(state, task, row, mig)
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


def _job(
    job_id: JobId,
    pods: list[PodInfo],
    min_available: int,
    bound_ids: set[TaskId],
    memo: SnapshotMemo,
    *,
    meta: JobMeta,
) -> tuple[list[PodInfo], Job]:
    """The job of ``pods`` (bound members first) and the pods in task order."""
    if not pods[0].group:
        return pods, memo.single_job(pods[0], meta)
    ordered = sorted(pods, key=lambda p: (TaskId(p.key) not in bound_ids, p.name))
    job = Job(
        id=job_id,
        tasks=tuple(memo.task(p) for p in ordered),
        min_available=min_available,
        queue=QueueName(meta.queue),
        priority=meta.priority,
        submit_time=min(p.created for p in pods),
        preempts=meta.preempts,
    )
    return ordered, job


def _dra_nodes(nodes: Iterable[Node], dra: DraView | None) -> list[Node]:
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


def _with_claims(pod: PodInfo, dra: DraView | None) -> tuple[PodInfo, PodClaims]:
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


def _claim_placeholders(
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


@dataclass(slots=True)
class _Sorted:
    """A cycle's pods by role: bound (with node and GPUs), pending, and held."""

    bound: list[tuple[PodInfo, str, tuple[int, ...] | None]] = field(default_factory=list)
    pending: list[PodInfo] = field(default_factory=list)
    holds: dict[TaskId, tuple[Hold, Task]] = field(default_factory=dict)


def _sort_pods(
    pods: Iterable[PodInfo],
    scheduler_name: str,
    *,
    assumed: Mapping[str, Assumed],
    extras: Extras,
    memo: SnapshotMemo,
    out: LiveSnapshot,
) -> _Sorted:
    found = _Sorted()
    for raw in sorted(pods, key=lambda p: p.key):
        if raw.terminal:
            continue
        pod, claims = _with_claims(raw, extras.dra)
        guess = assumed.get(pod.key)
        if pod.node:
            found.bound.append((pod, pod.node, pod.gpus))
        elif guess is not None and guess.uid == pod.uid:
            if guess.mig:
                pod = replace(pod, mig=guess.mig)
            found.bound.append((pod, guess.node, guess.gpus))
        elif pod.scheduler == scheduler_name and not pod.deleting:
            hold = extras.holds.get(pod.key)
            if claims.allocated and not claims.problem:  # its claims say where it goes
                hold = Hold(_job_id(pod), claims.node, claims.allocated, pod.uid)
            if hold is not None and hold.uid == pod.uid and not pod.problem:
                found.holds[TaskId(pod.key)] = (hold, memo.task(pod))
                out.pods[TaskId(pod.key)] = pod
                continue
            found.pending.append(pod)
            if claims.claims:
                out.claims[TaskId(pod.key)] = claims
    return found


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
    extras: Extras | None = None,
) -> LiveSnapshot:
    """Build one cycle's snapshot (see the module docstring)."""
    memo = memo if memo is not None else SnapshotMemo()
    extras = extras or Extras()
    state = ClusterState.from_nodes(_dra_nodes(nodes, extras.dra))
    out = LiveSnapshot(Snapshot(state, ()))
    found = _sort_pods(
        pods, scheduler_name, assumed=assumed or {}, extras=extras, memo=memo, out=out
    )

    # Members of our gangs, bound or not, by job.
    members: dict[JobId, list[PodInfo]] = {}
    for pod, _, _ in found.bound:
        if pod.scheduler == scheduler_name:
            members.setdefault(_job_id(pod), []).append(pod)
    for pod in found.pending:
        members.setdefault(_job_id(pod), []).append(pod)

    bound_ids: set[TaskId] = set()
    for pod, node, gpus in found.bound:
        task = memo.task(pod)
        if _charge(state, task, node, gpus, pod.mig):
            bound_ids.add(task.id)
            out.pods[task.id] = pod
        else:
            out.overcommitted.append(pod.key)
    _claim_placeholders(
        state,
        extras.dra,
        {p.uid for p, _, _ in found.bound},
        {p.uid for p in found.pending} | {hold.uid for hold, _ in found.holds.values()},
    )
    held = apply_holds(state, found.holds)
    out.ready = held.ready
    out.held = {str(t) for t in held.held}

    jobs: list[tuple[float, str, Job]] = []
    running: dict[JobId, RunningJob] = {}
    for job_id, pods_of_job in members.items():
        ctx = _JobContext(groups, groups_served, extras, bound_ids, memo)
        job, waiting = _one_job(job_id, pods_of_job, ctx, out)
        if job is None:
            continue
        if waiting:
            jobs.append((job.submit_time, job_id, job))
        elif not any(p.deleting for p in pods_of_job):
            # Being deleted (an eviction in progress) is not a candidate victim again.
            start = min(p.started or p.created for p in pods_of_job)
            running[job_id] = RunningJob(job, start)
    jobs.sort(key=lambda j: (j[0], j[1]))
    memo.keep_only({str(t) for t in out.pods})
    queues = extras.admission.queues
    out.snapshot = Snapshot(
        state,
        tuple(j for _, _, j in jobs),
        now=now,
        seed=seed,
        running=running,
        queues=queues.tree if queues is not None else None,
    )
    return out


@dataclass(frozen=True, slots=True)
class _JobContext:
    groups: Mapping[str, PodGroupInfo]
    groups_served: bool
    extras: Extras
    bound_ids: set[TaskId]
    memo: SnapshotMemo


def _one_job(
    job_id: JobId, pods: list[PodInfo], ctx: _JobContext, out: LiveSnapshot
) -> tuple[Job | None, list[PodInfo]]:
    """The job of ``pods`` and its waiting pods; ``None`` (with problems recorded) when it
    cannot be scheduled as written."""
    first = pods[0]
    waiting = [p for p in pods if TaskId(p.key) not in ctx.bound_ids]
    group = _group_of(first, ctx.groups, ctx.extras)
    served = ctx.extras.native_served if first.native_group else ctx.groups_served
    min_available, problem = _gang_size(first, len(pods), group, served)
    if problem and group is not None:
        out.group_problems[group.key] = (group, problem)
    meta = ctx.extras.admission.job(pods, group)
    problem = problem or meta.problem
    bad = [p for p in waiting if p.problem]
    if bad:
        problem = "; ".join(f"pod {p.name}: {p.problem}" for p in bad)
    if problem and waiting:
        for p in waiting:
            out.problems[p.key] = (p, problem)
        return None, waiting
    ordered, job = _job(job_id, pods, min_available, ctx.bound_ids, ctx.memo, meta=meta)
    out.job_pods[job_id] = ordered
    for p in waiting:
        out.pods[TaskId(p.key)] = p
    return job, waiting


def _group_of(
    pod: PodInfo, groups: Mapping[str, PodGroupInfo], extras: Extras
) -> PodGroupInfo | None:
    if not pod.group:
        return None
    return (extras.native_groups if pod.native_group else groups).get(pod.group_key)
