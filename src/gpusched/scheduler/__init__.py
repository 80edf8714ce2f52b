"""The scheduler: ``schedule()``, profile building and the built-in policies."""

from gpusched.scheduler.build import build_profile
from gpusched.scheduler.core import schedule
from gpusched.scheduler.policies import (
    BEST_POLICY,
    DEFAULT_COMPARISON,
    LIVE_POLICY,
    POLICIES,
    policy_spec,
)

__all__ = [
    "BEST_POLICY",
    "DEFAULT_COMPARISON",
    "LIVE_POLICY",
    "POLICIES",
    "build_profile",
    "policy_spec",
    "schedule",
]
