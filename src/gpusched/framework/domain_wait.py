"""Whether a preferred gang should wait for one network domain instead of splitting now.

A gang with ``topology_preferred: rack`` that finds no rack with room right now would be
spread over the fewest racks (:mod:`.domains`, steps 2-4). It waits instead when one rack is
expected to hold it soon enough::

    wait  iff  one domain of its level has room for the gang once the running jobs expected
               to end by now + patience(j) have ended       (patience(j) = DOMAIN_PATIENCE *
                                                             estimate(j), :mod:`.domains`)

that is ``t_one - now <= patience(j)`` with ``t_one`` the start the one-domain reservation
search would find (:func:`~.timeline.reserve` with ``one_domain=True``), tested with a single
trial (``exact=False``), with running jobs at their *optimistic* ends (an overrun job a tenth
of its estimate later, :mod:`~.timeline`): a domain frees once any of its jobs ends, sooner
than each one's own expected end. The bet is made again every cycle, so a gang may wait long
for a domain when its jobs keep overrunning (docs/topology.md has the cost in waiting).

(``now`` is the split start: the gang fits split right now, else it would not get here.) The
status says when and why, with numbers; the head-of-line gang's reservation then holds the
nodes of that domain (:func:`~.timeline.reserve` applies the same bound), so backfilled jobs
admitted onto them must end before it starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpusched.framework.domains import DOMAIN_PATIENCE, patience_s
from gpusched.framework.status import Cause, Code, Status
from gpusched.framework.timeline import reserve
from gpusched.model import Job

if TYPE_CHECKING:
    from gpusched.framework.session import Session

__all__ = ["wait_for_domain"]


def wait_for_domain(session: Session, job: Job, level_name: str) -> Status | None:
    """``Unschedulable`` with the expected one-domain start when ``job`` should wait for one
    domain of ``level_name`` (module docstring); ``None`` when it should split now."""
    patience = patience_s(session.state, job, session.runtime_estimate(job))
    if patience <= 0:
        return None
    now = session.snapshot.now
    found = reserve(
        session, job, one_domain=True, until=now + patience, exact=False, optimistic=True
    )
    if found is None:
        return None
    return Status(
        Code.UNSCHEDULABLE,
        (
            f"waits for one {level_name}: none has room for the gang of {job.min_available} "
            f"now; one is expected to within its patience of {patience / 60:.1f} min "
            f"({DOMAIN_PATIENCE:.0%} of its estimated run time), as running jobs end",
        ),
        Cause.DOMAIN,
    )
