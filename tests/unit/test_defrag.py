"""The defrag action's arguments: bad values are a ConfigError naming the profile field."""

from __future__ import annotations

import pytest

from gpusched.actions import Defrag
from gpusched.errors import ConfigError
from gpusched.scheduler import build_profile, policy_spec


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param({"factor": -1.0}, "factor and restart_s must be >= 0", id="negative-factor"),
        pytest.param(
            {"restart_s": -5.0}, "factor and restart_s must be >= 0", id="negative-restart"
        ),
        pytest.param({"max_nodes": 0}, "max_nodes must be >= 1", id="no-nodes"),
        pytest.param({"max_moves": 0}, "max_moves", id="no-moves"),
        pytest.param({"speed": 3}, "defrag.speed: unknown argument", id="unknown-argument"),
    ],
)
def test_bad_defrag_arguments_name_the_field(args: dict[str, object], says: str) -> None:
    spec = policy_spec("gpusched-defrag")
    spec.action_args = {"defrag": args}
    with pytest.raises(ConfigError) as err:
        build_profile(spec)
    assert "action_args.defrag" in str(err.value)
    assert says in str(err.value)


def test_defrag_arguments_reach_the_action() -> None:
    spec = policy_spec("gpusched-defrag")
    spec.action_args = {"defrag": {"factor": 3.5, "max_jobs": 1}}
    action = next(a for a in build_profile(spec).actions if isinstance(a, Defrag))
    assert (action.factor, action.max_jobs) == (3.5, 1)
