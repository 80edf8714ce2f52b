"""Starvation guard of ``backfill``: a reservation that has slipped too long is made good by
evicting the work that arrived after its job.

A reservation starts when the jobs on its nodes are expected to end. Most jobs give no
run-time estimate, so those ends are guesses (a learned mean; once overrun, as long again as
the job has run) and the start slips as the jobs overrun them; meanwhile work submitted
*after* the blocked job keeps landing on the nodes it needs. A job that has waited longer
than ``after_s`` since it was queued therefore takes back, when it holds the reservation, the
nodes that later work took::

    victims(j) = { r running : r has a task on the nodes of j's reservation,
                                r.start > j.queue_time            (arrived after j waited)
                                r preemptible, priority(r) <= priority(j),
                                r never evicted before,           (at most once, no churn)
                                r not a job j was evicted for     (no preemption loops)
                                queue(r) = queue(j), or queue(r) keeps borrowing at least
                                what r holds once r and the victims before it are gone }

If ``j`` fits now with ``victims(j)`` gone (one trial placement), those of them on the nodes
it would use are evicted and ``j`` starts. Everything older than ``j``'s queue time is left
alone, so ``j``'s wait is bounded by ``after_s`` plus the time until the jobs that were
already running when it arrived (or that outrank it) make room.
"""

from __future__ import annotations

from gpusched.actions.make_room import evict_newer_and_place, newer_evictable, on_nodes
from gpusched.framework import Reservation, RunningJob, Session
from gpusched.framework.timeline import fits_after
from gpusched.model import GPU, Job, QueueName

__all__ = ["evict_for_starving"]


def evict_for_starving(session: Session, job: Job, res: Reservation) -> bool:
    """Evict ``victims(job)`` (module docstring) on the nodes ``job`` would use and place it;
    ``False`` (nothing evicted) when it would not fit even with all of them gone."""
    victims = _victims(session, job, res)
    if not victims:
        return False
    nodes = fits_after(session, job, [r.job.id for r in victims])
    if nodes is None:
        return False
    return evict_newer_and_place(
        session,
        job,
        victims,
        "starvation guard",
        " and holds the reservation on this job's nodes",
        nodes=nodes,
    )


def _victims(session: Session, job: Job, res: Reservation) -> list[RunningJob]:
    index = session.state.index
    held = {index[name] for name in res.nodes}
    allocations = session.state.allocations
    quota = session.quota
    taken: dict[QueueName, int] = {}
    found: list[RunningJob] = []
    candidates = [r for r in newer_evictable(session, job) if on_nodes(r, held, allocations)]
    for r in candidates:
        q = r.job.queue
        if q != job.queue:
            if quota is None or q not in quota.tree:
                continue
            spent = taken.get(q, 0) + r.job.gpu_milli
            if quota.borrowed(q, GPU) < spent:
                continue
            taken[q] = spent
        found.append(r)
    return found
