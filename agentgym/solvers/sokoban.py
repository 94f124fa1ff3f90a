"""Exact, optimal Sokoban solver: breadth-first search over (player, boxes) states, in moves.

A level is given as boolean arrays of one shape ``(H, W)``: ``walls``, ``targets``, ``boxes``, and
the player's ``(row, col)``. Actions are the names in :data:`ACTIONS` (``Up`` decreases the row). A
move into a wall, or into a box whose far side is a wall or another box, changes nothing; every
other move walks, or pushes the one box in front of the player one cell. The goal is every box on a
target. The solver returns a shortest action sequence, counted in moves (walks and pushes alike),
which is what the environment's step budget counts.

Two exact implementations of the same breadth-first search:

* ``bitset`` (used when the state space has at most :data:`BITSET_MAX_STATES` states): every set of
  states is one Python integer with a bit per (box cells, player cell) tuple in a row-major
  bounding box of the floor. A walk or a push in direction d moves every state of a BFS layer at
  once: it is a *shift* of the integer (the player's index, and the pushed box's index, change by
  the same offset in every state), followed by an AND with a mask of the states where that move is
  legal. A whole layer of a 6x6 room then costs about twenty big-integer operations. Boxes are
  interchangeable, so each unordered box set is stored under all of its orderings.
* ``hashed`` (larger levels): a plain BFS over ``(player, sorted box tuple)`` states in a dict, with
  a node budget.

Both prune pushes onto *dead* cells (cells from which no push sequence on the empty floor reaches a
target), which removes only states that cannot be solved, so optimality is kept.

:func:`goal_distance_layers` runs the same search backwards (pulls instead of pushes) from every
solved state at once. Its layer ``d`` holds exactly the states whose optimal solution has ``d``
moves: the backward graph is the forward graph with its edges reversed, and the search starts from
the whole goal set. The room generator (:mod:`agentgym.envs.sokoban_generation`) draws its start
states from these layers, which is how it proves that a room is solvable within the step budget.

Example:
    >>> import numpy as np
    >>> from agentgym.envs.xsb import parse_level
    >>> level = parse_level("#####\\n#@$.#\\n#####")
    >>> solve(level.walls, level.targets, level.boxes, level.player)
    ['Right']

Sources: the state space and move rules of gym-sokoban (Schrader 2018); the dead-cell pruning is
the classic "simple deadlock" test of Sokoban solvers (e.g. the Sokoban wiki's solver pages).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "ACTIONS",
    "DELTAS",
    "BITSET_MAX_STATES",
    "DEFAULT_MAX_NODES",
    "SolveResult",
    "BitStateSpace",
    "solve",
    "solve_result",
    "goal_distance_layers",
    "dead_cells",
]

#: Action names; index d moves by ``DELTAS[d]``.
ACTIONS: tuple[str, ...] = ("Up", "Down", "Left", "Right")
#: (row, col) displacement of each action.
DELTAS: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
_OPPOSITE = (1, 0, 3, 2)
#: Largest state space (bits per state set) searched with the bitset method.
BITSET_MAX_STATES = 1 << 22
#: Default node budget of :func:`solve`: states stored before the search gives up.
DEFAULT_MAX_NODES = 500_000

Position = tuple[int, int]
Status = Literal["solved", "no_solution", "budget_exhausted"]


@dataclass(frozen=True)
class SolveResult:
    """Outcome of a search.

    Attributes:
        status: ``"solved"``; ``"no_solution"`` (proved: no solution at all, or none within
            ``max_depth`` when one was given); or ``"budget_exhausted"`` (``max_nodes`` states were
            stored, or the level is too large for either method; nothing is proved).
        actions: a shortest solution (names from :data:`ACTIONS`) when solved, else ``None``.
        num_nodes: states stored by the search.
        method: ``"bitset"`` or ``"hashed"``.
    """

    status: Status
    actions: tuple[str, ...] | None
    num_nodes: int
    method: str


# ---------------------------------------------------------------------------------- helpers


def _pack(mask: np.ndarray) -> int:
    """A boolean array (any shape, C order) as an int whose bit i is ``mask.flat[i]``."""
    return int.from_bytes(np.packbits(mask, axis=None, bitorder="little").tobytes(), "little")


def _set_bits(x: int, size: int) -> np.ndarray:
    """Indices (int64, ascending) of the set bits of ``x`` below ``size``."""
    raw = np.frombuffer(x.to_bytes((size + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")[:size])


def _check_level(
    walls: np.ndarray, targets: np.ndarray, boxes: np.ndarray, player: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Position]:
    walls = np.asarray(walls, dtype=bool)
    targets = np.asarray(targets, dtype=bool)
    boxes = np.asarray(boxes, dtype=bool)
    if walls.ndim != 2 or targets.shape != walls.shape or boxes.shape != walls.shape:
        raise ValueError(
            f"walls, targets and boxes must be 2-D arrays of one shape, got {walls.shape}, "
            f"{targets.shape}, {boxes.shape}"
        )
    row, col = int(player[0]), int(player[1])
    if not (0 <= row < walls.shape[0] and 0 <= col < walls.shape[1]):
        raise ValueError(f"player {(row, col)} lies outside the grid {walls.shape}")
    if walls[row, col] or boxes[row, col]:
        raise ValueError(f"player {(row, col)} stands on a wall or a box")
    if (boxes & walls).any():
        raise ValueError("a box stands on a wall")
    if int(boxes.sum()) != int(targets.sum()):
        raise ValueError(f"{int(boxes.sum())} boxes but {int(targets.sum())} targets")
    return walls, targets, boxes, (row, col)


@dataclass(frozen=True)
class _Grid:
    """A row-major bounding box of the floor: local index ``i = (r - r0) * wb + (c - c0)``."""

    r0: int
    c0: int
    hb: int
    wb: int
    floor: np.ndarray  # (hb * wb,) bool

    @classmethod
    def of(cls, floor2d: np.ndarray) -> _Grid:
        rows = np.flatnonzero(floor2d.any(axis=1))
        cols = np.flatnonzero(floor2d.any(axis=0))
        r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
        sub = np.ascontiguousarray(floor2d[r0:r1, c0:c1]).ravel()
        return cls(r0, c0, r1 - r0, c1 - c0, sub)

    @property
    def size(self) -> int:
        return self.hb * self.wb

    def local(self, mask2d: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(
            mask2d[self.r0 : self.r0 + self.hb, self.c0 : self.c0 + self.wb]
        ).ravel()

    def index(self, pos: Position) -> int:
        return (pos[0] - self.r0) * self.wb + (pos[1] - self.c0)

    def position(self, index: int) -> Position:
        r, c = divmod(int(index), self.wb)
        return r + self.r0, c + self.c0


@functools.lru_cache(maxsize=64)
def _neighbours(hb: int, wb: int) -> np.ndarray:
    """``(4, hb * wb)`` int64: local index of the neighbour in each direction, -1 off the box."""
    size = hb * wb
    rows, cols = np.divmod(np.arange(size), wb)
    out = np.full((4, size), -1, dtype=np.int64)
    for d, (dr, dc) in enumerate(DELTAS):
        r2, c2 = rows + dr, cols + dc
        ok = (r2 >= 0) & (r2 < hb) & (c2 >= 0) & (c2 < wb)
        out[d, ok] = (r2 * wb + c2)[ok]
    return out


def dead_cells(floor: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Cells from which a lone box can never be pushed onto a target.

    Args:
        floor: ``(H, W)`` bool, the cells that are not walls.
        targets: ``(H, W)`` bool.

    Returns:
        ``(H, W)`` bool, True on floor cells that are dead (a box there makes the level unsolvable).
    """
    floor = np.asarray(floor, dtype=bool)
    h, w = floor.shape
    live = np.asarray(targets, dtype=bool) & floor
    stack = list(zip(*np.nonzero(live), strict=True))
    while stack:
        r, c = stack.pop()
        for dr, dc in DELTAS:
            # A box at (r - dr, c - dc) reaches (r, c) by a push from (r - 2dr, c - 2dc).
            r1, c1, r2, c2 = r - dr, c - dc, r - 2 * dr, c - 2 * dc
            if 0 <= r2 < h and 0 <= c2 < w and floor[r1, c1] and floor[r2, c2] and not live[r1, c1]:
                live[r1, c1] = True
                stack.append((r1, c1))
    return floor & ~live


# ---------------------------------------------------------------------------------- bitset space


@dataclass(frozen=True)
class _Geometry:
    """Masks that depend on the bounding box ``hb x wb`` and the number of boxes ``k`` only.

    Attributes:
        size: ``S = hb * wb``.
        genuine: per direction d, the bits p (of S) whose neighbour p + d lies in the box.
        distinct: the states whose cells (boxes and player) are pairwise different.
        rel: ``rel[j, d]``: the states whose box j is the player's neighbour in direction d.
        repunit: bit ``i * S`` for every box tuple i; multiplying an S-bit player pattern by it
            repeats the pattern under every box tuple.
    """

    size: int
    genuine: tuple[int, ...]
    distinct: int
    rel: dict[tuple[int, int], int]
    repunit: int


@functools.lru_cache(maxsize=64)
def _geometry(hb: int, wb: int, k: int) -> _Geometry:
    size = hb * wb
    shape = (size,) * (k + 1)
    nbr = _neighbours(hb, wb)
    axes = [
        np.arange(size).reshape([size if a == i else 1 for a in range(k + 1)]) for i in range(k + 1)
    ]
    player = axes[-1]
    distinct = np.ones(shape, dtype=bool)
    for i in range(k):
        distinct &= axes[i] != player
        for j in range(i + 1, k):
            distinct &= axes[i] != axes[j]
    rel = {
        (j, d): _pack(np.broadcast_to(axes[j] == nbr[d][player], shape))
        for j in range(k)
        for d in range(4)
    }
    tile = np.zeros(size ** (k + 1), dtype=bool)
    tile[::size] = True
    return _Geometry(
        size=size,
        genuine=tuple(_pack(nbr[d] >= 0) for d in range(4)),
        distinct=_pack(distinct),
        rel=rel,
        repunit=_pack(tile),
    )


def _shift(x: int, offset: int) -> int:
    """Add ``offset`` to the index of every set bit of ``x``."""
    return x << offset if offset >= 0 else x >> -offset


def _bits_of(x: int) -> list[int]:
    """Indices of the set bits of ``x``, ascending."""
    out = []
    while x:
        low = x & -x
        out.append(low.bit_length() - 1)
        x ^= low
    return out


class BitStateSpace:
    """All (box cells, player cell) states of one level as bits of Python integers.

    Bit index of a state: ``b_0 * S**k + b_1 * S**(k-1) + ... + b_{k-1} * S + p`` where ``S`` is
    the size of the floor's bounding box, ``b_j`` the boxes' and ``p`` the player's local indices
    (``r * wb + c`` in the box). A set of states is an ``int``; :meth:`backward` and
    :meth:`forward` expand a whole BFS layer with a few shifts and ANDs.

    The move masks only check what a move can break (the player's cells, the pushed box's new
    cell, overlaps); that every box stands on floor is inherited from the states expanded, so a
    search must start from valid states (:meth:`encode`, :meth:`goal_states` give such).

    Args:
        walls: ``(H, W)`` bool.
        targets: ``(H, W)`` bool, as many targets as ``num_boxes``.
        num_boxes: number of boxes ``k`` >= 1.

    Raises:
        ValueError: the state space has more than :data:`BITSET_MAX_STATES` states.
    """

    def __init__(self, walls: np.ndarray, targets: np.ndarray, num_boxes: int):
        grid = _Grid.of(~np.asarray(walls, dtype=bool))
        floor = _pack(grid.floor)
        target_bits = _pack(grid.local(np.asarray(targets, dtype=bool))) & floor
        self._setup(grid, floor, target_bits, num_boxes)

    @classmethod
    def from_bits(
        cls,
        origin: Position,
        shape: tuple[int, int],
        floor_bits: int,
        target_bits: int,
        num_boxes: int,
    ) -> BitStateSpace:
        """Build from bit boards of a ``shape = (hb, wb)`` box whose top left cell is ``origin``:
        bit ``r * wb + c`` stands for cell ``(origin[0] + r, origin[1] + c)``."""
        space = cls.__new__(cls)
        hb, wb = shape
        floor = _set_bits(floor_bits, hb * wb)
        mask = np.zeros(hb * wb, dtype=bool)
        mask[floor] = True
        space._setup(_Grid(origin[0], origin[1], hb, wb, mask), floor_bits, target_bits, num_boxes)
        return space

    def _setup(self, grid: _Grid, floor: int, target_bits: int, num_boxes: int) -> None:
        self.grid = grid
        self.k = k = int(num_boxes)
        size = grid.size
        self.num_states = size ** (k + 1)
        if self.num_states > BITSET_MAX_STATES:
            raise ValueError(
                f"{self.num_states} states exceed BITSET_MAX_STATES={BITSET_MAX_STATES}"
            )
        self.place = [size ** (k - j) for j in range(k)]  # place value of box j
        self._geo = geo = _geometry(grid.hb, grid.wb, k)
        self._nbr = _neighbours(grid.hb, grid.wb)
        self._offset = [-grid.wb, grid.wb, -1, 1]
        self.floor_bits = floor
        self.target_bits = target_bits & floor
        # step[d]: bits p where p and p + d are floor; two[d]: p, p + d and p + 2d are floor.
        self._step = [floor & geo.genuine[d] & _shift(floor, -self._offset[d]) for d in range(4)]
        self._two = [
            st & _shift(st, -off) for st, off in zip(self._step, self._offset, strict=True)
        ]
        self._walk_mask = [geo.distinct & st * geo.repunit for st in self._step]
        self._pull_masks: list[tuple[int, int]] | None = None
        self._push_masks: list[tuple[int, int]] | None = None
        self._push_live: int | None = None

    # -- encoding ------------------------------------------------------------------------------

    def encode(self, player: Position, boxes: Sequence[Position]) -> int:
        """Bit index of a state (boxes in the given order)."""
        index = self.grid.index(player)
        for j, box in enumerate(boxes):
            index += self.grid.index(box) * self.place[j]
        return index

    def decode(self, index: int) -> tuple[int, list[int]]:
        """``(player, [box_0, ..., box_{k-1}])`` local indices of a bit index."""
        size = self.grid.size
        index, player = divmod(int(index), size)
        boxes = []
        for _ in range(self.k):
            index, b = divmod(index, size)
            boxes.append(b)
        return player, boxes[::-1]

    def states(self, x: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The states of a set, decoded: ``(indices (M,), players (M,), boxes (M, k))``, int64."""
        indices = _set_bits(x, self.num_states)
        size = self.grid.size
        rest, players = np.divmod(indices, size)
        boxes = np.empty((indices.size, self.k), dtype=np.int64)
        for j in range(self.k - 1, -1, -1):
            rest, boxes[:, j] = np.divmod(rest, size)
        return indices, players, boxes

    def goal_states(self) -> int:
        """Every valid state with all boxes on targets (any free player cell)."""
        targets = _bits_of(self.target_bits)
        players = self.floor_bits & ~self.target_bits
        out = 0
        for order in itertools.permutations(targets):
            out |= players << sum(t * p for t, p in zip(order, self.place, strict=True))
        return out

    # -- expansion -----------------------------------------------------------------------------

    def backward(self, layer: int) -> int:
        """Predecessors of the states in ``layer`` (states one move before them)."""
        if self._pull_masks is None:
            geo = self._geo
            self._pull_masks = [
                (
                    self._offset[d] * (1 + self.place[j]),
                    geo.distinct & geo.rel[j, d] & self._two[d] * geo.repunit,
                )
                for j in range(self.k)
                for d in range(4)
            ]
        out = 0
        for d in range(4):
            # (p, B) <- (p - d, B): the player walked in direction d.
            out |= _shift(layer, -self._offset[d]) & self._walk_mask[d]
        for offset, mask in self._pull_masks:
            # (p, b_j = p + d) <- (p - d, b_j = p): the player pushed box j in direction d.
            out |= _shift(layer, -offset) & mask
        return out

    def forward(self, layer: int, live_bits: int | None = None) -> int:
        """Successors of the states in ``layer`` (effective moves only).

        Args:
            layer: a set of states.
            live_bits: local cells (S-bit int) a box may be pushed onto (default: all floor);
                pass the complement of the dead cells to prune hopeless pushes.
        """
        live = self.floor_bits if live_bits is None else live_bits & self.floor_bits
        if self._push_masks is None or self._push_live != live:
            geo = self._geo
            masks = []
            for j in range(self.k):
                for d in range(4):
                    # After the push: the player p' came from p' - d, the box went to p' + d.
                    back = self._step[_OPPOSITE[d]]
                    ahead = geo.genuine[d] & _shift(live, -self._offset[d])
                    pattern = back & ahead
                    offset = self._offset[d] * (1 + self.place[j])
                    masks.append((offset, geo.distinct & geo.rel[j, d] & pattern * geo.repunit))
            self._push_masks, self._push_live = masks, live
        out = 0
        for d in range(4):
            out |= _shift(layer, self._offset[d]) & self._walk_mask[_OPPOSITE[d]]
        for offset, mask in self._push_masks:
            out |= _shift(layer, offset) & mask
        return out

    def predecessors(self, index: int) -> list[tuple[int, int]]:
        """``(state, action)`` pairs whose move ``action`` leads to state ``index`` (any order)."""
        player, boxes = self.decode(index)
        floor, nbr = self.grid.floor, self._nbr
        out = []
        for d in range(4):
            back = int(nbr[_OPPOSITE[d]][player])
            if back < 0 or not floor[back] or back in boxes:
                continue
            out.append((index - player + back, d))  # walked
            ahead = int(nbr[d][player])
            for j, b in enumerate(boxes):
                if b == ahead:  # pushed box j from `player` to `ahead`
                    out.append((index - player + back - self._offset[d] * self.place[j], d))
        return out


def goal_distance_layers(
    walls: np.ndarray | BitStateSpace,
    targets: np.ndarray | None = None,
    num_boxes: int | None = None,
    max_depth: int = 0,
) -> tuple[BitStateSpace, list[int]]:
    """Backward BFS from every solved state: ``layers[d]`` = states solved optimally in ``d`` moves.

    Args:
        walls: ``(H, W)`` bool, or a ready :class:`BitStateSpace` (then ``targets`` and
            ``num_boxes`` are not given).
        targets: ``(H, W)`` bool with ``num_boxes`` cells set.
        num_boxes: ``k`` >= 1.
        max_depth: deepest layer computed (the search may stop earlier when a layer is empty).

    Returns:
        ``(space, layers)``: the :class:`BitStateSpace` and ``layers[0..D]`` (``int`` bit sets,
        disjoint; boxes are stored under all orderings).

    Raises:
        ValueError: the state space is too large for the bitset method.
    """
    if isinstance(walls, BitStateSpace):
        space = walls
    else:
        if targets is None or num_boxes is None:
            raise TypeError("goal_distance_layers(walls, targets, num_boxes, max_depth)")
        space = BitStateSpace(walls, targets, num_boxes)
    layer = space.goal_states()
    visited = layer
    layers = [layer]
    for _ in range(max_depth):
        layer = space.backward(layer) & ~visited
        if not layer:
            break
        visited |= layer
        layers.append(layer)
    return space, layers


def _solve_bitset(
    walls: np.ndarray,
    targets: np.ndarray,
    boxes: np.ndarray,
    player: Position,
    max_depth: int | None,
    max_nodes: int,
) -> SolveResult:
    space = BitStateSpace(walls, targets, int(boxes.sum()))
    grid = space.grid
    box_cells = [(int(r), int(c)) for r, c in zip(*np.nonzero(boxes), strict=True)]
    start = 1 << space.encode(player, box_cells)
    goal = space.goal_states()
    live = _pack(~grid.local(dead_cells(~walls, targets)) & grid.floor)
    layers = [start]
    visited = start
    nodes = 1
    found = start & goal
    while not found:
        if max_depth is not None and len(layers) > max_depth:
            return SolveResult("no_solution", None, nodes, "bitset")
        layer = space.forward(layers[-1], live_bits=live) & ~visited
        if not layer:
            return SolveResult("no_solution", None, nodes, "bitset")
        nodes += layer.bit_count()  # from one start, box j stays box j: one bit per state
        if nodes > max_nodes:
            return SolveResult("budget_exhausted", None, nodes, "bitset")
        visited |= layer
        layers.append(layer)
        found = layer & goal
    # Walk back from the lowest goal bit through the stored layers.
    index = (found & -found).bit_length() - 1
    actions = []
    for depth in range(len(layers) - 1, 0, -1):
        for prev, action in sorted(space.predecessors(index)):
            if layers[depth - 1] >> prev & 1:
                actions.append(ACTIONS[action])
                index = prev
                break
        else:  # pragma: no cover - a BFS layer always has a parent in the previous one
            raise AssertionError("broken BFS layers")
    return SolveResult("solved", tuple(actions[::-1]), nodes, "bitset")


# ---------------------------------------------------------------------------------- hashed BFS


def _solve_hashed(
    walls: np.ndarray,
    targets: np.ndarray,
    boxes: np.ndarray,
    player: Position,
    max_depth: int | None,
    max_nodes: int,
) -> SolveResult:
    grid = _Grid.of(~walls)
    floor = grid.floor
    nbr = _neighbours(grid.hb, grid.wb)
    # Neighbour lists restricted to floor: -1 where the move hits a wall.
    step = [[int(n) if n >= 0 and floor[n] else -1 for n in nbr[d]] for d in range(4)]
    target_set = frozenset(np.flatnonzero(grid.local(targets) & floor).tolist())
    live = (~grid.local(dead_cells(~walls, targets)) & floor).tolist()
    start = (grid.index(player), tuple(sorted(np.flatnonzero(grid.local(boxes)).tolist())))
    if set(start[1]) <= target_set:
        return SolveResult("solved", (), 1, "hashed")
    parent: dict[tuple[int, tuple[int, ...]], tuple[tuple[int, tuple[int, ...]], int] | None] = {
        start: None
    }
    frontier = [start]
    depth = 0
    while frontier:
        if max_depth is not None and depth >= max_depth:
            return SolveResult("no_solution", None, len(parent), "hashed")
        depth += 1
        nxt = []
        for state in frontier:
            p, bx = state
            for d in range(4):
                t = step[d][p]
                if t < 0:
                    continue
                if t in bx:
                    t2 = step[d][t]
                    if t2 < 0 or t2 in bx or not live[t2]:
                        continue
                    new_boxes = tuple(sorted(t2 if b == t else b for b in bx))
                else:
                    new_boxes = bx
                child = (t, new_boxes)
                if child in parent:
                    continue
                parent[child] = (state, d)
                if new_boxes is not bx and set(new_boxes) <= target_set:
                    actions = []
                    node: tuple[int, tuple[int, ...]] = child
                    while (link := parent[node]) is not None:
                        node, action = link
                        actions.append(ACTIONS[action])
                    return SolveResult("solved", tuple(actions[::-1]), len(parent), "hashed")
                nxt.append(child)
            if len(parent) > max_nodes:
                return SolveResult("budget_exhausted", None, len(parent), "hashed")
        frontier = nxt
    return SolveResult("no_solution", None, len(parent), "hashed")


# ---------------------------------------------------------------------------------- public API


def solve_result(
    walls: np.ndarray,
    targets: np.ndarray,
    boxes: np.ndarray,
    player: Sequence[int],
    *,
    max_depth: int | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    method: Literal["auto", "bitset", "hashed"] = "auto",
) -> SolveResult:
    """Search a shortest solution (fewest moves) and report how the search ended.

    Args:
        walls, targets, boxes: ``(H, W)`` bool arrays; as many boxes as targets. Cells outside the
            walls must be walls (as :mod:`agentgym.envs.xsb` makes them).
        player: ``(row, col)`` of the player.
        max_depth: longest solution looked for (``None``: unbounded).
        max_nodes: states stored before giving up (``budget_exhausted``).
        method: ``"bitset"``, ``"hashed"``, or ``"auto"`` (bitset when the state space has at most
            :data:`BITSET_MAX_STATES` states).

    Returns:
        A :class:`SolveResult`.

    Raises:
        ValueError: inconsistent arrays (shapes, player on a wall or box, boxes != targets), or
            ``method="bitset"`` on a level too large for it.
    """
    walls, targets, boxes, pos = _check_level(walls, targets, boxes, player)
    if max_depth is not None and max_depth < 0:
        raise ValueError(f"max_depth must be >= 0 or None, got {max_depth}")
    k = int(boxes.sum())
    if k == 0 or not (boxes & ~targets).any():
        return SolveResult("solved", (), 1, "bitset" if method == "bitset" else "hashed")
    if method == "auto":
        grid_size = _Grid.of(~walls).size
        method = "bitset" if grid_size ** (k + 1) <= BITSET_MAX_STATES else "hashed"
    if method == "bitset":
        return _solve_bitset(walls, targets, boxes, pos, max_depth, max_nodes)
    if method == "hashed":
        return _solve_hashed(walls, targets, boxes, pos, max_depth, max_nodes)
    raise ValueError(f"method must be 'auto', 'bitset' or 'hashed', got {method!r}")


def solve(
    walls: np.ndarray,
    targets: np.ndarray,
    boxes: np.ndarray,
    player: Sequence[int],
    *,
    max_depth: int | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[str] | None:
    """A shortest solution (fewest moves), or ``None`` if there is none (or the budget ran out).

    See :func:`solve_result` for the arguments and errors; it also tells *why* there is no answer.
    """
    result = solve_result(walls, targets, boxes, player, max_depth=max_depth, max_nodes=max_nodes)
    return list(result.actions) if result.actions is not None else None
