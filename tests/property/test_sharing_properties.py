"""Requests by GPU memory never overcommit a GPU's memory, whatever the nodes and requests.

For random nodes (GPU memory, driver reserve, sharing mode) and random requests by memory or
by share, one ``gpusched-topo`` cycle binds some of them; summing, per GPU, the memory each
bound task uses (its ``gpu_memory``, or its share of the usable memory) never exceeds the
GPU's memory minus the reserve, and no task lands on an exclusive node with a fraction.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import run_cycle
from gpusched.framework import ClusterState
from gpusched.model import (
    Job,
    JobId,
    JobKind,
    Node,
    SharingMode,
    Task,
    TaskId,
    TaskShape,
)
from gpusched.model.task import nominal_share


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        memory = draw(st.sampled_from([16, 24, 40, 80])) * 1024
        out.append(
            Node.with_gpus(
                f"n{i}",
                cpu_milli=64_000,
                memory_mib=512 * 1024,
                gpu_count=draw(st.integers(1, 4)),
                gpu_model="G",
                gpu_memory_mib=memory,
                gpu_sharing=draw(st.sampled_from(list(SharingMode))),
                gpu_reserved_mib=draw(st.sampled_from([0, 512, 1024])),
            )
        )
    return out


@st.composite
def requests(draw: st.DrawFn) -> list[Job]:
    jobs = []
    for i in range(draw(st.integers(1, 20))):
        if draw(st.booleans()):
            mem = draw(st.integers(512, 30 * 1024))
            shape = TaskShape(1000, 1024, 1, nominal_share(mem), gpu_memory_mib=mem)
        else:
            shape = TaskShape(1000, 1024, 1, draw(st.integers(1, 1000)))
        jid = JobId(f"j{i}")
        jobs.append(Job(jid, (Task(TaskId(f"j{i}"), jid, shape),), kind=JobKind.INFERENCE))
    return jobs


@settings(max_examples=60, deadline=None)
@given(nodes(), requests())
def test_no_gpu_memory_overcommitted(cluster: list[Node], jobs: list[Job]) -> None:
    state = ClusterState.from_nodes(cluster)
    plan = run_cycle(state, jobs, policy="gpusched-topo")
    shapes = {t.id: t.shape for j in jobs for t in j.tasks}
    used: dict[tuple[str, int], float] = {}
    by_name = {n.name: n for n in cluster}
    for b in plan.binds:
        node = by_name[b.node]
        shape = shapes[b.task]
        usable = node.gpu_usable_mib
        if b.gpu_milli < 1000:
            assert node.gpu_sharing is not SharingMode.EXCLUSIVE
        mem = shape.gpu_memory_mib or shape.gpu_milli * usable / 1000
        for g in b.gpus:
            used[(b.node, g)] = used.get((b.node, g), 0.0) + mem
            assert used[(b.node, g)] <= usable + 1e-6, (b, usable, used[(b.node, g)])
