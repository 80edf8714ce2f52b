"""The ``allocate`` action: place pending jobs in queue order, each all or nothing.

For every pending job (in the profile's queue order) the session places ``min_available`` tasks
inside one statement; a job that does not fit is rolled back and gets a status with reasons.
Jobs whose status is ``Unresolvable`` could not fit even on an empty cluster.
"""

from __future__ import annotations

from gpusched.framework import Session

__all__ = ["Allocate"]


class Allocate:
    """Place what fits, in order, without disturbing anything running."""

    name = "allocate"

    def execute(self, session: Session) -> None:
        for job in session.pending_jobs():
            session.place_job(job)
