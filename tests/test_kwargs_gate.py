"""The one kwargs gate (agentgym.registration.check_env_kwargs, issue 14): every way of giving
constructor arguments (gymnasium.make, the CLI's --kw, a training config, agentgym eval, a
result bundle) is checked by it and refused with the same message; task parameters are
normalised before they key a leaderboard; the worst return an errored episode scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import pytest

import agentgym
from agentgym.cli import CLIError, _make_env
from agentgym.eval import EvalError, evaluate
from agentgym.registration import (
    EnvKwargsError,
    check_env_kwargs,
    normalise_task_kwargs,
    split_env_kwargs,
    task_defaults,
    worst_return,
)
from baselines.config import load_config

WEBSHOP = "agentgym/WebShopText-v0"
TOO_BIG = "num_products must be an int <= 5000, got 1000000000"


def _via_make(kwargs: dict[str, Any]) -> None:
    gymnasium.make(WEBSHOP, **kwargs).close()


def _via_cli(kwargs: dict[str, Any]) -> None:
    _make_env(WEBSHOP, kwargs).close()


def _via_config(kwargs: dict[str, Any]) -> None:
    load_config(None, [f"rollout.env_id={WEBSHOP}", f"rollout.env_kwargs={kwargs}"])


def _via_eval(kwargs: dict[str, Any], tmp_path: Path) -> None:
    evaluate([WEBSHOP], "random", episodes=1, out=tmp_path / "x.json", env_kwargs=kwargs)


def _via_bundle(kwargs: dict[str, Any]) -> None:
    check_env_kwargs(WEBSHOP, kwargs, source="bundle")


@pytest.mark.parametrize("way", ["make", "cli", "config", "eval", "bundle"])
def test_every_way_in_goes_through_the_one_gate(way: str, tmp_path: Path) -> None:
    """A catalog of 10^9 products (days of work) is refused the same way everywhere, before
    anything is built."""
    calls = {
        "make": (_via_make, EnvKwargsError),
        "cli": (_via_cli, CLIError),
        "config": (_via_config, ValueError),
        "eval": (lambda kw: _via_eval(kw, tmp_path), EvalError),
        "bundle": (_via_bundle, EnvKwargsError),
    }
    call, error = calls[way]
    with pytest.raises(error) as err:
        call({"num_products": 10**9})
    assert TOO_BIG in str(err.value)
    assert not (tmp_path / "x.json").exists()


def test_settings_are_the_users_locally_but_never_a_bundles() -> None:
    kwargs = {"backend": "process", "sandbox_options": {"pool_size": 1}, "feedback_chars": 10}
    assert check_env_kwargs("agentgym/CodeExec-v0", kwargs) == kwargs
    assert split_env_kwargs("agentgym/CodeExec-v0", kwargs) == (
        {"feedback_chars": 10},
        {"backend": "process", "sandbox_options": {"pool_size": 1}},
    )
    for key in ("backend", "sandbox_options"):
        with pytest.raises(EnvKwargsError, match=f"^{key} is an execution setting") as err:
            check_env_kwargs("agentgym/CodeExec-v0", {key: kwargs[key]}, source="bundle")
        assert err.value.key == key
    with pytest.raises(EnvKwargsError, match="takes no argument 'docker_host'") as err:
        check_env_kwargs("agentgym/CodeExec-v0", {"docker_host": "tcp://x:2375"})
    assert err.value.unknown


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dim_room": (11, 6)}, "dim_room must be two ints in [3, 10]"),
        ({"num_boxes": True}, "num_boxes must be an int, got True"),
        ({"max_turns": 1.5}, "max_turns must be an int, got 1.5"),
        ({"format_penalty": 0.5}, "format_penalty must be a number <= 0, got 0.5"),
        ({"action_format": "xml"}, "action_format must be one of ['think_answer', 'answer'"),
        ({"level_file": 7}, "level_file must be a path to a file"),
        # Too large for a float, and too long to print: refused, the value cut or summarised.
        ({"format_penalty": -(10**400)}, "format_penalty must be a finite number, got -10000"),
        ({"max_turns": 10**5000}, "got an int of about 5001 digits"),
    ],
)
def test_task_parameters_are_checked_against_their_bounds(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(EnvKwargsError) as err:
        gymnasium.make("agentgym/Sokoban-v0", **kwargs)
    assert message in str(err.value)


def test_normalisation_drops_what_equals_the_default() -> None:
    assert task_defaults("agentgym/Sokoban-v0")["dim_room"] == (6, 6)
    spelled = {"dim_room": [6, 6], "max_turns": 5, "format_penalty": -0.1, "num_boxes": 2}
    assert normalise_task_kwargs("agentgym/Sokoban-v0", spelled) == {"num_boxes": 2}
    # A value the id fixes is the id itself; a bool is not the int 1.
    assert normalise_task_kwargs("agentgym/SokobanHard-v0", {"num_boxes": 2}) == {}
    assert normalise_task_kwargs("agentgym/FrozenLake-v0", {"is_slippery": False}) == {}
    with pytest.raises(EnvKwargsError):
        normalise_task_kwargs("agentgym/Sokoban-v0", {"num_boxes": True})


def test_worst_returns_worked_by_hand() -> None:
    # Sokoban-v0: 5 turns x -0.1 format penalty + 10 actions x -0.1 + 1 box off target x -1.
    assert worst_return("agentgym/Sokoban-v0") == pytest.approx(-2.5)
    # SokobanHard-v0: 10 x -0.1 + 30 x -0.1 + 2 boxes x -1.
    assert worst_return("agentgym/SokobanHard-v0") == pytest.approx(-6.0)
    # FrozenLake: only format penalties (5 turns); Bandit: one turn, both arms pay >= 0.
    assert worst_return("agentgym/FrozenLake-v0") == pytest.approx(-0.5)
    assert worst_return("agentgym/Bandit-v0") == pytest.approx(-0.1)
    assert worst_return("agentgym/Bandit-v0", {"low_arm_reward": -2.0}) == pytest.approx(-2.1)
    # Every id has one, and it is never above 0.
    for env_id in agentgym.registered_envs():
        assert worst_return(env_id) <= 0


def test_a_bundles_file_is_stat_checked_before_anything_opens_it(tmp_path: Path) -> None:
    """Locally the env names a missing file itself; from a bundle, the gate refuses a path that
    is not a small regular file without opening it (``/dev/zero`` would never end)."""
    with pytest.raises(FileNotFoundError):
        gymnasium.make("agentgym/Sokoban-v0", level_file=str(tmp_path / "missing.xsb"))
    for path, message in (
        (tmp_path / "missing.xsb", "no readable file at that path"),
        ("/dev/zero", "not a regular file"),
        (tmp_path, "not a regular file"),
    ):
        with pytest.raises(EnvKwargsError, match=message):
            check_env_kwargs("agentgym/Sokoban-v0", {"level_file": str(path)}, source="bundle")


def test_countdown_number_rule_is_a_task_parameter() -> None:
    """``number_rule`` defines the task (issue 13): a bundle may set it, the default normalises
    away, and a value outside the two rules is refused."""
    from agentgym.registration import EnvKwargsError, check_env_kwargs, normalise_task_kwargs

    check_env_kwargs("agentgym/Countdown-v0", {"number_rule": "subset"}, source="bundle")
    assert normalise_task_kwargs("agentgym/Countdown-v0", {"number_rule": "exact"}) == {}
    with pytest.raises(EnvKwargsError):
        check_env_kwargs("agentgym/Countdown-v0", {"number_rule": "any"}, source="bundle")
