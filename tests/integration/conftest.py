"""Fixtures for end-to-end tests: the CLI runner and the research traces.

Tests that read ``../shared/traces`` use the ``traces_dir`` fixture. Where the traces are
absent they are skipped with a message saying so; under CI (``CI`` set) their absence fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The directory holding the research traces (``openb/`` and others)."""
    path = Path(os.environ.get("GPUSCHED_TRACES", REPO.parent / "shared" / "traces")).resolve()
    if not (path / "openb" / "openb_node_list_gpu_node.csv").is_file():
        message = (
            f"research traces not found at {path}: these tests need ../shared/traces beside "
            "the project (or GPUSCHED_TRACES=DIR)"
        )
        if os.environ.get("CI"):
            pytest.fail(message + "; they are mandatory in CI")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return REPO / "tests" / "data"
