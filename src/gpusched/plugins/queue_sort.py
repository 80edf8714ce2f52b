"""Queue order plugins: in which order an action tries pending jobs.

* ``fifo``: by queue time (stable).
* ``priority``: higher priority first, then by queue time.
* ``fair-share``: higher priority first; among equal priority, the job of the queue with the
  lowest weighted dominant share first (current plus decayed usage, see
  :mod:`gpusched.framework.quota`), then by queue time::

      key(j) = (-priority_j, share(queue_j), queued_j)

  Without queues configured it is ``priority``.

A job's queue time (:attr:`~gpusched.model.Job.queue_time`) is its submission, or its last
eviction if it was evicted: an evicted job queues behind the jobs that were waiting when it
was evicted, rather than ahead of all of them by its original submission.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpusched.framework import Session
from gpusched.model import Job, QueueName

__all__ = ["FairShare", "Fifo", "PriorityOrder"]


class Fifo:
    """First come, first served (see module docstring)."""

    name = "fifo"

    def order(self, session: Session, jobs: Sequence[Job]) -> list[Job]:
        return sorted(jobs, key=lambda j: j.queue_time)


class PriorityOrder:
    """Priority, then age (see module docstring)."""

    name = "priority"

    def order(self, session: Session, jobs: Sequence[Job]) -> list[Job]:
        return sorted(jobs, key=lambda j: (-j.priority, j.queue_time))


class FairShare:
    """Priority, then the queue furthest below its fair share (see module docstring)."""

    name = "fair-share"

    def __init__(self) -> None:
        # The last order made: the jobs, the shares it was sorted by, the order. The same
        # jobs (the same sequence object) with the same shares sort the same way: the actions
        # of a cycle that change no usage in between (reclaim then preempt, when reclaim
        # evicts nothing) share one sort.
        self._last: tuple[Sequence[Job], dict[QueueName, float], tuple[Job, ...]] | None = None

    def order(self, session: Session, jobs: Sequence[Job]) -> list[Job]:
        quota = session.quota
        if quota is None:
            return sorted(jobs, key=lambda j: (-j.priority, j.queue_time))
        shares = {q: quota.share(q) for q in {j.queue for j in jobs}}
        last = self._last
        if last is not None and last[0] is jobs and last[1] == shares:
            return list(last[2])
        out = sorted(jobs, key=lambda j: (-j.priority, shares[j.queue], j.queue_time))
        self._last = (jobs, shares, tuple(out))
        return out
