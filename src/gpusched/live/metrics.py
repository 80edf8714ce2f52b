"""Prometheus metrics of the live scheduler, served at ``/metrics``.

=====================================  =========  =============================================
name                                   type       meaning
=====================================  =========  =============================================
gpusched_cycle_duration_seconds        histogram  one cycle: snapshot, schedule(), apply
gpusched_schedule_duration_seconds     histogram  the ``schedule()`` call alone
gpusched_pending_pods                  gauge      our unbound pods, by queue
gpusched_unschedulable_pods            gauge      pending pods that did not fit last cycle
gpusched_unschedulable_pods_by_cause   gauge      the same, by what kept them (``Status.cause``:
                                                  nodes, queue-limit, borrowing, quota-held,
                                                  domain, order, other)
gpusched_binds_total                   counter    Binding POSTs, by result (bound, conflict,
                                                  error)
gpusched_evictions_total               counter    Eviction POSTs, by result (evicted, blocked
                                                  by a PodDisruptionBudget, error)
gpusched_completed_jobs_learned_total  counter    completed jobs whose run time went into the
                                                  learned means (:mod:`.runtimes`)
gpusched_gpu_capacity_milli            gauge      GPU capacity of schedulable nodes, milli-GPU
gpusched_gpu_allocated_milli           gauge      GPU held by bound pods, milli-GPU
gpusched_is_leader                     gauge      1 on the replica holding the Lease
=====================================  =========  =============================================

Each scheduler gets its own registry, so several can live in one process (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["Metrics"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.cycle_seconds = Histogram(
            "gpusched_cycle_duration_seconds", "One scheduling cycle", buckets=_BUCKETS, registry=r
        )
        self.schedule_seconds = Histogram(
            "gpusched_schedule_duration_seconds",
            "The schedule() call of a cycle",
            buckets=_BUCKETS,
            registry=r,
        )
        self.pending = Gauge("gpusched_pending_pods", "Our unbound pods", ["queue"], registry=r)
        self.unschedulable = Gauge(
            "gpusched_unschedulable_pods", "Pending pods that did not fit last cycle", registry=r
        )
        self.unschedulable_by_cause = Gauge(
            "gpusched_unschedulable_pods_by_cause",
            "Pending pods that did not fit last cycle, by cause",
            ["cause"],
            registry=r,
        )
        self.binds = Counter("gpusched_binds", "Binding POSTs", ["result"], registry=r)
        self.evictions = Counter("gpusched_evictions", "Eviction POSTs", ["result"], registry=r)
        self.runtimes_learned = Counter(
            "gpusched_completed_jobs_learned",
            "Completed jobs whose run time went into the learned means",
            registry=r,
        )
        self.gpu_capacity = Gauge(
            "gpusched_gpu_capacity_milli", "GPU capacity of schedulable nodes", registry=r
        )
        self.gpu_allocated = Gauge(
            "gpusched_gpu_allocated_milli", "GPU held by bound pods", registry=r
        )
        self.leader = Gauge("gpusched_is_leader", "1 while holding the Lease", registry=r)

    def serve(self, address: str) -> None:
        """Serve ``/metrics`` on ``HOST:PORT`` from a daemon thread."""
        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)
