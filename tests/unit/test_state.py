"""ClusterState: array layout, allocate/release arithmetic, version stamps, working copies."""

from __future__ import annotations

import numpy as np
import pytest

from builders import TaskBuilder, make_node, make_state, make_task, occupy
from gpusched.errors import InvariantError
from gpusched.framework import ClusterState
from gpusched.framework.allocation import SHAPE_CLASSES, Allocation, AllocationMap, shape_class
from gpusched.model import GpuModel, JobId, NodeName, TaskId


def free_arrays(state: ClusterState) -> dict[str, list[int] | list[list[int]]]:
    """Everything allocate/release may change, as plain lists (for equality checks)."""
    return {
        "cpu_free": state.cpu_free.tolist(),
        "mem_free": state.mem_free.tolist(),
        "gpu_free": state.gpu_free.tolist(),
        "gpu_idle": state.gpu_idle.tolist(),
        "shape_count": state.shape_count.tolist(),
    }


def two_node_state() -> ClusterState:
    return make_state(
        make_node("a").gpus(4, model="G2").cpu(32).mem_gib(256),
        make_node("b").gpus(2, model="T4").cpu(16).mem_gib(64),
    )


# -- layout ----------------------------------------------------------------------------------


def test_layout_pads_gpu_slots_and_numbers_models_by_first_appearance() -> None:
    state = make_state(
        make_node("big").gpus(4, model="V100"),
        make_node("cpu").cpu(8),
        make_node("small").gpus(2, model="T4"),
    )
    # Width is the largest GPU count (4); slots past a node's GPUs have capacity 0.
    assert state.gpu_cap.tolist() == [
        [1000, 1000, 1000, 1000],
        [0, 0, 0, 0],
        [1000, 1000, 0, 0],
    ]
    assert state.gpu_free.tolist() == state.gpu_cap.tolist()
    assert state.models == ("V100", "T4")
    assert state.model_id.tolist() == [0, -1, 1]
    assert state.gpu_idle.tolist() == [4000, 0, 2000]
    assert state.total_gpu_milli == 6000
    assert state.used_gpu_milli == 0
    assert state.index == {"big": 0, "cpu": 1, "small": 2}


def test_predeclared_models_come_first() -> None:
    state = make_state(make_node("n").gpus(1, model="T4"), models=["A100"])
    assert state.models == ("A100", "T4")
    assert state.model_id.tolist() == [1]


def test_duplicate_node_name_is_an_invariant_error() -> None:
    with pytest.raises(InvariantError, match="duplicate node name 'n1'"):
        make_state(make_node("n1"), make_node("n2"), make_node("n1"))


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        pytest.param(set(), [True, True, False], id="no-restriction-means-every-gpu-node"),
        pytest.param({"T4"}, [False, True, False], id="one-model"),
        pytest.param({"T4", "V100"}, [True, True, False], id="either-model"),
        pytest.param({"H100"}, [False, False, False], id="model-no-node-has"),
    ],
)
def test_model_mask(models: set[str], expected: list[bool]) -> None:
    state = make_state(
        make_node("v").gpus(2, model="V100"), make_node("t").gpus(1, model="T4"), make_node("c")
    )
    mask = state.model_mask(frozenset(GpuModel(m) for m in models))
    assert mask.tolist() == expected


@pytest.mark.parametrize(
    ("num_gpu", "gpu_milli", "expected"),
    [
        pytest.param(0, 0, "cpu-only", id="cpu-only"),
        pytest.param(1, 1, "sharing", id="one-milli-is-sharing"),
        pytest.param(1, 999, "sharing", id="999-is-sharing"),
        pytest.param(1, 1000, "1-gpu", id="whole-gpu"),
        pytest.param(2, 1000, "2-gpu", id="two-gpus"),
        pytest.param(4, 1000, "4-gpu", id="four-gpus"),
        pytest.param(8, 1000, "8-gpu", id="eight-gpus"),
        pytest.param(3, 1000, "other", id="three-gpus-is-other"),
        pytest.param(16, 1000, "other", id="sixteen-gpus-is-other"),
    ],
)
def test_shape_class(num_gpu: int, gpu_milli: int, expected: str) -> None:
    assert SHAPE_CLASSES[shape_class(num_gpu, gpu_milli)] == expected


# -- allocate / release ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "gpus", "override", "expected"),
    [
        pytest.param(
            make_task("t").cpu(4).mem_gib(8).share(500),
            (1,),
            None,
            {
                "cpu_free": 32_000 - 4_000,
                "mem_free": (256 - 8) * 1024,
                "gpu_row": [1000, 500, 1000, 1000],
                "gpu_idle": 3500,
                "class": "sharing",
                "held": 500,
            },
            id="half-of-gpu-1",
        ),
        pytest.param(
            make_task("t").cpu(8).mem_gib(64).gpus(2),
            (0, 2),
            None,
            {
                "cpu_free": 24_000,
                "mem_free": 192 * 1024,
                "gpu_row": [0, 1000, 0, 1000],
                "gpu_idle": 2000,
                "class": "2-gpu",
                "held": 1000,
            },
            id="two-whole-gpus",
        ),
        pytest.param(
            make_task("t").cpu(2).mem_gib(1),
            (),
            None,
            {
                "cpu_free": 30_000,
                "mem_free": 255 * 1024,
                "gpu_row": [1000, 1000, 1000, 1000],
                "gpu_idle": 4000,
                "class": "cpu-only",
                "held": 0,
            },
            id="cpu-only-task-leaves-gpus",
        ),
        pytest.param(
            make_task("t").cpu(1).mem_gib(1).share(300),
            (3,),
            1000,
            {
                "cpu_free": 31_000,
                "mem_free": 255 * 1024,
                "gpu_row": [1000, 1000, 1000, 0],
                "gpu_idle": 3000,
                "class": "1-gpu",
                "held": 1000,
            },
            id="gpu-as-integer-override-holds-the-whole-gpu",
        ),
    ],
)
def test_allocate_charges_the_node(
    task: TaskBuilder, gpus: tuple[int, ...], override: int | None, expected: dict[str, object]
) -> None:
    state = two_node_state()
    alloc = state.allocate(task.build(), 0, gpus, override)
    assert int(state.cpu_free[0]) == expected["cpu_free"]
    assert int(state.mem_free[0]) == expected["mem_free"]
    assert state.gpu_free[0].tolist() == expected["gpu_row"]
    assert int(state.gpu_idle[0]) == expected["gpu_idle"]
    counts = state.shape_count[0].tolist()
    assert counts[SHAPE_CLASSES.index(str(expected["class"]))] == 1
    assert sum(counts) == 1
    assert alloc.gpus == gpus
    assert alloc.gpu_milli == expected["held"]
    # The other node is untouched.
    assert int(state.cpu_free[1]) == 16_000
    assert state.gpu_free[1].tolist() == [1000, 1000, 0, 0]
    assert state.allocations[TaskId("t")] == alloc


@pytest.mark.parametrize(
    ("task", "gpus", "message"),
    [
        pytest.param(
            make_task("t").gpus(2), (0,), r"needs 2 GPUs, got \(0,\)", id="wrong-number-of-gpus"
        ),
        pytest.param(
            make_task("t").cpu(17), (), "does not fit CPU/memory of b", id="more-cpu-than-free"
        ),
        pytest.param(
            make_task("t").mem_gib(65), (), "does not fit CPU/memory of b", id="more-mem-than-free"
        ),
        pytest.param(
            make_task("t").share(600),
            (0,),
            "needs 600 milli on GPU 0 of b, which has 500",
            id="gpu-share-taken",
        ),
        pytest.param(
            make_task("t").share(100),
            (2,),
            "needs 100 milli on GPU 2 of b, which has 0",
            id="padding-slot-is-never-free",
        ),
    ],
)
def test_allocate_that_does_not_fit_raises_and_changes_nothing(
    task: TaskBuilder, gpus: tuple[int, ...], message: str
) -> None:
    state = two_node_state()
    occupy(state, "b", gpus=(0,), gpu_milli=500)
    before = free_arrays(state)
    stamps = state.version.tolist()
    with pytest.raises(InvariantError, match=message):
        state.allocate(task.build(), 1, gpus)
    assert free_arrays(state) == before
    assert state.version.tolist() == stamps
    assert TaskId("t") not in state.allocations


def test_allocating_a_task_twice_is_an_invariant_error() -> None:
    state = two_node_state()
    task = make_task("t").cpu(1).build()
    state.allocate(task, 0, ())
    with pytest.raises(InvariantError, match="task t is already allocated"):
        state.allocate(task, 1, ())


def test_release_returns_exactly_what_was_charged() -> None:
    state = two_node_state()
    empty = free_arrays(state)
    task = make_task("t").cpu(4).mem_gib(8).share(250).build()
    alloc = state.allocate(task, 1, (1,))
    assert state.used_gpu_milli == 250
    released = state.release(TaskId("t"))
    assert released == alloc
    assert free_arrays(state) == empty
    assert state.used_gpu_milli == 0
    assert len(state.allocations) == 0


def test_release_of_unknown_or_released_task_is_an_invariant_error() -> None:
    state = two_node_state()
    with pytest.raises(InvariantError, match="task ghost holds no allocation"):
        state.release(TaskId("ghost"))
    state.allocate(make_task("t").build(), 0, ())
    state.release(TaskId("t"))
    with pytest.raises(InvariantError, match="task t holds no allocation"):
        state.release(TaskId("t"))


def test_fractions_of_one_gpu_add_up() -> None:
    state = two_node_state()
    for i, milli in enumerate((300, 300, 400)):
        state.allocate(make_task(f"t{i}").share(milli).build(), 1, (0,))
    # 300 + 300 + 400 = 1000: GPU 0 of b is now full, GPU 1 untouched.
    assert state.gpu_free[1].tolist() == [0, 1000, 0, 0]
    assert int(state.shape_count[1, SHAPE_CLASSES.index("sharing")]) == 3
    with pytest.raises(InvariantError, match="which has 0"):
        state.allocate(make_task("t3").share(1).build(), 1, (0,))


def test_version_stamps_change_only_on_the_touched_node_and_increase() -> None:
    state = two_node_state()
    assert state.version.tolist() == [0, 0]
    state.allocate(make_task("t1").build(), 1, ())
    first = int(state.version[1])
    assert int(state.version[0]) == 0
    assert first > 0
    state.release(TaskId("t1"))
    assert int(state.version[1]) > first
    assert int(state.version[0]) == 0


# -- working copies --------------------------------------------------------------------------


def test_changes_in_a_copy_never_reach_the_original() -> None:
    state = two_node_state()
    running = occupy(state, "a", gpus=(0,), gpu_milli=1000, cpu_milli=4000)
    before = free_arrays(state)
    stamps = state.version.tolist()

    work = state.copy()
    work.allocate(make_task("new").cpu(2).share(500).build(), 1, (1,))
    work.release(running.task)

    assert free_arrays(state) == before
    assert state.version.tolist() == stamps
    assert set(state.allocations) == {running.task}
    assert set(work.allocations) == {TaskId("new")}
    # The copy's own arrays moved: the release gave back GPU 0 of a, the bind took half of b/1.
    assert work.gpu_free[0].tolist() == [1000, 1000, 1000, 1000]
    assert work.gpu_free[1].tolist() == [1000, 500, 0, 0]


def test_a_copy_of_a_copy_is_isolated_from_both_ancestors() -> None:
    root = two_node_state()
    running = occupy(root, "a", gpus=(0,))
    child = root.copy()
    child.allocate(make_task("c").gpus(1).build(), 0, (1,))
    grandchild = child.copy()
    grandchild.release(TaskId("c"))
    grandchild.allocate(make_task("g").gpus(2).build(), 1, (0, 1))

    assert root.gpu_free[0].tolist() == [0, 1000, 1000, 1000]
    assert child.gpu_free[0].tolist() == [0, 0, 1000, 1000]
    assert grandchild.gpu_free[0].tolist() == [0, 1000, 1000, 1000]
    assert grandchild.gpu_free[1].tolist() == [0, 0, 0, 0]
    assert len(root.allocations) == 1
    assert set(child.allocations) == {running.task, TaskId("c")}
    assert TaskId("c") not in grandchild.allocations
    assert TaskId("g") in grandchild.allocations
    assert TaskId("g") not in child.allocations


def test_copies_share_one_version_clock_so_stamps_never_repeat() -> None:
    state = two_node_state()
    left, right = state.copy(), state.copy()
    left.allocate(make_task("l").build(), 0, ())
    right.allocate(make_task("r").build(), 0, ())
    state.allocate(make_task("o").build(), 0, ())
    # Same node, three different contents: three different stamps.
    stamps = {int(left.version[0]), int(right.version[0]), int(state.version[0])}
    assert len(stamps) == 3


def test_empty_state_has_the_same_nodes_and_nothing_allocated() -> None:
    state = two_node_state()
    occupy(state, "a", gpus=(0, 1), cpu_milli=8000)
    empty = state.empty()
    assert empty.names == state.names
    assert empty.gpu_free.tolist() == state.gpu_cap.tolist()
    assert empty.cpu_free.tolist() == [32_000, 16_000]
    assert len(empty.allocations) == 0
    assert state.copy().empty() is empty  # built once per layout


# -- AllocationMap overlay -------------------------------------------------------------------


def _alloc(task: str, node: int = 0) -> Allocation:
    return Allocation(TaskId(task), JobId(task), node, (), 0, 1000, 1024)


def test_overlay_reads_fall_through_to_the_base() -> None:
    base = {TaskId("a"): _alloc("a"), TaskId("b"): _alloc("b")}
    overlay = AllocationMap(base)
    assert TaskId("a") in overlay
    assert overlay.get(TaskId("b")) == base[TaskId("b")]
    assert overlay[TaskId("a")] == base[TaskId("a")]
    assert len(overlay) == 2
    with pytest.raises(KeyError):
        overlay[TaskId("zzz")]


def test_overlay_pop_hides_a_base_entry_without_touching_the_base() -> None:
    base = {TaskId("a"): _alloc("a"), TaskId("b"): _alloc("b")}
    overlay = AllocationMap(base)
    assert overlay.pop(TaskId("a")) == base[TaskId("a")]
    assert TaskId("a") not in overlay
    assert overlay.get(TaskId("a")) is None
    assert overlay.pop(TaskId("a")) is None  # already gone
    assert list(overlay) == [TaskId("b")]
    assert set(base) == {TaskId("a"), TaskId("b")}


def test_overlay_additions_follow_base_entries_and_stay_out_of_the_base() -> None:
    base = {TaskId("a"): _alloc("a")}
    overlay = AllocationMap(base)
    overlay[TaskId("c")] = _alloc("c", node=1)
    assert list(overlay) == [TaskId("a"), TaskId("c")]
    assert [t for t, _ in overlay.items()] == [TaskId("a"), TaskId("c")]
    assert len(overlay) == 2
    assert TaskId("c") not in base
    assert overlay.pop(TaskId("c")) == _alloc("c", node=1)
    assert list(overlay) == [TaskId("a")]


def test_overlay_re_adding_a_popped_base_entry_shows_the_new_value_once() -> None:
    base = {TaskId("a"): _alloc("a", node=0)}
    overlay = AllocationMap(base)
    overlay.pop(TaskId("a"))
    overlay[TaskId("a")] = _alloc("a", node=1)
    assert overlay[TaskId("a")].node == 1
    assert list(overlay.values()) == [_alloc("a", node=1)]
    assert len(overlay) == 1


def test_overlay_release_reallocate_release_leaves_the_task_gone() -> None:
    state = two_node_state()
    task = make_task("t").cpu(1).share(500).build()
    state.allocate(task, 0, (0,))
    work = state.copy()
    work.release(TaskId("t"))
    work.allocate(task, 0, (1,))
    work.release(TaskId("t"))
    assert int(work.cpu_free[0]) == 32_000  # the arrays say: nothing allocated
    assert TaskId("t") not in work.allocations  # fails: the base allocation shows through


def test_allocations_made_on_the_original_after_copy_stay_out_of_the_copy() -> None:
    state = two_node_state()
    work = state.copy()
    state.allocate(make_task("later").cpu(1).build(), 0, ())
    assert TaskId("later") not in work.allocations


def test_node_names_index_the_arrays() -> None:
    state = two_node_state()
    assert state.names == (NodeName("a"), NodeName("b"))
    assert state.size == 2
    assert state.gpu_slots == 4
    assert np.array_equal(state.gpu_count, [4, 2])
