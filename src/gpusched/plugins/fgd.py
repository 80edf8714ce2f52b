"""FGD: fragmentation gradient descent (Weng et al., USENIX ATC'23).

Place each task where the cluster's fragmentation (see :mod:`.fragmentation`) grows least::

    delta(n)  = F(n) - F(n after placing the task)          (larger is better)
    score(n)  = floor(100 * sigmoid(delta(n) / 1000))

The after-state of node ``n``:

* sharing task (one GPU, ``m < 1000`` milli): every GPU with ``f_g >= m`` is tried; the node's
  score is the best over its GPUs and that GPU is the one assigned (lowest index among ties);
* whole-GPU and multi-GPU tasks: the ``k`` GPUs with the smallest sufficient free share are taken
  (for whole GPUs, the lowest-index fully free ones are assigned);
* CPU-only tasks: only free CPU changes (a CPU-starved node turns its idle GPUs into fragment).

The score is truncated to an integer, so nodes whose deltas differ by less than about 40 milli
tie; ties go to the first node in cluster order (the profile's ``tie_break: first``). This
quantisation is part of the policy: exact float deltas place measurably worse on openb.

Speed: scores are cached per task shape with each node's version stamp; a task re-evaluates
only the feasible nodes that changed since that shape was last scored, and ``F(n)`` itself is
cached per node the same way. The nodes re-evaluated and their after-states form one batch
(its size fixes the last bits of ``F``, :mod:`.fragmentation`); a small batch is built from
each GPU's row of a per-share table (an after-state differs from its node in one GPU's row)
instead of being laid out state by state.

Arguments: ``coverage`` (default 0.95) -- share of the workload hint's tasks the target
workload's most common types must cover.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpusched.errors import ConfigError
from gpusched.framework import BoolArray, ClusterState, CycleContext, FloatArray, PluginContext
from gpusched.model import Task, TaskShape
from gpusched.plugins._util import LayoutCaches, tightest_gpus
from gpusched.plugins.fragmentation import DEDUP_AT, Fragmentation, StateKey, TargetWorkload

__all__ = ["Fgd"]

_ShapeKey = tuple[int, int, int]


class _ShapeCache:
    """Per task shape: integer score, chosen GPU (sharing tasks) and stamp of every node."""

    __slots__ = ("gpu", "score", "stamp")

    def __init__(self, n: int) -> None:
        self.score = np.zeros(n, dtype=np.float64)
        self.gpu = np.full(n, -1, dtype=np.int64)
        self.stamp = np.full(n, -1, dtype=np.int64)


@dataclass(slots=True, eq=False)
class _Caches:
    """One layout's caches (:class:`~gpusched.plugins._util.LayoutCaches`): the
    fragmentation measure for its GPU models, ``F`` per node with the stamp it was computed
    at, and the per-shape score caches."""

    frag: Fragmentation
    f: NDArray[np.float64]
    f_stamp: NDArray[np.int64]
    shapes: dict[_ShapeKey, _ShapeCache]


class Fgd:
    """Fragmentation gradient descent score and GPU picker (see module docstring)."""

    name = "fgd"

    def __init__(self, target: TargetWorkload) -> None:
        self.target = target
        # The caches of the layouts scored lately; the current one's are the attributes below.
        self._layouts: LayoutCaches[_Caches] = LayoutCaches()
        self._bound: tuple[object, object] | None = None  # the layout of the attributes below
        self._frag = Fragmentation(target, ())
        self._f = np.zeros(0)
        self._f_stamp = np.zeros(0, dtype=np.int64)
        self._shapes: dict[_ShapeKey, _ShapeCache] = {}
        self._eyes: dict[tuple[int, int, str], NDArray[Any]] = {}

    @classmethod
    def from_args(cls, args: Mapping[str, Any], ctx: PluginContext) -> Fgd:
        coverage = float(args.get("coverage", 0.95))
        if not 0 < coverage <= 1:
            raise ConfigError(f"fgd: args.coverage must be in (0, 1], got {coverage}")
        unknown = set(args) - {"coverage"}
        if unknown:
            raise ConfigError(f"fgd: unknown argument(s) {sorted(unknown)}; known: ['coverage']")
        return cls(TargetWorkload.from_shapes(ctx.workload_hint, coverage))

    # -- caches ----------------------------------------------------------------------------

    def _bind_layout(self, state: ClusterState) -> None:
        """Use the caches of ``state``'s layout (:class:`~gpusched.plugins._util.LayoutCaches`)."""
        bound = self._bound
        if bound is not None and bound[0] is state.cpu_cap and bound[1] is state.clock:
            return

        def make() -> _Caches:
            frag = Fragmentation(self.target, state.models)
            return _Caches(frag, np.zeros(state.size), np.full(state.size, -1, np.int64), {})

        caches = self._layouts.get(state, make)
        self._frag, self._f, self._f_stamp = caches.frag, caches.f, caches.f_stamp
        self._shapes = caches.shapes
        self._bound = (state.cpu_cap, state.clock)

    # -- score -----------------------------------------------------------------------------

    def score(
        self, ctx: CycleContext, task: Task, state: ClusterState, feasible: BoolArray
    ) -> FloatArray:
        self._bind_layout(state)
        s = task.shape
        key = (s.cpu_milli, s.num_gpu, s.gpu_milli if s.num_gpu else 0)
        cache = self._shapes.get(key)
        if cache is None:
            cache = self._shapes[key] = _ShapeCache(state.size)
        stale = (feasible & (cache.stamp != state.version)).nonzero()[0]
        if len(stale):
            version = state.version[stale]
            delta, gpu = self._delta(task, state, stale, version)
            # F(before) and F(after) may come from batches of different sizes, whose sums round
            # differently in the last bits; round delta to 1e-6 milli so a zero stays zero.
            # floor(100 / (1 + exp(-delta / 1000))), in place: -d / 1000 is d / -1000.
            score = delta.round(6)
            np.divide(score, -1000.0, out=score)
            np.exp(score, out=score)
            np.add(score, 1.0, out=score)
            np.divide(100.0, score, out=score)
            cache.score[stale] = np.floor(score, out=score)
            cache.gpu[stale] = gpu
            cache.stamp[stale] = version
        return cache.score

    def _delta(
        self, task: Task, state: ClusterState, idx: NDArray[np.intp], version: NDArray[np.int64]
    ) -> tuple[FloatArray, NDArray[np.int64]]:
        """``F(before) - F(after)`` for nodes ``idx`` (their stamps ``version``), and the GPU
        chosen (sharing tasks).

        ``F(before)`` comes from the per-node cache; the nodes whose cache is stale are
        evaluated in the same batch as the after-states (one vectorised call per task). A
        batch too small to be deduplicated (:class:`Fragmentation`) is listed as state keys
        (:func:`_state_keys`) for :meth:`Fragmentation.from_states`: the same states in the
        same order, the same matrix, so ``F`` keeps its bits.
        """
        s = task.shape
        free = state.gpu_free[idx]
        k, width = free.shape
        sharing = s.is_sharing
        fresh = self._f_stamp[idx] != version
        stale = int(np.count_nonzero(fresh))
        if stale + (k * width if sharing else k) >= DEDUP_AT:
            cpu, model = state.cpu_free[idx], state.model_id[idx]
            values = self._states(task, cpu, free, model, fresh=fresh, stale=stale)
        else:
            keys = _state_keys(
                s,
                state.cpu_free[idx].tolist(),
                free.tolist(),
                state.model_id[idx].tolist(),
                fresh.tolist(),
            )
            values = self._frag.from_states(keys)
        if stale:
            nodes = idx[fresh]
            self._f[nodes] = values[:stale]
            self._f_stamp[nodes] = version[fresh]
            values = values[stale:]
        before = self._f[idx]
        if not sharing:
            return before - values, np.full(k, -1, dtype=np.int64)
        per_gpu = np.where(free >= s.gpu_milli, values.reshape(k, width), np.inf)
        # The least value is the one at the first GPU argmin picks (no NaN, no -0.0: F >= 0).
        gpu: NDArray[np.int64] = per_gpu.argmin(axis=1)
        return before - per_gpu.min(axis=1), gpu

    def _states(
        self,
        task: Task,
        cpu: NDArray[np.int64],
        free: NDArray[Any],
        model: NDArray[np.int64],
        *,
        fresh: NDArray[np.bool_],
        stale: int,
    ) -> FloatArray:
        """``F`` of the nodes' ``fresh`` states then their after-states, as one batch of
        states (:meth:`_delta`)."""
        s = task.shape
        k, width = free.shape
        if s.num_gpu == 0:
            after_cpu, after_gpu, after_model = cpu - s.cpu_milli, free, model
        elif s.is_sharing:
            # One after-state per GPU of each node: k * G states.
            taken = np.maximum(free[:, None, :] - self._one_gpu(width, s.gpu_milli, free.dtype), 0)
            after_cpu = (cpu - s.cpu_milli).repeat(width)
            after_gpu = taken.reshape(k * width, width)
            after_model = model.repeat(width)
        else:
            after_cpu = cpu - s.cpu_milli
            after_gpu = self._take_tightest(free, s.num_gpu, s.gpu_milli)
            after_model = model
        if not stale:
            return self._frag(after_cpu, after_gpu, after_model)
        return self._frag(
            np.concatenate([cpu[fresh], after_cpu]),
            np.concatenate([free[fresh], after_gpu]),
            np.concatenate([model[fresh], after_model]),
        )

    @staticmethod
    def _take_tightest(free: NDArray[Any], num: int, milli: int) -> NDArray[Any]:
        """Each node's GPU shares, sorted, after a task takes ``milli`` from the ``num`` GPUs
        with the smallest sufficient share."""
        ordered = np.sort(free, axis=1)
        sufficient = ordered >= milli
        take = sufficient & (sufficient.cumsum(axis=1) <= num)
        after: NDArray[Any] = ordered - take * milli
        return after

    def _one_gpu(self, width: int, milli: int, dtype: np.dtype[Any]) -> NDArray[Any]:
        """``E[g, h] = milli`` if ``g == h`` else 0 (``G x G``): row ``g`` takes ``milli`` from
        GPU ``g`` only; kept per width, share and dtype."""
        key = (width, milli, dtype.str)
        eye = self._eyes.get(key)
        if eye is None:
            eye = self._eyes[key] = np.eye(width, dtype=dtype) * milli
        return eye

    # -- GPU choice ------------------------------------------------------------------------

    def pick(
        self, ctx: CycleContext, task: Task, state: ClusterState, node: int
    ) -> tuple[int, ...]:
        s = task.shape
        if s.num_gpu == 0:
            return ()
        row = state.gpu_free[node]
        if s.is_sharing:
            cache = self._shapes.get((s.cpu_milli, s.num_gpu, s.gpu_milli))
            if cache is not None and cache.stamp[node] == state.version[node]:
                return (int(cache.gpu[node]),)
            return (int((row >= s.gpu_milli).nonzero()[0][0]),)
        return tightest_gpus(row, s.num_gpu, s.gpu_milli)


def _state_keys(
    s: TaskShape, cpu: list[int], free: list[list[int]], model: list[int], fresh: list[bool]
) -> list[StateKey]:
    """The batch of :meth:`Fgd._delta` as state keys: the ``fresh`` nodes' states, then the
    after-states of every node (CPU-only and whole-GPU tasks: one per node; sharing tasks: one
    per GPU of each node, that GPU giving up ``gpu_milli``, floored at 0) -- the states
    :meth:`Fgd._states` lays out, in its order."""
    keys: list[StateKey] = [
        (m, c, tuple(sorted(f)))
        for m, c, f, new in zip(model, cpu, free, fresh, strict=True)
        if new
    ]
    cpu_milli, milli = s.cpu_milli, s.gpu_milli
    for m, c, f in zip(model, cpu, free, strict=True):
        after_cpu = c - cpu_milli
        if s.num_gpu == 0:
            keys.append((m, after_cpu, tuple(sorted(f))))
        elif s.is_sharing:
            # GPUs with the same share give the same after-state: one key per share.
            ordered = sorted(f)
            by_share: dict[int, StateKey] = {}
            for share in f:
                key = by_share.get(share)
                if key is None:
                    row = ordered.copy()
                    row.remove(share)
                    insort(row, max(share - milli, 0))
                    key = by_share[share] = (m, after_cpu, tuple(row))
                keys.append(key)
        else:
            # Fgd._take_tightest: the num_gpu smallest sufficient shares give up milli.
            ordered = sorted(f)
            left = s.num_gpu
            for i, share in enumerate(ordered):
                if left and share >= milli:
                    ordered[i] = share - milli
                    left -= 1
            keys.append((m, after_cpu, tuple(sorted(ordered))))
    return keys
