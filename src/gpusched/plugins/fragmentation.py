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

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpusched.framework import ClusterState
from gpusched.model import MILLI_PER_GPU, GpuModel, TaskShape

__all__ = ["Fragmentation", "StateKey", "TargetWorkload", "cluster_fragmentation"]

I64 = NDArray[np.int64]

#: Unit of the GPU count in the packed per-share sums of :meth:`Fragmentation._evaluate`.
_COUNT = 1 << 32
#: A node state as :meth:`Fragmentation.from_states` keys it: ``(model_id, cpu_free, shares)``,
#: the GPU shares sorted ascending (``F`` ignores GPU order).
StateKey = tuple[int, int, tuple[int, ...]]
#: Rows first allocated for the integer rows memoised by :meth:`Fragmentation.from_states`
#: (doubled as needed), and the most states memoised before the memo starts over.
_ROW_TABLE_START = 1024
_ROW_MEMO_MAX = 1 << 17
#: Largest batch whose per-GPU sums are read from the per-share table.
_TABLE_ROWS = 512
#: Batches at least this large are deduplicated before evaluation.
DEDUP_AT = 128
#: Batches at least this large are deduplicated by hashing (cheaper than comparing whole rows
#: when there are many; below it, the fixed cost of the extra steps outweighs the saving).
_HASH_AT = 1024
#: Odd 64-bit multipliers of the row hash, one per column (reused past the 8th).
_MIX = np.array(
    [
        0x9E3779B97F4A7C15,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0xD6E8FEB86659FD93,
        0xFF51AFD7ED558CCD,
        0xC4CEB9FE1A85EC53,
        0x27D4EB2F165667C5,
        0x94D049BB133111EB,
    ],
    dtype=np.uint64,
)


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
    (``-1``, no GPU, selects the last row, which is all false). The per-GPU terms are read
    from a table over GPU shares (:meth:`_evaluate`).
    """

    __slots__ = (
        "_column",
        "_cpu",
        "_need",
        "_num",
        "_per_share",
        "_prob",
        "_row_of",
        "_row_table",
        "_share_list",
        "_static",
        "_thresholds",
        "_usable_types",
    )

    def __init__(self, target: TargetWorkload, models: Sequence[GpuModel]) -> None:
        needs_gpu = target.num > 0
        # The distinct per-GPU shares of the types that need GPUs (a few, where types are many):
        # per-GPU tests run once per share; ``_column[m]`` is type m's share (0 for CPU-only
        # types, whose ``_static`` entries are all false).
        thresholds, column = np.unique(target.milli[needs_gpu], return_inverse=True)
        self._thresholds = (thresholds if len(thresholds) else np.zeros(1, np.int64))[None, :, None]
        self._column = np.zeros(len(target), dtype=np.intp)
        self._column[needs_gpu] = column.ravel()
        self._num = target.num[None, :]
        self._cpu = target.cpu[None, :]
        self._prob = target.prob
        self._static = (target.model_table(models) & needs_gpu[:, None]).T.copy()
        # _per_share[f, m] = [f >= u_m] * (f + _COUNT) for m < M, and f in the last column.
        share = np.arange(MILLI_PER_GPU + 1, dtype=np.int64)[:, None]
        usable = (share >= self._thresholds.ravel()[self._column][None, :]) * (share + _COUNT)
        self._per_share = np.ascontiguousarray(np.concatenate([usable, share], axis=1))
        # _need[model, m]: the least packed sum of a state type m fits by GPUs (num_m GPUs
        # with u_m free), unreachable where the type cannot use the model's GPUs.
        self._need = np.where(self._static, self._num * _COUNT, np.iinfo(np.int64).max)
        # For :meth:`_frag_row`, as Python values: the distinct shares, and per model row (the
        # last is ``model_id == -1``) the types that may use its GPUs, as (type, share
        # column, GPU count, CPU).
        self._share_list: list[int] = self._thresholds.ravel().tolist()
        self._usable_types: list[list[tuple[int, int, int, int]]] = [
            [
                (m, int(self._column[m]), int(target.num[m]), int(target.cpu[m]))
                for m in np.flatnonzero(row).tolist()
            ]
            for row in self._static
        ]
        self._row_of: dict[StateKey, int] = {}
        self._row_table = np.zeros((_ROW_TABLE_START, len(target)), dtype=np.int64)

    def __call__(
        self, cpu_free: I64, gpu_free: NDArray[np.integer], model_id: I64
    ) -> NDArray[np.float64]:
        """``F(n)`` for ``k`` states: ``cpu_free (k,)``, ``gpu_free (k, G)``, ``model_id (k,)``.

        ``gpu_free`` entries must be >= 0 (padding slots are 0). Large batches are first
        reduced to their distinct states (``F`` ignores GPU order), which are few: most nodes
        of a pool look alike.
        """
        if len(cpu_free) >= DEDUP_AT:
            first, inverse = _distinct(model_id, cpu_free, np.sort(gpu_free, axis=1))
            if len(first) < len(cpu_free) // 2:
                values = self._evaluate(cpu_free[first], gpu_free[first], model_id[first])
                return np.asarray(values[inverse], dtype=np.float64)
        return self._evaluate(cpu_free, gpu_free, model_id)

    def _evaluate(
        self, cpu_free: I64, gpu_free: NDArray[np.integer], model_id: I64
    ) -> NDArray[np.float64]:
        """``F(n)`` for each state, per share ``u`` then per type ``m`` (with share ``u_m``)::

            count[n, u] = #{g : f_g >= u},   usable[n, u] = SUM_{g : f_g >= u} f_g
            frag[n, m]  = idle(n) - usable[n, u_m]   if type m fits n, else idle(n)
            F(n)        = frag[n, :] @ p

        The integer matrix ``frag`` is exact; the product with ``p`` is the only rounding step
        (its bits depend on the batch's size, so batches are kept as callers form them).

        The per-GPU sums come from one table over shares ``f`` in ``0..1000``, summed over
        each state's GPUs: ``packed[n, m] = count[n, u_m] * 2**32 + usable[n, u_m]`` (usable
        is far below ``2**32``, so ``count >= num_m`` iff ``packed >= num_m * 2**32``; a type
        that cannot use the state's model needs more than any sum) and, in the last column,
        ``idle(n)``. A share beyond the table, or a batch of more than
        :data:`_TABLE_ROWS` states (the table's rows would take ``G * (M + 1)`` words per
        state), takes :meth:`_by_share`, the same matrix computed per share.
        """
        per_gpu = None if len(gpu_free) > _TABLE_ROWS else self.per_gpu(gpu_free)
        if per_gpu is None:
            return self._by_share(cpu_free, gpu_free, model_id)
        return self.from_sums(np.add.reduce(per_gpu, axis=1), cpu_free, model_id)

    def per_gpu(self, gpu_free: NDArray[np.integer]) -> I64 | None:
        """Each GPU's row of the per-share table (``(k, G, M + 1)``; :meth:`_evaluate`), or
        ``None`` if a share is beyond the table. A state's packed sums are the sum over its
        GPUs, so a state that differs in one GPU differs by that GPU's two rows."""
        try:
            rows: I64 = self._per_share[gpu_free]
        except IndexError:
            return None
        return rows

    def from_sums(self, packed: I64, cpu_free: I64, model_id: I64) -> NDArray[np.float64]:
        """``F`` of the batch of states with packed per-GPU sums ``packed`` (``(k, M + 1)``,
        contiguous; :meth:`_evaluate`): the same matrix and product as :meth:`_evaluate`."""
        sums = packed[:, :-1]
        host = (sums >= self._need[model_id]) & (cpu_free[:, None] >= self._cpu)
        frag = packed[:, -1:] - (sums & (_COUNT - 1)) * host
        return np.asarray(frag @ self._prob, dtype=np.float64)

    def from_states(self, states: Sequence[StateKey]) -> NDArray[np.float64]:
        """``F`` of a batch of states given as keys (:data:`StateKey`): the same integer
        matrix ``frag`` as :meth:`_evaluate` (one row per state, in order; contiguous
        ``int64``) and the same product with ``p``, so the same bits as laying the states out
        as arrays -- without the dozen array operations that costs for a few states.

        Cache: each distinct state's row of ``frag`` is computed once (:meth:`_frag_row`, in
        Python) and kept in a table; a batch is one gather of its rows. A row depends only on
        the state and this object's target and models, both fixed for its life, so entries
        never go stale; the memo starts over past :data:`_ROW_MEMO_MAX` states, only to bound
        its memory.
        """
        row_of = self._row_of
        if len(row_of) + len(states) > _ROW_MEMO_MAX:
            row_of.clear()
        rows: list[int] = []
        missing: list[StateKey] = []
        for key in states:
            i = row_of.get(key)
            if i is None:
                i = row_of[key] = len(row_of)
                missing.append(key)
            rows.append(i)
        if missing:
            table = self._row_table
            end = len(row_of)
            if end > len(table):
                grown = np.zeros((max(end, 2 * len(table)), table.shape[1]), dtype=np.int64)
                grown[: len(table)] = table
                table = self._row_table = grown
            table[end - len(missing) : end] = [self._frag_row(*key) for key in missing]
        frag = self._row_table[rows]
        return np.asarray(frag @ self._prob, dtype=np.float64)

    def _frag_row(self, model_id: int, cpu_free: int, shares: tuple[int, ...]) -> list[int]:
        """Row ``frag[n, :]`` of :meth:`_evaluate` for one state, with Python integers
        (``shares`` sorted ascending: the GPUs with at least ``u`` free are a suffix)."""
        idle = sum(shares)
        per_column = [
            (len(shares) - i, sum(shares[i:]))
            for i in (bisect_left(shares, u) for u in self._share_list)
        ]
        row = [idle] * len(self._prob)
        for m, column, num, cpu in self._usable_types[model_id]:
            count, usable = per_column[column]
            if count >= num and cpu_free >= cpu:
                row[m] = idle - usable
        return row

    def _by_share(
        self, cpu_free: I64, gpu_free: NDArray[np.integer], model_id: I64
    ) -> NDArray[np.float64]:
        """:meth:`_evaluate` for any shares, per distinct share ``u`` (no table)."""
        free = gpu_free[:, None, :]
        ok = free >= self._thresholds  # (k, U, G), U distinct shares
        count = ok.sum(axis=2)[:, self._column]  # (k, M)
        usable = (ok * free).sum(axis=2)[:, self._column]
        idle = gpu_free.sum(axis=1)[:, None]
        host = (count >= self._num) & (cpu_free[:, None] >= self._cpu) & self._static[model_id]
        return np.asarray(np.where(host, idle - usable, idle) @ self._prob, dtype=np.float64)


def _distinct(
    model_id: I64, cpu_free: I64, ordered: NDArray[np.integer]
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The distinct states among rows ``(model_id, cpu_free, ordered)`` (``ordered``: GPU
    shares sorted per row): ``first[i]``, the first row of the ``i``-th distinct state, and
    ``inverse[r]``, the distinct state of row ``r``.

    States are numbered in the order of their row bytes (``int64`` fields; ``np.unique`` over
    ``void`` keys), which fixes the batch :meth:`Fragmentation._evaluate` sees, hence the bits
    of ``F``. Large inputs are grouped by a hash first (:func:`_distinct_by_hash`); the answer
    is the same.
    """
    if len(model_id) >= _HASH_AT:
        found = _distinct_by_hash(model_id, cpu_free, ordered)
        if found is not None:
            return found
    rows = _rows(model_id, cpu_free, ordered)
    _, first, inverse = np.unique(_void_keys(rows), return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _rows(model_id: I64, cpu_free: I64, ordered: NDArray[np.integer]) -> I64:
    """``[model_id, cpu_free, ordered...]`` per row, as contiguous ``int64``."""
    rows = np.concatenate([model_id[:, None], cpu_free[:, None], ordered], axis=1)
    return np.ascontiguousarray(rows.astype(np.int64))


def _void_keys(rows: I64) -> NDArray[np.void]:
    """Each row of ``rows`` as one ``void`` item (compared and ordered by its bytes)."""
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def _distinct_by_hash(
    model_id: I64, cpu_free: I64, ordered: NDArray[np.integer]
) -> tuple[NDArray[np.intp], NDArray[np.intp]] | None:
    """:func:`_distinct` through a 64-bit hash of each row, or ``None`` if two different
    states share a hash (then the caller compares whole rows)::

        h(r) = SUM_c mix_c * row_c[r]   (mod 2^64)

    Rows are grouped by ``h`` (stable: each group's first row is the first occurrence);
    every row is checked equal to its group's first, so groups are exactly the distinct
    states; the groups are then ordered by their rows' bytes, as ``np.unique`` orders them.
    """
    columns = [model_id, cpu_free, *(ordered[:, g] for g in range(ordered.shape[1]))]
    h = np.zeros(len(model_id), dtype=np.uint64)
    for c, column in enumerate(columns):
        h += column.astype(np.uint64) * _MIX[c % len(_MIX)]
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not all(np.array_equal(x[first][inverse], x) for x in (model_id, cpu_free, ordered)):
        return None
    perm = np.argsort(_void_keys(_rows(model_id[first], cpu_free[first], ordered[first])))
    rank = np.empty(len(perm), dtype=np.intp)
    rank[perm] = np.arange(len(perm))
    return first[perm], rank[inverse]


def cluster_fragmentation(state: ClusterState, target: TargetWorkload) -> float:
    """Cluster fragmentation ``F = SUM_n F(n)`` in milli-GPU."""
    if state.size == 0:
        return 0.0
    frag = Fragmentation(target, state.models)
    return float(frag(state.cpu_free, state.gpu_free, state.model_id).sum())
