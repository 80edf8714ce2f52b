"""Actions: the verbs of a scheduling cycle, run least disruptive first."""

from collections.abc import Callable

from gpusched.actions.allocate import Allocate
from gpusched.framework import Action

__all__ = ["ACTIONS", "Allocate"]

#: Built-in actions by name (an explicit registry, like the plugin one).
ACTIONS: dict[str, Callable[[], Action]] = {"allocate": Allocate}
