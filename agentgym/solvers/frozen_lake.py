"""Exact planners for FrozenLake: BFS shortest paths and value iteration.

A map (``desc``) is a sequence of equal-length strings over Gymnasium's letters: ``S`` start, ``F``
frozen, ``H`` hole, ``G`` goal. Positions are ``(row, col)`` from the top left. Actions are indices
into :data:`ACTIONS` in Gymnasium's order (0 Left, 1 Down, 2 Right, 3 Up). A move into the border
leaves the player where it is. Entering ``G`` gives reward 1 and ends the episode; entering ``H``
ends it with reward 0.

On slippery ice (Gymnasium's ``is_slippery=True``) the intended move happens with probability 1/3
and each of the two perpendicular moves with probability 1/3 (:func:`slip_outcomes`).

Example:
    >>> desc = ["SF", "HG"]
    >>> [ACTIONS[a] for a in shortest_path(desc)]
    ['Right', 'Down']
    >>> values, q = value_iteration(desc, slippery=True, horizon=2)
    >>> round(float(values[0, 0]), 4)  # reach G within 2 slippery moves: 1/3 * 1/3
    0.1111

Sources: Gymnasium ``gymnasium/envs/toy_text/frozen_lake.py`` (map letters, action order, slip
rule); RAGEN's FrozenLake environment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

__all__ = [
    "ACTIONS",
    "MOVES",
    "find_tile",
    "move",
    "slip_outcomes",
    "shortest_path",
    "value_iteration",
    "greedy_action",
]

#: Action names, in Gymnasium's order: index 0 Left, 1 Down, 2 Right, 3 Up.
ACTIONS: tuple[str, ...] = ("Left", "Down", "Right", "Up")
#: (row, col) displacement of each action.
MOVES: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))

Position = tuple[int, int]


def find_tile(desc: Sequence[str], letter: str) -> Position:
    """The position of the first ``letter`` in ``desc`` (row-major).

    Raises:
        ValueError: ``letter`` is not on the map.
    """
    for row, line in enumerate(desc):
        col = line.find(letter)
        if col >= 0:
            return row, col
    raise ValueError(f"the map has no {letter!r} tile")


def move(desc: Sequence[str], pos: Position, action: int) -> Position:
    """Where ``action`` takes the player from ``pos``; a move into the border stays put."""
    d_row, d_col = MOVES[action]
    row, col = pos[0] + d_row, pos[1] + d_col
    if 0 <= row < len(desc) and 0 <= col < len(desc[0]):
        return row, col
    return pos


def slip_outcomes(action: int) -> tuple[int, int, int]:
    """The three equally likely moves of ``action`` on slippery ice: (left of it, it, right of it).

    As in Gymnasium: ``((a - 1) % 4, a, (a + 1) % 4)``, i.e. the intended move and both
    perpendicular ones (for Up: Right, Up, Left).
    """
    return (action - 1) % 4, action, (action + 1) % 4


def shortest_path(
    desc: Sequence[str], start: Position | None = None, goal: Position | None = None
) -> list[int] | None:
    """The fewest non-slippery actions from ``start`` to ``goal`` avoiding holes (BFS).

    Args:
        desc: the map.
        start: default: the ``S`` tile.
        goal: default: any ``G`` tile (the nearest).

    Returns:
        Action indices (ties broken in :data:`ACTIONS` order), ``[]`` if ``start == goal``, or
        ``None`` if no hole-free path exists or ``start`` is a hole.
    """
    start = find_tile(desc, "S") if start is None else start
    if desc[start[0]][start[1]] == "H":
        return None
    parent: dict[Position, tuple[Position, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        pos = queue.popleft()
        at_goal = desc[pos[0]][pos[1]] == "G"
        if (goal is None and at_goal) or pos == goal:
            path: list[int] = []
            link = parent[pos]
            while link is not None:
                prev, action = link
                path.append(action)
                link = parent[prev]
            return path[::-1]
        if at_goal:  # a goal tile ends the episode: no path passes through one
            continue
        for action in range(4):
            nxt = move(desc, pos, action)
            if nxt not in parent and desc[nxt[0]][nxt[1]] != "H":
                parent[nxt] = (pos, action)
                queue.append(nxt)
    return None


def value_iteration(
    desc: Sequence[str],
    *,
    slippery: bool,
    gamma: float = 1.0,
    horizon: int | None = None,
    tol: float = 1e-12,
    max_iterations: int = 100_000,
) -> tuple[np.ndarray, np.ndarray]:
    """Optimal state and action values of the FrozenLake MDP.

    Reward 1 for entering ``G``; ``G`` and ``H`` are terminal (value 0).

    Args:
        desc: the map.
        slippery: use the slip rule (:func:`slip_outcomes`), else moves are deterministic.
        gamma: discount in (0, 1].
        horizon: ``None``: iterate to convergence (``tol``); an int ``h >= 0``: exactly ``h``
            Bellman backups, so with ``gamma=1`` the values are the best probabilities of reaching
            ``G`` within ``h`` actions, the quantity an agent with ``h`` actions left maximises.
        tol: convergence threshold on the largest value change (``horizon=None`` only).
        max_iterations: cap on backups when ``horizon`` is ``None``.

    Returns:
        ``(values, q)``: float64 arrays of shapes ``(rows, cols)`` and ``(rows, cols, 4)``.

    Raises:
        ValueError: ``gamma`` outside (0, 1] or a negative ``horizon``.
    """
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1], got {gamma!r}")
    if horizon is not None and horizon < 0:
        raise ValueError(f"horizon must be None or >= 0, got {horizon!r}")
    rows, cols = len(desc), len(desc[0])
    tiles = np.array([list(line) for line in desc])
    flat = tiles.reshape(-1)
    terminal = (flat == "G") | (flat == "H")
    reward_on_entry = (flat == "G").astype(np.float64)
    # next_state[s, a, k]: the k-th equally likely successor of action a in state s.
    outcomes = [slip_outcomes(a) if slippery else (a,) for a in range(4)]
    next_state = np.array(
        [
            [
                [r * cols + c for r, c in (move(desc, (s // cols, s % cols), m) for m in outs)]
                for outs in outcomes
            ]
            for s in range(rows * cols)
        ]
    )
    continues = gamma * (~terminal).astype(np.float64)

    values = np.zeros(rows * cols)
    q = np.zeros((rows * cols, 4))
    steps = horizon if horizon is not None else max_iterations
    for _ in range(steps):
        backup = reward_on_entry + continues * values  # value of entering each state
        q = backup[next_state].mean(axis=2)
        q[terminal] = 0.0
        new_values = q.max(axis=1)
        delta = float(np.abs(new_values - values).max())
        values = new_values
        if horizon is None and delta < tol:
            break
    return values.reshape(rows, cols), q.reshape(rows, cols, 4)


def greedy_action(q: np.ndarray, pos: Position) -> int:
    """The action of largest value at ``pos`` (ties broken in :data:`ACTIONS` order)."""
    return int(np.argmax(q[pos[0], pos[1]]))
