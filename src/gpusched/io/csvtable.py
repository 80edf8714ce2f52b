"""Reading CSV tables with errors that name file, line and field.

Every value is parsed through :class:`Row`, whose getters raise
:class:`~gpusched.errors.TraceError` (``FILE:LINE: field 'F': got 'V'; expected ...``) instead of
a bare ``ValueError``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from gpusched.errors import TraceError

__all__ = ["Row", "read_table"]


class Row:
    """One data line of a CSV file, with typed, validated getters."""

    __slots__ = ("line", "path", "values")

    def __init__(self, path: str, line: int, values: dict[str, str]) -> None:
        self.path = path
        self.line = line
        self.values = values

    def error(self, field: str | None, problem: str) -> TraceError:
        return TraceError(self.path, self.line, field, problem)

    def text(self, field: str, default: str | None = None) -> str:
        """The field's text; ``default`` when empty, else an error for a required field."""
        value = (self.values.get(field) or "").strip()
        if not value:
            if default is not None:
                return default
            raise self.error(field, "missing value; expected a non-empty name")
        return value

    def integer(
        self,
        field: str,
        *,
        low: int | None = 0,
        high: int | None = None,
        default: int | None = None,
    ) -> int:
        raw = self.values.get(field)
        if raw is None or raw.strip() == "":
            if default is not None:
                return default
            raise self.error(field, "missing value; expected an integer")
        try:
            value = int(raw)
        except ValueError:
            try:
                as_float = float(raw)
            except ValueError:
                raise self.error(field, f"got {raw!r}; expected an integer") from None
            if not as_float.is_integer():
                raise self.error(field, f"got {raw!r}; expected an integer") from None
            value = int(as_float)
        if low is not None and value < low:
            raise self.error(field, f"got {value}; expected a value >= {low}")
        if high is not None and value > high:
            raise self.error(field, f"got {value}; expected a value <= {high}")
        return value

    def number(self, field: str, *, low: float | None = 0.0, default: float | None = None) -> float:
        raw = self.values.get(field)
        if raw is None or raw.strip() == "":
            if default is not None:
                return default
            raise self.error(field, "missing value; expected a number")
        try:
            value = float(raw)
        except ValueError:
            raise self.error(field, f"got {raw!r}; expected a number") from None
        if not math.isfinite(value):
            raise self.error(field, f"got {raw!r}; expected a finite number")
        if low is not None and value < low:
            raise self.error(field, f"got {value:g}; expected a value >= {low:g}")
        return value


def read_table(path: str | Path, required: Sequence[str]) -> Iterator[Row]:
    """Yield the rows of CSV file ``path``; :class:`TraceError` if it lacks a required column."""
    p = Path(path)
    name = str(p)
    if not p.is_file():
        raise TraceError(name, None, None, "file not found")
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise TraceError(name, 1, None, "empty file; expected a header line") from None
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(
                name,
                1,
                missing[0],
                f"missing column; the header must include {', '.join(required)} "
                f"(found: {', '.join(header)})",
            )
        for values in reader:
            if not values or all(not v.strip() for v in values):
                continue
            line = reader.line_num
            if len(values) != len(header):
                raise TraceError(
                    name,
                    line,
                    None,
                    f"{len(values)} values for {len(header)} columns; expected one per column",
                )
            yield Row(name, line, dict(zip(header, values, strict=True)))
