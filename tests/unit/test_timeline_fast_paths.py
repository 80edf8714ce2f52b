"""The timeline's shortcuts give what the plain computations give.

* expected ends kept across starts and evictions equal a fresh computation;
* the fluid start estimate (running releases read in order beside a heap of the estimated
  jobs' releases) equals one heap of all releases;
* the reservation search, laying out only the releases it reaches, finds the reservation a
  search over every running job's releases finds;
* the release points worked out one at a time are the sorted list of them all.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from builders import cycle_context, make_job, make_node, make_state, policy_profile
from gpusched.framework import RunningJob, Session, Snapshot, release_batch
from gpusched.framework.timeline import (
    Laid,
    _Points,
    estimate_starts,
    expected_ends,
    optimistic_ends,
    reserve,
)
from gpusched.model import Job, JobId

NOW = 10_000.0


def _busy_session(seed: int, *, nodes: int = 10, running: int = 30) -> Session:
    """A session on ``nodes`` 8-GPU nodes holding ``running`` one- or two-GPU jobs, started at
    random times with random estimates (some overrun), and a few pending jobs."""
    rng = random.Random(seed)
    state = make_state(*(make_node(f"n{i}").gpus(8).cpu(64).mem_gib(512) for i in range(nodes)))
    runs: dict[JobId, RunningJob] = {}
    for i in range(running):
        gpus = rng.choice((1, 1, 2))
        job = replace(
            make_job(f"r{i:03d}").gpus(gpus).cpu(1).build(),
            runtime_estimate=rng.choice((None, 600.0, 3600.0, 7200.0)),
        )
        node = next(
            n
            for n in rng.sample(range(nodes), nodes)
            if int((state.gpu_free[n] >= 1000).sum()) >= gpus
        )
        free = [int(g) for g in (state.gpu_free[node] >= 1000).nonzero()[0][:gpus]]
        state.allocate(job.tasks[0], node, tuple(free))
        runs[job.id] = RunningJob(job, start=NOW - rng.choice((100.0, 3000.0, 9000.0)))
    pending = tuple(
        replace(
            make_job(f"p{i:02d}").gpus(rng.choice((1, 2, 4, 8))).cpu(1).build(),
            runtime_estimate=1800.0,
        )
        for i in range(12)
    )
    snap = Snapshot(state, pending, now=NOW, running=runs)
    return Session(snap, policy_profile("gpusched"), cycle_context())


def _fresh_ends(session: Session) -> list[tuple[float, JobId]]:
    """The module docstring's expected ends, from scratch."""
    out = []
    for job_id, run in session.running.items():
        est = session.runtime_estimate(run.job)
        end = run.start + est
        if end <= NOW:
            end = NOW + max(0.1 * est, NOW - run.start)
        out.append((end, job_id))
    return sorted(out)


@pytest.mark.parametrize("seed", range(5))
def test_kept_expected_ends_follow_starts_and_evictions(seed: int) -> None:
    session = _busy_session(seed)
    rng = random.Random(seed)
    assert expected_ends(session) == _fresh_ends(session)
    for step in range(6):
        if step % 2:
            victim = rng.choice(sorted(session.running.items())[:20])[0]
            session.evict(victim, JobId("x"), "test")
        for job in session.snapshot.pending[2 * step : 2 * step + 2]:
            session.place_job(job)
        assert expected_ends(session) == _fresh_ends(session), step
    # an evicted job started again in the same cycle gets a new end
    victim = next(iter(sorted(session.running.items())))[0]
    run = session.running[victim]
    session.evict(victim, JobId("x"), "test")
    expected_ends(session)
    session.running[victim] = RunningJob(run.job, NOW)
    assert expected_ends(session) == _fresh_ends(session)


def _one_heap(session: Session, jobs: list[Job]) -> dict[JobId, float]:
    """The fluid estimate with one heap of every release (the module docstring's loop)."""
    releases = [
        (end, (j := session.running[job_id].job).gpu_milli, j.cpu_milli)
        for end, job_id in expected_ends(session)
    ]
    free_gpu = int(session.state.gpu_idle.sum())
    free_cpu = int(session.state.cpu_free.sum())
    out, t = {}, NOW
    for job in jobs:
        while (free_gpu < job.gpu_milli or free_cpu < job.cpu_milli) and releases:
            t, g, c = heapq.heappop(releases)
            free_gpu += g
            free_cpu += c
        out[job.id] = max(NOW, t)
        free_gpu -= job.gpu_milli
        free_cpu -= job.cpu_milli
        end = max(NOW, t) + session.runtime_estimate(job)
        heapq.heappush(releases, (end, job.gpu_milli, job.cpu_milli))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_fluid_estimate_equals_one_heap_of_all_releases(seed: int) -> None:
    session = _busy_session(seed, running=40)
    rng = random.Random(seed)
    jobs = [
        replace(
            make_job(f"w{i:03d}").gpus(rng.choice((1, 2, 4, 8))).cpu(rng.choice((1, 8))).build(),
            runtime_estimate=rng.choice((600.0, 3600.0, 7200.0)),
        )
        for i in range(60)
    ]
    assert estimate_starts(session, jobs) == _one_heap(session, jobs)


@pytest.mark.parametrize("seed", range(4))
def test_reservation_search_lays_out_only_what_it_reaches(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = make_job("big").gpus(8).replicas(2).build()
    laid_out: list[int] = []
    releases = release_batch.running_releases

    def counted(
        session: Session, ends: Sequence[tuple[float, JobId]]
    ) -> tuple[release_batch.ReleaseBatch, list[int]]:
        laid_out.append(len(ends))
        return releases(session, ends)

    monkeypatch.setattr(release_batch, "running_releases", counted)
    found = []
    for first in (1, 4, 10**9):  # 10**9: every running job's releases at once
        monkeypatch.setattr(release_batch, "FIRST_RELEASES", first)
        laid_out.clear()
        session = _busy_session(seed, running=40)
        found.append(reserve(session, big))
        assert max(laid_out) <= len(expected_ends(session))
        if first == 1:  # the prefix grew as the search went on
            assert len(laid_out) > 2
    assert found[0] is not None
    assert found[0] == found[1] == found[2]


@pytest.mark.parametrize("seed", range(3))
def test_a_grown_release_prefix_is_the_batch_of_the_longer_prefix_at_once(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(release_batch, "FIRST_RELEASES", 1)
    session = _busy_session(seed, running=40)
    ends = expected_ends(session)
    prefix = release_batch.ReleasePrefix(session, ends)
    for releases in (1, 2, 3, 5, 9, 17, 33, len(ends)):
        batch, upto = prefix.upto(releases)
        whole, offsets = release_batch.running_releases(session, ends[: prefix.count])
        assert upto == offsets[releases]
        assert prefix.offsets == offsets
        for name in ("node", "cpu", "mem", "shape", "width", "gpu_offset", "gpu_slot", "gpu_milli"):
            assert np.array_equal(getattr(batch, name), getattr(whole, name)), name


@pytest.mark.parametrize("seed", range(5))
def test_optimistic_ends_differ_only_for_overrun_jobs(seed: int) -> None:
    """Optimistic ends (timeline docstring): ``start + est`` before the estimate runs out,
    ``now + 0.1 * est`` after it; the kept expected ends are not touched."""
    session = _busy_session(seed)
    before = list(expected_ends(session))
    optimistic = {j: e for e, j in optimistic_ends(session)}
    expected = {j: e for e, j in before}
    assert set(optimistic) == set(expected) == set(session.running.as_dict())
    overrun = 0
    for job_id, run in session.running.as_dict().items():
        est = session.runtime_estimate(run.job)
        if run.start + est > NOW:
            assert optimistic[job_id] == expected[job_id] == run.start + est
        else:
            overrun += 1
            assert optimistic[job_id] == NOW + 0.1 * est
            assert expected[job_id] == NOW + max(0.1 * est, NOW - run.start)
    assert overrun  # the setup has overrun jobs
    assert optimistic_ends(session) == sorted((e, j) for j, e in optimistic.items())
    assert expected_ends(session) == before


@pytest.mark.parametrize("seed", range(20))
def test_release_points_worked_out_per_point_equal_the_sorted_list(seed: int) -> None:
    """``_Points.at(k)`` is the ``k``-th of all release points sorted by (time, releases):
    the running jobs' ends and the earlier reservations' ends by ``until``."""
    rng = random.Random(seed)
    times = sorted(rng.choice((100.0, 200.0, 300.0, rng.uniform(0, 1000))) for _ in range(12))
    ends = [(t, JobId(f"r{i:02d}")) for i, t in enumerate(times)]
    until = rng.choice((math.inf, 500.0))
    ahead = [
        Laid(JobId(f"h{j}"), rng.choice((50.0, 200.0, rng.uniform(0, 1200))), ())
        for j in range(rng.randrange(4))
    ]
    want = sorted(
        [(end, i + 1) for i, (end, _) in enumerate(ends)]
        + [(h.end, sum(1 for end, _ in ends if end <= h.end)) for h in ahead if h.end <= until]
    )
    points = _Points(ends, ahead, until)
    assert points.count == len(want)
    assert [points.at(k) for k in range(1, points.count + 1)] == want
