"""The live scheduler carries reservation holders and deadlines between cycles."""

from __future__ import annotations

from builders import make_job, make_node, make_state
from gpusched.framework import Eviction, Plan, Reservation, RunningJob, Snapshot
from gpusched.live.carry import Carried
from gpusched.model import JobId, NodeName


def _snapshot(running: dict[str, float], now: float) -> Snapshot:
    state = make_state(make_node("a").gpus(8))
    jobs = {JobId(j): RunningJob(make_job(j).gpus(1).build(), t) for j, t in running.items()}
    return Snapshot(state, (), now, running=jobs)


def test_holders_keep_their_first_time_and_deadlines_reach_running_jobs() -> None:
    carried = Carried()
    plan = Plan()
    plan.reservations[JobId("big")] = Reservation(JobId("big"), 900.0, (NodeName("a"),))
    plan.deadlines[JobId("guest")] = (900.0, JobId("big"))
    carried.record(plan, now=100.0)
    carried.record(plan, now=200.0)  # still the holder: keeps 100
    snap = carried.apply(_snapshot({"guest": 100.0, "other": 0.0}, now=300.0))
    assert snap.reserved == {JobId("big"): 100.0}
    assert snap.running[JobId("guest")].deadline == 900.0
    assert snap.running[JobId("other")].deadline is None


def test_an_evicted_or_ended_job_loses_its_deadline_and_a_started_holder_its_place() -> None:
    carried = Carried()
    plan = Plan()
    plan.deadlines[JobId("guest")] = (900.0, JobId("big"))
    plan.deadlines[JobId("gone")] = (900.0, JobId("big"))
    carried.record(plan, now=100.0)
    later = Plan()
    later.evictions.append(Eviction(JobId("guest"), JobId("big"), "overdue"))
    carried.record(later, now=1000.0)
    snap = carried.apply(_snapshot({"guest": 1000.0}, now=1100.0))  # restarted, no deadline
    assert snap.running[JobId("guest")].deadline is None
    assert carried.deadlines == {}  # "gone" is no longer running
    assert snap.reserved == {}


def test_evicted_jobs_remember_their_evictors_until_they_are_gone() -> None:
    carried = Carried()
    plan = Plan()
    plan.evictions.append(Eviction(JobId("victim"), JobId("owner"), "reclaimed"))
    carried.record(plan, now=100.0)
    again = Plan()
    again.evictions.append(Eviction(JobId("victim"), JobId("urgent"), "preempted"))
    carried.record(again, now=200.0)
    snap = carried.apply(_snapshot({"victim": 300.0}, now=400.0))  # running again
    assert snap.evicted_by == {JobId("victim"): frozenset({JobId("owner"), JobId("urgent")})}
    snap = carried.apply(_snapshot({}, now=500.0))  # ended: forgotten
    assert snap.evicted_by == {}
    assert carried.evicted_by == {}
