"""Many allocations as flat arrays, released in one vector step (what reservations search over).

Finding when a waiting job could start (:mod:`~gpusched.framework.timeline`) means asking
"does it fit once the first ``p`` running jobs expected to end have ended?" for many ``p``.
Releasing those jobs' tasks one by one would cost a Python loop per question; instead their
allocations are laid out once as a :class:`ReleaseBatch` (node, CPU, memory, shape class and
GPU slots per task, in release order), and
:meth:`~gpusched.framework.state.ClusterState.free_batch` returns any prefix of it to a what-if
copy of the state with a few ``bincount`` sums. :class:`ReleaseRows` keeps the running jobs'
rows, a block per job, for the cycle (and, through the driver's memo, for the next one);
:class:`ReleasePrefix` lays out only as many of them, in release order, as a search reaches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpusched.framework.allocation import Allocation, shape_class
from gpusched.model import JobId

if TYPE_CHECKING:
    from gpusched.framework.session import Session
    from gpusched.framework.state import I64

__all__ = ["ReleaseBatch", "ReleasePrefix", "ReleaseRows", "index_ranges", "running_releases"]

#: Running jobs a :class:`ReleasePrefix` lays out at its first request.
FIRST_RELEASES = 256


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

    __slots__ = ("_block", "batch", "gpu_slots", "live")

    def __init__(self, gpu_slots: int) -> None:
        self.gpu_slots = gpu_slots
        self.batch = ReleaseBatch((), gpu_slots)
        self._block: dict[JobId, tuple[object, int, int]] = {}
        #: Rows of the blocks still listed (``SUM count``), kept as blocks come and go.
        self.live = 0

    @property
    def block(self) -> Mapping[JobId, tuple[object, int, int]]:
        """``job -> (run, start, count)``, read-only: change it with :meth:`put`,
        :meth:`drop` and :meth:`keep_running`, which keep :attr:`live`."""
        return self._block

    def put(self, job: JobId, entry: tuple[object, int, int]) -> None:
        """List ``job``'s block (replacing any earlier one)."""
        old = self._block.get(job)
        if old is not None:
            self.live -= old[2]
        self._block[job] = entry
        self.live += entry[2]

    def drop(self, job: JobId) -> None:
        """Unlist ``job``'s block, if any (its rows stay in the batch)."""
        old = self._block.pop(job, None)
        if old is not None:
            self.live -= old[2]

    def keep_running(self, running: Mapping[JobId, object]) -> None:
        """Keep only the blocks whose running record is still ``running[job]``."""
        self._block = {j: b for j, b in self._block.items() if running.get(j) is b[0]}
        self.live = sum(count for _, _, count in self._block.values())


def running_releases(
    session: Session, ends: Sequence[tuple[float, JobId]]
) -> tuple[ReleaseBatch, list[int]]:
    """The allocations of the running jobs ``ends`` (``(end, job)`` pairs, in release order)
    as one batch, and for each number of releases ``p`` the number of batch entries they
    cover (``offsets[p]``).

    Each job's allocations are laid out once (:class:`ReleaseRows`, kept from cycle to cycle
    by the driver's memo); later calls only gather the blocks in the new order. Once blocks of
    jobs that ended make up more than half of the rows, they are laid out anew."""
    slots = session.state.gpu_slots
    rows = session.release_rows
    if rows is None or rows.gpu_slots != slots or len(rows.batch) > 2 * rows.live + 4096:
        rows = session.release_rows = ReleaseRows(slots)
        if session.snapshot.memo is not None:
            session.snapshot.memo.release_rows = rows
    allocations = session.state.allocations
    block = rows.block
    start = len(rows.batch)
    fresh: list[Allocation] = []
    for _, job_id in ends:
        run = session.running[job_id]
        known = block.get(job_id)
        if known is None or known[0] is not run:
            got = [a for t in run.job.tasks if (a := allocations.get(t.id)) is not None]
            rows.put(job_id, (run, start + len(fresh), len(got)))
            fresh.extend(got)
    if fresh:
        rows.batch = rows.batch.extended(ReleaseBatch(fresh, session.state.gpu_slots))
    spans = np.array([block[j][1:] for _, j in ends], dtype=np.int64).reshape(-1, 2)
    offsets: list[int] = np.concatenate([[0], np.cumsum(spans[:, 1])]).tolist()
    return rows.batch.blocks(spans[:, 0], spans[:, 1]), offsets


class ReleasePrefix:
    """The release batch of the first jobs of ``ends``, laid out only as far as a search
    asks: the first request lays out :data:`FIRST_RELEASES` jobs (or more if asked), each
    later one past the end at least doubles the prefix. A search that stops after ``p``
    releases lays out at most ``max(2p, FIRST_RELEASES)`` jobs, not every running job; a
    prefix of the batch is the same whatever its length."""

    __slots__ = ("batch", "count", "ends", "offsets", "session")

    def __init__(self, session: Session, ends: Sequence[tuple[float, JobId]]) -> None:
        self.session = session
        self.ends = ends
        self.count = -1
        self.batch = ReleaseBatch((), session.state.gpu_slots)
        self.offsets: list[int] = [0]

    def upto(self, releases: int) -> tuple[ReleaseBatch, int]:
        """The batch, and how many of its entries the first ``releases`` jobs cover."""
        if releases > self.count:
            grown = max(releases, 2 * self.count, FIRST_RELEASES)
            self.count = min(len(self.ends), grown)
            self.batch, self.offsets = running_releases(self.session, self.ends[: self.count])
        return self.batch, self.offsets[releases]


def index_ranges(starts: I64, counts: I64) -> I64:
    """``concat(arange(s, s + c) for s, c in zip(starts, counts))`` without a Python loop."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    shift = np.repeat(starts - (ends - counts), counts)
    out: I64 = np.arange(total, dtype=np.int64) + shift
    return out
