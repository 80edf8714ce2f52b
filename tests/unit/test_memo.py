"""The cycle-to-cycle memo (:mod:`gpusched.framework.memo`) saves work and changes no plan.

On a small copy of the ``bench cycle`` setup (a busy cluster with queues, high-priority jobs
waiting, so every part of the cycle runs: backfill, reservation, reclaim, preemption), the
simulator reaches its steady state twice, with and without the memo, and the next cycle's plan
must be the same. The memo is then checked to hold what it promises: one charge per running job,
and nothing for jobs that are gone.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpusched.framework import PluginContext
from gpusched.scheduler import build_profile, policy_spec, schedule
from gpusched.sim import engine
from gpusched.sim.cycle_bench import CycleSetup, build_cycle_setup, steady_snapshot


@pytest.fixture(scope="module")
def setup() -> CycleSetup:
    return build_cycle_setup(160, 400)


def test_steady_cycle_plans_agree_with_and_without_the_memo(
    setup: CycleSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    shapes = [t.shape for j in setup.snapshot.pending for t in j.tasks]
    profile = build_profile(policy_spec("gpusched"), PluginContext(workload_hint=shapes, seed=1))
    with_memo = steady_snapshot(setup, profile)
    assert with_memo.memo is not None
    assert with_memo.memo.charges
    plain = engine.Simulation.snapshot
    monkeypatch.setattr(
        engine.Simulation, "snapshot", lambda self: dataclasses.replace(plain(self), memo=None)
    )
    without = steady_snapshot(setup, profile)
    assert without.memo is None
    first, second = schedule(with_memo, profile), schedule(without, profile)
    assert first.evictions, "the setup must exercise preemption"
    assert first.binds == second.binds
    assert first.evictions == second.evictions
    assert first.pending == second.pending
    assert first.estimated_start == second.estimated_start
    assert first.reservations == second.reservations
    # The same snapshot again, now with the memo this cycle left: the same plan.
    again = schedule(with_memo, profile)
    assert again.binds == first.binds
    assert again.evictions == first.evictions
    # One charge per running job of the snapshot, kept for the very same records.
    memo = with_memo.memo
    assert memo is not None
    assert set(memo.charges) == set(with_memo.running)
    assert all(memo.charges[j][0] is r for j, r in with_memo.running.items())
