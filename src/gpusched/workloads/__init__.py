"""The built-in default cluster and the seeded workload generator."""

from gpusched.workloads.cluster import default_cluster
from gpusched.workloads.generator import WorkloadParams, generate_workload

__all__ = ["WorkloadParams", "default_cluster", "generate_workload"]
