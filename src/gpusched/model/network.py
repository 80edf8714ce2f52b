"""Network topology between nodes: an ordered list of levels read from node labels.

A multi-node training job runs at the speed of its slowest network path, so a gang should sit
inside one part of the network: one NVLink clique, one rack, one block. Clusters say where a
node sits with labels, one per level, coarse to fine; two nodes are in the same *domain* of a
level when they carry the same value for its label. gpusched does not invent a hierarchy: the
level list is configurable, with presets for the conventions in use (as Kueue's ``Topology``
object, which also lists levels coarse to fine):

=============  ==================================================================================
preset         levels (coarse to fine): label
=============  ==================================================================================
``gke``        ``block``: ``cloud.google.com/gce-topology-block``, ``subblock``:
               ``cloud.google.com/gce-topology-subblock``, ``host``:
               ``cloud.google.com/gce-topology-host``
``eks``        ``layer-1`` .. ``layer-4``: ``topology.k8s.aws/network-node-layer-1`` .. ``-4``
               (layer 1 is the top of the network, the broadest; layer 4 exists on some
               instance types only)
``topograph``  ``datacenter``, ``spine``, ``block``, ``accelerator``:
               ``network.topology.nvidia.com/<level>`` (NVIDIA Topograph; ``accelerator`` is the
               NVLink domain)
``topograph-tiers``  ``tier-3``, ``tier-2``, ``tier-1``: ``fabric.topograph.run/tier-N`` (newer
               Topograph; tier 1 is the switch a node connects to, as ``network-level-1``)
``gpusched``   ``block``: ``topology.gpusched.io/block``, ``rack``: ``topology.gpusched.io/rack``
               (the built-in modelled clusters)
=============  ==================================================================================

Every preset is followed by ``clique``: ``nvidia.com/gpu.clique`` (GPU Feature Discovery's
multi-node NVLink domain, an NVL72 rack for example) when some node carries that label, as the
finest level: GPUs of one clique talk over NVLink, faster than any network level.

**Detection** (:func:`detect_network`): the first preset some node carries a label of, in the
order of the table; the levels it keeps are those some node defines. A cluster with no topology
label has no levels, and a gang asking for one gets a :class:`~gpusched.errors.ConfigError`
naming the level (:meth:`NetworkTopology.level`).

A job asks with :class:`TopologyRequest`: ``required`` (the gang must sit in one domain of the
level, else it waits) or preferred (one domain if any can hold it, else as few as possible).
Placement lives in :mod:`gpusched.framework.domains`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpusched.errors import ConfigError

__all__ = [
    "CLIQUE_LABEL",
    "PRESETS",
    "NetworkLevel",
    "NetworkTopology",
    "TopologyRequest",
    "detect_network",
    "network_from_spec",
]

#: GPU Feature Discovery's label for a multi-node NVLink domain.
CLIQUE_LABEL = "nvidia.com/gpu.clique"


@dataclass(frozen=True, slots=True)
class NetworkLevel:
    """One level of the network: a name users write (``rack``) and the node label it reads."""

    name: str
    label: str


def _levels(prefix: str, names: Iterable[str]) -> tuple[NetworkLevel, ...]:
    return tuple(NetworkLevel(n, f"{prefix}{n}") for n in names)


#: Presets, coarse to fine, in detection order.
PRESETS: Mapping[str, tuple[NetworkLevel, ...]] = {
    "gke": _levels("cloud.google.com/gce-topology-", ("block", "subblock", "host")),
    "eks": tuple(
        NetworkLevel(f"layer-{i}", f"topology.k8s.aws/network-node-layer-{i}") for i in range(1, 5)
    ),
    "topograph": _levels(
        "network.topology.nvidia.com/", ("datacenter", "spine", "block", "accelerator")
    ),
    "topograph-tiers": tuple(
        NetworkLevel(f"tier-{i}", f"fabric.topograph.run/tier-{i}") for i in (3, 2, 1)
    ),
    "gpusched": _levels("topology.gpusched.io/", ("block", "rack")),
}


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A gang's wish to sit in one network domain.

    Attributes:
        level: a level name (``rack``) or its label (``topology.gpusched.io/rack``).
        required: ``True``: one domain or not at all (the job waits); ``False``: one domain if
            any can hold the gang, else as few domains as possible.
    """

    level: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """The cluster's levels, coarse to fine (possibly none)."""

    levels: tuple[NetworkLevel, ...] = ()
    preset: str = ""

    def level(self, name: str, *, where: str = "topology") -> int:
        """Index of the level called ``name`` (or labelled ``name``); :class:`ConfigError`
        naming it and the known levels otherwise."""
        for i, lvl in enumerate(self.levels):
            if name in (lvl.name, lvl.label):
                return i
        known = ", ".join(f"{lv.name} ({lv.label})" for lv in self.levels) or "none"
        raise ConfigError(
            f"{where}: topology level {name!r} is defined by no node label; the cluster's "
            f"levels are: {known}"
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)


def _present(
    labels: Sequence[Mapping[str, str]], levels: Iterable[NetworkLevel]
) -> list[NetworkLevel]:
    return [lv for lv in levels if any(lv.label in lab for lab in labels)]


def detect_network(labels: Sequence[Mapping[str, str]]) -> NetworkTopology:
    """The levels the nodes' ``labels`` define (module docstring: detection)."""
    clique = _present(labels, (NetworkLevel("clique", CLIQUE_LABEL),))
    for name, levels in PRESETS.items():
        found = _present(labels, levels)
        if found:
            return NetworkTopology(tuple(found + clique), name)
    return NetworkTopology(tuple(clique), "clique" if clique else "")


def network_from_spec(
    spec: str | Sequence[str], labels: Sequence[Mapping[str, str]], *, where: str = "topology"
) -> NetworkTopology:
    """Levels from a preset name or a list of label keys (coarse to fine; a key's last path
    segment names the level). Every level must be defined by some node's label:
    :class:`ConfigError` naming the first that is not."""
    if isinstance(spec, str):
        levels = PRESETS.get(spec)
        if levels is None:
            raise ConfigError(
                f"{where}: unknown topology preset {spec!r}; known: {', '.join(PRESETS)} "
                "(or give the list of label keys, coarse to fine)"
            )
        found = _present(labels, levels)
        if not found:
            raise ConfigError(
                f"{where}: topology preset {spec!r}: no node carries any of its labels "
                f"({', '.join(lv.label for lv in levels)})"
            )
        clique = _present(labels, (NetworkLevel("clique", CLIQUE_LABEL),))
        return NetworkTopology(tuple(found + clique), spec)
    out: list[NetworkLevel] = []
    for i, key in enumerate(spec):
        name = "clique" if key == CLIQUE_LABEL else key.rsplit("/", 1)[-1]
        lvl = NetworkLevel(name, key)
        if not _present(labels, (lvl,)):
            raise ConfigError(f"{where}[{i}]: topology level {key!r} is defined by no node label")
        out.append(lvl)
    return NetworkTopology(tuple(out), "custom")
