"""Building profiles from specs: the built-in policies, the registry and configuration errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builders import make_job, make_node, make_state, occupy, run_cycle
from gpusched.actions.allocate import Backfill
from gpusched.errors import ConfigError
from gpusched.framework import PluginContext, PluginSpec, ProfileSpec, TieBreak
from gpusched.plugins import PLUGINS, create_plugin
from gpusched.plugins.fgd import Fgd
from gpusched.scheduler import BEST_POLICY, LIVE_POLICY, POLICIES, build_profile, policy_spec

REPO = Path(__file__).resolve().parents[2]


def spec(**fields: object) -> ProfileSpec:
    return ProfileSpec.model_validate({"name": "p", **fields})


def test_every_built_in_policy_builds_with_the_core_filters() -> None:
    # Other policies may be added; these are the ones the FGD comparison needs.
    assert set(POLICIES) >= {
        "bestfit",
        "clustering",
        "dotprod",
        "fgd",
        "kube-default",
        "packing",
        "random",
    }
    assert BEST_POLICY in POLICIES
    for name in POLICIES:
        profile = build_profile(policy_spec(name))
        assert profile.name == name
        assert profile.actions
        filters = [f.name for f in profile.filters]
        assert filters[:2] == ["node-resources-fit", "gpu-model"]
    for name in ("bestfit", "clustering", "dotprod", "fgd", "packing", "random"):
        assert [a.name for a in build_profile(policy_spec(name)).actions] == ["allocate"]


def test_kube_default_is_the_stock_scheduler() -> None:
    profile = build_profile(policy_spec("kube-default"))
    assert [(p.name, w) for p, w in profile.scores] == [
        ("least-allocated", 1.0),
        ("balanced-allocation", 1.0),
    ]
    assert profile.gpu_picker.name == "first-fit-gpu"
    assert profile.tie_break is TieBreak.RANDOM
    assert profile.gpu_as_integer


def test_fgd_profile_shares_one_instance_for_score_and_picker() -> None:
    profile = build_profile(policy_spec("fgd"))
    score = profile.scores[0][0]
    assert isinstance(score, Fgd)
    assert profile.gpu_picker is score


def test_policy_spec_is_a_copy() -> None:
    mine = policy_spec("bestfit")
    mine.scores.append(PluginSpec(name="random"))
    assert [s.name for s in policy_spec("bestfit").scores] == ["best-fit"]


def test_gpusched_easy_is_gpusched_with_one_reservation_no_aging_and_no_limit_guard() -> None:
    base, easy = policy_spec("gpusched"), policy_spec("gpusched-easy")
    assert base.action_args["backfill"] == {
        "reservations": 4,
        "starve_after_s": 86_400.0,
        "limit_guard_after_s": 86_400.0,
    }
    assert easy.action_args["backfill"] == {}
    rest = {k: v for k, v in easy.action_args.items() if k != "backfill"}
    assert rest == {k: v for k, v in base.action_args.items() if k != "backfill"}
    same = ("actions", "queue_sort", "filters", "scores", "gpu_picker")
    assert [getattr(easy, f) for f in same] == [getattr(base, f) for f in same]
    for spec, want in ((base, (86_400.0, 4, 86_400.0)), (easy, (None, 1, None))):
        backfill = build_profile(spec).actions[0]
        assert isinstance(backfill, Backfill)
        got = (backfill.starve_after_s, backfill.reservations, backfill.limit_guard_after_s)
        assert got == want


def test_the_deployed_profile_is_the_live_default() -> None:
    manifests = yaml.safe_load_all((REPO / "deploy" / "gpusched.yaml").read_text())
    (config,) = [m for m in manifests if m and m["metadata"]["name"] == "gpusched-profile"]
    deployed = ProfileSpec.model_validate(yaml.safe_load(config["data"]["profile.yaml"]))
    live = policy_spec(LIVE_POLICY)
    assert deployed.model_dump(exclude={"description"}) == live.model_dump(exclude={"description"})


def test_unknown_policy_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown policy 'fdg'; choose one of: kube-default, "):
        policy_spec("fdg")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            {"scores": [{"name": "nope"}]},
            r"profile 'p', scores\[0\]: unknown plugin 'nope'; known plugins: .*best-fit",
            id="unknown-score",
        ),
        pytest.param(
            {"filters": [{"name": "fifo"}]},
            r"profile 'p', filters\[0\]: plugin 'fifo' is not a FilterPlugin",
            id="queue-sort-used-as-filter",
        ),
        pytest.param(
            {"gpu_picker": {"name": "best-fit"}},
            r"profile 'p', gpu_picker: plugin 'best-fit' is not a GpuPicker",
            id="score-used-as-picker",
        ),
        pytest.param(
            {"actions": ["allocate", "teleport"]},
            r"profile 'p', actions\[1\]: unknown action 'teleport'; known: allocate",
            id="unknown-action",
        ),
        pytest.param(
            {
                "actions": ["backfill", "reclaim"],
                "action_args": {"reclaim": {"overshoot": "maybe"}},
            },
            r"profile 'p', action_args.reclaim.overshoot: Input should be a valid boolean, .*"
            r"got 'maybe'",
            id="action-arg-of-the-wrong-type",
        ),
        pytest.param(
            {"actions": ["backfill", "reclaim"], "action_args": {"reclaim": {"overshot": True}}},
            r"profile 'p', action_args.reclaim.overshot: unknown argument \(the action takes: "
            r"min_runtime_s, max_evictions, max_attempts, overshoot, past_budget\)",
            id="unknown-action-arg",
        ),
        pytest.param(
            {
                "actions": ["backfill"],
                "action_args": {"backfill": {"guarantee_after_evictions": 0}},
            },
            r"profile 'p', action_args.backfill: guarantee_after_evictions must be >= 1, got 0",
            id="action-arg-out-of-range",
        ),
        pytest.param(
            {
                "actions": ["backfill"],
                "action_args": {"backfill": {"limit_guard_after_s": -1}},
            },
            r"profile 'p', action_args.backfill: limit_guard_after_s must be >= 0 seconds, "
            r"got -1",
            id="limit-guard-out-of-range",
        ),
        pytest.param(
            {"actions": ["allocate"], "action_args": {"allocate": {"x": 1}}},
            r"profile 'p', action_args.allocate.x: unknown argument \(the action takes: none\)",
            id="arg-to-action-without-args",
        ),
        pytest.param(
            {"filters": []},
            r"profile 'p', filters: at least one filter is required",
            id="no-filters",
        ),
        pytest.param(
            {"scores": [{"name": "best-fit", "args": {"x": 1}}]},
            r"profile 'p', scores\[0\]: plugin 'best-fit' takes no args; got \['x'\]",
            id="args-to-plugin-without-args",
        ),
        pytest.param(
            {"scores": [{"name": "fgd", "args": {"coverage": 2}}]},
            r"profile 'p', scores\[0\]: fgd: args.coverage must be in \(0, 1\], got 2.0",
            id="fgd-bad-coverage",
        ),
    ],
)
def test_bad_profiles_name_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_profile(spec(**fields))


def test_action_args_are_converted_to_the_declared_types() -> None:
    built = build_profile(
        spec(actions=["backfill", "reclaim"], action_args={"reclaim": {"min_runtime_s": 60}})
    )
    reclaim = built.actions[1]
    assert reclaim.name == "reclaim"
    assert vars(reclaim)["min_runtime_s"] == 60.0
    assert isinstance(vars(reclaim)["min_runtime_s"], float)


def test_registry_holds_every_plugin_the_policies_name() -> None:
    named = {
        p.name
        for s in POLICIES.values()
        for p in (*s.filters, *s.scores, s.gpu_picker, PluginSpec(name=s.queue_sort))
    }
    assert named <= set(PLUGINS)
    with pytest.raises(ConfigError, match="unknown plugin 'x'"):
        create_plugin("x", {}, PluginContext())


@pytest.mark.parametrize(
    ("scores", "expected_node"),
    [
        # least-allocated spreads to the empty node; best-fit packs onto the used one.
        pytest.param([("least-allocated", 1.0), ("best-fit", 0.0)], "empty", id="spread-wins"),
        pytest.param([("least-allocated", 0.0), ("best-fit", 1.0)], "used", id="pack-wins"),
        pytest.param([("least-allocated", 1.0), ("best-fit", 3.0)], "used", id="weighted-sum"),
    ],
)
def test_score_weights_are_multipliers(scores: list[tuple[str, float]], expected_node: str) -> None:
    # used: 8 of 16 CPU taken. Task: 4 CPU, no GPU.
    # least-allocated: used floor((4/16 + 1)/2*100) = 62, empty floor((12/16 + 1)/2*100) = 87
    # best-fit (C = 16000, G = 1 for GPU-less nodes): used 100*(1 - .5*4000/16000) = 87.5,
    #   empty 100*(1 - .5*12000/16000) = 62.5
    # weighted 1:3 -> used 62 + 262.5 = 324.5 > empty 87 + 187.5 = 274.5
    state = make_state(
        make_node("used").cpu(16).mem_gib(16), make_node("empty").cpu(16).mem_gib(16)
    )
    occupy(state, "used", cpu_milli=8000)
    profile = build_profile(
        spec(
            scores=[{"name": n, "weight": w} for n, w in scores],
            gpu_picker={"name": "first-fit-gpu"},
        )
    )
    plan = run_cycle(state, [make_job("j").cpu(4).mem_gib(0)], profile=profile)
    assert [b.node for b in plan.binds] == [expected_node]
