"""FGD-SS: with ``alpha = 0`` and ``closed_below = 1000`` it chooses exactly as FGD; the
sum-of-squares term pairs gaps; bad arguments are refused with the fix."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numpy.typing import NDArray

from builders import cycle_context, make_node, make_state, make_task, occupy, shape
from gpusched.errors import ConfigError
from gpusched.framework import ClusterState, PluginContext
from gpusched.model import Task, TaskShape
from gpusched.plugins.fgd import Fgd
from gpusched.plugins.fgd_ss import FgdSs

HINT = [
    shape().cpu(2).share(250).shape(),
    shape().cpu(4).share(500).shape(),
    shape().cpu(8).gpus(1).shape(),
    shape().cpu(16).gpus(2).shape(),
    shape().cpu(4).shape(),
]


def random_cluster(seed: int) -> ClusterState:
    """Eight 4-GPU nodes with random shares and CPU taken."""
    rng = np.random.default_rng(seed)
    state = make_state(*[make_node(f"n{i}").cpu(32).gpus(4) for i in range(8)])
    for i in range(8):
        for g in range(4):
            used = int(rng.choice([0, 0, 250, 500, 750, 1000]))
            if used:
                occupy(state, f"n{i}", gpus=(g,), gpu_milli=used)
        occupy(state, f"n{i}", cpu_milli=int(rng.integers(0, 24)) * 1000)
    return state


def feasible(state: ClusterState, s: TaskShape) -> NDArray[np.bool_]:
    gpu_ok = (state.gpu_free >= max(s.gpu_milli, 1)).sum(axis=1) >= s.num_gpu
    return np.asarray((state.cpu_free >= s.cpu_milli) & gpu_ok)


def choice(scores: NDArray[np.float64], mask: NDArray[np.bool_]) -> tuple[int, ...]:
    """The best feasible nodes (all ties), as the scheduler would see them."""
    masked = np.where(mask, scores, -np.inf)
    return tuple(int(i) for i in np.flatnonzero(masked == masked.max()))


TASKS = [
    make_task("share-250").cpu(2).share(250),
    make_task("share-500").cpu(4).share(500),
    make_task("one").cpu(8).gpus(1),
    make_task("two").cpu(16).gpus(2),
    make_task("cpu").cpu(4),
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("builder", TASKS, ids=lambda b: b.build().id)
def test_alpha_zero_and_no_gap_classes_choose_as_fgd(seed: int, builder: object) -> None:
    task: Task = builder.build()  # type: ignore[attr-defined]
    state = random_cluster(seed)
    mask = feasible(state, task.shape)
    assert mask.any(), "the fixed draws leave every task somewhere to go"
    ctx = PluginContext(workload_hint=HINT)
    fgd = Fgd.from_args({}, ctx)
    ss = FgdSs.from_args({"alpha": 0.0, "closed_below": 1000, "cpu_share_cap": False}, ctx)
    best = choice(fgd.score(cycle_context(), task, state, mask), mask)
    assert choice(ss.score(cycle_context(), task, state, mask), mask) == best
    node = best[0]
    assert ss.pick(cycle_context(), task, state, node) == fgd.pick(
        cycle_context(), task, state, node
    )


def test_sum_of_squares_fills_the_gap_that_closes() -> None:
    # Two sharing GPUs with gaps 500 (node a) and 700 (node b); a 500-milli task. Closing the
    # 500 gap changes SUM N(h)^2 by 1 - 2 N(500) = -1; using the 700 gap leaves a new 200
    # gap: (2 N(200) + 1) + (1 - 2 N(700)) = 0. FGD-SS takes the gap that closes.
    state = make_state(make_node("a").cpu(32).gpus(1), make_node("b").cpu(32).gpus(1))
    occupy(state, "a", gpus=(0,), gpu_milli=500)
    occupy(state, "b", gpus=(0,), gpu_milli=300)
    task = make_task().cpu(1).share(500).build()
    mask = np.ones(state.size, dtype=bool)
    plugin = FgdSs.from_args({}, PluginContext(workload_hint=HINT))
    assert choice(plugin.score(cycle_context(), task, state, mask), mask) == (0,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"beta": 1}, "unknown argument(s) ['beta']"),
        ({"coverage": 0}, "args.coverage must be in (0, 1]"),
    ],
)
def test_bad_arguments_are_refused(args: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        FgdSs.from_args(args, PluginContext(workload_hint=HINT))
