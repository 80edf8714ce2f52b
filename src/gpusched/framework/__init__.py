"""The scheduling framework: state arrays, extension points, sessions, plans and profiles."""

from gpusched.framework.allocation import Allocation
from gpusched.framework.extension import (
    Action,
    BoolArray,
    CycleContext,
    FilterPlugin,
    FloatArray,
    GpuPicker,
    PluginContext,
    QueueSortPlugin,
    ScorePlugin,
    VictimOrder,
)
from gpusched.framework.plan import Bind, Eviction, Move, Plan, QuotaHold, Reservation
from gpusched.framework.profile import PluginSpec, Profile, ProfileSpec, TieBreak
from gpusched.framework.session import Session
from gpusched.framework.snapshot import DEFAULT_RUNTIME_S, RunningJob, Snapshot, cycle_seed
from gpusched.framework.state import ClusterState, VersionClock
from gpusched.framework.statement import Statement
from gpusched.framework.status import Cause, Code, Status

__all__ = [
    "DEFAULT_RUNTIME_S",
    "Action",
    "Allocation",
    "Bind",
    "BoolArray",
    "Cause",
    "ClusterState",
    "Code",
    "CycleContext",
    "Eviction",
    "FilterPlugin",
    "FloatArray",
    "GpuPicker",
    "Move",
    "Plan",
    "PluginContext",
    "PluginSpec",
    "Profile",
    "ProfileSpec",
    "QueueSortPlugin",
    "QuotaHold",
    "Reservation",
    "RunningJob",
    "ScorePlugin",
    "Session",
    "Snapshot",
    "Statement",
    "Status",
    "TieBreak",
    "VersionClock",
    "VictimOrder",
    "cycle_seed",
]
