"""The live Kubernetes backend: gpusched as a secondary scheduler in a real cluster.

Pods with ``schedulerName: gpusched`` are placed by the same ``schedule()`` the simulator runs.
This package is a driver, beside :mod:`gpusched.sim`: it may import the core and
:mod:`gpusched.io`, and nothing in the core imports it (import-linter checks both).

Modules: :mod:`.client` (thin JSON client, raw Binding POST), :mod:`.cache` (list+watch),
:mod:`.caches` (the scheduler's caches and API discovery), :mod:`.translate`,
:mod:`.translate_pod`, :mod:`.translate_podgroup` (objects into slim values), :mod:`.estimates`
(run-time estimate, user and kind of a pod), :mod:`.runtimes` (mean run times learned from
completed pods), :mod:`.snapshot`
(a cycle's Snapshot; pods into jobs in :mod:`.snapshot_jobs`, bound pods charged in
:mod:`.snapshot_charge`, DRA in :mod:`.snapshot_dra`), :mod:`.scheduler` (the cycle and
applying its plan), :mod:`.pod_moves` (Binding and Eviction), :mod:`.pod_writes` (conditions,
Events, nominations), :mod:`.carry` (what a cycle leaves the next: reservation holders,
deadlines, evictors) and :mod:`.carry_store` (it in a ConfigMap, for the next leader),
:mod:`.leader` (Lease election), :mod:`.metrics` (Prometheus),
:mod:`.run` (the process). User guide: ``docs/live.md``.
"""

from gpusched.live.run import RunConfig, run
from gpusched.live.scheduler import LiveOptions, LiveScheduler

__all__ = ["LiveOptions", "LiveScheduler", "RunConfig", "run"]
