"""gpusched: a GPU-aware batch scheduler with a trace-driven simulator running the same core.

The public API is small: build a cluster and jobs from :mod:`gpusched.model`, pick a profile
(:func:`policy_spec` or a YAML file), and call :func:`schedule` for one cycle or
:class:`Simulation` for a whole run.
"""

from gpusched.errors import ConfigError, GpuschedError, InputError, InvariantError, TraceError
from gpusched.framework import Bind, ClusterState, Code, Plan, ProfileSpec, Snapshot, Status
from gpusched.model import Gpu, Job, JobKind, Node, Task, TaskShape
from gpusched.scheduler import POLICIES, build_profile, policy_spec, schedule
from gpusched.sim import SimOptions, Simulation, run_openb

__version__ = "0.1.0"

__all__ = [
    "POLICIES",
    "Bind",
    "ClusterState",
    "Code",
    "ConfigError",
    "Gpu",
    "GpuschedError",
    "InputError",
    "InvariantError",
    "Job",
    "JobKind",
    "Node",
    "Plan",
    "ProfileSpec",
    "SimOptions",
    "Simulation",
    "Snapshot",
    "Status",
    "Task",
    "TaskShape",
    "TraceError",
    "__version__",
    "build_profile",
    "policy_spec",
    "run_openb",
    "schedule",
]
