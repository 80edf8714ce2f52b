"""A modelled topology cluster and a workload that exercises it (issue 4's benchmark).

Cluster (:func:`topology_cluster`): ``blocks`` network blocks of ``racks_per_block`` racks of
``nodes_per_rack`` HGX boards, H100 and A100 racks alternating (labels
``topology.gpusched.io/block`` and ``topology.gpusched.io/rack``, the ``gpusched`` preset),
plus one rack of L4 inference nodes in the last block. Defaults: 2 x 4 x 4 = 32 HGX nodes
(256 GPUs) and 4 L4 nodes (16 GPUs).

Workload (:func:`topology_workload`), each job drawn independently with the seed:

=========================  =====  ===================================================
kind                       share  request
=========================  =====  ===================================================
multi-GPU training          35%   one pod of 2, 4 or 8 GPUs (weights 4 : 4 : 2)
multi-node training gang    12%   2, 3, 4 or 6 pods of 8 GPUs; ``topology_preferred:
                                  rack`` (a quarter of those a rack holds: required)
inference by memory         38%   one pod, ``gpu_memory`` 6, 10, 16 or 20 GiB
1-GPU training              15%   one whole GPU
=========================  =====  ===================================================

Run times are log-uniform (training 10 min to 4 h, gangs 30 min to 6 h, inference 5 min to
2 h); arrivals are a Poisson process whose rate makes the offered GPU load ``load`` (gangs and
whole GPUs counted whole, inference at its share of an 80 GB GPU).
"""

from __future__ import annotations

import math
import random

from gpusched.model import (
    MILLI_PER_GPU,
    Job,
    JobId,
    JobKind,
    Node,
    Task,
    TaskId,
    TaskShape,
    TopologyRequest,
)
from gpusched.model.task import nominal_share
from gpusched.model.templates import hgx_a100_node, hgx_h100_node, l4_node

__all__ = ["BLOCK_LABEL", "RACK_LABEL", "topology_cluster", "topology_workload"]

BLOCK_LABEL = "topology.gpusched.io/block"
RACK_LABEL = "topology.gpusched.io/rack"


def topology_cluster(
    blocks: int = 2, racks_per_block: int = 4, nodes_per_rack: int = 4, l4_nodes: int = 4
) -> list[Node]:
    """The modelled cluster (module docstring)."""
    nodes: list[Node] = []
    rack = 0
    for b in range(blocks):
        for _ in range(racks_per_block):
            build = hgx_h100_node if rack % 2 == 0 else hgx_a100_node
            labels = {BLOCK_LABEL: f"b{b}", RACK_LABEL: f"r{rack:02d}"}
            for i in range(nodes_per_rack):
                nodes.append(build(f"r{rack:02d}-n{i}", labels=labels))
            rack += 1
    labels = {BLOCK_LABEL: f"b{blocks - 1}", RACK_LABEL: f"r{rack:02d}"}
    nodes.extend(l4_node(f"l4-{i}", labels=labels) for i in range(l4_nodes))
    return nodes


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return round(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _job(  # noqa: PLR0917 (internal helper)
    name: str,
    kind: JobKind,
    shape: TaskShape,
    pods: int,
    duration: float,
    topology: TopologyRequest | None = None,
) -> Job:
    jid = JobId(name)
    tasks = tuple(
        Task(TaskId(name if pods == 1 else f"{name}-{i}"), jid, shape) for i in range(pods)
    )
    return Job(jid, tasks, kind=kind, duration=duration, topology=topology)


def topology_workload(
    nodes: list[Node], jobs: int = 1000, seed: int = 7, load: float = 0.85
) -> list[Job]:
    """The workload (module docstring) sized for ``nodes``."""
    rng = random.Random(seed)
    drawn: list[Job] = []
    gpu_seconds = 0.0
    for i in range(jobs):
        u = rng.random()
        name = f"j{i:05d}"
        if u < 0.35:
            g = rng.choices((2, 4, 8), weights=(4, 4, 2))[0]
            shape = TaskShape(
                cpu_milli=g * 12_000, memory_mib=g * 96 * 1024, num_gpu=g, gpu_milli=MILLI_PER_GPU
            )
            job = _job(name, JobKind.TRAINING, shape, 1, _log_uniform(rng, 600, 14_400))
            gpu_seconds += g * (job.duration or 0)
        elif u < 0.47:
            pods = rng.choice((2, 3, 4, 6))
            shape = TaskShape(
                cpu_milli=96_000, memory_mib=768 * 1024, num_gpu=8, gpu_milli=MILLI_PER_GPU
            )
            request = TopologyRequest("rack", required=pods <= 4 and rng.random() < 0.25)
            job = _job(
                name, JobKind.TRAINING, shape, pods, _log_uniform(rng, 1800, 21_600), request
            )
            gpu_seconds += 8 * pods * (job.duration or 0)
        elif u < 0.85:
            mem = rng.choice((6, 10, 16, 20)) * 1024
            shape = TaskShape(
                cpu_milli=4000,
                memory_mib=32 * 1024,
                num_gpu=1,
                gpu_milli=nominal_share(mem),
                gpu_memory_mib=mem,
            )
            job = _job(name, JobKind.INFERENCE, shape, 1, _log_uniform(rng, 300, 7200))
            gpu_seconds += shape.gpu_milli / MILLI_PER_GPU * (job.duration or 0)
        else:
            shape = TaskShape(
                cpu_milli=12_000, memory_mib=96 * 1024, num_gpu=1, gpu_milli=MILLI_PER_GPU
            )
            job = _job(name, JobKind.TRAINING, shape, 1, _log_uniform(rng, 600, 14_400))
            gpu_seconds += job.duration or 0
        drawn.append(job)
    capacity = sum(n.gpu_count for n in nodes)
    span = gpu_seconds / (load * capacity)
    rate = jobs / span
    t = 0.0
    out = []
    for job in drawn:
        t += rng.expovariate(rate)
        out.append(
            Job(
                job.id,
                job.tasks,
                kind=job.kind,
                duration=job.duration,
                topology=job.topology,
                submit_time=round(t, 3),
            )
        )
    return out
