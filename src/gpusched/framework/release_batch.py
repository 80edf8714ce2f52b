"""Many allocations as flat arrays, released in one vector step (what reservations search over).

Finding when a waiting job could start (:mod:`~gpusched.framework.timeline`) means asking
"does it fit once the first ``p`` running jobs expected to end have ended?" for many ``p``.
Releasing those jobs' tasks one by one would cost a Python loop per question; instead their
allocations are laid out once as a :class:`ReleaseBatch` (node, CPU, memory, shape class and
GPU slots per task, in release order), and
:meth:`~gpusched.framework.state.ClusterState.free_batch` returns any prefix of it to a what-if
copy of the state with a few ``bincount`` sums. :class:`ReleaseRows` keeps the running jobs'
rows, a block per job, for the cycle (and, through the driver's memo, for the next one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpusched.framework.allocation import Allocation, shape_class
from gpusched.model import JobId

if TYPE_CHECKING:
    from gpusched.framework.state import I64

__all__ = ["ReleaseBatch", "ReleaseRows", "index_ranges"]


class ReleaseBatch:
    """Allocations as flat arrays, in a given order, for
    :meth:`~gpusched.framework.state.ClusterState.free_batch`.

    Entry ``i`` is one task (node, CPU, memory, shape class); its GPUs are entries
    ``gpu_offset[i] .. gpu_offset[i + 1]`` of ``gpu_slot`` (``node * G + g``) and ``gpu_milli``.
    Entries holding MIG instances are listed by :meth:`mig_entries`.
    """

    __slots__ = (
        "_mig",
        "cpu",
        "gpu_milli",
        "gpu_offset",
        "gpu_slot",
        "mem",
        "node",
        "shape",
        "width",
    )

    def __init__(self, allocations: Sequence[Allocation], gpu_slots: int) -> None:
        node: list[int] = []
        cpu: list[int] = []
        mem: list[int] = []
        shape: list[int] = []
        width: list[int] = []
        slot: list[int] = []
        milli: list[int] = []
        self._mig: list[tuple[int, Allocation]] = []
        for i, a in enumerate(allocations):  # one pass to plain lists; arrays made at the end
            if a.mig:
                self._mig.append((i, a))
            n, k, m = a.node, len(a.gpus), a.gpu_milli
            node.append(n)
            cpu.append(a.cpu_milli)
            mem.append(a.memory_mib)
            shape.append(shape_class(k, m))
            width.append(k)
            base = n * gpu_slots
            for g in a.gpus:
                slot.append(base + g)
                milli.append(m)
        self.node: I64 = np.asarray(node, dtype=np.int64)
        self.cpu: I64 = np.asarray(cpu, dtype=np.int64)
        self.mem: I64 = np.asarray(mem, dtype=np.int64)
        self.shape: I64 = np.asarray(shape, dtype=np.int64)
        self.width: I64 = np.asarray(width, dtype=np.int64)
        self.gpu_offset: I64 = np.concatenate([[0], np.cumsum(self.width)]).astype(np.int64)
        self.gpu_slot: I64 = np.asarray(slot, dtype=np.int64)
        self.gpu_milli: I64 = np.asarray(milli, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.node)

    def mig_entries(self) -> list[tuple[int, Allocation]]:
        """``(entry, allocation)`` of each entry holding MIG instances, by entry."""
        return self._mig

    def extended(self, other: ReleaseBatch) -> ReleaseBatch:
        """This batch followed by ``other``."""
        out = ReleaseBatch((), 0)
        out._mig = [*self._mig, *((i + len(self), a) for i, a in other._mig)]
        for name in ("node", "cpu", "mem", "shape", "width", "gpu_slot", "gpu_milli"):
            setattr(out, name, np.concatenate([getattr(self, name), getattr(other, name)]))
        out.gpu_offset = np.concatenate([[0], np.cumsum(out.width)]).astype(np.int64)
        return out

    def blocks(self, starts: I64, counts: I64) -> ReleaseBatch:
        """The entries ``starts[j] .. starts[j] + counts[j]`` for each ``j`` in turn."""
        entries = index_ranges(starts, counts)
        out = ReleaseBatch((), 0)
        for name in ("node", "cpu", "mem", "shape", "width"):
            setattr(out, name, getattr(self, name)[entries])
        gpus = index_ranges(self.gpu_offset[entries], out.width)
        out.gpu_slot = self.gpu_slot[gpus]
        out.gpu_milli = self.gpu_milli[gpus]
        out.gpu_offset = np.concatenate([[0], np.cumsum(out.width)]).astype(np.int64)
        if self._mig:
            where: dict[int, list[int]] = {}
            for pos, entry in enumerate(entries.tolist()):
                where.setdefault(entry, []).append(pos)
            out._mig = sorted((p, a) for i, a in self._mig for p in where.get(i, ()))
        return out


class ReleaseRows:
    """Running jobs' allocations as one flat :class:`ReleaseBatch`, a block of entries per job
    (what reservations release, :mod:`~gpusched.framework.timeline`), kept for one cycle.

    ``block[j] = (run, start, count)``: valid while ``run`` is still the job's running record
    (a job evicted and placed again gets a new one) and no elastic member of it was evicted
    (:meth:`~gpusched.framework.session.Session.evict_members` drops the block). A driver's
    :class:`~gpusched.framework.memo.CycleMemo` keeps the rows from cycle to cycle; blocks of
    jobs that ended stay in the batch until it is laid out anew.
    """

    __slots__ = ("batch", "block", "gpu_slots")

    def __init__(self, gpu_slots: int) -> None:
        self.gpu_slots = gpu_slots
        self.batch = ReleaseBatch((), gpu_slots)
        self.block: dict[JobId, tuple[object, int, int]] = {}


def index_ranges(starts: I64, counts: I64) -> I64:
    """``concat(arange(s, s + c) for s, c in zip(starts, counts))`` without a Python loop."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    shift = np.repeat(starts - (ends - counts), counts)
    out: I64 = np.arange(total, dtype=np.int64) + shift
    return out
