"""FrozenLake-v0 / FrozenLakeSlippery-v0 and their solvers (agentgym/envs/frozen_lake.py,
agentgym/solvers/frozen_lake.py). Expected values are worked out by hand in the comments."""

from __future__ import annotations

from collections import Counter

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.frozen_lake import FrozenLakeEnv, generate_random_map
from agentgym.solvers.frozen_lake import ACTIONS, shortest_path, slip_outcomes, value_iteration

# A detour map: the goal is 3 tiles from the start as the crow flies, but the holes in column 1
# force the walk down column 0, along row 3, up column 2 and right: 3 + 2 + 3 + 1 = 9 moves.
DETOUR = ("SHFG", "FHFH", "FHFF", "FFFH")
DETOUR_PATH = ["Down"] * 3 + ["Right"] * 2 + ["Up"] * 3 + ["Right"]


def _answer(*actions: str) -> str:
    return "<think>t</think><answer>" + " || ".join(actions) + "</answer>"


# ---------------------------------------------------------------- solvers


def test_shortest_path_on_hand_map():
    path = shortest_path(DETOUR)
    assert path is not None and len(path) == 9
    assert [ACTIONS[a] for a in path] == DETOUR_PATH


def test_shortest_path_none_when_walled_off():
    assert shortest_path(("SH", "HG")) is None
    assert shortest_path(("SG",)) == [2]  # one step Right


def test_slip_outcomes_are_the_move_and_both_perpendiculars():
    # Gymnasium's rule: (a - 1) % 4, a, (a + 1) % 4 with 0 Left, 1 Down, 2 Right, 3 Up.
    assert [ACTIONS[a] for a in slip_outcomes(ACTIONS.index("Up"))] == ["Right", "Up", "Left"]
    assert [ACTIONS[a] for a in slip_outcomes(ACTIONS.index("Left"))] == ["Up", "Left", "Down"]


def test_value_iteration_finite_horizon_on_two_tiles():
    # "SG" on slippery ice: Right reaches G with prob 1/3 (Up and Down bump the border), so the
    # best probability of reaching G within h moves is 1 - (2/3)^h.
    for h in range(1, 6):
        values, _ = value_iteration(("SG",), slippery=True, horizon=h)
        assert values[0, 0] == pytest.approx(1 - (2 / 3) ** h)
    values, _ = value_iteration(("SG",), slippery=True, horizon=0)
    assert values[0, 0] == 0.0


def test_value_iteration_discounted_on_two_tiles():
    # V = 1/3 + (2/3) * 0.9 * V  =>  V = (1/3) / 0.4 = 5/6; Left only bumps borders: Q = 0.9 * V.
    values, q = value_iteration(("SG",), slippery=True, gamma=0.9)
    assert values[0, 0] == pytest.approx(5 / 6)
    assert q[0, 0, ACTIONS.index("Left")] == pytest.approx(0.75)
    assert q[0, 0, ACTIONS.index("Right")] == pytest.approx(5 / 6)


def test_value_iteration_prefers_the_safe_slippery_move():
    # S F      From S, Right or Down risk the hole (1/3); Up slides Right, Up or Left: never into H.
    # H G      With gamma = 1: V(F) = V(S) = 1 (G is reached surely, in time); Q(S, Right) =
    # 1/3 * 0 (H) + 1/3 * V(F) + 1/3 * V(S) = 2/3; likewise Left and Down; Q(S, Up) = 1.
    values, q = value_iteration(("SF", "HG"), slippery=True)
    assert values[0, 0] == pytest.approx(1.0)
    assert values[0, 1] == pytest.approx(1.0)
    assert q[0, 0] == pytest.approx([2 / 3, 2 / 3, 2 / 3, 1.0])
    assert values[1, 0] == values[1, 1] == 0.0  # terminal tiles


def test_value_iteration_deterministic_discounted():
    # Firm ice, gamma 0.9: V(F) = 1 (Down into G), V(S) = 0.9 (Right, then Down);
    # Q(S, Down) = 0 (the hole), Q(S, Left) = Q(S, Up) = 0.9 * V(S) = 0.81.
    values, q = value_iteration(("SF", "HG"), slippery=False, gamma=0.9)
    assert values[0, 1] == pytest.approx(1.0)
    assert values[0, 0] == pytest.approx(0.9)
    assert q[0, 0] == pytest.approx([0.81, 0.0, 0.9, 0.81])


def test_value_iteration_rejects_bad_arguments():
    with pytest.raises(ValueError, match="gamma"):
        value_iteration(("SG",), slippery=True, gamma=0.0)
    with pytest.raises(ValueError, match="horizon"):
        value_iteration(("SG",), slippery=True, horizon=-1)


# ---------------------------------------------------------------- map generation


def test_random_maps_are_valid_reproducible_and_varied():
    maps = set()
    for seed in range(200):
        desc = generate_random_map(4, 0.8, np.random.default_rng(seed))
        assert desc == generate_random_map(4, 0.8, np.random.default_rng(seed))
        assert len(desc) == 4 and all(len(row) == 4 for row in desc)
        letters = "".join(desc)
        assert letters.count("S") == 1 and letters.count("G") == 1
        assert set(letters) <= set("SFHG")
        assert shortest_path(desc) is not None
        maps.add(desc)
    assert len(maps) > 190


def test_hole_rate_is_near_one_minus_p():
    # Tiles other than S and G are holes with probability 0.2, before the connectivity filter;
    # the filter removes some hole-heavy maps, so the kept rate lies a little below 0.2.
    rng = np.random.default_rng(123)
    letters = "".join("".join(generate_random_map(6, 0.8, rng)) for _ in range(300))
    rate = letters.count("H") / (len(letters) - 2 * 300)
    assert 0.14 < rate < 0.21


def test_same_seed_same_map_through_the_env():
    env = gymnasium.make("agentgym/FrozenLake-v0")
    first = env.reset(seed=7)
    second = env.reset(seed=7)
    assert first[0] == second[0] and first[1]["map"] == second[1]["map"]


# ---------------------------------------------------------------- the environment


def test_observation_symbols_on_hand_map():
    env = FrozenLakeEnv(desc=DETOUR)
    obs, info = env.reset(seed=0)
    assert obs == (
        "P O _ G\n_ O _ O\n_ O _ _\n_ _ _ O\n"
        "Player position: row 0, column 0 (rows and columns count from 0 at the top left)."
    )
    assert info["map"] == DETOUR and info["position"] == (0, 0)
    assert info["valid_actions"] == ["Left", "Down", "Right", "Up"]


def test_walking_the_shortest_path_reaches_the_goal():
    env = FrozenLakeEnv(desc=DETOUR, max_turns=3, max_actions_per_turn=3)
    env.reset(seed=0)
    total = 0.0
    for turn in range(3):
        obs, reward, terminated, truncated, info = env.step(
            _answer(*DETOUR_PATH[3 * turn : 3 * turn + 3])
        )
        total += reward
    assert total == 1.0 and terminated and not truncated and info["success"]
    assert obs.splitlines()[0] == "_ O _ √"
    assert info["position"] == (0, 3)


def test_hole_terminates_with_zero_and_stops_the_turn():
    env = FrozenLakeEnv(desc=DETOUR)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(_answer("right", "Down"))
    assert reward == 0.0 and terminated and not truncated and not info["success"]
    assert info["executed_actions"] == ("Right",)  # the second move never happens
    assert obs.splitlines()[0] == "_ X _ G"


def test_border_move_is_valid_but_not_effective():
    env = FrozenLakeEnv(desc=DETOUR)
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(_answer("UP", "left"))
    assert info["action_is_valid"] and not info["action_is_effective"]
    assert reward == 0.0 and obs == obs0 and not terminated


def test_unknown_action_is_penalised_and_changes_nothing():
    env = FrozenLakeEnv(desc=DETOUR)
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(_answer("Down", "Jump"))
    assert not info["action_is_valid"] and reward == pytest.approx(-0.1)
    assert obs == obs0 and info["executed_actions"] == ()


def test_time_limit_truncates():
    env = FrozenLakeEnv(desc=DETOUR, max_turns=1, max_actions_per_turn=1)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step(_answer("Down"))
    assert reward == 0.0 and truncated and not terminated


def test_slippery_moves_split_a_third_each():
    # From the centre of an open 3x3 lake, Up goes Up, Left or Right with probability 1/3 each;
    # 3000 seeded draws: standard error sqrt(2/9 / 3000) ~ 0.0086, so 0.03 is 3.5 of them.
    env = FrozenLakeEnv(desc=("FFF", "FSF", "FFG"), is_slippery=True)
    outcomes: Counter[tuple[int, int]] = Counter()
    for seed in range(3000):
        env.reset(seed=seed)
        env.step(_answer("Up"))
        outcomes[env.position] += 1
    assert set(outcomes) == {(0, 1), (1, 0), (1, 2)}
    for count in outcomes.values():
        assert abs(count / 3000 - 1 / 3) < 0.03


def test_oracle_solves_200_seeds_of_firm_ice_by_shortest_paths():
    env = gymnasium.make("agentgym/FrozenLake-v0")
    for seed in range(200):
        _, info = env.reset(seed=seed)
        optimum = len(shortest_path(info["map"]))
        total, moves, done = 0.0, 0, False
        while not done:
            _, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_answer())
            total += reward
            moves += len(info["executed_actions"])
            done = terminated or truncated
        assert info["success"] and terminated and total == 1.0, seed
        assert moves == optimum, seed


def test_slippery_oracle_success_rate_matches_value_iteration():
    # The oracle plays one move per turn, greedily on the finite-horizon values, so its chance of
    # success from the start is exactly V_10(start) (10 turns). Over 300 seeded episodes the mean
    # success must match the mean of those exact probabilities (standard error <= 0.029).
    env = gymnasium.make("agentgym/FrozenLakeSlippery-v0")
    predicted, achieved = [], []
    for seed in range(300):
        _, info = env.reset(seed=seed)
        values, _ = value_iteration(info["map"], slippery=True, horizon=10)
        predicted.append(values[info["position"]])
        done = False
        while not done:
            answer = env.unwrapped.oracle_answer()
            assert answer.count("||") == 0  # one move per turn on slippery ice
            _, _, terminated, truncated, info = env.step(answer)
            done = terminated or truncated
        achieved.append(info["success"])
    assert abs(np.mean(achieved) - np.mean(predicted)) < 0.09
    assert 0.3 < np.mean(predicted) < 0.7  # slippery 4x4 lakes in 10 moves: 0.476 on these seeds


def test_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        FrozenLakeEnv(size=1)
    with pytest.raises(ValueError, match="p "):
        FrozenLakeEnv(p=0.0)
    with pytest.raises(ValueError, match="same length"):
        FrozenLakeEnv(desc=("SF", "G"))
    with pytest.raises(ValueError, match="exactly one S"):
        FrozenLakeEnv(desc=("FF", "FG"))
    with pytest.raises(ValueError, match="letters"):
        FrozenLakeEnv(desc=("SX", "FG"))


@pytest.mark.parametrize("env_id", ["agentgym/FrozenLake-v0", "agentgym/FrozenLakeSlippery-v0"])
def test_gymnasium_check_env(env_id):
    check_env(gymnasium.make(env_id).unwrapped)
