"""Where a task may run: taints and tolerations, node selectors, node affinity.

Kubernetes semantics, reduced to what scheduling needs:

* a node's taint ``key=value:effect`` with effect ``NoSchedule`` keeps off every task that has no
  matching toleration (``PreferNoSchedule`` only lowers the node's score; ``NoExecute`` is
  treated as ``NoSchedule``);
* a toleration matches a taint when the keys match (an empty key with ``Exists`` matches every
  key), the effects match (an empty effect matches every effect) and, for ``Equal``, the values
  match;
* ``node_selector`` requires every ``key=value`` label;
* ``required`` affinity is a list of terms ORed together; a term is a list of expressions ANDed;
  an expression is ``key In/NotIn/Exists/DoesNotExist values``;
* ``preferred`` affinity adds ``weight`` to the score of nodes matching the term.

All values are frozen and hashable: they are part of a task's shape, so two tasks with the same
shape are placed alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "NO_CONSTRAINTS",
    "Constraints",
    "Effect",
    "Expression",
    "Operator",
    "Taint",
    "Toleration",
]


class Effect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    EQUAL = "Equal"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: Effect = Effect.NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class Toleration:
    """Tolerates taints with ``key`` (any key when empty and ``operator`` is Exists)."""

    key: str = ""
    operator: Operator = Operator.EQUAL
    value: str = ""
    effect: Effect | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator is Operator.EXISTS
        if self.key != taint.key:
            return False
        return self.operator is Operator.EXISTS or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Expression:
    """``key operator values`` against a node's labels."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is Operator.EXISTS:
            return present
        if self.operator is Operator.DOES_NOT_EXIST:
            return not present
        if self.operator is Operator.NOT_IN:
            return not present or labels[self.key] not in self.values
        return present and labels[self.key] in self.values


Term = tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class Constraints:
    """A task's node constraints (see module docstring)."""

    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    required: tuple[Term, ...] = ()
    preferred: tuple[tuple[int, Term], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.node_selector or self.tolerations or self.required or self.preferred)

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` satisfies the selector and required affinity."""
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        return not self.required or any(
            all(e.matches(labels) for e in term) for term in self.required
        )

    def tolerates(self, taints: tuple[Taint, ...], effect: Effect) -> bool:
        """Whether every taint of ``effect`` (NoExecute counts as NoSchedule) is tolerated."""
        for taint in taints:
            hard = taint.effect in (Effect.NO_SCHEDULE, Effect.NO_EXECUTE)
            relevant = hard if effect is Effect.NO_SCHEDULE else taint.effect is effect
            if relevant and not any(t.tolerates(taint) for t in self.tolerations):
                return False
        return True

    def preference(self, labels: Mapping[str, str]) -> int:
        """Sum of the weights of preferred terms the node matches."""
        return sum(w for w, t in self.preferred if all(e.matches(labels) for e in t))


NO_CONSTRAINTS = Constraints()
