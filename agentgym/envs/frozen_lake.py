"""FrozenLake-v0 and FrozenLakeSlippery-v0: cross a frozen lake to the goal without falling in.

The lake is a ``size`` x ``size`` grid drawn from ``self.np_random`` each episode: every tile is
frozen with probability ``p`` (default 0.8) and a hole otherwise; the start and the goal are two
distinct tiles drawn uniformly; the whole map is redrawn until the goal can be reached from the start
over frozen tiles (Gymnasium's ``generate_random_map`` with RAGEN's random start and goal, written
here on the environment's generator so that a seed fixes the map). A fixed map may be given instead
with ``desc``.

* Observation: the grid, one row per line, in RAGEN's symbols, then the player's position::

      _ _ P _
      _ O _ _
      _ _ _ O
      O _ _ G
      Player position: row 0, column 2 (rows and columns count from 0 at the top left).

  ``P`` player, ``_`` frozen ice (the start tile too, once left), ``O`` hole, ``G`` goal, ``X`` the
  player fallen into a hole, ``√`` the player on the goal.
* Actions: ``Left``, ``Down``, ``Right``, ``Up`` (case-insensitive), several per turn separated by
  ``||`` up to ``max_actions_per_turn``. A move into the border is valid but not effective (the
  player stays).
* Slippery ice (``is_slippery=True``): as Gymnasium's FrozenLake, the intended move happens with
  probability 1/3 and each perpendicular move with probability 1/3, drawn from ``self.np_random``.
* Reward: 1 on reaching the goal (terminated, success); falling into a hole terminates the episode
  with reward 0; every other move 0. Invalid turns follow the shared policy of
  :class:`~agentgym.text_env.TextEnv` (default: -0.1, state unchanged).
* Limits: ``max_turns`` turns and ``max_steps`` moves (default ``max_turns * max_actions_per_turn``);
  running out of either truncates the episode (a time limit, Gymnasium's convention).
* Oracle (:meth:`FrozenLakeEnv.oracle_actions`): on firm ice the next moves of a BFS shortest path;
  on slippery ice one move per turn, the action that maximises the probability of reaching the goal
  within the moves and turns left (finite-horizon value iteration), since a move's result is random.

Sources: Gymnasium ``gymnasium/envs/toy_text/frozen_lake.py``; RAGEN's FrozenLake environment
(symbols, random start and goal).

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/FrozenLake-v0")
    >>> obs, info = env.reset(seed=0)
    >>> info["valid_actions"]
    ['Left', 'Down', 'Right', 'Up']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agentgym.solvers.frozen_lake import (
    ACTIONS,
    find_tile,
    greedy_action,
    move,
    shortest_path,
    slip_outcomes,
    value_iteration,
)
from agentgym.text_env import ActionOutcome, TextEnv

__all__ = ["FrozenLakeEnv", "generate_random_map", "SYMBOLS"]

#: Observation symbol of each map letter, and of the player on each kind of tile.
SYMBOLS: dict[str, str] = {
    "F": "_",
    "S": "_",
    "H": "O",
    "G": "G",
    "player": "P",
    "player_in_hole": "X",
    "player_on_goal": "√",
}

_ACTION_INDEX = {name.casefold(): index for index, name in enumerate(ACTIONS)}


def generate_random_map(size: int, p: float, rng: np.random.Generator) -> tuple[str, ...]:
    """A random ``size`` x ``size`` map whose goal is reachable from its start.

    Each tile is frozen (``F``) with probability ``p``, else a hole (``H``); ``S`` and ``G`` go on two
    distinct uniformly drawn tiles. Everything is redrawn until a hole-free path joins them.

    Args:
        size: side length, >= 2.
        p: probability that a tile is frozen, in (0, 1].
        rng: the generator to draw from (the environment's ``np_random``).

    Returns:
        The map as ``size`` strings of ``size`` letters.
    """
    cells = size * size
    while True:
        frozen = rng.random((size, size)) < p
        start = int(rng.integers(cells))
        goal = int(rng.integers(cells - 1))
        goal += goal >= start  # uniform over the other cells
        board = [["F" if f else "H" for f in row] for row in frozen.tolist()]
        board[start // size][start % size] = "S"
        board[goal // size][goal % size] = "G"
        desc = tuple("".join(row) for row in board)
        if shortest_path(desc) is not None:
            return desc


class FrozenLakeEnv(TextEnv):
    """Walk from the start to the goal on a random frozen lake (see the module docstring).

    Args:
        size: side of the random square map, >= 2 (ignored when ``desc`` is given).
        p: probability that a random tile is frozen, in (0, 1].
        is_slippery: Gymnasium's slip rule (each move goes sideways with probability 2/3).
        desc: a fixed map instead of random ones: equal-length strings over ``S F H G`` with exactly
            one ``S`` and at least one ``G``.
        max_turns: turns per episode (default 5).
        max_actions_per_turn: moves per turn (default 3).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range or a malformed ``desc``.
    """

    def __init__(
        self,
        *,
        size: int = 4,
        p: float = 0.8,
        is_slippery: bool = False,
        desc: Sequence[str] | None = None,
        max_turns: int = 5,
        max_actions_per_turn: int = 3,
        **kwargs: Any,
    ):
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise ValueError(f"size must be an int >= 2, got {size!r}")
        if not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
            raise ValueError(
                f"p (the probability that a tile is frozen) must lie in (0, 1], got {p!r}"
            )
        self.fixed_desc = _check_desc(desc) if desc is not None else None
        if self.fixed_desc is not None:
            size = len(self.fixed_desc)
        super().__init__(max_turns=max_turns, max_actions_per_turn=max_actions_per_turn, **kwargs)
        self.size = size
        self.p = float(p)
        self.is_slippery = bool(is_slippery)
        self.desc: tuple[str, ...] = self.fixed_desc or ()
        self.position: tuple[int, int] = (0, 0)

    # ------------------------------------------------------------------ TextEnv hooks

    @property
    def instructions_text(self) -> str:
        slip = (
            " The ice is slippery: a move goes in the intended direction with probability 1/3 and "
            "to each side (perpendicular) with probability 1/3."
            if self.is_slippery
            else ""
        )
        return (
            "You are walking on a frozen lake. Reach the goal G without falling into a hole O. "
            "Symbols: P you, _ frozen ice, O hole, G goal, X you fallen into a hole, √ you on the "
            "goal. Moves: Left, Down, Right, Up; a move into the edge leaves you where you are. "
            f"Reaching the goal gives reward 1; falling into a hole ends the episode with reward 0.{slip}"
        )

    def valid_actions(self) -> list[str]:
        return list(ACTIONS)

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        self.desc = self.fixed_desc or generate_random_map(self.size, self.p, self.np_random)
        self.position = find_tile(self.desc, "S")
        return {"map": self.desc, "position": self.position}

    def _parse_action(self, token: str) -> int | None:
        return _ACTION_INDEX.get(token.strip().casefold())

    def _action_name(self, action: int) -> str:
        return ACTIONS[action]

    def _apply_action(self, action: int) -> ActionOutcome:
        direction = action
        if self.is_slippery:
            direction = slip_outcomes(action)[int(self.np_random.integers(3))]
        new_position = move(self.desc, self.position, direction)
        effective = new_position != self.position
        self.position = new_position
        tile = self._tile()
        return ActionOutcome(
            reward=1.0 if tile == "G" else 0.0,
            effective=effective,
            terminated=tile in ("G", "H"),
            info={"position": self.position},
        )

    def _success(self) -> bool:
        return self._tile() == "G"

    def _render_state(self) -> str:
        lines = []
        for r, row in enumerate(self.desc):
            symbols = [SYMBOLS[letter] for letter in row]
            if r == self.position[0]:
                symbols[self.position[1]] = {
                    "H": SYMBOLS["player_in_hole"],
                    "G": SYMBOLS["player_on_goal"],
                }.get(row[self.position[1]], SYMBOLS["player"])
            lines.append(" ".join(symbols))
        lines.append(
            f"Player position: row {self.position[0]}, column {self.position[1]} "
            "(rows and columns count from 0 at the top left)."
        )
        return "\n".join(lines)

    def oracle_actions(self) -> list[str]:
        """The optimal next move(s) from the current cell.

        Firm ice: the next ``min(max_actions_per_turn, actions_left)`` moves of a BFS shortest path
        to the goal. Slippery ice: one move, the greedy action of finite-horizon value iteration
        with horizon ``min(actions_left, turns_left)`` (the oracle plays one move per turn), which
        maximises the probability of reaching the goal before the episode is truncated.

        Returns:
            Action names; ``[]`` if no move can help (no path left, or no budget left).
        """
        budget = min(self.max_actions_per_turn, self.actions_left)
        if budget <= 0 or self._tile() in ("G", "H"):
            return []
        if not self.is_slippery:
            path = shortest_path(self.desc, self.position) or []
            return [ACTIONS[a] for a in path[:budget]]
        horizon = min(self.actions_left, self.max_turns - self.turn)
        _, q = value_iteration(self.desc, slippery=True, horizon=horizon)
        return [ACTIONS[greedy_action(q, self.position)]]

    def oracle_reasoning(self, actions: list[str]) -> str:
        """The player's cell, the goal's cell and the moves the oracle plays.

        Args:
            actions: the oracle's moves this turn (:meth:`oracle_actions`).

        Returns:
            e.g. ``"I am at row 0, column 1; the goal is at row 3, column 1. Avoiding the holes,
            I move Right, Down, Right."`` (rows and columns from 0, as the observation counts).

        Raises:
            RuntimeError: called before :meth:`reset`.
        """
        plan = self._oracle_plan_text(actions)
        row, col = self.position
        goal = next(
            (r, c) for r, line in enumerate(self.desc) for c, tile in enumerate(line) if tile == "G"
        )
        return (
            f"I am at row {row}, column {col}; the goal is at row {goal[0]}, column {goal[1]}. "
            f"Avoiding the holes, I move {plan}."
        )

    # ------------------------------------------------------------------ helpers

    def _tile(self) -> str:
        if not self.desc:
            return "F"
        return self.desc[self.position[0]][self.position[1]]


def _check_desc(desc: Sequence[str]) -> tuple[str, ...]:
    rows = tuple(desc) if not isinstance(desc, str) else ()
    if not rows or not all(isinstance(r, str) and r for r in rows):
        raise ValueError(f"desc must be a non-empty sequence of non-empty strings, got {desc!r}")
    if len({len(r) for r in rows}) != 1:
        raise ValueError("desc rows must all have the same length")
    letters = "".join(rows)
    if set(letters) - set("SFHG"):
        raise ValueError(f"desc may hold only the letters S, F, H, G, got {sorted(set(letters))}")
    if letters.count("S") != 1 or "G" not in letters:
        raise ValueError("desc must hold exactly one S (start) and at least one G (goal)")
    return rows
