"""Why a job was or was not placed: a code, the cause for programs, and human-readable
reasons with numbers for people."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Cause", "Code", "Status"]


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


class Cause(StrEnum):
    """What keeps a job from being placed, for programs (metrics, scripts); the reasons say
    the same for people, with numbers.

    * ``NODES``: no node (or no set of nodes, for a gang) has room for it now, or none could
      ever host it (``Unresolvable``);
    * ``QUEUE_LIMIT``: its queue, or one above it, would go over its limit;
    * ``BORROWING``: it needs more beyond its queue's guarantee than can be borrowed now;
    * ``QUOTA_HELD``: the quota it would use is held for another job (a quota hold);
    * ``DOMAIN``: it waits for one network domain to have room for the whole gang;
    * ``ORDER``: not tried, it waits its turn (behind the head of a FIFO queue);
    * ``OTHER``: anything else (e.g. a status read back from a live cluster).
    """

    NODES = "nodes"
    QUEUE_LIMIT = "queue-limit"
    BORROWING = "borrowing"
    QUOTA_HELD = "quota-held"
    DOMAIN = "domain"
    ORDER = "order"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Status:
    """A placement outcome; ``reasons`` carry the numbers a user needs to act, ``cause`` the
    kind of obstacle (``None`` on success)."""

    code: Code
    reasons: tuple[str, ...] = ()
    cause: Cause | None = None

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
        return cls(Code.UNSCHEDULABLE, (reason,), Cause.ORDER)


_SUCCESS = Status(Code.SUCCESS)
