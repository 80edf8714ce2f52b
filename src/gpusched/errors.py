"""Exceptions raised by gpusched, and only for bugs and bad input.

"A task does not fit" is never an exception: it is a :class:`~gpusched.framework.status.Status`
carried in the plan. Exceptions are for input a user must fix and for broken invariants::

    GpuschedError                 base of everything gpusched raises on purpose
    ├── InputError                a file, flag or object a user gave is wrong (CLI exit code 2)
    │   ├── TraceError            a workload or cluster file: names file, line and field
    │   └── ConfigError           a profile, policy name or option: names the field
    └── InvariantError            gpusched broke its own rule (a bug: please report it)

Every :class:`InputError` message says what was wrong, where, and what is expected, so the
CLI can print it as is, without a traceback.
"""

from __future__ import annotations

__all__ = ["ConfigError", "GpuschedError", "InputError", "InvariantError", "TraceError"]


class GpuschedError(Exception):
    """Base class of all errors gpusched raises deliberately."""


class InputError(GpuschedError):
    """Something the user supplied is wrong; the message says where and how to fix it."""


class TraceError(InputError):
    """A malformed workload or cluster file.

    The message reads ``FILE:LINE: field 'F': got 'V'; expected E``.
    """

    def __init__(
        self,
        path: str,
        line: int | None,
        field: str | None,
        problem: str,
    ) -> None:
        where = path if line is None else f"{path}:{line}"
        what = f"field '{field}': {problem}" if field else problem
        super().__init__(f"{where}: {what}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


class ConfigError(InputError):
    """A bad profile, policy name or option; the message names the field and the fix."""


class InvariantError(GpuschedError):
    """gpusched violated one of its own invariants. This is a bug."""
