"""Limit guard of ``backfill``: a job its own queue's limit has held back too long takes the
room back from the queue's work that started after it was queued.

A reservation holds nodes, not quota. A big job whose queue sits near its limit waits for the
queue's own running jobs to end, and while it waits (for them, or for nodes once the queue
admits it) the queue's smaller jobs, submitted later, keep taking the limit room it needs:
nothing else holds it, and each of them may run for many hours. A job pending longer than
``after_s`` since it was queued (``Job.queue_time``: its submission, or its last eviction)
that a queue limit refuses therefore evicts, when that lets it start now, work charged under
that limit which started after that::

    victims(j) = { r running : a in path(queue(r)),   (a: the first queue on j's path whose
                                                        limit j's request breaks)
                                r.start > j.queue_time,
                                r preemptible, priority(r) <= priority(j),
                                r never evicted before,        (each job at most once)
                                r not a job j was evicted for  (no preemption loops) }

Taken most recently started first (the least work is lost) until the queues admit ``j``,
``U_a - SUM charge(taken) + r_j <= L_a``; if ``j`` does not fit the nodes with those gone
(one trial placement), the others of ``victims(j)`` on the nodes it would use with all of
them gone are taken too. If ``j`` then fits, they are evicted and ``j`` starts; otherwise
nothing is evicted. One try per limiting queue a cycle, by the first of its held-back jobs
in backfill's order (the oldest, when aging is on), so the room goes to that job first.

So once aged, ``j`` waits only for the work that was already running when it arrived (or
that outranks it) -- for the queue limit, the bound the starvation guard
(:mod:`gpusched.actions.starvation`) gives for nodes.
"""

from __future__ import annotations

from gpusched.actions.make_room import (
    admitting_without,
    evict_newer_and_place,
    newer_evictable,
    on_nodes,
)
from gpusched.framework import RunningJob, Session
from gpusched.framework.timeline import fits_after
from gpusched.model import Job, QueueName

__all__ = ["evict_for_limit", "limit_victims"]


def evict_for_limit(session: Session, job: Job, tried: set[QueueName]) -> bool:
    """Evict ``victims(job)`` (module docstring) as needed to admit and place ``job``, and
    place it; ``False`` (nothing evicted) when the queues or the nodes would still refuse, or
    when a job ahead of it in the order already tried under the same limit this cycle
    (``tried`` collects the limiting queues)."""
    quota = session.quota
    if quota is None or job.queue not in quota.tree:
        return False
    limiting = quota.limiting_queue(job.queue, session.request(job))
    if limiting is None or limiting in tried:
        return False
    tried.add(limiting)
    candidates = limit_victims(session, job, limiting)
    chosen = admitting_without(session, job, candidates)
    if chosen is None:
        return False
    if fits_after(session, job, [r.job.id for r in chosen]) is None:
        nodes = fits_after(session, job, [r.job.id for r in candidates])
        if nodes is None:
            return False
        allocations = session.state.allocations
        taken = {r.job.id for r in chosen}
        chosen += [
            r for r in candidates if r.job.id not in taken and on_nodes(r, nodes, allocations)
        ]
        if fits_after(session, job, [r.job.id for r in chosen]) is None:
            return False
    return evict_newer_and_place(
        session, job, chosen, "limit guard", f" under queue {limiting!r}'s limit"
    )


def limit_victims(session: Session, job: Job, limiting: QueueName) -> list[RunningJob]:
    """``victims(job)`` under ``limiting``'s limit, most recently started first (module
    docstring)."""
    tree = session.quota.tree if session.quota is not None else None
    assert tree is not None
    return [
        r
        for r in newer_evictable(session, job)
        if r.job.queue in tree and limiting in tree.path(r.job.queue)
    ]
