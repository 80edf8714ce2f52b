"""Docs generated from code stay current, and the public API does not drift by accident."""

from __future__ import annotations

import subprocess
import sys

import gpusched
from integration.conftest import REPO


def test_generated_docs_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_public_api_is_exactly_what_is_documented() -> None:
    assert sorted(gpusched.__all__) == sorted(
        [
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
    )
    for name in gpusched.__all__:
        assert hasattr(gpusched, name), name


def test_readme_python_example_runs_and_prints_what_it_claims() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    claimed = block.split("# ", 2)[-1].strip()
    result = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == claimed
