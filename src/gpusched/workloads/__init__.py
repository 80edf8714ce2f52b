"""The built-in default cluster, scheduling config (teams, quotas, priority classes) and the
seeded, calibrated workload generator."""

from gpusched.workloads.calibration import (
    CALIBRATIONS,
    Calibration,
    Target,
    WorkloadStats,
    calibrate,
    measure,
)
from gpusched.workloads.cluster import default_cluster
from gpusched.workloads.generator import WorkloadParams, calibration_for, generate_workload
from gpusched.workloads.teams import PRIORITY_CLASSES, TEAMS, default_scheduling

__all__ = [
    "CALIBRATIONS",
    "PRIORITY_CLASSES",
    "TEAMS",
    "Calibration",
    "Target",
    "WorkloadParams",
    "WorkloadStats",
    "calibrate",
    "calibration_for",
    "default_cluster",
    "default_scheduling",
    "generate_workload",
    "measure",
]
