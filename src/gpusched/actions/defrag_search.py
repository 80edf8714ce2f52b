"""The search behind :mod:`gpusched.actions.defrag`: which running jobs to move, and where.

Three steps, cheapest first (the rules and the bound are stated in :mod:`.defrag`):

1. :func:`node_options` -- per node of the pending job's target nodes ``S``, the cheapest
   movers whose release lets one more task of the job's largest shape fit there, checked on one
   row of the arrays (free CPU, memory and per-GPU shares)::

       fit(row) = min(cpu // c, mem // m, #{g : free_g >= s} // k)     k GPUs of share s
                = min(cpu // c, mem // m, SUM_g free_g // s)           one GPU, share s < 1000

   movers on the node are taken by loss (cheapest first) until ``fit`` grows, then each is
   given back (dearest first) when ``fit`` still grows without it;
2. :func:`choose` -- options by loss per slot gained until the job's missing slots are
   covered (at most ``max_moves`` jobs);
3. :func:`trial` -- on a scratch copy: release the movers, place the job with the profile's
   own filters, scores and GPU picker, then re-place every mover (most GPUs first) pinned to
   the GPU model it was on. Only the trial is exact; steps 1 and 2 only choose what to try.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import Allocation, RunningJob, Session, Statement
from gpusched.model import MILLI_PER_GPU, GpuModel, Job, JobId, Task, TaskId, TaskShape

__all__ = ["Mover", "NodeOption", "choose", "movers_of", "node_options", "trial"]


@dataclass(frozen=True, slots=True, eq=False)
class Mover:
    """A running job that may be moved: its bound tasks with their allocations, and what
    moving it costs (``loss``, GPU-seconds; see :mod:`.defrag`)."""

    run: RunningJob
    allocs: tuple[tuple[Task, Allocation], ...]
    gpu_milli: int
    loss: float
    nodes: frozenset[int]

    @property
    def job_id(self) -> JobId:
        return self.run.job.id


def movers_of(session: Session, runs: Sequence[RunningJob], restart_s: float) -> list[Mover]:
    """One :class:`Mover` per job of ``runs`` holding any allocation, cheapest first::

    loss = gpus_held * (now - start + restart_s)      gpus_held = SUM milli over bound tasks / 1000
    """
    allocations = session.state.allocations
    now = session.snapshot.now
    out = []
    for run in runs:
        allocs = tuple((t, a) for t in run.job.tasks if (a := allocations.get(t.id)) is not None)
        if not allocs:
            continue
        milli = sum(a.gpu_milli * len(a.gpus) for _, a in allocs)
        loss = milli / MILLI_PER_GPU * (now - run.start + restart_s)
        out.append(Mover(run, allocs, milli, loss, frozenset(a.node for _, a in allocs)))
    out.sort(key=lambda m: (m.loss, m.run.job.id))
    return out


class _Row:
    """One node's free CPU, memory and GPU shares as movers leave it or come back (plain
    Python integers: a row has a few GPUs, and NumPy costs more than it saves here)."""

    __slots__ = ("cpu", "gpu", "mem", "milli", "node", "shape")

    def __init__(self, session: Session, node: int, shape: TaskShape) -> None:
        state = session.state
        self.node = node
        self.shape = shape
        whole = session.profile.gpu_as_integer and shape.is_sharing
        self.milli = MILLI_PER_GPU if whole else shape.gpu_milli
        self.cpu = int(state.cpu_free[node])
        self.mem = int(state.mem_free[node])
        self.gpu: list[int] = state.gpu_free[node].tolist()

    def add(self, mover: Mover, sign: int = 1) -> None:
        for _, a in mover.allocs:
            if a.node != self.node:
                continue  # a gang's tasks elsewhere free nothing here
            self.cpu += sign * a.cpu_milli
            self.mem += sign * a.memory_mib
            for g in a.gpus:
                self.gpu[g] += sign * a.gpu_milli

    def fit(self) -> int:
        """Tasks of the shape this row can take (module docstring)."""
        s = self.shape
        n = 1 << 30
        if s.cpu_milli:
            n = self.cpu // s.cpu_milli
        if s.memory_mib:
            n = min(n, self.mem // s.memory_mib)
        if s.num_gpu:
            m = self.milli
            if m >= MILLI_PER_GPU or s.num_gpu > 1:
                slots = sum(1 for g in self.gpu if g >= m) // s.num_gpu
            else:
                slots = sum(g // m for g in self.gpu)
            n = min(n, slots)
        return max(n, 0)


@dataclass(frozen=True, slots=True)
class NodeOption:
    """Moving ``movers`` off ``node`` gains ``gained`` slots for the job there."""

    node: int
    movers: tuple[Mover, ...]
    gained: int
    loss: float


def node_options(
    session: Session,
    shape: TaskShape,
    target: NDArray[np.bool_],
    fit_now: NDArray[np.int64],
    movers: Sequence[Mover],
    *,
    max_nodes: int,
) -> list[NodeOption]:
    """Step 1 of the module docstring on the ``max_nodes`` target nodes with movers that have
    the most free GPU (then the first), cheapest per slot first."""
    on_node: dict[int, list[Mover]] = {}
    for m in movers:  # already cheapest first
        for node in m.nodes:
            if target[node]:
                on_node.setdefault(node, []).append(m)
    idle = session.state.gpu_idle
    nodes = sorted(on_node, key=lambda n: (-int(idle[n]), n))[:max_nodes]
    out = []
    for node in nodes:
        candidates = on_node[node]
        row = _Row(session, node, shape)
        before = int(fit_now[node])
        taken: list[Mover] = []
        for m in candidates:
            row.add(m)
            taken.append(m)
            if row.fit() > before:
                break
        else:
            continue
        kept: list[Mover] = []
        for m in sorted(taken, key=lambda m: -m.loss):
            row.add(m, -1)
            if row.fit() <= before:
                row.add(m)
                kept.append(m)
        out.append(NodeOption(node, tuple(kept), row.fit() - before, sum(m.loss for m in kept)))
    out.sort(key=lambda o: (o.loss / o.gained, o.loss, o.node))
    return out


def choose(
    options: Sequence[NodeOption], need: int, max_moves: int
) -> tuple[list[Mover], int] | None:
    """Step 2: the movers of the first options (cheapest per slot) that add ``need`` slots,
    and how many options that took; ``None`` when that takes more than ``max_moves`` jobs or
    the options run out."""
    chosen: dict[JobId, Mover] = {}
    slots = 0
    for used, opt in enumerate(options, start=1):
        for m in opt.movers:
            chosen.setdefault(m.job_id, m)
        if len(chosen) > max_moves:
            return None
        slots += opt.gained
        if slots >= need:
            return list(chosen.values()), used
    return None


def _pinned(task: Task, model: GpuModel | None) -> Task:
    """``task`` restricted to GPU model ``model`` (unchanged for CPU-only tasks)."""
    if model is None or not task.shape.num_gpu:
        return task
    return Task(task.id, task.job, replace(task.shape, gpu_models=frozenset({model})))


def trial(
    session: Session, job: Job, gang: Sequence[Task], movers: Sequence[Mover]
) -> dict[TaskId, Allocation] | None:
    """Step 3: where the job's gang and every mover land once the movers are released, or
    ``None`` if anything does not fit. Nodes reserved for the job itself are open to the
    movers (the job runs now; its reservation goes). The session's state is untouched."""
    original = session.state
    scratch = original.copy()
    session.state = scratch
    blocked = session.blocked_nodes
    session.blocked_nodes = {n: held for n, held in blocked.items() if held[1] != job.id}
    try:
        scratch.release_many(t.id for m in movers for t, _ in m.allocs)
        stmt = Statement(scratch)
        session.begin_job(job)
        for task in gang:
            if not session.place_task(task, stmt, explain=False).ok:
                return None
        models = original.models
        for m in sorted(movers, key=lambda m: (-m.gpu_milli, m.job_id)):
            session.begin_job(m.run.job)
            for task, old in m.allocs:
                mid = int(original.model_id[old.node])
                pinned = _pinned(task, models[mid] if mid >= 0 else None)
                if not session.place_task(pinned, stmt, explain=False).ok:
                    return None
        return {a.task: a for a in stmt.allocations}
    finally:
        session.state = original
        session.blocked_nodes = blocked
