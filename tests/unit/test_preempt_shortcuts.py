"""The victim search's shortcuts give the answers of the searches they replace.

* :class:`~gpusched.actions.victim_room.Room` (each node's room without a class's eligible
  victims, kept and updated where something changed) names exactly the nodes with a first-fit
  prefix, counts a gang's pods as a fresh release of the victims does, and ranks nodes
  (first-fit keys kept from query to query) exactly as a fresh
  :meth:`~gpusched.actions.victim_index.VictimIndex.first_fits`, through evictions of whole
  jobs and of elastic members and binds, for several classes, shapes and node masks asked in
  turn;
* the node-local search's floor (the cheapest one-victim set) is no dearer than any set of
  the victims, so a node whose floor is no cheaper than the best set may be skipped;
* the per-row GPU count equals ``count_nonzero`` for every width;
* whole cycles of the cycle benchmark (cold and steady, with and without topology) plan the
  same binds, evictions and nominations with the shortcuts as without them (no memo, the
  full placement check after every node-local search, and no room: every node a candidate,
  every gang searched for).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import numpy as np
import pytest

from builders import make_node, make_state
from gpusched.actions import victim_local
from gpusched.actions.victim_fit import FIT, set_cost
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_room import Room, Rooms
from gpusched.framework import ClusterState, Eviction, PluginContext, RunningJob, Snapshot
from gpusched.model import MILLI_PER_GPU, Job, JobId, NodeName, Task, TaskId, TaskShape
from gpusched.plugins.filters import row_counts
from gpusched.scheduler import build_profile, policy_spec, schedule
from gpusched.sim.cycle_bench import build_cycle_setup, steady_snapshot

GPUS = 4


def _place(state: ClusterState, task: Task, rng: random.Random) -> bool:
    s = task.shape
    for node in rng.sample(range(state.size), state.size):
        free = np.flatnonzero(state.gpu_free[node] >= s.gpu_milli)
        if state.cpu_free[node] >= s.cpu_milli and len(free) >= s.num_gpu:
            state.allocate(task, node, tuple(int(g) for g in free[: s.num_gpu]))
            return True
    return False


def _shape(rng: random.Random) -> TaskShape:
    gpus = rng.randint(0, 2)
    milli = rng.choice([MILLI_PER_GPU, 500, 250]) if gpus == 1 else MILLI_PER_GPU
    return TaskShape(
        cpu_milli=rng.randint(0, 4) * 1000, memory_mib=1024, num_gpu=gpus, gpu_milli=milli
    )


def _cluster(rng: random.Random) -> tuple[ClusterState, list[Victim]]:
    """Random running jobs; a job of several pods has its pods beyond the first as elastic
    members (victims of their own, before every whole job, as the actions order them)."""
    nodes = rng.randint(3, 8)
    state = make_state(*(make_node(f"n{i}").gpus(GPUS).cpu(16).mem_gib(64) for i in range(nodes)))
    members: list[Victim] = []
    wholes: list[Victim] = []
    for j in range(rng.randint(4, 20)):
        tasks = []
        for p in range(rng.randint(1, 3)):
            task = Task(TaskId(f"j{j}-{p}"), JobId(f"j{j}"), _shape(rng))
            if _place(state, task, rng):
                tasks.append(task)
        if not tasks:
            continue
        job = Job(JobId(f"j{j}"), tuple(tasks), priority=rng.randint(0, 3), min_available=1)
        run = RunningJob(job, 0.0)
        where = {t.id: state.allocations[t.id].node for t in tasks}
        for t in reversed(tasks[1:]):
            members.append(
                Victim(run, (t,), False, t.shape.total_gpu_milli, frozenset({where[t.id]}))
            )
        held = sum(t.shape.total_gpu_milli for t in tasks)
        wholes.append(Victim(run, tuple(tasks), True, held, frozenset(where.values())))
    return state, members + wholes


def _changes(
    rng: random.Random, state: ClusterState, index: VictimIndex
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Random changes between queries; yields the eligibility and node masks to ask with."""
    extra = 0
    for _ in range(25):
        alive = np.flatnonzero(index.alive).tolist()
        what = rng.random()
        if what < 0.35 and alive:  # evict a victim (whole job, or one member)
            v = index.victims[rng.choice(alive)]
            state.release_many(t.id for t in v.tasks if t.id in state.allocations)
            index.remove([v])
        elif what < 0.6:  # a bind elsewhere
            extra += 1
            _place(state, Task(TaskId(f"x{extra}"), JobId(f"x{extra}"), _shape(rng)), rng)
        eligible = np.array([rng.random() < 0.8 for _ in range(len(index))], dtype=np.bool_)
        nodes = np.array([rng.random() < 0.9 for _ in range(state.size)], dtype=np.bool_)
        yield eligible, nodes


def _same(a: list[tuple[int, list[Victim]]], b: list[tuple[int, list[Victim]]]) -> bool:
    return [(n, [id(v) for v in vs]) for n, vs in a] == [(n, [id(v) for v in vs]) for n, vs in b]


def _pods_after(
    state: ClusterState, index: VictimIndex, chosen: np.ndarray, shape: TaskShape, milli: int
) -> list[int]:
    """Per node: pods of ``shape`` that fit once every ``chosen`` victim is released."""
    after = state.copy()
    gone = {t.id for r in np.flatnonzero(chosen) for t in index.victims[r].tasks}
    after.release_many(t for t in gone if t in after.allocations)
    pods = []
    for n in range(state.size):
        units = int((after.gpu_free[n] // milli).sum()) // shape.num_gpu if shape.num_gpu else 99
        by_cpu = int(after.cpu_free[n]) // shape.cpu_milli if shape.cpu_milli else 99
        pods.append(min(units, by_cpu, int(after.mem_free[n]) // shape.memory_mib))
    return pods


@pytest.mark.parametrize("seed", range(40))
def test_rooms_answer_as_the_index_does_through_changes(seed: int) -> None:
    rng = random.Random(seed)
    state, victims = _cluster(rng)
    index = VictimIndex(state, victims)
    rooms = Rooms(index)
    jobs = sorted({v.job.id for v in victims})
    classes = []  # eligibility is per job (an action's rule), members as their whole job
    for p in (0.5, 0.8, 1.0):
        taken = {j for j in jobs if rng.random() < p}
        classes.append(np.array([v.job.id in taken for v in victims], dtype=np.bool_))
    shapes = [_shape(rng) for _ in range(3)]
    everywhere = np.ones(state.size, dtype=np.bool_)
    for _, nodes in _changes(rng, state, index):
        base = rng.choice(classes)
        room = rooms.get(state, base.copy())
        chosen = base & index.alive
        assert (room.chosen == chosen).all()
        assert room.whole_gpu == int(index.gpu_milli[chosen & index.whole].sum())
        for shape in rng.sample(shapes, 2):
            milli = shape.gpu_milli or MILLI_PER_GPU
            fresh = index.first_fits(state, shape, milli, chosen, nodes=everywhere, limit=99)
            assert np.flatnonzero(room.fits(shape, milli)).tolist() == sorted(n for n, _ in fresh)
            assert room.pods(shape, milli).tolist() == _pods_after(
                state, index, chosen, shape, milli
            )
            fresh = index.first_fits(state, shape, milli, chosen, nodes=nodes, limit=99)
            assert _same(room.first_fits(state, shape, milli, nodes=nodes, limit=99), fresh)
            top = room.first_fits(state, shape, milli, nodes=nodes, limit=2)
            assert _same(top, fresh[:2])


@pytest.mark.parametrize("seed", range(20))
def test_floor_is_no_dearer_than_any_set_of_the_victims(seed: int) -> None:
    rng = random.Random(seed)
    _, victims = _cluster(rng)
    some = rng.sample(victims, min(6, len(victims)))
    floor = victim_local._floor(some)
    for size in range(1, len(some) + 1):
        for taken in itertools.combinations(some, size):
            assert set_cost(list(taken)) >= floor
    assert floor in [set_cost([v]) for v in some]


@pytest.mark.parametrize("width", range(1, 10))
def test_row_counts_equal_count_nonzero(width: int) -> None:
    rng = np.random.default_rng(width)
    mask = rng.random((50, width)) < 0.5
    assert (row_counts(mask) == np.count_nonzero(mask, axis=1)).all()
    strided = np.repeat(mask, 2, axis=1)[:, ::2]  # not contiguous: the plain count
    assert (row_counts(strided) == np.count_nonzero(mask, axis=1)).all()


Planned = tuple[list[tuple[object, ...]], list[Eviction], dict[JobId, tuple[NodeName, ...]]]


def _plan(snapshot: Snapshot, policy: str, shapes: list[TaskShape]) -> Planned:
    profile = build_profile(policy_spec(policy), PluginContext(workload_hint=shapes, seed=1))
    plan = schedule(snapshot, profile)
    return (
        [(b.task, b.node, b.gpus, b.gpu_milli) for b in plan.binds],
        list(plan.evictions),
        dict(plan.nominations),
    )


# Sizes at which both cycles of each policy evict (the steady cycle evicts little: most
# pending jobs would borrow quota held for one that waits).
@pytest.mark.parametrize(("policy", "nodes"), [("gpusched", 200), ("gpusched-topo", 200)])
def test_cycles_plan_the_same_without_the_shortcuts(
    policy: str, nodes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = build_cycle_setup(nodes, 400, topology=policy == "gpusched-topo")
    shapes = [t.shape for j in setup.snapshot.pending for t in j.tasks]
    profile = build_profile(policy_spec(policy), PluginContext(workload_hint=shapes, seed=1))
    snapshots = [setup.snapshot, steady_snapshot(setup, profile)]
    fast = [_plan(s, policy, shapes) for s in snapshots]
    monkeypatch.setattr(
        victim_local, "row_check_is_placement", lambda session, task, most_free=None: False
    )
    monkeypatch.setattr(
        Room,
        "first_fits",
        lambda self, state, shape, milli, *, nodes, limit: self.index.first_fits(
            state, shape, milli, self.chosen, nodes=nodes, limit=limit
        ),
    )
    monkeypatch.setattr(
        Room, "fits", lambda self, shape, milli: np.ones(len(self.count), dtype=np.bool_)
    )
    monkeypatch.setattr(
        Room, "pods", lambda self, shape, milli: np.full(len(self.count), 2**40, dtype=np.int64)
    )
    slow = [_plan(s, policy, shapes) for s in snapshots]
    assert all(len(plan[1]) > 0 for plan in fast)  # evictions: the victim search ran
    assert fast == slow


@pytest.mark.parametrize("policy", ["gpusched", "gpusched-topo"])
def test_built_in_batch_policies_qualify_for_the_row_check(policy: str) -> None:
    """The node-local search skips its full placement check only for profiles whose plugins
    are known to qualify (``victim_local.row_check_is_placement``). A score added to a
    built-in policy without being classified silently turned the shortcut off (the cold
    5,000-node cycle took 10-20% longer with the same plans): list it in
    ``victim_local.DETERMINISTIC`` / ``STATIC_FILTERS`` once it is checked to qualify."""
    spec = policy_spec(policy)
    unclassified = [s.name for s in spec.scores if s.name not in victim_local.DETERMINISTIC]
    if spec.gpu_picker.name not in victim_local.DETERMINISTIC:
        unclassified.append(spec.gpu_picker.name)
    unclassified += [
        f.name for f in spec.filters if f.name != FIT and f.name not in victim_local.STATIC_FILTERS
    ]
    assert not unclassified
