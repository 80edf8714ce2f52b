"""The live scheduler: caches, one ``schedule()`` per cycle, and the plan applied to the cluster.

One cycle (only on the replica holding the Lease)::

    nodes, pods, pod groups <- the list+watch caches (the cycle reads nothing else from the API
                               but the carried state below: once per term as leader, and
                               again after a conflicting write of it)
    live = build_snapshot(...)                 pure; our recent binds count as bound ("assumed")
    plan = schedule(live.snapshot, profile)    the same core the simulator calls
    evictions  -> Eviction subresource per pod (a PDB refusal, 429, is reported, not retried)
    binds      -> Binding subresource per pod, a gang's members in parallel; GPU indices go
                  on the pod as annotations in the same write; never retried blindly: a 409
                  means the pod was bound or re-created, and the next cycle sees the truth
    pending    -> condition PodScheduled=False (reason Unschedulable, the core's message with
                  its numbers) and a Warning Event FailedScheduling, written when the message
                  changes and at most every ``report_interval_s`` per pod
    carried    -> reservation holders, deadlines and evictors (:mod:`.carry`), read from a
                  ConfigMap at the start of a term as leader and written back when they
                  changed, after the writes above (:mod:`.carry_store`)

A cycle starts when a cache changed (after ``batch_s``, so a burst of pods is scheduled
together) or every ``resync_s`` while pods are pending. Jobs nominated for preemption are not
bound in the cycle that evicts their victims: they get ``status.nominatedNodeName`` and their
room is held (:mod:`.holds`) until they are bound there, once the victims are gone.

Optional APIs, found by discovery at start: the ``Queue`` CRD (:mod:`.queues`), native
``scheduling.k8s.io/v1alpha2`` PodGroups, and DRA ``resource.k8s.io/v1`` (:mod:`.dra`).
Bad Queues and PodGroups are reported on the objects themselves (:mod:`.feedback`).

The caches and discovery are :mod:`.caches`; the Binding and Eviction writes :mod:`.pod_moves`;
the condition, Event and nomination writes :mod:`.pod_writes`; what users are told, and the
gauges, :mod:`.reporting`. This module is the loop, the cycle, and what is bound, evicted and
held when.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpusched.framework import Bind, Plan, Profile, cycle_seed
from gpusched.live.admission import Admission
from gpusched.live.caches import LiveCaches
from gpusched.live.carry import Carried
from gpusched.live.carry_store import CarryStore
from gpusched.live.client import ApiError, KubeClient
from gpusched.live.dra import DraView, PodClaims
from gpusched.live.holds import Hold
from gpusched.live.metrics import Metrics
from gpusched.live.pod_moves import bind_pod, evict_pod
from gpusched.live.pod_writes import clear_nomination, nominate
from gpusched.live.queues import build_queues
from gpusched.live.reporting import Reporter
from gpusched.live.runtimes import CompletionLearner
from gpusched.live.snapshot import Assumed, Extras, LiveSnapshot, build_snapshot
from gpusched.live.snapshot_jobs import SnapshotMemo
from gpusched.live.translate_pod import PodInfo
from gpusched.model import JobId, NodeName, TaskId
from gpusched.scheduler import schedule

__all__ = ["CycleResult", "LiveOptions", "LiveScheduler"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """How the live scheduler runs (the profile says how it places)."""

    scheduler_name: str = "gpusched"
    batch_s: float = 0.05
    resync_s: float = 1.0
    assume_ttl_s: float = 30.0
    report_interval_s: float = 10.0
    bind_workers: int = 16
    seed: int = 0
    hold_ttl_s: float = 120.0
    watch_timeout_s: int = 300
    #: Run time of jobs with neither an estimate nor a learned mean; ``None``: the core's
    #: hour. A replay at ``speed`` sets ``3600 / speed`` (docs/live.md).
    default_runtime_s: float | None = None


@dataclass(slots=True)
class CycleResult:
    """What one cycle did (for logs and tests)."""

    pending_jobs: int = 0
    bound: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)
    #: What kept each of ``unschedulable`` pending (``Cause`` value).
    causes: dict[str, str] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)


class LiveScheduler:
    """Caches plus the cycle loop. Call :meth:`start_caches`, then :meth:`run` while leading."""

    def __init__(
        self,
        client: KubeClient,
        profile: Profile,
        options: LiveOptions | None = None,
        metrics: Metrics | None = None,
        store: CarryStore | None = None,
    ) -> None:
        self.client = client
        self.profile = profile
        self.options = options or LiveOptions()
        self.metrics = metrics or Metrics()
        self._changed = threading.Event()
        self.caches = LiveCaches(client, self._changed.set, self.options.scheduler_name)
        self.learner = CompletionLearner()  # mean run times of completed jobs (live.runtimes)
        self._holds: dict[str, tuple[Hold, float]] = {}
        self._refused: set[JobId] = set()
        self._dra: DraView | None = None
        self._memo = SnapshotMemo()
        self._carried = Carried()  # holders, deadlines, evictors (live.carry)
        self._store = store  # where they are kept for the next leader (live.carry_store)
        self._new_term = threading.Event()  # read the stored state before the next cycle
        self._new_term.set()
        self._assumed: dict[str, tuple[Assumed, float]] = {}
        self._pool = ThreadPoolExecutor(self.options.bind_workers, thread_name_prefix="bind")
        self.reporter = Reporter(client, self.options, self.metrics, self._pool)
        self.cycles = 0

    # -- caches ----------------------------------------------------------------------------

    def discover(self) -> None:
        """Create the caches of the optional APIs this apiserver serves (API discovery)."""
        self.caches.discover()

    def start_caches(self, stop: threading.Event) -> None:
        """Start every cache (:meth:`.LiveCaches.start`)."""
        self.caches.start(stop, self.options.watch_timeout_s)

    def wait_synced(self, timeout_s: float = 60.0) -> bool:
        return self.caches.wait_synced(timeout_s)

    # -- loop ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Run a cycle soon (a cache changed)."""
        self._changed.set()

    def became_leader(self) -> None:
        """This replica now holds the Lease: read the carried state again before the next
        cycle (another leader may have changed it since this one last led), and run it soon."""
        self._new_term.set()
        self._changed.set()

    def run(self, stop: threading.Event, leading: threading.Event | None = None) -> None:
        """Schedule until ``stop``; cycles run only while ``leading`` is set (if given)."""
        self.wait_synced()
        while not stop.is_set():
            self._changed.wait(self.options.resync_s)
            if stop.is_set():
                break
            if leading is not None and not leading.is_set():
                self._changed.clear()
                continue
            stop.wait(self.options.batch_s)
            self._changed.clear()
            try:
                self.cycle()
            except Exception:
                log.exception("scheduling cycle failed; retrying next cycle")
        self._pool.shutdown(wait=True)

    def cycle(self) -> CycleResult:
        """One scheduling cycle (see the module docstring)."""
        started = time.perf_counter()
        self._read_carried()
        live = self._snapshot()
        self.cycles += 1
        built = time.perf_counter()
        result = CycleResult(pending_jobs=len(live.snapshot.pending))
        self.reporter.problems(live, result)
        if live.ready:
            self._bind_ready(live, result)
        planned = built
        if live.snapshot.pending:
            plan = schedule(self._carried.apply(live.snapshot), self.profile)
            self._carried.record(plan, live.snapshot.now, live.snapshot.running)
            planned = time.perf_counter()
            self.metrics.schedule_seconds.observe(planned - built)
            self._apply(live, plan, result)
        self.reporter.flush()  # conditions, events, nominations sent from the pool
        if self._store is not None:  # the carried state, if it changed (never raises)
            self._store.save(self._carried)
        self.reporter.observe(live, result)
        done = time.perf_counter()
        self.metrics.cycle_seconds.observe(done - started)
        if result.bound or result.failed or result.evicted:
            log.info(
                "cycle %d: %d pending jobs; bound %d, failed %d, evicted %d, unschedulable %d; "
                "snapshot %.3f s, schedule %.3f s, apply %.3f s",
                self.cycles,
                result.pending_jobs,
                len(result.bound),
                len(result.failed),
                len(result.evicted),
                len(result.unschedulable),
                built - started,
                planned - built,
                done - planned,
            )
        return result

    def _read_carried(self) -> None:
        """At the start of a term as leader, replace what this replica carried (from an
        earlier term, if any) by the stored state; until that read succeeds, try again each
        cycle (the store spaces its attempts)."""
        if self._store is None:
            return
        if self._new_term.is_set():
            self._new_term.clear()
            self._carried = Carried()
            self._store.reset()
        if not self._store.loaded:
            self._store.load(self._carried)

    def _snapshot(self) -> LiveSnapshot:
        """This cycle's snapshot, from the caches (no API reads)."""
        pods = self.caches.pods.items()
        return build_snapshot(
            self.caches.nodes.items().values(),
            pods.values(),
            self.caches.podgroups.items(),
            scheduler_name=self.options.scheduler_name,
            now=time.time(),
            seed=cycle_seed(self.options.seed, self.cycles),
            assumed=self._live_assumed(pods),
            groups_served=self.caches.podgroups.served,
            memo=self._memo,
            extras=self._extras(pods),
        )

    def _extras(self, pods: dict[str, PodInfo]) -> Extras:
        """Queues, priority classes, native PodGroups, holds and DRA for this cycle."""
        queue_infos = self.caches.queues.items()
        queues = build_queues(queue_infos.values()) if queue_infos else None
        if queues is not None:
            self.reporter.feedback.queues(queues.queues, queues.problems)
        dra = None
        if (
            self.caches.slices is not None
            and self.caches.claims is not None
            and self.caches.device_classes
        ):
            dra = DraView.build(
                self.caches.slices.items().values(),
                self.caches.claims.items(),
                {c.name: c for c in self.caches.device_classes.items().values()},
            )
        self._dra = dra
        return Extras(
            admission=Admission(
                queues,
                {n.name: n for n in self.caches.namespaces.items().values()},
                self.caches.priority_classes.items(),
            ),
            native_groups=self.caches.native_groups.items() if self.caches.native_groups else {},
            native_served=self.caches.native_groups is not None
            and self.caches.native_groups.served,
            holds=self._live_holds(pods),
            dra=dra,
            runtime_stats=self._learn(pods),
            default_runtime_s=self.options.default_runtime_s,
        )

    def _learn(self, pods: dict[str, PodInfo]) -> Mapping[tuple[str, str], float]:
        """Count the jobs completed since the last cycle; the mean run times now."""
        active = ((p.group_key or p.key, p.uid) for p in pods.values())
        learned = self.learner.learn(
            self.caches.finished.items().values(), active, time.monotonic()
        )
        if learned:
            self.metrics.runtimes_learned.inc(learned)
        return self.learner.means.means()

    def _live_holds(self, pods: dict[str, PodInfo]) -> dict[str, Hold]:
        """Holds still wanted: forget those bound, gone or re-created; expire old ones (and
        clear their nomination); adopt nominations an earlier leader made."""
        now = time.monotonic()
        for key, pod in pods.items():
            if (
                pod.nominated
                and not pod.node
                and key not in self._holds
                and pod.scheduler == self.options.scheduler_name
            ):
                job = pod.group_key or pod.key
                self._holds[key] = (Hold(job, pod.nominated, None, pod.uid), now)
        for key, (hold, since) in list(self._holds.items()):
            seen = pods.get(key)
            if seen is None or seen.uid != hold.uid or seen.node or seen.deleting:
                del self._holds[key]
            elif now - since > self.options.hold_ttl_s:
                del self._holds[key]
                log.info("hold of %s on %s expired; scheduling it afresh", key, hold.node)
                self.reporter.submit(clear_nomination, self.client, seen)
        return {k: h for k, (h, _) in self._holds.items()}

    def _bind_ready(self, live: LiveSnapshot, result: CycleResult) -> None:
        """Bind held pods whose room is free now (their victims are gone)."""
        allocations = live.snapshot.state.allocations
        binds = []
        for task, (node, gpus) in sorted(live.ready.items()):
            held = allocations.get(task)  # a MIG pod's instances: those its hold took
            mig = held.mig if held is not None else ()
            job = JobId(live.pods[task].group_key or str(task))
            binds.append(Bind(task, job, NodeName(node), gpus, 0, mig))
        self._bind_all(live, binds, result)

    def _live_assumed(self, pods: dict[str, PodInfo]) -> dict[str, Assumed]:
        """Our binds not yet seen in the cache; forget those seen, gone or too old."""
        now = time.monotonic()
        for key, (guess, since) in list(self._assumed.items()):
            pod = pods.get(key)
            if (
                pod is None
                or pod.uid != guess.uid
                or pod.node
                or now - since > self.options.assume_ttl_s
            ):
                del self._assumed[key]
        return {k: a for k, (a, _) in self._assumed.items()}

    # -- applying a plan -------------------------------------------------------------------

    def _apply(self, live: LiveSnapshot, plan: Plan, result: CycleResult) -> None:
        if plan.evictions:
            self._evict(live, plan, result)
        waiting_on_victims = set(plan.nominations) if plan.evictions else set()
        refused = {e.for_job for e in plan.evictions if e.for_job in self._refused}
        binds: list[Bind] = []
        for bind in plan.binds:
            if bind.job in waiting_on_victims:
                pod = live.pods[bind.task]
                if bind.job not in refused:
                    hold = Hold(str(bind.job), str(bind.node), bind.gpus, pod.uid)
                    self._holds[pod.key] = (hold, time.monotonic())
                nominate(self.client, pod, bind.node)
            else:
                binds.append(bind)
        self._refused.clear()
        self._bind_all(live, binds, result)
        for job_id, status in plan.pending.items():
            for pod in live.job_pods.get(job_id, ()):
                if not pod.node and pod.key not in self._assumed:
                    self.reporter.unschedulable(pod, status.message, result, status.cause)

    def _bind_all(self, live: LiveSnapshot, binds: list[Bind], result: CycleResult) -> None:
        """Send ``binds`` from the pool (each pod's DRA claims allocated first)."""
        futures = []
        for bind in binds:
            pod = live.pods[bind.task]
            milli = bind.gpu_milli or pod.gpu_milli
            self._assumed[pod.key] = (
                Assumed(bind.node, bind.gpus, milli, pod.uid, bind.mig),
                time.monotonic(),
            )
            claims = live.claims.get(bind.task)
            futures.append((pod, self._pool.submit(self._bind, pod, bind, claims)))
        for pod, future in futures:
            error = future.result()
            if error is None:
                result.bound.append(pod.key)
            else:
                self._assumed.pop(pod.key, None)
                result.failed.append(pod.key)
                self.reporter.event(pod, "Warning", "FailedBinding", error)

    def _bind(self, pod: PodInfo, bind: Bind, claims: PodClaims | None = None) -> str | None:
        return bind_pod(self.client, self.metrics, self._dra, pod, bind, claims=claims)

    def _evict(self, live: LiveSnapshot, plan: Plan, result: CycleResult) -> None:
        victims: dict[JobId, list[PodInfo]] = {}
        for task_id, pod in live.pods.items():
            if pod.node:
                victims.setdefault(JobId(_job_of(task_id, pod)), []).append(pod)
        for eviction in plan.evictions:
            targets = victims.get(eviction.job, [])
            if eviction.tasks:  # only these (elastic) members; the job keeps running
                chosen = set(eviction.tasks)
                targets = [p for p in targets if TaskId(p.key) in chosen]
            for pod in targets:
                try:
                    evict_pod(self.client, pod)
                except ApiError as exc:
                    refused = exc.status_code == 429
                    self._refused.add(eviction.for_job)
                    self.metrics.evictions.labels("blocked" if refused else "error").inc()
                    why = "a PodDisruptionBudget forbids it" if refused else exc.message
                    self.reporter.event(
                        pod, "Warning", "PreemptionBlocked", f"eviction refused: {why}"
                    )
                    continue
                self.metrics.evictions.labels("evicted").inc()
                result.evicted.append(pod.key)
                self.reporter.event(
                    pod, "Normal", "Preempted", f"evicted by gpusched: {eviction.reason}"
                )


def _job_of(task_id: TaskId, pod: PodInfo) -> str:
    return pod.group_key or str(task_id)
