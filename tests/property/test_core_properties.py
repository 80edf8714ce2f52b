"""Properties of one cycle and of the state machinery, on random states and job lists."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import (
    cycle_context,
    fgd_cache_mismatches,
    gang_policies,
    policy_profile,
    state_contents,
)
from gpusched.framework import ClusterState, Snapshot, Statement
from gpusched.model import Job, JobId, Node, Task, TaskId
from gpusched.plugins.fgd import Fgd
from gpusched.plugins.filters import NodeResourcesFit
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.scheduler import POLICIES, schedule

from .strategies import jobs, nodes

ALL_POLICIES = sorted(POLICIES)


def preload(state: ClusterState, workload: list[Job], seed: int) -> list[Task]:
    """Place some tasks of ``workload`` at random feasible spots; return the tasks placed."""
    rng = random.Random(seed)
    fit = NodeResourcesFit()
    placed = []
    for job in workload:
        for task in job.tasks:
            mask = fit.filter(cycle_context(), task, state)
            if not mask.any() or rng.random() < 0.4:
                continue
            node = rng.choice([int(n) for n in np.flatnonzero(mask)])
            free = state.gpu_free[node]
            cand = [int(g) for g in np.flatnonzero(free >= task.shape.gpu_milli)]
            gpus = tuple(sorted(rng.sample(cand, task.shape.num_gpu)))
            state.allocate(Task(TaskId(f"pre-{task.id}"), JobId("pre"), task.shape), node, gpus)
            placed.append(task)
    return placed


@pytest.mark.parametrize("policy", ALL_POLICIES)
@given(cluster=nodes(), background=jobs(max_jobs=6), workload=jobs(), seed=st.integers(0, 9))
def test_one_cycle_is_pure_and_places_gangs_whole(
    policy: str, cluster: list[Node], background: list[Job], workload: list[Job], seed: int
) -> None:
    state = ClusterState.from_nodes(cluster)
    preload(state, background, seed)
    before = state_contents(state)
    snapshot = Snapshot(state, tuple(workload), now=1.0, seed=seed)
    profile = policy_profile(policy, [t.shape for j in workload for t in j.tasks])
    plan = schedule(snapshot, profile)

    assert state_contents(state) == before
    assert snapshot.pending == tuple(workload)
    # Every job is bound or pending with a reason; under a gang policy never both, and a bound
    # job has exactly min_available tasks placed.
    bound = plan.bound_jobs()
    assert bound | set(plan.pending) == {j.id for j in workload}
    assert all(status.reasons for status in plan.pending.values())
    if policy in gang_policies():
        assert bound.isdisjoint(plan.pending)
        for job in workload:
            placed = sum(1 for b in plan.binds if b.job == job.id)
            assert placed in (0, job.min_available)
    # The plan applies to the snapshot's state without over-committing anything.
    applied = state.copy()
    tasks_by_id = {t.id: t for j in workload for t in j.tasks}
    for b in plan.binds:
        applied.allocate(tasks_by_id[b.task], applied.index[b.node], b.gpus, b.gpu_milli)
    assert (applied.cpu_free >= 0).all()
    assert (applied.mem_free >= 0).all()
    assert (applied.gpu_free >= 0).all()


@given(cluster=nodes(), background=jobs(), gang=jobs(max_jobs=4), seed=st.integers(0, 9))
def test_statement_rollback_restores_the_state_exactly(
    cluster: list[Node], background: list[Job], gang: list[Job], seed: int
) -> None:
    state = ClusterState.from_nodes(cluster)
    preload(state, background, seed)
    before = state_contents(state, versions=False)
    stmt = Statement(state)
    rng = random.Random(seed)
    fit = NodeResourcesFit()
    for job in gang:
        for task in job.tasks:
            mask = fit.filter(cycle_context(), task, state)
            if mask.any():
                node = rng.choice([int(n) for n in np.flatnonzero(mask)])
                cand = np.flatnonzero(state.gpu_free[node] >= task.shape.gpu_milli)
                stmt.allocate(task, node, tuple(int(g) for g in cand[: task.shape.num_gpu]))
    stmt.rollback()
    assert state_contents(state, versions=False) == before


@given(cluster=nodes(max_nodes=6), workload=jobs(max_jobs=20), seed=st.integers(0, 99))
def test_fgd_incremental_scores_equal_fresh_scores(
    cluster: list[Node], workload: list[Job], seed: int
) -> None:
    shapes = [t.shape for j in workload for t in j.tasks]
    target = TargetWorkload.from_shapes(shapes)
    state = ClusterState.from_nodes(cluster)
    plugin = Fgd(target)
    fit = NodeResourcesFit()
    rng = random.Random(seed)
    for job in workload:
        for task in job.tasks:
            feasible = fit.filter(cycle_context(), task, state)
            cached = plugin.score(cycle_context(), task, state, feasible)
            assert fgd_cache_mismatches(cached, target, task, state, feasible) == []
            if feasible.any() and rng.random() < 0.7:
                node = int(np.argmax(np.where(feasible, cached, -1.0)))
                state.allocate(task, node, plugin.pick(cycle_context(), task, state, node))
            elif len(state.allocations) and rng.random() < 0.5:
                state.release(rng.choice(sorted(state.allocations)))
