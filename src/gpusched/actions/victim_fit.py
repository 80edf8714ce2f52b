"""What every victim search shares: how disruptive a set is, whether a job fits, and the rule
a search asks before taking each victim.

A victim set is compared by :func:`set_cost` -- fewest whole jobs evicted, then the lowest
highest priority among them, then fewest GPUs, then fewest evictions -- so a search returns
the least disruptive set it finds. :func:`fits` is the profile's full placement of a job's
unplaced gang on a rolled-back statement: the check every search ends with.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from gpusched.actions.victim_index import Victim
from gpusched.framework import ClusterState, Session, Statement
from gpusched.model import (
    MILLI_PER_GPU,
    Job,
    Task,
)
from gpusched.plugins.filters import gpu_fit_count

Mask = NDArray[np.bool_]

#: The resource-fit filter, skipped where the search itself decides what fits.
FIT = "node-resources-fit"

#: Nodes whose first-fit prefix is cheapest that the node-local search refines exactly.
NODE_LOCAL_CANDIDATES = 8


class VictimRule(Protocol):
    """What an evicting action tells a search about each victim, in the order taken."""

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        """Whether ``victim`` may still be taken once ``taken`` are evicted."""
        ...


__all__ = [
    "FIT",
    "NODE_LOCAL_CANDIDATES",
    "Mask",
    "MostFree",
    "VictimRule",
    "fits",
    "set_cost",
    "share_needed",
]


def fits(session: Session, job: Job) -> bool:
    stmt = Statement(session.state)
    ok = all(
        session.place_task(t, stmt, explain=False).ok
        for t in job.tasks[: job.min_available]
        if t.id not in session.state.allocations
    )
    stmt.rollback()
    return ok


class MostFree:
    """Per GPU share: the most GPUs with that share free on any one node of a state
    (``max_n gpu_fit_count[n]``), kept while the state's clock stands still
    (:attr:`~gpusched.framework.state.VersionClock.now`: then neither it nor a copy has
    changed), so requests asked between two changes pay for it once per share."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[int, tuple[ClusterState, int, int]] = {}

    def __call__(self, state: ClusterState, gpu_milli: int) -> int:
        now = state.clock.now
        kept = self._kept.get(gpu_milli)
        if kept is not None and kept[0] is state and kept[1] == now:
            return kept[2]
        most = int(gpu_fit_count(state, gpu_milli).max(initial=0))
        self._kept[gpu_milli] = (state, now, most)
        return most


def set_cost(victims: list[Victim]) -> tuple[int, int, int, int]:
    """How disruptive a victim set is: whole jobs evicted, their highest priority, GPUs freed,
    number of evictions (compared in that order, smaller is better)."""
    whole = [v for v in victims if v.whole]
    top = max((v.job.priority for v in whole), default=-(2**62))
    return (len(whole), top, sum(v.gpu_milli for v in victims), len(victims))


def share_needed(session: Session, task: Task) -> int:
    """The share a GPU must have free for ``task``."""
    s = task.shape
    return MILLI_PER_GPU if session.profile.gpu_as_integer and s.is_sharing else s.gpu_milli
