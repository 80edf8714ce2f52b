"""Lease leader election (``coordination.k8s.io/v1``), the way client-go's leaderelection does it.

Replicas race to write their identity into one Lease. The holder renews it every
``retry_s``; the others retry as often and take over once the record has not changed for
``lease_s`` *by their own clock* (the time they last saw it change, never the timestamps in the
record, so clock skew between machines does not matter). Every write carries the Lease's
``resourceVersion``, so two candidates can never both win: the second gets a 409.

A leader that cannot renew within ``renew_deadline_s`` stops leading (``on_lost``): the process
exits, as kube-scheduler's does, rather than risk two active schedulers. On graceful shutdown
the leader releases the Lease (empty holder, duration 1 s) so a standby takes over at once.

Defaults are kube-scheduler's: lease 15 s, renew deadline 10 s, retry 2 s.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpusched.live.client import ApiError, JsonObj, KubeClient

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    client: KubeClient
    namespace: str
    name: str
    identity: str
    lease_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_s: float = 2.0
    on_started: Callable[[], None] = lambda: None
    on_lost: Callable[[], None] = lambda: None

    leading: threading.Event = field(default_factory=threading.Event)
    _observed: tuple[str, str] = ("", "")  # (holder, renewTime) last seen
    _observed_at: float = 0.0

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def run(self, stop: threading.Event) -> None:
        """Campaign, lead while renewals succeed, step down and campaign again after a missed
        renew deadline; release the Lease when ``stop`` is set."""
        while not stop.is_set():
            while not stop.is_set() and not self._try():
                stop.wait(self.retry_s)
            if stop.is_set():
                break
            log.info("became leader (%s/%s as %s)", self.namespace, self.name, self.identity)
            self.leading.set()
            self.on_started()
            last_renew = time.monotonic()
            while not stop.wait(self.retry_s):
                if self._try():
                    last_renew = time.monotonic()
                elif time.monotonic() - last_renew > self.renew_deadline_s:
                    log.error(
                        "could not renew the lease for %.0f s; stepping down",
                        self.renew_deadline_s,
                    )
                    self.leading.clear()
                    self.on_lost()
                    break
        self.release()

    def _try(self) -> bool:
        """One acquire-or-renew attempt; True when we hold the Lease afterwards."""
        now = _now_micro()
        try:
            lease = self.client.get(self.path)
        except ApiError as exc:
            if exc.status_code != 404:
                log.warning("lease: %s", exc)
                return False
            return self._create(now)
        spec: JsonObj = lease.setdefault("spec", {})
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_s)
        expired = time.monotonic() - self._observed_at > duration
        if holder and holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(self.lease_s)
        spec["renewTime"] = now
        try:
            self.client.put(self.path, lease)
        except ApiError as exc:
            if exc.status_code != 409:
                log.warning("lease: %s", exc)
            return False
        self._observed, self._observed_at = (self.identity, now), time.monotonic()
        return True

    def _create(self, now: str) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_s),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        try:
            self.client.post(self.path.rsplit("/", 1)[0], body)
        except ApiError as exc:
            if exc.status_code != 409:
                log.warning("lease: %s", exc)
            return False
        return True

    def release(self) -> None:
        """Give the Lease up (only if we still hold it) so a standby need not wait it out."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        try:
            lease = self.client.get(self.path)
            spec = lease.setdefault("spec", {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = _now_micro()
            self.client.put(self.path, lease)
            log.info("released the lease")
        except ApiError as exc:
            log.warning("lease release: %s", exc)
