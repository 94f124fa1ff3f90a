"""The answer checker of the math environments (agentgym/answers.py, on math-verify).

Every verdict in :data:`PAIRS` was worked out by hand from the mathematics: the two answers are the
same number (True) or not (False), with the reading rules of agentgym/answers.py's docstring (a
sentence's last value counts; units, currency signs and thousands separators are ignored; text
math-verify cannot read, such as number words, is never correct).
"""

from __future__ import annotations

import threading

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


def test_table_is_large_enough() -> None:
    assert len(PAIRS) >= 40
    assert sum(verdict for *_, verdict in PAIRS) >= 20
    assert sum(not verdict for *_, verdict in PAIRS) >= 15


@pytest.mark.parametrize(
    ("reference", "answer", "expected"), PAIRS, ids=[repr(p[:2]) for p in PAIRS]
)
def test_answer_pairs(reference: str, answer: str, expected: bool) -> None:
    assert check_answer(reference, answer) is expected


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
