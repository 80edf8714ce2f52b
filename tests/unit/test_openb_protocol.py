"""openb_order: the FGD paper's protocol resizes the pod list to 130% of GPU capacity,
deterministically per seed, and shuffles the node order with the same random source."""

from __future__ import annotations

from collections import Counter

import pytest

from builders import make_job, make_node
from gpusched.model import Job, Node
from gpusched.sim import openb_order


def cluster(gpus: int = 8) -> list[Node]:
    """``gpus`` 1-GPU nodes (capacity = gpus * 1000 milli)."""
    return [make_node(f"node-{i}").gpus(1).build() for i in range(gpus)]


def workload(count: int) -> list[Job]:
    """Pods asking 250, 500, 1000 and 0 (CPU-only) milli in turn."""
    shapes = [make_job("").share(250), make_job("").share(500), make_job("").gpus(1), make_job("")]
    jobs = []
    for i in range(count):
        builder = shapes[i % 4]
        jobs.append(Job.single(f"pod-{i:03d}", builder.shape(), submit_time=float(i), duration=1.0))
    return jobs


def milli(jobs: list[Job]) -> int:
    return sum(j.gpu_milli for j in jobs)


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_a_small_workload_is_grown_to_just_under_130_percent(seed: int) -> None:
    nodes, jobs = cluster(8), workload(8)  # 8 pods ask 3500 of 8000 milli
    _, ordered = openb_order(nodes, jobs, seed)
    limit = 1.3 * 8000
    # Pods are appended until the next draw would pass 10400; the largest pod asks 1000.
    assert limit - 1000 < milli(ordered) <= limit
    # Every original pod is there once, first, in a shuffled order; copies follow.
    originals = {j.id for j in jobs}
    assert {j.id for j in ordered[: len(jobs)]} == originals
    extra = ordered[len(jobs) :]
    assert extra
    assert len({j.id for j in ordered}) == len(ordered)
    for i, job in enumerate(extra, start=1):
        base, _, suffix = job.id.rpartition("-r")
        assert base in originals
        assert suffix == str(i)
        assert job.tasks[0].shape == next(j for j in jobs if j.id == base).tasks[0].shape
        assert job.duration is None  # copies keep only the shape and kind


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_a_large_workload_is_cut_to_130_percent(seed: int) -> None:
    nodes, jobs = cluster(2), workload(40)  # 40 pods ask 17500 of 2000 milli
    _, ordered = openb_order(nodes, jobs, seed)
    assert milli(ordered) <= 1.3 * 2000
    assert {j.id for j in ordered} <= {j.id for j in jobs}
    assert len({j.id for j in ordered}) == len(ordered)
    # Pods are dropped one at a time, so the last drop crossed the limit.
    assert milli(ordered) > 1.3 * 2000 - 1000


def test_the_same_seed_gives_the_same_order_and_another_seed_another() -> None:
    nodes, jobs = cluster(8), workload(12)
    first = openb_order(nodes, jobs, 7)
    again = openb_order(nodes, jobs, 7)
    assert [n.name for n in first[0]] == [n.name for n in again[0]]
    assert [j.id for j in first[1]] == [j.id for j in again[1]]
    others = {tuple(j.id for j in openb_order(nodes, jobs, s)[1]) for s in range(8)}
    assert len(others) > 1


def test_nodes_are_a_permutation_and_inputs_are_not_changed() -> None:
    nodes, jobs = cluster(8), workload(12)
    nodes_before, jobs_before = list(nodes), list(jobs)
    node_order, _ = openb_order(nodes, jobs, 3)
    assert Counter(n.name for n in node_order) == Counter(n.name for n in nodes)
    assert nodes == nodes_before
    assert jobs == jobs_before
    orders = {tuple(n.name for n in openb_order(nodes, jobs, s)[0]) for s in range(8)}
    assert len(orders) > 1


def test_tune_sets_the_target_share_of_capacity() -> None:
    nodes, jobs = cluster(8), workload(8)
    _, ordered = openb_order(nodes, jobs, 0, tune=0.5)
    # 3500 milli is under 0.5 * 8000 = 4000, so pods are added while they fit under 4000.
    assert 3000 < milli(ordered) <= 4000
