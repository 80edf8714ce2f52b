"""``schedule(snapshot, profile) -> Plan``: the one entry point of the scheduling core.

Pure: reads the snapshot, never changes it, reads no clock, touches no network. The cycle::

    Snapshot --copy--> Session(working state)
        for action in profile.actions:      allocate (later: backfill, reclaim, preempt, ...)
            action.execute(session)          -> binds and statuses on session.plan
    MIG binds get their instances; reconfigured MIG GPUs their layouts (framework.mig)
    return session.plan

Randomness comes only from ``snapshot.seed``.
"""

from __future__ import annotations

import random

from gpusched.framework import CycleContext, Plan, Profile, Session, Snapshot
from gpusched.framework.mig import record_mig

__all__ = ["schedule"]


def schedule(snapshot: Snapshot, profile: Profile) -> Plan:
    """Run one scheduling cycle and return what to do; the snapshot is left untouched."""
    ctx = CycleContext(now=snapshot.now, rng=random.Random(snapshot.seed))
    session = Session(snapshot, profile, ctx)
    for action in profile.actions:
        action.execute(session)
    if session.state.mig is not None:
        record_mig(session.plan, snapshot.state, session.state)
    return session.plan
