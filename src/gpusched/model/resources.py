"""Resource units used everywhere in gpusched.

* CPU in millicores (``96000`` = 96 vCPU), memory in MiB.
* A GPU's compute share in thousandths: every GPU holds :data:`MILLI_PER_GPU` "milli" units, a
  task that shares a GPU asks for fewer (for example ``470``), a whole-GPU task for all of them.
"""

from __future__ import annotations

__all__ = ["MILLI_PER_GPU"]

MILLI_PER_GPU = 1000
