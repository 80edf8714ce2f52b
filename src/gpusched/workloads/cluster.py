"""The built-in default cluster: a modelled mixed GPU fleet that runs with no input files.

============  =====  ==========================  =====  ==========
pool          nodes  GPUs per node               cores  memory
============  =====  ==========================  =====  ==========
h100          12     8 x H100 80 GB (SXM)        192    2 TiB
a100          12     8 x A100 80 GB (SXM)        128    1 TiB
l4            16     4 x L4 24 GB (PCIe)         48     192 GiB
cpu           4      none                        64     256 GiB
============  =====  ==========================  =====  ==========

256 GPUs in all. Nodes carry ``gpusched.io/pool`` and a rack label (4 nodes per rack) so later
topology work has something to read.
"""

from __future__ import annotations

from gpusched.model import Node

__all__ = ["default_cluster"]

_POOLS = (
    # name, count, cores, memory GiB, gpus, model, GPU memory GiB
    ("h100", 12, 192, 2048, 8, "H100", 80),
    ("a100", 12, 128, 1024, 8, "A100", 80),
    ("l4", 16, 48, 192, 4, "L4", 24),
    ("cpu", 4, 64, 256, 0, "", 0),
)


def default_cluster() -> list[Node]:
    """The built-in cluster (see module docstring)."""
    nodes: list[Node] = []
    for pool, count, cores, mem_gib, gpus, model, gpu_gib in _POOLS:
        for i in range(count):
            nodes.append(
                Node.with_gpus(
                    f"{pool}-{i:03d}",
                    cpu_milli=cores * 1000,
                    memory_mib=mem_gib * 1024,
                    gpu_count=gpus,
                    gpu_model=model,
                    gpu_memory_mib=gpu_gib * 1024,
                    labels={"gpusched.io/pool": pool, "gpusched.io/rack": f"{pool}-r{i // 4}"},
                )
            )
    return nodes
