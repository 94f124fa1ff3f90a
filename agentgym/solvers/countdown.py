"""Brute-force Countdown solver: an expression over the given numbers that equals the target.

The search combines two of the remaining values with ``+ - * /`` (both operand orders for ``-`` and
``/``; exact rational arithmetic, so intermediate values may be negative or fractional, as in a
player's answer) until some value equals the target. Checking every intermediate value against the
target covers expressions that use only a subset of the numbers. Multisets of values already shown
to fail are remembered, which keeps five numbers well under a second; six work but are slow.

Example:
    >>> solve([100, 4, 8, 2], 24) is not None
    True
    >>> solve([1, 1], 3) is None
    True

Source: the rules of TinyZero's and RAGEN's Countdown task.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from agentgym.solvers.countdown_expr import ATOM_PRECEDENCE, PRECEDENCE, join_expression

__all__ = ["solve"]

# One value of the search: (exact value, expression text, precedence of its outermost operator).
_Item = tuple[Fraction, str, int]


def solve(numbers: Sequence[int], target: int, use_all: bool = False) -> str | None:
    """An expression using each of ``numbers`` at most once that equals ``target``.

    Args:
        numbers: the given numbers (a multiset; repeats may each be used once).
        target: the value to reach.
        use_all: require every number exactly once (RAGEN's and TinyZero's rule), not a subset.

    Returns:
        The expression text (parseable by
        :func:`~agentgym.solvers.countdown_expr.parse_expression`), or ``None`` if none exists.
    """
    goal = Fraction(target)
    failed: set[tuple[Fraction, ...]] = set()

    def search(items: list[_Item]) -> str | None:
        for value, text, _ in items if not use_all or len(items) == 1 else ():
            if value == goal:
                return text
        key = tuple(sorted(value for value, _, _ in items))
        if len(items) < 2 or key in failed:
            return None
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                rest = items[:i] + items[i + 1 : j] + items[j + 1 :]
                for combined in _combinations(items[i], items[j]):
                    found = search([*rest, combined])
                    if found is not None:
                        return found
        failed.add(key)
        return None

    return search([(Fraction(n), str(n), ATOM_PRECEDENCE) for n in numbers])


def _combinations(a: _Item, b: _Item) -> list[_Item]:
    out: list[_Item] = []
    pairs = ((a, b), (b, a))
    out.append(_join("+", a, b, a[0] + b[0]))
    out.append(_join("*", a, b, a[0] * b[0]))
    for x, y in pairs:
        out.append(_join("-", x, y, x[0] - y[0]))
        if y[0] != 0:
            out.append(_join("/", x, y, x[0] / y[0]))
    return out


def _join(op: str, left: _Item, right: _Item, value: Fraction) -> _Item:
    return value, join_expression(op, left[1], left[2], right[1], right[2]), PRECEDENCE[op]
