"""The live scheduler carries reservation holders, deadlines, evictors, evicted jobs' first
submissions and every job's disruption counts between cycles, and stores them as JSON for the
next leader (the ConfigMap itself: tests/e2e/test_live_carry.py)."""

from __future__ import annotations

import json

import pytest

from builders import make_job, make_node, make_state, policy_profile
from gpusched.framework import Eviction, Move, Plan, Reservation, RunningJob, Snapshot
from gpusched.live.carry import Carried
from gpusched.live.carry_store import CarriedFormatError, decode, encode
from gpusched.model import JobId, NodeName, TaskId
from gpusched.scheduler import schedule


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


def test_an_evicted_job_back_in_the_queue_keeps_its_first_submission() -> None:
    # victim, submitted at 100, runs; it is evicted at 500 and its controller recreates its
    # pods at 520, so the API shows it submitted at 520.
    state = make_state(make_node("a").gpus(8))
    first = make_job("victim").gpus(1).at(100.0).build()
    running = {JobId("victim"): RunningJob(first, 200.0)}
    carried = Carried()
    plan = Plan()
    plan.evictions.append(Eviction(JobId("victim"), JobId("urgent"), "preempted"))
    carried.record(plan, 500.0, running)
    back = make_job("victim").gpus(1).at(520.0).build()
    other = make_job("other").gpus(1).at(300.0).build()
    snap = carried.apply(Snapshot(state, (other, back), 600.0))
    assert [j.id for j in snap.pending] == ["other", "victim"]
    requeued = snap.pending[1]
    assert (requeued.submit_time, requeued.requeued_at, requeued.queue_time) == (100, 520, 520)
    assert snap.pending[0] is other  # never evicted: as the API shows it
    # Restarted at 700 and evicted again at 900: still first submitted at 100.
    again = Plan()
    again.evictions.append(Eviction(JobId("victim"), JobId("owner"), "reclaimed"))
    carried.record(again, 900.0, {JobId("victim"): RunningJob(back, 700.0)})
    assert carried.submitted == {JobId("victim"): 100.0}
    carried.apply(Snapshot(state, (), 1000.0))  # gone: forgotten
    assert carried.submitted == {}


def test_disruptions_are_counted_and_reach_the_core_as_the_simulator_gives_them() -> None:
    # victim is evicted twice, mover moved once; the pods that come back do not say so.
    carried = Carried()
    for at, evictor in ((100.0, "owner"), (200.0, "urgent")):
        plan = Plan()
        plan.evictions.append(Eviction(JobId("victim"), JobId(evictor), "preempted"))
        carried.record(plan, at)
    moving = Plan()
    moving.evictions.append(Eviction(JobId("mover"), JobId("big"), "moved"))
    moving.moves.append(
        Move(
            TaskId("mover-0"),
            JobId("mover"),
            JobId("big"),
            NodeName("a"),
            (0,),
            NodeName("b"),
            (0,),
            1000,
        )
    )
    carried.record(moving, 250.0)
    assert carried.disrupted == {JobId("victim"): (2, 0), JobId("mover"): (0, 1)}
    assert carried.evicted_by.keys() == {JobId("victim")}  # a move evicts for no one
    snap = carried.apply(_snapshot({"victim": 300.0, "mover": 260.0, "other": 0.0}, now=400.0))
    # The disruption budget reads evictions and moves; "evicted at most once" evictions only.
    assert snap.evictions == {JobId("victim"): 2, JobId("mover"): 1}
    evictions = {j: run.evictions for j, run in snap.running.items()}
    assert evictions == {JobId("victim"): 2, JobId("mover"): 0, JobId("other"): 0}
    stored = decode(encode(carried)[0])
    assert stored.disrupted == carried.disrupted
    carried.apply(_snapshot({"mover": 260.0}, now=500.0))  # victim is gone: forgotten
    assert carried.disrupted == {JobId("mover"): (0, 1)}


def test_a_job_past_its_disruption_budget_is_spared_across_live_cycles() -> None:
    # One 8-GPU node: `spent` (started at 5000, the cheaper victim: less progress lost) and
    # `fresh` (started at 0) hold 4 GPUs each; `urgent` (priority 1000) needs 4. The live
    # snapshot says nothing of evictions; the carried counts say spent was evicted 3 times,
    # the default budget (preempt's max_evictions).
    state = make_state(make_node("a").gpus(8))
    running = {}
    for name, start, gpus in (("spent", 5000.0, (0, 1, 2, 3)), ("fresh", 0.0, (4, 5, 6, 7))):
        job = make_job(name).gpus(4).build()
        state.allocate(job.tasks[0], state.index[NodeName("a")], gpus)
        running[job.id] = RunningJob(job, start)
    urgent = make_job("urgent").gpus(4).priority(1000).at(9000.0).build()
    snapshot = Snapshot(state, (urgent,), 10_000.0, running=running)
    profile = policy_profile("gpusched")

    def victims(snap: Snapshot) -> list[str]:
        plan = schedule(snap, profile)
        return [e.job for e in plan.evictions]

    assert victims(snapshot) == ["spent"]  # without the counts
    carried = Carried(disrupted={JobId("spent"): (3, 0)})
    assert victims(carried.apply(snapshot)) == ["fresh"]


# -- the stored form (live.carry_store): JSON round trip, pruning, size limit, bad input -------


def _carried() -> Carried:
    carried = Carried()
    plan = Plan()
    plan.reservations[JobId("ns/big")] = Reservation(JobId("ns/big"), 9e9, (NodeName("a"),))
    plan.deadlines[JobId("ns/guest")] = (1_700_000_900.5, JobId("ns/big"))
    plan.evictions.append(Eviction(JobId("ns/victim"), JobId("ns/owner"), "reclaimed"))
    carried.record(plan, now=1_700_000_000.25)
    again = Plan()
    again.reservations = dict(plan.reservations)
    again.evictions.append(Eviction(JobId("ns/victim"), JobId("ns/urgent"), "preempted"))
    carried.record(again, now=1_700_000_060.0)
    return carried


def test_the_carried_state_survives_its_json_form_exactly() -> None:
    carried = _carried()
    assert carried.evicted_at == {JobId("ns/victim"): 1_700_000_060.0}  # the last eviction
    text, dropped = encode(carried)
    assert dropped == 0
    assert json.loads(text) == {
        "version": 1,
        "reserved": {"ns/big": 1_700_000_000.25},
        "deadlines": {"ns/guest": 1_700_000_900.5},
        "evictedBy": {"ns/victim": {"by": ["ns/owner", "ns/urgent"], "at": 1_700_000_060.0}},
        "disrupted": {"ns/victim": {"evictions": 2, "moves": 0}},
    }
    back = decode(text)
    assert back == carried
    assert encode(back) == (text, 0)  # deterministic: an unchanged state is the same text


def test_a_first_submission_is_stored_with_the_eviction() -> None:
    carried = _carried()
    carried.submitted[JobId("ns/victim")] = 1_699_999_000.5
    text, _ = encode(carried)
    entry = json.loads(text)["evictedBy"]["ns/victim"]
    assert entry == {
        "by": ["ns/owner", "ns/urgent"],
        "at": 1_700_000_060.0,
        "submitted": 1_699_999_000.5,
    }
    assert decode(text) == carried


def test_a_new_leader_gets_what_the_old_one_applied_and_prunes_gone_jobs() -> None:
    stored = decode(encode(_carried())[0])
    fresh = Carried()
    fresh.merge(stored)
    snap = fresh.apply(_snapshot({"ns/guest": 100.0, "ns/victim": 200.0}, now=300.0))
    assert snap.reserved == {JobId("ns/big"): 1_700_000_000.25}
    assert snap.running[JobId("ns/guest")].deadline == 1_700_000_900.5
    assert snap.evicted_by == {JobId("ns/victim"): frozenset({"ns/owner", "ns/urgent"})}
    fresh.apply(_snapshot({}, now=400.0))  # the guest ended, the victim is gone
    assert json.loads(encode(fresh)[0])["deadlines"] == {}
    assert json.loads(encode(fresh)[0])["evictedBy"] == {}
    assert fresh.evicted_at == {}


def test_merging_unites_evictors_and_keeps_the_earliest_holder() -> None:
    ours = Carried(
        reserved={JobId("a"): 50.0},
        deadlines={JobId("g"): 10.0},
        evicted_by={JobId("v"): frozenset({JobId("x")})},
        evicted_at={JobId("v"): 5.0},
        submitted={JobId("v"): 3.0},
        disrupted={JobId("v"): (2, 0), JobId("m"): (0, 3)},
    )
    theirs = Carried(
        reserved={JobId("a"): 20.0, JobId("b"): 30.0},
        deadlines={JobId("g"): 99.0, JobId("h"): 11.0},
        evicted_by={JobId("v"): frozenset({JobId("y")}), JobId("w"): frozenset({JobId("x")})},
        evicted_at={JobId("v"): 7.0, JobId("w"): 6.0},
        submitted={JobId("v"): 1.0, JobId("w"): 2.0},
        disrupted={JobId("v"): (1, 1), JobId("w"): (1, 0)},
    )
    ours.merge(theirs)
    assert ours.reserved == {"a": 20.0, "b": 30.0}
    assert ours.deadlines == {"g": 10.0, "h": 11.0}  # ours kept where both have one
    assert ours.evicted_by == {"v": frozenset({"x", "y"}), "w": frozenset({"x"})}
    assert ours.evicted_at == {"v": 7.0, "w": 6.0}
    assert ours.submitted == {"v": 1.0, "w": 2.0}  # the earliest submission
    assert ours.disrupted == {"v": (2, 1), "w": (1, 0), "m": (0, 3)}  # the larger counts


def test_over_the_size_limit_the_oldest_evictions_are_left_out_first() -> None:
    carried = Carried(reserved={JobId("ns/holder"): 1.0}, deadlines={JobId("ns/guest"): 2.0})
    for i in range(200):
        job = JobId(f"ns/victim-{i:03d}")
        carried.evicted_by[job] = frozenset({JobId("ns/evictor")})
        carried.evicted_at[job] = 1000.0 + i
    full, _ = encode(carried)
    limit = len(full) - 1000
    text, dropped = encode(carried, limit)
    assert len(text) <= limit
    kept = decode(text)
    assert dropped == 200 - len(kept.evicted_by) > 0
    oldest_kept = min(kept.evicted_at.values())
    assert all(t < oldest_kept for j, t in carried.evicted_at.items() if j not in kept.evicted_by)
    assert kept.reserved == carried.reserved
    assert kept.deadlines == carried.deadlines
    assert len(carried.evicted_by) == 200  # the leader's own state is untouched
    # With room for almost nothing, deadlines and then holders go too.
    tiny, dropped = encode(carried, 80)
    assert decode(tiny) == Carried(reserved={JobId("ns/holder"): 1.0})
    assert dropped == 201


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('{"reserved": {}}', "version: expected 1, got None"),
        ('{"version": 2}', "version: expected 1, got 2"),
        ('{"version": 1, "reserved": []}', "reserved: expected an object, got a list"),
        ('{"version": 1, "reserved": {"ns/a": "soon"}}', 'reserved["ns/a"]: expected Unix'),
        ('{"version": 1, "deadlines": {"ns/a": true}}', 'deadlines["ns/a"]: expected Unix'),
        ('{"version": 1, "deadlines": {"ns/a": NaN}}', 'deadlines["ns/a"]: expected Unix'),
        ('{"version": 1, "evictedBy": {"ns/v": ["ns/h"]}}', 'evictedBy["ns/v"]: expected an'),
        ('{"version": 1, "evictedBy": {"ns/v": {"by": [], "at": 1}}}', 'evictedBy["ns/v"].by'),
        ('{"version": 1, "evictedBy": {"ns/v": {"by": [3], "at": 1}}}', '"ns/v"].by[0]: expec'),
        ('{"version": 1, "evictedBy": {"ns/v": {"by": ["ns/h"]}}}', '"ns/v"].at: expected U'),
        (
            '{"version": 1, "evictedBy": {"ns/v": {"by": ["ns/h"], "at": 1, "submitted": "x"}}}',
            '"ns/v"].submitted: expected U',
        ),
        ('{"version": 1, "disrupted": {"ns/v": 2}}', 'disrupted["ns/v"]: expected an object'),
        (
            '{"version": 1, "disrupted": {"ns/v": {"evictions": -1}}}',
            'disrupted["ns/v"].evictions: expected a count >= 0, got -1',
        ),
        (
            '{"version": 1, "disrupted": {"ns/v": {"evictions": 1, "moves": "2"}}}',
            "disrupted[\"ns/v\"].moves: expected a count >= 0, got '2'",
        ),
    ],
)
def test_a_malformed_state_is_refused_naming_the_field(text: str, where: str) -> None:
    with pytest.raises(CarriedFormatError) as caught:
        decode(text)
    assert where in str(caught.value)


def test_sections_missing_from_the_state_are_empty_and_unknown_keys_ignored() -> None:
    assert decode('{"version": 1, "later": {"x": 1}}') == Carried()
