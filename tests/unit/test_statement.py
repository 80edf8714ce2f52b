"""Statement: a gang's tentative allocations, kept whole by commit or undone whole by rollback."""

from __future__ import annotations

import pytest

from builders import make_node, make_state, make_task, occupy, state_contents
from gpusched.errors import InvariantError
from gpusched.framework import ClusterState, Statement
from gpusched.model import TaskId


def snapshot_of(state: ClusterState) -> tuple[object, ...]:
    return state_contents(state, versions=False)


def cluster() -> ClusterState:
    state = make_state(
        make_node("a").gpus(4).cpu(32).mem_gib(128),
        make_node("b").gpus(4).cpu(32).mem_gib(128),
        make_node("c").gpus(2).cpu(8).mem_gib(32),
    )
    occupy(state, "a", gpus=(0,), gpu_milli=400, cpu_milli=2000)
    return state


def test_commit_keeps_every_allocation_in_order() -> None:
    state = cluster()
    stmt = Statement(state)
    first = stmt.allocate(make_task("g-0").gpus(2).cpu(4).build(), 0, (1, 2))
    second = stmt.allocate(make_task("g-1").gpus(2).cpu(4).build(), 1, (0, 1))
    assert stmt.allocations == (first, second)
    assert stmt.commit() == (first, second)
    assert state.allocations[TaskId("g-0")] == first
    assert state.allocations[TaskId("g-1")] == second
    assert state.gpu_free[:2].tolist() == [[600, 0, 0, 1000], [0, 0, 1000, 1000]]


def test_rollback_restores_free_resources_and_allocations_exactly() -> None:
    state = cluster()
    before = snapshot_of(state)
    stamps = state.version.tolist()
    stmt = Statement(state)
    stmt.allocate(make_task("g-0").share(600).cpu(4).mem_gib(8).build(), 0, (0,))
    stmt.allocate(make_task("g-1").gpus(4).cpu(30).build(), 1, (0, 1, 2, 3))
    assert snapshot_of(state) != before
    stmt.rollback()
    assert snapshot_of(state) == before
    assert stmt.allocations == ()
    # Touched nodes get new stamps (caches recompute); the untouched node keeps its stamp.
    assert state.version[0] > stamps[0]
    assert state.version[1] > stamps[1]
    assert state.version[2] == stamps[2]


def test_rollback_after_a_member_fails_undoes_the_members_placed_before_it() -> None:
    state = cluster()
    before = snapshot_of(state)
    stmt = Statement(state)
    stmt.allocate(make_task("g-0").gpus(2).build(), 2, (0, 1))
    with pytest.raises(InvariantError, match="needs 1000 milli on GPU 0 of c, which has 0"):
        stmt.allocate(make_task("g-1").gpus(2).build(), 2, (0, 1))
    assert len(stmt.allocations) == 1  # the failed member was never recorded
    stmt.rollback()
    assert snapshot_of(state) == before


def test_rollback_of_an_empty_statement_changes_nothing() -> None:
    state = cluster()
    before = snapshot_of(state)
    stamps = state.version.tolist()
    Statement(state).rollback()
    assert snapshot_of(state) == before
    assert state.version.tolist() == stamps


def test_a_statement_on_a_working_copy_leaves_the_original_alone() -> None:
    state = cluster()
    before = snapshot_of(state)
    work = state.copy()
    stmt = Statement(work)
    stmt.allocate(make_task("g-0").gpus(2).build(), 1, (2, 3))
    stmt.commit()
    assert snapshot_of(state) == before
    assert TaskId("g-0") in work.allocations
