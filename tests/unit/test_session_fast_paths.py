"""Session fast paths give the answers of the plain formulas: the in-place weighted score sum,
and the quota answer "could never be admitted" kept for the cycle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

import numpy as np
import pytest

from builders import cycle_context, make_job, make_node, make_state, make_task, policy_profile
from gpusched.framework import (
    BoolArray,
    ClusterState,
    Code,
    CycleContext,
    FloatArray,
    QuotaHold,
    RunningJob,
    ScorePlugin,
    Session,
    Snapshot,
    TieBreak,
)
from gpusched.framework.quota import QuotaBook, job_request
from gpusched.model import (
    Constraints,
    Job,
    JobId,
    QueueName,
    QueueSpec,
    QueueTree,
    Resources,
    Task,
    TaskId,
    TaskShape,
)
from gpusched.plugins.queue_sort import FairShare


class _Fixed:
    """A score plugin returning a fixed vector (any float dtype)."""

    name = "fixed"

    def __init__(self, values: FloatArray) -> None:
        self.values = values

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        return self.values


def _scoring_session(plugins: Sequence[tuple[ScorePlugin, float]]) -> Session:
    """A session on 64 idle 8-GPU nodes whose profile's scores are ``plugins``."""
    state = make_state(*(make_node(f"n{i}").gpus(8) for i in range(64)))
    profile = replace(policy_profile("fgd"), scores=tuple(plugins))
    return Session(Snapshot(state, ()), profile, cycle_context())


@pytest.mark.parametrize("seed", range(5))
def test_node_scores_equal_the_fresh_array_sum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    plugins = [
        (_Fixed(rng.normal(size=64) * 100), 1.0),
        (_Fixed(rng.integers(0, 100, 64).astype(np.float32)), 8.0),
        (_Fixed(np.zeros(64)), 0.2),
        (_Fixed(rng.random(64) * 1e-3), 2.0),
    ]
    session = _scoring_session(plugins)
    task = make_task().gpus(1).build()
    feasible = rng.random(64) < 0.7
    total = np.zeros(64)
    for plugin, weight in plugins:
        total = total + weight * plugin.values
    expected = np.where(feasible, total, -np.inf)
    got = session.node_scores(task, feasible)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected)  # equal values: equal bits but for the sign of zeros


@pytest.mark.parametrize("tie_break", list(TieBreak))
@pytest.mark.parametrize("seed", range(5))
def test_select_node_picks_what_node_scores_picks(seed: int, tie_break: TieBreak) -> None:
    """Scoring only the feasible nodes picks the node the whole masked array picks (ties
    included: coarse integer scores, so many nodes tie; the same random draw breaks them)."""
    rng = np.random.default_rng(seed)
    state = make_state(*(make_node(f"n{i}").gpus(8) for i in range(64)))
    plugins = [
        (_Fixed(rng.integers(0, 4, 64).astype(np.float64)), 1.0),
        (_Fixed(rng.integers(0, 3, 64).astype(np.float32)), 0.2),
    ]
    profile = replace(policy_profile("fgd"), scores=tuple(plugins), tie_break=tie_break)
    task = make_task().gpus(1).build()
    feasible = rng.random(64) < 0.5
    fast = Session(Snapshot(state, ()), profile, cycle_context(seed))
    plain = Session(Snapshot(state, ()), profile, cycle_context(seed))
    for _ in range(5):
        assert fast.select_node(task, feasible) == plain._argmax(plain.node_scores(task, feasible))


def _capped_tree() -> QueueTree:
    return QueueTree.build(
        [
            QueueSpec(QueueName("a"), guaranteed=Resources({"gpu": 2000})),
            QueueSpec(
                QueueName("b"),
                guaranteed=Resources({"gpu": 1000}),
                limit=Resources({"gpu": 3000}),
            ),
        ]
    )


def test_quota_refusals_follow_usage_and_never_fits_stays() -> None:
    state = make_state(make_node("g").gpus(8).cpu(64).mem_gib(512))
    too_big = make_job("big").gpus(4).queue("b").build()  # 4000 > b's 3000 limit
    small = make_job("small").gpus(2).queue("b").build()
    snap = Snapshot(state, (too_big, small), queues=_capped_tree())
    session = Session(snap, policy_profile("gpusched"), cycle_context())
    quota = session.quota
    assert quota is not None
    never = quota.never_fits(QueueName("b"), session.request(too_big))
    assert never is not None
    assert session.quota_refusal(small) is None
    for _ in range(2):  # the usage moves; the never-fits answer is the same each time
        refused = session.quota_refusal(too_big)
        assert refused is not None
        assert refused.code is Code.UNRESOLVABLE
        assert refused.reasons == (never,)
        quota.charge(QueueName("b"), Resources({"gpu": 1000}))
    # b now uses 2000 of its 3000 limit: the small job is refused (limit), and admitted again
    # once the usage is refunded.
    limited = session.quota_refusal(small)
    assert limited is not None
    assert limited.code is Code.UNSCHEDULABLE
    assert limited.reasons == (quota.over_limit(QueueName("b"), session.request(small)),)
    quota.refund(QueueName("b"), Resources({"gpu": 2000}))
    assert session.quota_refusal(small) is None


def test_a_quota_hold_binds_every_borrower_after_its_holder_and_none_ahead() -> None:
    """The queues' answer is kept per quota key, but the hold is the job's own: two identical
    borrowers after the holder are both held back (the kept answer for their key says
    "admitted"); one ahead of the holder in the order is not bound by it."""
    state = make_state(make_node("g").gpus(8).cpu(64).mem_gib(512))
    jobs = [make_job(name).gpus(2).queue("b").build() for name in "xyz"]
    snap = replace(Snapshot(state, tuple(jobs), queues=_capped_tree()), now=1000.0)
    session = Session(snap, policy_profile("gpusched"), cycle_context())
    ahead, first, second = jobs
    assert all(session.quota_refusal(j) is None for j in jobs)  # b would borrow 1 of a's 2
    session.quota_hold = QuotaHold(JobId("holder"), until=2000.0, short=1000)
    session.quota_hold_ahead = frozenset({ahead.id})
    assert session.quota_refusal(ahead) is None
    for job in (first, second):
        refused = session.quota_refusal(job)
        assert refused is not None, job.id
        assert refused.code is Code.UNSCHEDULABLE
        assert "quota held for holder" in refused.reasons[0]


def _plain_feasible(session: Session, task: Task, skip: str | None) -> np.ndarray:
    """Every filter and-ed in, the restriction, minus the nodes held for another job."""
    mask = np.ones(session.state.size, dtype=bool)
    for f in session.profile.filters:
        if f.name != skip:
            mask &= f.filter(session.ctx, task, session.state)
    if session.restrict is not None:
        mask &= session.restrict
    for node, (start, owner) in session.blocked_nodes.items():
        if session._end_estimate > start and owner != session._current_job:
            mask[node] = False
    return mask


@pytest.mark.parametrize("skip", [None, "node-resources-fit", "gpu-model"])
@pytest.mark.parametrize("held", [False, True])
@pytest.mark.parametrize("confined", [False, True])
@pytest.mark.parametrize("policy", ["gpusched", "gpusched-topo"])
def test_feasible_skips_filters_that_exclude_nothing_and_still_holds_nodes(
    skip: str | None, held: bool, confined: bool, policy: str
) -> None:
    """Filters that exclude no node answer with the shared ``everywhere`` mask, which
    ``feasible`` skips; the answer is the plain conjunction all the same, and always the
    caller's own array (gpusched-topo: ``numa-local-cpu`` passes these tasks everywhere)."""
    nodes = [make_node(f"g{i}").gpus(4, model="G2" if i % 2 else "T4") for i in range(8)]
    nodes[5] = make_node("g5").gpus(4, model="G2").label("pool", "a")
    state = make_state(*nodes)
    session = Session(Snapshot(state, ()), policy_profile(policy), cycle_context())
    if held:
        session.blocked_nodes = {2: (50.0, JobId("holder")), 3: (10**9, JobId("other"))}
        session._end_estimate = 100.0
    if confined:
        session.restrict = np.arange(8) >= 2
    selector = Constraints(node_selector=(("pool", "a"),))
    tasks = [
        make_task("any").gpus(1).build(),
        make_task("t4").gpus(1).models("T4").build(),
        make_task("big").gpus(4).mem_gib(10**6).build(),  # fits no node's memory
        Task(
            TaskId("sel"), JobId("sel"), replace(make_task().gpus(1).shape(), constraints=selector)
        ),
    ]
    for task in tasks:
        got = session.feasible(task, skip=skip)
        assert np.array_equal(got, _plain_feasible(session, task, skip)), task.id
        assert got.flags.writeable
        assert got is not state.everywhere
        for f in session.profile.filters:
            if f.name == "numa-local-cpu":  # (no task here asks for NUMA-local CPUs)
                assert f.filter(session.ctx, task, state) is state.everywhere


def test_requests_kept_per_gang_of_shapes_equal_each_jobs_own() -> None:
    """Jobs of the same task shapes share one request and quota key; each equals what
    ``job_request`` gives the job itself (gangs of one shape, of mixed shapes, elastic)."""
    state = make_state(make_node("g").gpus(8).cpu(64).mem_gib(512))
    one = make_task().gpus(2).cpu(4).shape()
    other = make_task().share(500).cpu(1).shape()

    def job(name: str, *shapes: TaskShape, min_available: int = 0) -> Job:
        tasks = tuple(Task(TaskId(f"{name}-{i}"), JobId(name), s) for i, s in enumerate(shapes))
        return Job(JobId(name), tasks, min_available=min_available, queue=QueueName("a"))

    jobs = [
        job("a1", one),
        job("a2", one),
        job("b", one, one, one),
        job("c", one, other),
        job("d", other, one),
        job("e", one, other, other, min_available=2),
        job("f", one, other, min_available=1),
    ]
    session = Session(
        Snapshot(state, tuple(jobs), queues=_capped_tree()),
        policy_profile("gpusched"),
        cycle_context(),
    )
    quota = session.quota
    assert quota is not None
    for j in jobs:
        assert session.request(j) == job_request(j), j.id
        session.quota_refusal(j)  # sets the job's quota key
        _, _, key = session._requests[j.id]
        assert key == (j.queue, quota.key(job_request(j)), j.preemptible), j.id
    assert session.request(jobs[0]) is session.request(jobs[1])
    assert session.request(jobs[2]) != session.request(jobs[0])


def test_running_totals_give_the_usage_per_job_charges_give() -> None:
    """Without a memo the session sums the running jobs' charges per queue before the book
    does: the usage is the one per-job charges give, names in the same order (GPU models
    first met on later jobs included), through a parent queue too."""
    nodes = [make_node(f"n{i}").gpus(8, model="T4" if i % 2 else "G2") for i in range(6)]
    state = make_state(*nodes)
    tree = QueueTree.build(
        [
            QueueSpec(QueueName("org"), guaranteed=Resources({"gpu": 16000})),
            QueueSpec(QueueName("a"), parent=QueueName("org"), guaranteed=Resources({"gpu": 8000})),
            QueueSpec(QueueName("b"), parent=QueueName("org"), guaranteed=Resources({"gpu": 4000})),
        ]
    )
    running: dict[JobId, RunningJob] = {}
    rng = np.random.default_rng(3)
    for i in range(30):
        queue = ("a", "b", "elsewhere")[i % 3]
        gpus = 0 if i >= 20 and i % 2 else 1 + i % 2  # the first jobs land on a model
        job = make_job(f"r{i}").gpus(gpus).replicas(2).queue(queue).build()
        for t, node in zip(job.tasks, rng.integers(0, 6, 2), strict=True):
            free = (state.gpu_free[int(node)] >= 1000).nonzero()[0][: t.shape.num_gpu]
            if len(free) == t.shape.num_gpu and i % 5 != 4:  # some jobs' tasks unbound
                state.allocate(t, int(node), tuple(int(g) for g in free))
        running[job.id] = RunningJob(job, 0.0)
    snap = Snapshot(state, (), running=running, queues=tree)
    session = Session(snap, policy_profile("gpusched"), cycle_context())
    per_job = QuotaBook(
        tree, state, [(r.job.queue, session.charge_of(r.job)) for r in running.values()]
    )
    quota = session.quota
    assert quota is not None
    for q in tree:
        assert list(quota.usage[q.name].items()) == list(per_job.usage[q.name].items()), q.name


class _Zero:
    """A score plugin rating every node 0: it answers with the state's shared zeros."""

    name = "zero"

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        return state.zero_scores


@pytest.mark.parametrize(
    "kinds",
    [
        pytest.param(("f64", "zero"), id="score-then-zeros"),
        pytest.param(("zero", "f64"), id="zeros-first"),
        pytest.param(("zero", "zero"), id="only-zeros"),
        pytest.param(("f32", "zero", "f64"), id="float32-weight-1"),
    ],
)
@pytest.mark.parametrize("seed", range(3))
def test_scores_that_are_zero_everywhere_are_skipped_without_changing_picks(
    kinds: tuple[str, ...], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    plugins: list[tuple[ScorePlugin, float]] = []
    for i, kind in enumerate(kinds):
        values = rng.integers(-3, 4, 64).astype(np.float32 if kind == "f32" else np.float64)
        made: ScorePlugin = _Zero() if kind == "zero" else _Fixed(cast("FloatArray", values))
        plugins.append((made, 1.0 if i == 0 else 0.5))
    session = _scoring_session(plugins)
    task = make_task().gpus(1).build()
    feasible = rng.random(64) < 0.6
    total = np.zeros(64)
    for plugin, weight in plugins:
        values = plugin.values if isinstance(plugin, _Fixed) else np.zeros(64)
        total = total + weight * values
    expected = np.where(feasible, total, -np.inf)
    assert np.array_equal(session.node_scores(task, feasible), expected)
    assert session.select_node(task, feasible) == int(np.argmax(expected))


def test_fair_share_order_kept_for_the_same_jobs_and_shares_equals_a_fresh_sort() -> None:
    """The fair-share order kept from the last call (same job sequence, same shares) is the
    sort a fresh plugin makes; a change of usage, or other jobs, sorts again."""
    state = make_state(make_node("g").gpus(8).cpu(64).mem_gib(512))
    jobs = tuple(
        make_job(f"j{i}").gpus(1).queue("a" if i % 2 else "b").at(float(10 - i)).build()
        for i in range(6)
    )
    session = Session(
        Snapshot(state, jobs, queues=_capped_tree()), policy_profile("gpusched"), cycle_context()
    )
    quota = session.quota
    assert quota is not None
    kept = FairShare()

    def fresh() -> list[JobId]:
        return [j.id for j in FairShare().order(session, jobs)]

    first = kept.order(session, jobs)
    first.reverse()  # (a caller's own list: changing it leaves the kept order alone)
    before = fresh()
    assert [j.id for j in kept.order(session, jobs)] == before
    quota.charge(QueueName("b"), Resources({"gpu": 2000}))  # b's share grows: a goes first
    assert [j.id for j in kept.order(session, jobs)] == fresh() != before
    others = jobs[1:]
    assert [j.id for j in kept.order(session, others)] == [
        j.id for j in FairShare().order(session, others)
    ]
