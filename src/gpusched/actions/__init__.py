"""Actions: the verbs of a scheduling cycle, run least disruptive first."""

from collections.abc import Callable

from gpusched.actions.allocate import Allocate, AllocateFifo, AllocatePods, Backfill
from gpusched.actions.defrag import Defrag
from gpusched.actions.preempt import Preempt, Reclaim
from gpusched.framework import Action

__all__ = [
    "ACTIONS",
    "Allocate",
    "AllocateFifo",
    "AllocatePods",
    "Backfill",
    "Defrag",
    "Preempt",
    "Reclaim",
]

#: Built-in actions by name (an explicit registry, like the plugin one). A profile's
#: ``action_args`` are passed to the factory as keyword arguments.
ACTIONS: dict[str, Callable[..., Action]] = {
    "allocate": Allocate,
    "allocate-fifo": AllocateFifo,
    "allocate-pods": AllocatePods,
    "backfill": Backfill,
    "reclaim": Reclaim,
    "preempt": Preempt,
    "defrag": Defrag,
}
