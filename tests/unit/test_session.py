"""One scheduling cycle: diagnosis of jobs left pending, gangs all or nothing, integer GPUs,
tie-breaking, queue order, and ``schedule()`` leaving its snapshot untouched."""

from __future__ import annotations

from dataclasses import replace
from random import Random

import pytest

from builders import (
    JobBuilder,
    gang_policies,
    make_job,
    make_node,
    make_state,
    occupy,
    policy_profile,
    run_cycle,
    state_contents,
)
from gpusched.framework import (
    Cause,
    ClusterState,
    Code,
    CycleContext,
    Plan,
    Session,
    Snapshot,
    Status,
)
from gpusched.model import Job, JobId, Task, TaskId
from gpusched.scheduler import POLICIES, schedule

ALL_POLICIES = sorted(POLICIES)


def gpu_pair() -> ClusterState:
    """a: 4 GPUs, 32 CPU (3 GPUs and 16 CPU in use); b: 2 GPUs, 16 CPU, idle."""
    state = make_state(make_node("a").gpus(4).cpu(32), make_node("b").gpus(2).cpu(16))
    occupy(state, "a", gpus=(0, 1, 2), cpu_milli=16_000)
    return state


def bound_tasks(plan: Plan) -> list[str]:
    return [b.task for b in plan.binds]


# -- diagnosis -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "code", "reasons"),
    [
        pytest.param(
            make_job("j").gpus(3),
            Code.UNSCHEDULABLE,
            ("2/2 nodes have fewer than 3 GPU(s) with 1000/1000 free (best node: 2)",),
            id="gpus-busy-now-fit-when-free",
        ),
        pytest.param(
            make_job("j").cpu(20),
            Code.UNSCHEDULABLE,
            ("2/2 nodes have less than 20 CPU free (most free: 16 CPU)",),
            id="cpu-busy-now",
        ),
        pytest.param(
            make_job("j").gpus(8),
            Code.UNRESOLVABLE,
            (
                "cannot fit on any node even when empty",
                "2/2 nodes have fewer than 8 GPU(s) with 1000/1000 free (best node: 4)",
            ),
            id="more-gpus-than-any-node-has",
        ),
        pytest.param(
            make_job("j").cpu(40),
            Code.UNRESOLVABLE,
            (
                "cannot fit on any node even when empty",
                "2/2 nodes have less than 40 CPU free (most free: 32 CPU)",
            ),
            id="more-cpu-than-any-node-has",
        ),
        pytest.param(
            make_job("j").gpus(1).models("H100"),
            Code.UNRESOLVABLE,
            ("cannot fit on any node even when empty", "only 0/2 nodes have GPU model H100"),
            id="gpu-model-nobody-has",
        ),
    ],
)
def test_jobs_left_pending_say_why_with_numbers(
    job: JobBuilder, code: Code, reasons: tuple[str, ...]
) -> None:
    plan = run_cycle(gpu_pair(), [job], policy="fgd")
    assert plan.binds == []
    assert plan.pending == {JobId("j"): Status(code, reasons, Cause.NODES)}


def test_a_failed_request_is_remembered_for_identical_jobs_in_the_cycle() -> None:
    plan = run_cycle(
        gpu_pair(), [make_job("x1").gpus(3), make_job("x2").gpus(3), make_job("ok").gpus(1)]
    )
    assert plan.pending[JobId("x1")] == plan.pending[JobId("x2")]
    assert plan.pending[JobId("x1")].code is Code.UNSCHEDULABLE
    assert bound_tasks(plan) == ["ok"]


def test_status_message_joins_reasons() -> None:
    status = Status(Code.UNSCHEDULABLE, ("first", "second"))
    assert status.message == "first; second"
    assert not status.ok
    assert Status.success().ok
    assert Status.success().message == "Success"


# -- gangs -----------------------------------------------------------------------------------


def two_four_gpu_nodes() -> ClusterState:
    return make_state(make_node("a").gpus(4), make_node("b").gpus(4))


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_a_gang_that_fits_is_placed_whole(policy: str) -> None:
    plan = run_cycle(two_four_gpu_nodes(), [make_job("g").gpus(2).replicas(4)], policy=policy)
    assert sorted(bound_tasks(plan)) == ["g-0", "g-1", "g-2", "g-3"]
    assert plan.bound_jobs() == {JobId("g")}
    # 4 tasks x 2 GPUs on 2 x 4 GPUs: every GPU used exactly once.
    used = sorted((b.node, g) for b in plan.binds for g in b.gpus)
    assert used == [(n, g) for n in ("a", "b") for g in range(4)]


@pytest.mark.parametrize("policy", gang_policies())
def test_a_gang_that_cannot_fully_fit_leaves_no_binds(policy: str) -> None:
    state = two_four_gpu_nodes()
    occupy(state, "b", gpus=(0,))  # 7 free GPUs: 3 two-GPU tasks fit, the 4th does not
    plan = run_cycle(state, [make_job("g").gpus(2).replicas(4)], policy=policy)
    assert plan.binds == []
    status = plan.pending[JobId("g")]
    assert status.code is Code.UNSCHEDULABLE
    assert status.reasons[0] == "gang needs 4 tasks placed together; 3 could be placed"


def test_a_rolled_back_gang_gives_every_gpu_back() -> None:
    state = two_four_gpu_nodes()
    occupy(state, "b", gpus=(0,))
    jobs = [make_job("g").gpus(2).replicas(4), make_job("after").gpus(3)]
    plan = run_cycle(state, jobs, policy="fgd")
    # Had the 3 placed gang members (6 GPUs) stayed, only 1 of the 7 free GPUs would be left.
    assert bound_tasks(plan) == ["after"]


def test_gang_with_an_impossible_member_is_unresolvable_and_places_nothing() -> None:
    fits = make_job("g").gpus(1).build().tasks[0]
    never = make_job("g").gpus(1).models("H100").build().tasks[0]
    gang = Job(
        JobId("g"),
        (Task(TaskId("g-0"), JobId("g"), fits.shape), Task(TaskId("g-1"), JobId("g"), never.shape)),
    )
    plan = run_cycle(two_four_gpu_nodes(), [gang])
    assert plan.binds == []
    assert plan.pending[JobId("g")] == Status(
        Code.UNRESOLVABLE,
        (
            "gang needs 2 tasks placed together; 1 could be placed",
            "cannot fit on any node even when empty",
            "only 0/2 nodes have GPU model H100",
        ),
        Cause.NODES,
    )


def test_min_available_places_that_many_tasks() -> None:
    # 3 tasks of 4 GPUs on 2 x 4 GPUs: the gang of 2 fits, a third task has no room.
    job = make_job("g").gpus(4).replicas(3).min_available(2)
    plan = run_cycle(two_four_gpu_nodes(), [job])
    assert sorted(bound_tasks(plan)) == ["g-0", "g-1"]
    assert sorted(b.node for b in plan.binds) == ["a", "b"]


def test_a_gang_larger_than_the_empty_cluster_is_unresolvable() -> None:
    plan = run_cycle(two_four_gpu_nodes(), [make_job("g").gpus(4).replicas(3)])
    assert plan.pending[JobId("g")].code is Code.UNRESOLVABLE


# -- GPUs as integers (kube-default) ---------------------------------------------------------


def test_kube_default_holds_a_whole_gpu_for_a_fractional_request() -> None:
    state = make_state(make_node("n").gpus(2))
    jobs = [make_job(f"s{i}").share(300) for i in range(3)]
    plan = run_cycle(state, jobs, policy="kube-default")
    # Two GPUs hold two fractional tasks; the third waits although 1400 milli are idle.
    assert [(b.task, b.gpus, b.gpu_milli) for b in plan.binds] == [
        ("s0", (0,), 1000),
        ("s1", (1,), 1000),
    ]
    assert plan.pending[JobId("s2")] == Status(
        Code.UNSCHEDULABLE,
        ("1/1 nodes have fewer than 1 GPU(s) with 1000/1000 free (best node: 0)",),
        Cause.NODES,
    )


@pytest.mark.parametrize("policy", [p for p in ALL_POLICIES if p != "kube-default"])
def test_sharing_policies_pack_fractions_onto_shared_gpus(policy: str) -> None:
    state = make_state(make_node("n").gpus(2))
    plan = run_cycle(state, [make_job(f"s{i}").share(300) for i in range(6)], policy=policy)
    # 6 x 300 = 1800 milli on 2 GPUs: at most 3 per GPU, so all six fit.
    assert sorted(bound_tasks(plan)) == [f"s{i}" for i in range(6)]
    assert all(b.gpu_milli == 300 for b in plan.binds)
    per_gpu = [sum(1 for b in plan.binds if b.gpus == (g,)) for g in (0, 1)]
    assert per_gpu == [3, 3]


# -- node choice -----------------------------------------------------------------------------


def test_tie_break_first_takes_the_first_tied_node() -> None:
    state = make_state(*(make_node(f"n{i}").gpus(4) for i in range(4)))
    nodes = {
        run_cycle(state, [make_job("j").gpus(1)], policy="bestfit", seed=s).binds[0].node
        for s in range(10)
    }
    assert nodes == {"n0"}


def test_tie_break_random_spreads_over_tied_nodes_by_seed() -> None:
    state = make_state(*(make_node(f"n{i}").gpus(4) for i in range(4)))
    profile = policy_profile("kube-default")
    nodes = {
        run_cycle(state, [make_job("j").gpus(1)], profile=profile, seed=s).binds[0].node
        for s in range(40)
    }
    assert nodes == {"n0", "n1", "n2", "n3"}


def test_fifo_tries_jobs_by_submit_time_not_list_order() -> None:
    state = make_state(make_node("n").gpus(1))
    plan = run_cycle(state, [make_job("late").gpus(1).at(5), make_job("early").gpus(1).at(1)])
    assert bound_tasks(plan) == ["early"]
    assert plan.pending[JobId("late")].code is Code.UNSCHEDULABLE


# -- purity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_schedule_does_not_change_the_snapshot_and_repeats_itself(policy: str) -> None:
    state = make_state(
        make_node("a").gpus(4).cpu(32), make_node("b").gpus(4).cpu(16), make_node("c").cpu(8)
    )
    # 7 GPUs have all 1000 free wherever the 300 share lands: the 2 x 2-GPU gang always fits.
    occupy(state, "a", gpus=(0,), gpu_milli=500, cpu_milli=4000)
    jobs = tuple(
        j.build()
        for j in (
            make_job("share").share(300).cpu(2),
            make_job("gang").gpus(2).replicas(2),
            make_job("cpu").cpu(4),
            make_job("big").gpus(8),
        )
    )
    snapshot = Snapshot(state, jobs, now=3.0, seed=5)
    before = state_contents(state)
    profile = policy_profile(policy, [t.shape for j in jobs for t in j.tasks])
    first = schedule(snapshot, profile)
    assert state_contents(state) == before
    assert snapshot.pending == jobs
    second = schedule(snapshot, profile)
    assert second == first
    assert state_contents(state) == before
    assert first.bound_jobs() == {"share", "gang", "cpu"}
    assert set(first.pending) == {"big"}
    # The plan applies cleanly to the snapshot's state.
    tasks = {t.id: t for j in jobs for t in j.tasks}
    applied = state.copy()
    for b in first.binds:
        applied.allocate(tasks[b.task], applied.index[b.node], b.gpus, b.gpu_milli)


def test_the_basis_of_a_run_time_estimate_follows_the_estimates_own_order() -> None:
    job = make_job("j").gpus(1).build()
    state = make_state(make_node("a").gpus(8))
    learned = Snapshot(state, (job,), runtime_stats={(job.user, job.kind.value): 120.0})
    session = Session(learned, policy_profile("gpusched"), CycleContext(0.0, Random(0)))
    assert (session.runtime_basis(job), session.runtime_estimate(job)) == ("learned", 120.0)
    declared = replace(job, runtime_estimate=60.0)
    assert (session.runtime_basis(declared), session.runtime_estimate(declared)) == (
        "declared",
        60.0,
    )
    plain = Session(Snapshot(state, (job,)), session.profile, CycleContext(0.0, Random(0)))
    assert (plain.runtime_basis(job), plain.runtime_estimate(job)) == (
        "default",
        plain.default_runtime,
    )
