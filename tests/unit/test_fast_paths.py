"""Faster paths give exactly what the plain formulas give.

* FGD's fragmentation ``F(n)``: the per-share table (and per-share tests) mapped to types,
  and hashed deduplication of large batches, against the per-type formula and ``np.unique``
  over row bytes (bit for bit: the batch fixes the last bits of ``F``, and FGD's GPU choice
  depends on them);
* kept fit counts and fit masks, as a state, its copies and its empty state take turns;
* quota answers worked from the tree's kept facts, against the plain loops;
* ``Resources`` views and arithmetic.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import cast

import numpy as np
import pytest

from builders import cycle_context, make_node, make_state, make_task, occupy
from gpusched.framework import ClusterState
from gpusched.framework.quota import QuotaBook
from gpusched.model import GpuModel, QueueName, QueueSpec, QueueTree, Resources
from gpusched.plugins import fragmentation
from gpusched.plugins.filters import NodeResourcesFit, gpu_fit_count, resources_fit_mask
from gpusched.plugins.fragmentation import Fragmentation, TargetWorkload

# -- fragmentation ---------------------------------------------------------------------------

#: Types with repeated shares, a CPU-only type and one restricted to model G2.
TARGET = TargetWorkload(
    cpu=np.array([4000, 8000, 2000, 16000, 1000, 4000], dtype=np.int64),
    milli=np.array([500, 1000, 500, 1000, 0, 250], dtype=np.int64),
    num=np.array([1, 2, 1, 4, 0, 1], dtype=np.int64),
    models=(
        frozenset(),
        frozenset(),
        frozenset({GpuModel("G2")}),
        frozenset(),
        frozenset(),
        frozenset(),
    ),
    prob=np.array([0.3, 0.2, 0.15, 0.1, 0.15, 0.1], dtype=np.float64),
)
MODELS = (GpuModel("G2"), GpuModel("T4"))


def _per_type_matrix(
    cpu_free: np.ndarray, gpu_free: np.ndarray, model_id: np.ndarray
) -> np.ndarray:
    """``frag[n, m]`` by the module formula, one ``(k, M, G)`` test per type."""
    free = gpu_free[:, None, :]
    ok = free >= TARGET.milli[None, :, None]
    idle = gpu_free.sum(axis=1)[:, None]
    usable = (ok * free).sum(axis=2)
    static = (TARGET.model_table(MODELS) & (TARGET.num > 0)[:, None]).T
    host = (
        (ok.sum(axis=2) >= TARGET.num[None, :])
        & (cpu_free[:, None] >= TARGET.cpu[None, :])
        & static[model_id]
    )
    out: np.ndarray = np.where(host, idle - usable, idle)
    return out


def _random_states(rng: np.random.Generator, k: int) -> tuple[np.ndarray, ...]:
    cpu = rng.choice([0, 1000, 2000, 4000, 8000, 16000], size=k).astype(np.int64)
    gpu = rng.choice([0, 250, 300, 500, 750, 1000], size=(k, 4)).astype(np.int32)
    model = rng.choice([-1, 0, 1], size=k).astype(np.int64)
    gpu[model == -1] = 0
    return cpu, gpu, model


@pytest.mark.parametrize("k", [1, 3, 8, 127, 300, fragmentation._TABLE_ROWS + 1])
def test_evaluate_gives_the_per_type_formula_bit_for_bit(k: int) -> None:
    cpu, gpu, model = _random_states(np.random.default_rng(k), k)
    frag = Fragmentation(TARGET, MODELS)
    expected = _per_type_matrix(cpu, gpu, model) @ TARGET.prob
    assert np.array_equal(frag._evaluate(cpu, gpu, model), expected)
    assert np.array_equal(frag._by_share(cpu, gpu, model), expected)


@pytest.mark.parametrize("k", [1, 2, 9, 40])
def test_from_states_gives_the_batch_of_arrays_bit_for_bit(k: int) -> None:
    cpu, gpu, model = _random_states(np.random.default_rng(10 + k), k)
    gpu[model >= 0, -1] = 1500 if k == 9 else 1000  # k == 9: a share beyond the table
    frag = Fragmentation(TARGET, MODELS)
    keys = [
        (m, c, tuple(sorted(g)))
        for m, c, g in zip(model.tolist(), cpu.tolist(), gpu.tolist(), strict=True)
    ]
    expected = _per_type_matrix(cpu, gpu, model) @ TARGET.prob
    for _ in range(2):  # the second batch is read from the memo
        assert np.array_equal(frag.from_states(keys), expected)
        assert np.array_equal(frag.from_states(keys), frag(cpu, gpu, model))


def test_shares_beyond_the_table_give_the_per_type_formula() -> None:
    cpu, gpu, model = _random_states(np.random.default_rng(5), 40)
    gpu[model >= 0, 0] = 1500  # more than a GPU holds: not in the per-share table
    frag = Fragmentation(TARGET, MODELS)
    expected = _per_type_matrix(cpu, gpu, model) @ TARGET.prob
    assert np.array_equal(frag._evaluate(cpu, gpu, model), expected)


def test_a_workload_of_cpu_only_types_counts_all_idle_gpu() -> None:
    cpu_only = TargetWorkload(
        cpu=np.array([1000], dtype=np.int64),
        milli=np.array([0], dtype=np.int64),
        num=np.array([0], dtype=np.int64),
        models=(frozenset(),),
        prob=np.array([1.0]),
    )
    gpu = np.array([[1000, 300, 0, 0]], dtype=np.int32)
    values = Fragmentation(cpu_only, MODELS)(np.array([4000]), gpu, np.array([0]))
    assert values.tolist() == [1300.0]


def _unique_by_bytes(
    model: np.ndarray, cpu: np.ndarray, ordered: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    rows = np.ascontiguousarray(
        np.concatenate([model[:, None], cpu[:, None], ordered], axis=1).astype(np.int64)
    )
    keys = rows.view(np.dtype((np.void, 8 * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


@pytest.mark.parametrize("seed", range(6))
def test_hashed_dedup_numbers_states_as_unique_over_row_bytes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = fragmentation._HASH_AT + int(rng.integers(0, 3000))
    width = int(rng.integers(1, 9))
    # Values whose bytes order differently from their numbers (256 > 255 > 1), negatives too.
    values = np.array([-1, 0, 1, 255, 256, 257, 500, 1000, 65536], dtype=np.int64)
    ordered = np.sort(rng.choice(values, size=(n, width)).astype(np.int32), axis=1)
    model = rng.choice(values[:3], size=n)
    cpu = rng.choice(values, size=n)
    first, inverse = fragmentation._distinct(model, cpu, ordered)
    want_first, want_inverse = _unique_by_bytes(model, cpu, ordered)
    assert np.array_equal(first, want_first)
    assert np.array_equal(inverse, want_inverse)


def test_a_hash_collision_falls_back_to_comparing_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fragmentation, "_MIX", np.zeros(8, dtype=np.uint64))  # all collide
    rng = np.random.default_rng(9)
    n = fragmentation._HASH_AT
    ordered = np.sort(rng.choice([0, 500, 1000], size=(n, 4)).astype(np.int32), axis=1)
    model = rng.choice([-1, 0], size=n).astype(np.int64)
    cpu = rng.choice([0, 8000], size=n).astype(np.int64)
    assert fragmentation._distinct_by_hash(model, cpu, ordered) is None
    first, inverse = fragmentation._distinct(model, cpu, ordered)
    want_first, want_inverse = _unique_by_bytes(model, cpu, ordered)
    assert np.array_equal(first, want_first)
    assert np.array_equal(inverse, want_inverse)


def test_large_batches_give_the_values_of_the_distinct_states_batch() -> None:
    cpu, gpu, model = _random_states(np.random.default_rng(4), 3 * fragmentation._HASH_AT)
    frag = Fragmentation(TARGET, MODELS)
    first, inverse = _unique_by_bytes(model, cpu, np.sort(gpu, axis=1))
    expected = (_per_type_matrix(cpu[first], gpu[first], model[first]) @ TARGET.prob)[inverse]
    assert np.array_equal(frag(cpu, gpu, model), expected)


# -- kept fit counts and masks ---------------------------------------------------------------


def _cluster() -> ClusterState:
    nodes = [make_node(f"n{i}").gpus(4, model="G2").cpu(32).mem_gib(128) for i in range(8)]
    return make_state(*nodes, make_node("cpu").cpu(16).mem_gib(64))


def _direct_fit(state: ClusterState, cpu: int, mem: int, num: int, milli: int) -> list[bool]:
    ok = (state.cpu_free >= cpu) & (state.mem_free >= mem)
    if num:
        ok &= (state.gpu_free >= milli).sum(axis=1) >= num
    return [bool(x) for x in ok]


REQUESTS = [(4000, 1024, 1, 500), (8000, 0, 2, 1000), (1000, 0, 0, 0), (20000, 65536, 1, 250)]


def test_kept_vectors_follow_a_state_its_copies_and_its_empty_state() -> None:
    state = _cluster()
    empty = state.empty()
    steps: list[Callable[[ClusterState], object]] = [
        lambda s: occupy(s, "n0", gpus=(0,), gpu_milli=700, cpu_milli=8000),
        lambda s: occupy(s, "n1", gpus=(0, 1), cpu_milli=20000, memory_mib=65536),
        lambda s: occupy(s, "n2", gpus=(3,), gpu_milli=300),
        lambda s: occupy(s, "n0", gpus=(2,), gpu_milli=1000, cpu_milli=4000),
    ]
    states = [state]
    for step in steps:
        work = states[-1].copy()
        step(work)
        states.append(work)
    # Take turns between states (the empty one among them), several times over.
    for s in itertools.chain.from_iterable(itertools.repeat([*states, empty, states[2]], 3)):
        for cpu, mem, num, milli in REQUESTS:
            got = resources_fit_mask(s, cpu, mem, num, milli)
            assert got.tolist() == _direct_fit(s, cpu, mem, num, milli)
            got[:] = False  # a fresh array: changing it changes nothing kept
            counts = gpu_fit_count(s, milli)
            assert counts.tolist() == (s.gpu_free >= milli).sum(axis=1).tolist()
            assert not counts.flags.writeable


def test_node_resources_fit_uses_the_kept_mask() -> None:
    state = _cluster()
    occupy(state, "n3", gpus=(0, 1, 2), cpu_milli=30000)
    task = make_task().gpus(2).cpu(4).build()
    fit = NodeResourcesFit()
    first = fit.filter(cycle_context(), task, state)
    first[0] = False
    again = fit.filter(cycle_context(), task, state)
    assert again.tolist() == [True] * 3 + [False] + [True] * 4 + [False]


# -- quota -----------------------------------------------------------------------------------


def _tree() -> QueueTree:
    return QueueTree.build(
        [
            QueueSpec(
                QueueName("org"),
                guaranteed=Resources({"gpu": 6000, "gpu/G2": 3000}),
                limit=Resources({"gpu": 9000}),
            ),
            QueueSpec(
                QueueName("a"),
                parent=QueueName("org"),
                guaranteed=Resources({"gpu": 4000, "gpu/G2": 2000}),
                lending_limit=Resources({"gpu": 1000}),
            ),
            QueueSpec(
                QueueName("b"),
                parent=QueueName("org"),
                guaranteed=Resources({"gpu": 2000}),
                limit=Resources({"gpu": 3000, "cpu": 64000}),
            ),
            QueueSpec(QueueName("c"), guaranteed=Resources({"gpu": 2000, "cpu": 16000})),
            QueueSpec(QueueName("d")),
        ]
    )


def _plain_within_guarantee(book: QuotaBook, queue: QueueName, req: Resources) -> bool:
    for q in book.tree.path(queue):
        g = book.tree[q].guaranteed
        keys = {"gpu", *g}
        if any(x.startswith("gpu/") for x in g):
            keys.update(x for x in req if x.startswith("gpu/"))
        if any(req[x] and book.usage[q][x] + req[x] > g[x] for x in keys):
            return False
    return True


def _plain_borrowable(book: QuotaBook, queue: QueueName | None, lent: bool) -> int:
    own = set(book.tree.path(queue)) if queue is not None else set()
    pool = book.capacity["gpu"]
    for q in book.tree.leaves():
        spec = book.tree[q]
        g, u = spec.guaranteed["gpu"], book.usage[q]["gpu"]
        pool -= max(g, u)
        if q in own or not lent:
            continue
        lending = spec.lending_limit
        lend = g if lending is None or "gpu" not in lending else lending["gpu"]
        pool += min(lend, max(0, g - u))
    return pool


def test_quota_answers_match_the_plain_loops_as_usage_changes() -> None:
    state = make_state(
        *(make_node(f"g{i}").gpus(8, model="G2").cpu(64).mem_gib(512) for i in range(2)),
        make_node("t").gpus(4, model="T4").cpu(32).mem_gib(128),
    )
    book = QuotaBook(_tree(), state, [])
    rng = np.random.default_rng(1)
    queues = [QueueName(q) for q in ("a", "b", "c", "d")]
    for _ in range(200):
        queue = queues[int(rng.integers(len(queues)))]
        gpu = int(rng.choice([0, 500, 1000, 2000, 4000]))
        model = str(rng.choice(["gpu/G2", "gpu/T4", ""]))
        req = Resources(
            {
                "gpu": gpu,
                "cpu": int(rng.choice([0, 8000, 32000])),
                **({model: gpu} if model else {}),
            }
        )
        assert book.within_guarantee(queue, req) == _plain_within_guarantee(book, queue, req)
        for lent in (True, False):
            assert book.borrowable(queue, lent=lent) == _plain_borrowable(book, queue, lent)
            assert book.borrowable(None, lent=lent) == _plain_borrowable(book, None, lent)
        if rng.random() < 0.6:
            book.charge(queue, req)
        elif book.usage[queue]["gpu"] >= gpu:
            book.refund(queue, req)


def test_never_fits_counts_only_what_others_lend() -> None:
    state = make_state(make_node("g").gpus(8, model="G2").cpu(64).mem_gib(512))
    book = QuotaBook(_tree(), state, [])
    # Pool for d: 8000 - (4000 + 2000 + 2000) + min(1000, 4000) + 2000 + 2000 = 5000.
    assert book.never_fits(QueueName("d"), Resources({"gpu": 5000})) is None
    assert "can ever be borrowed" in (
        book.never_fits(QueueName("d"), Resources({"gpu": 5001})) or ""
    )
    assert "limited to" in (book.never_fits(QueueName("b"), Resources({"cpu": 64001})) or "")


# -- resources -------------------------------------------------------------------------------


def test_resources_views_and_arithmetic() -> None:
    a = Resources({"gpu": 1000, "cpu": 0})
    assert list(a.items()) == [("gpu", 1000), ("cpu", 0)]
    assert list(a.keys()) == ["gpu", "cpu"]
    assert list(a.values()) == [1000, 0]
    total = a + Resources({"gpu": 500, "memory": 3})
    assert total == Resources({"gpu": 1500, "memory": 3})
    assert "cpu" in total
    # NumPy integers (as array sums give) come back as Python ints.
    left = a - cast("Mapping[str, int]", {"gpu": np.int64(250)})
    assert left["gpu"] == 750
    assert type(left["gpu"]) is int
    assert type((a + cast("Mapping[str, int]", {"cpu": np.int32(2)}))["cpu"]) is int
    assert hash(a - a) == hash(Resources())
