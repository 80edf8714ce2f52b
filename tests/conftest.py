"""Shared test configuration: the hypothesis profile used by the property tests.

Examples are kept few (the suite runs on two cores) and deadlines are off, because a first
example pays for NumPy warm-up and profile building; no test asserts on time.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "gpusched",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "gpusched-thorough", parent=settings.get_profile("gpusched"), max_examples=300
)
settings.load_profile(os.environ.get("GPUSCHED_HYPOTHESIS_PROFILE", "gpusched"))
