"""Round 5 attacks on :func:`agentgym.answers.grade_answer`, by a fresh tester who read only the
module docstring of agentgym/answers.py and the Math-v0 row of docs/environments.md (the promise),
not the implementation.

The promises attacked: (1) a hedge (several different answers where one is asked, "or" in any
spelling or language, two answer markers that differ, emphasised values) is never rewarded;
(2) a wrong answer is never rewarded; (3) every grade is bounded in time; (4) a legitimate single
answer is still accepted. Every row of :data:`HEDGES`, :data:`WRONG` and :data:`FALSE_NEGATIVES`
got the opposite verdict on the code of this round (checked one by one); none is marked xfail.

Findings, by kind (promise broken in brackets):

Hedges rewarded [1]

* H1, a join the hedge scan does not know: "alternatively", "but 4 is also possible",
  ``or, depending on interpretation, 4`` (three words after "or", inside the promised four, but
  after a comma), the Arabic ``أو`` and Indonesian ``atau`` (the promise: "or" in any language),
  the logical ``∨`` in text, a parenthesised second value ``3 (4)``. The sentence reading
  (math-verify's ``answer is X``) pays the first value, 3.
* H2, a second value written as a number word: ``3 or four``, ``\\boxed{3} or four``.
* H3, a box plus a different value in a form the region does not treat as a marker: ``The answer
  is 4.``, ``**4**`` (emphasis is a marker for unboxed replies only), a box command other than
  ``\\boxed``/``\\fbox`` (``\\framebox{4}``, ``\\colorbox{yellow}{4}``), or a join the box scan
  does not know (``(alternatively 4)``, ``\\footnote{or 4}``): the box is paid.
* H4, the same marker twice with different values (``#### 4`` then ``#### 3``; ``The final
  answer is 4. The final answer is 3.``): two boxes that differ are a hedge, two ``####`` or two
  ``final answer is`` are read by the last. Paid only for the last, so lower in severity.
* H5, a TeX comment inside a box: ``\\boxed{4 % \\n 3}`` (rendered "43") is paid as 3.
* H6, a false equation of numbers: ``\\boxed{4 = 3}`` and ``\\boxed{1 + 1 = 3}`` are paid as 3
  (the rule "8 - 5 = 3 is 3" takes the last side without checking that the sides agree).

Wrong answers rewarded [2]

* W1, a negative sign lost in a sentence or after ``####``: ``minus 3``, ``negative 3``,
  ``- 3`` (a space after the sign), ``− 3``: all paid as 3.
* W2, a magnitude word read as a unit: ``3 thousand``, ``3k``, ``\\boxed{3\\text{ million}}``,
  ``\\boxed{3 \\text{ dozen}}``: paid as 3.
* W3, scientific notation in a sentence read as its mantissa: ``The answer is 3e1.``,
  ``3 \\times 10^2``, ``3×10²``: paid as 3 (and the right value, 30 or 300, is not paid).
* W4, a relation written without its left side, read as its value: ``\\boxed{\\neq 3}``,
  ``\\boxed{\\geq 3}``, ``\\boxed{\\to 3}``, ``#### > 3``, and an inequality in a sentence
  (``The answer is x \\geq 3.``): paid as 3.
* W5, an inequality or negation in words: ``greater than 3``, ``at most 3``, ``3 or more``,
  ``cannot be 3``, ``different from 3``, ``n\\u043et 3`` (a Cyrillic o: the hedge scan folds it,
  the negation scan does not), ``Ответ не 3``: paid as 3.
* W6, arithmetic or a compound quantity after the value: ``3 squared``, ``half of 3``,
  ``3 hours and 20 minutes``, ``3:20``: paid as 3.
* W7, numbers compared with a tolerance where the promise says exactly: a decimal inside an
  expression (``\\boxed{12345679.0 + 0}`` against 12345678; ``100.0001 + 0`` against 100;
  ``1.000001 \\cdot 1`` against 1; ``\\sqrt{9.000001}`` against 3; the same decimals alone are
  refused) and exact expressions of large magnitude (``\\frac{10^{900}+1}{10^{900}}``,
  ``1 + 10^{-900}`` against 1).

:data:`KEPT` (added with the fixes) holds single answers the new rules must still pay, and near
neighbours they must not, worked by hand.

Time [3]: no finding. :data:`HOSTILE_SHAPES` are shapes not in tests/test_math_answers.py's
``HOSTILE`` table; each graded in milliseconds here, and the test passes today (a guard only).

Clear false negatives [4]

* N1, an escaped dollar outside math followed by punctuation or after a marker: ``The answer is
  \\$42.``, ``#### \\$42``, ``Therefore, Janet makes \\$18 every day.``: not read at all.
* N2, a percent in a sentence: ``The answer is 25%.`` is neither 25 nor 0.25 (``25%`` alone is).
* N3, a chain of equations with a variable: ``\\boxed{x = 4 - 1 = 3}``, ``\\boxed{x = 6/2 = 3}``.
* N4, the mirror images of W1 and W3 (``- 3``, ``minus 3`` against -3; ``3 \\times 10^2``
  against 300), ``\\boxed{3.}`` (not read), ``The answer is 5, not 4.`` (a negation of another
  number voids the sentence) and the repeating decimal ``\\boxed{0.\\overline{3}}`` for 1/3.
"""

from __future__ import annotations

import time

import pytest

from agentgym.answers import CHECK_TIMEOUT_S, MAX_REPLY_CHARS, grade_answer

#: a wall-clock bound for a grade, generous as in tests/test_math_answers.py (a loaded machine)
SLACK_S = 30.0

#: (reference, reply): several different values where one is asked, each paid today.
HEDGES = [
    # H1: a join the hedge scan does not know
    ("3", "The answer is 3, alternatively 4."),
    ("3", "The answer is 3, but 4 is also possible."),
    ("3", "The answer is 3 or, depending on interpretation, 4."),
    ("3", "The answer is 3 \u0623\u0648 4."),  # Arabic "or"
    ("3", "The answer is 3 atau 4."),  # Indonesian "or"
    ("3", "The answer is 3 \u2228 4."),  # logical or
    ("3", "The answer is 3 (4)."),
    # H2: the second value as a number word
    ("3", "The answer is 3 or four."),
    ("3", r"\boxed{3} or four"),
    # H3: a box plus a different value the region does not read as a marker
    ("3", "\\boxed{3}\n\nThe answer is 4."),
    ("3", "\\boxed{3}\n\n**4**"),
    ("3", r"\fbox{3} \framebox{4}"),
    ("3", r"\boxed{3} \colorbox{yellow}{4}"),
    ("3", r"\boxed{3} (alternatively 4)"),
    ("3", r"\boxed{3}\footnote{or 4}"),
    # H4: the same marker twice with different values (paid for the last only)
    ("3", "#### 4\n#### 3"),
    ("3", "The final answer is 4. The final answer is 3."),
    # H5: a TeX comment in a box (rendered 43 and 14)
    ("3", "\\boxed{4 % \n 3}"),
    ("4", "\\boxed{1%\n4}"),
    # H6: a false equation of numbers names two values
    ("3", r"\boxed{4 = 3}"),
    ("3", r"\boxed{1 + 1 = 3}"),
]


@pytest.mark.parametrize(("reference", "reply"), HEDGES)
def test_a_hedge_is_never_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False


#: (reference, reply): a value other than the reference, each paid today.
WRONG = [
    # W1: a negative sign lost
    ("3", "The answer is minus 3."),
    ("3", "It drops to negative 3."),
    ("3", "The answer is - 3."),
    ("3", "The value is \u2212 3."),
    ("3", "#### minus 3"),
    # W2: a magnitude word read as a unit
    ("3", "The answer is 3 thousand."),
    ("3", "The answer is 3k."),
    ("3", r"\boxed{3\text{ million}}"),
    ("3", r"\boxed{3 \text{ dozen}}"),
    # W3: scientific notation in a sentence read as its mantissa
    ("3", "The answer is 3e1."),
    ("3", r"The answer is 3 \times 10^2."),
    ("3", "The answer is 3\u00d710\u00b2."),
    # W4: a relation without its left side read as its value
    ("3", r"\boxed{\neq 3}"),
    ("3", r"\boxed{\geq 3}"),
    ("3", r"\boxed{\to 3}"),
    ("3", "#### > 3"),
    ("3", r"The answer is x \geq 3."),
    # W5: an inequality or a negation in words
    ("3", "The answer is greater than 3."),
    ("3", "The answer is at most 3."),
    ("3", "The answer is 3 or more."),
    ("3", "The answer cannot be 3."),
    ("3", "The answer is different from 3."),
    ("3", "The answer is n\u043et 3."),  # a Cyrillic o in "not"
    ("3", "\u041e\u0442\u0432\u0435\u0442 \u043d\u0435 3."),  # Russian "the answer is not 3"
    # W6: arithmetic or a compound quantity after the value
    ("3", "The answer is 3 squared."),
    ("3", "The answer is half of 3."),
    ("3", "The answer is 3 hours and 20 minutes."),
    ("3", "The answer is 3:20."),
    # W7: a tolerance where the promise says exactly
    ("12345678", r"\boxed{12345679.0 + 0}"),
    ("100", r"\boxed{100.0001 + 0}"),
    ("1", r"\boxed{1.000001 \cdot 1}"),
    ("3", r"\boxed{\sqrt{9.000001}}"),
    ("1", r"\boxed{\frac{10^{900}+1}{10^{900}}}"),
    ("1", r"\boxed{1 + 10^{-900}}"),
]


@pytest.mark.parametrize(("reference", "reply"), WRONG)
def test_a_wrong_answer_is_never_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False


#: (reference, reply): one clearly marked answer equal to the reference, each given 0 today.
FALSE_NEGATIVES = [
    # N1: an escaped dollar
    ("42", r"The answer is \$42."),
    ("42", r"#### \$42"),
    ("18", r"Therefore, Janet makes \$18 every day."),
    # N2: a percent in a sentence
    ("25", "The answer is 25%."),
    ("0.25", "The probability is 25%."),
    # N3: a chain of equations with a variable
    ("3", r"\boxed{x = 4 - 1 = 3}"),
    ("3", r"\boxed{x = 6/2 = 3}"),
    # N4: others
    ("-3", "The answer is - 3."),
    ("-3", "The answer is minus 3."),
    ("300", r"The answer is 3 \times 10^2."),
    ("3", r"\boxed{3.}"),
    ("5", "The answer is 5, not 4."),
    ("1/3", r"\boxed{0.\overline{3}}"),
]


@pytest.mark.parametrize(("reference", "reply"), FALSE_NEGATIVES)
def test_a_single_correct_answer_is_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is True


def _fill(unit: str) -> str:
    return unit * (MAX_REPLY_CHARS // len(unit))


#: hostile replies of (almost) MAX_REPLY_CHARS characters in shapes of this round's attacks
HOSTILE_SHAPES: dict[str, str] = {
    "escaped dollars before numbers": _fill("\\$3 "),
    "comments in a box": "\\boxed{" + "%\n" * 7000 + "3}",
    "other box commands": _fill("\\framebox{3} or "),
    "joins after a comma": _fill("3 or, depending on it, "),
    "negations in words": _fill("cannot be 3, "),
    "number words joined": _fill("3 or four "),
}


@pytest.mark.parametrize("name", list(HOSTILE_SHAPES))
def test_hostile_shapes_are_graded_within_the_limit(name: str) -> None:
    text = HOSTILE_SHAPES[name]
    assert len(text) <= MAX_REPLY_CHARS
    start = time.monotonic()
    _, correct = grade_answer("2", text)
    seconds = time.monotonic() - start
    assert correct is False
    assert seconds <= CHECK_TIMEOUT_S + SLACK_S, (name, seconds)


#: (reference, reply, expected): the round-5 rules against over-reach, worked by hand: a single
#: answer the new sentence, box and marker rules must still pay (and neighbours they must not).
KEPT = [
    ("3", "The answer is 3 apples.", True),
    ("-3", "The answer is -3.", True),
    ("5", "The answer is 2 + 3 = 5.", True),
    ("3", "It costs 3 dollars, so the answer is 3.", True),
    ("0.1", "The answer is 10%.", True),
    ("1000", "The answer is 1,000.", True),
    ("1/2", "The answer is 0.5 or 1/2.", True),
    ("7", "The answer is 7 (seven).", True),
    ("7", "The answer is 7 (six).", False),
    ("4", "\\boxed{4}. The answer is 4.", True),
    ("4", "The answer is \\boxed{4}. **Answer: 4**", True),
    ("3", "#### 3\n#### 3", True),
    ("3", r"\boxed{3}\footnote{see above}", True),
    ("3", r"\boxed{3} (4)", False),
    ("3", r"\boxed{3} or three", True),
    ("25", r"\boxed{25\%}", True),
    ("3", r"\boxed{x = 3}", True),
    ("3", r"\boxed{8 - 5 = 3}", True),
    ("11", "$x = 5+5+1 = 7 =11$", True),  # unboxed: the last side, as Math-Verify reads it
    ("1/6", r"\boxed{0.1\overline{6}}", True),
    ("300", "The answer is 3e2.", True),
    ("0.5", r"\boxed{0.25 + 0.25}", True),
    ("12", "Therefore, there are 12 sequences that meet the three given conditions.", True),
    ("3", r"\framebox[2cm]{3}", True),
    ("3", r"\fcolorbox{red}{yellow}{3}", True),
    ("3", "The answer is less than or equal to 3.", False),
    ("3", "The answer is 3\u00b2.", False),
    ("3", "The answer is 3 or, as some argue, 4.", False),
    ("3", "#### 3\n\nThe answer is 4.", False),
    ("-3", "#### \u2212 3", True),
]


@pytest.mark.parametrize(("reference", "reply", "expected"), KEPT)
def test_round5_rules_keep_single_answers(reference: str, reply: str, expected: bool) -> None:
    assert grade_answer(reference, reply)[1] is expected
