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
   ``problems`` with a message saying what to fix, and stay pending;
5. each job carries its pods' user and kind and its run-time estimate
   (:func:`~gpusched.live.snapshot_jobs.job_estimate`), and the snapshot the mean run times
   learned from completed jobs (``Extras.runtime_stats``, :mod:`.runtimes`).

Our fully bound jobs are passed as ``running`` (the batch actions need them for quota, backfill
and preemption), started at their pods' earliest ``status.startTime``; a job with a pod being
deleted (an eviction in progress) still holds its resources but is not offered as a victim
again. Pods of other schedulers are only allocations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpusched.framework import DEFAULT_RUNTIME_S, ClusterState, RunningJob, Snapshot
from gpusched.live.admission import Admission
from gpusched.live.dra import DraView, PodClaims
from gpusched.live.holds import Hold, apply_holds
from gpusched.live.snapshot_charge import charge_bound
from gpusched.live.snapshot_dra import charge_claim_placeholders, dra_nodes, with_claims
from gpusched.live.snapshot_jobs import (
    SnapshotMemo,
    build_job,
    gang_size,
    gang_user_problem,
    job_estimate,
    job_id_of,
)
from gpusched.live.translate_pod import PodInfo
from gpusched.live.translate_podgroup import PodGroupInfo
from gpusched.model import Job, JobId, Node, Task, TaskId
from gpusched.model.mig import MigSlice

__all__ = ["Assumed", "Extras", "LiveSnapshot", "build_snapshot"]


@dataclass(frozen=True, slots=True)
class Assumed:
    """A bind we sent and have not yet seen in the cache."""

    node: str
    gpus: tuple[int, ...]
    gpu_milli: int
    uid: str
    mig: tuple[MigSlice, ...] = ()


@dataclass(slots=True)
class Extras:
    """Inputs beyond nodes, pods and PodGroups, each optional: queues and priority classes,
    native PodGroups (by ``namespace/name``), holds for preemptors (by pod key), DRA, the
    mean run times learned per ``(user, kind)`` and the default run time of jobs with neither
    an estimate nor a mean (``None``: the core's hour, ``Snapshot.default_runtime``)."""

    admission: Admission = field(default_factory=Admission)
    native_groups: Mapping[str, PodGroupInfo] = field(default_factory=dict)
    native_served: bool = False
    holds: Mapping[str, Hold] = field(default_factory=dict)
    dra: DraView | None = None
    runtime_stats: Mapping[tuple[str, str], float] = field(default_factory=dict)
    default_runtime_s: float | None = None


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
        pod, claims = with_claims(raw, extras.dra)
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
                hold = Hold(job_id_of(pod), claims.node, claims.allocated, pod.uid)
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
    state = ClusterState.from_nodes(dra_nodes(nodes, extras.dra))
    out = LiveSnapshot(Snapshot(state, ()))
    found = _sort_pods(
        pods, scheduler_name, assumed=assumed or {}, extras=extras, memo=memo, out=out
    )

    members = _members(found, scheduler_name)
    bound_ids = _charge_found(state, found, memo, extras, out)
    ctx = _JobContext(groups, groups_served, extras, bound_ids, memo)
    pending, running = _jobs(members, ctx, out)
    memo.keep_only({str(t) for t in out.pods})
    queues = extras.admission.queues
    out.snapshot = Snapshot(
        state,
        pending,
        now=now,
        seed=seed,
        running=running,
        queues=queues.tree if queues is not None else None,
        runtime_stats=extras.runtime_stats,
        default_runtime=(
            DEFAULT_RUNTIME_S if extras.default_runtime_s is None else extras.default_runtime_s
        ),
    )
    return out


def _members(found: _Sorted, scheduler_name: str) -> dict[JobId, list[PodInfo]]:
    """Members of our gangs, bound or not, by job."""
    members: dict[JobId, list[PodInfo]] = {}
    for pod, _, _ in found.bound:
        if pod.scheduler == scheduler_name:
            members.setdefault(job_id_of(pod), []).append(pod)
    for pod in found.pending:
        members.setdefault(job_id_of(pod), []).append(pod)
    return members


def _charge_found(
    state: ClusterState, found: _Sorted, memo: SnapshotMemo, extras: Extras, out: LiveSnapshot
) -> set[TaskId]:
    """Charge bound pods, orphan DRA claims and holds to ``state``; the bound pods' tasks."""
    bound_ids: set[TaskId] = set()
    for pod, node, gpus in found.bound:
        task = memo.task(pod)
        if charge_bound(state, task, node, gpus, pod.mig):
            bound_ids.add(task.id)
            out.pods[task.id] = pod
        else:
            out.overcommitted.append(pod.key)
    charge_claim_placeholders(
        state,
        extras.dra,
        {p.uid for p, _, _ in found.bound},
        {p.uid for p in found.pending} | {hold.uid for hold, _ in found.holds.values()},
    )
    held = apply_holds(state, found.holds)
    out.ready = held.ready
    out.held = {str(t) for t in held.held}
    return bound_ids


def _jobs(
    members: dict[JobId, list[PodInfo]], ctx: _JobContext, out: LiveSnapshot
) -> tuple[tuple[Job, ...], dict[JobId, RunningJob]]:
    """The pending jobs, oldest first, and our running jobs."""
    jobs: list[tuple[float, str, Job]] = []
    running: dict[JobId, RunningJob] = {}
    for job_id, pods_of_job in members.items():
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
    return tuple(j for _, _, j in jobs), running


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
    min_available, problem = gang_size(first, len(pods), group, served)
    if group is not None:
        problem = problem or group.problem
    if problem and group is not None:
        out.group_problems[group.key] = (group, problem)
    meta = ctx.extras.admission.job(pods, group)
    problem = problem or meta.problem or gang_user_problem(pods)
    bad = [p for p in waiting if p.problem]
    if bad:
        problem = "; ".join(f"pod {p.name}: {p.problem}" for p in bad)
    if problem and waiting:
        for p in waiting:
            out.problems[p.key] = (p, problem)
        return None, waiting
    estimate = job_estimate(pods, group)
    ordered, job = build_job(
        job_id, pods, min_available, ctx.bound_ids, ctx.memo, meta=meta, estimate=estimate
    )
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
