"""The timeline's shortcuts give what the plain computations give.

* the reservation search, laying out only the releases it reaches, finds the reservation a
  search over every running job's releases finds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from builders import cycle_context, make_job, make_node, make_state, policy_profile
from gpusched.framework import RunningJob, Session, Snapshot, release_batch
from gpusched.framework.timeline import expected_ends, reserve
from gpusched.model import JobId

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
