"""``schedule(snapshot, profile) -> Plan``: the one entry point of the scheduling core.

Pure: reads the snapshot, never changes it, reads no clock, touches no network. The cycle::

    Snapshot --copy--> Session(working state)
        for action in profile.actions:      allocate (later: backfill, reclaim, preempt, ...)
            action.execute(session)          -> binds and statuses on session.plan
    MIG binds get their instances; reconfigured MIG GPUs their layouts (framework.mig)
    return session.plan

Randomness comes only from ``snapshot.seed``.

The cyclic garbage collector is paused for the cycle (:func:`collector_paused`). A cycle
allocates hundreds of thousands of short-lived objects, which count towards the collector's
thresholds, while a driver holds hundreds of thousands of long-lived ones (the snapshot's jobs,
the simulator's records, the live caches); every full collection the cycle triggers walks all
of them: about 0.35-0.5 s of a 5,000-node cold-start cycle (docs/benchmarks.md, section 5).
What a cycle allocates is freed by reference counting as it goes; the few reference cycles it
leaves are collected by the next collection after it, outside the cycle.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from contextlib import contextmanager

from gpusched.framework import CycleContext, Plan, Profile, Session, Snapshot
from gpusched.framework.mig import record_mig

__all__ = ["collector_paused", "schedule"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the ``with`` block and restore it after
    (nested use, or a collector the caller disabled, is left as it was)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def schedule(snapshot: Snapshot, profile: Profile) -> Plan:
    """Run one scheduling cycle and return what to do; the snapshot is left untouched."""
    with collector_paused():
        ctx = CycleContext(now=snapshot.now, rng=random.Random(snapshot.seed))
        session = Session(snapshot, profile, ctx)
        for action in profile.actions:
            action.execute(session)
        if session.state.mig is not None:
            record_mig(session.plan, snapshot.state, session.state)
        plan = session.plan
        # Freed here, by reference counts, its objects never reach the collector: resumed
        # with the session alive, the collector's first pass scans all of them (~18 ms of a
        # 5,000-node cycle) only to find them still in use.
        del session
    return plan
