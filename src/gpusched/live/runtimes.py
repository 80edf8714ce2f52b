"""Mean run times learned from the jobs the live scheduler saw complete, per ``(user, kind)``.

The core falls back on ``Snapshot.runtime_stats`` for a job without an estimate (see
:mod:`.estimates`); the simulator keeps that mean as its jobs complete, and this module does
the same for a cluster, so that reservations laid out in time mean the same thing live.

What counts (docs/live.md, "Run-time estimates"):

* a **pod we scheduled** (``spec.schedulerName`` ours) that reached phase ``Succeeded``;
  its run time is from ``status.startTime`` to the latest
  ``status.containerStatuses[].state.terminated.finishedAt``. ``startTime`` is when the
  kubelet accepted the pod (image pulls included): the start the live snapshot gives running
  jobs, so an estimate and an expected end are measured alike. Both are whole seconds in the
  API;
* a **gang** completes when none of its pods is pending or running any more; its run time is
  from its first pod's start to its last pod's finish. A gang is waited for ``settle_s``
  after its last pod was seen finished, because the scheduler sees "finished" and "no longer
  running" on two watches, and a member in between would otherwise split the gang in two;
* a job with a **Failed** pod, or whose times are missing, does not count.

:class:`RuntimeMeans` is the accumulator: a sum and a count per key, the mean of all
completions as the simulator keeps it, at most ``max_keys`` keys (the least recently updated
key is forgotten first). :class:`CompletionLearner` turns the finished pods of the cache into
completions, each job once: it remembers the uids it has counted while they are still in the
cache, so its memory follows the finished pods the API keeps. Everything lives in memory: a
new leader starts empty and learns again from the finished pods the API still holds (the pod
garbage collector keeps up to 12,500 by default), nothing is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpusched.live.translate import parse_timestamp
from gpusched.live.translate_pod import pod_from_k8s

__all__ = ["CompletionLearner", "Finished", "RuntimeMeans", "finished_from_k8s"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Finished:
    """A pod of ours that ended: its job (``NAMESPACE/PODGROUP`` or ``NAMESPACE/POD``), the
    user and kind it was learned under, whether it succeeded, and its start and finish (Unix
    seconds, ``0.0`` when the API does not say)."""

    key: str
    uid: str
    job: str
    user: str
    kind: str
    succeeded: bool
    started: float
    finished: float


def finished_from_k8s(obj: Mapping[str, Any]) -> Finished:
    """The :class:`Finished` of a Succeeded or Failed Pod object; job, user and kind are read
    exactly as for a pending pod (:func:`~gpusched.live.translate_pod.pod_from_k8s`)."""
    pod = pod_from_k8s(obj)
    status = obj.get("status") or {}
    ends = [
        parse_timestamp(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in status.get("containerStatuses") or []
    ]
    return Finished(
        key=pod.key,
        uid=pod.uid,
        job=pod.group_key or pod.key,
        user=pod.user,
        kind=pod.kind.value,
        succeeded=pod.phase == "Succeeded",
        started=pod.started,
        finished=max(ends, default=0.0) if all(ends) else 0.0,
    )


@dataclass(slots=True)
class RuntimeMeans:
    """The mean run time per ``(user, kind)``: a sum and a count each, for at most
    ``max_keys`` keys (a new key beyond that forgets the least recently updated one)."""

    max_keys: int = 10_000
    _sums: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)
    _means: dict[tuple[str, str], float] | None = None

    def observe(self, user: str, kind: str, seconds: float) -> float:
        """Count one completed job; returns the key's new mean."""
        key = (user, kind)
        total, count = self._sums.pop(key, (0.0, 0))  # re-inserted last: most recent
        self._sums[key] = (total + seconds, count + 1)
        while len(self._sums) > self.max_keys:
            del self._sums[next(iter(self._sums))]
        self._means = None
        return (total + seconds) / (count + 1)

    def means(self) -> Mapping[tuple[str, str], float]:
        """The means now: a new mapping after each change (a snapshot that holds the old one
        keeps it as it was), the same one while nothing changed."""
        if self._means is None:
            self._means = {k: total / n for k, (total, n) in self._sums.items()}
        return self._means

    def count(self, user: str, kind: str) -> int:
        return self._sums.get((user, kind), (0.0, 0))[1]


@dataclass(slots=True)
class CompletionLearner:
    """Completed jobs, each counted once, into :class:`RuntimeMeans` (module docstring)."""

    means: RuntimeMeans = field(default_factory=RuntimeMeans)
    settle_s: float = 0.5
    _counted: set[str] = field(default_factory=set)
    _seen_at: dict[str, float] = field(default_factory=dict)

    @property
    def remembered(self) -> int:
        """How many finished pods' uids are kept as counted (those still in the cache)."""
        return len(self._counted)

    def learn(
        self, finished: Iterable[Finished], active: Iterable[tuple[str, str]], now: float
    ) -> int:
        """Count the jobs that completed among ``finished`` (the finished pods in the cache);
        ``active`` holds ``(job, uid)`` of pods not yet finished, ``now`` is a monotonic clock.
        Returns how many jobs were counted."""
        by_uid = {f.uid: f for f in finished}
        self._counted &= by_uid.keys()
        self._seen_at = {u: t for u, t in self._seen_at.items() if u in by_uid}
        new: dict[str, list[Finished]] = {}
        for f in by_uid.values():
            if f.uid not in self._counted:
                self._seen_at.setdefault(f.uid, now)
                new.setdefault(f.job, []).append(f)
        if not new:
            return 0
        running = {job for job, uid in active if uid not in by_uid}
        learned = 0
        for job, members in new.items():
            if job in running or self._settling(members, now):
                continue
            self._counted.update(f.uid for f in members)
            learned += self._count(job, members)
        return learned

    def _settling(self, members: list[Finished], now: float) -> bool:
        """A gang (a job whose id is not its pod's) waits ``settle_s`` after its last pod was
        first seen finished."""
        if len(members) == 1 and members[0].job == members[0].key:
            return False
        return now - max(self._seen_at[f.uid] for f in members) < self.settle_s

    def _count(self, job: str, members: list[Finished]) -> int:
        if not all(f.succeeded and f.started and f.finished for f in members):
            return 0
        first = min(members, key=lambda f: f.key)
        seconds = max(f.finished for f in members) - min(f.started for f in members)
        if seconds <= 0:  # under the API's one-second resolution: no measure
            return 0
        mean = self.means.observe(first.user, first.kind, seconds)
        log.debug(
            "job %s completed in %.0f s; mean run time of %s/%s now %.0f s over %d jobs",
            job,
            seconds,
            first.user,
            first.kind,
            mean,
            self.means.count(first.user, first.kind),
        )
        return 1
