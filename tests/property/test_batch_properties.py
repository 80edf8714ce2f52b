"""Invariants of batch scheduling under the ``gpusched`` profile, on random small clusters, queue
trees and gang workloads run through the simulator with queues.

Checked after every event (observer) or every cycle (probe actions placed around the profile's
own actions, reading the cycle's session):

* **gangs are all or nothing:** no job with ``min_available > 1`` ever has
  ``0 < bound tasks < min_available``;
* **nothing is over-committed:** per node, free CPU, memory and per-GPU share equal capacity
  minus what allocations hold, and are never negative;
* **evictions follow the rules:** a victim was running when the cycle began, is preemptible,
  ran at least ``min_runtime_s`` (300 s), was evicted fewer than ``max_evictions`` (3) times
  before unless reclaimed (reclaim's last resort), and leaves whole; a ``preempt`` victim has
  lower priority than the job it makes room for; a ``reclaim`` victim belongs to another
  queue; a job moved by ``defrag`` is restartable, has at most the priority of the job it is
  moved for, and that job binds in the same cycle;
* **no preemption loops:** the simulator's ``preemption_loops`` is 0 (no job evicts a job that
  evicted it);
* **determinism:** the same inputs and seed give the same event log, byte for byte; and the
  same again when the simulator passes no :class:`~gpusched.framework.memo.CycleMemo` (the memo
  only saves work);
* **reclaim restores guarantees without breaking another** (precisely, for every eviction made by
  ``reclaim`` for job ``J`` of queue ``q`` in a cycle):
  (a) the victim's queue still borrowed GPUs (usage above its GPU guarantee) just before that
  victim was taken, counting the victims taken before it in the cycle -- reclaim takes only
  from borrowers, and (gangs being whole) at most its last victim of a queue may take that
  queue below its guarantee; (b) ``J`` binds in that same cycle, so the GPUs taken back go to
  the owner, not back to a borrower; (c) after the cycle, ``q`` and each of its ancestors use
  no more GPUs than they are guaranteed -- ``J`` did not borrow, so it cannot be reclaimed in
  turn. (a) and (b, c) are two tests, each with an explicit example of a bug it once found.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from hypothesis import example, given
from hypothesis import strategies as st

from builders import make_job, make_node
from gpusched.framework import (
    Action,
    Plan,
    PluginContext,
    Profile,
    RunningJob,
    Session,
    Snapshot,
)
from gpusched.framework.quota import job_request
from gpusched.model import (
    GPU,
    Job,
    JobId,
    Node,
    QueueName,
    QueueSpec,
    QueueTree,
    Resources,
    Task,
    TaskId,
)
from gpusched.scheduler import build_profile, policy_spec
from gpusched.sim import SimOptions, Simulation

from .invariants import check_no_overcommit

MODELS = ("G2", "T4")
MIN_RUNTIME_S = 300.0  # the preempt and reclaim defaults of the gpusched profile
MAX_EVICTIONS = 3

# -- random cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A cluster, a queue tree and a workload whose jobs name the tree's leaf queues."""

    nodes: tuple[Node, ...]
    queues: QueueTree
    jobs: tuple[Job, ...]

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        nodes = ", ".join(f"{n.name}:{n.gpu_count}x{n.gpu_model}" for n in self.nodes)
        queues = "; ".join(
            f"{q.name}(parent={q.parent}, G={dict(q.guaranteed)}, L={q.limit and dict(q.limit)}, "
            f"lend={q.lending_limit and dict(q.lending_limit)}, w={q.weight})"
            for q in self.queues
        )
        jobs = "\n  ".join(
            f"{j.id}: q={j.queue} prio={j.priority} pre={j.preemptible} "
            f"{len(j.tasks)}x{j.tasks[0].shape.num_gpu}gpu@{j.tasks[0].shape.gpu_milli} "
            f"models={sorted(j.tasks[0].shape.gpu_models)} min={j.min_available} "
            f"submit={j.submit_time} dur={j.duration} est={j.runtime_estimate}"
            for j in self.jobs
        )
        return f"Case(nodes=[{nodes}]\n queues=[{queues}]\n jobs:\n  {jobs})"


def gpus(n: int) -> Resources:
    return Resources({GPU: n * 1000})


@st.composite
def cases(draw: st.DrawFn, max_jobs: int = 10) -> Case:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        node = make_node(f"n{i}").cpu(32).mem_gib(256)
        node.gpus(draw(st.sampled_from([2, 4, 8])), model=draw(st.sampled_from(MODELS)))
        nodes.append(node.build())
    capacity = sum(n.gpu_count for n in nodes)
    leaves = [QueueName(f"q{i}") for i in range(draw(st.integers(2, 3)))]
    nested = draw(st.booleans())
    left = capacity
    specs: list[QueueSpec] = []
    for name in leaves:
        g = draw(st.integers(0, left))
        left -= g
        limit = draw(st.none() | st.none() | st.integers(max(g, 1), capacity + 2))
        lend = draw(st.none() | st.none() | st.integers(0, g))
        specs.append(
            QueueSpec(
                name,
                parent=QueueName("org") if nested else None,
                guaranteed=gpus(g),
                limit=None if limit is None else gpus(limit),
                lending_limit=None if lend is None else gpus(lend),
                weight=float(draw(st.sampled_from([1, 2, 3]))),
            )
        )
    if nested:
        total = sum(s.guaranteed[GPU] for s in specs) // 1000
        org_g = draw(st.integers(total, capacity))
        org_limit = draw(st.none() | st.none() | st.integers(max(org_g, 1), capacity + 2))
        specs.insert(
            0,
            QueueSpec(
                QueueName("org"),
                guaranteed=gpus(org_g),
                limit=None if org_limit is None else gpus(org_limit),
            ),
        )
    jobs = []
    for i in range(draw(st.integers(1, max_jobs))):
        builder = make_job(f"j{i}").cpu(1).mem_gib(4).queue(draw(st.sampled_from(leaves)))
        if draw(st.integers(0, 5)) == 0:
            builder.share(500)
        else:
            builder.gpus(draw(st.sampled_from([1, 2, 4])))
        if draw(st.booleans()):
            builder.models(draw(st.sampled_from(MODELS)))
        replicas = draw(st.integers(1, 3))
        builder.replicas(replicas).min_available(draw(st.integers(1, replicas)))
        builder.priority(draw(st.sampled_from([0, 10, 100])))
        builder.at(float(draw(st.integers(0, 30)) * 100))
        duration = float(draw(st.integers(5, 60)) * 100)
        builder.runs_for(duration)
        job = builder.build()
        estimate = draw(st.sampled_from([None, duration, duration / 2, duration * 2]))
        jobs.append(
            replace(job, runtime_estimate=estimate, preemptible=draw(st.integers(0, 4)) > 0)
        )
    return Case(tuple(nodes), QueueTree.build(specs), tuple(jobs))


# -- running a case, with probes in the cycle ----------------------------------------------


@dataclass
class CycleRecord:
    """What one cycle saw: queue usage at its start, before ``reclaim`` and at its end, the
    jobs running when it began, and its plan."""

    now: float = 0.0
    running: Mapping[JobId, RunningJob] = field(default_factory=dict)
    evictions_before: Mapping[JobId, int] = field(default_factory=dict)
    held: Mapping[JobId, frozenset[TaskId]] = field(default_factory=dict)
    before_reclaim: dict[QueueName, Resources] = field(default_factory=dict)
    end: dict[QueueName, Resources] = field(default_factory=dict)
    plan: Plan = field(default_factory=Plan)


class Probe:
    """A no-op action that lets a test read the cycle's session at one point of the cycle."""

    def __init__(self, name: str, see: Callable[[Session], None]) -> None:
        self.name = name
        self._see = see

    def execute(self, session: Session) -> None:
        self._see(session)


def probed(profile: Profile, cycles: list[CycleRecord]) -> Profile:
    """``profile`` with probes at the start, before ``reclaim`` and at the end of each cycle."""

    def start(session: Session) -> None:
        snap = session.snapshot
        held: dict[JobId, set[TaskId]] = {}
        for task, alloc in snap.state.allocations.items():
            held.setdefault(alloc.job, set()).add(task)
        cycles.append(
            CycleRecord(
                snap.now,
                dict(snap.running),
                dict(snap.evictions),
                {job: frozenset(tasks) for job, tasks in held.items()},
            )
        )
        cycles[-1].plan = session.plan

    def usage(session: Session) -> dict[QueueName, Resources]:
        assert session.quota is not None
        return dict(session.quota.usage)

    def before_reclaim(session: Session) -> None:
        cycles[-1].before_reclaim = usage(session)

    def end(session: Session) -> None:
        cycles[-1].end = usage(session)

    actions: list[Action] = [Probe("probe-start", start)]
    for action in profile.actions:
        if action.name == "reclaim":
            actions.append(Probe("probe-before-reclaim", before_reclaim))
        actions.append(action)
    actions.append(Probe("probe-end", end))
    return replace(profile, actions=tuple(actions))


def check_gangs(sim: Simulation) -> None:
    bound = Counter(a.job for a in sim.state.allocations.values())
    for job in sim.jobs:
        if job.min_available > 1:
            n = bound[job.id]
            assert n == 0 or n >= job.min_available, (
                f"t={sim.now}: gang {job.id} has {n} of {job.min_available} tasks bound"
            )


class _NoMemo(Simulation):
    """The simulator without its cycle-to-cycle memo."""

    def snapshot(self) -> Snapshot:
        return replace(super().snapshot(), memo=None)


def simulate(
    case: Case, seed: int = 0, observe: bool = True, memo: bool = True
) -> tuple[Simulation, list[CycleRecord]]:
    cycles: list[CycleRecord] = []
    shapes = [t.shape for j in case.jobs for t in j.tasks]
    profile = build_profile(policy_spec("gpusched"), PluginContext(workload_hint=shapes))

    def observer(sim: Simulation) -> None:
        check_no_overcommit(sim.state)
        check_gangs(sim)

    sim = (Simulation if memo else _NoMemo)(
        case.nodes,
        case.jobs,
        probed(profile, cycles),
        seed=seed,
        options=SimOptions(record_events=True),
        observers=[observer] if observe else [],
        queues=case.queues,
    )
    return sim.run(), cycles


# -- properties --------------------------------------------------------------------------------


@given(case=cases())
def test_gangs_are_whole_and_nothing_is_overcommitted(case: Case) -> None:
    sim, cycles = simulate(case)  # the observer checks after every event
    assert cycles, "at least one cycle ran"
    for job in case.jobs:
        rec = sim.records[job.id]
        assert rec.start is not None or rec.status is not None, f"{job.id} never considered"


@given(case=cases())
def test_evictions_follow_the_rules(case: Case) -> None:
    sim, cycles = simulate(case)
    jobs = {j.id: j for j in case.jobs}
    for cycle in cycles:
        bound = cycle.plan.bound_jobs()
        for ev in cycle.plan.evictions:
            run = cycle.running.get(ev.job)
            assert run is not None, f"t={cycle.now}: {ev.job} evicted but not running"
            assert ev.job not in bound, f"t={cycle.now}: {ev.job} evicted and bound"
            victim, for_job = run.job, jobs[ev.for_job]
            assert victim.preemptible, f"t={cycle.now}: {ev.job} is not preemptible"
            assert cycle.now - run.start >= MIN_RUNTIME_S, f"t={cycle.now}: {ev.job} too young"
            # Borrowed capacity is always returnable: reclaim's last resort passes the budget.
            assert cycle.evictions_before.get(ev.job, 0) < MAX_EVICTIONS or ev.reason.startswith(
                "reclaimed"
            ), f"t={cycle.now}: {ev.job} evicted beyond its budget"
            if ev.job in cycle.plan.moved_jobs():  # defrag: restarted at once elsewhere
                assert victim.restartable, f"t={cycle.now}: {ev.job} is not restartable"
                assert victim.priority <= for_job.priority, f"t={cycle.now}: {ev}"
                assert ev.for_job in bound, f"t={cycle.now}: moved {ev.job}, {ev.for_job} unbound"
            elif ev.reason.startswith("preempted"):
                assert victim.priority < for_job.priority, f"t={cycle.now}: {ev}"
            elif ev.reason.startswith("overdue"):  # backfill: past the deadline it started on
                assert victim.priority <= for_job.priority, f"t={cycle.now}: {ev}"
                assert run.deadline is not None, ev
                assert run.deadline <= cycle.now, ev
                assert run.evictions == 0, f"t={cycle.now}: {ev.job} ended for overrunning twice"
            else:
                assert ev.reason.startswith("reclaimed"), ev.reason
                assert victim.queue != for_job.queue, f"t={cycle.now}: {ev}"
    for job in case.jobs:
        rec = sim.records[job.id]
        if rec.start is None:  # evicted (or never started): holds nothing
            assert not any(t.id in sim.state.allocations for t in job.tasks), job.id


@given(case=cases())
def test_no_preemption_loops(case: Case) -> None:
    sim, cycles = simulate(case, observe=False)
    assert sim.preemption_loops == 0
    evicted_by: set[tuple[JobId, JobId]] = set()
    for cycle in cycles:
        for ev in cycle.plan.evictions:
            assert (ev.for_job, ev.job) not in evicted_by, (
                f"t={cycle.now}: {ev.for_job} evicts {ev.job}, which evicted it before"
            )
        evicted_by.update((ev.job, ev.for_job) for ev in cycle.plan.evictions)


@given(case=cases(max_jobs=6), seed=st.integers(0, 2**31))
def test_same_seed_gives_the_same_event_log(case: Case, seed: int) -> None:
    first, _ = simulate(case, seed, observe=False)
    second, _ = simulate(case, seed, observe=False)
    assert first.event_log() == second.event_log()
    assert first.event_log().count(" arrive ") == len(case.jobs)


@given(case=cases(), seed=st.integers(0, 2**31))
def test_the_memo_changes_nothing(case: Case, seed: int) -> None:
    with_memo, _ = simulate(case, seed, observe=False)
    without, _ = simulate(case, seed, observe=False, memo=False)
    assert with_memo.event_log() == without.event_log()


# -- reclaim and guarantees ------------------------------------------------------------------


def _case(nodes: list[Node], queues: list[QueueSpec], jobs: list[Job]) -> Case:
    return Case(tuple(nodes), QueueTree.build(queues), tuple(jobs))


def _job(
    name: str, queue: str, gpus_: int, *, submit: float, duration: float, model: str = ""
) -> Job:
    builder = make_job(name).cpu(1).mem_gib(4).gpus(gpus_).queue(queue).at(submit)
    if model:
        builder.models(model)
    return replace(builder.runs_for(duration).build(), runtime_estimate=duration)


#: Reclaim evicts for `own` but does not bind it in the same cycle (Session._failed memo):
#: one 8-GPU node; `borrow` (queue b, no guarantee) runs from 0; `own` (queue a, guaranteed 8)
#: arrives at 1000 and reclaims.
RECLAIM_DOES_NOT_BIND = _case(
    [make_node("n0").cpu(32).mem_gib(256).gpus(8).build()],
    [QueueSpec(QueueName("a"), guaranteed=gpus(8)), QueueSpec(QueueName("b"))],
    [
        _job("borrow", "b", 8, submit=0, duration=5000),
        _job("own", "a", 8, submit=1000, duration=500),
    ],
)

#: Reclaim takes more than the victim's queue borrowed: queues a and b guaranteed 8 GPUs each on
#: two 8-GPU nodes (G2, T4); b runs b2 (G2) and b3 (T4) from 0 and b1 (G2) from 600: 12 GPUs,
#: 4 borrowed. At 1000 a-job (8 GPUs, any model) reclaims: b1 (cheapest, least progress) and b2
#: are evicted to free the G2 node, leaving b with 4 < 8 guaranteed; b3 alone would have freed
#: the T4 node.
RECLAIM_TAKES_TOO_MUCH = _case(
    [
        make_node("a").cpu(32).mem_gib(256).gpus(8, model="G2").build(),
        make_node("b").cpu(32).mem_gib(256).gpus(8, model="T4").build(),
    ],
    [QueueSpec(QueueName("a"), guaranteed=gpus(8)), QueueSpec(QueueName("b"), guaranteed=gpus(8))],
    [
        _job("b2", "b", 4, submit=0, duration=9000, model="G2"),
        _job("b3", "b", 4, submit=0, duration=9000, model="T4"),
        _job("b1", "b", 4, submit=600, duration=9000, model="G2"),
        _job("a-job", "a", 8, submit=1000, duration=500),
    ],
)

#: A victim taken in two evictions, counted once: queues a and b under org (6 GPUs: 4 G2, 2 T4),
#: guaranteed 2 GPUs each; b runs `pair` (two 1-GPU tasks on the T4 node, one of them elastic)
#: and `half` (half a G2 GPU) from 0: 2.5 GPUs, 0.5 borrowed. At 300 the 2-task gang a-job (T4)
#: reclaims `pair`: its elastic member, then the rest of it, `pair` being b's last victim. A
#: check that charged each eviction the whole gang saw b at 1.5 < 2 GPUs at the second one.
RECLAIM_TAKES_A_GANG_ONCE = _case(
    [
        make_node("g").cpu(32).mem_gib(256).gpus(4, model="G2").build(),
        make_node("t").cpu(32).mem_gib(256).gpus(2, model="T4").build(),
    ],
    [
        QueueSpec(QueueName("org"), guaranteed=gpus(6)),
        QueueSpec(QueueName("a"), parent=QueueName("org"), guaranteed=gpus(2)),
        QueueSpec(QueueName("b"), parent=QueueName("org"), guaranteed=gpus(2)),
    ],
    [
        replace(
            make_job("pair")
            .cpu(1)
            .mem_gib(4)
            .gpus(1)
            .models("T4")
            .replicas(2)
            .min_available(1)
            .queue("b")
            .runs_for(5000)
            .build(),
            runtime_estimate=5000.0,
        ),
        replace(
            make_job("half").cpu(1).mem_gib(4).share(500).queue("b").runs_for(5000).build(),
            runtime_estimate=5000.0,
        ),
        replace(
            make_job("a-job")
            .cpu(1)
            .mem_gib(4)
            .gpus(1)
            .models("T4")
            .replicas(2)
            .queue("a")
            .at(300)
            .runs_for(500)
            .build(),
            runtime_estimate=500.0,
        ),
    ],
)


def reclaims(case: Case) -> list[tuple[CycleRecord, Job, Job, tuple[Task, ...]]]:
    """Every job ``reclaim`` evicted from: (cycle, victim, the job it was evicted for, the tasks
    taken), once per victim and cycle. A plan may evict a job's elastic members and then the
    rest of it (two evictions of one victim); the tasks taken are all it held then."""
    _, cycles = simulate(case, observe=False)
    jobs = {j.id: j for j in case.jobs}
    out: list[tuple[CycleRecord, Job, Job, tuple[Task, ...]]] = []
    for cycle in cycles:
        taken: dict[JobId, tuple[Job, set[TaskId]]] = {}
        for ev in cycle.plan.evictions:
            if ev.reason.startswith("reclaimed"):
                if ev.job not in taken:
                    taken[ev.job] = (jobs[ev.for_job], set())
                taken[ev.job][1].update(ev.tasks or cycle.held[ev.job])
        for job_id, (owner, tasks) in taken.items():
            victim = jobs[job_id]
            out.append((cycle, victim, owner, tuple(t for t in victim.tasks if t.id in tasks)))
    return out


def check_reclaim_takes_only_borrowed(case: Case) -> None:
    """(a) of the module docstring."""
    tree = case.queues
    usage: dict[QueueName, Resources] = {}
    last: CycleRecord | None = None
    for cycle, victim, owner, tasks in reclaims(case):
        if cycle is not last:
            usage, last = dict(cycle.before_reclaim), cycle
        v = victim.queue
        guaranteed = tree[v].guaranteed[GPU]
        assert usage[v][GPU] > guaranteed, (
            f"t={cycle.now}: reclaim for {owner.id} took {victim.id} from queue {v!r}, which "
            f"no longer borrowed (usage {usage[v][GPU]}, guaranteed {guaranteed} milli-GPU)"
        )
        for q in tree.path(v):
            usage[q] = usage[q] - job_request(victim, tasks=tasks)


def check_reclaim_binds_the_owner(case: Case) -> None:
    """(b) and (c) of the module docstring."""
    tree = case.queues
    for cycle, victim, owner, _ in reclaims(case):
        assert owner.id in cycle.plan.bound_jobs(), (
            f"t={cycle.now}: reclaim evicted {victim.id} for {owner.id}, which did not bind in "
            "the same cycle"
        )
        for q in tree.path(owner.queue):
            assert cycle.end[q][GPU] <= tree[q].guaranteed[GPU], (
                f"t={cycle.now}: after reclaiming for {owner.id}, queue {q!r} uses "
                f"{cycle.end[q][GPU]} > guaranteed {tree[q].guaranteed[GPU]} milli-GPU"
            )


@given(case=cases())
@example(case=RECLAIM_TAKES_TOO_MUCH)
@example(case=RECLAIM_TAKES_A_GANG_ONCE)
def test_reclaim_takes_only_what_was_borrowed(case: Case) -> None:
    check_reclaim_takes_only_borrowed(case)


@given(case=cases())
@example(case=RECLAIM_DOES_NOT_BIND)
def test_reclaim_binds_the_owner_in_the_same_cycle(case: Case) -> None:
    check_reclaim_binds_the_owner(case)


@given(case=cases())
@example(case=RECLAIM_TAKES_TOO_MUCH)
@example(case=RECLAIM_DOES_NOT_BIND)
def test_disruption_counts_are_the_plans_evictions_and_moves(case: Case) -> None:
    """A job's evictions and moves in the plans are what the simulator counts for it (its
    disruption budget's count, and ``max_disruptions_of_one_job``); evicting elastic members
    alone is no disruption of the job."""
    sim, cycles = simulate(case, observe=False)
    counted: Counter[JobId] = Counter()
    for cycle in cycles:
        for ev in cycle.plan.evictions:
            if not ev.tasks:
                counted[ev.job] += 1
    recorded = {j: r.evictions + r.moves for j, r in sim.records.items() if r.evictions + r.moves}
    assert recorded == dict(counted)
