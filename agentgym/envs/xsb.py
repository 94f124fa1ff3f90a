"""Sokoban levels in the XSB text format: parse, check and write them.

Symbols: ``#`` wall, ``@`` player, ``+`` player on a goal, ``$`` box, ``*`` box on a goal, ``.``
goal, and floor as a space, ``-`` or ``_``. A file holds several levels separated by blank lines;
lines starting with ``;`` are comments, and the last comment line before a level (``; Level 7``) is
its title. Cells outside the walls become walls in the parsed arrays, so the grid a level renders
is its bounding box, walls all around.

Every problem raises ``ValueError`` with a message that names the level (its index from 0, its
title, the file when known) and the problem: unknown character (with its row and column, from 0,
and the file line), no player, several players, boxes != goals, no boxes, the player can walk out
of the walls (an unclosed room), a box or goal outside the walls, an empty level or file.

Example:
    >>> level = parse_level("#####\\n#@$.#\\n#####")
    >>> level.shape, level.player, int(level.boxes.sum())
    ((3, 5), (1, 1), 1)
    >>> print(level.to_xsb())
    #####
    #@$.#
    #####
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np

__all__ = ["SokobanLevel", "parse_xsb", "parse_level", "load_xsb", "FLOOR_CHARS"]

#: Characters read as empty floor.
FLOOR_CHARS = frozenset(" -_")
_KNOWN = frozenset("#@+$*.") | FLOOR_CHARS


@dataclass(frozen=True, eq=False)
class SokobanLevel:
    """One level: fixed walls and targets, and the boxes' and player's start.

    Attributes:
        walls: ``(H, W)`` bool, read-only; True on walls and on every cell outside the room.
        targets: ``(H, W)`` bool, read-only; the goals.
        boxes: ``(H, W)`` bool, read-only; the boxes' start cells (as many as targets).
        player: ``(row, col)`` of the player, from 0 at the top left.
        title: the level's title (``None`` if it has none).
        index: position in its file (0 for a level parsed alone).
    """

    walls: np.ndarray
    targets: np.ndarray
    boxes: np.ndarray
    player: tuple[int, int]
    title: str | None = None
    index: int = 0

    def __post_init__(self) -> None:
        for name in ("walls", "targets", "boxes"):
            arr = np.array(getattr(self, name), dtype=bool)  # a private copy
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "player", (int(self.player[0]), int(self.player[1])))

    @property
    def shape(self) -> tuple[int, int]:
        """``(H, W)`` of the grid."""
        return self.walls.shape  # type: ignore[return-value]

    @property
    def num_boxes(self) -> int:
        return int(self.boxes.sum())

    def state_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
        """Writable copies ``(walls, targets, boxes, player)`` for an environment's state."""
        return self.walls.copy(), self.targets.copy(), self.boxes.copy(), self.player

    def to_xsb(self) -> str:
        """The level as XSB text (no title line; floor written as a space, trailing ones cut)."""
        lines = []
        for r in range(self.shape[0]):
            row = []
            for c in range(self.shape[1]):
                if self.walls[r, c]:
                    row.append("#")
                elif (r, c) == self.player:
                    row.append("+" if self.targets[r, c] else "@")
                elif self.boxes[r, c]:
                    row.append("*" if self.targets[r, c] else "$")
                else:
                    row.append("." if self.targets[r, c] else " ")
            lines.append("".join(row).rstrip())
        return "\n".join(lines)

    def __eq__(self, other: object) -> bool:
        """Same grid and start (title and index are ignored)."""
        if not isinstance(other, SokobanLevel):
            return NotImplemented
        return (
            self.player == other.player
            and self.shape == other.shape
            and bool((self.walls == other.walls).all())
            and bool((self.targets == other.targets).all())
            and bool((self.boxes == other.boxes).all())
        )

    __hash__ = None  # type: ignore[assignment]


def _where(index: int, title: str | None, source: str | None) -> str:
    name = f"level {index}" + (f" ({title!r})" if title else "")
    return name + (f" in {source}" if source else "")


_METADATA = re.compile(r"^[A-Za-z][A-Za-z0-9 _-]*:")


def _blocks(text: str) -> Iterator[tuple[str | None, list[tuple[int, str]]]]:
    """``(title, [(file line number, grid line), ...])`` for each level of the text.

    Blank and ``;`` lines separate levels (a ``;`` line titles the next one). Metadata lines of
    the common XSB collections (``Title: ...``, ``Author: ...``, ``Comment: ...``: a word and a
    colon, which no grid line holds) separate levels too; ``Title:`` names the level it follows,
    or the next one when it comes first.
    """
    blocks: list[tuple[str | None, list[tuple[int, str]]]] = []
    title: str | None = None
    grid: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r\n")
        stripped = line.strip()
        metadata = _METADATA.match(stripped) is not None
        if not stripped or stripped.startswith(";") or metadata:
            if grid:
                blocks.append((title, grid))
                grid, title = [], None
            if stripped.startswith(";"):
                title = stripped.lstrip(";").strip() or title
            elif metadata and stripped.lower().startswith("title:"):
                name = stripped.split(":", 1)[1].strip() or None
                if blocks and blocks[-1][0] is None and title is None and not grid:
                    blocks[-1] = (name, blocks[-1][1])
                else:
                    title = name or title
            continue
        grid.append((number, line))
    if grid:
        blocks.append((title, grid))
    yield from blocks


def _parse_block(
    grid_lines: list[tuple[int, str]], index: int, title: str | None, source: str | None
) -> SokobanLevel:
    where = _where(index, title, source)
    if not grid_lines:
        raise ValueError(f"{where}: the level is empty (no grid lines)")
    height = len(grid_lines)
    width = max(len(line) for _, line in grid_lines)
    walls = np.zeros((height, width), dtype=bool)
    targets = np.zeros((height, width), dtype=bool)
    boxes = np.zeros((height, width), dtype=bool)
    players: list[tuple[int, int]] = []
    for r, (number, line) in enumerate(grid_lines):
        for c, ch in enumerate(line):
            if ch not in _KNOWN:
                raise ValueError(
                    f"{where}: unknown character {ch!r} at row {r}, col {c} (file line {number}); "
                    "XSB uses # @ + $ * . and space, - or _ for floor"
                )
            walls[r, c] = ch == "#"
            targets[r, c] = ch in "+*."
            boxes[r, c] = ch in "$*"
            if ch in "@+":
                players.append((r, c))
    if not players:
        raise ValueError(f"{where}: no player ('@' or '+')")
    if len(players) > 1:
        raise ValueError(f"{where}: {len(players)} players at {players}; a level has exactly one")
    num_boxes, num_goals = int(boxes.sum()), int(targets.sum())
    if num_boxes == 0:
        raise ValueError(f"{where}: no boxes ('$' or '*')")
    if num_boxes != num_goals:
        raise ValueError(
            f"{where}: {num_boxes} box{'es' * (num_boxes != 1)} but {num_goals} "
            f"goal{'s' * (num_goals != 1)}; they must be equal in number"
        )
    # Flood fill from the player over every non-wall cell (boxes do not block: they can move).
    # Reaching the grid's edge means the player could walk out of the walls.
    player = players[0]
    inside = np.zeros_like(walls)
    inside[player] = True
    stack = [player]
    while stack:
        r, c = stack.pop()
        if r in (0, height - 1) or c in (0, width - 1):
            raise ValueError(
                f"{where}: the room is not closed: the player can walk out of the walls at row "
                f"{r}, col {c}"
            )
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if not walls[nr, nc] and not inside[nr, nc]:
                inside[nr, nc] = True
                stack.append((nr, nc))
    stray = (boxes | targets) & ~inside
    if stray.any():
        r, c = (int(v) for v in np.argwhere(stray)[0])
        what = "box" if boxes[r, c] else "goal"
        raise ValueError(
            f"{where}: {what} at row {r}, col {c} is outside the player's room (unreachable)"
        )
    # Everything the player cannot reach is solid: the rendered grid shows one closed room.
    walls = ~inside
    return SokobanLevel(walls, targets, boxes, player, title=title, index=index)


def parse_xsb(text: str, *, source: str | None = None) -> list[SokobanLevel]:
    """Parse every level of an XSB text.

    Args:
        text: the file's content.
        source: a name for messages (a file path).

    Returns:
        The levels in file order (``level.index`` = position, from 0).

    Raises:
        ValueError: no level in the text, or a malformed level (the message names it and why).
    """
    if not isinstance(text, str):
        raise TypeError(f"XSB text must be a str, got {type(text).__name__}")
    levels = [
        _parse_block(grid, index, title, source)
        for index, (title, grid) in enumerate(_blocks(text))
    ]
    if not levels:
        raise ValueError(f"no levels found{' in ' + source if source else ''}: the text is empty")
    return levels


def parse_level(text: str, *, title: str | None = None) -> SokobanLevel:
    """Parse a text holding exactly one level (``;`` comment lines allowed).

    Raises:
        ValueError: the text is empty, holds several levels, or the level is malformed.
    """
    if not isinstance(text, str):
        raise TypeError(f"XSB text must be a str, got {type(text).__name__}")
    blocks = list(_blocks(text))
    if not blocks:
        raise ValueError(f"{_where(0, title, None)}: the level is empty (no grid lines)")
    if len(blocks) > 1:
        raise ValueError(
            f"expected one level, found {len(blocks)} (blank or ';' lines separate levels)"
        )
    block_title, grid = blocks[0]
    return _parse_block(grid, 0, title or block_title, None)


def load_xsb(path: str | PathLike[str]) -> list[SokobanLevel]:
    """Read and parse an XSB file (UTF-8, with or without a byte-order mark).

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not UTF-8 text, or a level is malformed (the message names it).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: drops a BOM (Windows editors)
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path} is not UTF-8 text ({err.reason} at byte {err.start}): save it as UTF-8"
        ) from err
    return parse_xsb(text, source=str(path))
