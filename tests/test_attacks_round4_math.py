"""Hedged math answers that a fresh attacker found still rewarded after the whole-reply reading of
issue 45 landed (2026-12-05), and the replies that must stay rewarded beside them.

The promise (agentgym/answers.py, issue 45 item 3): a hedge (several different boxed answers,
"a or b", a list where one value is asked, two answer markers that differ) is never rewarded.
Each row of :data:`HEDGES` names two different values and was graded correct; each was a strict
xfail (issue 45, item 5) until agentgym/answers.py was fixed, per kind:

* mixed ``\\fbox``/``\\boxed``, ``\\boxed {4}`` and ``\\boxed 4``: every box command, with white
  space before its braces or a one-token argument (as TeX reads it), goes into one list of runs
  (``_scan_boxes``), so different runs are a hedge whatever command wrote them;
* an unclosed ``\\boxed{``: the reply is read but equals nothing (the box holds the rest of the
  reply, the boxes after it included);
* ``final answer is $3$ or $4$``: the opening math counts only when its sentence ends after it,
  else all that follows is read (``3 or 4``: two parts, never the one value asked);
* several bold or emphasised values: those with only separators between them are one list, as
  boxes are (``**3** or **4**`` is ``3, 4``), and a value joined by a hedge to the emphasised
  answer (``**3** or maybe **4**``) makes the reply equal nothing;
* a sentence read for its last value that joins two different numbers with "or" in any spelling
  (``or maybe``, ``, or possibly``, ``ou``, a Cyrillic ``оr``, ``3.\\nOr 4``) or a hedge word:
  read, equal to nothing;
* two answer markers with different values (``\\boxed{3}`` and ``#### 4``; ``final answer is
  $4$.`` and ``\\boxed{3}``): a hedge, in a whole reply too (its final region keeps every marker);
* step 0's tail starts only at a line after a sentence end, else at a sentence start, never where
  a hedge crosses the break, so the cut cannot split ``3 or\\n4``.

:data:`FURTHER_HEDGES` are forms found while fixing these, each rewarded before against its
reference (checked against the code before the fix). :data:`MUST_PASS` holds single answers next
to these rules, each verdict worked out by hand: each is rewarded, as before the fix, but for the
last (``**3** or **4**`` against ``3 or 4``), which was read as its last bold value, 4, and is now
the list of both.
"""

from __future__ import annotations

import pytest

from agentgym.answers import grade_answer

FILL = "We compute things carefully here. " * 40  # 1,360 characters: a whole reply (step 0)
HEAD = "We compute things carefully here. " * 20  # 680 characters
TAIL = " Thus we are done and every step above checks out." * 19  # 950 characters

HEDGES = [
    ("3", r"\fbox{4} no wait \boxed{3}"),
    ("3", r"\fbox{4}" + FILL + r"\boxed{3}"),
    ("3", r"\boxed{3} or \boxed {4}"),
    ("3", r"\boxed{3} or maybe \boxed 4"),
    ("3", r"\boxed{3}" + FILL + r"\boxed {4}"),
    ("4", r"\boxed{4} so, wait, \boxed{\frac{1}{2}  \boxed{3}"),
    ("3", r"\boxed{3} or \boxed{4"),
    ("3", "The final answer is $3$ or $4$."),
    ("3", FILL + "\nThe final answer is $3$ or $4$."),
    ("4", "The answer is **3** or **4**"),
    ("4", "It is *3* or *4*."),
    ("4", "3 or maybe 4"),
    ("4", "It is 3, or possibly 4."),
    ("4", "3 ou 4"),
    ("4", "3 \u043er 4"),  # a Cyrillic o
    ("3", "So the answer is 3 or maybe 4."),
    ("3", "The answer is 3.\nOr 4."),
    ("4", HEAD + "The answer is 3 or\n4, as the work shows." + TAIL),  # the tail cut the hedge
    ("3", "\\boxed{3}\n#### 4"),
    ("3", "The final answer is $4$. \\boxed{3}"),
]

FURTHER_HEDGES = [
    ("3", r"\boxed{3} or 4"),  # a number joined to the boxes from outside them
    ("3", r"\boxed{3} or maybe 4. " + FILL),  # the same in a whole reply (its region keeps it)
    ("4", "**3** or maybe **4**"),
    ("4", "3 \u0438\u043b\u0438 4"),  # Russian "или"
    ("4", "3 \u6216 4"),  # Chinese "或"
    ("4", "3 o\u200br 4"),  # a zero-width space inside "or"
    ("3", "The answer is 3, maybe 4."),
    # the cut (at 682 of 1,682 characters) falls inside "3.\nOr 4": the tail may not start at "Or"
    ("4", HEAD + "The answer is 3.\nOr 4, as the work shows." + TAIL + " It checks."),
]


@pytest.mark.parametrize(("reference", "reply"), HEDGES + FURTHER_HEDGES)
def test_a_hedged_reply_is_never_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False


#: (reference, reply): single answers beside the hedge rules, each rewarded (worked by hand).
MUST_PASS = [
    ("3", "The answer is 3."),
    ("3", r"\boxed{3}"),
    ("3", r"\boxed{3} ... so \boxed{3}"),  # the same value restated is no hedge
    ("3", "**3**"),
    ("4", r"\boxed 4"),  # a one-token argument, as TeX reads it
    ("4", r"\fbox{4} and \boxed {4}"),  # mixed commands, one value
    ("4", "either way the answer is 4"),
    # "or" inside a word (therefore, for, more) joins nothing; "2 or more" has no second number
    ("4", "Therefore, for 3 more apples, the total is 4."),
    ("15", "With 2 or more red balls, the count is 15."),
    # a hedge in the work, then one final answer: only the sentence of the value read counts
    ("4", r"Is it 3 or 4? We check: 2 + 2 = 4. The answer is \boxed{4}."),
    ("4", "Is it 3 or 4? We check: 2 + 2 = 4. The answer is 4."),
    ("4", FILL + "\nIs it 3 or 4? Adding two and two, the answer is 4."),
    # two markers that say the same value (1/2 = 0.5), or one marker
    ("4", "\\boxed{4}\n#### 4"),
    ("1/2", r"The final answer is $\frac{1}{2}$. \boxed{0.5}"),
    ("28", "The final answer is $28$. I hope it is correct."),
    ("1/2", "It is 1/2, or equivalently 0.5."),  # "or" between equal numbers
    # values with only separators between them are one answer of several parts, boxed or bold
    ("x = 1 or x = 2", r"\boxed{1} or \boxed{2}"),
    ("3 or 4", "The answer is **3** or **4**"),
]


@pytest.mark.parametrize(("reference", "reply"), MUST_PASS)
def test_a_single_answer_beside_the_hedge_rules_is_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is True


def test_a_value_repeated_with_or_is_two_parts() -> None:
    """``x = 3 or x = 3`` is no hedge (one value) but a list of two parts, as before: every part
    of an answer counts once (a matching, as for Math-Verify's repeated parts in
    tests/test_math_verify_table.py), so it is not the one value 3; a repeat of a boxed value
    (``\\boxed{3} ... \\boxed{3}``) is one answer, as the box rules say."""
    assert grade_answer("3", "x = 3 or x = 3")[1] is False
    assert grade_answer("3, 3", "x = 3 or x = 3")[1] is True
