"""A Gymnasium space of free Unicode text, for observations and actions written by LLMs.

``gymnasium.spaces.Text`` only holds characters from a fixed charset (alphanumerics by default) and
rejects the rest, so LLM text in any alphabet would not be a member of it. :class:`UnicodeText` holds
any Python ``str`` whose length lies in ``[min_length, max_length]`` (length counted in code points),
and registers the shared-memory hooks that ``gymnasium.vector.AsyncVectorEnv`` needs, so vector
environments work in both ``sync`` and ``async`` mode.

Example:
    >>> space = UnicodeText(max_length=16, seed=0)
    >>> space.contains("héllo ✓ 世界")
    True
    >>> isinstance(space.sample(), str)
    True
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Sequence
from ctypes import c_int32
from multiprocessing.sharedctypes import SynchronizedArray
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

__all__ = ["UnicodeText"]

# Code points that sample() draws from: printable ASCII (so that samples often look like text) and
# the rest of the Unicode range without the UTF-16 surrogates, which are not characters.
_SURROGATES = (0xD800, 0xDFFF)
_MAX_CODE_POINT = 0x10FFFF


class UnicodeText(Space[str]):
    """Any ``str`` of ``min_length`` to ``max_length`` code points.

    Args:
        max_length: the longest member, in code points (``int`` >= 1).
        min_length: the shortest member, in code points (default 0).
        sample_max_length: ``sample()`` draws lengths uniformly from ``[min_length,
            min(max_length, sample_max_length)]``, so that samples stay cheap for large spaces.
        seed: seed of the space's own generator (``sample()`` only).

    Raises:
        ValueError: a length is negative or ``min_length > max_length``.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 0,
        sample_max_length: int = 256,
        seed: int | np.random.Generator | None = None,
    ):
        if not (isinstance(max_length, int) and max_length >= 1):
            raise ValueError(f"max_length must be an int >= 1, got {max_length!r}")
        if not (isinstance(min_length, int) and 0 <= min_length <= max_length):
            raise ValueError(
                f"min_length must be an int in [0, max_length={max_length}], got {min_length!r}"
            )
        self.max_length = max_length
        self.min_length = min_length
        self.sample_max_length = max(min_length, min(max_length, sample_max_length))
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string: half its characters printable ASCII, half any non-surrogate code point.

        Args:
            mask: unsupported; must be ``None``.
            probability: unsupported; must be ``None``.

        Returns:
            ``str`` of length in ``[min_length, min(max_length, sample_max_length)]``.
        """
        if mask is not None or probability is not None:
            raise ValueError("UnicodeText.sample() takes no mask or probability")
        rng = self.np_random
        length = int(rng.integers(self.min_length, self.sample_max_length + 1))
        ascii_points = rng.integers(0x20, 0x7F, size=length)
        any_points = rng.integers(
            0, _MAX_CODE_POINT + 1 - (_SURROGATES[1] - _SURROGATES[0] + 1), size=length
        )
        any_points = np.where(any_points >= _SURROGATES[0], any_points + 0x800, any_points)
        use_ascii = rng.random(size=length) < 0.5
        points = np.where(use_ascii, ascii_points, any_points)
        return "".join(map(chr, points.tolist()))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(min_length={self.min_length}, max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.max_length == other.max_length
            and self.min_length == other.min_length
        )

    def to_jsonable(self, sample_n: Any) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        return list(sample_n)


# --- shared memory for AsyncVectorEnv: one int32 row per env, [length, code points..., padding] ---


@create_shared_memory.register(UnicodeText)
def _create_unicode_shared_memory(
    space: UnicodeText, n: int = 1, ctx: ModuleType = mp
) -> SynchronizedArray[c_int32]:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


class SharedTextBatch(Sequence):
    """A live, read-only view of the strings in an AsyncVectorEnv's shared memory.

    ``AsyncVectorEnv`` reads its shared memory once, at start, and relies on the result being a
    view that later writes show through (true of numpy arrays; not of a tuple of ``str``). This
    sequence decodes a row each time it is indexed, so it always shows the latest observations;
    ``copy.deepcopy`` (what ``AsyncVectorEnv(copy=True)``, the default, returns) gives a plain
    ``tuple[str, ...]``.
    """

    def __init__(self, rows: np.ndarray):
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return tuple(self)[index]
        row = self._rows[index]
        return "".join(map(chr, row[1 : 1 + row[0]].tolist()))

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (tuple, list, SharedTextBatch)) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_from_shared_memory(
    space: UnicodeText, shared_memory: SynchronizedArray[c_int32], n: int = 1
) -> SharedTextBatch:
    rows = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape(n, space.max_length + 1)
    return SharedTextBatch(rows)


@write_to_shared_memory.register(UnicodeText)
def _write_unicode_to_shared_memory(
    space: UnicodeText, index: int, value: str, shared_memory: SynchronizedArray[c_int32]
) -> None:
    if not space.contains(value):
        raise ValueError(
            f"observation of length {len(value) if isinstance(value, str) else type(value)} "
            f"does not fit {space}; raise the environment's observation max_length"
        )
    size = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * size : (index + 1) * size]
    row[0] = len(value)
    row[1 : 1 + len(value)] = np.fromiter(map(ord, value), dtype=np.int32, count=len(value))
