"""Invariant checks shared by the property tests."""

from __future__ import annotations

from gpusched.framework import ClusterState


def check_no_overcommit(state: ClusterState) -> None:
    """Free resources are within capacity and equal capacity minus what allocations hold."""
    cpu = state.cpu_cap.copy()
    mem = state.mem_cap.copy()
    gpu = state.gpu_cap.astype("int64")
    for alloc in state.allocations.values():
        cpu[alloc.node] -= alloc.cpu_milli
        mem[alloc.node] -= alloc.memory_mib
        for g in alloc.gpus:
            gpu[alloc.node, g] -= alloc.gpu_milli
    assert (cpu >= 0).all(), f"CPU over-committed: {cpu.tolist()}"
    assert (mem >= 0).all(), f"memory over-committed: {mem.tolist()}"
    assert (gpu >= 0).all(), f"GPU share over-committed: {gpu.tolist()}"
    assert cpu.tolist() == state.cpu_free.tolist()
    assert mem.tolist() == state.mem_free.tolist()
    assert gpu.tolist() == state.gpu_free.tolist()
