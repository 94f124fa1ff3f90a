"""Mathematical answer checking for the math environments: exact where the numbers are exact.

An answer is read in three steps, the same for the reference and for the model's answer:

1. **The final span.** The content of the last ``\\boxed{...}`` (or ``\\fbox{}``) if any; else the
   text after the last ``####`` (GSM8K's convention); else a number in single emphasis that ends
   the text (``The answer is *42*.``, ``_42_``, ``***42***``) and follows any bold span; else the
   last markdown-bold span (``**42**``, ``__42__``) if any; else the whole text. Math delimiters
   (``$``, ``\\(``, ``\\[``) and emphasis marks go, so do ``\\text{}``, ``\\mathrm{}``,
   ``\\textbf{}`` and ``\\mathbf{}`` around their content, ``\\$`` is a currency sign, U+2212 is
   ``-``, and trailing punctuation (``42.``, ``7,``) is dropped.
2. **Its parts.** ``(a, b)`` and ``[a, b]`` (spaced or not: ``(0,1)``) are an ordered *tuple*;
   ``\\{a, b\\}`` is a *set*; otherwise the span splits at top-level ``,`` ``;`` ``and`` ``or``
   into a *list* (one part: a *scalar*). A comma between digit groups of three (``1,234``,
   ``1{,}234``) is a thousands separator; any other comma separates parts (``3, 4`` and ``3,4``
   are two numbers, never 3.4). A part written as an equation counts its last side outside
   brackets (``x = 1 or x = 2``; ``8 - 5 = 3`` is 3; ``\\sum_{k=1}^{9} k`` is no equation), and
   one value in parentheses is that value (``(2)`` is 2).
3. **Each part's value.** Numbers are read exactly by this module: integers, decimals (as the
   exact decimal written), ``a/b``, ``\\frac{a}{b}``, scientific forms (``3e-9``,
   ``3 \\times 10^{-9}``), with a currency sign before or a unit after (``$18.00``,
   ``12 apples``, ``5\\text{ cm}``, ``5 m/s``), or ``%`` (``25%`` matches 25 and 0.25). Anything
   else (``\\sqrt{50}``, ``2^10``, ``\\pi/2``, ``x+1``) is parsed by Hugging Face's
   ``math-verify`` into SymPy. A part with other words (``I think 41, no wait, 42``) makes the
   span a *sentence*: then the answer is the tuple of plain numbers it ends with
   (``The point is (2, 3).``), else the single value ``math-verify`` reads last in it (here 42).

Comparison:

* A scalar equals a scalar; a tuple equals a tuple (or a list) of the same length part by part,
  in order; a list or set equals a list or set of the same parts. Parts joined by ``or`` and sets
  are order-free (solutions: ``x = 1 or x = 2`` = ``x = 2 or x = 1``); other lists are ordered
  unless the task says the order is free (``unordered=True``). Every part is required: ``20`` is
  not ``12 and 20``, and ``(0, 1)`` is not ``1``.
* Exact numbers compare exactly (``3e-9`` is not ``4e-9``; ``18.00`` is ``18``; ``0.333`` is
  not ``1/3``). A decimal that approximates a number with no finite decimal form (``1/3``,
  ``\\sqrt{2}``) matches it within a relative :data:`REL_TOL` (six significant digits:
  ``0.333333`` is ``1/3``). Irrational values compare to :data:`EXACT_DIGITS` significant digits
  (``5\\sqrt{2}`` is ``\\sqrt{50}``); expressions with variables through ``math-verify``.

Time: no signals and no clocks. Work is bounded before SymPy sees anything: text over
:data:`MAX_ANSWER_CHARS` is not read; a power with an exponent over :data:`MAX_EXPONENT` (or a
tower), a power of an expression with variables over :data:`MAX_SYMBOLIC_EXPONENT` (a 40th power
of a four-term sum would expand to 12,341 terms), a factorial, a numeric binomial SymPy left
unevaluated (``\\binom{10^{9000}}{10^{8999}}``), an integral or a limit (math-verify reads
``\\int_{x=1}^{2} x dx`` as its bound, 1), an expression of more than
:data:`MAX_NODES` nodes, or a number of more than :data:`MAX_DIGITS` digits before or after the
point (``(2^{10000})^{10000}``, ``e^{10^{9000}}``: its size is estimated from the exponents, bottom
up, never computed) is read but never compared (wrong). ``math-verify`` runs with its timeouts
off, so a verdict is the same in the main thread, another thread or another process, on a busy
machine or an idle one (a wall-clock limit would make it depend on machine speed).

A reference (never an answer) that cannot be read as written is read inside math delimiters
(``x^2+1`` as ``$x^2+1$``).

Nothing here raises on any text: an answer that cannot be read gives ``None`` from
:func:`parse_answer` and ``False`` from :func:`check_answer`. An answer is read when
``math-verify`` finds an expression in it (``c`` and ``+6`` are not read, ``2x`` is) or when it is
one of the forms above that ``math-verify`` misses: a final emphasised number (``*12*``), a tuple of
plain numbers written without spaces (``(0,1)``, ``The point is (2,3).``).

``math-verify`` is an optional dependency (``pip install 'agentgym[math]'``), imported on first use.

Example:
    >>> check_answer("18", "The total is $18.00.")
    True
    >>> check_answer("1/2", "\\\\frac{1}{2}"), check_answer("1/2", "0.49")
    (True, False)
    >>> check_answer("12 and 20", "20"), check_answer("(0, 1)", "1"), check_answer("3e-9", "4e-9")
    (False, False, False)
    >>> parse_answer("no number here") is None
    True

Source: Hugging Face ``math-verify`` (https://github.com/huggingface/Math-Verify), Apache-2.0.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_EXPONENT",
    "MAX_SYMBOLIC_EXPONENT",
    "MAX_DIGITS",
    "MAX_NODES",
    "REL_TOL",
    "EXACT_DIGITS",
    "Value",
    "ParsedAnswer",
    "parse_answer",
    "check_answer",
    "final_answer_text",
    "final_span",
    "require_math_verify",
]

#: Longest answer text (in code points) that is read; longer text is not an answer.
MAX_ANSWER_CHARS = 1000
#: Largest exponent (absolute value) of a power of numbers; above it the answer is wrong without
#: comparison (``9^9^9^9`` would never finish).
MAX_EXPONENT = 10_000
#: Largest exponent of a power of an expression with variables (``(x+y+z+w)^{40}`` is refused).
MAX_SYMBOLIC_EXPONENT = 12
#: Most decimal digits of a number that is compared, before or after the point: a value beyond
#: 10^MAX_DIGITS or closer to 0 than 10^-MAX_DIGITS (estimated to within a factor of two, never
#: computed: ``(2^{10000})^{10000}`` has 30 million digits) is wrong without comparison. Room above
#: :data:`MAX_EXPONENT` for a long mantissa: plain numbers (``1e10000``) stay below it, and so does
#: ``10^{10000}``.
MAX_DIGITS = 12_000
#: Largest SymPy expression (nodes of its tree) that is compared.
MAX_NODES = 200
#: Most parts an answer may have.
MAX_PARTS = 50
#: Relative tolerance of a decimal against a number with no finite decimal form.
REL_TOL = Fraction(1, 10**6)
#: Significant digits to which two irrational values must agree.
EXACT_DIGITS = 30

_INSTALL_HINT = "pip install 'agentgym[math]'"


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
    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if _TIMEOUT_WARNING_FILTER not in logger.filters:
            logger.addFilter(_TIMEOUT_WARNING_FILTER)
    return math_verify


def _not_the_timeout_warning(record: logging.LogRecord) -> bool:
    """Drop math-verify's "Timeout is disabled" warning: the module docstring's size bounds are
    the interruption logic it asks for, so the warning would only alarm users."""
    return not record.getMessage().startswith("Timeout is disabled")


_TIMEOUT_WARNING_FILTER = _not_the_timeout_warning


@dataclass(frozen=True)
class Value:
    """One part of an answer.

    Attributes:
        number: the exact value as a :class:`fractions.Fraction` when the part is a plain number,
            else ``None``.
        expr: the SymPy value when the part needed ``math-verify`` (``\\sqrt{50}``, ``x+1``).
        decimal: written as a decimal (may approximate a number with no finite decimal form).
        percent: written with ``%`` (matches the number or its hundredth).
        too_large: beyond the work bounds (never compared).
    """

    number: Fraction | None = None
    expr: Any = None
    decimal: bool = False
    percent: bool = False
    too_large: bool = False


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer as read (module docstring).

    Attributes:
        text: the text given to :func:`parse_answer`.
        kind: ``"scalar"``, ``"tuple"``, ``"list"`` or ``"set"``.
        parts: the values, in the order written.
        ordered: whether the order of the parts counts (tuples; lists not joined by ``or``).
    """

    text: str
    kind: str
    parts: tuple[Value, ...]
    ordered: bool = True

    @property
    def too_large(self) -> bool:
        """Some part is beyond the work bounds: the answer is never compared (wrong)."""
        return any(p.too_large for p in self.parts)


# ----------------------------------------------------------------------------- the final span


def final_answer_text(text: str) -> str:
    """The final answer in a reference text: after the last ``####`` if any (GSM8K's convention).

    Example:
        >>> final_answer_text("48/2 = 24 clips in May. 48+24 = 72 #### 72")
        '72'
        >>> final_answer_text(" 3/4 ")
        '3/4'
    """
    return text.rpartition("####")[2].strip()


def _last_braced(text: str, command: str) -> str | None:
    """The content of the last ``command{...}`` (balanced braces), or ``None``."""
    start = text.rfind(command + "{")
    if start < 0:
        return None
    depth, i = 0, start + len(command)
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


_BOLD = re.compile(r"(?<![\w*])\*\*(?!\s)(.+?)\*\*(?![\w*])|(?<!\w)__(?!\s)(.+?)__(?!\w)", re.S)
_TRAILING = " \t\n.,;:!?"
#: A final emphasised span (``*12*``, ``_12_``, ``***12***``): only trailing punctuation after it.
_FINAL_EMPHASIS = re.compile(
    r"(?<![\w*])(\*{1,3}|_{1,3})(?![\s*_])([^*_\n]{1,80}?)(?<![\s*_])\1[\s.,;:!?]*$"
)
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\{([^{}]*)\}")


def _final_emphasis(text: str) -> re.Match[str] | None:
    """A final emphasised number (``The answer is *12*.``; group 2 is ``12``), or ``None``."""
    match = _FINAL_EMPHASIS.search(text)
    if match and _plain_value(match[2].strip()) is not None:
        return match
    return None


def final_span(text: str) -> str:
    """Step 1 of the module docstring: the span of ``text`` that holds the final answer.

    Example:
        >>> final_span("So $x = \\\\boxed{12, 20}$."), final_span("... #### 1,234"), final_span("**7**.")
        ('12, 20', '1,234', '7')
    """
    text = text.strip().replace("\u2212", "-")
    for command in ("\\boxed", "\\fbox"):
        boxed = _last_braced(text, command)
        if boxed is not None:
            text = boxed
            break
    else:
        if "####" in text:
            text = text.rpartition("####")[2]
        else:
            bold = list(_BOLD.finditer(text))
            emphasis = _final_emphasis(text)
            if emphasis is not None and (not bold or emphasis.start() >= bold[-1].end()):
                text = emphasis[2]
            elif bold:
                text = bold[-1][1] or bold[-1][2]
    text = text.replace("\\$", " ").replace("\\%", "%").replace("{,}", ",")
    for mark in ("$", "\\(", "\\)", "\\[", "\\]", "`"):
        text = text.replace(mark, " ")
    text = re.sub(r"\\[,;:! ]|\\quad|\\qquad", " ", text)
    text = _WRAPPERS.sub(r" \1 ", text)
    return text.strip(_TRAILING + "*_")


# ----------------------------------------------------------------------------- parts


_THOUSANDS = re.compile(r"(?<![\d.,])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)")
_SEPARATOR = re.compile(r"\s*(?:;|,|\band\b|\bor\b)\s*")
_BRACKETS = {"(": ")", "[": "]", "\\{": "\\}"}


def _top_level_split(span: str) -> tuple[list[str], list[str]]:
    """Parts of ``span`` split at separators outside brackets, and the separators found."""
    parts, seps, depth, last, i = [], [], 0, 0, 0
    while i < len(span):
        ch = span[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            match = _SEPARATOR.match(span, i)
            if match:
                parts.append(span[last:i])
                seps.append(match.group().strip())
                last = i = match.end()
                continue
        i += 1
    parts.append(span[last:])
    return parts, seps


def _split(span: str) -> tuple[str, list[str], bool]:
    """``(kind, parts, ordered)`` of a final span."""
    span = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), span).strip()
    for open_, close in _BRACKETS.items():
        if span.startswith(open_) and span.endswith(close):
            inner = span[len(open_) : len(span) - len(close)]
            parts, seps = _top_level_split(inner)
            if len(parts) > 1 and all(s == "," for s in seps) and _balanced(inner):
                kind = "set" if open_ == "\\{" else "tuple"
                return kind, [p.strip() for p in parts], kind == "tuple"
    parts, seps = _top_level_split(span)
    parts = [p.strip() for p in parts]
    if len(parts) == 1:
        return "scalar", parts, True
    ordered = "or" not in seps
    return "list", parts, ordered


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


# ----------------------------------------------------------------------------- values

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(
    rf"^(?:[$€£¥]\s*)?(?P<sign>-)?\s*(?:[$€£¥]\s*)?(?P<num>{_NUM})"
    rf"(?:\s*(?:[eE](?P<e1>[-+]?\d+)|(?:\\times|\\cdot|\*|×|x)\s*10\s*\^\s*\{{?\s*(?P<e2>[-+]?\d+)\s*\}}?))?"
    r"(?:\s*/\s*(?P<den>\d+))?"
    r"\s*(?P<pct>%)?"
    r"(?P<unit>\s+[A-Za-z][A-Za-z .°/]*|[A-Za-z]{2}[A-Za-z .°]*|\s*°)?$"
)
_FRAC = re.compile(
    r"^(?P<sign>-)?\s*\\[dt]?frac\s*\{\s*(?P<a>[-+]?\d+)\s*\}\s*\{\s*(?P<b>\d+)\s*\}$"
)
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_FUNCTIONS = frozenset({"sqrt", "pi", "sin", "cos", "tan", "log", "ln", "exp", "frac", "infty"})


def _plain_value(part: str) -> Value | None:
    """A plain number (fast path, no SymPy), or ``None``."""
    match = _FRAC.match(part)
    if match:
        if int(match["b"]) == 0:
            return None
        value = Fraction(int(match["a"]), int(match["b"]))
        return Value(number=-value if match["sign"] else value)
    match = _PLAIN.match(part)
    if not match:
        return None
    text = match["num"]
    exponent = int(match["e1"] or match["e2"] or 0)
    if abs(exponent) > MAX_EXPONENT:
        return Value(too_large=True)
    value = Fraction(text) * Fraction(10) ** exponent
    decimal = "." in text or bool(match["e1"] or match["e2"])
    if match["den"]:
        if decimal or int(match["den"]) == 0:
            return None
        value /= int(match["den"])
    if match["sign"]:
        value = -value
    return Value(number=value, decimal=decimal, percent=bool(match["pct"]))


def _clean(part: str) -> bool:
    """No words in ``part`` other than LaTeX commands and the names of functions."""
    return all(w.lower() in _FUNCTIONS for w in _WORD.findall(part))


def _too_large(expr: Any) -> bool:
    """Step 3's bounds (module docstring), on a SymPy value."""
    import sympy

    nodes = 0
    for node in sympy.preorder_traversal(expr):
        nodes += 1
        if nodes > MAX_NODES:
            return True
        if isinstance(node, sympy.Pow):
            exponent = node.exp
            if exponent.free_symbols:
                return True
            if not exponent.is_Number:  # a tower: evaluate the exponent in floating point
                try:
                    exponent = sympy.Float(exponent.evalf(15))
                except (TypeError, ValueError, ArithmeticError, RecursionError):
                    return True
            bound = MAX_SYMBOLIC_EXPONENT if node.base.free_symbols else MAX_EXPONENT
            try:
                if not abs(exponent) <= bound:  # also true for nan and zoo
                    return True
            except TypeError:
                return True
        elif isinstance(node, (sympy.factorial, sympy.gamma)):
            return True
        elif isinstance(node, sympy.binomial) and not node.free_symbols:
            return True  # SymPy evaluates small numeric binomials: one left unevaluated is huge
    return _too_many_digits(expr)


_LOG10_2 = math.log10(2)
_LOG10_E = math.log10(math.e)


def _log10_abs(value: Any) -> float | None:
    """About ``log10|value|`` (within 0.2) of a number SymPy evaluated, real or complex, from its
    binary exponent (never an exact power); ``None`` for 0, infinities, nan and non-numbers."""
    result = None
    for part in value.as_real_imag():
        mpf = getattr(part, "_mpf_", None)
        if mpf is None or not mpf[1]:  # exactly 0, or inf / nan (no mantissa)
            continue
        _, mantissa, exponent, _ = mpf
        digits = (exponent + math.log2(mantissa)) * _LOG10_2
        result = digits if result is None else max(result, digits)
    return result


def _too_many_digits(expr: Any) -> bool:
    """The magnitude bound (module docstring, :data:`MAX_DIGITS`), estimated bottom-up: a power's
    digits are its exponent times its base's, ``e^a``'s are ``a`` times log10(e), so nothing
    larger than the bound is ever evaluated (``(2^{10000})^{10000}`` has 30 million digits,
    ``e^{10^{9000}}`` 10^9000); then the value itself (a product of many bounded powers)."""
    import sympy

    def log10_abs(node: Any) -> float | None:
        return _log10_abs(sympy.N(node, 15))

    try:
        for node in sympy.postorder_traversal(expr):
            if not isinstance(node, sympy.Expr) or node.is_Atom or node.free_symbols:
                continue
            digits = None
            if isinstance(node, sympy.Pow):
                base = log10_abs(node.base)
                power = sympy.re(sympy.N(node.exp, 15))
                if base is not None and power.is_Number:
                    digits = float(power) * base
            elif isinstance(node, (sympy.exp, sympy.sinh, sympy.cosh)):
                argument = sympy.re(sympy.N(node.args[0], 15))
                if argument.is_Number:
                    digits = float(argument) * _LOG10_E
                    if not isinstance(node, sympy.exp):
                        digits = abs(digits)
            if digits is not None and not abs(digits) <= MAX_DIGITS:  # also true for nan
                return True
        if not isinstance(expr, sympy.Expr) or expr.free_symbols:
            return False
        digits = log10_abs(expr)
    except Exception:  # noqa: BLE001 - no number SymPy can evaluate: compared as before
        return False
    return digits is not None and not abs(digits) <= MAX_DIGITS


def _parse(text: str) -> list[Any]:
    math_verify = require_math_verify()
    try:  # timeouts off: no signals (module docstring); the size bounds limit the work
        return list(math_verify.parse(text, parsing_timeout=None))
    except Exception:  # math-verify catches its own errors; this guards its edge cases too
        return []


def _sympy_value(text: str, *, whole: bool) -> Value | None:
    """A value read by ``math-verify`` (bounded), or ``None``.

    With ``whole``, ``text`` is one clean part: it is read as a plain expression when
    ``math-verify`` matches all of it (``2^10``), else as LaTeX (``2x``, ``9^{9^{9}}``). Without,
    ``text`` is a sentence and the last value ``math-verify`` finds in it counts.
    """
    import sympy

    if re.search(r"\\(?:int|iint|oint|lim)(?![a-zA-Z])", text):
        return Value(too_large=True)  # math-verify reads an integral's bound ("1" for \int_1^2)
    values = _parse(text)
    if whole:
        matched = [v for v in values if isinstance(v, str)]
        squeezed = re.sub(r"\s+", "", text)
        if not matched or re.sub(r"\s+", "", matched[-1]) != squeezed:
            values = _parse(f"${text}$")
    elif "\\" in text and not ("$" in text.replace("\\$", "") or "\\(" in text or "\\[" in text):
        values = _parse(f"${text}$")  # LaTeX without delimiters: read only inside them
    exprs = [v for v in values if isinstance(v, sympy.Basic)]
    if not exprs:
        return None
    expr = exprs[0]
    matched = [v for v in values if isinstance(v, str)]
    if matched and isinstance(expr, sympy.Number):  # as written, exactly ("18.00" in a sentence)
        plain = _plain_value(matched[-1].strip(_TRAILING))
        if plain is not None:
            return plain
    try:
        if _too_large(expr):
            return Value(too_large=True)
    except Exception:  # a value SymPy cannot walk: do not compare it
        return Value(too_large=True)
    if isinstance(expr, sympy.Rational):
        return Value(number=Fraction(int(expr.p), int(expr.q)))
    return Value(expr=expr, decimal=bool(expr.atoms(sympy.Float)))


def _last_side(part: str) -> str:
    """The text after the last ``=`` outside brackets ("x = 5", "8 - 7 + 0 + 5 - 3 = 3": the value
    is the last side); ``\\sum_{k=1}^{9} k`` has none (its ``=`` is inside braces)."""
    depth, cut = 0, -1
    for i, ch in enumerate(part):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0:
            cut = i
    return part[cut + 1 :]


def _read_part(part: str) -> Value | None:
    part = _last_side(part).strip(_TRAILING)
    if len(part) > 2 and part[0] == "(" and part[-1] == ")" and _balanced(part[1:-1]):
        part = part[1:-1].strip()  # "(2)", "(-5)": one value in parentheses is that value
    if not part:
        return None
    value = _plain_value(part)
    if value is not None:
        return value
    if not _clean(part):
        return None
    return _sympy_value(part, whole=True)


def parse_answer(text: object) -> ParsedAnswer | None:
    """Read the mathematical answer in ``text`` (module docstring).

    Args:
        text: the answer, e.g. the inside of ``<answer>...</answer>``; any object (non-strings and
            text over :data:`MAX_ANSWER_CHARS` code points give ``None``).

    Returns:
        A :class:`ParsedAnswer`, or ``None`` where no value can be read (words only, empty text,
        unbalanced LaTeX). Never raises on any text.

    Raises:
        ImportError: ``math-verify`` is not installed (needed only for non-plain numbers).
    """
    require_math_verify()
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        return _parse_answer(text)
    except Exception:  # noqa: BLE001 - a guard: never raise on any text
        return None


def _parse_answer(text: str) -> ParsedAnswer | None:
    if not _readable(text):
        return None
    span = final_span(text)
    parsed = _read_span(text, span)
    if parsed is not None:
        return parsed
    # A sentence: a pair of numbers it ends with counts ("The point is (2, 3)."), else its last
    # value (math-verify reads the text with its delimiters).
    tail = _FINAL_TUPLE.search(span)
    parsed = _read_span(text, tail.group()) if tail else None
    if parsed is not None:
        return parsed
    value = _sympy_value(text.strip().replace("\u2212", "-"), whole=False)
    return ParsedAnswer(text=text, kind="scalar", parts=(value or Value(),))


def _read_span(text: str, span: str) -> ParsedAnswer | None:
    """Steps 2 and 3 on ``span``, or ``None`` where some part cannot be read alone."""
    kind, parts, ordered = _split(span) if span else ("scalar", [""], True)
    if len(parts) > MAX_PARTS:
        return None
    values = [_read_part(p) for p in parts]
    if any(v is None for v in values):
        return None
    return ParsedAnswer(text=text, kind=kind, parts=tuple(values), ordered=ordered)  # type: ignore[arg-type]


_SIMPLE_NUMBER = re.compile(r"-?\d{1,15}(?:\.\d{1,15})?")
_TUPLE_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:\s*/\s*\d+)?"
#: A tuple or list of plain numbers ending a span, however spaced: ``(0,1)``, ``[0, 1]``.
#: One plain number in parentheses (``(2)``, ``(-5)``): that number.
_PAREN_NUMBER = re.compile(rf"\(\s*{_TUPLE_NUMBER}\s*\)")
_FINAL_TUPLE = re.compile(
    rf"(?<![\w)\]}}^_])(?:\(\s*{_TUPLE_NUMBER}(?:\s*,\s*{_TUPLE_NUMBER})+\s*\)"
    rf"|\[\s*{_TUPLE_NUMBER}(?:\s*,\s*{_TUPLE_NUMBER})+\s*\])$"
)


def _readable(text: str) -> bool:
    """Whether ``text`` holds an answer: the rule that tells a valid answer from an invalid turn.

    ``math-verify`` finds a mathematical expression in it (the rule since Math-v0 was registered:
    ``c`` and ``+6`` are not read, ``2x`` is), or its final span is one this module reads and
    ``math-verify`` misses: a final emphasised number (``*12*``), a tuple of plain numbers written
    without spaces (``(0,1)``, ``The point is (2,3).``). Recorded episodes replay the same
    (``python -m tests.baseline_math_replay``).
    """
    import sympy

    prepared = text.strip().replace("\u2212", "-")
    if _SIMPLE_NUMBER.fullmatch(prepared):  # math-verify reads these; skip its parse (speed)
        return True
    span = final_span(prepared)
    if _final_emphasis(prepared) or _FINAL_TUPLE.search(span) or _PAREN_NUMBER.fullmatch(span):
        return True

    unescaped = prepared.replace("\\$", "")
    if "\\" in prepared and not ("$" in unescaped or "\\(" in prepared or "\\[" in prepared):
        prepared = f"${prepared}$"
    return bool(prepared) and any(
        isinstance(v, (sympy.Basic, sympy.MatrixBase)) for v in _parse(prepared)
    )


# ----------------------------------------------------------------------------- comparison


def _finite_decimal(q: Fraction) -> bool:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _close(a: Fraction, b: Fraction, tol: Fraction) -> bool:
    return abs(a - b) <= tol * max(abs(a), abs(b))


def _as_fraction(expr: Any) -> Fraction | None:
    """The value of a numeric SymPy expression to :data:`EXACT_DIGITS` digits, or ``None``."""
    import sympy

    if expr.free_symbols:
        return None
    try:
        value = sympy.N(expr, EXACT_DIGITS)
        if not value.is_real or not value.is_finite:
            return None
        return Fraction(str(sympy.Float(value, EXACT_DIGITS)))
    except Exception:  # noqa: BLE001 - a value SymPy cannot evaluate (And, sets...) is no number
        return None


def _numbers_equal(a: Value, b: Value) -> bool:
    if a.number is None and a.expr is None or b.number is None and b.expr is None:
        return False
    x = a.number if a.number is not None else _as_fraction(a.expr)
    y = b.number if b.number is not None else _as_fraction(b.expr)
    if x is None or y is None:
        return False
    exact_x, exact_y = a.number is not None, b.number is not None
    if exact_x and exact_y:
        if x == y:
            return True
        # a decimal approximating a fraction with no finite decimal form (0.333333 for 1/3)
        if a.decimal and not b.decimal and not _finite_decimal(y):
            return _close(x, y, REL_TOL)
        if b.decimal and not a.decimal and not _finite_decimal(x):
            return _close(x, y, REL_TOL)
        return False
    # at least one irrational (or SymPy-evaluated) value
    if a.decimal or b.decimal:
        return _close(x, y, REL_TOL)
    return _close(x, y, Fraction(1, 10 ** (EXACT_DIGITS - 5)))


def _values_equal(a: Value, b: Value) -> bool:
    if a.too_large or b.too_large:
        return False
    for x in _percent_forms(a):
        for y in _percent_forms(b):
            if _numbers_equal(x, y):
                return True
            symbolic = any(
                v.expr is not None and (v.expr.free_symbols or _as_fraction(v.expr) is None)
                for v in (x, y)
            )
            if symbolic and x.expr is not None and y.expr is not None:
                try:  # expressions with variables, complex values; bounded; timeouts off
                    if require_math_verify().verify([x.expr], [y.expr], timeout_seconds=None):
                        return True
                except Exception:  # noqa: BLE001, S112 - a failed comparison is "not equal"
                    continue
    return False


def _percent_forms(v: Value) -> list[Value]:
    if not v.percent or v.number is None:
        return [v]
    return [v, Value(number=v.number / 100, decimal=v.decimal)]


def _match_unordered(a: tuple[Value, ...], b: tuple[Value, ...]) -> bool:
    """A perfect matching of equal parts (augmenting paths; at most MAX_PARTS each side)."""
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in range(len(b)):
            if j not in seen and _values_equal(a[i], b[j]):
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(assign(i, set()) for i in range(len(a)))


def check_answer(
    reference: str | ParsedAnswer | None,
    answer: str | ParsedAnswer | None,
    *,
    unordered: bool = False,
) -> bool:
    """Whether ``answer`` equals ``reference`` mathematically (module docstring).

    Args:
        reference: the reference answer (text, or already read by :func:`parse_answer`).
        answer: the model's answer (text, or already read).
        unordered: the task says the order of a list's parts is free (tuples stay ordered).

    Returns:
        ``True`` when every part matches; ``False`` when they differ, when either cannot be read,
        or when either is too large to compare. Never raises on any text.

    Raises:
        ImportError: ``math-verify`` is not installed.

    Example:
        >>> check_answer("1234", "1,234"), check_answer("-7", "7")
        (True, False)
        >>> check_answer("x = 1 or x = 2", "x = 2 or x = 1"), check_answer("3, 4", "3.4")
        (True, False)
    """
    require_math_verify()
    try:
        return _check(reference, answer, unordered)
    except Exception:  # noqa: BLE001 - a guard: SymPy edge cases are "not equal", never a raise
        return False


def _check(
    reference: str | ParsedAnswer | None, answer: str | ParsedAnswer | None, unordered: bool
) -> bool:
    gold = reference if isinstance(reference, ParsedAnswer) else parse_answer(reference)
    if gold is None and isinstance(reference, str) and "$" not in reference:
        # A reference written as bare math ("x^2+1"): read inside math delimiters. (An answer is
        # not: what counts as a valid answer is unchanged, so recorded episodes replay the same.)
        gold = parse_answer(f"${reference}$")
    pred = answer if isinstance(answer, ParsedAnswer) else parse_answer(answer)
    if gold is None or pred is None or gold.too_large or pred.too_large:
        return False
    if len(gold.parts) != len(pred.parts):
        return False
    if gold.kind == "scalar" or pred.kind == "scalar":
        return gold.kind == pred.kind and _values_equal(gold.parts[0], pred.parts[0])
    ordered = "tuple" in (gold.kind, pred.kind) or (
        gold.kind == "list" and gold.ordered and not unordered
    )
    if ordered:
        return all(_values_equal(x, y) for x, y in zip(gold.parts, pred.parts, strict=True))
    return _match_unordered(gold.parts, pred.parts)
