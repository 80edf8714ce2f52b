"""The discrete-event simulator: event order, durations, rejection rules and the event log."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from builders import JobBuilder, make_job, make_node, policy_profile
from gpusched.errors import InvariantError
from gpusched.framework import Cause, Code, PluginContext
from gpusched.model import JobId, Node
from gpusched.plugins.fragmentation import TargetWorkload
from gpusched.scheduler import policy_spec
from gpusched.scheduler.build import build_profile
from gpusched.sim import SimOptions, Simulation
from gpusched.sim.events import EventHeap, EventKind
from gpusched.sim.gang_bench import run_gang_bench, without_reservation
from gpusched.sim.metrics import RunMetrics, summarise


def simulate(
    nodes: Sequence[Node],
    jobs: Sequence[JobBuilder],
    *,
    policy: str = "fgd",
    seed: int = 0,
    **options: bool,
) -> Simulation:
    built = [j.build() for j in jobs]
    profile = policy_profile(policy, [t.shape for j in built for t in j.tasks])
    opts = SimOptions(record_events=True, **options)
    return Simulation(nodes, built, profile, seed=seed, options=opts).run()


def one_gpu_node() -> list[Node]:
    return [make_node("n").gpus(1).build()]


def log_lines(sim: Simulation) -> list[str]:
    return sim.event_log().splitlines()


# -- the event heap --------------------------------------------------------------------------


def test_heap_orders_by_time_then_completions_then_insertion() -> None:
    heap = EventHeap()
    heap.push(5.0, EventKind.ARRIVAL, JobId("arrive-5-first"))
    heap.push(5.0, EventKind.COMPLETION, JobId("complete-5"))
    heap.push(1.0, EventKind.ARRIVAL, JobId("arrive-1"))
    heap.push(5.0, EventKind.ARRIVAL, JobId("arrive-5-second"))
    heap.push(0.5, EventKind.COMPLETION, JobId("complete-0.5"))
    order = []
    while len(heap):
        order.append(heap.pop().job)
    assert order == ["complete-0.5", "arrive-1", "complete-5", "arrive-5-first", "arrive-5-second"]


# -- the loop --------------------------------------------------------------------------------


def test_completion_frees_resources_for_an_arrival_at_the_same_time() -> None:
    sim = simulate(
        one_gpu_node(),
        [make_job("a").gpus(1).at(0).runs_for(10), make_job("b").gpus(1).at(10).runs_for(5)],
    )
    assert sim.records[JobId("b")].start == 10.0
    assert sim.records[JobId("b")].wait == 0.0
    assert log_lines(sim) == [
        "0.000 arrive a ",
        "0.000 bind a n[0]",
        "10.000 complete a ",
        "10.000 arrive b ",
        "10.000 bind b n[0]",
        "15.000 complete b ",
    ]


def test_a_waiting_job_starts_when_a_duration_ends() -> None:
    sim = simulate(
        [make_node("n").gpus(2).build()],
        [make_job("a").gpus(2).at(0).runs_for(5), make_job("b").gpus(2).at(1).runs_for(3)],
    )
    a, b = sim.records[JobId("a")], sim.records[JobId("b")]
    assert (a.start, a.end) == (0.0, 5.0)
    assert (b.arrival, b.start, b.end) == (1.0, 5.0, 8.0)
    assert b.wait == 4.0
    # Durations released everything: the cluster ends empty.
    assert sim.state.gpu_free.tolist() == [[1000, 1000]]
    assert len(sim.state.allocations) == 0
    assert sim.placed_milli == 0
    assert sim.pending == ()


def test_jobs_without_duration_hold_resources_to_the_end() -> None:
    sim = simulate(one_gpu_node(), [make_job("a").gpus(1).runs_for(None), make_job("b").gpus(1)])
    assert sim.records[JobId("a")].end is None
    assert sim.records[JobId("b")].start is None
    assert [j.id for j in sim.pending] == ["b"]
    assert sim.state.gpu_free.tolist() == [[0]]


def test_ignore_durations_keeps_jobs_running() -> None:
    sim = simulate(
        one_gpu_node(),
        [make_job("a").share(500).runs_for(1)],
        ignore_durations=True,
    )
    assert sim.records[JobId("a")].end is None
    assert sim.state.gpu_free.tolist() == [[500]]
    assert sim.placed_milli == 500


def test_drop_unplaced_gives_each_job_one_try() -> None:
    jobs = [make_job("a").gpus(1).at(0).runs_for(5), make_job("b").gpus(1).at(1).runs_for(5)]
    waiting = simulate(one_gpu_node(), jobs)
    dropped = simulate(one_gpu_node(), jobs, drop_unplaced=True)
    assert waiting.records[JobId("b")].start == 5.0
    rec = dropped.records[JobId("b")]
    assert rec.start is None
    assert rec.status is not None
    assert rec.status.code is Code.UNSCHEDULABLE
    assert (
        "1.000 reject b 1/1 nodes have fewer than 1 GPU(s) with 1000/1000 free (best node: 0)"
        in log_lines(dropped)
    )
    assert dropped.pending == ()


def test_unresolvable_jobs_are_rejected_and_the_rest_go_on() -> None:
    sim = simulate(
        one_gpu_node(),
        [make_job("huge").gpus(2).at(0), make_job("ok").gpus(1).at(1).runs_for(1)],
    )
    huge = sim.records[JobId("huge")]
    assert huge.start is None
    assert huge.status is not None
    assert huge.status.code is Code.UNRESOLVABLE
    assert sim.records[JobId("ok")].start == 1.0
    assert sim.pending == ()
    assert log_lines(sim)[1].startswith("0.000 reject huge cannot fit on any node even when empty")


def test_a_gang_is_bound_whole_and_released_whole() -> None:
    sim = simulate(
        [make_node("a").gpus(2).build(), make_node("b").gpus(2).build()],
        [make_job("g").gpus(2).replicas(2).runs_for(4), make_job("w").gpus(1).at(1).runs_for(1)],
    )
    binds = [line for line in log_lines(sim) if " bind g-" in line]
    assert len(binds) == 2
    assert all(line.startswith("0.000 ") for line in binds)
    assert sim.records[JobId("w")].start == 4.0  # waits for both gang members to finish
    assert len(sim.state.allocations) == 0


def test_sequential_arrivals_ignore_submit_times() -> None:
    sim = simulate(
        one_gpu_node(),
        [make_job(f"j{i}").share(100).at(100.0 - i) for i in range(3)],
        sequential_arrivals=True,
    )
    assert [sim.records[JobId(f"j{i}")].arrival for i in range(3)] == [0.0, 1.0, 2.0]
    assert [sim.records[JobId(f"j{i}")].start for i in range(3)] == [0.0, 1.0, 2.0]


def test_observers_see_the_state_after_each_distinct_event_time() -> None:
    seen: list[tuple[float, int]] = []

    def observe(sim: Simulation) -> None:
        seen.append((sim.now, int(sim.state.gpu_idle.sum())))

    jobs = [make_job("a").gpus(1).at(0).runs_for(2), make_job("b").share(500).at(0).runs_for(1)]
    built = [j.build() for j in jobs]
    sim = Simulation(
        [make_node("n").gpus(2).build()],
        built,
        policy_profile("fgd", [t.shape for j in built for t in j.tasks]),
        observers=[observe],
    )
    sim.run()
    # t=0 both placed (idle 2000 - 1500); t=1 b done (1000); t=2 a done (2000).
    assert seen == [(0.0, 500), (1.0, 1000), (2.0, 2000)]


def test_arrived_and_placed_milli_track_the_load() -> None:
    sim = simulate(
        one_gpu_node(),
        [make_job("a").share(600), make_job("b").share(600), make_job("c").cpu(1)],
        drop_unplaced=True,
    )
    assert sim.arrived_milli == 1200
    assert sim.placed_milli == 600
    assert sim.records[JobId("c")].start == 0.0


def test_duplicate_job_ids_are_an_invariant_error() -> None:
    job = make_job("same").build()
    with pytest.raises(InvariantError, match="duplicate job id 'same'"):
        Simulation(one_gpu_node(), [job, job], policy_profile("fgd"))


def test_event_log_is_empty_unless_recorded() -> None:
    built = [make_job("a").gpus(1).build()]
    sim = Simulation(one_gpu_node(), built, policy_profile("fgd")).run()
    assert sim.event_log() == ""
    assert sim.records[JobId("a")].start == 0.0


# -- reservations across cycles ----------------------------------------------------------------


def _held_node_run() -> tuple[Simulation, list[dict[JobId, float]], dict[JobId, float | None]]:
    """Nodes a, b (8 GPUs). At 0: r1 (4 GPUs, lands on a) and r2 (8 GPUs, on b), both running
    far past the default estimate (1 h). At 5000 both have overrun: each is expected to run as
    long again (end 10000). big (8 GPUs) arrives at 5000: reservation on a, from 10000.
    guest (4 GPUs, expected to end 8600) fits only on a: admitted, deadline 10000."""
    nodes = [make_node(n).gpus(8).cpu(64).mem_gib(512).build() for n in ("a", "b")]
    jobs = [
        make_job("r1").gpus(4).cpu(4).mem_gib(8).runs_for(20_000).at(0),
        make_job("r2").gpus(8).cpu(4).mem_gib(8).runs_for(100_000).at(0),
        make_job("big").gpus(8).cpu(4).mem_gib(8).runs_for(100).at(5000),
        make_job("guest").gpus(4).cpu(4).mem_gib(8).runs_for(100).at(5000),
    ]
    built = [j.build() for j in jobs]
    profile = policy_profile("gpusched", [t.shape for j in built for t in j.tasks])
    sim = Simulation(nodes, built, profile, options=SimOptions(record_events=True))
    held: list[dict[JobId, float]] = []
    deadlines: dict[JobId, float | None] = {}

    def watch(s: Simulation) -> None:
        held.append(dict(s.reserved))
        for job_id, run in s.running.items():
            deadlines.setdefault(job_id, run.deadline)

    sim.observers.append(watch)
    sim.run()
    return sim, held, deadlines


def test_a_guest_on_held_nodes_runs_with_the_reservations_start_as_deadline() -> None:
    _, _, deadlines = _held_node_run()
    assert deadlines[JobId("guest")] == pytest.approx(10_000)
    assert deadlines[JobId("r1")] is None
    assert deadlines[JobId("big")] is None


def test_the_reservation_holder_and_since_are_passed_to_the_next_cycles() -> None:
    sim, held, _ = _held_node_run()
    with_big = [h for h in held if JobId("big") in h]
    assert with_big, "big never held a reservation"
    assert {h[JobId("big")] for h in with_big} == {5000.0}  # since its first reservation
    assert JobId("big") not in held[-1]  # it started: no longer held
    assert sim.records[JobId("big")].first_start is not None


def test_pending_time_is_charged_to_the_cause_that_held_it() -> None:
    # b arrives at 1 and waits for nodes until a ends at 5; c waits for b (from 4) until 8.
    sim = simulate(
        [make_node("n").gpus(2).build()],
        [
            make_job("a").gpus(2).at(0).runs_for(5),
            make_job("b").gpus(2).at(1).runs_for(3),
            make_job("c").gpus(1).at(4).runs_for(1),
        ],
    )
    b, c = sim.records[JobId("b")], sim.records[JobId("c")]
    assert (b.wait, b.pending_by_cause) == (4.0, {Cause.NODES: 4.0})
    assert (c.wait, c.pending_by_cause) == (4.0, {Cause.NODES: 4.0})
    assert c.status is not None
    assert c.status.ok


def test_summary_reports_the_largest_jobs_pending_hours_by_cause() -> None:
    # big (4 GPUs, the largest of the 3 jobs) waits 2 h for small's node, then runs.
    jobs = [
        make_job("small").gpus(1).at(0).runs_for(7200).build(),
        make_job("big").gpus(4).at(0).runs_for(60).build(),
        make_job("other").gpus(1).at(7200).runs_for(60).build(),
    ]
    profile = policy_profile("fgd", [t.shape for j in jobs for t in j.tasks])
    sim = Simulation([make_node("n").gpus(4).build()], jobs, profile)
    metrics = RunMetrics(sim, TargetWorkload.from_shapes([t.shape for j in jobs for t in j.tasks]))
    sim.observers.append(metrics)
    sim.run()
    summary = summarise(sim, metrics)
    assert summary["max_wait_s_top1pct_largest"] == 7200.0
    assert summary["pending_h_top1pct_largest_by_cause"] == {"nodes": 2.0}


def test_the_largest_jobs_wait_is_also_reported_with_every_job_of_the_cut_off_size() -> None:
    # 200 jobs: the largest 1% is 2 jobs. Three 4-GPU jobs tie for it: the first two to arrive
    # start at once and run 2 h, late (arriving last) waits for a node. The 1% counts early and
    # mid only (wait 0); the tie-inclusive figure counts late too.
    jobs = [make_job("early").gpus(4).at(0).runs_for(7200).build()]
    jobs += [make_job("mid").gpus(4).at(1).runs_for(7200).build()]
    jobs += [make_job(f"s{i:03d}").gpus(1).at(2 + i).runs_for(1).build() for i in range(196)]
    jobs += [make_job("late").gpus(4).at(300).runs_for(60).build()]
    profile = policy_profile("fgd", [t.shape for j in jobs for t in j.tasks])
    nodes = [make_node("a").gpus(4).build(), make_node("b").gpus(4).build()]
    sim = Simulation(nodes, jobs, profile)
    metrics = RunMetrics(sim, TargetWorkload.from_shapes([t.shape for j in jobs for t in j.tasks]))
    sim.observers.append(metrics)
    sim.run()
    summary = summarise(sim, metrics)
    late = sim.records[JobId("late")]
    assert late.wait is not None
    assert late.wait > 0
    assert summary["max_wait_s_top1pct_largest"] == 0.0
    assert summary["max_wait_s_top1pct_largest_ties"] == round(late.wait, 3)
    assert summary["jobs_top1pct_largest_ties"] == 3


def test_jobs_behind_a_fifo_head_wait_their_turn() -> None:
    # fifo-gang: big (2 GPUs) waits for a's node; small (1 GPU) would fit but waits behind it
    # until big starts at 10, then for big's GPUs until 11.
    sim = simulate(
        [make_node("n").gpus(2).build()],
        [
            make_job("a").gpus(1).at(0).runs_for(10),
            make_job("big").gpus(2).at(1).runs_for(1),
            make_job("small").gpus(1).at(2).runs_for(1),
        ],
        policy="fifo-gang",
    )
    big, small = sim.records[JobId("big")], sim.records[JobId("small")]
    assert big.pending_by_cause == {Cause.NODES: 9.0}
    assert small.pending_by_cause == {Cause.ORDER: 8.0, Cause.NODES: 1.0}


# -- requeue after eviction ----------------------------------------------------------------------


def _evicted_behind_waiter(*, requeue_at_eviction: bool) -> Simulation:
    """One 8-GPU node. long (priority 0) runs from 0; waiter (priority 0) arrives at 100 and
    waits for the node; urgent (priority 10) arrives at 1000 and preempts long. When urgent
    ends at 1500, long and waiter both want the node, and the queue order decides (gpusched
    without reservations: with one, waiter would keep the node it has held since 100)."""
    jobs = [
        make_job("long").gpus(8).at(0).runs_for(10_000).build(),
        make_job("waiter").gpus(8).at(100).runs_for(100).build(),
        make_job("urgent").gpus(8).priority(10).at(1000).runs_for(500).build(),
    ]
    spec = without_reservation(policy_spec("gpusched"))
    profile = build_profile(
        spec, PluginContext(workload_hint=[t.shape for j in jobs for t in j.tasks])
    )
    opts = SimOptions(record_events=True, requeue_at_eviction=requeue_at_eviction)
    return Simulation([make_node("n").gpus(8).build()], jobs, profile, options=opts).run()


def test_by_default_an_evicted_job_queues_behind_jobs_that_waited_before_its_eviction() -> None:
    assert SimOptions().requeue_at_eviction is True
    sim = _evicted_behind_waiter(requeue_at_eviction=True)
    long, waiter = sim.records[JobId("long")], sim.records[JobId("waiter")]
    assert "1000.000 evict long for urgent" in log_lines(sim)
    assert waiter.first_start == 1500.0  # it waited since 100; long rejoined at 1000
    assert long.start == 1600.0
    assert long.evictions == 1
    assert long.arrival == 0.0  # its wait counts from its arrival
    assert long.first_start == 0.0
    assert long.job.submit_time == 0.0  # the record keeps the job as submitted


def test_keeping_its_place_an_evicted_job_goes_ahead_of_jobs_that_waited() -> None:
    sim = _evicted_behind_waiter(requeue_at_eviction=False)
    long, waiter = sim.records[JobId("long")], sim.records[JobId("waiter")]
    assert long.start == 1500.0
    assert waiter.first_start == 11_500.0


def _aging_after_eviction(starve_after_s: float) -> Simulation:
    """One 8-GPU node. long (priority 0) runs from 0; urgent (priority 10) arrives at 1000 and
    preempts it; late (priority 5) arrives at 1200. When urgent ends at 1500, long and late
    both want the node: the priority order puts late first, unless long has aged (pending
    over ``starve_after_s``; gpusched without reservations, which would keep the node for
    long from 1000)."""
    jobs = [
        make_job("long").gpus(8).at(0).runs_for(10_000).build(),
        make_job("urgent").gpus(8).priority(10).at(1000).runs_for(500).build(),
        make_job("late").gpus(8).priority(5).at(1200).runs_for(100).build(),
    ]
    spec = without_reservation(policy_spec("gpusched"))
    spec.action_args["backfill"]["starve_after_s"] = starve_after_s
    profile = build_profile(
        spec, PluginContext(workload_hint=[t.shape for j in jobs for t in j.tasks])
    )
    opts = SimOptions(record_events=True)
    return Simulation([make_node("n").gpus(8).build()], jobs, profile, options=opts).run()


def test_an_evicted_job_ages_from_its_first_submission() -> None:
    # At 1500 long has waited 1,500 s since it was submitted, 500 s since it was requeued.
    aged = log_lines(_aging_after_eviction(starve_after_s=1000))
    assert "1000.000 evict long for urgent" in aged
    assert [line for line in aged if line.startswith("1500.000 bind")] == [
        "1500.000 bind long n[0, 1, 2, 3, 4, 5, 6, 7]"
    ]
    # With aging past 1,500 s it has not aged yet, and the priority order decides.
    young = log_lines(_aging_after_eviction(starve_after_s=2000))
    assert [line for line in young if line.startswith("1500.000 bind")] == [
        "1500.000 bind late n[0, 1, 2, 3, 4, 5, 6, 7]"
    ]


def test_the_gang_bench_passes_where_an_evicted_job_rejoins_to_every_run() -> None:
    # The jobs of _evicted_behind_waiter: only waiter waits, 1,400 s when long rejoins the
    # queue behind it, 11,400 s when long keeps its place.
    jobs = [
        make_job("long").gpus(8).at(0).runs_for(10_000).build(),
        make_job("waiter").gpus(8).at(100).runs_for(100).build(),
        make_job("urgent").gpus(8).priority(10).at(1000).runs_for(500).build(),
    ]
    nodes = [make_node("n").gpus(8).build()]
    spec = without_reservation(policy_spec("gpusched"))
    waits = {
        requeue: run_gang_bench(
            nodes, jobs, None, [spec], 0, workers=1,
            options=SimOptions(requeue_at_eviction=requeue),
        )[0]["avg_wait_s"]
        for requeue in (True, False)
    }  # fmt: skip
    assert 3 * waits[True] == pytest.approx(1_400)
    assert 3 * waits[False] == pytest.approx(11_400)
