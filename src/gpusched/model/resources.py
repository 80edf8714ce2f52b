"""Resource units and resource vectors used everywhere in gpusched.

* CPU in millicores (``96000`` = 96 vCPU), memory in MiB.
* A GPU's compute share in thousandths: every GPU holds :data:`MILLI_PER_GPU` "milli" units, a
  task that shares a GPU asks for fewer (for example ``470``), a whole-GPU task for all of them.

Quota and fair share count resources by name in a :class:`Resources` vector:

* ``gpu`` -- GPU-equivalents in milli-GPU (a 500-milli fraction counts 500, an 8-GPU pod 8000),
  so fractions are charged consistently with whole GPUs;
* ``gpu/<MODEL>`` -- the same, restricted to one GPU model (set by the node a task lands on);
* ``cpu`` (millicores) and ``memory`` (MiB).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView

__all__ = ["CPU", "GPU", "MEMORY", "MILLI_PER_GPU", "Resources", "gpu_model_resource"]

MILLI_PER_GPU = 1000

GPU = "gpu"
CPU = "cpu"
MEMORY = "memory"


def gpu_model_resource(model: str) -> str:
    """The resource name counting GPUs of one model: ``gpu/H100``."""
    return f"{GPU}/{model}"


class Resources(Mapping[str, int]):
    """An immutable vector of named resource amounts; missing names read as 0.

    Explicit zeros are kept (a limit of ``gpu: 0`` differs from no GPU limit at all).

    Supports ``+``, ``-``, ``<=`` (every component) and scaling; hashable.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[str, int] = {k: int(v) for k, v in pairs}

    @classmethod
    def _of(cls, items: dict[str, int]) -> Resources:
        """A vector over ``items`` as given (values already ``int``; the dict is kept)."""
        out = cls.__new__(cls)
        out._items = items
        return out

    def __getitem__(self, key: str) -> int:
        return self._items.get(key, 0)

    # The views of the stored names and amounts (read-only; the same as Mapping's, faster).
    def keys(self) -> KeysView[str]:
        return self._items.keys()

    def items(self) -> ItemsView[str, int]:
        return self._items.items()

    def values(self) -> ValuesView[int]:
        return self._items.values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __hash__(self) -> int:
        return hash(frozenset((k, v) for k, v in self._items.items() if v))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        keys = set(self._items) | set(other._items)
        return all(self[k] == other[k] for k in keys)

    def __repr__(self) -> str:
        return f"Resources({self._items!r})"

    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0) + v
        return Resources._of(out) if isinstance(other, Resources) else Resources(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0) - v
        return Resources._of(out) if isinstance(other, Resources) else Resources(out)

    def scaled(self, factor: int) -> Resources:
        return Resources({k: v * factor for k, v in self._items.items()})

    def fits_in(self, bound: Mapping[str, int], names: Iterable[str] | None = None) -> bool:
        """Whether every component named in ``bound`` (or ``names``) is at most the bound."""
        keys = bound.keys() if names is None else names
        return all(self[k] <= bound.get(k, 0) for k in keys)

    def positive(self) -> Resources:
        return Resources({k: v for k, v in self._items.items() if v > 0})
