"""Calibration of generated workloads to published GPU-cluster statistics.

The targets are the per-trace statistics of GPU jobs in AcmeTrace's ``cluster_summary.csv``
(Hu et al., NSDI '24; ``../shared/traces/acme-summary``): mean and median GPUs per job, mean and
median run time, and the largest job. Nothing else about the joint distributions is published,
so the generator matches these marginals and assumes the rest (see ``docs/workloads.md``):

**Run time** is log-normal with median ``m`` and shape ``sigma``, clipped to ``[lo, hi]``
(``lo`` = 1 s, ``hi`` = the simulation's cap, 3 days by default). Unclipped, a log-normal has
``median = m`` and ``mean = m * exp(sigma^2 / 2)``, so::

    sigma0 = sqrt(2 * ln(mean / median))

Clipping moves mass from the tail to ``hi`` and lowers the mean, so ``sigma`` is solved (by
bisection, from ``sigma0`` upwards) from the clipped mean::

    E[clip(X, lo, hi)] = lo * Phi(a) + m * exp(sigma^2/2) * (Phi(b - sigma) - Phi(a - sigma))
                         + hi * (1 - Phi(b)),      a = ln(lo/m)/sigma,  b = ln(hi/m)/sigma

The median stays ``m`` while ``lo < m < hi``.

**GPUs per job.** A fraction ``t`` of jobs are training jobs; the others (inference,
notebooks) use one GPU (or part of one). Training jobs use ``2^k`` GPUs, ``k = 0..K``, with a
truncated power law ``P(k) ~ r^k`` (a geometric law in ``log2`` size); ``2^K`` is the largest
job the cluster can hold (bounded by ``max_job_gpus``). The overall mean is
``(1 - t) + t * M(r)`` with ``M(r) = SUM 2^k r^k / SUM r^k``, increasing in ``r``, so::

    M(r) = (mean - (1 - t)) / t          solved for r by bisection

and the median is 1 whenever ``P(1 GPU) = (1 - t) + t * P(k=0) >= 1/2`` (always for
``t <= 1/2``). A job's "GPUs" are the devices its gang minimum touches
(``min_available * gpus per pod``); a fractional inference pod counts one, as it would in a
cluster without sharing, which is how the traces count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median

from gpusched.model import MILLI_PER_GPU, Job

__all__ = [
    "CALIBRATIONS",
    "Calibration",
    "Target",
    "WorkloadStats",
    "calibrate",
    "clipped_lognormal_mean",
    "lognormal_sigma",
    "measure",
    "power_law_mean",
    "solve_power_law",
]

_PHI = NormalDist().cdf


@dataclass(frozen=True, slots=True)
class Target:
    """Published statistics of one trace's GPU jobs (AcmeTrace ``cluster_summary.csv``)."""

    name: str
    mean_gpus: float
    median_gpus: float
    mean_runtime_s: float
    median_runtime_s: float
    max_gpus: int
    source: str


CALIBRATIONS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("helios", 3.716, 1.0, 6651.681, 206.0, 2048, "SenseTime Helios, 2020 (SC '21)"),
        Target("philly", 1.928, 1.0, 18006.055, 874.0, 128, "Microsoft Philly, 2017 (ATC '19)"),
        Target("seren", 5.68, 1.0, 1414.335, 122.0, 1024, "Shanghai AI Lab Seren, 2023 (NSDI '24)"),
    )
}
"""Presets by name; ``helios`` is the default (the middle of the three in size and run time)."""


def clipped_lognormal_mean(median: float, sigma: float, lo: float, hi: float) -> float:
    """``E[clip(X, lo, hi)]`` for ``X`` log-normal with ``median`` and ``sigma`` (module doc)."""
    if sigma <= 0:
        return min(max(median, lo), hi)
    a = math.log(lo / median) / sigma
    b = math.log(hi / median) / sigma
    body = median * math.exp(sigma * sigma / 2) * (_PHI(b - sigma) - _PHI(a - sigma))
    return lo * _PHI(a) + body + hi * (1 - _PHI(b))


def lognormal_sigma(median: float, mean: float, lo: float, hi: float) -> tuple[float, float]:
    """``(sigma, achieved mean)``: the smallest ``sigma >= sigma0`` whose clipped mean reaches
    ``mean``; if no ``sigma`` does (a cap far too low), the one that comes closest."""
    if not 0 < median < mean:
        raise ValueError(f"need 0 < median < mean; got median {median}, mean {mean}")
    if not lo < median < hi:
        raise ValueError(f"the median {median} s must lie inside the clip range [{lo}, {hi}]")
    sigma0 = math.sqrt(2 * math.log(mean / median))
    step, s = 0.01, sigma0
    best = (sigma0, clipped_lognormal_mean(median, sigma0, lo, hi))
    while s < 12.0:
        value = clipped_lognormal_mean(median, s, lo, hi)
        if value >= mean:
            low, high = s - step, s
            for _ in range(60):
                mid = (low + high) / 2
                if clipped_lognormal_mean(median, mid, lo, hi) < mean:
                    low = mid
                else:
                    high = mid
            return high, clipped_lognormal_mean(median, high, lo, hi)
        if value > best[1]:
            best = (s, value)
        s += step
    return best


def power_law_mean(r: float, sizes: Sequence[int]) -> float:
    """``SUM s_k r^k / SUM r^k`` over ``sizes`` (``s_k = 2^k``)."""
    weights = [r**k for k in range(len(sizes))]
    return sum(w * s for w, s in zip(weights, sizes, strict=True)) / sum(weights)


def solve_power_law(target_mean: float, sizes: Sequence[int]) -> float:
    """The ratio ``r`` with ``power_law_mean(r, sizes) == target_mean`` (clamped to the
    achievable range ``[1, max(sizes)]``, approached as ``r -> 0`` and ``r -> inf``)."""
    if len(sizes) == 1:
        return 1.0
    lo, hi = -30.0, 30.0  # log r
    for _ in range(100):
        mid = (lo + hi) / 2
        if power_law_mean(math.exp(mid), sizes) < target_mean:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The generator's distributions, derived from a :class:`Target` (module docstring).

    Attributes:
        target: what was aimed at.
        training_share: ``t``, the fraction of jobs that are training jobs.
        sizes: GPU counts of training jobs (powers of two up to the largest that fits).
        size_probs: ``P(size)`` for a training job (power law with ratio ``ratio``).
        ratio: the power-law ratio ``r``.
        sigma: log-normal shape of run times; ``sigma0`` the unclipped value.
        runtime_lo, runtime_hi: clip range of run times in seconds.
        expected_mean_gpus, expected_median_gpus, expected_mean_runtime_s: what the
            distributions give exactly (equal to the target unless a bound made it unreachable;
            ``notes`` then says why).
    """

    target: Target
    training_share: float
    sizes: tuple[int, ...]
    size_probs: tuple[float, ...]
    ratio: float
    sigma: float
    sigma0: float
    runtime_lo: float
    runtime_hi: float
    expected_mean_gpus: float
    expected_median_gpus: float
    expected_mean_runtime_s: float
    notes: tuple[str, ...] = ()

    def job_size_probs(self) -> list[tuple[int, float]]:
        """``P(size)`` over all jobs: non-training jobs are size 1."""
        t = self.training_share
        out = [(s, t * p) for s, p in zip(self.sizes, self.size_probs, strict=True)]
        out[0] = (1, out[0][1] + (1 - t))
        return out


def calibrate(
    target: Target,
    *,
    training_share: float,
    max_job_gpus: int,
    runtime_lo: float = 1.0,
    runtime_hi: float = 3 * 86_400.0,
) -> Calibration:
    """Distributions that give ``target``'s statistics (see module docstring)."""
    if not 0 < training_share <= 1:
        raise ValueError(f"training share {training_share} must be in (0, 1]")
    notes: list[str] = []
    top = max(1, min(max_job_gpus, target.max_gpus))
    sizes = tuple(2**k for k in range(int(math.log2(top)) + 1))
    t = training_share
    wanted = (target.mean_gpus - (1 - t)) / t
    ratio = solve_power_law(wanted, sizes)
    weights = [ratio**k for k in range(len(sizes))]
    probs = tuple(w / sum(weights) for w in weights)
    mean_gpus = (1 - t) + t * power_law_mean(ratio, sizes)
    if abs(mean_gpus - target.mean_gpus) > 1e-6 * target.mean_gpus:
        notes.append(
            f"mean GPUs/job {target.mean_gpus:g} is out of reach with jobs of 1..{sizes[-1]} "
            f"GPUs and {t:.0%} training jobs; the closest is {mean_gpus:.3g}"
        )
    p_one = (1 - t) + t * probs[0]
    median_gpus = 1.0 if p_one >= 0.5 else float(_median(sizes, probs, t))
    if median_gpus != target.median_gpus:
        notes.append(f"median GPUs/job is {median_gpus:g}, not {target.median_gpus:g}")
    sigma, mean_rt = lognormal_sigma(
        target.median_runtime_s, target.mean_runtime_s, runtime_lo, runtime_hi
    )
    if abs(mean_rt - target.mean_runtime_s) > 1e-6 * target.mean_runtime_s:
        notes.append(
            f"mean run time {target.mean_runtime_s:g} s is out of reach with run times capped "
            f"at {runtime_hi:g} s; the closest is {mean_rt:.0f} s"
        )
    return Calibration(
        target=target,
        training_share=t,
        sizes=sizes,
        size_probs=probs,
        ratio=ratio,
        sigma=sigma,
        sigma0=math.sqrt(2 * math.log(target.mean_runtime_s / target.median_runtime_s)),
        runtime_lo=runtime_lo,
        runtime_hi=runtime_hi,
        expected_mean_gpus=mean_gpus,
        expected_median_gpus=median_gpus,
        expected_mean_runtime_s=mean_rt,
        notes=tuple(notes),
    )


def _median(sizes: Sequence[int], probs: Sequence[float], t: float) -> int:
    acc = 1 - t
    for s, p in zip(sizes, probs, strict=True):
        acc += t * p
        if acc >= 0.5:
            return s
    return sizes[-1]


@dataclass(frozen=True, slots=True)
class WorkloadStats:
    """Measured statistics of a generated workload, in the target's terms."""

    jobs: int
    mean_gpus: float
    median_gpus: float
    max_gpus: int
    mean_gpu_equivalents: float
    mean_runtime_s: float
    median_runtime_s: float
    multi_pod_share: float


def measure(jobs: Sequence[Job]) -> WorkloadStats:
    """:class:`WorkloadStats` of ``jobs`` (GPU jobs only; GPUs of the gang minimum)."""
    gpu_jobs = [j for j in jobs if j.gpu_milli]
    if not gpu_jobs:
        return WorkloadStats(len(jobs), 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0.0)
    devices = [sum(t.shape.num_gpu for t in j.tasks[: j.min_available]) for j in gpu_jobs]
    runtimes = [j.duration for j in gpu_jobs if j.duration is not None]
    return WorkloadStats(
        jobs=len(gpu_jobs),
        mean_gpus=sum(devices) / len(devices),
        median_gpus=float(median(devices)),
        max_gpus=max(devices),
        mean_gpu_equivalents=sum(j.gpu_milli for j in gpu_jobs) / MILLI_PER_GPU / len(gpu_jobs),
        mean_runtime_s=sum(runtimes) / len(runtimes) if runtimes else 0.0,
        median_runtime_s=float(median(runtimes)) if runtimes else 0.0,
        multi_pod_share=sum(j.min_available > 1 for j in gpu_jobs) / len(gpu_jobs),
    )
