"""Properties of the topology-aware picker and of MIG layouts, on random topologies and requests.

* The picker's set is a best-connected set of the free GPUs (brute force agrees), and among
  those it leaves the best remainder (the damage rule, by brute force), lowest indices on ties.
* Every MIG layout built from :func:`feasible_starts` or :func:`choose_layout` is valid: allowed
  starts, no memory overlap, at most 7 compute slices; ``choose_layout`` returns None only
  when no assignment of starts works.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations, product

from hypothesis import assume, given
from hypothesis import strategies as st

from builders import cycle_context, make_state, make_task, occupy
from gpusched.model import GpuModel, Node
from gpusched.model.mig import GEOMETRIES, MigGeometry, MigPlacement
from gpusched.model.mig_layout import choose_layout, feasible_starts, layout_problem
from gpusched.model.topology import GpuDevice, NodeTopology, SetKey
from gpusched.plugins.topology_aware import (
    TopologyAwareGpu,
    connectivity_tables,
    is_best_connected_set,
)


@st.composite
def topologies(draw: st.DrawFn) -> NodeTopology:
    g = draw(st.integers(1, 8))
    numa_count = draw(st.integers(1, 3))
    numa = draw(st.lists(st.integers(0, numa_count - 1), min_size=g, max_size=g))
    roots = draw(st.lists(st.integers(0, 3), min_size=g, max_size=g))
    # a PCIe root belongs to one NUMA node: name it by both
    devices = [
        GpuDevice(GpuModel("H100"), 81920, n, f"numa{n}-root{r}")
        for n, r in zip(numa, roots, strict=True)
    ]
    domains = draw(
        st.lists(st.sets(st.integers(0, g - 1), min_size=2, max_size=g), max_size=3)
        if g >= 2
        else st.just([])
    )
    return NodeTopology.build(devices, (16_000,) * numa_count, nvlink_domains=domains)


def _members(mask: int, g: int) -> tuple[int, ...]:
    return tuple(i for i in range(g) if mask >> i & 1)


def _best(topo: NodeTopology, gpus: tuple[int, ...], k: int) -> SetKey | None:
    return max((topo.set_key(c) for c in combinations(gpus, k)), default=None)


def _guard(topo: NodeTopology, rest: tuple[int, ...]) -> tuple[SetKey | None, ...]:
    return tuple(_best(topo, rest, j) for j in range(len(rest), 1, -1))


@given(topologies(), st.data())
def test_picker_takes_the_best_set_with_least_damage(
    topo: NodeTopology, data: st.DataObject
) -> None:
    g = topo.gpu_count
    free = data.draw(st.integers(1, (1 << g) - 1), label="free mask")
    gpus = _members(free, g)
    k = data.draw(st.integers(1, len(gpus)), label="k")
    chosen = connectivity_tables(topo).choice[free][k]
    assert chosen is not None
    assert len(chosen) == k
    assert set(chosen) <= set(gpus)
    best = _best(topo, gpus, k)
    assert topo.set_key(chosen) == best
    assert is_best_connected_set(topo, free, chosen)
    # the damage rule: no other best-keyed set leaves a better remainder, nor an equal one
    # with lower indices
    mine = _guard(topo, tuple(x for x in gpus if x not in chosen))
    for other in combinations(gpus, k):
        if topo.set_key(other) != best:
            continue
        theirs = _guard(topo, tuple(x for x in gpus if x not in other))
        assert (theirs, tuple(-x for x in other)) <= (mine, tuple(-x for x in chosen))


@given(topologies(), st.data())
def test_picker_on_a_state_gives_distinct_free_gpus(
    topo: NodeTopology, data: st.DataObject
) -> None:
    node = Node.from_topology("n", topo, memory_mib=1 << 20)
    state = make_state(node)
    g = topo.gpu_count
    used = data.draw(st.lists(st.integers(0, 1000), min_size=g, max_size=g), label="used milli")
    assume(min(used) < 1000)  # something must fit
    for i, amount in enumerate(used):
        if amount:
            occupy(state, "n", gpus=(i,), gpu_milli=amount)
    whole = sum(1 for amount in used if amount == 0)
    if whole:
        k = data.draw(st.integers(1, whole), label="k")
        task = make_task().gpus(k).build()
    else:
        share = data.draw(st.integers(1, 1000 - min(used)), label="share")
        task = make_task().share(share).build()
    picked = TopologyAwareGpu().pick(cycle_context(), task, state, 0)
    assert len(picked) == len(set(picked)) == task.shape.num_gpu
    assert all(state.gpu_free[0][i] >= task.shape.gpu_milli for i in picked)
    state.allocate(task, 0, picked)  # raises if the pick over-commits a GPU


# -- MIG --------------------------------------------------------------------------------------

GEOMETRY = st.sampled_from(sorted(GEOMETRIES)).map(GEOMETRIES.__getitem__)


@given(GEOMETRY, st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), max_size=10))
def test_layouts_grown_from_feasible_starts_stay_valid(
    geometry: MigGeometry, steps: list[tuple[int, int]]
) -> None:
    names = list(geometry.profiles)
    layout: list[MigPlacement] = []
    for which, pick in steps:
        name = names[which % len(names)]
        starts = feasible_starts(geometry, layout, name)
        if not starts:
            assert layout_problem(geometry, [*layout, MigPlacement(name, 0)]) is not None
            continue
        layout.append(MigPlacement(name, starts[pick % len(starts)]))
        assert layout_problem(geometry, layout) is None


@given(GEOMETRY, st.lists(st.integers(0, 5), max_size=7))
def test_chosen_layouts_are_valid_and_exist_whenever_one_does(
    geometry: MigGeometry, which: list[int]
) -> None:
    names = list(geometry.profiles)
    requested = [names[w % len(names)] for w in which]
    chosen = choose_layout(geometry, requested)
    if chosen is not None:
        assert layout_problem(geometry, chosen) is None
        assert Counter(p.profile for p in chosen) == Counter(requested)
    elif sum(geometry.profile(n).compute_slices for n in requested) > 7:
        pass  # more compute slices than a GPU has: impossible on its face
    else:
        options = [geometry.profile(n).starts for n in requested]
        for starts in product(*options):
            layout = [MigPlacement(n, s) for n, s in zip(requested, starts, strict=True)]
            assert layout_problem(geometry, layout) is not None
