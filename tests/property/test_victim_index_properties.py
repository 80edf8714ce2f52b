"""The victim index's vector answers agree with a per-node walk in Python.

Random clusters hold random running jobs (one or several pods, whole or shared GPUs); victims
are those jobs in a random order with random priorities. For a random one-pod request and a
random eligibility mask, :meth:`VictimIndex.first_fits` must rank every node whose eligible
victims (taken in order) make room exactly as a plain loop does, the class's room
(:class:`~gpusched.actions.victim_room.Room`) must name those nodes, and its gang bound must
match the per-node count with every eligible victim gone.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_node, make_state
from gpusched.actions.victim_index import Victim, VictimIndex
from gpusched.actions.victim_room import Rooms
from gpusched.framework import ClusterState, RunningJob
from gpusched.model import MILLI_PER_GPU, Job, JobId, Task, TaskId, TaskShape

GPUS = 4


@st.composite
def cases(draw: st.DrawFn) -> tuple[ClusterState, list[Victim], TaskShape, np.ndarray]:
    nodes = draw(st.integers(2, 5))
    state = make_state(*(make_node(f"n{i}").gpus(GPUS).cpu(16).mem_gib(64) for i in range(nodes)))
    victims: list[Victim] = []
    for j in range(draw(st.integers(1, 12))):
        pods = draw(st.integers(1, 3))
        tasks = []
        for p in range(pods):
            gpus = draw(st.integers(0, 2))
            milli = draw(st.sampled_from([MILLI_PER_GPU, 500, 250])) if gpus == 1 else 1000
            cpu = draw(st.integers(0, 4)) * 1000
            shape = TaskShape(cpu_milli=cpu, memory_mib=1024, num_gpu=gpus, gpu_milli=milli)
            task = Task(TaskId(f"j{j}-{p}"), JobId(f"j{j}"), shape)
            for node in draw(st.permutations(range(nodes))):
                free = np.flatnonzero(state.gpu_free[node] >= milli)
                if state.cpu_free[node] >= cpu and len(free) >= gpus:
                    state.allocate(task, node, tuple(int(g) for g in free[:gpus]))
                    tasks.append(task)
                    break
        if not tasks:
            continue
        job = Job(JobId(f"j{j}"), tuple(tasks), priority=draw(st.integers(0, 3)))
        nodes_of = frozenset(state.allocations[t.id].node for t in tasks)
        held = sum(t.shape.total_gpu_milli for t in tasks)
        victims.append(Victim(RunningJob(job, 0.0), tuple(tasks), True, held, nodes_of))
    want = TaskShape(
        cpu_milli=draw(st.integers(0, 8)) * 1000,
        memory_mib=1024,
        num_gpu=draw(st.integers(1, GPUS)),
        gpu_milli=MILLI_PER_GPU,
    )
    eligible = np.array([draw(st.booleans()) for _ in victims], dtype=np.bool_)
    return state, victims, want, eligible


def _walk(
    state: ClusterState, victims: list[Victim], shape: TaskShape, eligible: np.ndarray
) -> dict[int, tuple[int, int, int, int, int]]:
    """Per node: the cost key of the first-fit prefix of its eligible victims (a plain loop)."""
    found: dict[int, tuple[int, int, int, int, int]] = {}
    for node in range(state.size):
        cpu, gpu = int(state.cpu_free[node]), state.gpu_free[node].astype(np.int64).copy()
        whole = gpus = count = 0
        top = -1
        for rank, v in enumerate(victims):
            here = [state.allocations[t.id] for t in v.tasks]
            here = [a for a in here if a.node == node]
            if not eligible[rank] or not here:
                continue
            for a in here:
                cpu += a.cpu_milli
                for g in a.gpus:
                    gpu[g] += a.gpu_milli
            whole, count, gpus = whole + 1, count + 1, gpus + v.gpu_milli
            top = max(top, v.job.priority)
            if cpu >= shape.cpu_milli and (gpu >= shape.gpu_milli).sum() >= shape.num_gpu:
                found[node] = (whole, top, gpus, count, rank)
                break
    return found


@settings(max_examples=150, deadline=None)
@given(cases())
def test_first_fits_ranks_nodes_as_a_per_node_walk(
    case: tuple[ClusterState, list[Victim], TaskShape, np.ndarray],
) -> None:
    state, victims, shape, eligible = case
    index = VictimIndex(state, victims)
    everywhere = np.ones(state.size, dtype=np.bool_)
    got = index.first_fits(state, shape, shape.gpu_milli, eligible, nodes=everywhere, limit=99)
    walked = _walk(state, victims, shape, eligible)
    assert sorted(node for node, _ in got) == sorted(walked)
    room = Rooms(index).get(state, eligible)
    assert np.flatnonzero(room.fits(shape, shape.gpu_milli)).tolist() == sorted(walked)
    keys = [walked[node] for node, _ in got]
    assert keys == sorted(keys), "nodes not in order of their prefix's cost"
    for node, listed in got:
        on_node = [
            v
            for r, v in enumerate(victims)
            if eligible[r] and any(state.allocations[t.id].node == node for t in v.tasks)
        ]
        assert listed == on_node


@settings(max_examples=150, deadline=None)
@given(cases())
def test_gang_bound_counts_room_with_every_eligible_victim_gone(
    case: tuple[ClusterState, list[Victim], TaskShape, np.ndarray],
) -> None:
    state, victims, shape, eligible = case
    index = VictimIndex(state, victims)
    bound = Rooms(index).get(state, eligible).pods(shape, shape.gpu_milli)
    after = state.copy()
    after.release_many(t.id for r, v in enumerate(victims) if eligible[r] for t in v.tasks)
    for node in range(state.size):
        by_cpu = after.cpu_free[node] // shape.cpu_milli if shape.cpu_milli else 10**9
        by_mem = after.mem_free[node] // shape.memory_mib
        by_gpu = (after.gpu_free[node] // shape.gpu_milli).sum() // shape.num_gpu
        assert bound[node] == min(by_cpu, by_mem, by_gpu)


@settings(max_examples=100, deadline=None)
@given(cases(), st.data())
def test_room_whole_gpu_follows_evictions(
    case: tuple[ClusterState, list[Victim], TaskShape, np.ndarray], data: st.DataObject
) -> None:
    """A kept room's ``whole_gpu`` (updated by the victims touched since) is the GPU milli of
    its class's alive whole victims after each eviction."""
    state, victims, _, eligible = case
    index = VictimIndex(state, victims)
    rooms = Rooms(index)
    for victim in data.draw(st.permutations(victims)):
        index.remove([victim])
        state.release_many(t.id for t in victim.tasks)
        want = sum(
            v.gpu_milli for r, v in enumerate(index.victims) if eligible[r] and index.alive[r]
        )
        assert rooms.get(state, eligible).whole_gpu == want
