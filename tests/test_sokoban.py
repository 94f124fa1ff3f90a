"""Sokoban: rules and rewards on hand-written levels, the XSB loader, the solver, the generator.

Every expected number here was worked out by hand from the rules in the module docstring of
``agentgym/envs/sokoban.py`` (step -0.1, box onto target +1, box off target -1, all boxes on
targets +10); the comments show the arithmetic.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.sokoban import EXAMPLE_LEVEL_FILE, SokobanEnv
from agentgym.envs.sokoban_generation import carve_floor, generate_room
from agentgym.envs.xsb import SokobanLevel, load_xsb, parse_level, parse_xsb
from agentgym.solvers.sokoban import ACTIONS, DELTAS, dead_cells, solve, solve_result

# Two boxes (X at (3,2) and (3,4)), two targets (O at (3,3) and (3,5)), player at (3,1).
REWARD_LEVEL = """\
#######
#     #
#     #
#@$.$.#
#     #
#######"""


def _env(**kwargs) -> SokobanEnv:
    kwargs.setdefault("action_format", "answer")
    return SokobanEnv(**kwargs)


def _answer(*actions: str) -> str:
    return "<answer>" + " || ".join(actions) + "</answer>"


def _play(env: SokobanEnv, actions: list[str]) -> list[float]:
    """One action per turn; the reward of each."""
    rewards = []
    for action in actions:
        _, reward, _, _, _ = env.step(_answer(action))
        rewards.append(reward)
    return rewards


# ---------------------------------------------------------------------------------------- rules


def test_observation_of_a_hand_written_level() -> None:
    env = _env()
    obs, info = env.reset(seed=0, options={"level": REWARD_LEVEL})
    assert obs.splitlines()[:6] == [
        "#######",
        "#_____#",
        "#_____#",
        "#PXOXO#",
        "#_____#",
        "#######",
    ]
    assert obs.splitlines()[7:] == [
        "Player: (3, 1)",
        "Boxes: (3, 2), (3, 4)",
        "Targets: (3, 3), (3, 5)",
        "Boxes on targets: 0 of 2",
    ]
    assert obs.splitlines()[6].startswith("Legend: # wall, _ floor, O target, X box, √ box on")
    assert info["level_source"] == "options" and info["optimal_num_steps"] is None
    assert info["valid_actions"] == ["Up", "Down", "Left", "Right"]


def test_rewards_push_on_push_off_and_solve_worked_by_hand() -> None:
    env = _env(max_steps=10, max_turns=5, max_actions_per_turn=5)
    env.reset(seed=0, options={"level": REWARD_LEVEL})
    # Turn 1, five actions:
    #   Right: push box A (3,2)->(3,3), a target     -0.1 + 1 = +0.9
    #   Down:  walk to (4,2)                          -0.1
    #   Right: walk to (4,3)                          -0.1
    #   Up:    push A (3,3)->(2,3), off its target    -0.1 - 1 = -1.1
    #   Right: push box B (3,4)->(3,5), a target      -0.1 + 1 = +0.9
    #   turn reward: 0.9 - 0.1 - 0.1 - 1.1 + 0.9 = 0.5
    obs, reward, terminated, truncated, info = env.step(
        _answer("Right", "Down", "Right", "Up", "Right")
    )
    assert reward == pytest.approx(0.5)
    assert not terminated and not truncated and not info["success"]
    assert info["boxes_on_target"] == 1 and info["actions_left"] == 5
    # A is at (2,3); the player stands at (3,4), left of B on its target at (3,5).
    assert obs.splitlines()[2:4] == ["#__X__#", "#__OP√#"]
    # Turn 2: Up, Up, Left (three walks, -0.3), Down pushes A (2,3)->(3,3): the last box on a
    # target, -0.1 + 1 + 10 = 10.9; turn reward 10.6, and the episode terminates.
    _, reward, terminated, truncated, info = env.step(_answer("Up", "Up", "Left", "Down"))
    assert reward == pytest.approx(10.6)
    assert terminated and not truncated and info["success"]
    assert info["executed_actions"] == ("Up", "Up", "Left", "Down")
    # Episode return 0.5 + 10.6 = 11.1 in 9 moves.


def test_solving_stops_the_turn_and_ignores_later_actions() -> None:
    env = _env()
    env.reset(options={"level": "#####\n#@$.#\n#####"})
    # Right solves at once (-0.1 + 1 + 10 = 10.9); the Left after it never executes.
    _, reward, terminated, _, info = env.step(_answer("Right", "Left"))
    assert reward == pytest.approx(10.9)
    assert terminated and info["executed_actions"] == ("Right",)


def test_wall_bump_and_blocked_push_are_valid_but_not_effective() -> None:
    env = _env()
    env.reset(options={"level": REWARD_LEVEL})
    before = env.render()
    # Left from (3,1) walks into the wall at (3,0): -0.1, nothing changes.
    _, reward, _, _, info = env.step(_answer("Left"))
    assert reward == pytest.approx(-0.1)
    assert info["action_is_valid"] and not info["action_is_effective"]
    assert info["executed_actions"] == ("Left",) and env.render() == before
    # Right pushes A onto (3,3) (+0.9); Right again would push A into B: blocked, -0.1.
    assert _play(env, ["Right", "Right"]) == pytest.approx([0.9, -0.1])
    blocked = env.render()
    _, _, _, _, info = env.step(_answer("Right"))
    assert not info["action_is_effective"] and env.render() == blocked


def test_box_against_wall_cannot_move() -> None:
    env = _env()
    env.reset(options={"level": "######\n#@ $.#\n#   ##\n######"})
    # Right, Right: push the box (1,3)->(1,4), onto the target: -0.1, then -0.1 + 1 + 10.
    assert _play(env, ["Right", "Right"]) == pytest.approx([-0.1, 10.9])
    env.reset(options={"level": "######\n#. @$#\n######"})
    # Right pushes the box into the wall at (1,5): not effective, -0.1.
    _, reward, _, _, info = env.step(_answer("Right"))
    assert reward == pytest.approx(-0.1) and not info["action_is_effective"]


def test_action_aliases_and_case() -> None:
    env = _env()
    env.reset(options={"level": REWARD_LEVEL})
    _, _, _, _, info = env.step(_answer("d", "R", "uP", " LEFT "))
    assert info["action_is_valid"]
    assert info["executed_actions"] == ("Down", "Right", "Up", "Left")


@pytest.mark.parametrize(
    "policy, reward, executed, terminated",
    [
        # The whole turn is rejected: the shared format penalty, nothing moves.
        ("penalize", -0.1, (), False),
        ("terminate", -0.1, (), True),
        # Jump is skipped, Up executes: a step's -0.1, no format penalty.
        ("noop", -0.1, ("Up",), False),
    ],
)
def test_invalid_action_policies(
    policy: str, reward: float, executed: tuple[str, ...], terminated: bool
) -> None:
    env = _env(invalid_action=policy)
    env.reset(options={"level": REWARD_LEVEL})
    before = env.render()
    _, r, term, _, info = env.step(_answer("Up", "Jump"))
    assert r == pytest.approx(reward) and term is terminated
    assert not info["action_is_valid"] and "Jump" in info["invalid_reason"]
    assert info["executed_actions"] == executed
    assert (env.render() == before) is (executed == ())


def test_truncated_when_the_step_budget_is_spent() -> None:
    env = _env(max_steps=4, max_turns=5, max_actions_per_turn=2)
    env.reset(options={"level": REWARD_LEVEL})
    _, _, terminated, truncated, _ = env.step(_answer("Left", "Left"))
    assert not terminated and not truncated
    _, reward, terminated, truncated, info = env.step(_answer("Up", "Down"))
    assert reward == pytest.approx(-0.2)
    assert truncated and not terminated and info["actions_left"] == 0


def test_reset_option_errors() -> None:
    env = _env()
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"levle": REWARD_LEVEL})
    with pytest.raises(ValueError, match="needs a level_file"):
        env.reset(options={"level_index": 0})
    with pytest.raises(ValueError, match="no player"):
        env.reset(options={"level": "####\n#$.#\n####"})
    with pytest.raises(TypeError, match="XSB text or a SokobanLevel"):
        env.reset(options={"level": 3})


def test_constructor_argument_errors() -> None:
    with pytest.raises(ValueError, match="dim_room"):
        SokobanEnv(dim_room=(2, 6))
    with pytest.raises(ValueError, match="num_boxes"):
        SokobanEnv(num_boxes=0)
    with pytest.raises(ValueError, match="too few inner cells"):
        SokobanEnv(dim_room=(3, 4), num_boxes=1)


def test_env_checker_and_observation_space() -> None:
    for env_id in ("agentgym/Sokoban-v0", "agentgym/SokobanHard-v0"):
        env = gymnasium.make(env_id).unwrapped
        check_env(env)
        for seed in range(20):
            obs, _ = env.reset(seed=seed)
            assert env.observation_space.contains(obs) and len(obs) < 8192


# ---------------------------------------------------------------------------------------- oracle


def _oracle_episode(env: SokobanEnv, seed: int) -> tuple[bool, int, int]:
    """(success, moves executed, optimal_num_steps) of one oracle episode."""
    _, info = env.reset(seed=seed)
    optimal = info["optimal_num_steps"]
    moves = 0
    while True:
        _, _, terminated, truncated, info = env.step(env.oracle_answer())
        moves += len(info["executed_actions"])
        if terminated or truncated:
            return info["success"], moves, optimal


def test_oracle_solves_every_generated_room_optimally_within_max_steps() -> None:
    env = gymnasium.make("agentgym/Sokoban-v0").unwrapped
    for seed in range(200):
        success, moves, optimal = _oracle_episode(env, seed)
        assert success, f"seed {seed}"
        assert moves == optimal <= env.max_steps, f"seed {seed}"


def test_oracle_solves_hard_rooms() -> None:
    env = gymnasium.make("agentgym/SokobanHard-v0").unwrapped
    for seed in range(60):
        success, moves, optimal = _oracle_episode(env, seed)
        assert success and moves == optimal <= 30, f"seed {seed}"


def test_oracle_gives_nothing_when_stuck_and_replans_after_a_detour() -> None:
    env = _env()
    env.reset(options={"level": REWARD_LEVEL})
    assert env.oracle_actions()  # solvable from the start
    # Down, Right, then Up, Up push A from (3,2) to (1,2), against the top wall: no push can
    # bring it down again (the player would have to stand in the wall), so nothing solves it.
    _play(env, ["Down", "Right", "Up", "Up"])
    assert env.oracle_actions() == []
    # A detour off the oracle's plan (Up is a walk away from the boxes): it replans and solves.
    env = _env(max_steps=30, max_turns=30)
    env.reset(options={"level": REWARD_LEVEL})
    assert env.oracle_actions()[0] != "Up"
    _play(env, ["Up"])
    terminated = False
    while not terminated:
        _, _, terminated, truncated, info = env.step(_answer(*env.oracle_actions()))
        assert not truncated
    assert info["success"]


# ---------------------------------------------------------------------------------------- generator


def test_same_seed_same_room_and_seeds_differ() -> None:
    a = gymnasium.make("agentgym/Sokoban-v0").unwrapped
    b = gymnasium.make("agentgym/Sokoban-v0").unwrapped
    rooms = set()
    for seed in range(10):
        obs_a, _ = a.reset(seed=seed)
        obs_b, _ = b.reset(seed=seed)
        assert obs_a == obs_b
        rooms.add(obs_a)
    assert len(rooms) >= 8
    room_a = generate_room(np.random.default_rng(7), (8, 8), 2, 30)
    room_b = generate_room(np.random.default_rng(7), (8, 8), 2, 30)
    assert room_a.level == room_b.level and room_a.optimal_num_steps == room_b.optimal_num_steps


def test_generated_rooms_are_well_formed_and_verified_by_the_forward_solver() -> None:
    rng = np.random.default_rng(0)
    for dim, boxes, steps in [((6, 6), 1, 10), ((8, 8), 2, 30), ((7, 9), 2, 20), ((5, 5), 1, 3)]:
        for _ in range(10):
            room = generate_room(rng, dim, boxes, steps, verify=True)
            level = room.level
            assert level.shape == dim and level.num_boxes == boxes
            assert level.walls[[0, -1], :].all() and level.walls[:, [0, -1]].all()
            assert not (level.boxes & level.targets).any()  # no box starts on a target
            assert 1 <= room.optimal_num_steps <= steps
            # The level survives the XSB round trip (closed room, counts, one player).
            assert parse_level(level.to_xsb()) == level


def test_carve_floor_is_connected_and_inside_the_border() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        floor = carve_floor(rng, (8, 8))
        assert not floor[[0, -1], :].any() and not floor[:, [0, -1]].any()
        start = tuple(np.argwhere(floor)[0])
        seen, stack = {start}, [start]
        while stack:
            r, c = stack.pop()
            for dr, dc in DELTAS:
                nxt = (r + dr, c + dc)
                if floor[nxt] and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        assert len(seen) == int(floor.sum())


def test_generation_that_cannot_succeed_raises_a_clear_error() -> None:
    # A 3x4 room has two inner cells: no space for a box, the player and a move.
    with pytest.raises(RuntimeError, match=r"could not generate a 3x4 room .* in 5 tries"):
        generate_room(np.random.default_rng(0), (3, 4), 1, 10, max_tries=5)
    with pytest.raises(ValueError, match="too many states"):
        generate_room(np.random.default_rng(0), (12, 12), 3, 10)


# ---------------------------------------------------------------------------------------- solver


# Optimal lengths of the shipped example levels, each checked by hand:
#   Corridor: Right (walk), Right, Right (two pushes: the box goes col 3 -> 4 -> 5)  3
#   Corner: Left, Up (push), Right, Up, Left (push)                               5
#   Two boxes: Left, Up(p), Right, Up, Left(p), Left(p), Down(p), Right, Down, Left(p)   10
#   Side step: Up(p), Left, Up, Right(p), Right(p)                                5
#   Crossing: each of the 4 boxes one push from the centre, with 3 walks back     7
#   Swap: (the + and * start on goals) 9, found by both solvers
EXAMPLE_OPTIMA = {
    "Corridor": 3,
    "Corner": 5,
    "Two boxes": 10,
    "Side step": 5,
    "Crossing": 7,
    "Swap": 9,
}


def test_solver_optimal_lengths_on_example_levels_both_methods() -> None:
    levels = load_xsb(EXAMPLE_LEVEL_FILE)
    assert [level.title for level in levels] == list(EXAMPLE_OPTIMA)
    for level in levels:
        args = (level.walls, level.targets, level.boxes, level.player)
        auto = solve_result(*args)
        hashed = solve_result(*args, method="hashed")
        assert auto.status == hashed.status == "solved"
        assert len(auto.actions) == len(hashed.actions) == EXAMPLE_OPTIMA[level.title]
        env = _env(max_steps=20, max_turns=20, max_actions_per_turn=1)
        env.reset(options={"level": level})
        for action in auto.actions:
            _, _, terminated, _, info = env.step(_answer(action))
        assert terminated and info["success"], level.title
    crossing = levels[4]
    assert crossing.num_boxes == 4 and solve_result(*_arrays(crossing)).method == "hashed"


def _arrays(level: SokobanLevel) -> tuple:
    return level.walls, level.targets, level.boxes, level.player


def test_solver_unsolvable_depth_limit_and_budget() -> None:
    # The box is against the top wall, its target below it: no push can bring it down.
    stuck = parse_level("#####\n#@$ #\n#  .#\n#####")
    assert dead_cells(~stuck.walls, stuck.targets)[1, 2]
    assert solve(*_arrays(stuck)) is None
    assert solve_result(*_arrays(stuck)).status == "no_solution"
    assert solve_result(*_arrays(stuck), method="hashed").status == "no_solution"
    two_boxes = load_xsb(EXAMPLE_LEVEL_FILE)[2]
    for method in ("bitset", "hashed"):
        assert solve_result(*_arrays(two_boxes), max_depth=9, method=method).status == "no_solution"
        assert len(solve_result(*_arrays(two_boxes), max_depth=10, method=method).actions) == 10
        tight = solve_result(*_arrays(two_boxes), max_nodes=20, method=method)
        assert tight.status == "budget_exhausted" and tight.actions is None
    solved = parse_level("####\n#@*#\n####")
    assert solve(*_arrays(solved)) == []


def test_bitset_and_hashed_solvers_agree_on_generated_rooms() -> None:
    rng = np.random.default_rng(3)
    for _ in range(15):
        level = generate_room(rng, (8, 8), 2, 30).level
        a = solve_result(*_arrays(level), method="bitset")
        b = solve_result(*_arrays(level), method="hashed")
        assert a.status == b.status == "solved" and len(a.actions) == len(b.actions)
    assert ACTIONS == ("Up", "Down", "Left", "Right")


# ---------------------------------------------------------------------------------------- XSB


def test_parse_every_symbol() -> None:
    text = """\
; Symbols
  #######
  #@$ * #
###.-_  #
#   #####
#####
; On goal
#####
#+$ #
#####"""
    first, second = parse_xsb(text)
    assert first.title == "Symbols" and first.index == 0
    assert first.player == (1, 3)
    assert first.boxes[1, 4] and first.boxes[1, 6] and first.targets[1, 6] and first.targets[2, 3]
    assert first.num_boxes == 2 and int(first.targets.sum()) == 2
    # Floor in any spelling; cells outside the walls become walls.
    assert not first.walls[2, 4] and not first.walls[2, 5] and not first.walls[3, 1]
    assert first.walls[0, 0] and first.walls[4, 4] and first.walls[1, 1]
    assert second.title == "On goal" and second.player == (1, 1) and second.targets[1, 1]
    # to_xsb writes floor as spaces and reads back to the same level.
    assert parse_level(first.to_xsb()) == first
    assert second.to_xsb() == "#####\n#+$ #\n#####"


@pytest.mark.parametrize(
    "text, message",
    [
        ("####\n#$.#\n####", r"level 0: no player"),
        ("#####\n#@@$.#\n######", r"2 players at \[\(1, 1\), \(1, 2\)\]"),
        ("#####\n#@$ #\n#####", r"1 box but 0 goals"),
        ("######\n#@$..#\n######", r"1 box but 2 goals"),
        ("#####\n#@ .#\n#####", r"no boxes"),
        ("#####\n#@$.\n#####", r"not closed: the player can walk out of the walls at row 1, col 4"),
        ("#####\n#@$.#\n# ###\n# #", r"not closed"),
        ("#####\n#@$.#\n##x##", r"unknown character 'x' at row 2, col 2 \(file line 3\)"),
        ("#####\n#@$.#\n#####\n $.", r"box at row 3, col 1 is outside"),
        ("; only a comment\n", r"the level is empty"),
        ("", r"the level is empty"),
    ],
)
def test_malformed_levels_are_rejected_with_a_named_problem(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_level(text)


def test_errors_name_the_level_and_file() -> None:
    text = "; First\n####\n#@*#\n####\n\n; Broken one\n####\n#@$#\n####\n"
    with pytest.raises(ValueError, match=r"level 1 \('Broken one'\) in my\.xsb: 1 box but 0"):
        parse_xsb(text, source="my.xsb")
    with pytest.raises(ValueError, match="no levels found in my.xsb"):
        parse_xsb("; nothing here\n\n", source="my.xsb")
    with pytest.raises(ValueError, match="expected one level, found 2"):
        parse_level("####\n#@*#\n####\n\n####\n#@*#\n####")


def test_level_files_with_a_bom_load_and_other_encodings_are_named(tmp_path) -> None:
    level = "#####\n#@$.#\n#####\n"
    bom = tmp_path / "bom.xsb"
    bom.write_bytes(b"\xef\xbb\xbf" + level.encode())  # UTF-8 with BOM (Notepad)
    assert load_xsb(bom)[0] == parse_level(level)
    utf16 = tmp_path / "utf16.xsb"
    utf16.write_text(level, encoding="utf-16")
    with pytest.raises(ValueError, match=r"utf16\.xsb is not UTF-8 text .*save it as UTF-8"):
        load_xsb(utf16)


def test_a_level_that_starts_solved_is_refused(tmp_path) -> None:
    playable = "#####\n#@*.#\n#  $#\n#####"  # one box off its goal
    _env().reset(options={"level": playable})
    done = "####\n#@*#\n####"
    with pytest.raises(ValueError, match=r"options\['level'\]: every box already stands on a goal"):
        _env().reset(options={"level": done})
    path = tmp_path / "mixed.xsb"
    path.write_text(f"; Fine\n{playable}\n\n; Done\n{done}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"level 1 of .*mixed\.xsb: every box already stands"):
        _env(level_file=path)


def test_level_file_round_trip(tmp_path) -> None:
    levels_text = """\
; A test collection
; with a header

; Alpha
#####
#@$.#
#####

; Beta
######
#.$ @#
######
; Gamma
######
#    #
#@$ .#
######
"""
    path = tmp_path / "levels.xsb"
    path.write_text(levels_text, encoding="utf-8")
    levels = load_xsb(path)
    assert [level.title for level in levels] == ["Alpha", "Beta", "Gamma"]
    env = _env(level_file=path)
    for index, level in enumerate(levels):
        obs, info = env.reset(options={"level_index": index})
        assert info["level_source"] == "file" and info["level_title"] == level.title
        assert info["level_index"] == index
        assert (
            obs.splitlines()[: level.shape[0]]
            == level.to_xsb()
            .replace("@", "P")
            .replace("$", "X")
            .replace(".", "O")
            .replace(" ", "_")
            .splitlines()
        )
        # Writing the level and reading it again gives the same level.
        assert parse_level(level.to_xsb()) == level
    # Beta: Left pushes the box onto the goal at (1,1): -0.1 + 1 + 10.
    env.reset(options={"level_index": 1})
    _, reward, terminated, _, _ = env.step(_answer("Left", "Left"))
    assert reward == pytest.approx(-0.1 + 10.9) and terminated
    # Without options, levels are drawn with np_random: reproducible per seed, all reachable.
    drawn = [env.reset(seed=seed)[1]["level_index"] for seed in range(30)]
    assert drawn == [env.reset(seed=seed)[1]["level_index"] for seed in range(30)]
    assert set(drawn) == {0, 1, 2}
    with pytest.raises(ValueError, match=r"level_index'\]=3 is out of range: .* has 3 levels"):
        env.reset(options={"level_index": 3})


def test_example_levels_are_packaged_and_load() -> None:
    env = _env(level_file=EXAMPLE_LEVEL_FILE)
    _, info = env.reset(seed=0)
    assert info["level_source"] == "file" and info["level_title"] in EXAMPLE_OPTIMA
    assert SokobanEnv.__module__ == "agentgym.envs.sokoban"


def test_xsb_metadata_lines_of_common_collections_are_read():
    """``Title:``/``Author:`` lines (as in published .sok/.xsb collections) separate levels, and a
    Title names the level it follows."""
    from agentgym.envs.xsb import parse_xsb

    text = "#####\n#@$.#\n#####\nTitle: Easy\nAuthor: me\n\n#####\n#.$@#\n#####\nTitle: Back\n"
    levels = parse_xsb(text)
    assert [(lv.index, lv.title, lv.shape) for lv in levels] == [
        (0, "Easy", (3, 5)),
        (1, "Back", (3, 5)),
    ]
    assert levels[0].player == (1, 1) and levels[1].player == (1, 3)
