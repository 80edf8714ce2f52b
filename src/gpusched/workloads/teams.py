"""The built-in teams: queues with quota, priority classes, and who submits what.

Three teams share the cluster, one queue each (a flat tree: every queue is a root, and the
whole cluster is one cohort that borrows from idle guarantees):

==========  ======  =====================================  =================  ===============
queue       weight  guaranteed (share of each GPU model)   limit              lending limit
==========  ======  =====================================  =================  ===============
research    2       H100 1/2, A100 3/8, other 3/8          3/4 of all GPUs    none
serving     1       H100 1/8, A100 1/8, L4 1/2, other 1/8  none               1/2 of its GPUs
dev         1       A100 1/8, L4 1/4, other 1/8            1/4 of all GPUs    none
==========  ======  =====================================  =================  ===============

Guarantees are whole GPUs (rounded down); what is left unguaranteed (3/8 of the H100s and
A100s, 1/4 of the L4s on the built-in cluster) is shared by weight. ``serving`` lends only half
of its idle guarantee so inference bursts find room without preempting; ``dev`` (notebooks,
sweeps) is capped at a quarter of the cluster.

Priority classes: ``inference-critical`` (1000, never preempted), ``training-batch`` (100) and
``best-effort`` (0). The generator sends each job to a team by its kind (:data:`KIND_TEAMS`)
and to a user of that team, so the workload's queues and classes are exactly these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpusched.model import (
    GPU,
    MILLI_PER_GPU,
    JobKind,
    Node,
    PriorityClass,
    QueueName,
    QueueSpec,
    QueueTree,
    Resources,
    SchedulingConfig,
    gpu_model_resource,
)

__all__ = [
    "BEST_EFFORT",
    "INFERENCE_CRITICAL",
    "KIND_TEAMS",
    "PRIORITY_CLASSES",
    "TEAMS",
    "TRAINING_BATCH",
    "Team",
    "default_scheduling",
]

INFERENCE_CRITICAL = "inference-critical"
TRAINING_BATCH = "training-batch"
BEST_EFFORT = "best-effort"

PRIORITY_CLASSES: dict[str, PriorityClass] = {
    INFERENCE_CRITICAL: PriorityClass(INFERENCE_CRITICAL, 1000, preemptible=False),
    TRAINING_BATCH: PriorityClass(TRAINING_BATCH, 100),
    BEST_EFFORT: PriorityClass(BEST_EFFORT, 0),
}


@dataclass(frozen=True, slots=True)
class Team:
    """One team: its queue and what it is promised (shares of each model's GPUs)."""

    name: str
    users: int
    weight: float
    guaranteed: Mapping[str, float]
    """Share of each GPU model's GPUs guaranteed; ``"*"`` for models not named."""
    limit: float | None = None
    """Cap as a share of all GPUs (``None``: no cap)."""
    lending: float | None = None
    """Share of its own guarantee it lends when idle (``None``: all)."""

    def user(self, k: int) -> str:
        return f"{self.name}-{k:02d}"


TEAMS: tuple[Team, ...] = (
    Team("research", 12, 2.0, {"H100": 0.5, "A100": 0.375, "L4": 0.0, "*": 0.375}, limit=0.75),
    Team("serving", 6, 1.0, {"H100": 0.125, "A100": 0.125, "L4": 0.5, "*": 0.125}, lending=0.5),
    Team("dev", 10, 1.0, {"H100": 0.0, "A100": 0.125, "L4": 0.25, "*": 0.125}, limit=0.25),
)

KIND_TEAMS: dict[JobKind, tuple[tuple[str, float], ...]] = {
    JobKind.TRAINING: (("research", 0.7), ("serving", 0.2), ("dev", 0.1)),
    JobKind.INFERENCE: (("serving", 0.8), ("research", 0.2)),
    JobKind.NOTEBOOK: (("dev", 0.6), ("research", 0.3), ("serving", 0.1)),
    JobKind.BATCH: (("research", 0.5), ("dev", 0.5)),
}
"""Which team submits a job of each kind, with probabilities."""


def _gpus_by_model(nodes: Sequence[Node]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in nodes:
        if n.gpu_model:
            out[n.gpu_model] = out.get(n.gpu_model, 0) + n.gpu_count
    return out


def _spec(team: Team, by_model: Mapping[str, int]) -> QueueSpec:
    per_model = {
        gpu_model_resource(m): int(team.guaranteed.get(m, team.guaranteed["*"]) * count)
        * MILLI_PER_GPU
        for m, count in sorted(by_model.items())
    }
    per_model = {k: v for k, v in per_model.items() if v}
    guaranteed = Resources({GPU: sum(per_model.values()), **per_model})
    total = sum(by_model.values()) * MILLI_PER_GPU
    limit = None
    if team.limit is not None:
        cap = int(team.limit * total / MILLI_PER_GPU) * MILLI_PER_GPU
        limit = Resources({GPU: max(cap, guaranteed[GPU])})
    lending = None
    if team.lending is not None:
        lend = int(team.lending * guaranteed[GPU] / MILLI_PER_GPU) * MILLI_PER_GPU
        lending = Resources({GPU: lend})
    return QueueSpec(
        QueueName(team.name),
        guaranteed=guaranteed,
        limit=limit,
        lending_limit=lending,
        weight=team.weight,
    )


def default_scheduling(nodes: Sequence[Node]) -> SchedulingConfig:
    """The built-in scheduling config for ``nodes``: the queues of :data:`TEAMS` (quotas
    scaled to the GPUs of each model ``nodes`` have) and :data:`PRIORITY_CLASSES`."""
    by_model = _gpus_by_model(nodes)
    tree = QueueTree.build(_spec(t, by_model) for t in TEAMS)
    return SchedulingConfig(tree, dict(PRIORITY_CLASSES))
