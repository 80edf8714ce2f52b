"""Built-in placement policies as profile specs, by the names users pass to ``--policy``.

===============  ================================================================
name             what it is
===============  ================================================================
kube-default     stock kube-scheduler: integer GPUs, least-allocated spreading
random           uniformly random feasible node and GPU
dotprod          Tetris-style dot product of demand and free resources
clustering       same GPU shape together (GpuClustering)
packing          fill shared GPUs, then used nodes (GpuPacking)
bestfit          least weighted leftover (BestFit)
fgd              fragmentation gradient descent (the FGD paper)
fgd-ss           FGD on CPU-aware fragmentation, sum-of-squares pairing of shared GPUs
fifo-gang        strict FIFO, gangs all or nothing (the batch baseline)
gpusched         backfill (four reservations, aging, limit guard) + reclaim + preemption,
                 fair share, FGD
gpusched-defrag  gpusched plus defragmentation moves
gpusched-easy    gpusched with one reservation, no aging, no limit guard (plain EASY)
gpusched-topo    gpusched with GPU topology: connectivity score, topology-aware GPU picker
===============  ================================================================

Defragmentation is opt-in (``gpusched-defrag``, or ``defrag`` in a profile's actions): on the
built-in main job its moves cost more progress and waiting than they saved (docs/benchmarks.md
§6.1), while on fragmentation-prone workloads it shortens waits.

``gpusched``'s backfill holds four reservations, laid out in time (each after the ones
before it), ages jobs after 24 h (a job pending longer goes first for a reservation, oldest
first) and has a limit guard at 24 h (a job its queue's limit has held back that long evicts
the queue's work that started after it; :mod:`gpusched.actions.limit_guard`). With evicted
jobs queueing from their eviction (the simulator's default), on the 5,000-job gang runs
(seeds 1-20) the largest 1% of jobs' longest wait is 95.9 h on average against 122.6 h
without the limit guard and 175.2 h without reservations (shorter than without on all 20
seeds); the average wait 56.3 against 62.3 min, the p95 wait 92.1 against 83.7 min, with
116 against 88 preemptions a run. On the main job (seeds 1-32) the largest 1% wait 16.5 h
against 18.7 h without the guard and 22.9 h without reservations, but 19.0 h against 16.3 h
without reservations on seeds 17-32. Not a bound (docs/benchmarks.md §4).

``gpusched-topo`` is derived from ``gpusched`` (:func:`_with_topology`: the same actions,
queues, filters and scores plus the topology parts), so the two cannot drift apart. It is a
separate name so that ``gpusched`` keeps its openb figures exactly:
on nodes without a topology the ``gpu-topology`` score is a constant and the picker is
best fit, but FGD's own GPU choice for sharing tasks is not used.
"""

from __future__ import annotations

from gpusched.errors import ConfigError
from gpusched.framework import PluginSpec, ProfileSpec, TieBreak

__all__ = ["BEST_POLICY", "DEFAULT_COMPARISON", "LIVE_POLICY", "POLICIES", "policy_spec"]

_BEST_FIT_GPU = PluginSpec(name="best-fit-gpu")


def _spec(
    name: str, description: str, score: str, picker: PluginSpec = _BEST_FIT_GPU
) -> ProfileSpec:
    return ProfileSpec(
        name=name,
        description=description,
        scores=[PluginSpec(name=score)],
        gpu_picker=picker,
    )


POLICIES: dict[str, ProfileSpec] = {
    "kube-default": ProfileSpec(
        name="kube-default",
        description=(
            "stock kube-scheduler: pods one by one (gangs may be left partial), GPUs as "
            "integer counts, least-allocated spreading"
        ),
        actions=["allocate-pods"],
        queue_sort="priority",
        scores=[PluginSpec(name="least-allocated"), PluginSpec(name="balanced-allocation")],
        gpu_picker=PluginSpec(name="first-fit-gpu"),
        tie_break=TieBreak.RANDOM,
        gpu_as_integer=True,
    ),
    "random": _spec(
        "random", "uniformly random feasible node and GPU", "random", PluginSpec(name="random-gpu")
    ),
    "dotprod": _spec("dotprod", "smallest dot product of demand and free resources", "dot-product"),
    "clustering": _spec(
        "clustering", "keep tasks of the same GPU shape together", "gpu-clustering"
    ),
    "packing": _spec(
        "packing", "fill shared GPUs, then used nodes, then small idle nodes", "gpu-packing"
    ),
    "bestfit": _spec("bestfit", "least weighted CPU+GPU leftover", "best-fit"),
    "fgd": _spec("fgd", "fragmentation gradient descent", "fgd", PluginSpec(name="fgd")),
    "fgd-ss": _spec(
        "fgd-ss",
        "FGD on CPU-aware fragmentation, sum-of-squares pairing of shared GPUs",
        "fgd-ss",
        PluginSpec(name="fgd-ss"),
    ),
    "fifo-gang": ProfileSpec(
        name="fifo-gang",
        description="strict FIFO, gangs all or nothing, FGD placement (the batch baseline)",
        actions=["allocate-fifo"],
        scores=[PluginSpec(name="fgd")],
        gpu_picker=PluginSpec(name="fgd"),
    ),
    "gpusched": ProfileSpec(
        name="gpusched",
        description=(
            "gpusched batch: gangs, backfill with four reservations laid out in time (jobs "
            "pending over 24 h first) and a quota hold, a limit guard (a job its queue's limit "
            "has held back over 24 h evicts the queue's work that started after it), quota "
            "reclaim, priority preemption, "
            "fair share, FGD placement; work that runs on any GPU model stays off the models "
            "other work is pinned to"
        ),
        actions=["backfill", "reclaim", "preempt"],
        action_args={
            "backfill": {
                "reservations": 4,
                "starve_after_s": 86_400.0,
                "limit_guard_after_s": 86_400.0,
            }
        },
        queue_sort="fair-share",
        filters=[
            PluginSpec(name="node-resources-fit"),
            PluginSpec(name="gpu-model"),
            PluginSpec(name="node-constraints"),
        ],
        scores=[
            PluginSpec(name="fgd"),
            PluginSpec(name="node-preference", weight=0.2),
            PluginSpec(name="spare-pinned-models"),
        ],
        gpu_picker=PluginSpec(name="fgd"),
    ),
}


def _with_topology(base: ProfileSpec, name: str) -> ProfileSpec:
    """``base`` with GPU topology: the same actions, queue order, filters and scores, plus
    ``gpu-topology`` (weight 8) and ``network-packing`` (weight 2) right after ``fgd``, the
    ``numa-local-cpu`` filter and the ``topology-aware-gpu`` picker. Derived, not copied, so
    the two cannot drift apart.

    Weight 8: one step of set quality (12.5 points) outweighs any FGD difference (0..100);
    fewer GPUs left (1.4 points each) competes with FGD on packing.
    """
    spec = base.model_copy(deep=True)
    spec.name = name
    spec.description = (
        f"{base.name} with GPU topology: FGD plus the gpu-topology connectivity score, the "
        "topology-aware GPU picker (best-connected set, least damage), network domains for "
        "gangs that ask"
    )
    after = next(i for i, s in enumerate(spec.scores) if s.name == "fgd") + 1
    spec.scores[after:after] = [
        PluginSpec(name="gpu-topology", weight=8.0),
        PluginSpec(name="network-packing", weight=2.0),
    ]
    spec.filters.append(PluginSpec(name="numa-local-cpu"))
    spec.gpu_picker = PluginSpec(name="topology-aware-gpu")
    return spec


def _with_defrag(base: ProfileSpec, name: str) -> ProfileSpec:
    """``base`` with the ``defrag`` action after its others (derived, not copied)."""
    spec = base.model_copy(deep=True)
    spec.name = name
    spec.description = f"{base.name} plus defragmentation moves (restartable jobs restarted "
    spec.description += "elsewhere so that a job blocked by fragmentation fits)"
    spec.actions.append("defrag")
    return spec


def _with_easy(base: ProfileSpec, name: str) -> ProfileSpec:
    """``base`` whose backfill holds one reservation, does not age jobs and has no limit
    guard: plain EASY backfill (module docstring; derived, not copied)."""
    spec = base.model_copy(deep=True)
    spec.name = name
    spec.description = (
        f"{base.name} with one reservation, no aging and no limit guard (plain EASY backfill: "
        "the first blocked job in queue order holds the reservation)"
    )
    spec.action_args["backfill"] = {
        k: v
        for k, v in spec.action_args.get("backfill", {}).items()
        if k not in ("reservations", "starve_after_s", "limit_guard_after_s")
    }
    return spec


POLICIES["gpusched-topo"] = _with_topology(POLICIES["gpusched"], "gpusched-topo")
POLICIES["gpusched-defrag"] = _with_defrag(POLICIES["gpusched"], "gpusched-defrag")
POLICIES["gpusched-easy"] = _with_easy(POLICIES["gpusched"], "gpusched-easy")

#: The policy ``gpusched simulate`` compares against the baselines by default.
BEST_POLICY = "gpusched"
#: What ``gpusched simulate`` runs with no ``--policy``: the baselines, then gpusched.
DEFAULT_COMPARISON = ("kube-default", "fifo-gang", BEST_POLICY)
#: What ``gpusched run`` (and ``replay``'s comparison) runs with no ``--policy``: the
#: simulator's default. Its four reservations are laid out from run-time estimates, which
#: live pods carry (``gpusched.dev/runtime-estimate``) and the live scheduler learns from
#: completed pods per user and kind; on the replay test's workload live starts were then at
#: most 4.3-4.6 s of trace later than the simulation's (216-217 s without the learned
#: means, which is why ``gpusched-easy`` was the live default until then; docs/live.md).
LIVE_POLICY = BEST_POLICY


def policy_spec(name: str) -> ProfileSpec:
    """The built-in profile called ``name``; :class:`ConfigError` listing the names otherwise."""
    spec = POLICIES.get(name)
    if spec is None:
        raise ConfigError(
            f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)} "
            "(or pass --profile FILE)"
        )
    return spec.model_copy(deep=True)
