"""Why a job was or was not placed: a code plus human-readable reasons with numbers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Code", "Status"]


class Code(StrEnum):
    """Outcome of trying to place a job.

    * ``SUCCESS``: placed.
    * ``UNSCHEDULABLE``: does not fit now; may fit once resources free up (retried).
    * ``UNRESOLVABLE``: cannot fit even on an empty cluster (never retried; the user must change
      the request), the analogue of kube-scheduler's ``UnschedulableAndUnresolvable``.
    """

    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "Unresolvable"


@dataclass(frozen=True, slots=True)
class Status:
    """A placement outcome; ``reasons`` carry the numbers a user needs to act."""

    code: Code
    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def message(self) -> str:
        return "; ".join(self.reasons) if self.reasons else self.code.value

    @classmethod
    def success(cls) -> Status:
        return _SUCCESS

    @classmethod
    def waiting(cls, reason: str) -> Status:
        """Not tried this cycle (e.g. behind the head of a FIFO queue)."""
        return cls(Code.UNSCHEDULABLE, (reason,))


_SUCCESS = Status(Code.SUCCESS)
