"""A safe, exact parser and evaluator of Countdown arithmetic expressions.

Grammar (white space between tokens is ignored)::

    answer     := expression [ "=" integer ]
    expression := term { ("+" | "-") term }
    term       := unary { ("*" | "/") unary }
    unary      := { "-" } primary
    primary    := integer | "(" expression ")"
    integer    := one or more ASCII digits

Evaluation is exact, with :class:`fractions.Fraction` (``7 / 2`` is 7/2, not 3.5). Nothing is ever
passed to ``eval``: the text is tokenised and parsed by hand, and every input is bounded first, so
that no string can raise, hang or exhaust memory:

* at most ``max_length`` characters (default 200) and ``max_depth`` nested parentheses (default
  16); unary minus chains are parsed iteratively, so they cost no recursion;
* the only characters allowed are digits, ``+ - * / ( ) =`` and white space; ``**`` and ``^``
  (powers, the one way to blow up a short expression) are rejected with their own message;
* division by zero is an error (the expression has no value).

Example:
    >>> result = parse_expression("(100 - 4) / 8 * 2 = 24")
    >>> result.expression, result.value, result.numbers, result.claimed, result.error
    ('(100 - 4) / 8 * 2', Fraction(24, 1), (100, 4, 8, 2), 24, None)
    >>> parse_expression("9**9").error
    "the power operator '**' is not allowed"
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "ExpressionResult",
    "parse_expression",
    "canonical_expression",
    "uses_given_numbers",
    "join_expression",
    "PRECEDENCE",
    "MAX_LENGTH",
    "MAX_DEPTH",
]

MAX_LENGTH = 200
MAX_DEPTH = 16
#: Binding strength of each operator; an integer literal or parenthesised group binds tightest (3).
PRECEDENCE: dict[str, int] = {"+": 1, "-": 1, "*": 2, "/": 2}
ATOM_PRECEDENCE = 3

_OPERATORS = "+-*/()"


@dataclass(frozen=True)
class ExpressionResult:
    """The outcome of :func:`parse_expression`.

    Attributes:
        expression: the text left of ``=``, stripped of surrounding white space.
        value: the exact value (``None`` on error).
        numbers: the integer literals, in order of appearance (the claimed right side excluded).
        claimed: the integer after ``=``, if the answer has one.
        error: ``None`` if the text is a well-formed expression with a value, else the reason.
    """

    expression: str
    value: Fraction | None
    numbers: tuple[int, ...]
    claimed: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


class _ParseError(Exception):
    pass


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif "0" <= ch <= "9":
            j = i
            while j < n and "0" <= text[j] <= "9":
                j += 1
            tokens.append(text[i:j])
            i = j
        elif ch == "*" and text.startswith("**", i):
            raise _ParseError("the power operator '**' is not allowed")
        elif ch == "^":
            raise _ParseError("the power operator '^' is not allowed")
        elif ch in _OPERATORS:
            tokens.append(ch)
            i += 1
        else:
            raise _ParseError(
                f"unexpected character {ch!r}: only integers, + - * / and parentheses are allowed"
            )
    return tokens


class _Cursor:
    """A position in a token list, for the recursive-descent parsers below."""

    def __init__(self, tokens: list[str], max_depth: int):
        self.tokens = tokens
        self.pos = 0
        self.max_depth = max_depth

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token


class _Parser(_Cursor):
    """Recursive descent over a token list; recursion depth is bounded by ``max_depth``."""

    def __init__(self, tokens: list[str], max_depth: int):
        super().__init__(tokens, max_depth)
        self.numbers: list[int] = []

    def expression(self, depth: int) -> Fraction:
        return self._chain(depth, self.term, ("+", "-"))

    def term(self, depth: int) -> Fraction:
        return self._chain(depth, self.unary, ("*", "/"))

    def _chain(
        self, depth: int, operand: Callable[[int], Fraction], operators: tuple[str, ...]
    ) -> Fraction:
        """``operand (op operand)*`` with ``op`` in ``operators``, evaluated left to right."""
        value = operand(depth)
        while self.peek() in operators:
            op = self.take()
            right = operand(depth)
            if op == "+":
                value = value + right
            elif op == "-":
                value = value - right
            elif op == "*":
                value = value * right
            elif right == 0:
                raise _ParseError("division by zero")
            else:
                value = value / right
        return value

    def unary(self, depth: int) -> Fraction:
        negate = False
        while self.peek() == "-":
            self.take()
            negate = not negate
        value = self.primary(depth)
        return -value if negate else value

    def primary(self, depth: int) -> Fraction:
        token = self.take()
        if token is None:
            raise _ParseError("the expression ends too early (an operand is missing)")
        if token == "(":
            if depth >= self.max_depth:
                raise _ParseError(f"parentheses nested deeper than {self.max_depth}")
            value = self.expression(depth + 1)
            if self.take() != ")":
                raise _ParseError("unbalanced parentheses: ')' expected")
            return value
        if token.isdigit():
            self.numbers.append(int(token))
            return Fraction(int(token))
        raise _ParseError(f"an operand was expected, got {token!r}")


def parse_expression(
    text: object, *, max_length: int = MAX_LENGTH, max_depth: int = MAX_DEPTH
) -> ExpressionResult:
    """Parse and evaluate an arithmetic answer exactly; never raises on any input.

    Args:
        text: the answer, e.g. ``"(100 - 4) / 8 * 2"`` or ``"(100 - 4) / 8 * 2 = 24"``.
        max_length: longest accepted text, in characters.
        max_depth: deepest accepted parenthesis nesting.

    Returns:
        An :class:`ExpressionResult`; ``error`` names the first problem found.
    """
    if not isinstance(text, str):
        return ExpressionResult("", None, (), None, f"expected a str, got {type(text).__name__}")
    if len(text) > max_length:
        return ExpressionResult(
            "", None, (), None, f"the expression is longer than {max_length} characters"
        )
    left, equals, right = text.partition("=")
    expression = left.strip()
    claimed: int | None = None
    if equals:
        right = right.strip()
        if not (right.isascii() and right.isdigit()):
            return ExpressionResult(
                expression, None, (), None, "after '=' only the target, a whole number, may follow"
            )
        claimed = int(right)
    try:
        tokens = _tokenize(left)
        if not tokens:
            raise _ParseError("empty expression")
        parser = _Parser(tokens, max_depth)
        value = parser.expression(0)
        if parser.pos < len(tokens):
            raise _ParseError(f"unexpected {tokens[parser.pos]!r} after a complete expression")
    except _ParseError as error:
        return ExpressionResult(expression, None, (), claimed, str(error))
    return ExpressionResult(expression, value, tuple(parser.numbers), claimed, None)


#: A unary minus binds tighter than ``*`` and ``/`` and looser than a literal or a group.
_UNARY_PRECEDENCE = 2.5

# A parsed expression as a tree: ("n", int), ("neg", node) or (op, left, right).
_Node = tuple


class _TreeParser(_Cursor):
    """The grammar of :class:`_Parser`, building the tree instead of the value (no division
    check: it is only run on text that already parsed with a value)."""

    def chain(self, depth: int, operators: str) -> _Node:
        operand = self.term if operators == "+-" else self.unary
        node = operand(depth)
        while (op := self.peek()) is not None and op in operators:
            self.take()
            node = (op, node, operand(depth))
        return node

    def expression(self, depth: int) -> _Node:
        return self.chain(depth, "+-")

    def term(self, depth: int) -> _Node:
        return self.chain(depth, "*/")

    def unary(self, depth: int) -> _Node:
        negate = False
        while self.peek() == "-":
            self.take()
            negate = not negate
        node = self.primary(depth)
        if not negate:
            return node
        # -(-x) is x: a negated group that is itself a negation cancels
        return node[1] if node[0] == "neg" else ("neg", node)

    def primary(self, depth: int) -> _Node:
        token = self.take()
        if token == "(":
            if depth >= self.max_depth:
                raise _ParseError(f"parentheses nested deeper than {self.max_depth}")
            node = self.expression(depth + 1)
            if self.take() != ")":
                raise _ParseError("unbalanced parentheses: ')' expected")
            return node
        if token is not None and token.isdigit():
            return ("n", int(token))
        raise _ParseError("an operand was expected")


def _print_tree(node: _Node) -> tuple[str, float]:
    """``(text, precedence)`` of a tree, with the fewest parentheses that keep it
    (:func:`join_expression`'s rule) and no spaces."""
    if node[0] == "n":
        return str(node[1]), ATOM_PRECEDENCE
    if node[0] == "neg":
        text, prec = _print_tree(node[1])
        return "-" + (text if prec == ATOM_PRECEDENCE else f"({text})"), _UNARY_PRECEDENCE
    op, left, right = node
    left_text, left_prec = _print_tree(left)
    right_text, right_prec = _print_tree(right)
    prec = PRECEDENCE[op]
    if left_prec < prec:
        left_text = f"({left_text})"
    if right_prec < prec or (right_prec == prec and op in "-/"):
        right_text = f"({right_text})"
    return f"{left_text}{op}{right_text}", prec


def canonical_expression(
    text: str, *, max_length: int = MAX_LENGTH, max_depth: int = MAX_DEPTH
) -> str | None:
    """One spelling of the expression :func:`parse_expression` reads in ``text`` (the part left
    of ``=``): no spaces, integers without leading zeros, double minus signs cancelled, and only
    the parentheses the operators' precedence needs (``join_expression``'s rule, under which a
    right operand of ``+`` or ``*`` needs none: ``a + (b - c)`` is ``a+b-c``, with the same exact
    value). Two texts with one canonical expression use the same numbers and have the same
    value. ``None`` for text that is not an expression (bounded like :func:`parse_expression`;
    never raises).

    Example:
        >>> canonical_expression(" 52  -   ( 86  +  27  -  64 ) = 3")
        '52-(86+27-64)'
        >>> canonical_expression("((007)) * --(2 + 3)")
        '7*(2+3)'
    """
    if not isinstance(text, str) or len(text) > max_length:
        return None
    try:
        tokens = _tokenize(text.partition("=")[0])
        if not tokens:
            return None
        parser = _TreeParser(tokens, max_depth)
        tree = parser.expression(0)
        if parser.pos < len(tokens):
            return None
        return _print_tree(tree)[0]
    except _ParseError:
        return None


def uses_given_numbers(used: Iterable[int], given: Iterable[int]) -> bool:
    """Whether ``used`` takes each number of the multiset ``given`` at most as often as given."""
    return not (Counter(used) - Counter(given))


def join_expression(op: str, left: str, left_prec: int, right: str, right_prec: int) -> str:
    """Write ``left op right`` with the fewest parentheses that keep its meaning.

    A side is parenthesised when it binds more loosely than ``op``; the right side also when it
    binds equally and ``op`` is ``-`` or ``/`` (``a - (b - c)``, ``a / (b * c)``).

    Example:
        >>> join_expression("/", "100 - 4", 1, "8", ATOM_PRECEDENCE)
        '(100 - 4) / 8'
    """
    prec = PRECEDENCE[op]
    if left_prec < prec:
        left = f"({left})"
    if right_prec < prec or (right_prec == prec and op in "-/"):
        right = f"({right})"
    return f"{left} {op} {right}"
