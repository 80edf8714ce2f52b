"""Metrics of a simulated run: what platform teams ask of a GPU scheduler.

Time series (sampled after every event time):

* ``alloc_pct(t) = 100 * placed_gpu_milli(t) / capacity`` -- GPU share *requested* by running
  jobs;
* ``held_pct(t)  = 100 * held_gpu_milli(t) / capacity`` -- GPU share *held* by bound tasks
  (larger than ``alloc_pct`` when a policy gives a fractional request a whole GPU, or when pods
  of an incomplete gang sit on GPUs);
* ``frag_pct(t)  = 100 * F(t) / capacity`` -- FGD's fragmentation against the workload's own task
  mix (sampled at most ``frag_samples`` times): ``F(t) = SUM_n SUM_m p_m * frag_m(n)``, the
  free milli-GPU of node ``n`` that a task of type ``m`` (share ``p_m`` of the workload) could
  not use (:mod:`gpusched.plugins.fragmentation`).

Summary (``summarise``), with ``[a, b]`` the arrival window (first to last arrival; after it the
cluster only drains, which says nothing about the policy):

* ``gpu_allocation_pct`` (also ``gpu_utilization_pct``): time-average of ``alloc_pct`` on
  ``[a, b]``; ``gpu_held_pct`` likewise;
* ``fragmentation_pct``: mean of the ``frag_pct`` samples on ``[a, b]``;
* ``avg_wait_s`` / ``p95_wait_s``: first start minus arrival, over jobs that started;
  ``max_wait_s_top1pct_largest``: the longest wait among the largest 1% of jobs by GPUs (jobs
  that never started count with their wait until the end of the run). Exactly
  ``max(1, n // 100)`` jobs: where jobs of the cut-off size are more than fit, the
  earliest-arriving of them are taken (records are in arrival order, and the sort is stable);
  ``max_wait_s_top1pct_largest_ties`` is the same over every job at least as large as the
  smallest of those, ties included (``jobs_top1pct_largest_ties`` of them), so that no job
  as large as one counted is left out;
  ``pending_h_top1pct_largest_by_cause``: the hours those jobs spent pending before their
  first start, summed over them, by the cause of their status
  (:class:`~gpusched.framework.status.Cause`; ``JobRecord.pending_by_cause``): what keeps the
  largest jobs waiting -- nodes, their queue's limit, borrowing, a quota held for another job,
  a network domain;
* ``avg_jct_s``: end minus arrival, over jobs that finished;
* ``partially_placed_gangs_max``: most gangs at once with some but not all pods bound;
  ``idle_gpu_hours_held_by_partial_gangs``: integral of the GPUs those pods hold, in hours;
* ``preemptions`` (evicted jobs) and ``preemption_loops`` (job A evicted B after B evicted A);
  ``max_disruptions_of_one_job``: the most times one job was evicted or moved (what the
  disruption budget, the evicting actions' ``max_evictions``, counts; only reclaim's last
  resort goes past it);
  ``elastic_members_evicted`` (elastic pods taken from running jobs, which keep running);
* ``defrag_moves``: running jobs moved by defragmentation (each stopped and restarted at once
  on other nodes so that a fragmented-blocked job fits; :mod:`gpusched.actions.defrag`);
  ``defrag_tasks_moved``: their tasks; ``defrag_gpu_hours_lost``: the progress they lost,
  ``SUM gpus_held * (move time - last start) / 3600`` (a moved job restarts from zero);
* ``jain_fairness``: Jain's index over leaf queues with demand of ``x_q`` = time-average GPU
  usage / weight: ``(SUM x)^2 / (n * SUM x^2)`` (1 = perfectly weighted-fair);
* ``quota_guarantee_violations``: jobs that waited more than ``grace_s`` while within their
  queue's guarantee and other queues borrowed at least their GPU request (of the job's GPU
  model, when it asks for one), in one stretch of waiting (it ends when the job starts); usage
  is charged as the scheduler charges it, on the GPU models the running tasks landed on;
* ``unplaced`` jobs by status code with the most common reason;
* ``multi_gpu_tasks_on_best_connected_set_pct``: of the tasks with 2 or more GPUs bound on nodes
  with a GPU topology, the share whose GPUs were a best-connected set among those free just
  before the bind (``null`` when there were none; ``multi_gpu_tasks_with_topology`` counts them);
* ``gangs_within_one_domain_pct``: per network level, of the jobs with 2 or more tasks that
  could have fitted one domain of that level on the empty cluster, the share started inside one
  (``gangs_fitting_one_domain``: how many such jobs; ``gangs_started``: all multi-task jobs);
* ``gpu_memory_overcommit_events``: binds that took some GPU above its usable memory (see
  :mod:`gpusched.sim.placement_quality`; it must be 0);
* MIG (:mod:`gpusched.framework.mig`): ``mig_held_pct``, time-average on ``[a, b]`` of
  ``100 * held / (1000 * #MIG GPUs)`` with ``held`` the GPU-equivalent of the instances in use
  (``null`` without MIG GPUs); ``mig_instances_in_use_max``: most instances in use at once;
  ``mig_gpus_reconfigured``: reconfigurable GPUs given new instances by a plan (counted per
  cycle), ``mig_layouts_chosen`` of which were empty (a layout chosen from scratch).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpusched.framework.quota import QuotaBook, job_request
from gpusched.model import GPU, JobId, QueueName
from gpusched.plugins.fragmentation import Fragmentation, TargetWorkload
from gpusched.sim.engine import Simulation
from gpusched.sim.records import JobRecord

__all__ = ["RunMetrics", "Series", "summarise"]


@dataclass(slots=True)
class Series:
    """Sampled time series of one run."""

    time: list[float] = field(default_factory=list)
    alloc_pct: list[float] = field(default_factory=list)
    held_pct: list[float] = field(default_factory=list)
    frag_time: list[float] = field(default_factory=list)
    frag_pct: list[float] = field(default_factory=list)
    mig_held_pct: list[float] = field(default_factory=list)


class RunMetrics:
    """Observer for :class:`Simulation` that samples series and batch-scheduling counters."""

    def __init__(
        self,
        sim: Simulation,
        target: TargetWorkload,
        frag_samples: int = 400,
        grace_s: float = 900.0,
    ) -> None:
        self.capacity = max(sim.state.total_gpu_milli, 1)
        self.series = Series()
        self._frag = Fragmentation(target, sim.state.models)
        horizon = max((j.submit_time for j in sim.jobs), default=0.0)
        self._frag_step = horizon / frag_samples if horizon > 0 else 0.0
        self._next_frag = 0.0
        self._gangs = [j for j in sim.jobs if j.min_available > 1]
        self.partial_max = 0
        self.partial_gpu_seconds = 0.0
        self._last_t: float | None = None
        self._last_partial_milli = 0
        self.grace_s = grace_s
        self._waiting_since: dict[JobId, float] = {}
        self.violations: set[JobId] = set()
        self.queue_gpu_seconds: dict[QueueName, float] = {}
        self._last_queue_usage: dict[QueueName, int] = {}
        mig = sim.state.mig
        self.mig_capacity = 0 if mig is None else 1000 * len(mig.gpus)
        self.mig_instances_max = 0

    def __call__(self, sim: Simulation) -> None:
        s = self.series
        cap = self.capacity
        now = sim.now
        if self._last_t is not None:
            dt = now - self._last_t
            self.partial_gpu_seconds += self._last_partial_milli / 1000 * dt
            for q, milli in self._last_queue_usage.items():
                self.queue_gpu_seconds[q] = self.queue_gpu_seconds.get(q, 0.0) + milli / 1000 * dt
        self._last_t = now
        s.time.append(now)
        s.alloc_pct.append(100.0 * sim.placed_milli / cap)
        s.held_pct.append(100.0 * sim.state.used_gpu_milli / cap)
        mig = sim.state.mig
        if mig is not None:
            s.mig_held_pct.append(100.0 * mig.held / self.mig_capacity)
            in_use = sum(len(u) for u in mig.used)
            self.mig_instances_max = max(self.mig_instances_max, in_use)
        self._partials(sim)
        usage: Counter[QueueName] = Counter()
        for run in sim.running.values():
            usage[run.job.queue] += run.job.gpu_milli
        self._last_queue_usage = dict(usage)
        if sim.queues is not None:
            self._guarantees(sim)
        if now >= self._next_frag:
            st = sim.state
            f = float(self._frag(st.cpu_free, st.gpu_free, st.model_id).sum())
            s.frag_time.append(now)
            s.frag_pct.append(100.0 * f / cap)
            self._next_frag = now + self._frag_step if self._frag_step else float("inf")

    def _partials(self, sim: Simulation) -> None:
        allocs = sim.state.allocations
        count = 0
        milli = 0
        for job in self._gangs:
            if job.id in sim.running:
                continue
            held = [allocs.get(t.id) for t in job.tasks]
            bound = [a for a in held if a is not None]
            if bound:
                count += 1
                milli += sum(a.gpu_milli * len(a.gpus) for a in bound)
        self.partial_max = max(self.partial_max, count)
        self._last_partial_milli = milli

    def _guarantees(self, sim: Simulation) -> None:
        tree = sim.queues
        assert tree is not None
        # Charged as the scheduler charges them (Session.charge_of): on the GPU models their
        # tasks landed on, so a queue's use of a model counts its jobs that asked for none.
        allocations = sim.state.allocations
        node_models = sim.state.node_models
        charges = []
        for run in sim.running.values():
            held = [t for t in run.job.tasks if t.id in allocations]
            landed = [node_models[allocations[t.id].node] for t in held]
            charges.append((run.job.queue, job_request(run.job, landed, held)))
        book = QuotaBook(tree, sim.state, charges)
        borrowed: dict[str, int] = {}
        # Rebuilt every time: a job that left pending (started, rejected) forgets its wait, so
        # one evicted again later starts a new one.
        waiting: dict[JobId, float] = {}
        for job in sim.pending:
            if job.queue not in tree:
                continue
            req = job_request(job)
            # A job bound to one GPU model is owed that model: count what others borrow of it.
            models = [x for x in req if x.startswith(f"{GPU}/")]
            resource = models[0] if len(models) == 1 else GPU
            if resource not in borrowed:
                borrowed[resource] = sum(book.borrowed(q, resource) for q in tree.leaves())
            others = borrowed[resource] - book.borrowed(job.queue, resource)
            if book.within_guarantee(job.queue, req) and others >= req[resource] > 0:
                since = waiting[job.id] = self._waiting_since.get(job.id, sim.now)
                if sim.now - since > self.grace_s:
                    self.violations.add(job.id)
        self._waiting_since = waiting


def _time_average(t: list[float], v: list[float], end: float) -> float:
    """Average of the step function ``v`` over ``[t[0], end]``."""
    ta = np.asarray(t)
    va = np.asarray(v)
    keep = ta <= end
    ta, va = np.append(ta[keep], end), va[keep]
    if len(va) == 0:
        return 0.0
    va = np.append(va, va[-1])
    dt = np.diff(ta)
    span = ta[-1] - ta[0]
    return float((va[:-1] * dt).sum() / span) if span > 0 else float(va[-1])


def _jain(values: list[float]) -> float:
    if not values or not any(values):
        return 1.0
    arr = np.asarray(values)
    return float(arr.sum() ** 2 / (len(arr) * (arr**2).sum()))


def _pending_by_cause(records: Sequence[JobRecord]) -> dict[str, float]:
    """Hours pending before the first start, summed over ``records``, by cause (largest
    first)."""
    hours: dict[str, float] = {}
    for rec in records:
        for cause, seconds in rec.pending_by_cause.items():
            hours[cause.value] = hours.get(cause.value, 0.0) + seconds / 3600
    return {c: round(h, 1) for c, h in sorted(hours.items(), key=lambda kv: -kv[1])}


def _wait_by(rec: JobRecord, last: float) -> float:
    """``rec``'s wait; a job that never started counts with its wait until ``last``."""
    return rec.wait if rec.wait is not None else last - rec.arrival


def summarise(sim: Simulation, metrics: RunMetrics) -> dict[str, Any]:
    """The run's summary numbers (see module docstring)."""
    recs = list(sim.records.values())
    waits = [r.wait for r in recs if r.wait is not None]
    jcts = [r.end - r.arrival for r in recs if r.end is not None]
    unplaced: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = {}
    for rec in recs:
        if rec.first_start is None:
            code = rec.status.code.value if rec.status else "NeverTried"
            unplaced[code] += 1
            if rec.status is not None and rec.status.reasons:
                reasons.setdefault(code, Counter())[rec.status.reasons[0]] += 1
    s = metrics.series
    end = max((r.arrival for r in recs), default=0.0)
    frag = [f for t, f in zip(s.frag_time, s.frag_pct, strict=True) if t <= end] or s.frag_pct
    last = s.time[-1] if s.time else 0.0
    largest = sorted(recs, key=lambda r: -r.job.gpu_milli)[: max(1, len(recs) // 100)]
    tied = [r for r in recs if r.job.gpu_milli >= largest[-1].job.gpu_milli] if largest else []
    big_waits = [_wait_by(r, last) for r in largest]
    tied_waits = [_wait_by(r, last) for r in tied]
    demand = {r.job.queue for r in recs}
    weights = {q.name: q.weight for q in sim.queues} if sim.queues is not None else {}
    span = max(last - (s.time[0] if s.time else 0.0), 1e-9)
    shares = [
        metrics.queue_gpu_seconds.get(q, 0.0) / span / weights.get(q, 1.0) for q in sorted(demand)
    ]
    alloc = round(_time_average(s.time, s.alloc_pct, end), 3)
    return {
        "jobs": len(recs),
        "jobs_started": len(waits),
        "jobs_completed": len(jcts),
        "jobs_unplaced": dict(unplaced),
        "unplaced_top_reason": {k: c.most_common(1)[0][0] for k, c in reasons.items()},
        "gpu_allocation_pct": alloc,
        "gpu_utilization_pct": alloc,
        "gpu_held_pct": round(_time_average(s.time, s.held_pct, end), 3),
        "fragmentation_pct": round(float(np.mean(frag)) if frag else 0.0, 3),
        "avg_wait_s": round(float(np.mean(waits)), 3) if waits else 0.0,
        "p95_wait_s": round(float(np.percentile(waits, 95)), 3) if waits else 0.0,
        "max_wait_s_top1pct_largest": round(max(big_waits), 3) if big_waits else 0.0,
        "max_wait_s_top1pct_largest_ties": round(max(tied_waits), 3) if tied_waits else 0.0,
        "jobs_top1pct_largest_ties": len(tied),
        "pending_h_top1pct_largest_by_cause": _pending_by_cause(largest),
        "avg_jct_s": round(float(np.mean(jcts)), 3) if jcts else 0.0,
        "partially_placed_gangs_max": metrics.partial_max,
        "idle_gpu_hours_held_by_partial_gangs": round(metrics.partial_gpu_seconds / 3600, 3),
        "preemptions": sim.preemptions,
        "preemption_loops": sim.preemption_loops,
        "max_disruptions_of_one_job": max((r.evictions + r.moves for r in recs), default=0),
        "elastic_members_evicted": sim.elastic_members_evicted,
        "defrag_moves": sim.defrag_moves,
        "defrag_tasks_moved": sim.defrag_tasks_moved,
        "defrag_gpu_hours_lost": round(sim.defrag_gpu_seconds_lost / 3600, 3),
        "jain_fairness": round(_jain(shares), 4),
        "quota_guarantee_violations": len(metrics.violations),
        "multi_gpu_tasks_on_best_connected_set_pct": (
            round(100.0 * sim.quality.multi_gpu_best_connected / sim.quality.multi_gpu_binds, 3)
            if sim.quality.multi_gpu_binds
            else None
        ),
        "multi_gpu_tasks_with_topology": sim.quality.multi_gpu_binds,
        "gangs_within_one_domain_pct": {
            level: round(100.0 * within / fits, 3) if fits else None
            for level, (_, fits, within) in sim.quality.gangs_in_one_domain.items()
        },
        "gangs_fitting_one_domain": {
            level: fits for level, (_, fits, _) in sim.quality.gangs_in_one_domain.items()
        },
        "gangs_started": max((c[0] for c in sim.quality.gangs_in_one_domain.values()), default=0),
        "gpu_memory_overcommit_events": sim.quality.gpu_memory_overcommit_events,
        "mig_held_pct": (
            round(_time_average(s.time, s.mig_held_pct, end), 3) if s.mig_held_pct else None
        ),
        "mig_instances_in_use_max": metrics.mig_instances_max,
        "mig_gpus_reconfigured": sim.quality.mig_gpus_reconfigured,
        "mig_layouts_chosen": sim.quality.mig_layouts_chosen,
        "makespan_s": round(last - (s.time[0] if s.time else 0.0), 3),
        "cycles": sim.cycle,
    }
