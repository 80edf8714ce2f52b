"""The ``gpusched run`` process: credentials, caches, leader election, metrics, shutdown.

Threads: one per cache (list+watch), one for the Lease, one serving ``/metrics``, a pool for
Binding POSTs, and the main thread running cycles. SIGTERM or SIGINT stops it gracefully: the
cycle in flight finishes (its binds complete), the caches stop, and the Lease is released so a
standby replica takes over at once. A replica that cannot renew the Lease in time (the
apiserver is down, or it is cut off) stops scheduling and campaigns again (see :mod:`.leader`).
What the leader carries between cycles (reservation holders, deadlines, evictors) is kept in
the ConfigMap ``state_name`` beside the Lease, and read by each new leader (:mod:`.carry_store`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from types import FrameType

from gpusched.framework import Profile
from gpusched.live.carry_store import CarryStore
from gpusched.live.client import KubeClient, load_credentials
from gpusched.live.leader import LeaderElector
from gpusched.live.metrics import Metrics
from gpusched.live.scheduler import LiveOptions, LiveScheduler

__all__ = ["RunConfig", "run"]

log = logging.getLogger(__name__)


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything ``gpusched run`` needs besides the profile."""

    kubeconfig: str | None = None
    options: LiveOptions = field(default_factory=LiveOptions)
    leader_elect: bool = True
    lease_namespace: str = "gpusched-system"
    lease_name: str = "gpusched"
    #: ConfigMap (in ``lease_namespace``) keeping the carried state; empty: memory only.
    state_name: str = "gpusched-state"
    identity: str = field(default_factory=default_identity)
    metrics_address: str = "0.0.0.0:10261"
    lease_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_s: float = 2.0


def run(config: RunConfig, profile: Profile) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0)."""
    client = KubeClient(load_credentials(config.kubeconfig))
    metrics = Metrics()
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    store = None
    if config.state_name:
        store = CarryStore(client, config.lease_namespace, config.state_name, config.identity)
    scheduler = LiveScheduler(client, profile, config.options, metrics, store)
    scheduler.start_caches(stop)
    if config.metrics_address:
        metrics.serve(config.metrics_address)

    elector_thread: threading.Thread | None = None
    if config.leader_elect:

        def on_lost() -> None:
            metrics.leader.set(0)

        def on_started() -> None:
            metrics.leader.set(1)
            scheduler.became_leader()

        elector = LeaderElector(
            client,
            config.lease_namespace,
            config.lease_name,
            config.identity,
            lease_s=config.lease_s,
            renew_deadline_s=config.renew_deadline_s,
            retry_s=config.retry_s,
            on_started=on_started,
            on_lost=on_lost,
        )
        elector_thread = threading.Thread(
            target=elector.run, args=(stop,), name="lease", daemon=True
        )
        elector_thread.start()
        leading = elector.leading
    else:
        leading = threading.Event()
        leading.set()
        metrics.leader.set(1)

    log.info(
        "gpusched %s serving schedulerName=%s with profile %s",
        config.identity,
        config.options.scheduler_name,
        profile.name,
    )
    scheduler.run(stop, leading)
    if elector_thread is not None:
        elector_thread.join(timeout=10)
    metrics.leader.set(0)
    client.close()
    return 0
