"""The explicit registry of built-in plugins: a plain dict, filled here and nowhere else.

Nothing registers itself at import time. A factory takes the plugin's ``args`` from the profile
and the run's :class:`~gpusched.framework.PluginContext`, and raises
:class:`~gpusched.errors.ConfigError` on bad arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpusched.errors import ConfigError
from gpusched.framework import PluginContext
from gpusched.plugins.best_fit import BestFitScore
from gpusched.plugins.dot_product import DotProductScore
from gpusched.plugins.fgd import Fgd
from gpusched.plugins.fgd_ss import FgdSs
from gpusched.plugins.filters import GpuModelFilter, NodeResourcesFit
from gpusched.plugins.gpu_clustering import GpuClusteringScore
from gpusched.plugins.gpu_packing import GpuPackingScore
from gpusched.plugins.kube_default import BalancedAllocationScore, LeastAllocatedScore
from gpusched.plugins.network_packing import NetworkPacking
from gpusched.plugins.node_constraints import NodeConstraints, NodePreference
from gpusched.plugins.numa_cpu import NumaLocalCpu
from gpusched.plugins.pickers import BestFitGpu, FirstFitGpu, RandomGpu
from gpusched.plugins.pinned_models import SparePinnedModels
from gpusched.plugins.queue_sort import FairShare, Fifo, PriorityOrder
from gpusched.plugins.random_choice import RandomScore
from gpusched.plugins.topology_aware import TopologyAwareGpu
from gpusched.plugins.topology_score import TopologyScore
from gpusched.plugins.victims import CheapestVictims

__all__ = ["PLUGINS", "PluginFactory", "create_plugin"]

PluginFactory = Callable[[Mapping[str, Any], PluginContext], object]


def _no_args(cls: Callable[[], object]) -> PluginFactory:
    def make(args: Mapping[str, Any], ctx: PluginContext) -> object:
        if args:
            name = getattr(cls, "name", cls)
            raise ConfigError(f"plugin {name!r} takes no args; got {sorted(args)}")
        return cls()

    return make


PLUGINS: dict[str, PluginFactory] = {
    # filters
    "node-resources-fit": _no_args(NodeResourcesFit),
    "gpu-model": _no_args(GpuModelFilter),
    "node-constraints": _no_args(NodeConstraints),
    "node-preference": _no_args(NodePreference),
    "numa-local-cpu": _no_args(NumaLocalCpu),
    # scores
    "random": _no_args(RandomScore),
    "dot-product": _no_args(DotProductScore),
    "gpu-clustering": _no_args(GpuClusteringScore),
    "gpu-packing": _no_args(GpuPackingScore),
    "best-fit": _no_args(BestFitScore),
    "fgd": Fgd.from_args,
    "fgd-ss": FgdSs.from_args,
    "least-allocated": _no_args(LeastAllocatedScore),
    "balanced-allocation": _no_args(BalancedAllocationScore),
    "gpu-topology": _no_args(TopologyScore),
    "network-packing": _no_args(NetworkPacking),
    "spare-pinned-models": SparePinnedModels.from_args,
    # GPU pickers
    "best-fit-gpu": _no_args(BestFitGpu),
    "first-fit-gpu": _no_args(FirstFitGpu),
    "random-gpu": _no_args(RandomGpu),
    "topology-aware-gpu": _no_args(TopologyAwareGpu),
    # queue order
    "cheapest": _no_args(CheapestVictims),
    "fifo": _no_args(Fifo),
    "priority": _no_args(PriorityOrder),
    "fair-share": _no_args(FairShare),
}


def create_plugin(name: str, args: Mapping[str, Any], ctx: PluginContext) -> object:
    """Instantiate the built-in plugin ``name``; :class:`ConfigError` if it is unknown."""
    factory = PLUGINS.get(name)
    if factory is None:
        raise ConfigError(f"unknown plugin {name!r}; known plugins: {', '.join(sorted(PLUGINS))}")
    return factory(args, ctx)
