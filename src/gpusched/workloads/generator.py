"""Seeded generator of gang workloads calibrated to published GPU-cluster statistics.

How a job is drawn (``docs/workloads.md`` derives every number):

* **Size and run time** come from a :class:`~gpusched.workloads.calibration.Calibration` of a
  preset (``helios`` by default, or ``philly``, ``seren``): GPUs per job from a power law over
  powers of two (most jobs 1 GPU, a tail of gangs up to the largest the cluster holds, at most
  ``max_job_gpus``), run time log-normal with the preset's median and mean, clipped to
  ``[1 s, max_runtime_s]``. Both are drawn by *stratified* sampling: job ``i`` gets quantile
  ``u_i = (pi_i + v_i) / n`` (``pi`` a random permutation, ``v_i`` uniform), so each of ``n``
  equal-probability strata holds exactly one job. Each ``u_i`` is still uniform, but a finite
  workload's statistics sit much closer to the targets than with independent draws.
* **Kind:** jobs above 1 GPU are training; a 1-GPU job is training with probability
  ``t * P(1 | training) / P(1)`` (so ``params.training`` of all jobs train), else inference
  or notebook in the ratio ``params.inference : (1 - training - inference)``.
* **Pods:** a training job of ``g`` GPUs is one pod of ``g`` GPUs up to the widest node
  (``W``, 8 on the built-in cluster), else a gang of ``g / W`` pods of ``W`` GPUs that start
  together (``min_available`` = pods). A share ``params.elastic`` of multi-pod gangs (none by
  default) may grow by ``pods // 2`` elastic pods beyond the minimum. 20% of training jobs
  ask for H100 only when the cluster's H100s can hold them. CPU per GPU is 8, 12 or 16 cores
  and memory 64, 96 or 128 GiB, capped at the pod's GPU-proportional share of the richest
  node that can host it.
  Inference pods take ``gpu_share`` in {250, 330, 500, 750, 1000} milli of one GPU, notebooks
  {250, 500, 1000}.
* **Teams and users:** each job goes to a team by kind
  (:data:`~gpusched.workloads.teams.KIND_TEAMS`), to that team's queue, and to one of its users
  (Zipf: user ``k`` submits in proportion to ``1 / k``).
* **Priority class:** inference ``inference-critical``; notebooks and 30% of 1-GPU training
  runs (sweeps) ``best-effort``; other training ``training-batch``. Priorities are left to the
  scheduling config (:func:`~gpusched.workloads.teams.default_scheduling`).
* **Runtime estimate:** a share ``params.estimates`` of users give one, an over-estimate as
  users make them: run time times the user's habitual factor (log-normal, median 2.5, sigma
  0.5) times per-job noise (log-normal, sigma 0.3), at least the run time, rounded up to a
  round value (5, 15, 30 min, 1, 2, 4, 8, 12 h, 1, 2, 3, 7 days).

Arrivals are a Poisson process whose rate is set so the *offered* GPU load
``SUM_j gpus_j * duration_j / (span * cluster_gpus)`` (gang minimum, fractions counted as
fractions) equals ``load``::

    span = SUM_j gpu_seconds_j / (load * cluster_gpus)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from gpusched.model import (
    MILLI_PER_GPU,
    GpuModel,
    Job,
    JobId,
    JobKind,
    Node,
    QueueName,
    Task,
    TaskId,
    TaskShape,
)
from gpusched.workloads.calibration import CALIBRATIONS, Calibration, calibrate
from gpusched.workloads.teams import (
    BEST_EFFORT,
    INFERENCE_CRITICAL,
    KIND_TEAMS,
    TEAMS,
    TRAINING_BATCH,
    Team,
)

__all__ = ["WorkloadParams", "calibration_for", "generate_workload", "largest_gang"]

_ROUND_ESTIMATES = tuple(
    m * 60.0 for m in (5, 15, 30, 60, 120, 240, 480, 720, 1440, 2880, 4320, 10080)
)
_INV_CDF = NormalDist().inv_cdf


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    """Knobs of :func:`generate_workload`.

    Attributes:
        jobs: number of jobs.
        load: offered GPU load (1.0 = the cluster's GPUs busy all the time).
        training: share of jobs that are training jobs (at most 1/2 keeps the median 1 GPU).
        inference: share of jobs that are inference jobs; the rest are notebooks.
        calibration: preset the sizes and run times are calibrated to (``CALIBRATIONS``).
        max_job_gpus: largest job in GPUs (also bounded by what the cluster can hold).
        max_runtime_s: run times are clipped here (the mean is still matched).
        elastic: share of multi-pod training gangs with elastic members beyond the minimum
            (0 by default: the simulator's "requested" GPU metric counts only gang minimums,
            so bound elastic pods would read as held but not requested).
        estimates: share of users who give run-time estimates.
    """

    jobs: int = 1500
    load: float = 0.9
    training: float = 0.45
    inference: float = 0.35
    calibration: str = "helios"
    max_job_gpus: int = 128
    max_runtime_s: float = 3 * 86_400.0
    elastic: float = 0.0
    estimates: float = 0.6

    def __post_init__(self) -> None:
        if self.calibration not in CALIBRATIONS:
            raise ValueError(
                f"unknown calibration {self.calibration!r}; "
                f"known: {', '.join(sorted(CALIBRATIONS))}"
            )
        if not 0 <= self.estimates <= 1:
            raise ValueError(f"estimates {self.estimates}: expected a share from 0 to 1")
        if not (0 < self.training <= 1 and 0 <= self.inference <= 1 - self.training):
            raise ValueError(
                f"job mix training {self.training}, inference {self.inference}: expected "
                "0 < training and training + inference <= 1"
            )


def _pod_width(nodes: Sequence[Node]) -> int:
    widest = max((n.gpu_count for n in nodes), default=0)
    return 2 ** int(math.log2(widest)) if widest else 0


def _gang_fits(
    nodes: Sequence[Node], gpus: int, width: int, model: str | None = None, share: float = 1.0
) -> bool:
    """Whether ``share`` of the nodes that can host a pod of the job hold all its pods."""
    per_pod = min(gpus, width)
    slots = sum(n.gpu_count // per_pod for n in nodes if model is None or n.gpu_model == model)
    return slots * share >= gpus // per_pod


def largest_gang(nodes: Sequence[Node], limit: int) -> int:
    """The largest power-of-two job (in GPUs, at most ``limit``) that fits in half of the
    cluster's pod slots for it, so it can start while the rest of the cluster keeps working."""
    width = _pod_width(nodes)
    if not width:
        raise ValueError("the cluster has no GPUs; a GPU workload needs at least one GPU node")
    size = 1
    while size * 2 <= limit and _gang_fits(nodes, size * 2, width, share=0.5):
        size *= 2
    return size


def calibration_for(nodes: Sequence[Node], params: WorkloadParams) -> Calibration:
    """The calibration :func:`generate_workload` uses for ``nodes`` and ``params``."""
    return calibrate(
        CALIBRATIONS[params.calibration],
        training_share=params.training,
        max_job_gpus=largest_gang(nodes, params.max_job_gpus),
        runtime_hi=params.max_runtime_s,
    )


def _strata(rng: np.random.Generator, n: int) -> np.ndarray:
    """One uniform quantile per job, one job per stratum ``[k/n, (k+1)/n)``."""
    u: np.ndarray = np.clip((rng.permutation(n) + rng.random(n)) / n, 1e-12, 1 - 1e-12)
    return u


@dataclass(frozen=True, slots=True)
class _User:
    name: str
    queue: str
    estimate_factor: float | None


_TEAM_LIMITS = {t.name: t.limit for t in TEAMS}


class _Draw:
    """Per-job choices that need the cluster and the generator's random source."""

    def __init__(self, nodes: Sequence[Node], params: WorkloadParams, rng: np.random.Generator):
        self.nodes = nodes
        self.params = params
        self.rng = rng
        self.width = _pod_width(nodes)
        self.has_h100 = any(n.gpu_model == "H100" for n in nodes)
        self._caps: dict[tuple[int, str | None], tuple[int, int]] = {}
        self._fits: dict[tuple[int, str | None], bool] = {}
        self.users: dict[str, tuple[list[_User], np.ndarray]] = {}
        for team in TEAMS:
            self.users[team.name] = (self._users(team), _zipf(team.users))

    def _users(self, team: Team) -> list[_User]:
        out = []
        for k in range(1, team.users + 1):
            gives = self.rng.random() < self.params.estimates
            factor = float(self.rng.lognormal(math.log(2.5), 0.5))
            out.append(_User(team.user(k), team.name, factor if gives else None))
        return out

    def user(self, kind: JobKind, gpus: float = 0.0) -> _User:
        """A user of a team that submits ``kind``, among the teams whose limit is at least
        twice ``gpus`` (a job as large as its queue's limit could start only once the whole
        queue is idle: no team submits such jobs)."""
        total = sum(n.gpu_count for n in self.nodes)
        fitting = [
            (name, p)
            for name, p in KIND_TEAMS[kind]
            if (limit := _TEAM_LIMITS[name]) is None or limit * total >= 2 * gpus
        ] or list(KIND_TEAMS[kind])
        names, shares = zip(*fitting, strict=True)
        team = str(self.rng.choice(names, p=np.asarray(shares) / sum(shares)))
        users, weights = self.users[team]
        return users[int(self.rng.choice(len(users), p=weights))]

    def per_gpu_cap(self, per_pod: int, model: str | None) -> tuple[int, int]:
        """Most CPU (milli) and memory (MiB) per GPU a pod of ``per_pod`` GPUs can get
        (memoised: a function of the node list)."""
        key = (per_pod, model)
        cap = self._caps.get(key)
        if cap is None:
            hosts = [
                n
                for n in self.nodes
                if n.gpu_count >= per_pod and (model is None or n.gpu_model == model)
            ]
            cap = self._caps[key] = (
                max(n.cpu_milli // n.gpu_count for n in hosts),
                max(n.memory_mib // n.gpu_count for n in hosts),
            )
        return cap

    def gang_fits(self, gpus: int, model: str | None) -> bool:
        """:func:`_gang_fits` on this cluster, memoised."""
        key = (gpus, model)
        fits = self._fits.get(key)
        if fits is None:
            fits = self._fits[key] = _gang_fits(self.nodes, gpus, self.width, model)
        return fits

    def training(self, name: str, gpus: int, duration: float) -> tuple[Job, str]:
        rng = self.rng
        per_pod = min(gpus, self.width)
        pods = gpus // per_pod
        model = (
            "H100"
            if self.has_h100 and rng.random() < 0.2 and self.gang_fits(gpus, "H100")
            else None
        )
        cpu_cap, mem_cap = self.per_gpu_cap(per_pod, model)
        shape = TaskShape(
            cpu_milli=per_pod * min(int(rng.choice([8, 12, 16])) * 1000, cpu_cap),
            memory_mib=per_pod * min(int(rng.choice([64, 96, 128])) * 1024, mem_cap),
            num_gpu=per_pod,
            gpu_milli=MILLI_PER_GPU,
            gpu_models=frozenset({GpuModel(model)}) if model else frozenset(),
        )
        replicas = pods
        if pods > 1 and rng.random() < self.params.elastic:
            replicas += max(1, pods // 2)
        pclass = BEST_EFFORT if gpus == 1 and rng.random() < 0.3 else TRAINING_BATCH
        jid = JobId(name)
        tasks = tuple(
            Task(TaskId(f"{name}-{k}" if replicas > 1 else name), jid, shape)
            for k in range(replicas)
        )
        return Job(jid, tasks, pods, duration=duration, kind=JobKind.TRAINING), pclass

    def single(self, kind: JobKind, name: str, duration: float) -> tuple[Job, str]:
        rng = self.rng
        if kind is JobKind.INFERENCE:
            share = int(rng.choice([250, 330, 500, 750, 1000]))
            cores, pclass = int(rng.choice([4, 8])), INFERENCE_CRITICAL
        else:
            share = int(rng.choice([250, 500, 1000]))
            cores, pclass = 4, BEST_EFFORT
        shape = TaskShape(cpu_milli=cores * 1000, memory_mib=32 * 1024, num_gpu=1, gpu_milli=share)
        return Job.single(name, shape, duration=duration, kind=kind), pclass

    def estimate(self, user: _User, duration: float) -> float | None:
        if user.estimate_factor is None:
            return None
        factor = max(1.0, user.estimate_factor * float(self.rng.lognormal(0.0, 0.3)))
        wanted = duration * factor
        for value in _ROUND_ESTIMATES:
            if value >= wanted:
                return value
        return math.ceil(wanted / 86_400.0) * 86_400.0


def _zipf(n: int) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1)
    out: np.ndarray = w / w.sum()
    return out


def generate_workload(nodes: Sequence[Node], params: WorkloadParams, seed: int) -> list[Job]:
    """``params.jobs`` jobs for ``nodes``, arrival times scaled to ``params.load``."""
    rng = np.random.default_rng(seed)
    cal = calibration_for(nodes, params)
    n = params.jobs
    # Sizes by inverse CDF of the stratified quantiles.
    size_probs = cal.job_size_probs()
    edges = np.cumsum([p for _, p in size_probs])
    idx = np.minimum(np.searchsorted(edges, _strata(rng, n), side="right"), len(edges) - 1)
    sizes = [size_probs[int(i)][0] for i in idx]
    # Run times: clipped log-normal at stratified quantiles (independent of size).
    median = cal.target.median_runtime_s
    runtimes = [
        min(max(median * math.exp(cal.sigma * _INV_CDF(float(u))), cal.runtime_lo), cal.runtime_hi)
        for u in _strata(rng, n)
    ]
    t = params.training
    p_one = size_probs[0][1]
    train_if_one = t * cal.size_probs[0] / p_one
    infer_share = params.inference / (1 - t) if t < 1 else 0.0
    draw = _Draw(nodes, params, rng)
    jobs: list[Job] = []
    for i, (gpus, runtime) in enumerate(zip(sizes, runtimes, strict=True)):
        duration = round(runtime, 1)
        if gpus > 1 or rng.random() < train_if_one:
            job, pclass = draw.training(f"train-{i:05d}", gpus, duration)
        elif rng.random() < infer_share:
            job, pclass = draw.single(JobKind.INFERENCE, f"infer-{i:05d}", duration)
        else:
            job, pclass = draw.single(JobKind.NOTEBOOK, f"nb-{i:05d}", duration)
        user = draw.user(job.kind, job.gpu_milli / MILLI_PER_GPU)
        jobs.append(
            Job(
                job.id,
                job.tasks,
                job.min_available,
                QueueName(user.queue),
                duration=duration,
                kind=job.kind,
                priority_class=pclass,
                runtime_estimate=draw.estimate(user, duration),
                user=user.name,
            )
        )
    capacity = sum(n.gpu_count for n in nodes)
    gpu_seconds = sum(j.gpu_milli / MILLI_PER_GPU * (j.duration or 0.0) for j in jobs)
    span = gpu_seconds / (params.load * capacity)
    gaps = rng.exponential(1.0, size=len(jobs))
    times = np.cumsum(gaps) / gaps.sum() * span
    return [
        Job(
            j.id,
            j.tasks,
            j.min_available,
            j.queue,
            j.priority,
            round(float(at), 3),
            j.duration,
            j.kind,
            priority_class=j.priority_class,
            runtime_estimate=j.runtime_estimate,
            user=j.user,
        )
        for j, at in zip(jobs, times, strict=True)
    ]
