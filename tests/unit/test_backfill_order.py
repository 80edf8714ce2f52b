"""Backfill's order: a reservation holder keeps its place ahead of its priority and lower."""

from __future__ import annotations

from builders import make_job
from gpusched.actions.allocate import _holders_first
from gpusched.model import JobId


def test_holders_go_before_their_priority_and_lower_but_after_higher_priority() -> None:
    hi = make_job("hi").gpus(1).priority(10).build()
    a = make_job("a").gpus(1).build()
    b = make_job("b").gpus(1).build()
    late = make_job("late").gpus(1).build()
    early = make_job("early").gpus(1).build()
    reserved = {JobId("late"): 900.0, JobId("early"): 100.0}
    got = _holders_first([hi, a, b, late, early], reserved)
    assert [j.id for j in got] == ["hi", "early", "late", "a", "b"]


def test_no_holder_leaves_the_order_alone() -> None:
    jobs = [make_job(n).gpus(1).build() for n in ("x", "y")]
    assert _holders_first(jobs, {JobId("gone"): 0.0}) == jobs
