"""The discrete-event simulator and the openb experiment protocol."""

from gpusched.sim.engine import Simulation
from gpusched.sim.openb import OPENB_POINTS, OpenbRun, openb_order, run_openb
from gpusched.sim.records import JobRecord, SimOptions

__all__ = [
    "OPENB_POINTS",
    "JobRecord",
    "OpenbRun",
    "SimOptions",
    "Simulation",
    "openb_order",
    "run_openb",
]
