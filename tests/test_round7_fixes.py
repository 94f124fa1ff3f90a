"""The fixes of round 7's reward, registry and leaderboard findings, beyond the attacks' own tests
(tests/test_attacks_round7.py): values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.registration import normalise_task_kwargs, registered_envs, worst_return
from leaderboards.__main__ import main
from leaderboards.verify import actions_digest, executed_record
from tests.helpers import quiet_eval


def _answer(expression: str) -> str:
    return f"<think>t</think><answer>{expression}</answer>"


def test_countdown_pays_the_format_score_once() -> None:
    """Numbers [100, 4, 8, 2], target 24: three wrong expressions over the given numbers score
    0.1 each, paid once (0.1, 0, 0); a wrong-number answer then scores 0 and pays 0."""
    env = gymnasium.make("agentgym/Countdown-v0", max_turns=4)
    env.reset(seed=0, options={"numbers": [100, 4, 8, 2], "target": 24})
    rewards, scores = [], []
    for expression in ("100 - 4 - 8 * 2", "100 + 4 + 8 + 2", "100 * 4 - 8 - 2", "1 + 1"):
        _, reward, _, _, info = env.step(_answer(expression))
        rewards.append(reward)
        scores.append(info["score"])
    assert rewards == [pytest.approx(0.1), 0.0, 0.0, 0.0]
    assert scores == [pytest.approx(0.1)] * 3 + [0.0]
    env.close()


def test_a_none_default_is_compared_as_the_value_it_stands_for() -> None:
    """FrozenLake-v0: 5 turns of 3 actions, so max_steps None means 15; with max_turns=3, 9.
    Sokoban-v0's default is 10 while None means 5 x 5 = 25, so None is kept, as 25; with 2
    turns None means 10, the default. Math's task_config None and {} are reasoning-gym's
    defaults."""
    assert normalise_task_kwargs("agentgym/FrozenLake-v0", {"max_steps": 15}) == {}
    assert normalise_task_kwargs("agentgym/FrozenLake-v0", {"max_steps": 14}) == {"max_steps": 14}
    spelled = {"max_turns": 3, "max_steps": 9}
    assert normalise_task_kwargs("agentgym/FrozenLake-v0", spelled) == {"max_turns": 3}
    assert normalise_task_kwargs("agentgym/Sokoban-v0", {"max_steps": None}) == {"max_steps": 25}
    both = {"max_steps": None, "max_turns": 2}
    assert normalise_task_kwargs("agentgym/Sokoban-v0", both) == {"max_turns": 2}
    assert normalise_task_kwargs("agentgym/Math-v0", {"task_config": {}}) == {}
    assert normalise_task_kwargs("agentgym/Countdown-v0", {"max_steps": 1}) == {}
    # Sokoban's worst return with max_steps=None: 5 turns x -0.1, 25 steps x -0.1, 1 box -1
    assert worst_return("agentgym/Sokoban-v0", {"max_steps": None}) == pytest.approx(-4.0)


def test_raw_miniwob_rewards_lower_the_worst_return_by_one() -> None:
    """10 turns x -0.1 format penalty, plus the page's -1 with reward_mode="raw"."""
    for env_id, entry in registered_envs().items():
        if entry.entry_point.endswith("MiniWoBEnv"):
            assert worst_return(env_id) == pytest.approx(-1.0), env_id
            assert worst_return(env_id, {"reward_mode": "raw"}) == pytest.approx(-2.0), env_id


def test_executed_records_ignore_think_text_and_spacing() -> None:
    frozen = {"action_is_valid": True, "executed_actions": ("Right", "Down")}
    one = executed_record("<think>a</think><answer>Right || Down</answer>", frozen)
    two = executed_record("<think>b</think><answer>Right||Down</answer>", frozen)
    assert one == two == [True, ["Right", "Down"]]
    # CodeExec's names do not tell two programs apart: the parsed pieces do
    code = {"action_is_valid": True, "executed_actions": ("code (8 chars)",)}
    first = executed_record("", {**code, "actions": ("return 1",)}, opaque_names=True)
    second = executed_record("", {**code, "actions": ("return 2",)}, opaque_names=True)
    assert actions_digest([first]) != actions_digest([second])
    assert registered_envs()["agentgym/CodeExec-v2"].opaque_action_names
    # an env without executed_actions: the text itself
    assert executed_record("x", {}) == ["text", "x"]


def test_a_bundle_with_per_episode_payouts_is_refused_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    env_kwargs = {"payout_draws": "per_episode"}
    quiet_eval("agentgym/Bandit-v0", "oracle", episodes=8, out=out, env_kwargs=env_kwargs)
    assert json.loads(out.read_text())["runs"][0]["env_kwargs"] == env_kwargs
    capsys.readouterr()
    assert main(["submit", str(out), "--name", "x", "--db", str(tmp_path / "db.sqlite")]) == 1
    err = capsys.readouterr().err
    assert "payout_draws: 'per_episode'" in err and "payout_draws='seeded'" in err


def test_free_form_fields_over_the_limit_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    bundle = quiet_eval("agentgym/Bandit-v0", "oracle", episodes=8, out=out)
    bundle = json.loads(json.dumps(bundle))
    bundle["agent"]["settings"] = {"pad": "x" * (4 * 2**20)}  # 4 MiB and a few bytes, alone
    out.write_text(json.dumps(bundle), encoding="utf-8")
    capsys.readouterr()
    assert main(["submit", str(out), "--name", "x", "--db", str(tmp_path / "db.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "over the limit of 4,194,304 bytes (4 MiB)" in err and "agent/settings" in err
    bundle["agent"]["settings"] = {f"k{i}": 0 for i in range(257)}
    out.write_text(json.dumps(bundle), encoding="utf-8")
    assert main(["submit", str(out), "--name", "x", "--db", str(tmp_path / "db.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "agent/settings: it has 257 keys, over the limit of 256 (maxProperties)" in err
    assert not (tmp_path / "db.sqlite").exists()
