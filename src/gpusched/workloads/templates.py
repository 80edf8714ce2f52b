"""Built-in node templates (defined in :mod:`gpusched.model.templates`, re-exported here)."""

from gpusched.model.templates import (
    DRIVER_RESERVED_MIB,
    TEMPLATES,
    hgx_a100_node,
    hgx_h100_node,
    l4_node,
    pcie_pairs_node,
    t4_node,
)

__all__ = [
    "DRIVER_RESERVED_MIB",
    "TEMPLATES",
    "hgx_a100_node",
    "hgx_h100_node",
    "l4_node",
    "pcie_pairs_node",
    "t4_node",
]
