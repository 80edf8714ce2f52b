"""Seeded generator of a realistic mixed GPU workload (training, inference, notebooks).

Job mix and sizes (per job, drawn independently):

* **training** (45%): pods of ``g`` whole GPUs with ``P(g=1,2,4,8) = .50,.15,.15,.20``; an 8-GPU
  job is a gang of ``r`` pods with ``P(r=1,2,4) = .70,.20,.10``. So most jobs are small and a
  tail is large, as in the published traces (median 1 GPU everywhere; means of 1.9-5.7 GPUs
  for Philly, Helios and Seren). Run time log-normal, median 30 min, ``sigma = 1.6``
  (heavy-tailed like Philly's 874 s median / 18,006 s mean). 20% ask for H100 only.
* **inference** (35%): one pod, a fraction of one GPU: ``gpu_share`` in
  {250, 330, 500, 750, 1000} milli; 4-8 cores; run time log-normal, median 4 h, ``sigma = 1``.
* **notebook** (20%): one pod, {250, 500, 1000} milli; 4 cores; median 1 h, ``sigma = 0.8``.

CPU per GPU pod follows the GPU count (8-16 cores per GPU), memory 64-128 GiB per GPU for
training. Run times are capped at 3 days.

Arrivals are a Poisson process whose rate is set so the *offered* GPU load
``SUM_j gpus_j * duration_j / (span * cluster_gpus)`` equals ``load`` (default 0.9)::

    span = SUM_j gpu_seconds_j / (load * cluster_gpus)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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

__all__ = ["WorkloadParams", "generate_workload"]

_MAX_DURATION = 3 * 86_400.0


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    """Knobs of :func:`generate_workload`."""

    jobs: int = 1500
    load: float = 0.9
    training: float = 0.45
    inference: float = 0.35


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> float:
    return float(min(rng.lognormal(np.log(median), sigma), _MAX_DURATION))


def _training(rng: np.random.Generator, name: str, models: Sequence[str]) -> Job:
    gpus = int(rng.choice([1, 2, 4, 8], p=[0.50, 0.15, 0.15, 0.20]))
    replicas = int(rng.choice([1, 2, 4], p=[0.70, 0.20, 0.10])) if gpus == 8 else 1
    want_h100 = "H100" in models and rng.random() < 0.2
    shape = TaskShape(
        cpu_milli=gpus * int(rng.choice([8, 12, 16])) * 1000,
        memory_mib=gpus * int(rng.choice([64, 96, 128])) * 1024,
        num_gpu=gpus,
        gpu_milli=MILLI_PER_GPU,
        gpu_models=frozenset({GpuModel("H100")}) if want_h100 else frozenset(),
    )
    jid = JobId(name)
    tasks = tuple(
        Task(TaskId(f"{name}-{i}" if replicas > 1 else name), jid, shape) for i in range(replicas)
    )
    return Job(
        jid,
        tasks,
        replicas,
        QueueName("default"),
        0,
        0.0,
        _lognormal(rng, 1800, 1.6),
        JobKind.TRAINING,
    )


@dataclass(frozen=True, slots=True)
class _SingleKind:
    """How single-pod fractional jobs of one kind are drawn."""

    kind: JobKind
    prefix: str
    shares: tuple[int, ...]
    cores: tuple[int, ...]
    mem_gib: int
    median_s: float
    sigma: float

    def draw(self, rng: np.random.Generator, i: int) -> Job:
        shape = TaskShape(
            cpu_milli=int(rng.choice(self.cores)) * 1000,
            memory_mib=self.mem_gib * 1024,
            num_gpu=1,
            gpu_milli=int(rng.choice(self.shares)),
        )
        duration = _lognormal(rng, self.median_s, self.sigma)
        return Job.single(f"{self.prefix}-{i:05d}", shape, duration=duration, kind=self.kind)


_INFERENCE = _SingleKind(
    JobKind.INFERENCE, "infer", (250, 330, 500, 750, 1000), (4, 8), 32, 4 * 3600, 1.0
)
_NOTEBOOK = _SingleKind(JobKind.NOTEBOOK, "nb", (250, 500, 1000), (4,), 32, 3600, 0.8)


def generate_workload(nodes: Sequence[Node], params: WorkloadParams, seed: int) -> list[Job]:
    """``params.jobs`` jobs for ``nodes``, arrival times scaled to ``params.load``."""
    rng = np.random.default_rng(seed)
    models = sorted({n.gpu_model for n in nodes if n.gpu_model})
    jobs: list[Job] = []
    for i in range(params.jobs):
        u = rng.random()
        if u < params.training:
            job = _training(rng, f"train-{i:05d}", models)
        elif u < params.training + params.inference:
            job = _INFERENCE.draw(rng, i)
        else:
            job = _NOTEBOOK.draw(rng, i)
        jobs.append(job)
    capacity = sum(n.gpu_count for n in nodes) or 1
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
            round(float(t), 3),
            j.duration,
            j.kind,
        )
        for j, t in zip(jobs, times, strict=True)
    ]
