"""GPU pickers: which GPUs of the chosen node a task gets."""

from __future__ import annotations

import pytest

from builders import TaskBuilder, cycle_context, make_node, make_state, make_task, occupy
from gpusched.framework import ClusterState, GpuPicker
from gpusched.plugins.pickers import BestFitGpu, FirstFitGpu, RandomGpu


def node_with(free: list[int]) -> ClusterState:
    """One node whose GPU ``g`` has ``free[g]`` milli free."""
    state = make_state(make_node("n").gpus(len(free)))
    for g, f in enumerate(free):
        if f < 1000:
            occupy(state, "n", gpus=(g,), gpu_milli=1000 - f)
    assert state.gpu_free[0].tolist() == free
    return state


CASES = [
    # (free shares, task, best-fit, first-fit)
    pytest.param(
        [1000, 300, 600, 600],
        make_task().share(500),
        (2,),  # smallest sufficient is 600; GPUs 2 and 3 tie, lowest index wins
        (0,),
        id="share-500",
    ),
    pytest.param([1000, 300, 600, 600], make_task().share(200), (1,), (0,), id="share-200"),
    pytest.param([1000, 300, 600, 600], make_task().share(700), (0,), (0,), id="share-700"),
    pytest.param([300, 600, 1000, 1000], make_task().share(700), (2,), (2,), id="skip-busy"),
    pytest.param(
        [0, 1000, 0, 1000, 1000], make_task().gpus(2), (1, 3), (1, 3), id="two-whole-gpus"
    ),
    pytest.param(
        [1000, 1000, 1000, 1000], make_task().gpus(4), (0, 1, 2, 3), (0, 1, 2, 3), id="all"
    ),
    pytest.param([1000, 500], make_task().cpu(2), (), (), id="cpu-only-task-no-gpu"),
]


@pytest.mark.parametrize(("free", "task", "best", "first"), CASES)
def test_best_fit_gpu(
    free: list[int], task: TaskBuilder, best: tuple[int, ...], first: tuple[int, ...]
) -> None:
    assert BestFitGpu().pick(cycle_context(), task.build(), node_with(free), 0) == best


@pytest.mark.parametrize(("free", "task", "best", "first"), CASES)
def test_first_fit_gpu(
    free: list[int], task: TaskBuilder, best: tuple[int, ...], first: tuple[int, ...]
) -> None:
    assert FirstFitGpu().pick(cycle_context(), task.build(), node_with(free), 0) == first


@pytest.mark.parametrize(
    ("free", "task", "candidates"),
    [
        pytest.param([1000, 300, 600, 600], make_task().share(500), {0, 2, 3}, id="share-500"),
        pytest.param([0, 1000, 0, 1000, 1000], make_task().gpus(2), {1, 3, 4}, id="two-gpus"),
    ],
)
def test_random_gpu_draws_distinct_sufficient_gpus(
    free: list[int], task: TaskBuilder, candidates: set[int]
) -> None:
    state = node_with(free)
    t = task.build()
    seen: set[int] = set()
    for seed in range(50):
        gpus = RandomGpu().pick(cycle_context(seed), t, state, 0)
        assert len(gpus) == t.shape.num_gpu
        assert len(set(gpus)) == len(gpus)
        assert list(gpus) == sorted(gpus)
        assert set(gpus) <= candidates
        seen |= set(gpus)
        assert RandomGpu().pick(cycle_context(seed), t, state, 0) == gpus  # seeded
    assert seen == candidates


@pytest.mark.parametrize("picker", [BestFitGpu(), FirstFitGpu(), RandomGpu()])
def test_pickers_return_no_gpus_for_cpu_tasks(picker: GpuPicker) -> None:
    assert picker.pick(cycle_context(), make_task().cpu(4).build(), node_with([1000]), 0) == ()
