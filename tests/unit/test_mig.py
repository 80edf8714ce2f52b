"""MIG geometry: profiles, layout validation, feasible starts and layout choice."""

from __future__ import annotations

import pytest

from gpusched.errors import ConfigError
from gpusched.model.mig import GEOMETRIES, MigGeometry, MigPlacement, geometry_for, geometry_for_gpu
from gpusched.model.mig_layout import (
    choose_layout,
    feasible_starts,
    layout_problem,
    validate_layout,
)

A80 = geometry_for("A100-80GB")
A40 = geometry_for("A100-40GB")
H80 = geometry_for("H100-80GB")


@pytest.mark.parametrize(
    ("geometry", "profiles"),
    [
        pytest.param(
            A80, ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"], id="a100-80"
        ),
        pytest.param(
            H80, ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"], id="h100-80"
        ),
        pytest.param(A40, ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"], id="a100-40"),
    ],
)
def test_profiles(geometry: MigGeometry, profiles: list[str]) -> None:
    assert list(geometry.profiles) == profiles


@pytest.mark.parametrize(
    ("name", "compute", "memory", "starts"),
    [
        pytest.param("1g.10gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), id="1g.10gb"),
        pytest.param("1g.20gb", 1, 2, (0, 2, 4, 6), id="1g.20gb"),
        pytest.param("2g.20gb", 2, 2, (0, 2, 4), id="2g.20gb"),
        pytest.param("3g.40gb", 3, 4, (0, 4), id="3g.40gb"),
        pytest.param("4g.40gb", 4, 4, (0,), id="4g.40gb"),
        pytest.param("7g.80gb", 7, 8, (0,), id="7g.80gb"),
    ],
)
def test_geometry_table(name: str, compute: int, memory: int, starts: tuple[int, ...]) -> None:
    prof = A80.profile(name)
    assert (prof.compute_slices, prof.memory_slices, prof.starts) == (compute, memory, starts)
    # the A100-40GB counterpart has the same geometry at half the memory (no 1g.20gb there)
    if name != "1g.20gb":
        g, gb = name.split(".")
        half = A40.profile(f"{g}.{int(gb[:-2]) // 2}gb")
        assert (half.compute_slices, half.memory_slices, half.starts) == (compute, memory, starts)


def test_unknown_profile_names_it_and_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        feasible_starts(A40, [], "1g.10gb")
    assert str(err.value) == (
        "MIG profile '1g.10gb' does not exist on A100-40GB; "
        "valid profiles: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"
    )
    with pytest.raises(ConfigError, match="GPU kind 'V100' has no MIG geometry; known: A100-40GB"):
        geometry_for("V100")


@pytest.mark.parametrize(
    ("model", "memory_mib", "kind"),
    [
        pytest.param("A100", 40 * 1024, "A100-40GB", id="a100-40"),
        pytest.param("A100", 80 * 1024, "A100-80GB", id="a100-80"),
        pytest.param("H100", 80 * 1024, "H100-80GB", id="h100"),
        pytest.param("NVIDIA-A100-SXM4-80GB", 81920, "A100-80GB", id="gfd-product-label"),
        pytest.param("L4", 24 * 1024, None, id="l4-not-mig"),
        pytest.param("A100", 0, None, id="memory-unknown"),
    ],
)
def test_geometry_for_gpu(model: str, memory_mib: int, kind: str | None) -> None:
    found = geometry_for_gpu(model, memory_mib)
    assert (found.name if found else None) == kind


VALID = [
    pytest.param([("7g.80gb", 0)], id="whole-gpu"),
    pytest.param([("4g.40gb", 0), ("3g.40gb", 4)], id="4g+3g"),
    pytest.param([("3g.40gb", 0), ("3g.40gb", 4)], id="3g+3g"),
    pytest.param([("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)], id="2g*3+1g"),
    pytest.param([("1g.10gb", s) for s in range(7)], id="1g*7"),
    pytest.param([("1g.20gb", s) for s in (0, 2, 4, 6)], id="1g.20gb*4"),
    pytest.param([("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)], id="4g+2g+1g"),
    pytest.param([], id="empty"),
]


@pytest.mark.parametrize("layout", VALID)
def test_valid_layouts(layout: list[tuple[str, int]]) -> None:
    assert layout_problem(A80, layout) is None
    validate_layout(A80, layout)


INVALID = [
    pytest.param([("3g.40gb", 2)],
                 "instance 0 (3g.40gb): start 2 is not allowed; expected one of [0, 4]",
                 id="bad-start"),
    pytest.param([("1g.10gb", 7)], "start 7 is not allowed", id="1g-at-slice-7"),
    pytest.param([("4g.40gb", 0), ("2g.20gb", 2)],
                 "instance 1 (2g.20gb@2) overlaps instance 0 on memory slice 2", id="overlap"),
    pytest.param([("7g.80gb", 0), ("1g.10gb", 6)], "overlaps instance 0 on memory slice 6",
                 id="overlap-whole"),
    pytest.param([("1g.20gb", s) for s in (0, 2, 4, 6)] + [("1g.10gb", 1)], "overlaps",
                 id="eighth-instance"),
]  # fmt: skip


@pytest.mark.parametrize(("layout", "message"), INVALID)
def test_invalid_layouts(layout: list[tuple[str, int]], message: str) -> None:
    problem = layout_problem(A80, layout)
    assert problem is not None
    assert message in problem
    with pytest.raises(ConfigError, match=r"node 'n1' GPU 3: "):
        validate_layout(A80, layout, where="node 'n1' GPU 3")


@pytest.mark.parametrize(
    ("layout", "profile", "starts"),
    [
        pytest.param([], "1g.10gb", (0, 1, 2, 3, 4, 5, 6), id="empty-1g"),
        pytest.param([("3g.40gb", 4)], "2g.20gb", (0, 2), id="beside-3g"),
        pytest.param([("3g.40gb", 4)], "4g.40gb", (0,), id="4g-beside-3g"),
        pytest.param([("1g.10gb", 0)], "4g.40gb", (), id="4g-blocked-by-1g-at-0"),
        pytest.param([("1g.10gb", 6)], "4g.40gb", (0,), id="4g-free-beside-1g-at-6"),
        pytest.param([("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4)], "1g.20gb", (6,),
                     id="last-1g.20gb"),
        # 4g + three 1g take all 7 compute slices; memory slice 7 is free but unusable
        pytest.param([("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6)],
                     "1g.10gb", (), id="compute-exhausted"),
    ],
)  # fmt: skip
def test_feasible_starts(
    layout: list[tuple[str, int]], profile: str, starts: tuple[int, ...]
) -> None:
    assert feasible_starts(A80, layout, profile) == starts


@pytest.mark.parametrize(
    ("requested", "layout"),
    [
        # alone, a 1g goes to slice 6 so that 4g.40gb@0 still fits (room: largest 4)
        pytest.param(["1g.10gb"], [("1g.10gb", 6)], id="1g-at-the-end"),
        # 3g@4 keeps 4g@0 possible; 3g@0 would leave only 3g@4
        pytest.param(["3g.40gb"], [("3g.40gb", 4)], id="3g-keeps-4g"),
        pytest.param(["3g.40gb", "4g.40gb"], [("4g.40gb", 0), ("3g.40gb", 4)], id="4g+3g"),
        pytest.param(["1g.10gb", "2g.20gb", "2g.20gb", "2g.20gb"],
                     [("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)],
                     id="2g*3+1g"),
        pytest.param(["7g.80gb"], [("7g.80gb", 0)], id="whole"),
        pytest.param([], [], id="nothing"),
    ],
)  # fmt: skip
def test_choose_layout(requested: list[str], layout: list[tuple[str, int]]) -> None:
    assert choose_layout(A80, requested) == tuple(MigPlacement(p, s) for p, s in layout)


@pytest.mark.parametrize(
    "requested",
    [
        pytest.param(["1g.10gb"] * 8, id="eight-1g"),
        pytest.param(["4g.40gb", "4g.40gb"], id="two-4g"),
        pytest.param(["3g.40gb", "3g.40gb", "1g.10gb"], id="3g+3g+1g"),
        pytest.param(["7g.80gb", "1g.10gb"], id="whole-plus-one"),
    ],
)
def test_choose_layout_none_when_impossible(requested: list[str]) -> None:
    assert choose_layout(A80, requested) is None


def test_every_geometry_is_consistent() -> None:
    for geometry in GEOMETRIES.values():
        for prof in geometry.profiles.values():
            assert all(s + prof.memory_slices <= 8 for s in prof.starts)
            assert choose_layout(geometry, [prof.name]) is not None
