"""Telling users why: the pending pods' conditions and Events, problems on objects, gauges.

Writes go through the scheduler's thread pool and are awaited at the end of the cycle
(:meth:`Reporter.flush`), so a slow apiserver delays the next cycle, never this one's binds.
A pending pod's ``PodScheduled=False`` condition (reason ``Unschedulable``, the core's
message with its numbers) and its ``FailedScheduling`` Event are written when the message
changes and at most every ``report_interval_s`` per pod.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from gpusched.framework import Cause
from gpusched.live.client import KubeClient
from gpusched.live.feedback import Feedback
from gpusched.live.metrics import Metrics
from gpusched.live.pod_writes import post_event, write_unschedulable
from gpusched.live.snapshot import LiveSnapshot
from gpusched.live.translate_pod import PodInfo
from gpusched.model import TaskId

if TYPE_CHECKING:
    from gpusched.live.scheduler import CycleResult, LiveOptions

__all__ = ["Reporter"]


class Reporter:
    """What the cycle tells users and platform teams (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        options: LiveOptions,
        metrics: Metrics,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.client = client
        self.options = options
        self.metrics = metrics
        self.feedback = Feedback(client, options.scheduler_name)
        self._pool = pool
        self._writes: list[Future[None]] = []
        self._reported: dict[str, tuple[str, float]] = {}

    def submit(self, write: Callable[..., None], *args: object) -> None:
        """Send ``write(*args)`` from the pool; :meth:`flush` waits for it."""
        self._writes.append(self._pool.submit(write, *args))

    def flush(self) -> None:
        """Wait for this cycle's writes (an exception in one is raised here)."""
        for write in self._writes:
            write.result()
        self._writes.clear()

    def problems(self, live: LiveSnapshot, result: CycleResult) -> None:
        """Pods and PodGroups that cannot be scheduled as written: say why, on them."""
        for pod, problem in live.problems.values():
            self.unschedulable(pod, problem, result)
        for group, problem in live.group_problems.values():
            self.submit(self.feedback.podgroup, group, problem)
        self.feedback.forget(set(live.group_problems))

    def unschedulable(
        self, pod: PodInfo, message: str, result: CycleResult, cause: Cause | None = None
    ) -> None:
        """Set PodScheduled=False/Unschedulable with ``message`` and emit an Event, unless the
        pod already says so or was told less than ``report_interval_s`` ago; ``cause`` (the
        status's, ``other`` when none) is counted in ``gpusched_unschedulable_pods_by_cause``."""
        result.unschedulable[pod.key] = message
        result.causes[pod.key] = (cause or Cause.OTHER).value
        now = time.monotonic()
        last = self._reported.get(pod.key)
        same_on_pod = pod.scheduled_reason == "Unschedulable" and pod.scheduled_message == message
        if same_on_pod or (last is not None and now - last[1] < self.options.report_interval_s):
            return
        self._reported[pod.key] = (message, now)
        event = last is None or last[0] != message
        self.submit(
            write_unschedulable, self.client, self.options.scheduler_name, pod, message, event
        )

    def event(self, pod: PodInfo, kind: str, reason: str, message: str) -> None:
        """An Event on ``pod``, sent now (binding and eviction outcomes)."""
        post_event(
            self.client, self.options.scheduler_name, pod, kind=kind, reason=reason, message=message
        )

    def observe(self, live: LiveSnapshot, result: CycleResult) -> None:
        """The cycle's gauges: GPU capacity and allocation, pending pods per queue,
        unschedulable pods."""
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
        by_cause = Counter(result.causes.values())
        for cause in Cause:  # every cause, so one that cleared reads 0
            self.metrics.unschedulable_by_cause.labels(cause.value).set(by_cause[cause.value])
        # Forget report memos of pods that are gone or placed.
        if len(self._reported) > 4 * (len(result.unschedulable) + 64):
            keep = set(result.unschedulable)
            self._reported = {k: v for k, v in self._reported.items() if k in keep}
