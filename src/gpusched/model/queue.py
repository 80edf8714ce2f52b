"""Queues: a hierarchy with guaranteed quota, limits, weights and lending limits.

A tree such as ``org -> team -> queue``; jobs are submitted to any queue (usually a leaf) and
are charged to it and to every ancestor. Per queue ``q`` and resource ``r`` (see
:class:`~gpusched.model.resources.Resources`):

* ``guaranteed[r]`` -- always available to ``q``'s subtree; when others borrowed it, it is
  reclaimed by preempting them. A child's guarantee is carved out of its parent's:
  ``SUM_children guaranteed <= parent.guaranteed``.
* ``limit[r]`` -- a hard cap on the subtree's usage (absent: no cap beyond the cluster).
* ``lending_limit[r]`` -- how much of ``q``'s *idle* guarantee others may borrow (absent: all).
* ``weight`` -- share of what is beyond guarantees, by weighted dominant-resource fairness.

A queue tree is validated as a whole (:meth:`QueueTree.build`): a missing parent, a cycle, a
negative amount, a limit below the guarantee or children guaranteed more than their parent is a
:class:`~gpusched.errors.ConfigError` naming the queue and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from gpusched.errors import ConfigError
from gpusched.model.ids import QueueName
from gpusched.model.resources import Resources

__all__ = ["QueueSpec", "QueueTree"]


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue as configured."""

    name: QueueName
    parent: QueueName | None = None
    guaranteed: Resources = field(default_factory=Resources)
    limit: Resources | None = None
    lending_limit: Resources | None = None
    weight: float = 1.0


class QueueTree:
    """A validated queue hierarchy with parent/child links."""

    __slots__ = ("_ancestors", "_children", "_queues", "roots")

    def __init__(self) -> None:
        self._queues: dict[QueueName, QueueSpec] = {}
        self._children: dict[QueueName, list[QueueName]] = {}
        self._ancestors: dict[QueueName, tuple[QueueName, ...]] = {}
        self.roots: list[QueueName] = []

    @classmethod
    def build(cls, specs: Iterable[QueueSpec]) -> QueueTree:
        """Validate ``specs`` and link them (see module docstring for the rules)."""
        tree = cls()
        for spec in specs:
            if spec.name in tree._queues:
                raise ConfigError(f"queue {spec.name!r}: defined twice; queue names are unique")
            tree._queues[spec.name] = spec
        for spec in tree._queues.values():
            _check_amounts(spec)
            if spec.parent is None:
                tree.roots.append(spec.name)
            elif spec.parent not in tree._queues:
                raise ConfigError(
                    f"queue {spec.name!r}: field 'parent': no queue named {spec.parent!r}"
                )
            else:
                tree._children.setdefault(spec.parent, []).append(spec.name)
        for name in tree._queues:
            chain: list[QueueName] = []
            cur = tree._queues[name].parent
            while cur is not None:
                if cur == name or cur in chain:
                    raise ConfigError(
                        f"queue {name!r}: field 'parent': the parent chain loops "
                        f"({' -> '.join([name, *chain, cur])}); a queue tree must not have cycles"
                    )
                chain.append(cur)
                cur = tree._queues[cur].parent
            tree._ancestors[name] = tuple(chain)
        for parent, kids in tree._children.items():
            total = Resources()
            for k in kids:
                total = total + tree._queues[k].guaranteed
            over = [r for r in total if total[r] > tree._queues[parent].guaranteed[r]]
            if over:
                r = over[0]
                raise ConfigError(
                    f"queue {parent!r}: field 'guaranteed.{r}': children {', '.join(kids)} are "
                    f"guaranteed {total[r]} in all, more than the parent's "
                    f"{tree._queues[parent].guaranteed[r]}; raise the parent's guarantee or "
                    "lower the children's"
                )
        return tree

    def __contains__(self, name: object) -> bool:
        return name in self._queues

    def __iter__(self) -> Iterator[QueueSpec]:
        return iter(self._queues.values())

    def __len__(self) -> int:
        return len(self._queues)

    def __getitem__(self, name: QueueName) -> QueueSpec:
        return self._queues[name]

    def get(self, name: QueueName) -> QueueSpec | None:
        return self._queues.get(name)

    def path(self, name: QueueName) -> tuple[QueueName, ...]:
        """``name`` and its ancestors, leaf first."""
        return (name, *self._ancestors[name])

    def children(self, name: QueueName) -> list[QueueName]:
        return list(self._children.get(name, ()))

    def leaves(self) -> list[QueueName]:
        return [q for q in self._queues if q not in self._children]


def _check_amounts(spec: QueueSpec) -> None:
    groups: Mapping[str, Resources | None] = {
        "guaranteed": spec.guaranteed,
        "limit": spec.limit,
        "lending_limit": spec.lending_limit,
    }
    for field_name, amounts in groups.items():
        if amounts is None:
            continue
        for r, v in amounts.items():
            if v < 0:
                raise ConfigError(
                    f"queue {spec.name!r}: field '{field_name}.{r}': got {v}; quotas must be >= 0"
                )
    if spec.limit is not None:
        for r, v in spec.guaranteed.items():
            if r in spec.limit and spec.limit[r] < v:
                raise ConfigError(
                    f"queue {spec.name!r}: field 'limit.{r}': {spec.limit[r]} is below the "
                    f"guarantee {v}; a limit must be at least the guarantee"
                )
    if spec.weight <= 0:
        raise ConfigError(f"queue {spec.name!r}: field 'weight': got {spec.weight}; expected > 0")
