"""Hypothesis strategies: small random clusters and job lists built with the test builders."""

from __future__ import annotations

from hypothesis import strategies as st

from builders import JobBuilder, NodeBuilder, make_job, make_node
from gpusched.model import Job, Node

MODELS = ("G2", "T4")


@st.composite
def nodes(draw: st.DrawFn, max_nodes: int = 4) -> list[Node]:
    """1..max_nodes nodes of 0, 1, 2, 4 or 8 GPUs, small CPU and memory so they run out too."""
    count = draw(st.integers(1, max_nodes))
    out = []
    for i in range(count):
        node: NodeBuilder = make_node(f"n{i}")
        node.cpu(draw(st.sampled_from([2, 4, 8, 16, 32])))
        node.mem_gib(draw(st.sampled_from([4, 16, 64])))
        gpus = draw(st.sampled_from([0, 1, 2, 4, 8]))
        if gpus:
            node.gpus(gpus, model=draw(st.sampled_from(MODELS)))
        out.append(node.build())
    return out


@st.composite
def job_builders(draw: st.DrawFn, job_id: str, max_replicas: int = 3) -> JobBuilder:
    job = make_job(job_id)
    job.cpu(draw(st.sampled_from([0.5, 1, 2, 4, 8])))
    job.mem_gib(draw(st.sampled_from([0.5, 1, 4, 16])))
    gpu = draw(st.sampled_from(["none", "share", "whole"]))
    if gpu == "share":
        job.share(draw(st.integers(1, 19)) * 50)
    elif gpu == "whole":
        job.gpus(draw(st.sampled_from([1, 2, 4])))
    if gpu != "none" and draw(st.booleans()):
        job.models(*draw(st.sets(st.sampled_from((*MODELS, "H100")), min_size=1)))
    job.replicas(draw(st.integers(1, max_replicas)))
    job.at(float(draw(st.integers(0, 10))))
    job.runs_for(draw(st.one_of(st.none(), st.integers(1, 10).map(float))))
    return job


@st.composite
def jobs(draw: st.DrawFn, max_jobs: int = 12) -> list[Job]:
    count = draw(st.integers(1, max_jobs))
    return [draw(job_builders(f"j{i}")).build() for i in range(count)]
