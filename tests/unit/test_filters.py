"""Filters: node-resources-fit and gpu-model masks, and the numbers their explanations give."""

from __future__ import annotations

import pytest

from builders import TaskBuilder, cycle_context, make_node, make_state, make_task, occupy
from gpusched.framework import ClusterState
from gpusched.plugins.filters import GpuModelFilter, NodeResourcesFit


def cluster() -> ClusterState:
    """Three nodes; GPUs of ``a`` are partly used.

    a: 4 x G2, 32 CPU, 256 GiB, GPU free [500, 0, 0, 300]
    b: 2 x T4, 16 CPU,  64 GiB, GPU free [1000, 1000]
    c: no GPU,  8 CPU,  32 GiB
    """
    state = make_state(
        make_node("a").gpus(4, model="G2").cpu(32).mem_gib(256),
        make_node("b").gpus(2, model="T4").cpu(16).mem_gib(64),
        make_node("c").cpu(8).mem_gib(32),
    )
    occupy(state, "a", gpus=(0,), gpu_milli=500)
    occupy(state, "a", gpus=(1, 2), gpu_milli=1000)
    occupy(state, "a", gpus=(3,), gpu_milli=700)
    return state


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(1).mem_gib(1), [True, True, True], id="small-cpu-task-fits-all"
        ),
        pytest.param(make_task().cpu(8), [True, True, True], id="cpu-exactly-free-fits"),
        pytest.param(make_task().cpu(8.001), [True, True, False], id="one-millicore-too-many"),
        pytest.param(make_task().cpu(20), [True, False, False], id="cpu-only-a-has"),
        pytest.param(make_task().mem_gib(100), [True, False, False], id="memory-only-a-has"),
        pytest.param(
            make_task().share(500), [True, True, False], id="share-500-fits-half-free-gpu"
        ),
        pytest.param(make_task().share(501), [False, True, False], id="share-501-skips-a"),
        pytest.param(make_task().share(300), [True, True, False], id="share-300-fits-either"),
        pytest.param(make_task().gpus(1), [False, True, False], id="whole-gpu-only-on-b"),
        pytest.param(make_task().gpus(2), [False, True, False], id="two-gpus-only-on-b"),
        pytest.param(make_task().gpus(3), [False, False, False], id="three-gpus-nowhere"),
        pytest.param(make_task().gpus(2).cpu(20), [False, False, False], id="gpus-on-b-cpu-on-a"),
    ],
)
def test_node_resources_fit_mask(task: TaskBuilder, expected: list[bool]) -> None:
    mask = NodeResourcesFit().filter(cycle_context(), task.build(), cluster())
    assert mask.tolist() == expected


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().cpu(20).gpus(2),
            "2/3 nodes have less than 20 CPU free (most free: 32 CPU); "
            "2/3 nodes have fewer than 2 GPU(s) with 1000/1000 free (best node: 2); "
            "1 nodes with enough GPU lack CPU or memory",
            id="cpu-and-gpu-short-on-different-nodes",
        ),
        pytest.param(
            make_task().cpu(1).mem_gib(300),
            "3/3 nodes have less than 300.0 GiB memory free (most free: 256.0 GiB)",
            id="memory-short-everywhere",
        ),
        pytest.param(
            make_task().share(800),
            # a: best GPU has 500 free; b: 2 fit; c: no GPU -> 2 of 3 short, best node has 2.
            "2/3 nodes have fewer than 1 GPU(s) with 800/1000 free (best node: 2)",
            id="share-short-on-a-and-c",
        ),
        pytest.param(
            make_task().gpus(4),
            # Free whole GPUs: a 0, b 2, c 0.
            "3/3 nodes have fewer than 4 GPU(s) with 1000/1000 free (best node: 2)",
            id="four-gpus-nowhere",
        ),
        pytest.param(make_task().cpu(1), None, id="fits-everywhere-explains-nothing"),
    ],
)
def test_node_resources_fit_explains_with_numbers(task: TaskBuilder, expected: str | None) -> None:
    assert NodeResourcesFit().explain(cycle_context(), task.build(), cluster()) == expected


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(make_task().gpus(1), [True, True, True], id="no-model-restriction"),
        pytest.param(make_task().gpus(1).models("T4"), [False, True, False], id="t4-only"),
        pytest.param(make_task().gpus(1).models("T4", "G2"), [True, True, False], id="either"),
        pytest.param(make_task().gpus(1).models("H100"), [False, False, False], id="absent-model"),
        pytest.param(
            make_task().cpu(1).models("T4"), [True, True, True], id="cpu-task-ignores-model"
        ),
    ],
)
def test_gpu_model_mask(task: TaskBuilder, expected: list[bool]) -> None:
    mask = GpuModelFilter().filter(cycle_context(), task.build(), cluster())
    assert mask.tolist() == expected


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        pytest.param(
            make_task().gpus(1).models("T4"), "only 1/3 nodes have GPU model T4", id="one"
        ),
        pytest.param(
            make_task().gpus(1).models("T4", "A100"),
            "only 1/3 nodes have GPU model A100|T4",
            id="models-listed-sorted",
        ),
        pytest.param(
            make_task().gpus(1).models("H100"), "only 0/3 nodes have GPU model H100", id="none"
        ),
        pytest.param(make_task().gpus(1), None, id="no-restriction-no-reason"),
    ],
)
def test_gpu_model_explains_with_numbers(task: TaskBuilder, expected: str | None) -> None:
    assert GpuModelFilter().explain(cycle_context(), task.build(), cluster()) == expected


def test_filters_do_not_change_the_state() -> None:
    state = cluster()
    before = (state.cpu_free.tolist(), state.gpu_free.tolist(), state.version.tolist())
    task = make_task().gpus(2).cpu(20).models("T4").build()
    for plugin in (NodeResourcesFit(), GpuModelFilter()):
        plugin.filter(cycle_context(), task, state)
        plugin.explain(cycle_context(), task, state)
    assert (state.cpu_free.tolist(), state.gpu_free.tolist(), state.version.tolist()) == before
