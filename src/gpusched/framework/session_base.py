"""The fields of a :class:`~gpusched.framework.session.Session`, and what its parts call on one
another.

One cycle's session is a single object, but its code is split by responsibility: placing one
task (:mod:`.session`), admitting and charging against the queues (:mod:`.session_quota`),
placing a whole gang and committing it (:mod:`.session_gang`) and saying why a task fits nowhere
(:mod:`.session_diagnosis`). Each part is a mixin over :class:`SessionBase`, so its methods
read and set the session's own slots (``self.state``, not ``self.session.state``): the split
adds no object and no lookup to the scheduler's hot path.

:class:`SessionBase` holds the slots and their types (``Session.__init__`` sets them and says
what each is for) and declares, for the type checker only, the methods one part calls on
another; the class that defines each is named beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpusched.framework.extension import CycleContext
from gpusched.framework.plan import Plan, QuotaHold
from gpusched.framework.profile import Profile
from gpusched.framework.quota import QuotaBook
from gpusched.framework.release_batch import ReleaseRows
from gpusched.framework.snapshot import RunningOverlay, Snapshot
from gpusched.framework.state import ClusterState
from gpusched.framework.status import Status
from gpusched.model import Job, JobId, Resources

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpusched.framework.statement import Statement
    from gpusched.model import QueueName, Task

__all__ = ["SessionBase"]


class SessionBase:
    """The slots of a session, typed (module docstring); the parts of a session derive from it."""

    __slots__ = (
        "_current_job",
        "_end_estimate",
        "_failed",
        "_filters_key",
        "_gang_requests",
        "_kept_requests",
        "_never",
        "_refusals",
        "_requests",
        "blocked_nodes",
        "ctx",
        "default_runtime",
        "end_of",
        "ends_cache",
        "evicted",
        "optimistic_end_of",
        "optimistic_ends_cache",
        "plan",
        "profile",
        "quota",
        "quota_hold",
        "quota_hold_ahead",
        "release_rows",
        "restrict",
        "running",
        "running_epoch",
        "shrunk",
        "snapshot",
        "state",
        "unborrowing",
    )

    snapshot: Snapshot
    profile: Profile
    ctx: CycleContext
    state: ClusterState
    plan: Plan
    _failed: dict[tuple[object, ...], Status]
    _filters_key: str
    running: RunningOverlay
    evicted: set[JobId]
    _refusals: dict[tuple[object, ...], tuple[int, Status | None]]
    _never: dict[tuple[object, ...], Status]
    _requests: dict[JobId, tuple[Job, Resources, tuple[object, ...] | None]]
    _kept_requests: dict[JobId, tuple[Job, Resources, tuple[object, ...] | None]]
    _gang_requests: dict[tuple[object, ...], tuple[Resources, tuple[tuple[str, int], ...]]]
    shrunk: set[JobId]
    quota: QuotaBook | None
    blocked_nodes: dict[int, tuple[float, JobId]]
    _end_estimate: float
    _current_job: JobId | None
    default_runtime: float
    running_epoch: int
    ends_cache: tuple[int, list[tuple[float, JobId]]] | None
    end_of: dict[JobId, float]
    optimistic_ends_cache: tuple[int, list[tuple[float, JobId]]] | None
    optimistic_end_of: dict[JobId, float]
    restrict: np.ndarray | None
    release_rows: ReleaseRows | None
    quota_hold: QuotaHold | None
    quota_hold_ahead: frozenset[JobId]
    unborrowing: frozenset[JobId]

    if TYPE_CHECKING:
        # Session (session.py): placing one task.
        def feasible(self, task: Task, *, skip: str | None = None) -> np.ndarray: ...
        def place_task(self, task: Task, stmt: Statement, *, explain: bool = True) -> Status: ...
        def begin_job(self, job: Job) -> None: ...
        def reservation_class(self, job: Job) -> tuple[int, JobId | None]: ...
        def runtime_estimate(self, job: Job) -> float: ...

        # QuotaAdmission (session_quota.py).
        def charge_of(self, job: Job, tasks: Sequence[Task] | None = None) -> Resources: ...
        def quota_refusal(self, job: Job) -> Status | None: ...
        def _quota_problem(
            self, queue: QueueName, req: Resources, *, borrow: bool = True, lent: bool = True
        ) -> Status | None: ...
