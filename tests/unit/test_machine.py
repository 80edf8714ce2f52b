"""The machine a benchmark reports (``gpusched.sim.machine``)."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from gpusched.sim.machine import machine_info, machine_line

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2000.000

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
"""


def test_cpu_model_is_the_first_model_name_of_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO, encoding="utf-8")
    info = machine_info(cpuinfo)
    assert info["cpu"] == "Intel(R) Xeon(R) Processor"
    assert info["python"] == platform.python_version()
    assert info["numpy"] == np.__version__
    assert isinstance(info["cores"], int)
    assert info["cores"] >= 1


@pytest.mark.parametrize(
    "content",
    [pytest.param(None, id="no-cpuinfo"), pytest.param("processor\t: 0\n", id="no-model-name")],
)
def test_cpu_model_falls_back_to_the_platform(tmp_path: Path, content: str | None) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    if content is not None:
        cpuinfo.write_text(content, encoding="utf-8")
    expected = platform.processor() or platform.machine() or "unknown"
    assert machine_info(cpuinfo)["cpu"] == expected


def test_machine_line_names_every_field() -> None:
    info: dict[str, str | int] = {
        "cpu": "AMD EPYC",
        "cores": 2,
        "python": "3.11.7",
        "numpy": "2.4.6",
    }
    assert machine_line(info) == "machine: AMD EPYC, 2 cores, Python 3.11.7, NumPy 2.4.6"
