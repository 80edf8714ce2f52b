"""Each queue's decayed usage, which the simulator keeps for fair share between cycles.

The scheduler is pure and keeps nothing from one cycle to the next, so the driver remembers how
much each queue has used lately and passes it in every snapshot (``Snapshot.usage_history``).
It is an exponentially weighted average of the queue's usage ``U_q`` (GPU, CPU and memory
requested by its running jobs and its descendants'), with half-life ``h``::

    H_q(t + dt) = H_q(t) * 2^(-dt/h) + U_q(t) * (1 - 2^(-dt/h))
"""

from __future__ import annotations

from collections.abc import Iterable

from gpusched.framework import RunningJob
from gpusched.framework.quota import job_request
from gpusched.model import CPU, GPU, MEMORY, QueueName, QueueTree

__all__ = ["decay_usage"]


def decay_usage(
    history: dict[QueueName, dict[str, float]],
    queues: QueueTree,
    running: Iterable[RunningJob],
    dt: float,
    half_life_s: float,
) -> None:
    """Advance ``history`` by ``dt`` seconds (> 0) of ``running``'s usage, in place."""
    keep = 0.5 ** (dt / half_life_s)
    usage: dict[QueueName, dict[str, float]] = {}
    for run in running:
        req = job_request(run.job)
        for q in queues.path(run.job.queue) if run.job.queue in queues else ():
            u = usage.setdefault(q, {})
            for x in (GPU, CPU, MEMORY):
                u[x] = u.get(x, 0.0) + req[x]
    for spec in queues:
        hist = history.setdefault(spec.name, {})
        now_usage = usage.get(spec.name, {})
        for x in (GPU, CPU, MEMORY):
            hist[x] = hist.get(x, 0.0) * keep + now_usage.get(x, 0.0) * (1 - keep)
