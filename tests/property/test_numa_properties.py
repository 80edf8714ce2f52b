"""NUMA-local CPUs are never pinned beyond what a NUMA node has, whatever the requests.

For random nodes with a topology (HGX boards, PCIe boxes with NVLink pairs) and random
requests, some asking for NUMA-local CPUs, one ``gpusched-topo`` cycle binds some of them.
Recomputing from the binds alone: every NUMA-local task's CPUs sit on the NUMA nodes of its
GPUs (``numa_split``), the pinned CPUs of each NUMA node stay within its CPUs, all CPUs of a
node within its allocatable CPUs, and the state's per-NUMA accounting agrees with that sum.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import run_cycle
from gpusched.framework import ClusterState
from gpusched.model import Job, JobId, JobKind, Node, Task, TaskId, TaskShape
from gpusched.model.templates import hgx_a100_node, hgx_h100_node, pcie_pairs_node


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    makers: list[Callable[[str], Node]] = [hgx_h100_node, hgx_a100_node, pcie_pairs_node]
    return [draw(st.sampled_from(makers))(f"n{i}") for i in range(draw(st.integers(1, 3)))]


@st.composite
def requests(draw: st.DrawFn) -> list[Job]:
    jobs = []
    for i in range(draw(st.integers(1, 16))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        cpu = draw(st.integers(1, 160)) * 1000
        local = draw(st.booleans())
        shape = TaskShape(cpu, 4096, gpus, 1000, numa_local_cpus=local)
        jid = JobId(f"j{i}")
        jobs.append(Job(jid, (Task(TaskId(f"j{i}"), jid, shape),), kind=JobKind.TRAINING))
    return jobs


@settings(max_examples=60, deadline=None)
@given(nodes(), requests())
def test_numa_cpus_never_overcommitted(cluster: list[Node], jobs: list[Job]) -> None:
    state = ClusterState.from_nodes(cluster)
    plan = run_cycle(state, jobs, policy="gpusched-topo")
    shapes = {t.id: t.shape for j in jobs for t in j.tasks}
    by_name = {n.name: n for n in cluster}
    pinned = {n.name: [0] * len(n.topology.numa_cpu_milli) for n in cluster if n.topology}
    cpu = dict.fromkeys(by_name, 0)
    after = state.copy()
    for b in plan.binds:
        shape = shapes[b.task]
        topo = by_name[b.node].topology
        assert topo is not None
        cpu[b.node] += shape.cpu_milli
        if shape.numa_local_cpus:
            split = topo.numa_split(b.gpus, shape.cpu_milli)
            assert sum(split) == shape.cpu_milli
            gpu_numa = {topo.devices[g].numa_node for g in b.gpus}
            assert all(c == 0 or k in gpu_numa for k, c in enumerate(split)), (b, split)
            for k, c in enumerate(split):
                pinned[b.node][k] += c
        task = next(t for j in jobs for t in j.tasks if t.id == b.task)
        after.allocate(task, after.index[b.node], b.gpus)
    for name, node in by_name.items():
        assert cpu[name] <= node.cpu_milli
        caps = node.topology.numa_cpu_milli if node.topology else ()
        for k, cap in enumerate(caps):
            assert pinned[name][k] <= cap, (name, k, pinned[name], caps)
            assert after.numa.free[after.index[name], k] == cap - pinned[name][k]


def test_release_returns_exactly_what_was_pinned() -> None:
    state = ClusterState.from_nodes([hgx_h100_node("n")])
    before = state.numa.free.copy()
    shape = TaskShape(30_000, 4096, 4, 1000, numa_local_cpus=True)
    task = Task(TaskId("t"), JobId("t"), shape)
    state.allocate(task, 0, (2, 3, 4, 5))  # two GPUs on each NUMA node -> 15 + 15 CPUs
    assert state.numa.free[0].tolist() == [before[0, 0] - 15_000, before[0, 1] - 15_000]
    state.release(TaskId("t"))
    assert state.numa.free.tolist() == before.tolist()
