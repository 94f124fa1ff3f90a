"""Sokoban-v0: push every box onto a target in a small room (RAGEN's Sokoban, as text).

* Observation: the room as a symbol grid (RAGEN's symbols: ``#`` wall, ``_`` floor, ``O`` target,
  ``X`` box, ``√`` box on target, ``P`` player, ``S`` player on target), a one-line legend, and the
  coordinates ``(row, col)``, from 0 at the top left, of the player, the boxes and the targets.
* Actions: ``Up``, ``Down``, ``Left``, ``Right``, case-insensitive; the one-letter forms ``U``,
  ``D``, ``L``, ``R`` are accepted too (canonical names are reported in ``executed_actions``). Up
  decreases the row. Walking into a box pushes it one cell if the cell behind it is floor or a
  target; a move into a wall, or into a box that cannot move, is a valid action that changes
  nothing (``action_is_effective`` is False) and still costs the step penalty.
* Reward per action (RAGEN / gym-sokoban): -0.1 per step; +1 for pushing a box onto a target; -1
  for pushing a box off a target; +10 when the last box reaches its target, which ends the episode
  (``terminated=True``, ``success=True``). Invalid turns get the shared format penalty.
* Limits: ``max_steps`` actions (default 10) over ``max_turns`` turns (default 5), at most
  ``max_actions_per_turn`` (default 5) per turn; running out truncates the episode.
* Rooms: generated from ``self.np_random`` (:mod:`agentgym.envs.sokoban_generation`), each proved
  solvable within ``max_steps`` moves; or drawn from an XSB ``level_file``; or given per episode
  by ``reset(options={"level": xsb_text})``. ``reset`` options: ``level`` (XSB text or a
  :class:`~agentgym.envs.xsb.SokobanLevel`), ``level_index`` (an index into ``level_file``).
* Oracle: :meth:`SokobanEnv.oracle_actions` plays an optimal solution (BFS,
  :mod:`agentgym.solvers.sokoban`).

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Sokoban-v0").unwrapped
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(env.oracle_answer())
    >>> info["success"]
    True

Sources: RAGEN (observation symbols, instructions, rewards and budgets of its Sokoban environment);
gym-sokoban (Schrader 2018) for the rules, rewards and room generation.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.sokoban_generation import generate_room
from agentgym.envs.xsb import SokobanLevel, load_xsb, parse_level
from agentgym.solvers.sokoban import ACTIONS, DELTAS, solve_result
from agentgym.text_env import ActionOutcome, TextEnv

__all__ = [
    "SokobanEnv",
    "EXAMPLE_LEVEL_FILE",
    "SYMBOLS",
    "STEP_REWARD",
    "BOX_ON_TARGET_REWARD",
    "BOX_OFF_TARGET_REWARD",
    "SOLVED_REWARD",
]

#: Reward of every executed action.
STEP_REWARD = -0.1
#: Added when a push puts a box onto a target.
BOX_ON_TARGET_REWARD = 1.0
#: Added when a push takes a box off a target.
BOX_OFF_TARGET_REWARD = -1.0
#: Added when every box is on a target (the episode then terminates).
SOLVED_REWARD = 10.0

#: Grid symbols (RAGEN's).
SYMBOLS: dict[str, str] = {
    "wall": "#",
    "floor": "_",
    "target": "O",
    "box": "X",
    "box_on_target": "√",
    "player": "P",
    "player_on_target": "S",
}
_LEGEND = (
    "Legend: # wall, _ floor, O target, X box, √ box on target, P you, S you on a target. "
    "Coordinates are (row, col) from 0 at the top left."
)
_ALIASES: dict[str, int] = {
    name: d for d, full in enumerate(ACTIONS) for name in (full.casefold(), full[0].casefold())
}
_RESET_OPTIONS = ("level", "level_index")


def _check_unsolved(level: SokobanLevel, what: str) -> None:
    """Raise ``ValueError`` for a level whose boxes all start on goals: an episode would be won
    before the first move (the XSB parser accepts such states: they are valid positions)."""
    _walls, targets, boxes, _player = level.state_arrays()
    if not (boxes & ~targets).any():
        raise ValueError(
            f"{what}: every box already stands on a goal ('*'), so the episode would start "
            "solved; use a level with at least one box ('$') off its goal"
        )


#: The small hand-made levels shipped with the package (``level_file=EXAMPLE_LEVEL_FILE``).
EXAMPLE_LEVEL_FILE = Path(__file__).resolve().parent.parent / "levels" / "example.xsb"
#: Node budget of the oracle's search (bounded even on large XSB levels).
ORACLE_MAX_NODES = 500_000


class SokobanEnv(TextEnv):
    """Sokoban as a text environment (see the module docstring for observation, actions, reward).

    Args:
        dim_room: ``(H, W)`` of generated rooms, border walls included (default ``(6, 6)``).
        num_boxes: boxes in generated rooms (default 1).
        max_steps: actions per episode (default 10); generated rooms are solvable within it.
        max_turns: turns per episode (default 5).
        max_actions_per_turn: actions per turn (default 5).
        level_file: path of an XSB file; episodes then play its levels (drawn with
            ``self.np_random``, or chosen by ``reset(options={"level_index": i})``) instead of
            generated rooms.
        min_solution_steps: generated rooms need at least this many moves (default 3, so no
            room is solved by one or two moves; 1 allows every solvable room).
        **kwargs: :class:`~agentgym.text_env.TextEnv` arguments (``action_format``,
            ``invalid_action``, ``format_penalty``, ``render_mode``, ...).

    Raises:
        ValueError: bad dimensions or counts, or a malformed ``level_file`` (the message names
            the level and the problem).
        OSError: ``level_file`` cannot be read.
    """

    def __init__(
        self,
        *,
        dim_room: tuple[int, int] | list[int] = (6, 6),
        num_boxes: int = 1,
        max_steps: int = 10,
        max_turns: int = 5,
        max_actions_per_turn: int = 5,
        level_file: str | PathLike[str] | None = None,
        min_solution_steps: int = 3,
        **kwargs: Any,
    ):
        if (
            not isinstance(dim_room, (tuple, list))
            or len(dim_room) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in dim_room)
            or min(dim_room) < 3
        ):
            raise ValueError(f"dim_room must be two ints >= 3, got {dim_room!r}")
        if isinstance(num_boxes, bool) or not isinstance(num_boxes, int) or num_boxes < 1:
            raise ValueError(f"num_boxes must be an int >= 1, got {num_boxes!r}")
        if (dim_room[0] - 2) * (dim_room[1] - 2) < num_boxes + 2:
            raise ValueError(
                f"a {dim_room[0]}x{dim_room[1]} room has too few inner cells for "
                f"{num_boxes} boxes, the player and a free cell"
            )
        super().__init__(
            max_turns=max_turns,
            max_actions_per_turn=max_actions_per_turn,
            max_steps=max_steps,
            **kwargs,
        )
        if not (isinstance(min_solution_steps, int) and 1 <= min_solution_steps <= max_steps):
            raise ValueError(
                f"min_solution_steps must be an int in [1, max_steps={max_steps}], "
                f"got {min_solution_steps!r}"
            )
        self.min_solution_steps = min_solution_steps
        self.dim_room = (int(dim_room[0]), int(dim_room[1]))
        self.num_boxes = num_boxes
        self.level_file = None if level_file is None else Path(level_file)
        self.levels: list[SokobanLevel] = [] if level_file is None else load_xsb(level_file)
        self._check_fits(self.dim_room, num_boxes, "dim_room")
        for level in self.levels:
            self._check_fits(level.shape, level.num_boxes, f"level {level.index} of {level_file}")
            _check_unsolved(level, f"level {level.index} of {level_file}")
        # State: fixed walls and targets, moving boxes and player.
        self._walls = np.ones(self.dim_room, dtype=bool)
        self._targets = np.zeros(self.dim_room, dtype=bool)
        self._boxes = np.zeros(self.dim_room, dtype=bool)
        self._player: tuple[int, int] = (0, 0)
        self._oracle_plan: list[str] | None = None

    # ------------------------------------------------------------------ text

    @property
    def instructions_text(self) -> str:
        return (
            "You are solving the Sokoban puzzle. You are the player and you need to push all boxes "
            "to targets. When you are right next to a box, you can push it by moving in the same "
            "direction. You cannot push a box through a wall or into another box, and you cannot "
            "pull a box. Actions: Up, Down, Left, Right (U, D, L, R also work; case does not "
            "matter); Up decreases the row. "
            + _LEGEND
            + " Rewards: -0.1 per action, +1 for pushing a box onto a target, -1 for pushing a box "
            "off a target, +10 when all boxes are on targets, which ends the episode."
        )

    def valid_actions(self) -> list[str]:
        return list(ACTIONS)

    def _render_state(self) -> str:
        walls, targets, boxes = self._walls, self._targets, self._boxes
        rows = []
        for r in range(walls.shape[0]):
            line = []
            for c in range(walls.shape[1]):
                if walls[r, c]:
                    line.append("#")
                elif (r, c) == self._player:
                    line.append("S" if targets[r, c] else "P")
                elif boxes[r, c]:
                    line.append("√" if targets[r, c] else "X")
                else:
                    line.append("O" if targets[r, c] else "_")
            rows.append("".join(line))

        def cells(mask: np.ndarray) -> str:
            return ", ".join(f"({r}, {c})" for r, c in np.argwhere(mask).tolist())

        on_target = int((boxes & targets).sum())
        return "\n".join(
            [
                *rows,
                _LEGEND,
                f"Player: ({self._player[0]}, {self._player[1]})",
                f"Boxes: {cells(boxes)}",
                f"Targets: {cells(targets)}",
                f"Boxes on targets: {on_target} of {int(boxes.sum())}",
            ]
        )

    # ------------------------------------------------------------------ episode

    def _check_fits(self, shape: tuple[int, int], num_boxes: int, what: str) -> None:
        """Raise ``ValueError`` if such a room's observation may exceed the observation space."""
        h, w = shape
        coords = (num_boxes * 2 + 1) * len(f"({h}, {w}), ")
        bound = h * (w + 1) + len(_LEGEND) + coords + 100
        if bound > self.observation_space.max_length:
            raise ValueError(
                f"{what}: a {h}x{w} room with {num_boxes} boxes renders up to {bound} characters, "
                f"more than the observation space's max_length={self.observation_space.max_length}"
            )

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(options) - set(_RESET_OPTIONS))
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; Sokoban takes {_RESET_OPTIONS}")
        if "level" in options and "level_index" in options:
            raise ValueError("give either options['level'] or options['level_index'], not both")
        optimal: int | None = None
        index: int | None = None
        if "level" in options:
            level = options["level"]
            if isinstance(level, SokobanLevel):
                # Re-parse so that a hand-built level gets the same checks as a text one.
                level = parse_level(level.to_xsb(), title=level.title)
            elif isinstance(level, str):
                level = parse_level(level)
            else:
                raise TypeError(
                    f"options['level'] must be XSB text or a SokobanLevel, got "
                    f"{type(level).__name__}"
                )
            self._check_fits(level.shape, level.num_boxes, "options['level']")
            _check_unsolved(level, "options['level']")
            source = "options"
        elif "level_index" in options or self.levels:
            if not self.levels:
                raise ValueError("options['level_index'] needs a level_file")
            if "level_index" in options:
                index = options["level_index"]
                if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
                    raise TypeError(f"options['level_index'] must be an int, got {index!r}")
                if not 0 <= index < len(self.levels):
                    raise ValueError(
                        f"options['level_index']={index} is out of range: {self.level_file} has "
                        f"{len(self.levels)} levels (0..{len(self.levels) - 1})"
                    )
                index = int(index)
            else:
                index = int(self.np_random.integers(len(self.levels)))
            level = self.levels[index]
            source = "file"
        else:
            room = generate_room(
                self.np_random,
                self.dim_room,
                self.num_boxes,
                self.max_steps,
                min_steps=self.min_solution_steps,
            )
            level, optimal, source = room.level, room.optimal_num_steps, "generated"
        self._walls, self._targets, self._boxes, self._player = level.state_arrays()
        self._oracle_plan = None
        return {
            "level_source": source,
            "level_index": index,
            "level_title": level.title,
            "optimal_num_steps": optimal,
            "boxes_on_target": int((self._boxes & self._targets).sum()),
        }

    # ------------------------------------------------------------------ actions

    def _parse_action(self, token: str) -> int | None:
        return _ALIASES.get(token.strip().casefold())

    def _action_name(self, action: int) -> str:
        return ACTIONS[action]

    def _apply_action(self, action: int) -> ActionOutcome:
        dr, dc = DELTAS[action]
        r, c = self._player
        ahead = (r + dr, c + dc)
        reward = STEP_REWARD
        effective = False
        if not self._walls[ahead]:
            if not self._boxes[ahead]:
                self._player = ahead
                effective = True
            else:
                beyond = (r + 2 * dr, c + 2 * dc)
                if not self._walls[beyond] and not self._boxes[beyond]:
                    self._boxes[ahead] = False
                    self._boxes[beyond] = True
                    self._player = ahead
                    effective = True
                    reward += BOX_ON_TARGET_REWARD * self._targets[beyond]
                    reward += BOX_OFF_TARGET_REWARD * self._targets[ahead]
        solved = self._success()
        if solved:
            reward += SOLVED_REWARD
        if self._oracle_plan:
            # Keep the oracle's plan while the moves follow it (each of its moves is effective).
            if effective and self._oracle_plan[0] == ACTIONS[action]:
                self._oracle_plan.pop(0)
            else:
                self._oracle_plan = None
        elif effective:
            self._oracle_plan = None
        return ActionOutcome(
            reward=float(reward),
            effective=effective,
            terminated=solved,
            info={"boxes_on_target": int((self._boxes & self._targets).sum())},
        )

    def _success(self) -> bool:
        return not (self._boxes & ~self._targets).any()

    # ------------------------------------------------------------------ oracle

    def oracle_actions(self) -> list[str]:
        """The next ``min(max_actions_per_turn, actions_left)`` moves of an optimal solution.

        The plan comes from a breadth-first search (fewest moves) from the current state, and is
        reused while the executed moves follow it. Returns ``[]`` when the episode is solved, or
        when no solution exists from here (a box is stuck) or none is found within the solver's
        node budget (:data:`ORACLE_MAX_NODES`). If the optimal solution is longer than the
        actions left, its first moves are still returned.
        """
        if not self._has_reset or self._success():
            return []
        if self._oracle_plan is None:
            result = solve_result(
                self._walls,
                self._targets,
                self._boxes,
                self._player,
                max_nodes=ORACLE_MAX_NODES,
            )
            self._oracle_plan = list(result.actions) if result.actions is not None else []
        return self._oracle_plan[: max(0, min(self.max_actions_per_turn, self.actions_left))]

    def oracle_reasoning(self, actions: list[str]) -> str:
        """The player's, the boxes' and the targets' cells and the start of the oracle's plan.

        Args:
            actions: the oracle's moves this turn (:meth:`oracle_actions`).

        Returns:
            e.g. ``"I am at (4, 1); boxes at [(2, 2)], targets at [(1, 2)]. The shortest plan
            that pushes every box onto a target starts Up, Right, Up."`` (``(row, col)`` cells
            as the observation gives them, boxes and targets in row-major order).

        Raises:
            RuntimeError: called before :meth:`reset`.
        """
        plan = self._oracle_plan_text(actions)
        player = tuple(int(v) for v in self._player)
        boxes = [tuple(int(v) for v in rc) for rc in np.argwhere(self._boxes)]
        targets = [tuple(int(v) for v in rc) for rc in np.argwhere(self._targets)]
        return (
            f"I am at {player}; boxes at {boxes}, targets at {targets}. The shortest plan that "
            f"pushes every box onto a target starts {plan}."
        )
