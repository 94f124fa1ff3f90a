"""Bandit-v0's success rule and oracle under arm settings that make either arm the better one.

Expected payouts (module docstring): ``E[safe] = low_arm_reward``, ``E[risky] = high_arm_prob *
high_arm_reward``. Seed 0 lists the arms as (Nurse, Stuntman): Nurse is the safe arm, Stuntman the
risky one (tests/golden/ pins that order).
"""

from __future__ import annotations

import gymnasium
import pytest

import agentgym  # noqa: F401  (registers the ids)


def _play(action: str, **kwargs: float) -> tuple[float, bool]:
    env = gymnasium.make("agentgym/Bandit-v0", action_format="raw", **kwargs)
    obs, _ = env.reset(seed=0)
    assert obs.endswith("Arm 1: Nurse\nArm 2: Stuntman")
    _, reward, terminated, _, info = env.step(action)
    env.close()
    assert terminated
    return float(reward), bool(info["success"])


def _oracle(**kwargs: float) -> list[str]:
    env = gymnasium.make("agentgym/Bandit-v0", **kwargs)
    env.reset(seed=0)
    actions = env.unwrapped.oracle_actions()
    env.close()
    return actions


def test_safe_arm_wins_when_the_risky_arm_rarely_pays() -> None:
    # high_arm_prob=0.05: E[risky] = 0.05 * 1.0 = 0.05 < E[safe] = 0.15.
    env = gymnasium.make("agentgym/Bandit-v0", high_arm_prob=0.05)
    assert env.unwrapped.expected_payouts == pytest.approx((0.15, 0.05))
    assert not env.unwrapped.risky_is_best
    env.close()
    assert _oracle(high_arm_prob=0.05) == ["Nurse"]
    assert _play("Nurse", high_arm_prob=0.05) == (0.15, True)
    reward, success = _play("Stuntman", high_arm_prob=0.05)
    assert reward in (0.0, 1.0) and not success


def test_default_settings_keep_the_risky_arm_best() -> None:
    # Defaults: E[risky] = 0.25 * 1.0 = 0.25 > E[safe] = 0.15; seed 0's risky pull pays 1.
    assert _oracle() == ["Stuntman"]
    assert _play("Stuntman") == (1.0, True)
    assert _play("Nurse") == (0.15, False)


def test_tie_counts_both_arms_and_the_oracle_pulls_the_safe_one() -> None:
    # high_arm_prob=0.5, high_arm_reward=0.3: E[risky] = 0.15 = E[safe].
    kw = {"high_arm_prob": 0.5, "high_arm_reward": 0.3}
    assert _oracle(**kw) == ["Nurse"]
    assert _play("Nurse", **kw) == (0.15, True)
    assert _play("Stuntman", **kw)[1]


def test_negative_safe_payout_makes_a_never_paying_risky_arm_best() -> None:
    # low_arm_reward=-1, high_arm_prob=0: E[risky] = 0 > E[safe] = -1; the risky arm pays 0.
    kw = {"low_arm_reward": -1.0, "high_arm_prob": 0.0}
    assert _oracle(**kw) == ["Stuntman"]
    assert _play("Stuntman", **kw) == (0.0, True)
    assert _play("Nurse", **kw) == (-1.0, False)
