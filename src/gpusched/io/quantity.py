"""Kubernetes-style quantities: ``"80Gi"`` of memory, ``"500m"`` of CPU.

* memory -> MiB: plain numbers are MiB; suffixes ``Ki Mi Gi Ti`` (powers of 1024) and
  ``K M G T`` (powers of 1000) are accepted.
* CPU -> millicores: plain numbers are cores (``8`` or ``0.5``); ``"500m"`` is millicores.
"""

from __future__ import annotations

import re

__all__ = ["Quantity", "cpu_to_milli", "memory_to_mib"]

Quantity = int | float | str
"""A quantity as a file gives it: a number, or text such as ``"80Gi"`` or ``"500m"``."""

_MEM = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(Ki|Mi|Gi|Ti|K|M|G|T)?\s*$")
_BYTES = {
    None: 2**20,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def memory_to_mib(value: int | float | str) -> int:
    """``value`` as whole MiB (rounded up); ``ValueError`` naming the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("expected a memory quantity such as 512, '80Gi' or '512Mi'")
    if isinstance(value, int | float):
        mib = float(value)
    else:
        m = _MEM.match(value)
        if not m:
            raise ValueError(
                f"{value!r} is not a memory quantity; expected e.g. 512 (MiB), '80Gi', '512Mi'"
            )
        mib = float(m.group(1)) * _BYTES[m.group(2)] / 2**20
    if mib < 0:
        raise ValueError(f"memory must be >= 0, got {value!r}")
    return int(-(-mib // 1))


def cpu_to_milli(value: int | float | str) -> int:
    """``value`` as millicores; ``ValueError`` naming the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("expected a CPU quantity such as 8, 0.5 or '500m'")
    if isinstance(value, int | float):
        milli = float(value) * 1000
    else:
        text = value.strip()
        try:
            milli = float(text[:-1]) if text.endswith("m") else float(text) * 1000
        except ValueError:
            raise ValueError(
                f"{value!r} is not a CPU quantity; expected e.g. 8 (cores), 0.5 or '500m'"
            ) from None
    if milli < 0:
        raise ValueError(f"CPU must be >= 0, got {value!r}")
    return round(milli)
