"""A digital twin: a workload replayed on kwok nodes against a live scheduler (``gpusched replay``).

Where ``gpusched simulate`` runs the core under a simulated clock, a replay runs the real thing:
the apiserver, the live scheduler (``gpusched run``, or any scheduler named by
``scheduler_name``) and kwok, with the workload's times compressed by ``speed``:

1. it creates a kwok node for every node of the cluster and waits until all are Ready
   (objects: :mod:`.replay_objects`), and a PriorityClass per job priority; with gangs in the
   workload it first creates one PodGroup as a dry run: the first create of a freshly
   installed CRD's objects took 2 s of wall time on the test control plane (dry run or not;
   later ones take milliseconds), 60 trace seconds at speed 30 by which the first gang would
   otherwise start late;
2. at ``(submit_time - first submit_time) / speed`` wall seconds after the start it creates
   the job's PodGroup (gangs) and pods; each pod carries its run time divided by ``speed``,
   after which kwok's ``gpusched-pod-complete`` stage marks it Succeeded;
3. one watch on the replay's pods (:mod:`.replay_watch`) records, in trace seconds (wall
   seconds since the start times ``speed``, plus the first submit time), when each pod was
   first seen bound (node, GPU indices from ``gpusched.dev/gpus``), when it Succeeded, and pods
   deleted before they finished (evictions: the pod is created again, as a Job controller
   would, and the job counts as preempted); a watch that expires (410) re-lists;
4. it stops when every job has finished (jobs without a duration: once started), or when
   nothing has changed for ``stall_s`` wall seconds after the last arrival; then it deletes
   everything it created (unless ``keep``).

Arrivals are the trace's own times (as in ``simulate``); a pod created late (the machine could
not keep up) waits longer, and ``submit_lag_s`` says by how much. The result is a list of
:class:`~gpusched.live.replay_watch.ReplayEvent` (in the
:class:`~gpusched.live.replay_watch.ReplayResult` :func:`replay` returns);
:mod:`gpusched.sim.observed` turns it into ``simulate``'s metrics.

Requirements on the cluster: kwok managing nodes annotated ``kwok.x-k8s.io/node: fake`` with
the stages in ``hack/controlplane/kwok/stages.yaml`` (pod ready, pod delete,
``gpusched-pod-complete``), the scheduler-plugins PodGroup CRD for gangs
(``deploy/crds``), and the scheduler running.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpusched.live.client import ApiError, JsonObj, KubeClient
from gpusched.live.replay_objects import (
    PODGROUP_API,
    REPLAY_LABEL,
    ReplayNames,
    node_object,
    pod_object,
    podgroup_object,
    priority_class_object,
)
from gpusched.live.replay_watch import ReplayEvent, ReplayResult, ReplayWatch
from gpusched.model import Job, JobId, Node

__all__ = ["ReplayOptions", "replay"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How a replay runs.

    Attributes:
        namespace: where the pods and PodGroups go (created when missing).
        scheduler_name: the pods' ``spec.schedulerName``.
        shares: the scheduler reads ``gpusched.dev/gpu-milli``; otherwise a fractional task
            asks for one whole GPU (and holds it in the metrics).
        speed: trace seconds per wall second (600: a day of the trace in 144 s).
        stall_s: stop after this many wall seconds without a change once all jobs arrived.
        keep: leave the nodes, pods and PodGroups in place at the end.
        workers: threads creating objects.
    """

    namespace: str = "gpusched-replay"
    scheduler_name: str = "gpusched"
    shares: bool = True
    speed: float = 600.0
    stall_s: float = 60.0
    keep: bool = False
    workers: int = 16


class _Replay:
    """One replay in progress (see the module docstring)."""

    def __init__(
        self, client: KubeClient, nodes: Sequence[Node], jobs: Sequence[Job], opts: ReplayOptions
    ) -> None:
        if opts.speed <= 0:
            raise ValueError(f"speed must be positive; got {opts.speed}")
        self.client = client
        self.nodes = nodes
        self.jobs = sorted(jobs, key=lambda j: j.submit_time)
        self.opts = opts
        self.result = ReplayResult(uuid.uuid4().hex[:8])
        self.origin = self.jobs[0].submit_time if self.jobs else 0.0
        self.t0 = time.monotonic()
        self.manifests: dict[str, JsonObj] = {}
        self.names = ReplayNames()
        self.watch = ReplayWatch(
            client,
            self.result,
            self.names,
            namespace=opts.namespace,
            shares=opts.shares,
            clock=self.trace_now,
            recreate=self._recreate,
        )
        self.node_objects: list[JsonObj] = []
        self.job_objects: dict[JobId, tuple[JsonObj | None, list[JsonObj]]] = {}
        self.pool = ThreadPoolExecutor(opts.workers, thread_name_prefix="replay")

    # -- clock -----------------------------------------------------------------------------

    def trace_now(self) -> float:
        return self.origin + (time.monotonic() - self.t0) * self.opts.speed

    # -- setup -----------------------------------------------------------------------------

    def _create(self, path: str, body: JsonObj) -> None:
        try:
            self.client.post(path, body)
        except ApiError as exc:
            if exc.status_code != 409:
                raise

    def _recreate(self, name: str) -> None:
        path = f"/api/v1/namespaces/{self.opts.namespace}/pods"
        self.pool.submit(self._create, path, self.manifests[name])

    def setup(self) -> None:
        ns = self.opts.namespace
        self._create("/api/v1/namespaces", {"metadata": {"name": ns}})
        self._create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "default"}})
        for priority in sorted({j.priority for j in self.jobs if j.priority}):
            body = priority_class_object(priority, self.result.run)
            self._create("/apis/scheduling.k8s.io/v1/priorityclasses", body)
        objects = self.node_objects
        list(self.pool.map(lambda o: self._create("/api/v1/nodes", o), objects))
        groups = [group for group, _ in self.job_objects.values() if group is not None]
        if groups:
            self._warm_up(f"/apis/{PODGROUP_API}/namespaces/{ns}/podgroups", groups[0])
        selector = {"labelSelector": f"{REPLAY_LABEL}={self.result.run}"}
        deadline = time.monotonic() + 60 + len(objects) / 10
        while True:
            items = self.client.get("/api/v1/nodes", selector).get("items") or []
            ready = sum(1 for n in items if _ready(n))
            if ready >= len(objects):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{ready} of {len(objects)} replay nodes Ready after "
                    f"{deadline - self.t0:.0f} s: is kwok running with "
                    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake?"
                )
            time.sleep(0.5)

    def _warm_up(self, path: str, body: JsonObj, timeout_s: float = 60.0) -> None:
        """Create ``body`` at ``path`` as a dry run (nothing is stored), again while the
        apiserver answers 429 (the CRD's storage is starting); other errors are left to the
        real creates, which report them."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.client.request("POST", path, body=body, params={"dryRun": "All"})
                return
            except ApiError as exc:
                if exc.status_code != 429 or time.monotonic() > deadline:
                    return
            time.sleep(0.2)

    # -- submitting ------------------------------------------------------------------------

    def _manifests(self, job: Job) -> tuple[JsonObj | None, list[JsonObj]]:
        ns, run = self.opts.namespace, self.result.run
        gang = len(job.tasks) > 1
        group = self.names.name(f"job/{job.id}", f"job {job.id!r}") if gang else ""
        pods = []
        for index, task in enumerate(job.tasks):
            name = self.names.name(str(task.id), f"job {job.id!r} task {task.id!r}")
            pod = pod_object(
                job,
                task,
                name=name,
                group=group,
                namespace=ns,
                run=run,
                scheduler=self.opts.scheduler_name,
                speed=self.opts.speed,
                shares=self.opts.shares,
            )
            self.manifests[name] = pod
            self.watch.tasks[name] = (job, index)
            pods.append(pod)
        return (podgroup_object(job, group, ns, run) if gang else None), pods

    def _submit(self, job: Job, group: JsonObj | None, pods: list[JsonObj], due: float) -> None:
        ns = self.opts.namespace
        self.result.submit_lag_s.append(max(0.0, time.monotonic() - due))
        try:
            if group is not None:
                self._create(f"/apis/{PODGROUP_API}/namespaces/{ns}/podgroups", group)
            for pod in pods:
                self._create(f"/api/v1/namespaces/{ns}/pods", pod)
        except ApiError as exc:
            with self.watch.lock:
                self.result.errors.append(f"job {job.id}: {exc}")

    def prepare(self) -> None:
        """Every object, built before the first request, so bad input stops the replay before
        it has changed the cluster."""
        self.node_objects = [node_object(n, self.result.run) for n in self.nodes]
        self.job_objects = {job.id: self._manifests(job) for job in self.jobs}

    def submit_all(self, progress: Callable[[int, int], None]) -> None:
        for job in self.jobs:
            due = self.t0 + (job.submit_time - self.origin) / self.opts.speed
            while (left := due - time.monotonic()) > 0:
                time.sleep(min(left, 0.5))
                progress(len(self.watch.finished_jobs), len(self.jobs))
            group, pods = self.job_objects[job.id]
            self.watch.record(ReplayEvent(job.submit_time, "arrive", str(job.id)))
            self.pool.submit(self._submit, job, group, pods, due)

    # -- the end ---------------------------------------------------------------------------

    def wait_done(self, progress: Callable[[int, int], None]) -> None:
        last_change = time.monotonic()
        while len(self.watch.finished_jobs) < len(self.jobs):
            if self.watch.changed.wait(0.5):
                self.watch.changed.clear()
                last_change = time.monotonic()
            progress(len(self.watch.finished_jobs), len(self.jobs))
            if time.monotonic() - last_change > self.opts.stall_s:
                log.info(
                    "replay: nothing changed for %.0f s; %d of %d jobs finished",
                    self.opts.stall_s,
                    len(self.watch.finished_jobs),
                    len(self.jobs),
                )
                return

    def cleanup(self) -> None:
        self.watch.closing.set()
        if self.opts.keep:
            return
        ns, selector = self.opts.namespace, {"labelSelector": f"{REPLAY_LABEL}={self.result.run}"}
        for path in (
            f"/api/v1/namespaces/{ns}/pods",
            f"/apis/{PODGROUP_API}/namespaces/{ns}/podgroups",
            "/api/v1/nodes",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
        ):
            try:
                self.client.request("DELETE", path, params=selector)
            except ApiError as exc:
                log.warning("replay cleanup %s: %s", path, exc)


def _ready(node: JsonObj) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def replay(
    client: KubeClient,
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    options: ReplayOptions | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ReplayResult:
    """Replay ``jobs`` on kwok copies of ``nodes`` (see the module docstring);
    ``progress(jobs finished, jobs)`` is called about twice a second."""
    run = _Replay(client, nodes, jobs, options or ReplayOptions())
    run.prepare()
    stop = threading.Event()
    watcher = threading.Thread(target=run.watch.run, args=(stop,), name="replay-watch", daemon=True)
    try:
        run.setup()
        watcher.start()
        run.t0 = time.monotonic()
        run.submit_all(progress)
        run.wait_done(progress)
        run.result.end = run.trace_now()
        run.result.wall_s = time.monotonic() - run.t0
    finally:
        stop.set()
        run.cleanup()
        run.pool.shutdown(wait=True)
        watcher.join(timeout=5)
    return run.result
