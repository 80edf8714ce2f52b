"""Disruptive actions: ``reclaim`` (quota) and ``preempt`` (priority), gang-aware.

Both make room for a pending job ``P`` by evicting running work, chosen by the profile's
victim order (cheapest first), and place ``P`` in the same cycle on the freed capacity, so no
other job can take it (the plan *nominates* ``P`` for those nodes; a live driver binds it once
the victims are gone). A *victim* is either one elastic member of a running job (a pod beyond
its ``min_available``; the job keeps running) or a whole job with every pod (gangs go whole).
Elastic members come first, then whole jobs, each by cost. How the pieces fit:

* :mod:`.evicting` -- the cycle both actions share: which pending jobs try, in queue order;
  evict the set found and place ``P``;
* :mod:`.victim_search` -- the search for a small, cheap victim set (node-local for one pod,
  pod by pod for gangs, :mod:`.victim_local`; global greedy as the fallback);
* :mod:`.victim_index` and :mod:`.victim_room` -- every victim of the cycle, vectorised per
  node, and what each node would have free without a class's eligible victims, kept and
  updated only where something changed.

A job that fits as it is once this cycle's evictions have freed room (more than their
preemptors took) is placed with no eviction, as backfill would place it. Each action skips a
request identical (gang shapes, priority, queue) to one that found no victims since the last
eviction, and may be capped at ``max_attempts`` pending jobs per cycle
(default: no cap; in queue order, so the most urgent first).

A job with ``preempts`` false (Kubernetes' ``preemptionPolicy: Never``) evicts nothing.

Eligible victims, for both actions: preemptible, running at least ``min_runtime_s``, evicted
fewer than ``max_evictions`` times before (a per-job disruption budget; see ``reclaim``'s last
resort below), and not placed in this cycle. Then:

* ``reclaim``: ``P``'s queue is within its guarantee (with ``P``; nodes held for a reservation
  are open to it: a guarantee is a promise, a reservation a plan -- but victims off those
  nodes are looked for first, so the reservation stands when they suffice; failing that, a
  ``P`` that fits as it is on nodes held for another queue's job that would borrow goes there
  with no eviction, then one that fits as it is on nodes held for its own queue's jobs too
  (the search on every node below would put it there after evicting a borrower, and finds
  nothing for a job that needs no eviction), else victims are looked for on every node),
  and victims belong to other
  queues that use more than their guarantee of what ``P`` is owed -- GPUs, or, when ``P`` asks
  for one GPU model, GPUs of that model (guarantees are per model too); a victim is taken only
  while its queue still borrows at least what the victim holds of it. Failing that
  (``overshoot``, on by default), victims are looked for again with a queue's victims taken
  while it still borrows anything: gangs are whole, so a borrower whose borrowed GPUs sit in a
  gang larger than what it borrows could otherwise keep an owner from its guarantee forever
  (whole-node jobs behind fragmented room); its last victim takes it below its guarantee by less
  than that victim's size, and the victim can never reclaim back (with it, its queue would
  borrow). Failing that too (``past_budget``, on by default), borrowers at their disruption
  budget are eligible as well: borrowed capacity is always returnable, and a borrower whose
  every job has used its budget would otherwise hold an owner's guarantee for as long as it
  runs. (The budget still protects them from ``preempt`` and ``defrag``.) After the reclaim
  ``P`` is within guarantee, so it can never be reclaimed back.
* ``preempt``: victims have strictly lower priority than ``P``; across queues only when ``P``
  stays within its queue's guarantee (otherwise ``P`` would be borrowing and could be reclaimed,
  which is how preemption loops start), and only from queues that borrow, no more than they
  borrow, as in ``reclaim`` (a queue's guaranteed work taken by priority would be reclaimed
  back, evicting ``P``).

No loops: a job never evicts a job it was evicted for (``Snapshot.evicted_by``, kept by the
driver). Priority only flows downwards and reclaim only from borrowers to owners, so within a
moment neither could; but quota moves as jobs end and start, and a job reclaimed while its
queue borrowed may find its queue owed, and its evictor's queue borrowing, minutes later.
"""

from __future__ import annotations

import numpy as np

from gpusched.actions.evicting import Evicting, borrowers_mask, kept_mask, place_as_is
from gpusched.actions.victim_fit import Mask
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_room import Rooms
from gpusched.framework import Session
from gpusched.model import Job, JobId

__all__ = ["Preempt", "Reclaim"]


class Reclaim(Evicting):
    """Give a queue back its guaranteed quota by evicting borrowers (module docstring)."""

    name = "reclaim"
    reason = "reclaimed guaranteed quota"
    # A guarantee is a promise; a reservation is a plan remade every cycle: owed quota may use
    # nodes held for the head-of-line job (whose start moves back accordingly).
    ignores_reservations = True

    def __init__(
        self,
        min_runtime_s: float = 300.0,
        max_evictions: int = 3,
        max_attempts: int | None = None,
        overshoot: bool = True,
        past_budget: bool = True,
    ) -> None:
        """``overshoot``: when no victim set within what borrowers borrow lets the job fit, a
        borrower's last victim may take its queue below its guarantee; ``past_budget``: failing
        that too, borrowers at their disruption budget may be taken (module docstring)."""
        super().__init__(min_runtime_s, max_evictions, max_attempts)
        self.overshoot = overshoot
        self._pool_past_budget = past_budget
        self._last_resort = False

    def wants(self, session: Session, job: Job) -> bool:
        quota = session.quota
        return (
            quota is not None
            and job.queue in quota.tree
            and quota.within_guarantee(job.queue, session.request(job))
        )

    def eligible(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        borrowing = self._borrowing(session, job, index)
        if not self._pool_past_budget or self._last_resort:
            return borrowers_mask(index, borrowing)
        return kept_mask(
            index,
            ("borrowers-within-budget", borrowing),
            lambda: borrowers_mask(index, borrowing) & self._within_budget(session, index),
        )

    def _within_budget(self, session: Session, index: VictimIndex) -> Mask:
        """Victims of ``index`` evicted fewer than ``max_evictions`` times before (kept per
        index: the counts are the snapshot's, fixed within a cycle)."""
        counts = session.snapshot.evictions
        return kept_mask(
            index,
            "within-budget",
            lambda: np.fromiter(
                (counts.get(v.job.id, 0) < self.max_evictions for v in index.victims),
                np.bool_,
                len(index.victims),
            ),
        )

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        return self._within_borrowing(session, victim, taken)

    def _make_room(
        self,
        session: Session,
        job: Job,
        index: VictimIndex,
        rooms: Rooms,
    ) -> list[Victim] | None:
        """Victims off the nodes held for a reservation first (the reservation stands);
        failing that, ``job`` goes as it is, with no eviction (an empty list), onto nodes
        held for jobs of other queues that would borrow, then onto those held for its own
        queue's jobs too; else victims are looked for on every node. (The last search may put
        ``job`` on nodes held for its own queue's reservation once it evicts a borrower there,
        so it may go there with no eviction too: a job that fits as it is has no victim set
        to find, and was left waiting within its guarantee while others borrowed.)"""
        held = self._held
        if held:
            session.blocked_nodes = held
            try:
                chosen = super()._make_room(session, job, index, rooms)
            finally:
                session.blocked_nodes = {}
            if chosen is not None:
                return chosen
        for own_queue in (True, False) if held else (True,):
            session.blocked_nodes = _owed_to_others(session, job, held, own_queue=own_queue)
            try:
                if place_as_is(session, job):
                    return []
            finally:
                session.blocked_nodes = {}
        chosen = super()._make_room(session, job, index, rooms)
        # Fallbacks (each may take victims the searches before may not): a queue's victims
        # taken while it borrows anything; then borrowers past their budget.
        for past_budget in (False, True):
            if chosen is not None or not (
                self._pool_past_budget if past_budget else self.overshoot
            ):
                continue
            self._overshooting, self._last_resort = self.overshoot, past_budget
            try:
                chosen = super()._make_room(session, job, index, rooms)
            finally:
                self._overshooting = self._last_resort = False
        return chosen


def _owed_to_others(
    session: Session, job: Job, held: dict[int, tuple[float, JobId]], *, own_queue: bool = True
) -> dict[int, tuple[float, JobId]]:
    """The nodes of ``held`` that stay closed to ``job``, owed quota, when it is placed as it
    is: those held for a job of another queue within that queue's guarantee (another promise)
    and, with ``own_queue``, those held for a job of its own queue (a guarantee outranks
    another queue's plan to borrow first, then its own queue's order)."""
    quota = session.quota
    assert quota is not None
    owners = {j.id: j for j in session.snapshot.pending}
    keep = {}
    for node, (start, owner_id) in held.items():
        owner = owners.get(owner_id)
        if owner is None or owner.queue not in quota.tree:
            closed = True
        elif owner.queue == job.queue:
            closed = own_queue
        else:
            closed = quota.within_guarantee(owner.queue, session.request(owner))
        if closed:
            keep[node] = (start, owner_id)
    return keep


class Preempt(Evicting):
    """Evict lower-priority jobs for a higher-priority one (module docstring)."""

    name = "preempt"
    reason = "preempted by higher priority"

    uses_lowest_priority = True

    def cheap_check(self, session: Session, job: Job, lowest_priority: int) -> bool:
        return job.priority > lowest_priority

    def wants(self, session: Session, job: Job) -> bool:
        return session.quota_refusal(job) is None

    def eligible(self, session: Session, job: Job, index: VictimIndex) -> Mask:
        self._queue = job.queue
        lower = kept_mask(index, ("lower", job.priority), lambda: index.priority < job.priority)
        quota = session.quota
        if quota is None:
            return lower
        own = kept_mask(
            index,
            ("own", job.priority, job.queue),
            lambda: (
                lower
                & np.array([q == job.queue for q in index.queue_names], dtype=np.bool_)[index.queue]
            ),
        )
        if not quota.within_guarantee(job.queue, session.request(job)):
            return own
        # Across queues only from borrowers, and only what they borrow: evicting a queue's
        # guaranteed work would be reclaimed back, evicting the preemptor (a loop).
        borrowing = self._borrowing(session, job, index)
        return kept_mask(
            index,
            ("own-or-borrowers", job.priority, job.queue, borrowing),
            lambda: own | (lower & borrowers_mask(index, borrowing)),
        )

    def still_eligible(self, session: Session, victim: Victim, taken: list[Victim]) -> bool:
        if session.quota is None or victim.job.queue == self._queue:
            return True
        return self._within_borrowing(session, victim, taken)
