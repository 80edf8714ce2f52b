"""Invariants of defragmentation moves (``gpusched-defrag`` profile, :mod:`gpusched.actions.defrag`)
on random fragmented clusters: small running jobs (some gangs, some shared GPUs) scattered over
8-GPU nodes, with random priorities, ages, disruption counts, preemptibility and
restartability, and one pending gang of large pods.

For every plan of one cycle:

* **nothing is over-committed:** applying its evictions, then its binds and moves, to the
  snapshot's state never asks more of a node than it has (``ClusterState.allocate`` checks
  CPU, memory and every GPU's share);
* **gangs move whole:** a moved job has a move for every task it held, and its eviction is in
  the plan; after the plan every task it held is bound again;
* **only movable jobs move:** preemptible, restartable, started at least 300 s before, moved
  or evicted fewer than 3 times, priority at most that of the job it moves for, at most 8 jobs
  per pending job;
* **the job moved for fits:** it binds all its ``min_available`` tasks in the same plan and is
  nominated for exactly the nodes it binds on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from hypothesis import event, example, given
from hypothesis import strategies as st

from builders import make_job, make_node
from gpusched.framework import ClusterState, Plan, RunningJob, Snapshot
from gpusched.model import Job, JobId, NodeName, Task, TaskId
from gpusched.scheduler import build_profile, policy_spec, schedule

NOW = 1000.0
MIN_RUNTIME_S = 300.0  # the defrag defaults of the gpusched-defrag profile
MAX_EVICTIONS = 3
MAX_MOVES = 8


@dataclass(frozen=True)
class Running:
    job: Job
    placement: tuple[tuple[int, tuple[int, ...]], ...]  # per task: node, GPUs
    start: float
    evictions: int


@dataclass(frozen=True)
class Case:
    nodes: int
    running: tuple[Running, ...]
    pending: Job

    def __repr__(self) -> str:
        lines = [
            f"{self.nodes} nodes x 8 GPUs; pending {self.pending.id}: "
            f"{self.pending.min_available} x {self.pending.tasks[0].shape.num_gpu} GPUs, "
            f"priority {self.pending.priority}"
        ]
        for r in self.running:
            j = r.job
            lines.append(
                f"  {j.id}: prio {j.priority} preemptible={j.preemptible} "
                f"restartable={j.restartable} start={r.start} evictions={r.evictions} "
                f"milli={j.tasks[0].shape.gpu_milli} at {list(r.placement)}"
            )
        return "\n".join(lines)

    def snapshot(self) -> Snapshot:
        nodes = [make_node(f"n{i}").gpus(8).cpu(64).mem_gib(512).build() for i in range(self.nodes)]
        state = ClusterState.from_nodes(nodes)
        running: dict[JobId, RunningJob] = {}
        for r in self.running:
            for task, (node, gpus) in zip(r.job.tasks, r.placement, strict=True):
                state.allocate(task, node, gpus)
            running[r.job.id] = RunningJob(r.job, r.start, r.evictions)
        return Snapshot(
            state,
            (self.pending,),
            NOW,
            running=running,
            evictions={r.job.id: r.evictions for r in self.running},
        )


@st.composite
def cases(draw: st.DrawFn) -> Case:
    count = draw(st.integers(2, 5))
    free = [[1000] * 8 for _ in range(count)]
    cpu = [64_000] * count
    running = []
    for i in range(draw(st.integers(1, 4 * count))):
        replicas = draw(st.sampled_from([1, 1, 1, 2]))
        gpus = draw(st.integers(1, 4)) if replicas == 1 else 1
        milli = draw(st.sampled_from([1000, 1000, 500])) if gpus == 1 else 1000
        placement = []
        for _ in range(replicas):
            homes = [
                n
                for n in range(count)
                if sum(g >= milli for g in free[n]) >= gpus and cpu[n] >= 4000
            ]
            if not homes:
                break
            node = draw(st.sampled_from(homes))
            room = [g for g in range(8) if free[node][g] >= milli]
            chosen = tuple(sorted(draw(st.permutations(room))[:gpus]))
            for g in chosen:
                free[node][g] -= milli
            cpu[node] -= 4000
            placement.append((node, chosen))
        if len(placement) < replicas:
            for node, chosen in placement:  # undo a gang that did not fit whole
                for g in chosen:
                    free[node][g] += milli
                cpu[node] += 4000
            continue
        job = (
            make_job(f"r{i}")
            .replicas(replicas)
            .gpus(gpus, milli=milli)
            .cpu(4)
            .mem_gib(16)
            .priority(draw(st.sampled_from([0, 0, 10])))
            .build()
        )
        job = _with(
            job,
            preemptible=draw(st.sampled_from([True, True, True, False])),
            restartable=draw(st.sampled_from([True, True, True, False])),
            runtime_estimate=draw(st.sampled_from([600.0, 36_000.0])),
        )
        start = draw(st.sampled_from([0.0, 0.0, 800.0]))
        running.append(Running(job, tuple(placement), start, draw(st.sampled_from([0, 0, 3]))))
    pods = draw(st.integers(1, 3))
    pending = (
        make_job("big")
        .replicas(pods)
        .gpus(draw(st.sampled_from([4, 6, 8])))
        .cpu(8)
        .mem_gib(64)
        .priority(draw(st.sampled_from([0, 10])))
        .build()
    )
    pending = _with(pending, runtime_estimate=36_000.0)
    return Case(count, tuple(running), pending)


def _with(job: Job, **changes: object) -> Job:
    return replace(job, **changes)  # type: ignore[arg-type]


#: Three 8-GPU nodes, each with 2 GPUs held by an old, movable job: a 2 x 8-GPU gang fits only
#: once two of them move (to the third node, which then has room for both).
FRAGMENTED = Case(
    3,
    tuple(
        Running(
            _with(make_job(f"r{i}").gpus(2).cpu(4).mem_gib(16).build(), runtime_estimate=36_000.0),
            ((i, (0, 1)),),
            0.0,
            0,
        )
        for i in range(3)
    ),
    _with(make_job("big").replicas(2).gpus(8).cpu(8).mem_gib(64).build(), runtime_estimate=36e3),
)


def check(case: Case) -> Plan:
    snapshot = case.snapshot()
    profile = build_profile(policy_spec("gpusched-defrag"))
    plan = schedule(snapshot, profile)
    state = snapshot.state.copy()
    tasks: dict[str, Task] = {
        t.id: t for j in [case.pending, *[r.job for r in case.running]] for t in j.tasks
    }
    evicted = {e.job for e in plan.evictions if not e.tasks}
    held: dict[JobId, set[TaskId]] = {}
    for r in case.running:
        held[r.job.id] = {t.id for t in r.job.tasks}
    for ev in plan.evictions:
        state.release_many(held[ev.job] if not ev.tasks else ev.tasks)
    for b in plan.binds:  # raises InvariantError on any over-commit
        state.allocate(tasks[b.task], state.index[b.node], b.gpus, b.gpu_milli)
    for m in plan.moves:
        assert state.allocations.get(m.task) is None, f"{m.task} moved while still bound"
        state.allocate(tasks[m.task], state.index[m.to_node], m.to_gpus, m.gpu_milli)
    assert (state.gpu_free >= 0).all()
    assert (state.cpu_free >= 0).all()

    runs = {r.job.id: r for r in case.running}
    per_for: Counter[JobId] = Counter()
    for job_id in plan.moved_jobs():
        run = runs[job_id]
        moves = [m for m in plan.moves if m.job == job_id]
        assert job_id in evicted, f"{job_id} moved without an eviction"
        assert {m.task for m in moves} == held[job_id], f"{job_id} moved in part"
        assert all(t in state.allocations for t in held[job_id]), f"{job_id} left split"
        for_job = {m.for_job for m in moves}
        assert for_job == {case.pending.id}
        job = run.job
        assert job.preemptible, f"{job_id} is not preemptible"
        assert job.restartable, f"{job_id} is not restartable"
        assert NOW - run.start >= MIN_RUNTIME_S, f"{job_id} is too young to move"
        assert run.evictions < MAX_EVICTIONS, f"{job_id} is beyond its disruption budget"
        assert job.priority <= case.pending.priority, f"{job_id} outranks {case.pending.id}"
        for old, m in zip(run.placement, sorted(moves, key=lambda m: m.task), strict=True):
            assert (case.snapshot().state.names[old[0]], old[1]) == (m.from_node, m.from_gpus)
        per_for[case.pending.id] += 1
    assert all(n <= MAX_MOVES for n in per_for.values())
    if plan.moves:
        pid = case.pending.id
        mine = [b for b in plan.binds if b.job == pid]
        assert len(mine) == case.pending.min_available, "moved for a job that did not bind"
        assert sorted(plan.nominations[pid]) == sorted({NodeName(b.node) for b in mine})
    return plan


@given(cases())
@example(FRAGMENTED)
def test_defrag_moves_keep_the_invariants(case: Case) -> None:
    plan = check(case)
    event(f"jobs moved: {min(len(plan.moved_jobs()), 3)}")


def test_the_fragmented_example_does_move() -> None:
    """The explicit example is not vacuous: two of the three small jobs move, the gang binds."""
    plan = check(FRAGMENTED)
    assert len(plan.moved_jobs()) == 2
    assert {b.job for b in plan.binds} == {JobId("big")}
