"""What a replay sees: one watch on its pods, turned into :class:`ReplayEvent` in trace seconds.

:func:`gpusched.live.replay.replay` creates the objects; this module records what the cluster
then does with them, from a thread of its own: when each pod was first seen bound (node, GPU
indices from ``gpusched.dev/gpus``), when it Succeeded, why a job that has not started is
pending (its pods' ``PodScheduled`` message), and pods deleted before they finished (evictions:
the pod is created again, as a Job controller would, and the job counts as preempted). A watch
that expires (410) re-lists. It is kept apart from the driver because it shares nothing with
the submitting side but the result, the lock that guards it and the clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpusched.live.client import ApiError, JsonObj, KubeClient
from gpusched.live.replay_objects import REPLAY_LABEL, ReplayNames
from gpusched.live.translate import GPUS_ANNOTATION
from gpusched.model import MILLI_PER_GPU, Job

__all__ = ["ReplayEvent", "ReplayResult", "ReplayWatch"]

log = logging.getLogger("gpusched.live.replay")  # as before the split: one logger per replay


@dataclass(frozen=True, slots=True)
class ReplayEvent:
    """What the replay saw, at ``time`` trace seconds: ``kind`` is ``arrive``, ``bind``,
    ``complete`` or ``evict``; ``task``/``node``/``gpus``/``gpu_milli`` as for a bind."""

    time: float
    kind: str
    job: str
    task: str = ""
    node: str = ""
    gpus: tuple[int, ...] | None = None
    gpu_milli: int = 0


@dataclass(slots=True)
class ReplayResult:
    """Events in trace seconds, why jobs that never started were pending, and timings."""

    run: str
    events: list[ReplayEvent] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    end: float = 0.0
    wall_s: float = 0.0
    submit_lag_s: list[float] = field(default_factory=list)
    recreated: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _PodState:
    uid: str = ""
    bound: bool = False
    finished: bool = False


class ReplayWatch:
    """The replay's pods as seen so far (module docstring); ``lock`` guards ``result``, the
    pods and ``finished_jobs``, and ``changed`` is set whenever something was recorded."""

    def __init__(
        self,
        client: KubeClient,
        result: ReplayResult,
        names: ReplayNames,
        *,
        namespace: str,
        shares: bool,
        clock: Callable[[], float],
        recreate: Callable[[str], None],
    ) -> None:
        self.client = client
        self.result = result
        self.names = names
        self.namespace = namespace
        self.shares = shares
        self.clock = clock  # trace seconds now
        self.recreate = recreate  # create the pod of this name again
        self.lock = threading.Lock()
        self.changed = threading.Event()
        self.closing = threading.Event()
        self.pods: dict[str, _PodState] = {}
        self.tasks: dict[str, tuple[Job, int]] = {}  # pod name -> job, task index
        self.finished_jobs: set[str] = set()

    def record(self, event: ReplayEvent) -> None:
        with self.lock:
            self.result.events.append(event)
        self.changed.set()

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop`` is set (in a thread of its own)."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        selector = {"labelSelector": f"{REPLAY_LABEL}={self.result.run}"}
        version = ""
        while not stop.is_set():
            try:
                if not version:
                    listing = self.client.get(path, selector)
                    for obj in listing.get("items") or []:
                        self._seen(obj)
                    version = str((listing.get("metadata") or {}).get("resourceVersion", ""))
                params = {**selector, "resourceVersion": version, "allowWatchBookmarks": "true"}
                for event in self.client.watch(
                    path, {**params, "timeoutSeconds": "60"}, timeout_s=60
                ):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiError("WATCH", path, int(obj.get("code") or 0), obj)
                    version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                    if event.get("type") == "DELETED":
                        self._deleted(obj)
                    elif event.get("type") in ("ADDED", "MODIFIED"):
                        self._seen(obj)
                    if stop.is_set():
                        return
            except ApiError as exc:
                if exc.status_code == 410:
                    version = ""  # expired: list again (a pod deleted meanwhile stays unseen)
                else:
                    log.warning("replay watch: %s; retrying", exc)
                    stop.wait(1.0)

    def _seen(self, obj: JsonObj) -> None:
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        name = meta["name"]
        known = self.tasks.get(name)
        if known is None:
            return
        job, index = known
        task = job.tasks[index]
        now = self.clock()
        with self.lock:
            state = self.pods.setdefault(name, _PodState())
            if state.uid != meta.get("uid"):
                state.uid, state.bound, state.finished = str(meta.get("uid")), False, False
            bind = bool(spec.get("nodeName")) and not state.bound
            done = status.get("phase") == "Succeeded" and not state.finished
            state.bound = state.bound or bind
            state.finished = state.finished or done
        if bind:
            shape = task.shape
            whole = shape.num_gpu and shape.gpu_milli < MILLI_PER_GPU and not self.shares
            self.record(
                ReplayEvent(
                    now,
                    "bind",
                    str(job.id),
                    str(task.id),
                    spec["nodeName"],
                    _indices((meta.get("annotations") or {}).get(GPUS_ANNOTATION)),
                    MILLI_PER_GPU if whole else 0,
                )
            )
        if done:
            self.record(ReplayEvent(now, "complete", str(job.id), str(task.id)))
            self._check_finished(job)
        elif not state.bound:
            for cond in status.get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("message"):
                    self.result.statuses[str(job.id)] = str(cond["message"])
        if bind and job.duration is None:
            self._check_finished(job)

    def _check_finished(self, job: Job) -> None:
        with self.lock:
            states = [self.pods.get(self.names.taken.get(str(t.id), "")) for t in job.tasks]
            bound = [s for s in states if s is not None and s.bound]
            finished = sum(1 for s in bound if s.finished)
            if len(bound) >= job.min_available and (job.duration is None or finished == len(bound)):
                self.finished_jobs.add(str(job.id))
        self.changed.set()

    def _deleted(self, obj: JsonObj) -> None:
        name = obj["metadata"]["name"]
        if self.closing.is_set() or name not in self.tasks:
            return
        with self.lock:
            state = self.pods.pop(name, None)
        if state is not None and state.finished:
            return
        job = self.tasks[name][0]
        if state is not None and state.bound:
            task = job.tasks[self.tasks[name][1]]
            self.record(ReplayEvent(self.clock(), "evict", str(job.id), str(task.id)))
        self.result.recreated += 1
        self.recreate(name)


def _indices(text: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(g) for g in str(text).split(",")) if text else None
    except ValueError:
        return None
