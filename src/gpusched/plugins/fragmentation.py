"""GPU fragmentation with respect to a target workload (the FGD paper's measure).

The *target workload* is a distribution over task types ``m`` (CPU, per-GPU milli, GPU count,
allowed models) with probabilities ``p_m``. For node ``n`` with free CPU ``c``, per-GPU free
shares ``f_g`` and idle GPU ``idle(n) = SUM_g f_g``::

    frag_m(n) = SUM_{g : f_g < milli_m} f_g     if m needs GPUs, accepts n's model,
                                                 c >= cpu_m and #{g : f_g >= milli_m} >= num_m
              = idle(n)                          otherwise (m cannot use n's idle GPU at all)

    F(n) = SUM_m p_m * frag_m(n)            fragmentation of node n, in milli-GPU
    F    = SUM_n F(n)                       cluster fragmentation

The functions here are vectorised over any number of node states at once: the hot path of the
FGD score evaluates F for a few changed nodes per task, the metrics for the whole cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ClusterState
from gpusched.model import GpuModel, TaskShape

__all__ = ["Fragmentation", "TargetWorkload", "cluster_fragmentation"]

I64 = NDArray[np.int64]

#: Batches at least this large are deduplicated before evaluation.
_DEDUP_AT = 128


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Task types and their probabilities, as arrays (``M`` types)."""

    cpu: I64
    milli: I64
    num: I64
    models: tuple[frozenset[GpuModel], ...]
    prob: NDArray[np.float64]

    @classmethod
    def from_shapes(cls, shapes: Sequence[TaskShape], coverage: float = 0.95) -> TargetWorkload:
        """The most popular task types covering ``coverage`` of ``shapes``, renormalised.

        Tasks are keyed by ``(cpu_milli, gpu_milli, num_gpu, gpu_models)`` (memory is ignored,
        CPU-only tasks count). Keys are sorted by count, most common first (ties by key), and
        kept until their cumulative share reaches ``coverage``.
        """
        counts = Counter(
            (s.cpu_milli, s.gpu_milli if s.num_gpu else 0, s.num_gpu, s.gpu_models) for s in shapes
        )
        if not counts:
            counts[(0, 1000, 1, frozenset())] = 1
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], _sort_key(kv[0])))
        kept: list[tuple[tuple[int, int, int, frozenset[GpuModel]], int]] = []
        covered = 0
        for key, n in ranked:
            kept.append((key, n))
            covered += n
            if covered >= coverage * total:
                break
        norm = float(sum(n for _, n in kept))
        return cls(
            cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
            milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
            num=np.array([k[2] for k, _ in kept], dtype=np.int64),
            models=tuple(k[3] for k, _ in kept),
            prob=np.array([n / norm for _, n in kept], dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.prob)

    def model_table(self, models: Sequence[GpuModel]) -> NDArray[np.bool_]:
        """``ok[m, j]``: type ``m`` may use GPU model ``models[j]``; last column: no GPU."""
        ok = np.zeros((len(self), len(models) + 1), dtype=bool)
        for m, allowed in enumerate(self.models):
            for j, name in enumerate(models):
                ok[m, j] = not allowed or name in allowed
        return ok


def _sort_key(key: tuple[int, int, int, frozenset[GpuModel]]) -> tuple[int, int, int, str]:
    return (key[0], key[1], key[2], "|".join(sorted(key[3])))


class Fragmentation:
    """``F(n)`` for batches of node states, for one target workload and one list of models.

    Target arrays are laid out once for broadcasting; the per-model feasibility and "type needs
    a GPU" tests are folded into one ``(n_models + 1, M)`` table indexed by ``model_id``
    (``-1``, no GPU, selects the last row, which is all false).
    """

    __slots__ = ("_cpu", "_milli", "_num", "_prob", "_static")

    def __init__(self, target: TargetWorkload, models: Sequence[GpuModel]) -> None:
        self._milli = target.milli[None, :, None]
        self._num = target.num[None, :]
        self._cpu = target.cpu[None, :]
        self._prob = target.prob
        self._static = (target.model_table(models) & (target.num > 0)[:, None]).T.copy()

    def __call__(
        self, cpu_free: I64, gpu_free: NDArray[np.integer], model_id: I64
    ) -> NDArray[np.float64]:
        """``F(n)`` for ``k`` states: ``cpu_free (k,)``, ``gpu_free (k, G)``, ``model_id (k,)``.

        ``gpu_free`` entries must be >= 0 (padding slots are 0). Large batches are first
        reduced to their distinct states (``F`` ignores GPU order), which are few: most nodes
        of a pool look alike.
        """
        if len(cpu_free) >= _DEDUP_AT:
            rows = np.concatenate(
                [model_id[:, None], cpu_free[:, None], np.sort(gpu_free, axis=1)], axis=1
            ).astype(np.int64)
            rows = np.ascontiguousarray(rows)
            keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            if len(first) < len(cpu_free) // 2:
                values = self._evaluate(cpu_free[first], gpu_free[first], model_id[first])
                return np.asarray(values[inverse.ravel()], dtype=np.float64)
        return self._evaluate(cpu_free, gpu_free, model_id)

    def _evaluate(
        self, cpu_free: I64, gpu_free: NDArray[np.integer], model_id: I64
    ) -> NDArray[np.float64]:
        free = gpu_free[:, None, :]
        ok = free >= self._milli  # (k, M, G)
        idle = gpu_free.sum(axis=1)[:, None]
        usable = (ok * free).sum(axis=2)
        host = (
            (ok.sum(axis=2) >= self._num)
            & (cpu_free[:, None] >= self._cpu)
            & self._static[model_id]
        )
        return np.asarray(np.where(host, idle - usable, idle) @ self._prob, dtype=np.float64)


def cluster_fragmentation(state: ClusterState, target: TargetWorkload) -> float:
    """Cluster fragmentation ``F = SUM_n F(n)`` in milli-GPU."""
    if state.size == 0:
        return 0.0
    frag = Fragmentation(target, state.models)
    return float(frag(state.cpu_free, state.gpu_free, state.model_id).sum())
