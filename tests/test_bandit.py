"""Bandit-v0's success rule and oracle under arm settings that make either arm the better one.

Expected payouts (module docstring): ``E[safe] = low_arm_reward``, ``E[risky] = high_arm_prob *
high_arm_reward``. Seed 0 lists the arms as (Nurse, Stuntman): Nurse is the safe arm, Stuntman the
risky one (tests/golden/ pins that order).

Then the payout draws (``payout_draws``: ``"seeded"`` shares one draw per reset seed, so per GRPO
group; ``"per_episode"`` draws each episode apart, reproducibly) and RAGEN's settings
(``RAGEN_KWARGS``), issue 44 item 2.
"""

from __future__ import annotations

import re
import subprocess
import sys

import gymnasium
import numpy as np
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.bandit import (
    HELDOUT_NAME_PAIRS,
    RAGEN_KWARGS,
    RAGEN_TEST_NAME_PAIRS,
    RAGEN_TRAIN_NAME_PAIRS,
    TRAIN_NAME_PAIRS,
    BanditEnv,
)


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


# --- payout draws, RAGEN's settings (issue 44, item 2) ---------------------------------------
#
# "per_episode" draws the k-th pull-generator of seed s as
# numpy.random.default_rng(SeedSequence(s, spawn_key=(k,))); its first uniform decides the risky
# payout (< high_arm_prob pays). Hand-read first uniforms (printed once with numpy):
#   seed 0: k=0..5 -> 0.943, 0.677, 0.838, 0.364, 0.653, 0.262 (none < 0.25, so 0 each);
#           of k = 0..63 exactly 12 are < 0.25: k = 6, 11, 13, 18, 19, 26, 38, 42, 45, 59, 61, 62;
#   seed 3: k=0..3 -> 0.5414, 0.1003, 0.0556, 0.3726; seed 4: k=0 -> 0.9035.

SEED0_PAYING_DRAWS = [6, 11, 13, 18, 19, 26, 38, 42, 45, 59, 61, 62]


@pytest.fixture(autouse=True)
def _fresh_draw_counts():
    BanditEnv.clear_payout_draw_counts()
    yield
    BanditEnv.clear_payout_draw_counts()


def _group(seed: int, size: int, **kwargs) -> tuple[list[float], set[str], list[dict]]:
    """``size`` fresh envs (as the trainer makes them) reset with one seed, each pulling the
    risky arm: (rewards, the distinct observations, the reset infos)."""
    rewards, observations, infos = [], set(), []
    for _ in range(size):
        env = gymnasium.make("agentgym/Bandit-v0", action_format="raw", **kwargs)
        obs, info = env.reset(seed=seed)
        observations.add(obs)
        infos.append(info)
        rewards.append(float(env.step(env.unwrapped.risky_arm)[1]))
        env.close()
    return rewards, observations, infos


def test_seeded_group_shares_one_payout_draw() -> None:
    # Default "seeded": seed 0's risky pull pays 1 (test_default_settings_...), so all 8 do.
    rewards, observations, infos = _group(0, 8)
    assert rewards == [1.0] * 8
    assert len(observations) == 1
    assert all("payout_draw" not in info for info in infos)  # default info unchanged


def test_per_episode_group_draws_independently_and_shares_the_prompt() -> None:
    rewards, observations, infos = _group(0, 64, payout_draws="per_episode")
    assert len(observations) == 1  # names and order still come from the reset seed
    assert observations.pop().endswith("Arm 1: Nurse\nArm 2: Stuntman")
    assert [info["payout_draw"] for info in infos] == list(range(64))
    # Binomial(64, 0.25): mean 16, sd 3.46; its central 99.9 % interval is [6, 28].
    paid = sum(r == 1.0 for r in rewards)
    assert 6 <= paid <= 28
    assert set(rewards) == {0.0, 1.0}  # not all identical
    # Hand-read: exactly the 12 draw indices whose first uniform is < 0.25 pay.
    assert [k for k, r in enumerate(rewards) if r == 1.0] == SEED0_PAYING_DRAWS


def test_per_episode_draws_match_the_documented_generator() -> None:
    env = gymnasium.make("agentgym/Bandit-v0", action_format="raw", payout_draws="per_episode")
    got = []
    for seed in (3, 3, 3, 4, 3):
        _, info = env.reset(seed=seed)
        k = info["payout_draw"]
        reward = env.step(env.unwrapped.risky_arm)[1]
        uniform = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,))).random()
        assert reward == (1.0 if uniform < 0.25 else 0.0)
        got.append((seed, k, reward))
    env.close()
    # Hand-read uniforms: (3,0) 0.5414, (3,1) 0.1003, (3,2) 0.0556, (4,0) 0.9035, (3,3) 0.3726.
    assert got == [(3, 0, 0.0), (3, 1, 1.0), (3, 2, 1.0), (4, 0, 0.0), (3, 3, 0.0)]


def _sequence(make_each: bool) -> list[float]:
    out, env = [], None
    for seed in (3, 3, 3, 4, 3):
        if env is None or make_each:
            env = gymnasium.make(
                "agentgym/Bandit-v0", action_format="raw", payout_draws="per_episode"
            )
        env.reset(seed=seed)
        out.append(float(env.step(env.unwrapped.risky_arm)[1]))
    return out


def test_per_episode_is_reproducible_in_process_across_instances_and_processes() -> None:
    first = _sequence(make_each=False)
    assert _sequence(make_each=False) != first  # counts go on: (3,3..5),(4,1),(3,6)
    BanditEnv.clear_payout_draw_counts()
    assert _sequence(make_each=True) == first  # any instances, same order of resets
    assert first == [0.0, 1.0, 1.0, 0.0, 0.0]
    code = (
        "import gymnasium, agentgym\n"
        "out = []\n"
        "env = gymnasium.make('agentgym/Bandit-v0', action_format='raw', "
        "payout_draws='per_episode')\n"
        "for s in (3, 3, 3, 4, 3):\n"
        "    env.reset(seed=s)\n"
        "    out.append(float(env.step(env.unwrapped.risky_arm)[1]))\n"
        "print(out)\n"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert fresh.stdout.strip() == str(first)


def test_payout_draw_option_replays_an_episode() -> None:
    rewards, _, infos = _group(0, 20, payout_draws="per_episode")
    env = gymnasium.make("agentgym/Bandit-v0", action_format="raw", payout_draws="per_episode")
    for k in (0, 6, 11, 19):
        _, info = env.reset(seed=0, options={"payout_draw": k})
        assert info["payout_draw"] == k == infos[k]["payout_draw"]
        assert env.step(env.unwrapped.risky_arm)[1] == rewards[k]
    # An explicit index does not advance the count: the next plain reset of seed 0 is k = 20.
    assert env.reset(seed=0)[1]["payout_draw"] == 20
    env.close()


def test_per_episode_without_a_seed_draws_from_np_random() -> None:
    env = gymnasium.make("agentgym/Bandit-v0", action_format="raw", payout_draws="per_episode")
    env.reset(seed=5)
    _, info = env.reset()  # continues the seeded stream: no draw index
    assert "payout_draw" not in info
    assert env.step(env.unwrapped.risky_arm)[1] in (0.0, 1.0)
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "options", "fix"),
    [
        ({"payout_draws": "independent"}, None, "payout_draws='per_episode'"),
        # the registry's gate refuses it first: payout_draws is a task parameter
        ({"payout_draws": "shared"}, None, "payout_draws must be one of ['seeded', 'per_episode']"),
        ({"name_set": "RAGEN"}, None, "name_set='ragen'"),
        ({}, {"payout_draw": 1}, "applies only with payout_draws='per_episode'"),
        ({"payout_draws": "per_episode"}, {"payout_draw": -1}, "must be an int >= 0"),
        ({"payout_draws": "per_episode"}, {"payout_draw": 1.5}, "must be an int >= 0"),
        ({"payout_draws": "per_episode"}, {"payout_draw": True}, "must be an int >= 0"),
    ],
)
def test_bad_settings_name_the_fix(kwargs: dict, options: dict | None, fix: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fix)):
        env = gymnasium.make("agentgym/Bandit-v0", **kwargs)
        env.reset(seed=0, options=options)


def test_payout_draw_needs_a_seed() -> None:
    env = gymnasium.make("agentgym/Bandit-v0", payout_draws="per_episode")
    with pytest.raises(ValueError, match=re.escape("needs a reset seed")):
        env.reset(options={"payout_draw": 0})
    env.close()


def test_ragen_settings() -> None:
    # RAGEN (mll-lab-nu/RAGEN@20daedc, ragen/env/bandit/config.py:8-41): safe 0.1, risky 1.0
    # with probability 0.25 else 0.0, 12 train and 8 test name pairs, per-episode draws.
    assert RAGEN_KWARGS == {
        "name_set": "ragen",
        "low_arm_reward": 0.1,
        "high_arm_reward": 1.0,
        "high_arm_prob": 0.25,
        "payout_draws": "per_episode",
    }
    assert len(RAGEN_TRAIN_NAME_PAIRS) == 12 and len(RAGEN_TEST_NAME_PAIRS) == 8
    assert RAGEN_TRAIN_NAME_PAIRS[0] == ("Teacher", "Trader")
    assert RAGEN_TEST_NAME_PAIRS[-1] == ("CivilServant", "StartupAccelerator")
    train = {n for p in RAGEN_TRAIN_NAME_PAIRS for n in p}
    test = {n for p in RAGEN_TEST_NAME_PAIRS for n in p}
    assert not train & test and len(train) == 24 and len(test) == 16
    for env_id, pairs in (
        ("agentgym/Bandit-v0", RAGEN_TRAIN_NAME_PAIRS),
        ("agentgym/BanditHeldOut-v0", RAGEN_TEST_NAME_PAIRS),
    ):
        env = gymnasium.make(env_id, action_format="raw", **RAGEN_KWARGS)
        assert env.unwrapped.expected_payouts == pytest.approx((0.1, 0.25))
        assert env.unwrapped.risky_is_best
        seen = set()
        for seed in range(200):
            env.reset(seed=seed)
            u = env.unwrapped
            seen.add((u.safe_arm, u.risky_arm))
            assert u.best_arm == u.risky_arm
        assert seen == set(pairs)  # every pair drawn, no other
        env.reset(seed=0)
        assert env.step(env.unwrapped.safe_arm)[1] == pytest.approx(0.1)
        env.close()


def test_default_name_sets_are_unchanged() -> None:
    env = gymnasium.make("agentgym/Bandit-v0")
    assert env.unwrapped.name_set == "agentgym" and env.unwrapped.payout_draws == "seeded"
    seen = set()
    for seed in range(100):
        env.reset(seed=seed)
        seen.add((env.unwrapped.safe_arm, env.unwrapped.risky_arm))
    assert seen == set(TRAIN_NAME_PAIRS)
    env.close()
    assert len(HELDOUT_NAME_PAIRS) == 3
