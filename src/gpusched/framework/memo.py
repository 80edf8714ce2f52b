"""What one cycle derives from the running jobs, kept for the next cycle (speed only).

A busy cluster's cycle sees tens of thousands of running jobs, and most of them were running a
cycle ago too. Several parts of the cycle derive something from each running job's allocations
that cannot change while the job runs: its quota charge
(:meth:`~gpusched.framework.session.Session.charge_of`), its rows in the reservation search's
release batch (:class:`~gpusched.framework.release_batch.ReleaseRows`) and its preemption victims
(:mod:`gpusched.actions.evicting`). A driver that passes the same :class:`CycleMemo` with each
:class:`~gpusched.framework.snapshot.Snapshot` lets a cycle reuse them.

**Contract (for drivers):** a :class:`~gpusched.framework.snapshot.RunningJob` object stands for
one fixed set of allocations. Whenever a job's allocations change (it is evicted and placed
again, moved, or loses elastic members) the driver gives it a new ``RunningJob``. Entries are
keyed by job id and valid only while they hold the very ``RunningJob`` object the snapshot has
(``entry.run is snapshot.running[job]``), so a driver that builds new records every cycle simply
never hits the memo.

The plan of a cycle is the same with or without a memo (a property test replays simulations
both ways); only its cost differs. Entries of jobs that stopped running are dropped as the
cycle rebuilds each table, so a memo holds about one entry per running job.
"""

from __future__ import annotations

from typing import Any

from gpusched.framework.release_batch import ReleaseRows
from gpusched.model import JobId, Resources

__all__ = ["CycleMemo"]


class CycleMemo:
    """Per-running-job results kept from one cycle to the next (module docstring).

    ``charges[job] = (run, charge)``; ``release_rows``: the reservation search's rows;
    ``tables``: private tables of actions, by name.
    """

    __slots__ = ("charges", "release_rows", "tables")

    def __init__(self) -> None:
        self.charges: dict[JobId, tuple[object, Resources]] = {}
        self.release_rows: ReleaseRows | None = None
        self.tables: dict[str, Any] = {}
