"""Property: MIG layouts are always valid, whatever is allocated and released.

On random clusters (A100/H100 GPUs that are plain, static MIG with a random valid layout, or
reconfigurable) and random workloads (MIG requests of every profile, plain whole and shared
GPUs), after every step -- a direct allocate or release on the state, or every cycle of the
simulator running the real ``schedule()`` -- every MIG GPU's layout passes
:func:`~gpusched.model.mig_layout.layout_problem`, a static GPU uses only its own instances, the
instances in use are exactly those the allocations hold, their GPU-equivalents add up, and a
MIG GPU never shows a plain free share.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusched.errors import InvariantError
from gpusched.framework import ClusterState
from gpusched.framework.mig import mig_fit_count
from gpusched.model import Gpu, GpuModel, Job, JobId, Node, NodeName, Task, TaskId, TaskShape
from gpusched.model.mig import GEOMETRIES, MigConfig, MigPlacement, geometry_for_gpu, mig_milli
from gpusched.model.mig_layout import feasible_starts, layout_problem
from gpusched.scheduler import build_profile, policy_spec
from gpusched.sim import SimOptions, Simulation

KINDS = (("A100", 80), ("H100", 80), ("A100", 40))
PROFILES = tuple(dict.fromkeys(p for g in GEOMETRIES.values() for p in g.profiles))


@st.composite
def static_layout(draw: st.DrawFn, model: str, gib: int) -> MigConfig:
    geo = geometry_for_gpu(model, gib * 1024)
    assert geo is not None
    layout: list[MigPlacement] = []
    for _ in range(draw(st.integers(1, 7))):
        profile = draw(st.sampled_from(list(geo.profiles)))
        starts = feasible_starts(geo, layout, profile)
        if starts:
            layout.append(MigPlacement(profile, draw(st.sampled_from(starts))))
    if not layout:
        layout.append(MigPlacement(next(iter(geo.profiles)), 0))
    return MigConfig(layout=tuple(layout))


@st.composite
def mig_nodes(draw: st.DrawFn) -> list[Node]:
    out = []
    for n in range(draw(st.integers(1, 4))):
        model, gib = draw(st.sampled_from(KINDS))
        configs: list[MigConfig | None] = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["plain", "static", "reconfigurable"]))
            if kind == "plain":
                configs.append(None)
            elif kind == "static":
                configs.append(draw(static_layout(model, gib)))
            else:
                configs.append(MigConfig(reconfigurable=True))
        gpus = tuple(Gpu(i, GpuModel(model), gib * 1024) for i in range(len(configs)))
        out.append(
            Node(NodeName(f"n{n}"), 16_000, 64 * 1024, gpus, mig=tuple(configs))
            if any(configs)
            else Node(NodeName(f"n{n}"), 16_000, 64 * 1024, gpus)
        )
    return out


@st.composite
def shapes(draw: st.DrawFn) -> TaskShape:
    cpu = draw(st.sampled_from([500, 1000, 4000]))
    kind = draw(st.sampled_from(["mig", "mig", "whole", "share"]))
    if kind == "mig":
        return TaskShape(
            cpu_milli=cpu,
            memory_mib=1024,
            mig_profile=draw(st.sampled_from(PROFILES)),
            mig_count=draw(st.integers(1, 2)),
        )
    if kind == "whole":
        return TaskShape(cpu_milli=cpu, memory_mib=1024, num_gpu=1, gpu_milli=1000)
    return TaskShape(cpu_milli=cpu, memory_mib=1024, num_gpu=1, gpu_milli=500)


def check_layouts(state: ClusterState) -> None:
    """The invariants of the module docstring."""
    mig = state.mig
    if mig is None:
        return
    held: Counter[tuple[int, int, MigPlacement]] = Counter()
    for alloc in state.allocations.values():
        for sl in alloc.mig:
            held[(alloc.node, sl.gpu, sl.placement)] += 1
    in_use: Counter[tuple[int, int, MigPlacement]] = Counter()
    for m in mig.gpus:
        layout = mig.layout(m.node, m.gpu)
        assert layout_problem(m.geometry, layout) is None, (m, layout)
        used = mig.in_use(m.node, m.gpu)
        assert layout_problem(m.geometry, used) is None
        if not m.reconfigurable:
            assert set(used) <= set(m.layout)
        for p in used:
            in_use[(m.node, m.gpu, p)] += 1
        assert int(state.gpu_free[m.node, m.gpu]) == 0
    assert held == in_use
    assert mig.held == sum(mig_milli(p.profile) for (_, _, p) in in_use.elements())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=mig_nodes(), data=st.data())
def test_layouts_valid_after_any_allocations_and_releases(
    nodes: list[Node], data: st.DataObject
) -> None:
    state = ClusterState.from_nodes(nodes)
    live: list[TaskId] = []
    for step in range(data.draw(st.integers(1, 40))):
        release = data.draw(st.booleans())
        if live and release:
            task_id = live.pop(data.draw(st.integers(0, len(live) - 1)))
            state.release(task_id)
        else:
            shape = data.draw(shapes())
            task = Task(TaskId(f"t{step}"), JobId(f"t{step}"), shape)
            node = data.draw(st.integers(0, state.size - 1))
            if shape.mig_profile:
                fits = int(mig_fit_count(state, shape.mig_profile)[node]) >= shape.mig_count
                fits = fits and int(state.cpu_free[node]) >= shape.cpu_milli
                try:
                    state.allocate(task, node, ())
                except InvariantError:
                    assert not fits  # the fit count said it fits: the pick must succeed
                else:
                    assert fits
                    live.append(task.id)
            else:
                free = [g for g in range(state.gpu_slots) if state.gpu_free[node, g] >= 500]
                want = shape.gpu_milli
                ok = [g for g in free if state.gpu_free[node, g] >= want]
                if ok and int(state.cpu_free[node]) >= shape.cpu_milli:
                    state.allocate(task, node, (ok[0],))
                    live.append(task.id)
        check_layouts(state)
        copy = state.copy()
        check_layouts(copy)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=mig_nodes(),
    specs=st.lists(
        st.tuples(shapes(), st.integers(1, 3), st.integers(0, 20), st.integers(1, 30)),
        min_size=1,
        max_size=14,
    ),
    policy=st.sampled_from(["gpusched", "fgd", "kube-default"]),
)
def test_layouts_valid_in_every_simulated_cycle(
    nodes: list[Node], specs: list[tuple[TaskShape, int, int, int]], policy: str
) -> None:
    jobs = []
    for i, (shape, replicas, submit, duration) in enumerate(specs):
        jid = JobId(f"j{i}")
        tasks = tuple(Task(TaskId(f"j{i}-{r}"), jid, shape) for r in range(replicas))
        jobs.append(Job(jid, tasks, submit_time=float(submit), duration=float(duration)))
    state = ClusterState.from_nodes(nodes)
    offered = {
        p
        for m in (state.mig.gpus if state.mig is not None else ())
        for p in (m.geometry.profiles if m.reconfigurable else [x.profile for x in m.layout])
    }
    jobs = [
        j
        for j in jobs
        if not j.tasks[0].shape.mig_profile or j.tasks[0].shape.mig_profile in offered
    ]
    if not jobs:
        return
    sim = Simulation(nodes, jobs, build_profile(policy_spec(policy)), options=SimOptions())
    sim.observers.append(lambda s: check_layouts(s.state))
    sim.run()
    if policy != "kube-default":  # pod by pod, a gang may keep part of itself bound forever
        # with gangs all or nothing, every job completes or is refused: nothing stays held
        assert sim.state.mig is None or sim.state.mig.held == 0
