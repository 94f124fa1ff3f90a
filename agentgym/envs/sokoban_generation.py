"""Procedural Sokoban rooms, seeded, reproducible and proved solvable within a step budget.

The method follows gym-sokoban (Schrader 2018, ``room_utils.py``): a random walk carves the room's
floor out of solid rock, targets are placed on the floor, and boxes are scattered by *reverse
playing*: starting with every box on a target, the player walks and *pulls* boxes. Here the reverse
play is exhaustive rather than a depth-first walk:
:func:`agentgym.solvers.sokoban.goal_distance_layers` runs a breadth-first search of pulls and walks
from every solved state at once, which gives every state from which the room can be solved together
with its optimal solution length (in moves). The start state is drawn uniformly from the states that

* need between ``min_steps`` (default 1) and ``max_steps`` moves (so the optimal solution fits
  the step budget and is not trivial), and
* have no box on a target.

The BFS is the solver's own exact search (a bitset BFS, see :mod:`agentgym.solvers.sokoban`), so
this draw *is* the solver's verification; ``verify=True`` re-solves the drawn room forwards as a
second, independent check. A room whose floor or targets admit no such state is redrawn, at most
``max_tries`` times.

All randomness comes from the ``numpy.random.Generator`` passed in, so a seed gives the same room
in any process.

Example:
    >>> import numpy as np
    >>> room = generate_room(np.random.default_rng(0), (6, 6), num_boxes=1, max_steps=10)
    >>> room.level.shape, 1 <= room.optimal_num_steps <= 10
    ((6, 6), True)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from agentgym.envs.xsb import SokobanLevel
from agentgym.solvers.sokoban import (
    BITSET_MAX_STATES,
    BitStateSpace,
    _bits_of,
    goal_distance_layers,
    solve,
)

__all__ = ["GeneratedRoom", "generate_room", "carve_floor"]

# 3x3 stamps applied at each step of the walk (True = carve to floor). Straight corridors, corners
# and a 2x2 block, as in gym-sokoban's masks.
_STAMPS = np.array(
    [
        [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
        [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
    ],
    dtype=bool,
)
_STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))


@dataclass(frozen=True)
class GeneratedRoom:
    """A generated room.

    Attributes:
        level: the room and its start state.
        optimal_num_steps: moves in an optimal solution (1 <= it <= ``max_steps``).
        num_tries: floors drawn until one admitted a start state (1 if the first did).
    """

    level: SokobanLevel
    optimal_num_steps: int
    num_tries: int


def carve_floor(
    rng: np.random.Generator,
    dim_room: tuple[int, int],
    *,
    num_walk_steps: int | None = None,
    p_change_direction: float = 0.35,
) -> np.ndarray:
    """Carve a room's floor with a random walk (gym-sokoban's room topology generation).

    The walk starts on a random interior cell with a random heading; at each step it turns to a
    random heading with probability ``p_change_direction``, moves one cell (sliding along the
    border, never onto it) and carves a random 3x3 stamp around itself. The border stays wall, and
    the floor is connected (every stamp holds the walk's cell, and the walk moves to neighbours).

    Args:
        rng: the random generator (all draws are made in one call).
        dim_room: ``(H, W)``, both >= 3.
        num_walk_steps: walk length (default ``int(1.7 * (H + W))``, as gym-sokoban's env).
        p_change_direction: probability of a new heading at each step.

    Returns:
        ``(H, W)`` bool, True on floor.
    """
    h, w = dim_room
    bits = _carve_bits(rng, h, w, num_walk_steps, p_change_direction)
    floor = np.zeros((h, w), dtype=bool)
    floor[1:-1, 1:-1] = _unpack(bits, (h - 2) * (w - 2)).reshape(h - 2, w - 2)
    return floor


def _carve_bits(
    rng: np.random.Generator, h: int, w: int, num_walk_steps: int | None, p_change_direction: float
) -> int:
    """:func:`carve_floor` as a bit board of the interior: bit ``r * (w - 2) + c`` is cell
    ``(r + 1, c + 1)``."""
    n = int(1.7 * (h + w)) if num_walk_steps is None else int(num_walk_steps)
    draws = rng.random(3 * n + 3).tolist()
    row = 1 + int(draws[0] * (h - 2))
    col = 1 + int(draws[1] * (w - 2))
    heading = int(draws[2] * 4)
    # The walk draws on a board of the grid padded by one cell (stride w + 2), so that a stamp
    # around a cell next to the border needs no clipping.
    stride = w + 2
    stamp_bits = _stamp_bits(stride)
    num_stamps = len(stamp_bits)
    board = 0
    for i in range(n):
        if draws[3 + i] < p_change_direction:
            heading = int(draws[3 + n + i] * 4)
        dr, dc = _STEPS[heading]
        row += dr
        col += dc
        row = 1 if row < 1 else (h - 2 if row > h - 2 else row)
        col = 1 if col < 1 else (w - 2 if col > w - 2 else col)
        # Stamp s around walk cell (row, col): its top left is padded cell (row, col).
        board |= stamp_bits[int(draws[3 + 2 * n + i] * num_stamps)] << (row * stride + col)
    # Keep the interior: room rows 1..h-2 are padded rows 2..h-1, likewise columns.
    wb = w - 2
    row_mask = (1 << wb) - 1
    bits = 0
    for r in range(h - 2):
        bits |= ((board >> ((r + 2) * stride + 2)) & row_mask) << (r * wb)
    return bits


@functools.lru_cache(maxsize=32)
def _stamp_bits(stride: int) -> tuple[int, ...]:
    """Each 3x3 stamp as bits of a board with row stride ``stride`` (top-left at bit 0)."""
    return tuple(
        sum(1 << (i * stride + j) for i in range(3) for j in range(3) if stamp[i, j])
        for stamp in _STAMPS
    )


def _unpack(bits: int, size: int) -> np.ndarray:
    """``(size,)`` bool: bit i of ``bits``."""
    raw = np.frombuffer(bits.to_bytes((size + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:size].astype(bool)


def generate_room(
    rng: np.random.Generator,
    dim_room: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    max_steps: int = 10,
    *,
    min_steps: int = 1,
    num_walk_steps: int | None = None,
    p_change_direction: float = 0.35,
    max_tries: int = 200,
    verify: bool = False,
) -> GeneratedRoom:
    """Generate a room solvable in at most ``max_steps`` moves (see the module docstring).

    Args:
        rng: the only source of randomness (an env passes its ``self.np_random``).
        dim_room: ``(H, W)`` including the border walls; each >= 3.
        num_boxes: boxes (and targets), >= 1.
        max_steps: the step budget; the optimal solution has at most this many moves.
        min_steps: the optimal solution has at least this many moves (1..max_steps); raising it
            removes trivial rooms.
        num_walk_steps, p_change_direction: see :func:`carve_floor`.
        max_tries: floors drawn before giving up.
        verify: also re-solve the room with the forward solver and check the length.

    Returns:
        A :class:`GeneratedRoom`.

    Raises:
        ValueError: bad arguments, or a room so large that its state space exceeds the solver's
            bitset limit.
        RuntimeError: no floor in ``max_tries`` admitted a start state (e.g. too many boxes for the
            room, or ``max_steps`` too small to move them all off their targets).
    """
    h, w = (int(v) for v in dim_room)
    if h < 3 or w < 3:
        raise ValueError(f"dim_room must be at least (3, 3), got {dim_room!r}")
    if num_boxes < 1:
        raise ValueError(f"num_boxes must be >= 1, got {num_boxes!r}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
    if not 1 <= min_steps <= max_steps:
        raise ValueError(f"min_steps must lie in [1, max_steps={max_steps}], got {min_steps!r}")
    if ((h - 2) * (w - 2)) ** (num_boxes + 1) > BITSET_MAX_STATES:
        raise ValueError(
            f"a {h}x{w} room with {num_boxes} boxes has too many states for the generator's "
            f"exhaustive search (limit {BITSET_MAX_STATES}); use fewer boxes or a smaller room"
        )
    shape = (h - 2, w - 2)
    for attempt in range(1, max_tries + 1):
        floor_bits = _carve_bits(rng, h, w, num_walk_steps, p_change_direction)
        cells = _bits_of(floor_bits)
        if len(cells) < num_boxes + 2:  # boxes, the player, and room to move
            continue
        target_cells = [cells[i] for i in rng.permutation(len(cells))[:num_boxes].tolist()]
        target_bits = sum(1 << b for b in target_cells)
        space = BitStateSpace.from_bits((1, 1), shape, floor_bits, target_bits, num_boxes)
        _, layers = goal_distance_layers(space, max_depth=max_steps)
        reachable = 0
        for layer in layers[min_steps:]:
            reachable |= layer
        indices, _, box_cells = space.states(reachable)
        on_target = np.zeros(space.grid.size, dtype=bool)
        on_target[target_cells] = True
        candidates = indices[~on_target[box_cells].any(axis=1)]
        if candidates.size == 0:
            continue
        index = int(candidates[int(rng.integers(candidates.size))])
        depth = next(d for d, layer in enumerate(layers) if layer >> index & 1)
        player_local, boxes_local = space.decode(index)
        walls = np.ones((h, w), dtype=bool)
        walls[1:-1, 1:-1] = ~space.grid.floor.reshape(shape)
        targets = np.zeros((h, w), dtype=bool)
        boxes = np.zeros((h, w), dtype=bool)
        for t in target_cells:
            targets[space.grid.position(t)] = True
        for b in boxes_local:
            boxes[space.grid.position(b)] = True
        level = SokobanLevel(walls, targets, boxes, space.grid.position(player_local))
        if verify:
            plan = solve(level.walls, level.targets, level.boxes, level.player, max_depth=max_steps)
            if plan is None or len(plan) != depth:
                raise AssertionError(  # pragma: no cover - a solver bug, not a user error
                    f"generator and solver disagree: BFS depth {depth}, forward solution {plan}"
                )
        return GeneratedRoom(level, depth, attempt)
    raise RuntimeError(
        f"could not generate a {h}x{w} room with {num_boxes} boxes solvable within {max_steps} "
        f"moves in {max_tries} tries; allow more steps, fewer boxes or a larger room"
    )
