"""``explain_job``: why a job is pending, with numbers.

Given the snapshot of a cycle, the profile and (optionally) the plan that cycle produced, the
explanation of job ``j`` gathers:

* **needs** -- the gang (``min_available`` of ``len(tasks)`` pods) and each distinct pod shape;
* **status** -- the cycle's code, cause (:class:`~gpusched.framework.status.Cause`: nodes,
  queue limit, borrowing, quota held for another job, network domain, turn) and reasons
  (``Unschedulable``: may fit later; ``Unresolvable``: never will, the request must change);
* **candidates** -- the nodes closest to hosting the job's first unplaced pod ``t``, with what
  each lacks. A node passing every non-resource filter is ranked by its normalised shortfall::

      d(n) = max(0, cpu_t - cpu_free[n]) / cpu_t + max(0, mem_t - mem_free[n]) / mem_t
           + max(0, k_t - #{g : gpu_free[n, g] >= m_t}) / k_t

  (terms with a zero request are left out), smallest first; ``d = 0`` means the pod fits there
  now. Nodes some other filter rejects (GPU model, taints, selectors, ...) are counted apart;
* **gang** -- how many of the gang's pods fit together right now (a trial placement with the
  profile's own filters and scores, rolled back);
* **quota** -- each queue on the job's path: usage, guarantee, limit; what the job would
  borrow and what may be borrowed now;
* **reservation** (or **quota hold**) and **estimated start** from the plan, when there is one;
  for a reservation, what sets its start ``s``: the running jobs on its nodes expected to end
  at ``s`` or later (:func:`~gpusched.framework.timeline.expected_ends`; each with what its
  end rests on: a declared run time, the learned mean of its user's jobs, the default, or an
  overrun estimate, ``end = now + max(0.1 * est, now - start)``), and the reservations ahead
  of it in the plan that share its nodes (a later reservation is laid out after them); for
  a job without one, how many reservations the profile's ``backfill`` makes and which jobs
  hold them this cycle;
* **aging and the limit guard** -- when the profile's ``backfill`` ages jobs
  (``starve_after_s``), the time from which ``j`` goes first for a reservation,
  ``submit_time + starve_after_s``; when it has a limit guard (``limit_guard_after_s``) and a
  queue limit refuses ``j``, that queue, the time from which ``j`` may evict the queue's
  work that started after it was queued, ``queue_time + limit_guard_after_s``, and what
  that work is: how many jobs and GPUs, and whether with all of it gone the queues would
  admit ``j`` and the nodes fit it (two trials, rolled back;
  :mod:`gpusched.actions.limit_guard`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from gpusched.actions import Backfill
from gpusched.actions.limit_guard import limit_victims
from gpusched.actions.make_room import admitting_without
from gpusched.framework import (
    CycleContext,
    Plan,
    Profile,
    QuotaHold,
    Reservation,
    Session,
    Snapshot,
    Statement,
    Status,
)
from gpusched.framework.quota import job_request
from gpusched.framework.session import RuntimeBasis
from gpusched.framework.timeline import expected_ends, fits_after
from gpusched.model import GPU, Job, JobId, QueueName, Task

__all__ = [
    "Candidate",
    "Explanation",
    "LimitGuard",
    "ReservedAhead",
    "ReservedBehind",
    "explain_job",
]

#: Expected ends this close to a reservation's start (seconds) count as setting it.
_SAME_TIME_S = 1.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """One node and what it lacks for the pod (empty: the pod fits there now)."""

    node: str
    shortfall: float
    lacks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LimitGuard:
    """The limit guard's view of a job a queue limit refuses: from ``start`` on it may evict
    work charged under ``queue`` that started after ``since`` (the job's ``queue_time``):
    ``victims`` running jobs holding ``victim_gpus`` GPUs now; with all of them gone the
    queues would admit it (``admits``) and the nodes would fit it (``fits``)."""

    queue: QueueName
    since: float
    start: float
    victims: int
    victim_gpus: float
    admits: bool
    fits: bool


@dataclass(frozen=True, slots=True)
class ReservedBehind:
    """A running job on a reservation's nodes expected to end at or after its start: it
    started at ``start`` with run-time estimate ``estimate`` (``basis``: how that is known)
    and holds ``gpus`` GPUs on ``nodes`` of the reservation; ``overrun``: it has run past the
    estimate, so ``end`` is the overrun rule's guess."""

    job: JobId
    queue: QueueName
    gpus: float
    nodes: tuple[str, ...]
    start: float
    end: float
    estimate: float
    basis: RuntimeBasis
    overrun: bool


@dataclass(frozen=True, slots=True)
class ReservedAhead:
    """A reservation laid out before the job's on ``shared`` of its nodes: ``job`` is to start
    at ``start`` and run ``estimate`` seconds (:meth:`Session.runtime_estimate`)."""

    job: JobId
    start: float
    estimate: float
    shared: int


@dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``gpusched explain`` prints about one job (module docstring)."""

    job: Job
    now: float
    needs: tuple[str, ...]
    status: Status | None
    candidates: tuple[Candidate, ...]
    fitting_nodes: int
    filtered_out: tuple[str, ...]
    gang_placeable: int
    gang_needed: int
    quota: tuple[str, ...]
    quota_blocked: bool
    reservation: Reservation | None
    quota_hold: QuotaHold | None
    estimated_start: float | None
    aged_from: float | None = None
    limit_guard: LimitGuard | None = None
    reserved_behind: tuple[ReservedBehind, ...] = ()
    reservations_ahead: tuple[ReservedAhead, ...] = ()
    reservations_max: int = 0
    reserved_for: tuple[JobId, ...] = ()


def _shape_line(task: Task, count: int) -> str:
    s = task.shape
    gpu = ""
    if s.num_gpu:
        share = "whole" if s.gpu_milli >= 1000 else f"{s.gpu_milli}/1000 of"
        models = f" ({'|'.join(sorted(s.gpu_models))})" if s.gpu_models else ""
        gpu = f", {s.num_gpu} x {share} GPU{models}"
    return (
        f"{count} pod(s) of {s.cpu_milli / 1000:g} CPU, {s.memory_mib / 1024:.1f} GiB memory{gpu}"
    )


def _needs(job: Job) -> tuple[str, ...]:
    lines = [
        f"gang: {job.min_available} of {len(job.tasks)} pod(s) must start together"
        if len(job.tasks) > 1
        else "a single pod",
        f"queue {job.queue!r}, priority {job.priority}"
        + (f" ({job.priority_class})" if job.priority_class else "")
        + ("" if job.preemptible else ", not preemptible"),
    ]
    if job.requeued_at is not None:
        lines.append(
            f"evicted, back in the queue since t={job.requeued_at:,.0f} s (submitted at "
            f"t={job.submit_time:,.0f} s): it queues behind the jobs waiting then, and ages "
            "from its submission"
        )
    shapes: dict[object, tuple[Task, int]] = {}
    for t in job.tasks:
        task, n = shapes.get(t.shape, (t, 0))
        shapes[t.shape] = (task, n + 1)
    lines += [_shape_line(t, n) for t, n in shapes.values()]
    return tuple(lines)


def _candidates(
    session: Session, task: Task, top: int
) -> tuple[tuple[Candidate, ...], int, tuple[str, ...]]:
    state = session.state
    s = task.shape
    other = np.ones(state.size, dtype=bool)
    rejected: list[str] = []
    for f in session.profile.filters:
        if f.name == "node-resources-fit":
            continue
        mask = f.filter(session.ctx, task, state)
        dropped = int((other & ~mask).sum())
        if dropped:
            rejected.append(f"{dropped} node(s) rejected by {f.name}")
        other &= mask
    d = np.zeros(state.size)
    if s.cpu_milli:
        d += np.maximum(0, s.cpu_milli - state.cpu_free) / s.cpu_milli
    if s.memory_mib:
        d += np.maximum(0, s.memory_mib - state.mem_free) / s.memory_mib
    have = np.zeros(state.size, dtype=np.int64)
    if s.num_gpu:
        have = (state.gpu_free >= s.gpu_milli).sum(axis=1)
        d += np.maximum(0, s.num_gpu - have) / s.num_gpu
    idx = np.flatnonzero(other)
    fitting = int((d[idx] == 0).sum())
    best = idx[np.argsort(d[idx], kind="stable")][:top]
    out: list[Candidate] = []
    for n in best:
        lacks = []
        if state.cpu_free[n] < s.cpu_milli:
            lacks.append(
                f"CPU: needs {s.cpu_milli / 1000:g}, {state.cpu_free[n] / 1000:g} free "
                f"of {state.cpu_cap[n] / 1000:g}"
            )
        if state.mem_free[n] < s.memory_mib:
            lacks.append(
                f"memory: needs {s.memory_mib / 1024:.1f} GiB, {state.mem_free[n] / 1024:.1f} "
                f"free of {state.mem_cap[n] / 1024:.1f}"
            )
        if s.num_gpu and have[n] < s.num_gpu:
            lacks.append(
                f"GPUs: needs {s.num_gpu} with {s.gpu_milli}/1000 free, has {int(have[n])} "
                f"of {int(state.gpu_count[n])}"
            )
        held = session.blocked_nodes.get(int(n))
        if held is not None and not lacks:
            lacks.append(f"held for {held[1]}'s reservation from t={held[0]:.0f}")
        out.append(Candidate(state.names[n], float(d[n]), tuple(lacks)))
    return tuple(out), fitting, tuple(rejected)


def _gang_placeable(session: Session, job: Job) -> int:
    session.begin_job(job)
    stmt = Statement(session.state)
    placed = 0
    for t in job.tasks[: job.min_available]:
        if t.id in session.state.allocations or session.place_task(t, stmt, explain=False).ok:
            placed += 1
    stmt.rollback()
    return placed


def _quota(session: Session, job: Job) -> tuple[str, ...]:
    quota = session.quota
    if quota is None:
        return ("no queues configured: quota does not apply",)
    if job.queue not in quota.tree:
        return (f"queue {job.queue!r} does not exist",)
    lines = []
    for q in quota.tree.path(job.queue):
        spec = quota.tree[q]
        used = quota.usage[q][GPU] / 1000
        lim = f", limit {spec.limit[GPU] / 1000:g}" if spec.limit and GPU in spec.limit else ""
        lines.append(
            f"queue {q!r}: uses {used:g} GPUs, guaranteed {spec.guaranteed[GPU] / 1000:g}{lim}, "
            f"weight {spec.weight:g}, fair share {quota.share(q):.3f}"
        )
    req = job_request(job)
    beyond = quota.beyond_guarantee(job.queue, req)
    lines.append(
        f"the job needs {req[GPU] / 1000:g} GPUs: {beyond / 1000:g} beyond its guarantee; "
        f"{max(quota.borrowable(job.queue), 0) / 1000:g} may be borrowed now"
    )
    refusal = session.quota_refusal(job)
    lines.append("quota admits the job" if refusal is None else f"quota: {refusal.message}")
    return tuple(lines)


def _backfill(profile: Profile) -> Backfill | None:
    return next((a for a in profile.actions if isinstance(a, Backfill)), None)


def _limit_guard(session: Session, job: Job, backfill: Backfill | None) -> LimitGuard | None:
    """Where the limit guard stands for ``job`` (module docstring); ``None`` without a guard
    or when no queue limit refuses the job."""
    after = backfill.limit_guard_after_s if backfill is not None else None
    quota = session.quota
    if after is None or quota is None or job.queue not in quota.tree:
        return None
    limiting = quota.limiting_queue(job.queue, session.request(job))
    if limiting is None:
        return None
    victims = limit_victims(session, job, limiting)
    ids = [r.job.id for r in victims]
    return LimitGuard(
        queue=limiting,
        since=job.queue_time,
        start=job.queue_time + after,
        victims=len(victims),
        victim_gpus=sum(session.charge_of(r.job)[GPU] for r in victims) / 1000,
        admits=bool(victims) and admitting_without(session, job, victims) is not None,
        fits=fits_after(session, job, ids) is not None,
    )


def _reserved_behind(session: Session, res: Reservation) -> tuple[ReservedBehind, ...]:
    """The running jobs on ``res``'s nodes expected to end at or after its start, latest
    first (module docstring)."""
    state = session.state
    held = {state.index[name] for name in res.nodes}
    ends = {job_id: end for end, job_id in expected_ends(session)}
    now = session.snapshot.now
    found = []
    for run in session.snapshot.running.values():
        end = ends.get(run.job.id)
        if end is None or end < res.start - _SAME_TIME_S:
            continue
        nodes = sorted(
            {a.node for t in run.job.tasks if (a := state.allocations.get(t.id)) is not None} & held
        )
        if not nodes:
            continue
        job = run.job
        estimate = session.runtime_estimate(job)
        found.append(
            ReservedBehind(
                job=job.id,
                queue=job.queue,
                gpus=session.charge_of(job)[GPU] / 1000,
                nodes=tuple(state.names[n] for n in nodes),
                start=run.start,
                end=end,
                estimate=estimate,
                basis=session.runtime_basis(job),
                overrun=now >= run.start + estimate,
            )
        )
    return tuple(sorted(found, key=lambda b: (-b.end, b.job)))


def _reservations_ahead(
    session: Session, plan: Plan, res: Reservation
) -> tuple[ReservedAhead, ...]:
    """The plan's reservations before ``res`` (plan order is layout order) sharing a node
    with it."""
    nodes = set(res.nodes)
    jobs = {j.id: j for j in session.snapshot.pending}
    ahead = []
    for other in plan.reservations.values():
        if other.job == res.job:
            break
        shared = len(nodes.intersection(other.nodes))
        holder = jobs.get(other.job)
        if shared and holder is not None:
            estimate = session.runtime_estimate(holder)
            ahead.append(ReservedAhead(other.job, other.start, estimate, shared))
    return tuple(ahead)


def explain_job(
    snapshot: Snapshot, profile: Profile, job_id: JobId, plan: Plan | None = None, top: int = 5
) -> Explanation:
    """Explain pending job ``job_id`` of ``snapshot`` (module docstring); ``plan``: the cycle's
    result for the status, reservation and estimated start. ``KeyError`` if the job is not
    pending in the snapshot."""
    job = next((j for j in snapshot.pending if j.id == job_id), None)
    if job is None:
        raise KeyError(job_id)
    session = Session(snapshot, profile, CycleContext(snapshot.now, random.Random(snapshot.seed)))
    if plan is not None:
        for res in plan.reservations.values():
            for name in res.nodes:
                session.blocked_nodes.setdefault(session.state.index[name], (res.start, res.job))
    unplaced = [t for t in job.tasks if t.id not in snapshot.state.allocations]
    first = unplaced[0] if unplaced else job.tasks[0]
    session.begin_job(job)
    candidates, fitting, rejected = _candidates(session, first, top)
    backfill = _backfill(profile)
    starve = backfill.starve_after_s if backfill is not None else None
    reservation = plan.reservations.get(job_id) if plan is not None else None
    return Explanation(
        job=job,
        now=snapshot.now,
        needs=_needs(job),
        status=plan.pending.get(job_id) if plan is not None else None,
        candidates=candidates,
        fitting_nodes=fitting,
        filtered_out=rejected,
        gang_placeable=_gang_placeable(session, job),
        gang_needed=job.min_available,
        quota=_quota(session, job),
        quota_blocked=session.quota is not None and session.quota_refusal(job) is not None,
        reservation=reservation,
        quota_hold=plan.quota_holds.get(job_id) if plan is not None else None,
        estimated_start=plan.estimated_start.get(job_id) if plan is not None else None,
        aged_from=job.submit_time + starve if starve is not None else None,
        limit_guard=_limit_guard(session, job, backfill),
        reserved_behind=_reserved_behind(session, reservation) if reservation else (),
        reservations_ahead=(
            _reservations_ahead(session, plan, reservation)
            if plan is not None and reservation
            else ()
        ),
        reservations_max=backfill.reservations if backfill is not None else 0,
        reserved_for=tuple(plan.reservations) if plan is not None else (),
    )
