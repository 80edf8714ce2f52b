"""The live scheduler: caches, one ``schedule()`` per cycle, and the plan applied to the cluster.

One cycle (only on the replica holding the Lease)::

    nodes, pods, pod groups <- the list+watch caches (no API reads in the cycle)
    live = build_snapshot(...)                 pure; our recent binds count as bound ("assumed")
    plan = schedule(live.snapshot, profile)    the same core the simulator calls
    evictions  -> Eviction subresource per pod (a PDB refusal, 429, is reported, not retried)
    binds      -> Binding subresource per pod, a gang's members in parallel; GPU indices go
                  on the pod as annotations in the same write; never retried blindly: a 409
                  means the pod was bound or re-created, and the next cycle sees the truth
    pending    -> condition PodScheduled=False (reason Unschedulable, the core's message with
                  its numbers) and a Warning Event FailedScheduling, written when the message
                  changes and at most every ``report_interval_s`` per pod

A cycle starts when a cache changed (after ``batch_s``, so a burst of pods is scheduled
together) or every ``resync_s`` while pods are pending. Jobs nominated for preemption are not
bound in the cycle that evicts their victims; they are placed once the victims are gone.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from gpusched.framework import Bind, Plan, Profile
from gpusched.live.cache import Informer
from gpusched.live.client import ApiError, KubeClient
from gpusched.live.metrics import Metrics
from gpusched.live.snapshot import Assumed, LiveSnapshot, SnapshotMemo, build_snapshot
from gpusched.live.translate import (
    GPU_MILLI_ANNOTATION,
    GPUS_ANNOTATION,
    PodGroupInfo,
    PodInfo,
    node_from_k8s,
    pod_from_k8s,
    podgroup_from_k8s,
)
from gpusched.model import MILLI_PER_GPU, JobId, Node, TaskId
from gpusched.scheduler import schedule

__all__ = ["CycleResult", "LiveOptions", "LiveScheduler"]

log = logging.getLogger(__name__)

PODGROUPS_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
_SEED_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 63) - 1


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


@dataclass(slots=True)
class CycleResult:
    """What one cycle did (for logs and tests)."""

    pending_jobs: int = 0
    bound: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)


def _now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LiveScheduler:
    """Caches plus the cycle loop. Call :meth:`start_caches`, then :meth:`run` while leading."""

    def __init__(
        self,
        client: KubeClient,
        profile: Profile,
        options: LiveOptions | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.client = client
        self.profile = profile
        self.options = options or LiveOptions()
        self.metrics = metrics or Metrics()
        self._changed = threading.Event()
        wake = self._changed.set
        self.nodes: Informer[Node] = Informer(
            client, "/api/v1/nodes", node_from_k8s, on_change=wake
        )
        self.pods: Informer[PodInfo] = Informer(
            client,
            "/api/v1/pods",
            pod_from_k8s,
            params={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
            on_change=wake,
        )
        self.podgroups: Informer[PodGroupInfo] = Informer(
            client, PODGROUPS_PATH, podgroup_from_k8s, on_change=wake
        )
        self._memo = SnapshotMemo()
        self._writes: list[Future[None]] = []
        self._assumed: dict[str, tuple[Assumed, float]] = {}
        self._reported: dict[str, tuple[str, float]] = {}
        self._threads: list[threading.Thread] = []
        self._pool = ThreadPoolExecutor(self.options.bind_workers, thread_name_prefix="bind")
        self.cycles = 0

    # -- caches ----------------------------------------------------------------------------

    def start_caches(self, stop: threading.Event) -> None:
        for name, informer in (
            ("nodes", self.nodes),
            ("pods", self.pods),
            ("podgroups", self.podgroups),
        ):
            thread = threading.Thread(
                target=informer.run, args=(stop,), name=f"cache-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def wait_synced(self, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        for informer in (self.nodes, self.pods, self.podgroups):
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    # -- loop ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Run a cycle soon (a cache changed, or this replica became the leader)."""
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
        pods = self.pods.items()
        live = build_snapshot(
            self.nodes.items().values(),
            pods.values(),
            self.podgroups.items(),
            scheduler_name=self.options.scheduler_name,
            now=time.time(),
            seed=((self.options.seed * _SEED_MIX) ^ self.cycles) & _MASK,
            assumed=self._live_assumed(pods),
            groups_served=self.podgroups.served,
            memo=self._memo,
        )
        self.cycles += 1
        built = time.perf_counter()
        result = CycleResult(pending_jobs=len(live.snapshot.pending))
        for pod, problem in live.problems.values():
            self._report(pod, problem, result)
        planned = built
        if live.snapshot.pending:
            plan = schedule(live.snapshot, self.profile)
            planned = time.perf_counter()
            self.metrics.schedule_seconds.observe(planned - built)
            self._apply(live, plan, result)
        for write in self._writes:  # conditions, events, nominations sent from the pool
            write.result()
        self._writes.clear()
        self._observe(live, result)
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
        by_job: dict[JobId, list[Bind]] = {}
        for bind in plan.binds:
            if bind.job in waiting_on_victims:
                self._nominate(live.pods[bind.task], bind.node)
            else:
                by_job.setdefault(bind.job, []).append(bind)
        futures = []
        for binds in by_job.values():
            for bind in binds:
                pod = live.pods[bind.task]
                self._assumed[pod.key] = (
                    Assumed(bind.node, bind.gpus, bind.gpu_milli, pod.uid),
                    time.monotonic(),
                )
                futures.append((pod, self._pool.submit(self._bind, pod, bind)))
        for pod, future in futures:
            error = future.result()
            if error is None:
                result.bound.append(pod.key)
            else:
                self._assumed.pop(pod.key, None)
                result.failed.append(pod.key)
                self._event(pod, "Warning", "FailedBinding", error)
        for job_id, status in plan.pending.items():
            for pod in live.job_pods.get(job_id, ()):
                if not pod.node and pod.key not in self._assumed:
                    self._report(pod, status.message, result)

    def _bind(self, pod: PodInfo, bind: Bind) -> str | None:
        annotations = {GPUS_ANNOTATION: ",".join(str(g) for g in bind.gpus)} if bind.gpus else {}
        if bind.gpus and bind.gpu_milli < MILLI_PER_GPU:
            annotations[GPU_MILLI_ANNOTATION] = str(bind.gpu_milli)
        try:
            self.client.bind(pod.namespace, pod.name, pod.uid, bind.node, annotations)
        except ApiError as exc:
            self.metrics.binds.labels("conflict" if exc.status_code == 409 else "error").inc()
            log.warning("bind %s -> %s: %s", pod.key, bind.node, exc)
            return f"binding to {bind.node} failed: {exc.status_code} {exc.message}"
        self.metrics.binds.labels("bound").inc()
        return None

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
                body = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": pod.name, "namespace": pod.namespace},
                }
                path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
                try:
                    self.client.post(path, body)
                except ApiError as exc:
                    refused = exc.status_code == 429
                    self.metrics.evictions.labels("blocked" if refused else "error").inc()
                    why = "a PodDisruptionBudget forbids it" if refused else exc.message
                    self._event(pod, "Warning", "PreemptionBlocked", f"eviction refused: {why}")
                    continue
                self.metrics.evictions.labels("evicted").inc()
                result.evicted.append(pod.key)
                self._event(pod, "Normal", "Preempted", f"evicted by gpusched: {eviction.reason}")

    def _nominate(self, pod: PodInfo, node: str) -> None:
        """Set ``status.nominatedNodeName``: the node freed for this preemptor."""
        if pod.nominated == node:
            return
        patch = {"status": {"nominatedNodeName": node}}
        try:
            self.client.patch(
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status", patch, strategic=True
            )
        except ApiError as exc:
            log.warning("nominating %s for %s: %s", node, pod.key, exc)

    # -- telling users why -----------------------------------------------------------------

    def _report(self, pod: PodInfo, message: str, result: CycleResult) -> None:
        """Set PodScheduled=False/Unschedulable with ``message`` and emit an Event, unless the
        pod already says so or was told less than ``report_interval_s`` ago."""
        result.unschedulable[pod.key] = message
        now = time.monotonic()
        last = self._reported.get(pod.key)
        same_on_pod = pod.scheduled_reason == "Unschedulable" and pod.scheduled_message == message
        if same_on_pod or (last is not None and now - last[1] < self.options.report_interval_s):
            return
        self._reported[pod.key] = (message, now)
        event = last is None or last[0] != message
        self._writes.append(self._pool.submit(self._write_unschedulable, pod, message, event))

    def _write_unschedulable(self, pod: PodInfo, message: str, event: bool) -> None:
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                        "lastTransitionTime": _now_rfc3339(),
                    }
                ]
            }
        }
        try:
            self.client.patch(
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status", patch, strategic=True
            )
        except ApiError as exc:
            log.warning("condition on %s: %s", pod.key, exc)
        if event:
            self._event(pod, "Warning", "FailedScheduling", message)

    def _event(self, pod: PodInfo, kind: str, reason: str, message: str) -> None:
        now = _now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod.name}.{uuid.uuid4().hex[:12]}", "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": self.options.scheduler_name},
            "reportingComponent": self.options.scheduler_name,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.client.post(f"/api/v1/namespaces/{pod.namespace}/events", body)
        except ApiError as exc:
            log.warning("event on %s: %s", pod.key, exc)

    # -- metrics ---------------------------------------------------------------------------

    def _observe(self, live: LiveSnapshot, result: CycleResult) -> None:
        state = live.snapshot.state
        self.metrics.gpu_capacity.set(float(state.total_gpu_milli))
        self.metrics.gpu_allocated.set(float(state.used_gpu_milli))
        bound = {TaskId(k) for k in result.bound}
        pending: dict[str, int] = {}
        for job in live.snapshot.pending:
            waiting = sum(
                1 for t in job.tasks if t.id not in state.allocations and t.id not in bound
            )
            pending[job.queue] = pending.get(job.queue, 0) + waiting
        for queue, count in pending.items():
            self.metrics.pending.labels(queue).set(count)
        self.metrics.unschedulable.set(len(result.unschedulable))
        # Forget report memos of pods that are gone or placed.
        if len(self._reported) > 4 * (len(result.unschedulable) + 64):
            keep = set(result.unschedulable)
            self._reported = {k: v for k, v in self._reported.items() if k in keep}


def _job_of(task_id: TaskId, pod: PodInfo) -> str:
    return pod.group_key or str(task_id)
