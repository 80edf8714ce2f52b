"""The simulator's event heap: ordered by ``(time, priority, seq)``, so ties break the same way
every run.

At equal times completions (priority 0) come before arrivals (priority 1): a job finishing at
``t`` frees its resources for jobs arriving at ``t``. ``seq`` is the insertion order.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import NamedTuple

from gpusched.model import JobId

__all__ = ["Event", "EventHeap", "EventKind"]


class EventKind(IntEnum):
    """Event kinds; the value is the tie-break priority at equal times."""

    COMPLETION = 0
    ARRIVAL = 1


class Event(NamedTuple):
    """An event; tuples compare field by field, which gives the ``(time, kind, seq)`` order."""

    time: float
    kind: EventKind
    seq: int
    job: JobId
    tag: int = 0


class EventHeap:
    """A min-heap of events with a deterministic insertion counter."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0

    def push(self, time: float, kind: EventKind, job: JobId, tag: int = 0) -> None:
        """Add an event; ``tag`` is carried along (a completion's run generation, so the
        completion of a run that was evicted is recognised as stale)."""
        heapq.heappush(self._heap, Event(time, kind, self._seq, job, tag))
        self._seq += 1

    def pop(self) -> Event:
        return heapq.heappop(self._heap)

    def peek_time(self) -> float:
        return self._heap[0].time

    def __len__(self) -> int:
        return len(self._heap)
