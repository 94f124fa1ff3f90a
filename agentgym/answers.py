"""Mathematical answer checking for the math environments, built on Hugging Face's ``math-verify``.

An answer is read by ``math_verify.parse`` (LaTeX and plain-expression extraction into SymPy) and
compared with the reference by ``math_verify.verify`` (exact symbolic equality, or numeric equality
to 6 decimal places). That covers the forms models write, without a home-made pile of regexes:

* thousands separators (``1,234``, ``1{,}234`` in LaTeX) and trailing punctuation (``42.``);
* units and currency signs (``$18.00``, ``€10``, ``5 cm``, ``12 apples``, ``5\\text{ dollars}``);
* equal fractions and decimals (``1/2`` = ``0.5`` = ``\\frac{1}{2}`` = ``2/4``);
* ``\\boxed{...}`` (taken first when present), LaTeX in or out of ``$...$``;
* negative numbers, with ``-`` or the Unicode minus sign U+2212;
* a sentence holding the answer: the *last* expression counts (``I think 41, no wait, 42`` reads 42).

Two small steps come before ``math-verify``, each for a form it does not read on its own: U+2212
becomes ``-``, and text with a LaTeX command (a backslash) but no math delimiter (``$``, ``\\(``,
``\\[``) is wrapped in ``$...$`` (so ``\\dfrac{3}{4}`` and ``\\sqrt 4`` read as LaTeX). So LaTeX
without delimiters is read when it is the whole answer; inside a sentence it needs ``$...$`` or
``\\boxed{}`` (``The answer is 5\\sqrt{2}.`` is not read as 5 times the root of 2).

Conventions inherited from ``math-verify`` (documented there): a trailing ``%`` matches either the
number or its hundredth (``42%`` matches 42 and 0.42); a comma between digit groups of three is a
thousands separator, otherwise a decimal comma (``2,3`` reads 2.3); numbers in words (``twelve``)
and scientific notation (``1e3``) are not read.

Nothing here raises on any text: an answer that cannot be read gives ``None`` from
:func:`parse_answer` and ``False`` from :func:`check_answer`. Work is bounded: text over
:data:`MAX_ANSWER_CHARS` is not read, a number with a power tower or a huge exponent (``9^9^9^9``)
is not compared (it reads, but is wrong), and in the main thread ``math-verify``'s own
``signal.alarm`` timeout also applies (signals work only there; in other threads the bounds above
are the guard).

``math-verify`` is an optional dependency (``pip install 'agentgym[math]'``), imported on first use.

Example:
    >>> check_answer("18", "The total is $18.00.")
    True
    >>> check_answer("1/2", "\\\\frac{1}{2}"), check_answer("1/2", "0.49")
    (True, False)
    >>> parse_answer("no number here") is None
    True

Source: Hugging Face ``math-verify`` (https://github.com/huggingface/Math-Verify), Apache-2.0.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_EXPONENT",
    "ParsedAnswer",
    "parse_answer",
    "check_answer",
    "final_answer_text",
    "require_math_verify",
]

#: Longest answer text (in code points) that is read; longer text is not an answer.
MAX_ANSWER_CHARS = 1000
#: Largest exponent (absolute value) a compared power may have; above it the answer is wrong
#: without comparison (SymPy would try to compute the number: ``9^9^9^9`` never finishes).
MAX_EXPONENT = 10_000
#: ``math-verify``'s timeout in seconds for parsing and for comparing, where signals work. A
#: safety net only, set far above what any bounded answer needs (milliseconds), so that a verdict
#: does not depend on how busy the machine is: replayed episodes must score the same.
TIMEOUT_SECONDS = 30

_INSTALL_HINT = "pip install 'agentgym[math]'"
_UNICODE_MINUS = "\u2212"


def require_math_verify() -> Any:
    """Import and return the ``math_verify`` module.

    Raises:
        ImportError: ``math-verify`` is not installed; the message says how to install it.
    """
    try:
        import math_verify
    except ImportError as err:
        raise ImportError(
            f"the math environments check answers with math-verify, which is not installed: "
            f"run `{_INSTALL_HINT}`"
        ) from err
    return math_verify


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer as ``math-verify`` read it.

    Attributes:
        text: the text given to :func:`parse_answer`.
        values: ``math_verify.parse``'s result: SymPy objects, then the matched source strings.
        too_large: a value holds a power beyond :data:`MAX_EXPONENT` (never compared).
    """

    text: str
    values: tuple[Any, ...]
    too_large: bool = False


def final_answer_text(text: str) -> str:
    """The final answer in a reference text: after the last ``####`` if any (GSM8K's convention).

    Example:
        >>> final_answer_text("48/2 = 24 clips in May. 48+24 = 72 #### 72")
        '72'
        >>> final_answer_text(" 3/4 ")
        '3/4'
    """
    return text.rpartition("####")[2].strip()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _prepare(text: str) -> str:
    text = text.strip().replace(_UNICODE_MINUS, "-")
    unescaped = text.replace("\\$", "")  # \$ is a currency sign, not a math delimiter
    has_delimiter = "$" in unescaped or "\\(" in text or "\\[" in text
    if "\\" in text and not has_delimiter:
        text = f"${text}$"
    return text


def _exponent_too_large(values: tuple[Any, ...]) -> bool:
    """Whether a SymPy value holds a numeric power whose exponent exceeds :data:`MAX_EXPONENT`."""
    import sympy

    for value in values:
        if not isinstance(value, sympy.Basic):
            continue
        for node in sympy.preorder_traversal(value):
            if isinstance(node, sympy.Pow) and not node.exp.free_symbols:
                exponent = node.exp
                if not exponent.is_Number:
                    # An unevaluated exponent (a tower): mpmath evaluates it in floating point with
                    # an unbounded exponent range, quickly.
                    try:
                        exponent = sympy.Float(exponent.evalf(15))
                    except (TypeError, ValueError, ArithmeticError, RecursionError):
                        return True
                try:
                    if not abs(exponent) <= MAX_EXPONENT:  # also true for nan and zoo
                        return True
                except TypeError:  # a complex or undecidable comparison
                    return True
            elif isinstance(node, sympy.factorial) and not node.args[0].free_symbols:
                return True  # factorials of any size are not answers to these tasks
    return False


def parse_answer(text: object) -> ParsedAnswer | None:
    """Read the mathematical answer in ``text``.

    Args:
        text: the answer, e.g. the inside of ``<answer>...</answer>``; any object (non-strings and
            text over :data:`MAX_ANSWER_CHARS` code points give ``None``).

    Returns:
        A :class:`ParsedAnswer`, or ``None`` where ``math-verify`` finds no expression it can turn
        into a SymPy object (words only, empty text, unbalanced LaTeX). Never raises on any text.

    Raises:
        ImportError: ``math-verify`` is not installed.
    """
    math_verify = require_math_verify()
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    prepared = _prepare(text)
    if not prepared:
        return None
    import sympy

    timeout = TIMEOUT_SECONDS if _in_main_thread() else None
    try:
        values = tuple(math_verify.parse(prepared, parsing_timeout=timeout))
    except Exception:  # math-verify catches its own errors; this guards its edge cases too
        return None
    if not any(isinstance(v, (sympy.Basic, sympy.MatrixBase)) for v in values):
        return None
    try:
        too_large = _exponent_too_large(values)
    except Exception:  # a value SymPy cannot walk: do not compare it
        too_large = True
    return ParsedAnswer(text=text, values=values, too_large=too_large)


def check_answer(reference: str | ParsedAnswer | None, answer: str | ParsedAnswer | None) -> bool:
    """Whether ``answer`` equals ``reference`` mathematically.

    Args:
        reference: the reference answer (text, or already read by :func:`parse_answer`).
        answer: the model's answer (text, or already read).

    Returns:
        ``True`` when ``math_verify.verify`` finds them equal; ``False`` when they differ, when
        either cannot be read, when the answer is too large to compare, or when the comparison
        times out or fails. Never raises on any text.

    Raises:
        ImportError: ``math-verify`` is not installed.

    Example:
        >>> check_answer("1234", "1,234"), check_answer("-7", "7")
        (True, False)
    """
    math_verify = require_math_verify()
    gold = reference if isinstance(reference, ParsedAnswer) else parse_answer(reference)
    pred = answer if isinstance(answer, ParsedAnswer) else parse_answer(answer)
    if gold is None or pred is None or pred.too_large or gold.too_large:
        return False
    timeout = TIMEOUT_SECONDS if _in_main_thread() else None
    try:
        return bool(
            math_verify.verify(list(gold.values), list(pred.values), timeout_seconds=timeout)
        )
    except Exception:
        return False
