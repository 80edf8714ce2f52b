"""Defragmentation (``defrag``): move running work so that a job blocked by fragmentation fits.

A pending job can wait although the cluster has room for it: the free GPUs are scattered over
nodes, a few per node, and no node (or set of nodes, for a gang) has enough in one place. This
action moves a few running jobs to other nodes in the same cycle so that the job fits, when
that is worth the disruption. It runs after ``backfill``, ``reclaim`` and ``preempt`` (the
most disruptive last), on the jobs they left pending.

**Trigger.** A pending job ``P`` is *fragmented-blocked* when its status is ``Unschedulable``
from placement (its queue admits it now: no quota refusal), it asks for GPUs, none of its tasks
is bound, it asks for no network domain and no MIG instances, and the nodes ``S`` that pass
all its filters but ``node-resources-fit`` (GPU model, constraints, reservations) hold enough
free resources for its whole gang (``G``: milli-GPU, ``C``: CPU, ``M``: memory of its
``min_available`` tasks)::

    SUM_{n in S} gpu_idle(n) >= G_P  and  SUM_{n in S} cpu_free(n) >= C_P
                                     and  SUM_{n in S} mem_free(n) >= M_P

That is fragmentation, not shortage: the room exists but not in any placement.

**Movable jobs.** A running job ``J`` may be moved for ``P`` when it is ``preemptible`` and
``restartable``, asks for no network domain and no MIG instances (a move carries GPU indices,
not instances), has run at least ``min_runtime_s`` since it last started, was evicted or moved
fewer than ``max_evictions`` times (a move counts against the same disruption budget as an
eviction), has priority ``<= P``'s (equal priority may move: the moved job restarts at once,
it does not wait), and was not started or moved in this cycle.

**A move** relocates a whole job: every bound task (the gang and any elastic members) is
stopped and started again in the same cycle, all or nothing, so a gang never runs split and
its ranks restart together. The tasks keep the GPU model they were on, so a move changes no
queue's usage. Nothing is checkpointed: a moved job restarts from the beginning (the simulator
runs its full duration again from the move).

**Worth it?** With ``t_P`` the start ``P`` would get without moves -- its reservation when
``backfill`` gave it one (exact under the run-time estimates), else its estimated start (the
fluid model of :mod:`~gpusched.framework.timeline`, which ignores packing and so errs early:
the gain is never overstated)::

    gain = G_P / 1000 * (t_P - now)                                 GPU-seconds P stops waiting
    loss = SUM_J gpus_J * (now - start_J + restart_s)               progress the movers lose
    move  iff  gain >= factor * loss  and  gain > 0     (factor 2, restart_s 120 s by default)

A job refused by this rule stays pending with the figures in its status.

**Search** (:mod:`.defrag_search`): on at most ``max(max_nodes, 2 k)`` nodes of ``S`` that
hold movers (``k``: the slots ``P`` still lacks; most free GPU first, the closest to fitting),
the cheapest movers that let one more
task of ``P``'s largest shape fit (one-row checks); nodes by loss per slot until ``P``'s
missing slots are covered (at most ``max_moves`` jobs); then a trial on a scratch copy with the
profile's own placement: ``P`` first, then each mover, pinned to its GPU model. A mover that
lands exactly where it was is dropped from the set; if the trial fails the next cheapest node
is added (at most ``max_trials`` trials). The commit replays the trial exactly: the movers'
evictions, ``P``'s binds (nominated for their nodes), and one :class:`~gpusched.framework.plan.
Move` per moved task.

**Bound per cycle.** Pending jobs are scanned in queue order with O(1) checks each (status,
free GPU of the whole cluster, a memo of requests already tried); at most ``max_checks`` (16)
requests get the trigger's mask (one filter pass and three masked sums, O(N) NumPy), and at
most ``max_jobs`` (2) get a search. A job with no later start known (gain 0) stops there. The
movable jobs are listed (one pass over the running jobs, O(R)) once per cycle, only when some
job is fragmented-blocked with a gain; with none movable the action stops there. A search then
costs one row walk on each of at most ``max(max_nodes, 2 k)`` nodes (``max_nodes`` 16) and at
most ``max_trials`` (3) trials of ``|gang| + moved tasks`` placements; a job whose gain cannot
pay for even the cheapest single move costs no row walk.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from gpusched.actions.defrag_search import Mover, choose, movers_of, node_options, trial
from gpusched.framework import (
    Allocation,
    Code,
    Move,
    RunningJob,
    Session,
    Statement,
    Status,
)
from gpusched.framework.domains import task_fit
from gpusched.model import MILLI_PER_GPU, Job, JobId, Task, TaskId

__all__ = ["Defrag"]

_FIT = "node-resources-fit"


class Defrag:
    """Move restartable jobs so that a fragmented-blocked job fits (module docstring)."""

    name = "defrag"
    reason = "moved by defragmentation"

    def __init__(
        self,
        *,
        min_runtime_s: float = 300.0,
        max_evictions: int = 3,
        factor: float = 2.0,
        restart_s: float = 120.0,
        max_jobs: int = 2,
        max_checks: int = 16,
        max_moves: int = 8,
        max_trials: int = 3,
        max_nodes: int = 16,
    ) -> None:
        if factor < 0 or restart_s < 0:
            raise TypeError("defrag: factor and restart_s must be >= 0")
        if min(max_jobs, max_checks, max_moves, max_trials, max_nodes) < 1:
            raise TypeError(
                "defrag: max_jobs, max_checks, max_moves, max_trials and max_nodes must be >= 1"
            )
        self.min_runtime_s = min_runtime_s
        self.max_evictions = max_evictions
        self.factor = factor
        self.restart_s = restart_s
        self.max_jobs = max_jobs
        self.max_checks = max_checks
        self.max_moves = max_moves
        self.max_trials = max_trials
        self.max_nodes = max_nodes

    # -- which jobs ------------------------------------------------------------------------

    def movable(self, session: Session, run: RunningJob) -> bool:
        """Whether ``run`` may be moved at all this cycle (module docstring; the priority
        condition is checked per pending job)."""
        snap = session.snapshot
        job = run.job
        return (
            job.preemptible
            and job.restartable
            and job.topology is None
            and not _uses_mig(job)
            and snap.running.get(job.id) is run  # not started, moved or resized this cycle
            and snap.now - run.start >= self.min_runtime_s
            and snap.evictions.get(job.id, run.evictions) < self.max_evictions
        )

    def execute(self, session: Session) -> None:
        if not any(f.name == _FIT for f in session.profile.filters):
            return  # the trigger needs the resource fit as its own filter
        movers: list[Mover] | None = None
        free_gpu = -1
        checks = searches = 0
        tried: set[tuple[object, ...]] = set()
        for job in session.pending_jobs():
            if searches >= self.max_jobs or checks >= self.max_checks:
                break
            status = session.plan.pending.get(job.id)
            if status is None or status.code is not Code.UNSCHEDULABLE or not job.gpu_milli:
                continue
            if job.id in session.running or job.topology is not None or _uses_mig(job):
                continue
            if free_gpu < 0:
                free_gpu = int(session.state.gpu_idle.sum())
            if free_gpu < job.gpu_milli:
                continue
            key = (job.priority, job.min_available, *(t.shape for t in job.tasks))
            if key in tried:
                continue
            tried.add(key)
            gang = list(job.tasks[: job.min_available])
            if any(t.id in session.state.allocations for t in gang):
                continue
            if session.quota_refusal(job) is not None:
                continue
            checks += 1
            target = self._fragmented(session, job, gang)
            if target is None or self._wait(session, job) <= 0:
                continue
            if movers is None:  # built once per cycle, only for a fragmented-blocked job
                runs = [r for r in session.running.values() if self.movable(session, r)]
                movers = movers_of(session, runs, self.restart_s)
                if not movers:
                    return
            mine = [m for m in movers if m.run.job.priority <= job.priority]
            if not mine:
                continue
            searches += 1
            moved = self._defragment(session, job, gang, target, mine)
            if moved:
                movers = [m for m in movers if m.job_id not in moved]
                free_gpu = -1
                tried.clear()

    def _fragmented(
        self, session: Session, job: Job, gang: Sequence[Task]
    ) -> NDArray[np.bool_] | None:
        """The target nodes ``S`` when ``job`` is fragmented-blocked, else ``None``."""
        rep = _largest(gang)
        session.begin_job(job)
        target = session.feasible(rep, skip=_FIT)
        st = session.state
        memory = sum(t.shape.memory_mib for t in gang)
        if (
            int(st.gpu_idle[target].sum()) < job.gpu_milli
            or int(st.cpu_free[target].sum()) < job.cpu_milli
            or int(st.mem_free[target].sum()) < memory
        ):
            return None
        return target

    # -- one job ---------------------------------------------------------------------------

    def _defragment(
        self,
        session: Session,
        job: Job,
        gang: list[Task],
        target: NDArray[np.bool_],
        movers: list[Mover],
    ) -> set[JobId]:
        """Search, weigh and commit moves for ``job``; the ids of the jobs moved."""
        gain = job.gpu_milli / MILLI_PER_GPU * self._wait(session, job)
        if gain <= 0 or gain < self.factor * movers[0].loss:
            return set()  # not even the cheapest single move would be worth it
        rep = _largest(gang)
        fit_now = task_fit(session.state, rep.shape, target)
        need = max(1, len(gang) - int(fit_now.sum()))
        options = node_options(
            session, rep.shape, target, fit_now, movers, max_nodes=max(self.max_nodes, 2 * need)
        )
        picked = choose(options, need, self.max_moves)
        if picked is None:
            return set()
        chosen, used = picked
        if not self._worth(session, job, gain, chosen):
            return set()
        extra = iter(options[used:])
        for _ in range(self.max_trials):
            placed = trial(session, job, gang, chosen)
            if placed is not None:
                final = [m for m in chosen if not _stays(m, placed)]
                if not self._worth(session, job, gain, final):
                    return set()
                self._commit(session, job, gang, final, placed)
                return {m.job_id for m in final}
            more = next(extra, None)
            if more is None:
                return set()
            known = {m.job_id for m in chosen}
            chosen = chosen + [m for m in more.movers if m.job_id not in known]
            if len(chosen) > self.max_moves:
                return set()
        return set()

    def _wait(self, session: Session, job: Job) -> float:
        """``t_P - now`` (module docstring); 0 when the cycle gave no start for ``job``."""
        now = session.snapshot.now
        res = session.plan.reservations.get(job.id)
        start = res.start if res is not None else session.plan.estimated_start.get(job.id, now)
        return max(start - now, 0.0)

    def _worth(self, session: Session, job: Job, gain: float, movers: Sequence[Mover]) -> bool:
        """The worth-it rule; a refused job's status says why, with the figures."""
        loss = sum(m.loss for m in movers)
        if gain >= self.factor * loss:
            return True
        status = session.plan.pending.get(job.id)
        if status is not None:
            note = (
                f"defragmentation: moving {len(movers)} job(s) would lose "
                f"{loss / 3600:.2f} GPU-h of progress; starting now gains {gain / 3600:.2f} "
                f"GPU-h, less than {self.factor:g}x that"
            )
            session.plan.pending[job.id] = Status(
                status.code, (*status.reasons, note), status.cause
            )
        return False

    def _commit(
        self,
        session: Session,
        job: Job,
        gang: list[Task],
        movers: list[Mover],
        placed: dict[TaskId, Allocation],
    ) -> None:
        """Replay the trial on the session: evictions, the job's binds, the movers' restarts."""
        plan = session.plan
        reason = f"{self.reason} for {job.id}"
        for m in movers:
            session.evict(m.run.job.id, job.id, reason)
        stmt = Statement(session.state)
        for task in gang:
            a = placed[task.id]
            stmt.allocate(task, a.node, a.gpus, a.gpu_milli)
        plan.pending.pop(job.id, None)
        plan.reservations.pop(job.id, None)
        plan.estimated_start.pop(job.id, None)
        for node in [n for n, (_, owner) in session.blocked_nodes.items() if owner == job.id]:
            del session.blocked_nodes[node]
        before = len(plan.binds)
        session.commit_tasks(job, stmt)
        plan.nominations[job.id] = tuple(sorted({b.node for b in plan.binds[before:]}))
        names = session.state.names
        now = session.snapshot.now
        for m in movers:
            run = m.run
            stmt = Statement(session.state)
            for task, old in m.allocs:
                a = placed[task.id]
                stmt.allocate(task, a.node, a.gpus, a.gpu_milli)
                plan.moves.append(
                    Move(
                        task.id,
                        run.job.id,
                        job.id,
                        names[old.node],
                        old.gpus,
                        names[a.node],
                        a.gpus,
                        a.gpu_milli,
                    )
                )
            stmt.commit()
            if session.quota is not None:
                session.quota.charge(run.job.queue, session.charge_of(run.job))
            session.running[run.job.id] = RunningJob(run.job, now, run.evictions + 1)
            session.running_epoch += 1
            session.evicted.discard(run.job.id)


def _uses_mig(job: Job) -> bool:
    """Whether ``job`` asks for MIG instances (a move does not carry instances: such jobs are
    neither moved nor defragmented for)."""
    return any(t.shape.mig_profile for t in job.tasks)


def _largest(gang: Sequence[Task]) -> Task:
    """The gang's task with the most GPU (then CPU): the shape whose fit the search counts."""
    return max(gang, key=lambda t: (t.shape.total_gpu_milli, t.shape.cpu_milli))


def _stays(mover: Mover, placed: dict[TaskId, Allocation]) -> bool:
    """Whether the trial put every task of ``mover`` back exactly where it was."""
    return all(placed[t.id].node == a.node and placed[t.id].gpus == a.gpus for t, a in mover.allocs)
