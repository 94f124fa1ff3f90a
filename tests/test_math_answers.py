"""The answer checker of the math environments (agentgym/answers.py; math-verify for expressions).

Every verdict in :data:`PAIRS` and :data:`STRUCTURE` was worked out by hand from the mathematics:
the two answers are the same number, tuple or set of parts (True) or not (False), with the reading
rules of agentgym/answers.py's docstring (a sentence's last value counts; units, currency signs and
thousands separators are ignored; every part of a several-part answer is required; exact numbers
compare exactly, a decimal approximating a non-terminating number to six significant digits; text
that cannot be read, such as number words, is never correct).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentgym.answers import (
    MAX_ANSWER_CHARS,
    ParsedAnswer,
    check_answer,
    final_answer_text,
    parse_answer,
)

#: (reference, answer, equivalent?), grouped by the form under test.
PAIRS: list[tuple[str, str, bool]] = [
    # thousands separators
    ("1234", "1,234", True),
    ("1000000", "1,000,000", True),
    ("15,000", "15000", True),
    ("42000", "42,000", True),
    ("1234", "$1{,}234$", True),
    ("42", "42,000", False),
    ("1234", "1,234.5", False),
    # units and currency signs
    ("18", "$18.00", True),
    ("18", "18 dollars", True),
    ("10", "€10", True),
    ("10", "£10", True),
    ("5", "5 cm", True),
    ("12", "12 apples", True),
    ("5", "5\\text{ dollars}", True),
    ("5", "\\$5.00", True),
    ("18", "$19", False),
    ("12.5", "12.05 dollars", False),
    # equal fractions and decimals
    ("1/2", "0.5", True),
    ("0.5", "1/2", True),
    ("3/4", "0.75", True),
    ("1/2", "2/4", True),
    ("3.5", "7/2", True),
    ("3.5", "3.50", True),
    ("1/3", "0.333", False),  # differs from 1/3 in the 4th decimal place
    ("0.06", "0.6", False),
    ("4.75", "4.57", False),
    ("3/8", "8/3", False),
    # \boxed{}
    ("42", "\\boxed{42}", True),
    ("42", "The answer is $\\boxed{42}$.", True),
    ("\\boxed{\\frac{3}{4}}", "0.75", True),
    ("42", "\\boxed{24}", False),
    ("5\\sqrt{2}", "The answer is \\boxed{5\\sqrt{2}}.", True),
    # LaTeX
    ("1/2", "\\frac{1}{2}", True),
    ("0.75", "\\dfrac{3}{4}", True),
    ("5/6", "$\\frac{5}{6}$", True),
    ("2", "\\sqrt{4}", True),
    ("5\\sqrt{2}", "The answer is $5\\sqrt{2}$.", True),
    ("5\\sqrt{2}", "\\sqrt{50}", True),
    ("\\frac{5}{6}", "\\frac{6}{5}", False),
    ("2", "\\sqrt{2}", False),
    # trailing punctuation
    ("42", "42.", True),
    ("7", "7,", True),
    ("72", "72 hours.", True),
    ("0.25", "0.25.", True),
    ("42", "42!", True),
    ("43", "42.", False),
    # negative numbers
    ("-7", "-7", True),
    ("-7", "\u22127", True),  # U+2212 MINUS SIGN
    ("-5", "$-5$", True),
    ("-0.5", "-1/2", True),
    ("-7", "7", False),
    ("5", "-5", False),
    # a sentence: its last value counts
    ("42", "I think 41, no wait, 42", True),
    ("42", "42 or 43", False),
    # other equal forms
    ("0.25", "25%", True),
    ("1024", "2^10", True),
    # unreadable or too large: never correct
    ("12", "twelve", False),
    ("42", "", False),
    ("42", "hello", False),
    ("42", "9^9^9^9", False),
]


#: Several parts, pairs, exactness, and the extractors, against the same rules (issue 15).
STRUCTURE: list[tuple[str, str, bool]] = [
    # an "=" inside braces is no equation; a sum is its value, not its lower bound
    ("45", "$\\sum_{k=1}^{9} k$", True),
    ("1", "$\\sum_{k=1}^{9} k$", False),
    ("1", "$\\prod_{k=1}^{10^{6}} k$", False),  # 10^6! is never compared
    ("3/2", "$\\int_{x=1}^{2} x dx$", False),  # integrals are not evaluated: wrong
    # one value in parentheses is that value
    ("2", "(2)", True),
    ("-5", "(-5)", True),
    ("2", "(3)", False),
    # a reference in bare math is read inside delimiters (an answer must be readable as written)
    ("x^2+1", "$x^2+1$", True),
    ("x^2+1", "$x^2+2$", False),
    # every part of a several-part reference is required
    ("12 and 20", "20", False),  # the last part alone is not the answer
    ("12 and 20", "12", False),
    ("12 and 20", "12 and 20", True),
    ("12 and 20", "12, 20", True),
    ("12 and 20", "12; 20", True),
    ("12 and 20", "20 and 12", False),  # ordered unless the task says otherwise (see below)
    ("12 and 20", "12 and 20 and 7", False),
    ("x = 1 or x = 2", "x = 2", False),
    ("x = 1 or x = 2", "x = 1 or x = 2", True),
    ("x = 1 or x = 2", "x = 2 or x = 1", True),  # "or": a set of solutions, order-free
    ("x = 1 or x = 2", "1, 2", True),
    ("\\{1, 2\\}", "\\{2, 1\\}", True),  # a set
    ("42", "42 or 43", False),
    # a pair stays a pair
    ("3, 4", "3.4", False),
    ("3.4", "3, 4", False),
    ("3, 4", "3,4", True),  # a comma that does not group thousands separates parts
    ("(0, 1)", "1", False),
    ("(0, 1)", "0", False),
    ("(0, 1)", "(0, 1)", True),
    ("(0, 1)", "(1, 0)", False),  # a tuple is ordered
    ("(0, 1)", "[0, 1]", True),
    ("(0, 1)", "(0, 1, 2)", False),
    ("(-1, \\frac{1}{2})", "(-1, 0.5)", True),
    # a pair written without spaces is the same pair (math-verify alone reads nothing in it)
    ("(0, 1)", "(0,1)", True),
    ("(0, 1)", "[0,1]", True),
    ("(3, 4)", "(3,4)", True),
    ("(3, 4)", "(4,3)", False),
    ("(3, 4)", "(3,4,5)", False),
    ("(1, 2, 3)", "(1,2,3)", True),
    ("(-1, \\frac{1}{2})", "(-1,1/2)", True),
    ("(0, 1)", "**(0,1)**", True),
    ("(0, 1)", "(0,1]", False),  # a half-open interval, not a pair
    # a sentence that ends with a pair: the pair is the answer, not its last number
    ("(2, 3)", "The point is (2, 3).", True),
    ("(2, 3)", "The point is (2,3).", True),
    ("3", "The point is (2, 3).", False),
    ("(2, 3)", "The point is (3, 2).", False),
    # exact numbers exactly, approximations relatively
    ("3e-9", "4e-9", False),
    ("3e-9", "3 \\times 10^{-9}", True),
    ("3e-9", "0.000000003", True),
    ("0.000000003", "0.000000004", False),
    ("1e-12", "0", False),
    ("18", "18.0000001", False),  # 18 has a finite decimal form: exact
    ("1/3", "0.333333", True),  # 1/3 has none: six significant digits suffice
    ("1/3", "0.33333", False),
    ("2/3", "0.666667", True),
    ("5\\sqrt{2}", "7.071068", True),
    ("5\\sqrt{2}", "7.0711", False),
    ("\\sqrt{2}", "\\sqrt{2} + 10^{-20}", False),  # irrationals to 30 significant digits
    ("123456789012345678901234567890", "123456789012345678901234567891", False),
    # the extractors, by the same rules
    ("42", "#### 42", True),
    ("12 and 20", "#### 12, 20", True),
    ("12 and 20", "So the answer is \\boxed{20}.", False),
    ("12 and 20", "So the answer is \\boxed{12, 20}.", True),
    ("(0, 1)", "$\\boxed{(0, 1)}$", True),
    ("(0, 1)", "\\boxed{1}", False),
    ("42", "The answer is **42**.", True),
    ("12 and 20", "The answer is **12 and 20**.", True),
    ("12 and 20", "The answer is **20**.", False),
    ("1024", "10**3", False),  # a power, not bold
    # a number in single emphasis at the end (after any bold span)
    ("12", "*12*", True),
    ("12", "_12_", True),
    ("12", "***12***", True),
    ("12", "The answer is *12*.", True),
    ("12", "The answer is _12_.", True),
    ("12", "**Step 1**: add 5 and 7. The answer is *12*.", True),
    ("18", "*$18.00*", True),
    ("0.5", "*1/2*", True),
    ("13", "*12*", False),
    ("12", "2*3*2", True),  # a product, not emphasis
    ("12", "*12", False),  # one mark is no emphasis: nothing is read
    # bold LaTeX wraps a number, not a symbol
    ("12", "\\textbf{12}", True),
    ("12", "\\mathbf{12}", True),
    ("12", "$\\boxed{\\textbf{12}}$", True),
    ("12", "\\textbf{13}", False),
    # units with a slash, like other units
    ("5", "5 m/s", True),
    ("12", "12 km/h", True),
    ("2.5", "2.5 m/s", True),
    ("5", "6 m/s", False),
    ("12 and 20", "12 apples and 20 pears", True),
    ("18 and 4", "$18.00 and $4", True),
    ("1234 and 5", "1,234 and 5", True),
    ("1234, 5", "1,234, 5", True),
    ("2", "2x", False),  # a variable, not a unit
    ("x + 1", "1 + x", True),
    ("3", "8 - 7 + 0 + 5 - 3 = 3", True),  # an equation counts its last side
    ("12 and 20", "a = 12, b = 20", True),
]


def test_table_is_large_enough() -> None:
    assert len(PAIRS) >= 40
    assert sum(verdict for *_, verdict in PAIRS) >= 20
    assert sum(not verdict for *_, verdict in PAIRS) >= 15


@pytest.mark.parametrize(
    ("reference", "answer", "expected"), PAIRS, ids=[repr(p[:2]) for p in PAIRS]
)
def test_answer_pairs(reference: str, answer: str, expected: bool) -> None:
    assert check_answer(reference, answer) is expected


@pytest.mark.parametrize(
    ("reference", "answer", "expected"), STRUCTURE, ids=[repr(p[:2]) for p in STRUCTURE]
)
def test_structure_pairs(reference: str, answer: str, expected: bool) -> None:
    assert check_answer(reference, answer) is expected


def test_order_free_when_the_task_says_so() -> None:
    assert check_answer("12 and 20", "20 and 12", unordered=True) is True
    assert check_answer("12 and 20", "20 and 20", unordered=True) is False  # a matching, not a set
    assert check_answer("(0, 1)", "(1, 0)", unordered=True) is False  # a pair stays ordered


def _verdicts(pairs: list[tuple[str, str, bool]]) -> list[bool]:
    return [check_answer(r, a) for r, a, _ in pairs]


def _run_python(
    code: str, data: object, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with ``data`` as JSON on its standard input."""
    return subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )


def test_same_verdicts_in_threads_and_in_a_subprocess() -> None:
    """No signals, no clocks: a thread pool and a fresh interpreter give the hand-worked verdicts."""
    table = PAIRS + STRUCTURE
    expected = [v for *_, v in table]
    with ThreadPoolExecutor(4) as pool:
        chunks = [table[i : i + 10] for i in range(0, len(table), 10)]
        threaded = [v for chunk in pool.map(_verdicts, chunks) for v in chunk]
    assert threaded == expected
    code = (
        "import json, sys\n"
        "from agentgym.answers import check_answer\n"
        "table = json.load(sys.stdin)\n"
        "print(json.dumps([check_answer(r, a) for r, a, _ in table]))\n"
    )
    out = _run_python(code, table)
    assert json.loads(out.stdout) == expected
    # math-verify's "Timeout is disabled" warning is filtered: the size bounds are our interruption
    assert "Timeout is disabled" not in out.stderr, out.stderr


#: Answers whose exact value would take SymPy minutes or more: refused by the size bounds.
SLOW = [
    "$(x+y+z+w)^{40}$",  # would expand to C(43, 3) = 12341 terms
    "\\((a+b+c+d)^{40}\\)",
    "\\boxed{(x+1)^{13}}",
    "$x^{100000}$",
    "$(1+x)^{y}$",
    "\\boxed{(10^{10000})! + 1}",  # a factorial (a trailing "!" alone is punctuation)
    # numbers of more than MAX_DIGITS digits, each exponent within MAX_EXPONENT
    "$(2^{10000})^{10000}$",  # 30 million digits
    "$((2^{100})^{100})^{100}$",  # 301,030 digits
    "$(((10^{10})^{10})^{10})^{100}$",  # 10^100000
    "$(2^{10000})^{-10000}$",  # as close to 0
    "$\\sin((2^{10000})^{10000})$",  # inside a function that needs all of its digits
    "$2^{10000} \\cdot 3^{10000} \\cdot 5^{10000}$",  # 30^10000: 14,772 digits, a product
    "$e^{e^{e^{10}}}$",  # 10^9565 digits
    "$\\exp(10^{9000})$",
    "$\\sinh(10^{9000})$",
    "$x + (2^{10000})^{10000}$",  # inside an expression with variables
    "$\\binom{10^{9000}}{10^{8999}}$",  # a binomial SymPy leaves unevaluated (huge)
    "$\\int_{x=1}^{2} x dx$",  # math-verify reads an integral as its lower bound
]


def test_slow_inputs_are_refused_before_sympy_works_in_any_thread() -> None:
    """Refused by size bounds (deterministic), so the verdict is the same everywhere: wrong.

    A hang guard, not a timing test: before the magnitude bound, ``(2^{10000})^{10000}`` ran for
    minutes inside one big-integer operation (which holds the GIL, so a thread's join timeout
    cannot interrupt it); a fresh interpreter with a generous limit can be stopped.
    """
    code = (
        "import json, sys\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from agentgym.answers import check_answer, parse_answer\n"
        "with ThreadPoolExecutor(1) as pool:\n"
        "    for text in json.load(sys.stdin):\n"
        "        parsed = parse_answer(text)\n"
        "        too_large = parsed is not None and parsed.too_large\n"
        "        worker = pool.submit(check_answer, '2', text).result()\n"
        "        print(json.dumps([text, too_large, check_answer('2', text), worker]), flush=True)\n"
    )
    try:
        out = _run_python(code, SLOW, timeout=120)
    except subprocess.TimeoutExpired as err:  # names the inputs that finished
        done = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout
        pytest.fail(f"a hang: not done in 120 s; the inputs done:\n{done}")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert rows == [[text, True, False, False] for text in SLOW]


@pytest.mark.parametrize("text", SLOW[:6])
def test_slow_inputs_are_refused_in_this_process(text: str) -> None:
    parsed = parse_answer(text)
    assert parsed is not None and parsed.too_large
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(check_answer, "2", text).result() is False


def test_long_numbers_within_the_digit_bound_are_compared() -> None:
    assert check_answer("1e10000", "$10^{10000}$") is True  # 10,001 digits
    assert check_answer("1e10000", "$10^{9999}$") is False
    assert check_answer("2^{10000}", "$(2^{100})^{100}$") is True
    assert not parse_answer("$e^{20000}$").too_large  # type: ignore[union-attr]


def test_parsed_answers_give_the_same_verdicts() -> None:
    for reference, answer, expected in PAIRS[:12]:
        gold, pred = parse_answer(reference), parse_answer(answer)
        assert isinstance(gold, ParsedAnswer)
        assert check_answer(gold, pred if pred is not None else answer) is expected


@pytest.mark.parametrize(
    "text",
    ["", "   ", "twelve", "I don't know", "\\frac{", "((((", "x" * 50, "<answer>42</answer>"],
)
def test_unreadable_answers_parse_to_none(text: str) -> None:
    assert parse_answer(text) is None
    assert check_answer("42", text) is False


@pytest.mark.parametrize("value", [None, 42, b"42", ["42"], 4.2])
def test_non_strings_never_raise(value: object) -> None:
    assert parse_answer(value) is None
    assert check_answer("42", value) is False  # type: ignore[arg-type]
    assert check_answer(value, "42") is False  # type: ignore[arg-type]


def test_long_text_is_not_read() -> None:
    assert parse_answer("1" * MAX_ANSWER_CHARS) is not None
    assert parse_answer("1" * (MAX_ANSWER_CHARS + 1)) is None


@pytest.mark.parametrize("tower", ["9^9^9^9", "10**10**10", "2^(2^40)", "10^100000", "$9^{9^{9}}$"])
def test_huge_powers_read_but_are_never_compared(tower: str) -> None:
    parsed = parse_answer(tower)
    assert parsed is not None and parsed.too_large
    assert check_answer("42", parsed) is False


def test_small_powers_are_compared() -> None:
    parsed = parse_answer("2^10")
    assert parsed is not None and not parsed.too_large


def test_check_in_a_thread_without_signals() -> None:
    """math-verify's timeout uses signal.alarm (main thread only): other threads work without it."""
    results: list[bool] = []
    worker = threading.Thread(
        target=lambda: results.extend(
            [check_answer("1/2", "0.5"), check_answer("42", "43"), check_answer("42", "9^9^9^9")]
        )
    )
    worker.start()
    worker.join(timeout=60)
    assert results == [True, False, False]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Natalia sold 48/2 = 24 clips in May.\n48+24 = 72\n#### 72", "72"),
        ("a #### 1 #### 2,000 ", "2,000"),
        (" 3/4 ", "3/4"),
        ("\\boxed{5}", "\\boxed{5}"),
    ],
)
def test_final_answer_text_takes_gsm8k_final_answer(text: str, expected: str) -> None:
    assert final_answer_text(text) == expected


def test_committed_baseline_math_answers_replay_the_same() -> None:
    """Every math answer of leaderboards/baselines/*.json keeps its reward, success and validity."""
    from tests.baseline_math_replay import differences

    steps, diffs = differences()
    assert steps >= 1400  # 1,422 recorded steps
    assert diffs == []
