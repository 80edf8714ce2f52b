"""TargetWorkload.from_shapes and the fragmentation measure F(n), on hand-computed node states."""

from __future__ import annotations

import numpy as np
import pytest

from builders import make_node, make_state, occupy, shape
from gpusched.model import GpuModel, TaskShape
from gpusched.plugins.fragmentation import Fragmentation, TargetWorkload, cluster_fragmentation

SHARE_500 = shape().cpu(2).share(500).shape()
ONE_GPU = shape().cpu(1).gpus(1).shape()
TWO_GPU = shape().cpu(1).gpus(2).shape()
CPU_ONLY = shape().cpu(4).shape()


def types(target: TargetWorkload) -> list[tuple[int, int, int, float]]:
    """(cpu, milli, num, probability) per kept type, in the target's order."""
    return [
        (int(c), int(m), int(n), round(float(p), 6))
        for c, m, n, p in zip(target.cpu, target.milli, target.num, target.prob, strict=True)
    ]


# -- TargetWorkload.from_shapes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("coverage", "expected"),
    [
        pytest.param(
            0.95,
            # 6 + 3 = 9 < 9.5 of 10, so the CPU-only type is needed too: 6/10, 3/10, 1/10.
            [(2000, 500, 1, 0.6), (1000, 1000, 1, 0.3), (4000, 0, 0, 0.1)],
            id="default-coverage-keeps-all-three",
        ),
        pytest.param(
            0.9,
            # 6 + 3 = 9 >= 9.0: cut after two types, renormalised to 6/9 and 3/9.
            [(2000, 500, 1, round(6 / 9, 6)), (1000, 1000, 1, round(3 / 9, 6))],
            id="cut-exactly-at-coverage",
        ),
        pytest.param(0.6, [(2000, 500, 1, 1.0)], id="most-common-type-alone-covers-60pct"),
        pytest.param(0.61, [(2000, 500, 1, 0.666667), (1000, 1000, 1, 0.333333)], id="just-over"),
        pytest.param(
            1.0,
            [(2000, 500, 1, 0.6), (1000, 1000, 1, 0.3), (4000, 0, 0, 0.1)],
            id="full-coverage",
        ),
    ],
)
def test_from_shapes_keeps_the_most_common_types_up_to_coverage(
    coverage: float, expected: list[tuple[int, int, int, float]]
) -> None:
    shapes = [SHARE_500] * 6 + [ONE_GPU] * 3 + [CPU_ONLY]
    target = TargetWorkload.from_shapes(shapes, coverage)
    assert types(target) == expected
    assert float(target.prob.sum()) == pytest.approx(1.0)


def test_from_shapes_ignores_memory_and_the_gpu_share_of_cpu_only_tasks() -> None:
    shapes = [
        TaskShape(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=1000),
        TaskShape(cpu_milli=1000, memory_mib=99_999, num_gpu=1, gpu_milli=1000),
        TaskShape(cpu_milli=500, memory_mib=1, num_gpu=0, gpu_milli=0),
        TaskShape(cpu_milli=500, memory_mib=1, num_gpu=0, gpu_milli=700),
    ]
    target = TargetWorkload.from_shapes(shapes, 1.0)
    # Two types of two tasks each; equal counts are ordered by key (cpu 500 before 1000).
    assert types(target) == [(500, 0, 0, 0.5), (1000, 1000, 1, 0.5)]


def test_from_shapes_keeps_gpu_models_apart() -> None:
    t4 = shape().gpus(1).models("T4").shape()
    target = TargetWorkload.from_shapes([t4, t4, ONE_GPU], 1.0)
    assert target.models == (frozenset({GpuModel("T4")}), frozenset())
    assert target.prob.tolist() == pytest.approx([2 / 3, 1 / 3])


def test_from_shapes_of_nothing_is_one_whole_gpu_type() -> None:
    target = TargetWorkload.from_shapes([])
    assert types(target) == [(0, 1000, 1, 1.0)]


def test_model_table_marks_what_each_type_may_use() -> None:
    t4 = shape().gpus(1).models("T4").shape()
    target = TargetWorkload.from_shapes([t4, t4, ONE_GPU], 1.0)
    table = target.model_table([GpuModel("G2"), GpuModel("T4")])
    # Columns: G2, T4, "no GPU" (always false).
    assert table.tolist() == [[False, True, False], [True, True, False]]


# -- F(n) ------------------------------------------------------------------------------------

# Target: half "500 milli, 2 CPU" and half "2 whole GPUs, 1 CPU".
MIXED = TargetWorkload.from_shapes([SHARE_500, TWO_GPU], 1.0)


@pytest.mark.parametrize(
    ("cpu_free", "gpu_free", "expected"),
    [
        pytest.param(
            8000,
            [1000, 1000, 300, 0],
            # share-500: hosts (2 GPUs >= 500, cpu ok): frag = 300 + 0 = 300
            # two-gpu:   hosts (2 GPUs >= 1000):        frag = 300 + 0 = 300
            # F = .5*300 + .5*300 = 300
            300.0,
            id="both-types-fit-only-the-300-is-fragment",
        ),
        pytest.param(
            8000,
            [1000, 600, 300, 0],
            # share-500: frag = GPUs below 500 = 300 + 0 = 300
            # two-gpu:   one GPU >= 1000 < 2 needed -> all idle is fragment = 1900
            # F = .5*300 + .5*1900 = 1100
            1100.0,
            id="two-gpu-type-cannot-use-the-node",
        ),
        pytest.param(
            1500,
            [1000, 1000, 300, 0],
            # share-500 needs 2000 CPU > 1500 -> frag = idle = 2300; two-gpu -> 300
            # F = .5*2300 + .5*300 = 1300
            1300.0,
            id="cpu-starved-for-one-type",
        ),
        pytest.param(500, [1000, 1000, 300, 0], 2300.0, id="cpu-starved-for-both-all-idle"),
        pytest.param(8000, [0, 0, 0, 0], 0.0, id="full-node-has-no-fragment"),
        pytest.param(8000, [1000, 1000, 1000, 1000], 0.0, id="idle-node-has-no-fragment"),
    ],
)
def test_node_fragmentation(cpu_free: int, gpu_free: list[int], expected: float) -> None:
    frag = Fragmentation(MIXED, (GpuModel("G2"),))
    out = frag(np.array([cpu_free]), np.array([gpu_free]), np.array([0]))
    assert out.tolist() == pytest.approx([expected])


def test_a_type_restricted_to_another_model_sees_all_idle_gpu_as_fragment() -> None:
    t4_only = TargetWorkload.from_shapes([shape().cpu(1).share(500).models("T4").shape()])
    frag = Fragmentation(t4_only, (GpuModel("G2"), GpuModel("T4")))
    out = frag(np.array([8000, 8000]), np.array([[1000, 300], [1000, 300]]), np.array([0, 1]))
    # G2 node: the type may not run there -> idle 1300; T4 node: only the 300 is fragment.
    assert out.tolist() == [1300.0, 300.0]


def test_cpu_only_types_count_all_idle_gpu_as_fragment() -> None:
    cpu_only = TargetWorkload.from_shapes([CPU_ONLY])
    frag = Fragmentation(cpu_only, (GpuModel("G2"),))
    out = frag(np.array([8000, 8000]), np.array([[1000, 300], [0, 0]]), np.array([0, 0]))
    assert out.tolist() == [1300.0, 0.0]


def test_cluster_fragmentation_sums_the_nodes() -> None:
    state = make_state(
        make_node("a").cpu(8).gpus(4),
        make_node("b").cpu(8).gpus(4),
        make_node("c").cpu(1.5).gpus(4),
        make_node("cpu").cpu(8),
    )
    occupy(state, "a", gpus=(2,), gpu_milli=700)
    occupy(state, "a", gpus=(3,), gpu_milli=1000)
    occupy(state, "b", gpus=(1,), gpu_milli=400)
    occupy(state, "b", gpus=(2,), gpu_milli=700)
    occupy(state, "b", gpus=(3,), gpu_milli=1000)
    occupy(state, "c", gpus=(2,), gpu_milli=700)
    occupy(state, "c", gpus=(3,), gpu_milli=1000)
    # a [1000,1000,300,0] -> 300;  b [1000,600,300,0] -> 1100;  c (1.5 CPU) -> 1300;  cpu -> 0
    assert cluster_fragmentation(state, MIXED) == pytest.approx(300 + 1100 + 1300)


def test_large_batches_give_the_same_values_as_single_states() -> None:
    # Batches of 128+ states are deduplicated first; the values must not change.
    rng = np.random.default_rng(3)
    k = 300
    cpu = rng.choice([500, 1500, 8000], size=k)
    gpu = rng.choice([0, 300, 600, 1000], size=(k, 4))
    model = rng.choice([-1, 0], size=k)
    gpu[model == -1] = 0
    frag = Fragmentation(MIXED, (GpuModel("G2"),))
    batch = frag(cpu, gpu, model)
    single = [float(frag(cpu[i : i + 1], gpu[i : i + 1], model[i : i + 1])[0]) for i in range(k)]
    assert batch.tolist() == pytest.approx(single)
