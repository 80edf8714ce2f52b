"""The closed set of extension points a scheduling profile is built from.

Each is a :class:`typing.Protocol`; a plugin implements one or more of them. Plugins are
*policies*: they answer a question about one task or one list of jobs. *Actions*
(:class:`Action`) are the verbs that loop over pending work and call the plugins.

Call order for every task an action tries to place::

    FilterPlugin.filter  (all filters, ANDed)  -> mask over nodes
    ScorePlugin.score    (weighted sum)        -> one float per node, higher is better
    select node          (max score; ties by profile.tie_break)
    GpuPicker.pick                             -> which GPUs of that node
    Statement.allocate                         -> tentative, committed per job

Plugins must not mutate the :class:`~gpusched.framework.state.ClusterState` they are given, read
clocks, or keep global state. They may keep caches that are pure functions of their inputs (for
example keyed on node version stamps).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from gpusched.framework.state import ClusterState
from gpusched.model import Job, Task, TaskShape

if TYPE_CHECKING:
    from gpusched.framework.session import Session
    from gpusched.framework.snapshot import RunningJob

__all__ = [
    "Action",
    "BoolArray",
    "CycleContext",
    "FilterPlugin",
    "FloatArray",
    "GpuPicker",
    "PluginContext",
    "QueueSortPlugin",
    "ScorePlugin",
    "VictimOrder",
]

BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CycleContext:
    """What a plugin may know about the current cycle besides the cluster state.

    Attributes:
        now: the cycle's time in seconds (simulated or wall clock, set by the driver).
        rng: the cycle's random source, seeded by the driver; the only randomness allowed.
    """

    now: float
    rng: random.Random


@dataclass(frozen=True, slots=True)
class PluginContext:
    """What a plugin factory may use when a profile is built (once per run).

    Attributes:
        workload_hint: task shapes representative of the workload (e.g. the trace being
            replayed, or recent pods in a live cluster). Fragmentation-aware policies derive
            their target workload from it.
        seed: the run's seed.
    """

    workload_hint: Sequence[TaskShape] = ()
    seed: int = 0


@runtime_checkable
class FilterPlugin(Protocol):
    """Which nodes can host a task right now.

    ``filter`` returns a boolean mask over all nodes (``True`` = feasible). ``explain`` is called
    only for diagnosis, when no node is feasible: it returns a sentence with numbers about the
    nodes this filter rejects (``None`` if it rejects none).
    """

    name: str

    def filter(self, ctx: CycleContext, task: Task, state: ClusterState) -> BoolArray: ...

    def explain(self, ctx: CycleContext, task: Task, state: ClusterState) -> str | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    """How good each feasible node is for a task.

    Returns one float per node (values on infeasible nodes are ignored). Higher is better.
    Built-in scores use the range 0..100 so profile weights compare like for like.
    """

    name: str

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray: ...


@runtime_checkable
class GpuPicker(Protocol):
    """Which GPUs of the chosen node a task gets.

    Called only for a node the filters accepted; returns ``task.shape.num_gpu`` distinct GPU
    indices, each with at least ``task.shape.gpu_milli`` free.
    """

    name: str

    def pick(
        self, ctx: CycleContext, task: Task, state: ClusterState, node: int
    ) -> tuple[int, ...]: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    """The order in which an action considers pending jobs.

    Given the session (for queue usage and the cycle's time) and the pending jobs; returns them
    sorted, most deserving first.
    """

    name: str

    def order(self, session: Session, jobs: Sequence[Job]) -> list[Job]: ...


@runtime_checkable
class VictimOrder(Protocol):
    """Which running jobs to evict first when room must be made.

    ``cost`` returns a sort key; jobs with the smallest key are evicted first. Called only for
    jobs an action already found eligible (lower priority or borrowing, preemptible, past their
    minimum run time, within their disruption budget).
    """

    name: str

    def cost(self, session: Session, run: RunningJob) -> tuple[float, ...]: ...


@runtime_checkable
class Action(Protocol):
    """A verb of the cycle (allocate, backfill, reclaim, preempt, consolidate).

    Actions run in profile order from least to most disruptive; each reads and extends the
    session's plan.
    """

    name: str

    def execute(self, session: Session) -> None: ...
