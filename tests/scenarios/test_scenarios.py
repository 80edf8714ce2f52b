"""Declarative scenarios for the batch actions: one YAML file per behaviour, one loader.

Each ``tests/scenarios/<behaviour>.yaml`` describes a cluster, a scheduling config, jobs and
what must happen; this module runs them all (one test per file, named by the file). A file::

    description: what the scenario shows, and why the expectations follow (comments: the numbers)
    xfail: "reason"            # optional: the code disagrees with the documented behaviour
    xfail_checks: [binds]      # with xfail: the checks known to fail; any other failure fails
    profile: gpusched          # a built-in policy name, or an inline profile (ProfileSpec)
    now: 1000                  # the cycle's time (single-cycle scenarios)
    seed: 0
    cluster:
      nodes:                   # native node groups (gpusched.io.native_cluster), plus taints
        - {name: a, cpu: 64, memory: 512Gi, gpus: 8, gpu_model: H100,
           labels: {pool: train}, taints: [{key: dedicated, value: infer, effect: NoSchedule}]}
    scheduling: {priority_classes: [...], queues: [...]}     # gpusched.io.scheduling format
    running:                   # single-cycle only: jobs already holding resources
      - job: {name: lo, replicas: 2, cpu: 8, memory: 64Gi, gpus: 4, runtime_estimate: 3600}
        start: 0
        evictions: 0           # times evicted before (disruption budget)
        deadline: 2000         # admitted to reserved nodes, expected to end by then
        placement: [{node: a, gpus: [0, 1, 2, 3]}, {node: b, gpus: [0, 1, 2, 3]}]  # per task
                               # a MIG task: {node: a, mig: ["0:3g.40gb@4"]} (GPU:PROFILE@START)
    pending:                   # native job entries, plus tolerations, node_selector, affinity
      - {name: hi, priority: 100, cpu: 8, memory: 64Gi, gpus: 8}
    runtime_stats: [{user: alice, kind: training, mean: 1800}]
    usage_history: {team-a: {gpu: 4000}}
    reserved: {big: 500}       # held a reservation last cycle, since then
    evicted_by: {hi: [lo]}     # hi was evicted for lo before (it never evicts lo in return)
    evicted: {hi: 3}           # times pending jobs were evicted before (disruption budget)
    simulate: false            # true: run the simulator over `pending` (submit, duration)
    expect:
      binds: {hi: {nodes: [a], gpus: {a: [0, 1, 2, 3]}, tasks: 1}}   # exactly these jobs bind
                                          # (also gpu_milli: the share held on each GPU;
                                          #  mig: ["0:1g.10gb@6"], its MIG instances)
      evictions: [lo]                   # exactly these are evicted (moved jobs are not listed)
      evicted_members: {el: [el-3, el-2]}     # elastic pods evicted (the job keeps running)
      no_binds: {other: {reason: "substring", code: Unschedulable, cause: nodes}}  # stays pending
      reservations: {big: {start: 3600, nodes: [a]}}                  # exactly these, if given
      estimated_start: {big: 3600, never: null}                       # null: no estimate
      nominations: {hi: [a]}                                          # exactly these, if given
      deadlines: {small: 3600}        # exactly these jobs must end by then (reserved nodes)
      moves: {lo: {nodes: [c], for: hi, tasks: 2}}   # exactly these jobs move (none if omitted)
      mig_layouts: {rc/1: {layout: ["3g.40gb@4"], was_empty: true}}   # exactly these, if given
      metrics: {preemption_loops: 0}                                  # simulate: summary values
      events: ["evict lo for hi", "bind hi"]                          # simulate: in this order
      jobs: {lo: {evictions: 1, first_start: 0}}                      # simulate: job records

Single-cycle scenarios run one ``schedule(Snapshot(...), profile)``; besides the expectations,
every plan is checked for the invariants any plan must keep: applying its evictions then its
binds and moves over-commits nothing, evicted jobs were running and preemptible, a moved job
was evicted and moves every task it held (gangs move whole), and (for gang profiles) every job
that binds ends up with at least ``min_available`` tasks placed. Simulated scenarios
check the same after every cycle.

All checks of a scenario run and every mismatch is reported, named by the expectation it breaks
(``binds``, ``binds[j]``, ``evictions``, ``evicted_members``, ``moves``, ``no_binds[j]``,
``reservations``, ``estimated_start[j]``, ``nominations``, ``metrics[k]``, ``events``,
``jobs[j].first_start``, ``invariant``).

A scenario marked ``xfail`` documents a disagreement between code and documented behaviour: the
expectation is kept as documented and the scenario is expected to fail, strictly: it is an error
if it passes (remove the mark when the bug is fixed), and with ``xfail_checks`` it is an error if
any check fails other than the named ones, so the rest of the scenario keeps guarding.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpusched.errors import InvariantError, TraceError
from gpusched.framework import (
    Cause,
    ClusterState,
    Code,
    Plan,
    PluginContext,
    ProfileSpec,
    RunningJob,
    Snapshot,
    Statement,
)
from gpusched.io.native_cluster import NodeGroup
from gpusched.io.native_jobs import JobEntry
from gpusched.io.scheduling import (
    SchedulingConfig,
    apply_priority_classes,
    check_job_queues,
    parse_scheduling,
)
from gpusched.io.yamlfile import load_yaml, validate
from gpusched.model import (
    JobId,
    NodeName,
    QueueName,
    Task,
    TaskId,
)
from gpusched.model.mig import MigSlice, parse_placement
from gpusched.model.mig_layout import layout_problem
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.scheduler import build_profile, policy_spec, schedule
from gpusched.sim import SimOptions, Simulation
from gpusched.sim.metrics import RunMetrics, summarise

HERE = Path(__file__).parent
SCENARIOS = sorted(HERE.glob("*.yaml"))

#: Behaviours that must each have a scenario (a missing file is a visible gap).
REQUIRED = (
    "backfill_respects_reservation",
    "backfill_small_job_fits_before_reservation",
    "defrag_for_gang",
    "defrag_never_moves_ineligible",
    "defrag_not_worth_it",
    "defrag_simulated_restart",
    "estimated_start_for_pending",
    "fair_share_orders_queues",
    "gang_all_or_nothing",
    "gang_elastic_members_go_first",
    "kube_default_leaves_gang_partial",
    "lending_limit_protects_idle_guarantee",
    "no_preemption_loop",
    "no_preemption_of_non_preemptible",
    "node_selector_and_affinity",
    "preempt_gang",
    "preempt_respects_disruption_budget",
    "preempt_respects_min_runtime",
    "queue_limit_blocks",
    "reclaim_borrowed_quota",
    "taints_and_tolerations",
    "unresolvable_gang_rejected",
)

# -- the scenario schema ---------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# The native formats carry taints and node constraints (same field names), so scenario files
# use the native entries as they are.
ScenarioNodeGroup = NodeGroup
ScenarioJob = JobEntry


class Placement(_Strict):
    node: str
    gpus: list[int] = Field(default_factory=list)
    mig: list[str] | None = Field(default=None, description="MIG instances, GPU:PROFILE@START.")


def mig_slice(text: str) -> MigSlice:
    """``"0:3g.40gb@4"`` -> the instance (scenario files name MIG instances so)."""
    gpu, _, rest = text.partition(":")
    place = parse_placement(rest)
    return MigSlice(int(gpu), place.profile, place.start)


class MigLayoutExpect(_Strict):
    layout: list[str] = Field(description="The GPU's instances, PROFILE@START, by start.")
    was_empty: bool | None = None


class RunningEntry(_Strict):
    job: ScenarioJob
    start: float = 0.0
    evictions: int = Field(default=0, ge=0)
    deadline: float | None = None
    placement: list[Placement] = Field(min_length=1, description="One per task, in task order.")


class ClusterSpec(_Strict):
    nodes: list[ScenarioNodeGroup] = Field(min_length=1)


class RuntimeStat(_Strict):
    user: str = ""
    kind: str = "batch"
    mean: float = Field(gt=0)


class BindExpect(_Strict):
    nodes: list[str] | None = Field(default=None, description="Exactly the nodes it lands on.")
    gpus: dict[str, list[int]] | None = Field(
        default=None, description="Per node, the GPU indices its tasks hold there."
    )
    tasks: int | None = Field(default=None, description="How many of its tasks bind.")
    gpu_milli: int | None = Field(
        default=None, description="The share each of its tasks holds on each of its GPUs."
    )
    mig: list[str] | None = Field(
        default=None, description="Its tasks' MIG instances, GPU:PROFILE@START (any order)."
    )


class PendingExpect(_Strict):
    reason: str = Field(default="", description="A substring of the pending status message.")
    code: Code | None = None
    cause: Cause | None = Field(default=None, description="The status's cause, if given.")


class ReservationExpect(_Strict):
    start: float | None = None
    nodes: list[str] | None = None


class MoveExpect(_Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    nodes: list[str] | None = Field(default=None, description="Exactly the nodes it moves to.")
    for_job: str | None = Field(default=None, alias="for", description="The job it moves for.")
    tasks: int | None = Field(default=None, description="How many of its tasks move.")


class JobRecordExpect(_Strict):
    started: bool | None = None
    first_start: float | None = None
    end: float | None = None
    evictions: int | None = None


class Expect(_Strict):
    binds: dict[str, BindExpect | None] = Field(default_factory=dict)
    evictions: list[str] = Field(default_factory=list)
    evicted_members: dict[str, list[str]] = Field(default_factory=dict)
    no_binds: dict[str, PendingExpect | None] = Field(default_factory=dict)
    reservations: dict[str, ReservationExpect] | None = None
    estimated_start: dict[str, float | None] = Field(
        default_factory=dict, description="Per job, its estimated start; null: none given."
    )
    nominations: dict[str, list[str]] | None = None
    deadlines: dict[str, float] | None = Field(
        default=None, description="Exactly these jobs get a deadline (Plan.deadlines), by then."
    )
    moves: dict[str, MoveExpect | None] = Field(default_factory=dict)
    mig_layouts: dict[str, MigLayoutExpect] | None = Field(
        default=None, description="NODE/GPU -> the layout a reconfigured MIG GPU must have."
    )
    metrics: dict[str, float] = Field(default_factory=dict)
    events: list[str] = Field(default_factory=list)
    jobs: dict[str, JobRecordExpect] = Field(default_factory=dict)


class Scenario(_Strict):
    description: str = Field(min_length=1)
    xfail: str | None = Field(default=None, min_length=10)
    xfail_checks: list[str] = Field(
        default_factory=list,
        description="Names of the checks known to fail (``binds``, ``evictions``, "
        "``jobs[x].first_start``, ...); any other failure fails the test.",
    )
    profile: str | ProfileSpec = "gpusched"
    now: float = 0.0
    seed: int = 0
    simulate: bool = False
    cluster: ClusterSpec
    scheduling: dict[str, Any] | None = None
    running: list[RunningEntry] = Field(default_factory=list)
    pending: list[ScenarioJob] = Field(default_factory=list)
    runtime_stats: list[RuntimeStat] = Field(default_factory=list)
    usage_history: dict[str, dict[str, float]] = Field(default_factory=dict)
    reserved: dict[str, float] = Field(default_factory=dict)
    evicted_by: dict[str, list[str]] = Field(default_factory=dict)
    evicted: dict[str, int] = Field(default_factory=dict)
    expect: Expect

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.simulate and self.running:
            raise ValueError("a simulated scenario starts empty: give jobs under `pending`")
        if self.xfail_checks and not self.xfail:
            raise ValueError("xfail_checks without xfail")
        if not self.simulate and (self.expect.metrics or self.expect.events or self.expect.jobs):
            raise ValueError("metrics, events and jobs expectations need `simulate: true`")
        return self


# -- building --------------------------------------------------------------------------------


class Loaded:
    """A scenario file, validated and built into model objects."""

    def __init__(self, path: Path) -> None:
        data = load_yaml(path)
        self.path = path
        self.spec = validate(Scenario, data, path)
        raw = data.get("scheduling") if isinstance(data, dict) else None
        self.config: SchedulingConfig = parse_scheduling(raw, path)
        self.nodes = [n for group in self.spec.cluster.nodes for n in group.build()]
        running = apply_priority_classes(
            [r.job.build() for r in self.spec.running], self.config, path
        )
        self.running = list(zip(self.spec.running, running, strict=True))
        self.pending = apply_priority_classes(
            [j.build() for j in self.spec.pending], self.config, path
        )
        check_job_queues([*running, *self.pending], self.config, path)
        spec = self.spec.profile
        self.profile_spec = policy_spec(spec) if isinstance(spec, str) else spec
        shapes = [t.shape for j in [*running, *self.pending] for t in j.tasks]
        self.profile = build_profile(
            self.profile_spec, PluginContext(workload_hint=shapes, seed=self.spec.seed)
        )
        self.jobs = {j.id: j for j in [*running, *self.pending]}
        dup = Counter(j.id for j in [*running, *self.pending]) - Counter(set(self.jobs))
        assert not dup, f"{path.name}: job names used twice: {sorted(dup)}"

    @property
    def gangs(self) -> bool:
        """Whether the profile promises all-or-nothing gangs."""
        return "allocate-pods" not in self.profile_spec.actions

    def snapshot(self) -> Snapshot:
        state = ClusterState.from_nodes(self.nodes)
        running: dict[JobId, RunningJob] = {}
        for entry, job in self.running:
            assert len(entry.placement) <= len(job.tasks), f"{job.id}: more placements than tasks"
            assert len(entry.placement) >= job.min_available, f"{job.id}: running below its gang"
            for task, where in zip(job.tasks, entry.placement, strict=False):
                mig = None if where.mig is None else tuple(mig_slice(m) for m in where.mig)
                node = state.index[NodeName(where.node)]
                state.allocate(task, node, tuple(where.gpus), None, mig)
            running[job.id] = RunningJob(job, entry.start, entry.evictions, entry.deadline)
        return Snapshot(
            state,
            tuple(self.pending),
            self.spec.now,
            self.spec.seed,
            running=running,
            queues=self.config.queues,
            usage_history={QueueName(q): dict(u) for q, u in self.spec.usage_history.items()},
            runtime_stats={(s.user, s.kind): s.mean for s in self.spec.runtime_stats},
            evictions={
                **{job.id: entry.evictions for entry, job in self.running},
                **{JobId(j): n for j, n in self.spec.evicted.items()},
            },
            reserved={JobId(j): since for j, since in self.spec.reserved.items()},
            evicted_by={
                JobId(j): frozenset(JobId(x) for x in by) for j, by in self.spec.evicted_by.items()
            },
        )


# -- checks ----------------------------------------------------------------------------------


class Failures:
    """Soft checks: every mismatch of a scenario is reported, each starting with the name of
    the expectation it breaks (``binds``, ``evictions``, ``no_binds[j]``, ``metrics[k]``, ...), so
    an ``xfail`` scenario can say exactly which checks are known to fail (``xfail_checks``)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.items.append(message)


def check_plan_invariants(loaded: Loaded, snapshot: Snapshot, plan: Plan, fails: Failures) -> None:
    """What every plan must keep, whatever the scenario expects (module docstring)."""
    state = snapshot.state.copy()
    tasks: dict[TaskId, Task] = {t.id: t for j in loaded.jobs.values() for t in j.tasks}
    for ev in plan.evictions:
        run = snapshot.running.get(ev.job)
        fails.check(run is not None, f"invariant: evicted {ev.job}, which was not running")
        if run is None:
            continue
        fails.check(run.job.preemptible, f"invariant: evicted non-preemptible {ev.job}")
        if not ev.tasks:
            state.release_many(t.id for t in run.job.tasks)
            continue
        elastic = {t.id for t in run.job.tasks[run.job.min_available :]}
        fails.check(
            set(ev.tasks) <= elastic,
            f"invariant: member eviction of {ev.job} takes non-elastic pods {ev.tasks}",
        )
        state.release_many(ev.tasks)
        held = sum(1 for t in run.job.tasks if t.id in state.allocations)
        fails.check(
            held >= run.job.min_available,
            f"invariant: {ev.job} left with {held} < min_available pods",
        )
    evicted = {e.job for e in plan.evictions if not e.tasks}
    for job_id in plan.moved_jobs():
        fails.check(job_id in evicted, f"invariant: moved {job_id} without evicting it")
        run = snapshot.running.get(job_id)
        bound: set[TaskId] = (
            {t.id for t in run.job.tasks if t.id in snapshot.state.allocations} if run else set()
        )
        moving = {m.task for m in plan.moves if m.job == job_id}
        fails.check(
            moving == bound, f"invariant: {job_id} moves {sorted(moving)}, held {sorted(bound)}"
        )
    stmt = Statement(state)
    try:
        for b in plan.binds:
            stmt.allocate(tasks[b.task], state.index[b.node], b.gpus, b.gpu_milli, b.mig or None)
        for m in plan.moves:
            stmt.allocate(tasks[m.task], state.index[m.to_node], m.to_gpus, m.gpu_milli)
    except InvariantError as exc:
        fails.check(False, f"invariant: the plan over-commits: {exc}")
        return
    if loaded.gangs:
        placed = Counter(a.job for a in state.allocations.values())
        for job_id in plan.bound_jobs():
            need = loaded.jobs[job_id].min_available
            fails.check(
                placed[job_id] >= need, f"invariant: gang {job_id} has {placed[job_id]}/{need}"
            )
        both = sorted(plan.bound_jobs() & set(plan.pending))
        fails.check(not both, f"invariant: {both} both bind and stay pending")


def check_plan(loaded: Loaded, plan: Plan, fails: Failures) -> None:
    expect = loaded.spec.expect
    moved = plan.moved_jobs()
    evicted = [e.job for e in plan.evictions if not e.tasks and e.job not in moved]
    fails.check(
        sorted(moved) == sorted(expect.moves),
        f"moves: jobs moved {sorted(moved)}; expected {sorted(expect.moves)}",
    )
    for job_id, want_move in expect.moves.items():
        mine_moves = [m for m in plan.moves if m.job == job_id]
        if want_move is None or not mine_moves:
            continue
        if want_move.nodes is not None:
            to = sorted({m.to_node for m in mine_moves})
            fails.check(
                to == sorted(want_move.nodes), f"moves[{job_id}]: to {to}, not {want_move.nodes}"
            )
        if want_move.for_job is not None:
            for_jobs = sorted({m.for_job for m in mine_moves})
            fails.check(
                for_jobs == [want_move.for_job],
                f"moves[{job_id}]: for {for_jobs}, not {want_move.for_job}",
            )
        if want_move.tasks is not None:
            fails.check(
                len(mine_moves) == want_move.tasks,
                f"moves[{job_id}]: {len(mine_moves)} tasks, not {want_move.tasks}",
            )
    fails.check(
        sorted(evicted) == sorted(expect.evictions),
        f"evictions: {sorted(evicted)}; expected {sorted(expect.evictions)}",
    )
    fails.check(len(set(evicted)) == len(evicted), f"evictions: a job evicted twice: {evicted}")
    members: dict[str, list[str]] = {}
    for e in plan.evictions:
        if e.tasks:
            members.setdefault(e.job, []).extend(e.tasks)
    want_members = {j: sorted(t) for j, t in expect.evicted_members.items()}
    got_members = {j: sorted(t) for j, t in members.items()}
    fails.check(
        got_members == want_members,
        f"evicted_members: {got_members}; expected {want_members}",
    )
    bound = plan.bound_jobs()
    pending = {j: s.message for j, s in plan.pending.items()}
    fails.check(
        sorted(bound) == sorted(expect.binds),
        f"binds: jobs bound {sorted(bound)}; expected {sorted(expect.binds)}; pending {pending}",
    )
    for job_id, want in expect.binds.items():
        if want is None:
            continue
        mine = [b for b in plan.binds if b.job == job_id]
        if want.tasks is not None:
            fails.check(
                len(mine) == want.tasks, f"binds[{job_id}]: {len(mine)} tasks, not {want.tasks}"
            )
        if want.nodes is not None:
            got = sorted({b.node for b in mine})
            fails.check(got == sorted(want.nodes), f"binds[{job_id}]: on {got}, not {want.nodes}")
        if want.gpu_milli is not None:
            held = sorted({b.gpu_milli for b in mine})
            fails.check(
                held == [want.gpu_milli],
                f"binds[{job_id}]: holds {held} milli, not {want.gpu_milli}",
            )
        if want.mig is not None:
            got_mig = sorted(str(sl) for b in mine for sl in b.mig)
            fails.check(
                got_mig == sorted(want.mig), f"binds[{job_id}]: MIG {got_mig}, not {want.mig}"
            )
        if want.gpus is not None:
            gpus: dict[str, list[int]] = {}
            for b in mine:
                gpus.setdefault(b.node, []).extend(b.gpus)
            got_gpus = {n: sorted(g) for n, g in gpus.items()}
            want_gpus = {n: sorted(g) for n, g in want.gpus.items()}
            fails.check(got_gpus == want_gpus, f"binds[{job_id}]: GPUs {got_gpus}, not {want_gpus}")
    if expect.mig_layouts is not None:
        check_mig_layouts(plan, expect.mig_layouts, fails)
    for job_id, pend in expect.no_binds.items():
        status = plan.pending.get(JobId(job_id))
        fails.check(status is not None, f"no_binds[{job_id}]: not pending (no status)")
        if status is None or pend is None:
            continue
        fails.check(
            pend.reason in status.message,
            f"no_binds[{job_id}]: reason {status.message!r} lacks {pend.reason!r}",
        )
        fails.check(
            pend.code is None or status.code is pend.code,
            f"no_binds[{job_id}]: code {status.code}, not {pend.code}",
        )
        fails.check(
            pend.cause is None or status.cause is pend.cause,
            f"no_binds[{job_id}]: cause {status.cause}, not {pend.cause}",
        )
    if expect.reservations is not None:
        got_res = plan.reservations
        fails.check(
            sorted(got_res) == sorted(expect.reservations),
            f"reservations: for {sorted(got_res)}; expected {sorted(expect.reservations)}",
        )
        for job_id, want_res in expect.reservations.items():
            res = got_res.get(JobId(job_id))
            if res is None:
                continue
            fails.check(
                want_res.start is None or res.start == pytest.approx(want_res.start),
                f"reservations[{job_id}]: starts at {res.start}, not {want_res.start}",
            )
            fails.check(
                want_res.nodes is None or sorted(res.nodes) == sorted(want_res.nodes),
                f"reservations[{job_id}]: holds {sorted(res.nodes)}, not {want_res.nodes}",
            )
    for job_id, start in expect.estimated_start.items():
        got_start = plan.estimated_start.get(JobId(job_id))
        fails.check(
            got_start is None if start is None else got_start == pytest.approx(start),
            f"estimated_start[{job_id}]: {got_start}, not {start}",
        )
    if expect.nominations is not None:
        got_nom = {j: sorted(n) for j, n in plan.nominations.items()}
        want_nom = {j: sorted(n) for j, n in expect.nominations.items()}
        fails.check(got_nom == want_nom, f"nominations: {got_nom}, not {want_nom}")
    if expect.deadlines is not None:
        got_due = {str(j): due for j, (due, _) in plan.deadlines.items()}
        fails.check(got_due == expect.deadlines, f"deadlines: {got_due}, not {expect.deadlines}")


def check_mig_layouts(plan: Plan, want: dict[str, MigLayoutExpect], fails: Failures) -> None:
    got = {f"{m.node}/{m.gpu}": m for m in plan.mig_layouts}
    fails.check(
        sorted(got) == sorted(want), f"mig_layouts: for {sorted(got)}; expected {sorted(want)}"
    )
    for key, exp in want.items():
        layout = got.get(key)
        if layout is None:
            continue
        have = [f"{p.profile}@{p.start}" for p in layout.layout]
        fails.check(have == exp.layout, f"mig_layouts[{key}]: {have}, not {exp.layout}")
        fails.check(
            exp.was_empty is None or layout.was_empty == exp.was_empty,
            f"mig_layouts[{key}]: was_empty {layout.was_empty}, not {exp.was_empty}",
        )


def run_single_cycle(loaded: Loaded, fails: Failures) -> None:
    snapshot = loaded.snapshot()
    plan = schedule(snapshot, loaded.profile)
    check_plan_invariants(loaded, snapshot, plan, fails)
    check_plan(loaded, plan, fails)


def check_state(loaded: Loaded, sim: Simulation, fails: Failures) -> None:
    """After every simulated cycle: nothing over-committed, gangs whole (gang profiles)."""
    st = sim.state
    fails.check(bool((st.cpu_free >= 0).all()), f"invariant: t={sim.now}: CPU over-committed")
    fails.check(bool((st.mem_free >= 0).all()), f"invariant: t={sim.now}: memory over-committed")
    fails.check(bool((st.gpu_free >= 0).all()), f"invariant: t={sim.now}: GPU over-committed")
    mig = st.mig
    for m in () if mig is None else mig.gpus:
        problem = None if mig is None else layout_problem(m.geometry, mig.layout(m.node, m.gpu))
        fails.check(problem is None, f"invariant: t={sim.now}: MIG layout invalid: {problem}")
    if loaded.gangs:
        placed = Counter(a.job for a in st.allocations.values())
        for job_id, count in placed.items():
            need = loaded.jobs[job_id].min_available
            fails.check(
                count >= need, f"invariant: t={sim.now}: gang {job_id} has {count}/{need} placed"
            )


def run_simulation(loaded: Loaded, fails: Failures) -> str:
    """Run the simulator; returns the event log (shown when the scenario fails)."""
    expect = loaded.spec.expect
    jobs = loaded.pending
    sim = Simulation(
        loaded.nodes,
        jobs,
        loaded.profile,
        seed=loaded.spec.seed,
        options=SimOptions(record_events=True),
        queues=loaded.config.queues,
    )
    metrics = RunMetrics(sim, TargetWorkload.from_shapes([t.shape for j in jobs for t in j.tasks]))
    sim.observers.extend([metrics, lambda s: check_state(loaded, s, fails)])
    sim.run()
    summary = summarise(sim, metrics)
    log = sim.event_log()
    for key, value in expect.metrics.items():
        fails.check(key in summary, f"metrics[{key}]: no such metric; known: {sorted(summary)}")
        if key in summary:
            fails.check(
                summary[key] == pytest.approx(value), f"metrics[{key}]: {summary[key]}, not {value}"
            )
    lines = log.splitlines()
    at = 0
    for wanted in expect.events:
        found = next((i for i in range(at, len(lines)) if wanted in lines[i]), None)
        fails.check(found is not None, f"events: no {wanted!r} after log line {at + 1}")
        at = at if found is None else found + 1
    for job_id, want in expect.jobs.items():
        rec = sim.records[JobId(job_id)]
        fails.check(
            want.started is None or (rec.first_start is not None) == want.started,
            f"jobs[{job_id}].started: first start {rec.first_start}, expected started="
            f"{want.started}",
        )
        fails.check(
            want.first_start is None or rec.first_start == pytest.approx(want.first_start),
            f"jobs[{job_id}].first_start: {rec.first_start}, not {want.first_start}",
        )
        fails.check(
            want.end is None or rec.end == pytest.approx(want.end),
            f"jobs[{job_id}].end: {rec.end}, not {want.end}",
        )
        fails.check(
            want.evictions is None or rec.evictions == want.evictions,
            f"jobs[{job_id}].evictions: {rec.evictions}, not {want.evictions}",
        )
    return log


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    loaded = Loaded(path)
    fails = Failures()
    log = run_simulation(loaded, fails) if loaded.spec.simulate else ""
    if not loaded.spec.simulate:
        run_single_cycle(loaded, fails)
    report = "\n".join(f"  - {f}" for f in fails.items)
    xfail = loaded.spec.xfail
    if xfail is None:
        assert not fails.items, f"{path.name}:\n{report}\n{log}"
        return
    if not fails.items:
        pytest.fail(f"{path.name} passes but is marked xfail ({xfail}); remove the mark")
    known = loaded.spec.xfail_checks
    unexpected = [f for f in fails.items if known and not any(f.startswith(k) for k in known)]
    assert not unexpected, (
        f"{path.name}: failures beyond the known ones ({known}):\n"
        + "\n".join(f"  - {f}" for f in unexpected)
        + f"\n{log}"
    )
    pytest.xfail(f"{xfail}\n{report}")


def test_a_bad_scenario_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "description: x\ncluster:\n  nodes: [{name: a, cpu: 1, memory: 1}]\n"
        "expect:\n  bind: {j: null}\n",
        encoding="utf-8",
    )
    with pytest.raises(TraceError) as err:
        Loaded(path)
    assert (err.value.line, err.value.field) == (5, "expect.bind")


def test_every_required_behaviour_has_a_scenario() -> None:
    have = {p.stem for p in SCENARIOS}
    missing = [name for name in REQUIRED if name not in have]
    assert not missing, f"scenario files missing: {missing}"
