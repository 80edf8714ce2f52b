"""The gang benchmark: a generated gang workload under the baselines and gpusched.

One workload (the built-in generator, ``jobs`` jobs, one seed) on one cluster with one
scheduling config, replayed under each policy in worker processes:

* ``kube-default`` -- pod by pod, no transaction: gangs can sit partly placed holding GPUs;
* ``fifo-gang`` -- strict FIFO, all or nothing;
* ``gpusched`` -- gangs, EASY backfill with a reservation, reclaim, preemption, fair share;
* ``gpusched-no-reservation`` -- the same without the reservation (plain greedy backfill), to
  show what the reservation does for the largest jobs.

Each run reports the ``simulate --json`` metrics; nothing is tuned per policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpusched.framework import ProfileSpec
from gpusched.model import Job, Node, QueueTree
from gpusched.scheduler import policy_spec
from gpusched.sim.pool import map_in_workers
from gpusched.sim.records import SimOptions
from gpusched.sim.runs import simulate

__all__ = ["GANG_POLICIES", "gang_specs", "run_gang_bench", "without_reservation"]

_NO_RES = "-no-reservation"
GANG_POLICIES = ("kube-default", "fifo-gang", "gpusched", "gpusched-no-reservation")


def without_reservation(spec: ProfileSpec) -> ProfileSpec:
    """``spec`` with its backfill holding no reservation, named ``<name>-no-reservation``."""
    out = spec.model_copy(deep=True)
    out.name = f"{spec.name}{_NO_RES}"
    out.description = f"{spec.description}; no reservation for the blocked head-of-line job"
    out.action_args = {**out.action_args, "backfill": {"reservations": 0}}
    return out


def gang_specs(names: Sequence[str] = GANG_POLICIES) -> list[ProfileSpec]:
    """Profiles for ``names``; ``<policy>-no-reservation`` is derived from ``<policy>``."""
    specs = []
    for name in names:
        if name.endswith(_NO_RES):
            specs.append(without_reservation(policy_spec(name[: -len(_NO_RES)])))
        else:
            specs.append(policy_spec(name))
    return specs


_DATA: dict[str, Any] = {}


def _init(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    queues: QueueTree | None,
    options: SimOptions | None,
) -> None:
    _DATA.update(nodes=nodes, jobs=jobs, queues=queues, options=options)


def _one(pair: tuple[ProfileSpec, int]) -> dict[str, Any]:
    spec, seed = pair
    run = simulate(
        _DATA["nodes"],
        _DATA["jobs"],
        spec,
        seed,
        queues=_DATA["queues"],
        options=_DATA["options"],
    )
    return {"policy": spec.name, **run.summary}


def run_gang_bench(
    nodes: Sequence[Node],
    jobs: Sequence[Job],
    queues: QueueTree | None,
    specs: Sequence[ProfileSpec],
    seed: int,
    *,
    workers: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    options: SimOptions | None = None,
) -> list[dict[str, Any]]:
    """One summary per spec, in the order given (``progress`` as each run finishes;
    ``options``: the simulator's, default ones if ``None``)."""
    return map_in_workers(
        _one,
        [(spec, seed) for spec in specs],
        _init,
        (nodes, jobs, queues, options),
        workers=workers,
        progress=progress,
    )
