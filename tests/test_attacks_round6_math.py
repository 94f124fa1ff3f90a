"""Round 6 attacks on :func:`agentgym.answers.grade_answer`, by a fresh tester who read only the
module docstring of agentgym/answers.py (the rule book), not the implementation.

Every row is a reply that is paid (``grade_answer(reference, reply)[1] is True``) on the code of
this round although its value is not the reference or it hedges; none duplicates a row of
tests/test_attacks_round4_math.py or tests/test_attacks_round5_math.py. Kinds (promise broken in
brackets; "sentence rule": a value is read from a sentence only where the rest of that sentence
cannot change it; "hedge rule": a hedge is never rewarded; "exact rule": exact numbers compare
exactly):

* R6-1, a Unicode vulgar fraction glued to the number (``1½``, ``3½``): a mixed number, read as
  its whole part, in a sentence, after ``####``, in bold and after ``final answer is`` [sentence
  rule; exact rule].
* R6-2, a fraction in words after the number (``3 and a half``, ``3 quarters``), in a sentence,
  after ``####`` and in a box [sentence rule].
* R6-3, a bound or relation in words that is not on the docstring's list (``just under 3``,
  ``upwards of 3``, ``tends to 3``, ``3 and above``) [sentence rule: "a bound after it", "a
  relation just before it"].
* R6-4, an approximation: ``almost 3``, ``3-ish``, and ``\\approx`` / ``≈`` as a relation with no
  left side (the docstring voids ``\\neq 3``, ``\\geq 3``, ``\\to 3``) [exact rule; relation rule].
* R6-5, an operation in words before the number (``twice 2``, ``the reciprocal of 3``, ``the
  negative of 3``, ``a multiple of 3``) [sentence rule: "half of 3" is voided, these are not].
* R6-6, a scale word the list misses (``3M``, ``3 bn``, ``3 score``) [scale words are no unit].
* R6-7, a variable after the number (``3x``, ``3 + x``, ``3 less than x``, ``3 + C``) [sentence
  rule: arithmetic after it].
* R6-8, an equation with a variable on the left read in a sentence by its right side (``x + 1 =
  3`` is x = 2, ``2x = 3``, ``x - 3 = 0``, ``x^2 = 3``) [a relation is compared only as an
  equation; the same equations boxed are refused].
* R6-9, digits split by an invisible character (zero-width space, soft hyphen, word joiner: the
  reader sees ``30``), and dot-grouped thousands ``3.000.000`` [exact rule].
* R6-10, a box plus a different value under another answer marker (``Answer: 4``, ``Final answer:
  4``, ``<answer>4</answer>``, ``**Answer:** 4``) and ``#### 3 (4)`` [hedge rule: "two answer
  markers whose values differ"; round 5 fixed only ``The answer is 4.`` and ``**4**``].
* R6-11, the ``Answer:`` marker twice with different values (plain, bold, ``\\text{}``, in a
  whole reply) [hedge rule: "the same marker twice"; ``The answer is 4. The answer is 3.`` is
  refused].
* R6-12, a hedge in the sentence after the answer (``The final answer is $3$. Or maybe $4$.``,
  ``\\boxed{3}`` then ``But it might be 4.``, ``The answer is 3. 4 is also possible.``, the last
  in a whole reply too) [hedge rule; "a sentence that opens with 'or' continues the one before"].
* R6-13, a hedge before the number in its own sentence (``(4 or) 3``, ``4 perhaps, but 3``,
  ``Possibly 4 - the answer is 3``, ``Maybe 4, but the answer is 3``) [hedge rule: a hedge word
  ties two different numbers in the sentence read].
* R6-14, two values in a markdown table where one is asked [hedge rule; ``4, 3`` is refused].
* R6-15, a set for a tuple or an interval, and the reverse (``\\{2, 7\\}`` for ``(2, 7)``, ``x \\in
  (1, 2)`` for ``\\{1, 2\\}``, ``\\pm 1`` for ``[-1, 1]``) [comparison: a tuple equals a tuple or a
  list, a set a list or a set].
* R6-16, a box changed by math outside it (``$-\\boxed{3}$``, ``\\frac{1}{\\boxed{3}}``,
  ``\\boxed{3}\\frac{1}{2}``, ``\\boxed{3} and a half``) [the spirit of the sentence rule; the
  letter of step 1 reads only the box's contents, so this kind is the weakest].

:data:`KEPT` (added with the fixes) holds single answers the new rules must still pay, and near
neighbours they must not, worked by hand.
"""

from __future__ import annotations

import pytest

from agentgym.answers import grade_answer

FILL = "We compute things carefully here. " * 40  # 1,360 characters: a whole reply (step 0)

#: (kind, reference, reply): each paid today although wrong or hedged.
PAID_WRONG = [
    # R6-1: a vulgar fraction glued to the number
    ("R6-1", "1", "The answer is 1\u00bd."),
    ("R6-1", "3", "#### 3\u00bd"),
    ("R6-1", "3", "**3\u00bd**"),
    ("R6-1", "3", "The final answer is 3\u00bd."),
    # R6-2: a fraction in words after the number
    ("R6-2", "3", "The answer is 3 and a half."),
    ("R6-2", "3", "The answer is 3 quarters."),
    ("R6-2", "3", "#### 3 and a half"),
    ("R6-2", "3", r"\boxed{3 \text{ and a half}}"),
    # R6-3: a bound or relation in words not on the list
    ("R6-3", "3", "The answer is just under 3."),
    ("R6-3", "3", "The answer is upwards of 3."),
    ("R6-3", "3", "The answer tends to 3."),
    ("R6-3", "3", "The answer is 3 and above."),
    # R6-4: an approximation
    ("R6-4", "3", "The answer is almost 3."),
    ("R6-4", "3", "The answer is 3-ish."),
    ("R6-4", "3", r"\boxed{\approx 3}"),
    ("R6-4", "3", "The answer is \u2248 3."),
    # R6-5: an operation in words before the number
    ("R6-5", "2", "The answer is twice 2."),
    ("R6-5", "3", "The answer is the reciprocal of 3."),
    ("R6-5", "3", "The answer is the negative of 3."),
    ("R6-5", "3", "The answer is a multiple of 3."),
    # R6-6: a scale word the list misses
    ("R6-6", "3", "The answer is 3M."),
    ("R6-6", "3", "The answer is 3 bn."),
    ("R6-6", "3", "The answer is 3 score."),
    # R6-7: a variable after the number
    ("R6-7", "3", "The answer is 3x."),
    ("R6-7", "3", "The answer is 3 + x."),
    ("R6-7", "3", "The answer is 3 less than x."),
    ("R6-7", "3", "The answer is 3 + C."),
    # R6-8: an equation in a sentence read by its right side
    ("R6-8", "3", "The answer is x + 1 = 3."),
    ("R6-8", "3", "The answer is 2x = 3."),
    ("R6-8", "0", "The answer is x - 3 = 0."),
    ("R6-8", "3", "So x^2 = 3."),
    # R6-9: digits split by an invisible character; dot-grouped thousands
    ("R6-9", "3", "The answer is 3\u200b0."),
    ("R6-9", "3", "The answer is 3\u00ad0."),
    ("R6-9", "3", "The answer is 3\u20600."),
    ("R6-9", "3", "The answer is 3.000.000."),
    # R6-10: a box plus a different value under another marker
    ("R6-10", "3", "\\boxed{3}\nAnswer: 4"),
    ("R6-10", "3", "\\boxed{3}\nFinal answer: 4"),
    ("R6-10", "3", "\\boxed{3}\n<answer>4</answer>"),
    ("R6-10", "3", "\\boxed{3}\n**Answer:** 4"),
    ("R6-10", "3", "#### 3 (4)"),
    # R6-11: the Answer: marker twice
    ("R6-11", "3", "Answer: 4\nAnswer: 3"),
    ("R6-11", "3", "**Answer:** 4\n**Answer:** 3"),
    ("R6-11", "3", r"\text{Answer: 4}\text{Answer: 3}"),
    ("R6-11", "3", FILL + "\nAnswer: 4\nAnswer: 3"),
    # R6-12: a hedge in the sentence after the answer
    ("R6-12", "3", "The final answer is $3$. Or maybe $4$."),
    ("R6-12", "3", "\\boxed{3}\n\nBut it might be 4."),
    ("R6-12", "3", "The answer is 3. 4 is also possible."),
    ("R6-12", "3", FILL + "\nThe answer is 3. But maybe it's 4."),
    # R6-13: a hedge before the number in its own sentence
    ("R6-13", "3", "The answer is (4 or) 3."),
    ("R6-13", "3", "4 perhaps, but 3."),
    ("R6-13", "3", "Possibly 4 - the answer is 3."),
    ("R6-13", "3", "Maybe 4, but the answer is 3."),
    # R6-14: two values in a table
    ("R6-14", "3", "| a | b |\n|---|---|\n| 4 | 3 |"),
    ("R6-14", "3", "Answer:\n\n| 4 | 3 |"),
    ("R6-14", "3", "| answer |\n|---|\n| 4 |\n| 3 |"),
    # R6-15: a set for a tuple or an interval, and the reverse
    ("R6-15", "(2, 7)", r"\boxed{\{2, 7\}}"),
    ("R6-15", r"\{2, 7\}", r"\boxed{(2, 7)}"),
    ("R6-15", r"\{1,2\}", r"\boxed{x \in (1, 2)}"),
    ("R6-15", "[-1, 1]", r"\boxed{\pm 1}"),
    # R6-16: a box changed by math outside it
    ("R6-16", "3", r"$-\boxed{3}$"),
    ("R6-16", "3", r"\frac{1}{\boxed{3}}"),
    ("R6-16", "3", r"\boxed{3}\frac{1}{2}"),
    ("R6-16", "3", r"\boxed{3} and a half"),
]


@pytest.mark.parametrize(
    ("kind", "reference", "reply"),
    PAID_WRONG,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PAID_WRONG)],
)
def test_a_wrong_or_hedged_reply_is_never_rewarded(kind: str, reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False, (kind, reference, reply)


#: Single answers the round-6 rules must still pay, and near neighbours they must not, worked
#: by hand: (reference, reply, expected).
KEPT = [
    # R6-1, R6-9: read as the reader sees it
    ("3/2", "The answer is 1\u00bd.", True),
    ("7/2", "#### 3\u00bd", True),
    ("1/2", "\\boxed{\u00bd}", True),
    ("3", "#### 3\u00bd", False),
    ("30", "The answer is 3\u200b0.", True),
    ("3000000", "The answer is 3.000.000.", False),
    # R6-2..R6-8: the sentence rule keeps plain single answers
    ("3", "The answer is exactly 3.", True),
    ("6", "The sum of the roots is 6.", True),
    ("3", "The answer is 3 meters.", True),
    ("12", "The answer is 12cm.", True),
    ("5", "The speed is 5 m/s.", True),
    ("125", r"The distance is $\boxed{125\textnormal{ miles}}.$", True),
    ("3", "The answer is x = 3.", True),
    ("4", "We get x^2 = 16, so x = 4.", True),
    ("100", "The answer is about 100.", False),
    ("5", "The answer is 2 + 3 = 5.", True),
    ("3", r"\boxed{3}", True),
    ("3", r"\boxed{x + 1 = 3}", False),
    # R6-10..R6-14: markers that agree are no hedge
    ("3", "\\boxed{3}\nAnswer: 3", True),
    ("3", "Answer: 3\nAnswer: 3", True),
    ("3", "\\boxed{3}\n<answer>3</answer>", True),
    ("3", "**Answer:** 3", True),
    ("3", "\\boxed{3}\n\nThis is the only possible value.", True),
    ("2", "The answer is 2. We could also check that 1+1=2.", True),
    ("3", "The final answer is $3$. I hope it is correct.", True),
    ("3", "Maybe I erred before, but the answer is 3.", True),
    ("15", "With 2 or more red balls, the count is 15.", True),
    # R6-15: a set is a set, a tuple a tuple
    ("(2, 7)", r"\boxed{(2, 7)}", True),
    (r"\{2, 7\}", r"\boxed{\{7, 2\}}", True),
    (r"\{2, 7\}", r"\boxed{2, 7}", True),
    (r"\pm 1", r"\boxed{-1, 1}", True),
    ("(1, 3)", "${1,3}$", True),  # TeX's bare braces group: 1, 3, a list
    # R6-16: a box with nothing touching it
    ("3", r"$\boxed{3}$", True),
    ("-3", r"$\boxed{-3}$", True),
    ("3", r"$x = \boxed{3}$", True),
    ("3", r"The answer is \(\boxed{3}\).", True),
    ("3", r"\boxed{3} apples", True),
]


@pytest.mark.parametrize(("reference", "reply", "expected"), KEPT)
def test_round6_rules_keep_single_answers(reference: str, reply: str, expected: bool) -> None:
    assert grade_answer(reference, reply)[1] is expected
