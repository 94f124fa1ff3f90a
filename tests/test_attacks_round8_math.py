"""Round 8 attacks on :func:`agentgym.answers.grade_answer`, by a fresh tester who read only the
module docstring of agentgym/answers.py (the rule book) and the public function docstrings, not
the implementation.

Every row of :data:`FOUND` is a reply that is paid (``grade_answer(reference, reply)[1] is
True``) on the code of this round although it does not commit to one value equal to the
reference: it hedges between two values, or its value is not the reference. Every row of
:data:`FALSE_NEGATIVES` is a single correct answer in a form the rule book promises to read, and
it is not paid. None duplicates a row of tests/test_attacks_round4_math.py to
tests/test_attacks_round7_math.py. Kinds (promise broken in brackets; "hedge rule": a hedge is
never rewarded; "sentence rule": a value is read from a sentence only where the rest of that
sentence cannot change it):

* R8-1, arithmetic after a box in the same math (``$\\boxed{3} + 1$``, ``$\\boxed{3} - 1$``,
  ``$\\boxed{3}\\pi$``, ``$\\boxed{3}x$``, ``$\\boxed{3}e2$``): paid as the boxed 3 [math outside
  a box that changes it is read but equal to nothing; ``\\boxed{3}\\frac{1}{2}`` and
  ``(\\boxed{3})^2`` are refused]. A FARMING template: any box followed by ``+ k``.
* R8-2, a hedge join followed by punctuation before the second value (``\\boxed{3} or ... 4``,
  ``or = 4``, ``or -- 4``, ``or ? 4``, ``or -> 4``; also ``ór 4``, ``|| 4``, ``else 4``, ``if not,
  4``; before the box too: ``4 or ... \\boxed{3}``, ``4 || \\boxed{3}``; in emphasis: ``**3** or
  ... **4**`` is paid as 4): paid as the box [hedge rule: "or" "with punctuation or brackets
  around it", "any value up to the next space"].
* R8-3, a number that is the argument of a command read as the value: ``\\boxed{\\binom 5 3}``
  (10) paid as 3, ``\\boxed{\\binom 53}`` as 53, ``\\log_2 8`` (3) as 8; also ``\\sin^{2} 3``,
  ``\\frac{1} 3``, ``e^ 3``, ``\\log~ 3``, ``\\operatorname{sqrt} 3`` [a number right after a
  command or function word is its argument; ``\\binom`` takes two arguments].
* R8-4, a Unicode radical set apart from its argument: ``√ 9`` (3) paid as 9, ``∛ 8`` as 8; also
  ``\\boxed{\\sqrt[] 9}`` and ``\\boxed{\\sqrt{{}} 9}`` paid as 9 [sentence rule; ``\\sqrt`` with
  its argument, none empty].
* R8-5, the ``Answer:`` marker with its value on the next line (``\\boxed{3}`` then ``Answer:\\n4``;
  ``Answer: 3`` then ``Answer:\\n4``) [hedge rule: every ``Answer:`` sentence is a marker; the
  same marker twice with different values is a hedge].
* R8-6, two numbers in a box parted by a spaced pair of symbols or an empty group (``\\boxed{3 =
  = 4}``, ``\\boxed{3 - > 4}``, ``3 < > 4``, ``3 :: 4``, ``3 ^ ^ 4``, ``\\boxed{3 {} 4}``, ``3 ()
  4``, ``3 [] 4``, ``3^{} 4``, ``10^0 4``): paid as the last [never ``==`` or ``->``; in a box
  every side of ``=`` must agree; plain numbers side by side are no value].
* R8-7, a number in parentheses after the number inside a box: ``\\boxed{3 (-4)}`` (-12) and
  ``\\boxed{3 (4)}`` paid as 3, ``\\boxed{3 ( 4 )}`` and ``\\boxed{3 \\left( 4 \\right)}`` as 4
  ["``3 (4)``" equals nothing].
* R8-8, a power or scale word after a box or a ``####`` value (``\\boxed{3} squared``,
  ``cubed``, ``factorial``, ``\\boxed{3}M``, ``\\boxed{3} K``, ``\\boxed{3}千``, ``\\boxed{3}
  B.C.E.``, ``\\boxed{3} negative``; ``#### 3 bn``, ``#### 3 quarters``, ``#### 3 score``, ``####
  3 squared``, ``#### 3 M``), and kin: a fraction or decimal after a box (``\\boxed{3} and 1/2``,
  ``\\boxed{3}.5``) [after a box "a digit, power, fraction, fraction word, scale or sign word";
  sentence rule, whose own examples ``3 bn``, ``3 score``, ``3 quarters`` these are].
* R8-9, a scale word of another language after a sentence's number: ``The answer is 3万.``
  (30,000), ``3 Mio.``, ``3 тысяч``, ``3 млн``, ``3 tausend``, ``3 millones``, ``3 Hundert``; also
  ``3 K``, ``3 hundredths``, ``3 negative`` [sentence rule: a scale word, or one that changes its
  sign or scale, after it].

Also paid, left out for the row limit and added as rows with the fix (R8-L; kin of each kind
are rows too, and R8-K rows keep what must still be paid): a box and a second value after an
answer word not on the list (``\\boxed{3}`` then ``答え：4``, ``Antwoord: 4``, ``Odpowiedź: 4``, ``Cevap: 4``,
``답: 4``, ``Đáp án: 4``, ``Jawaban: 4``, ``Ans: 4``, ``### Final Answer\\n4``).

False negatives (promised forms that are not read):

* R8-N1, ``\\boxed{90\\degree}``: ``\\degree`` ending its part is on the closed list (so is
  sizing, yet ``\\boxed{\\bigl(3\\bigr)}`` is not paid either; ``答案：3`` alone, the listed
  spelling with its full-width colon, is not paid while ``答案: 3`` is).
"""

from __future__ import annotations

import pytest

from agentgym.answers import grade_answer

#: (reference, reply): each paid today although it hedges or its value is not the reference.
FOUND = [
    # R8-1: arithmetic after a box
    pytest.param("3", r"$\boxed{3} + 1$", id="R8-1-box-plus-one"),
    pytest.param("3", r"$\boxed{3}\pi$", id="R8-1-box-times-pi"),
    # R8-2: a hedge join with punctuation before the second value
    pytest.param("3", r"\boxed{3} or ... 4", id="R8-2-or-ellipsis"),
    pytest.param("3", r"\boxed{3} or = 4", id="R8-2-or-equals"),
    # R8-3: a command's argument read as the value
    pytest.param("3", r"\boxed{\binom 5 3}", id="R8-3-binom-tokens"),
    pytest.param("8", r"The answer is \log_2 8.", id="R8-3-log-base"),
    # R8-4: a Unicode radical set apart
    pytest.param("9", "The answer is √ 9.", id="R8-4-radical-spaced"),
    # R8-5: Answer: with its value on the next line
    pytest.param("3", "\\boxed{3}\n\nAnswer:\n4", id="R8-5-box-then-answer-newline"),
    pytest.param("4", "Answer: 3\n\nAnswer:\n4", id="R8-5-answer-twice-newline"),
    # R8-6: two numbers in a box parted by spaced symbols or an empty group
    pytest.param("4", r"\boxed{3 = = 4}", id="R8-6-spaced-double-equals"),
    # R8-7: a number in parentheses after the number in a box
    pytest.param("3", r"\boxed{3 (-4)}", id="R8-7-paren-product"),
    # R8-8: a power or scale word after a box or a #### value
    pytest.param("3", r"\boxed{3} squared", id="R8-8-box-squared"),
    pytest.param("3", "#### 3 bn", id="R8-8-hash-bn"),
    # R8-9: a scale word of another language in a sentence
    pytest.param("3", "The answer is 3万.", id="R8-9-wan"),
    # the rows found but left out for the row limit, and kin of each kind (fixed by rule)
    pytest.param("3", r"$\boxed{3} - 1$", id="R8-1-box-minus-one"),
    pytest.param("3", r"$\boxed{3}x$", id="R8-1-box-variable"),
    pytest.param("3", r"$\boxed{3}e2$", id="R8-1-box-e2"),
    pytest.param("3", r"\boxed{3} or -- 4", id="R8-2-or-dashes"),
    pytest.param("3", r"\boxed{3} or ? 4", id="R8-2-or-question"),
    pytest.param("3", r"\boxed{3} or -> 4", id="R8-2-or-arrow"),
    pytest.param("3", r"\boxed{3} ór 4", id="R8-2-accented-or"),
    pytest.param("3", r"\boxed{3} || 4", id="R8-2-double-bar"),
    pytest.param("3", r"\boxed{3} else 4", id="R8-2-else"),
    pytest.param("3", r"\boxed{3} if not, 4", id="R8-2-if-not"),
    pytest.param("3", r"4 or ... \boxed{3}", id="R8-2-before-box"),
    pytest.param("3", r"4 || \boxed{3}", id="R8-2-bars-before-box"),
    pytest.param("4", r"**3** or ... **4**", id="R8-2-emphasis"),
    pytest.param("53", r"\boxed{\binom 53}", id="R8-3-binom-glued"),
    pytest.param("3", r"The answer is $\sin^{2} 3$.", id="R8-3-sin-power"),
    pytest.param("3", r"The answer is $\frac{1} 3$.", id="R8-3-frac-spaced"),
    pytest.param("3", r"The answer is $e^ 3$.", id="R8-3-power-spaced"),
    pytest.param("3", r"The answer is $\log~ 3$.", id="R8-3-log-tilde"),
    pytest.param("3", r"The answer is $\operatorname{sqrt} 3$.", id="R8-3-operatorname"),
    pytest.param("8", "The answer is ∛ 8.", id="R8-4-cube-root-spaced"),
    pytest.param("9", r"\boxed{\sqrt[] 9}", id="R8-4-empty-index"),
    pytest.param("9", r"\boxed{\sqrt{{}} 9}", id="R8-4-empty-group"),
    pytest.param("8", r"\boxed{\sqrt[3] 8}", id="R8-4-index-token"),
    pytest.param("4", r"\boxed{3 - > 4}", id="R8-6-spaced-arrow"),
    pytest.param("4", r"\boxed{3 < > 4}", id="R8-6-spaced-angles"),
    pytest.param("4", r"\boxed{3 :: 4}", id="R8-6-double-colon"),
    pytest.param("4", r"\boxed{3 ^ ^ 4}", id="R8-6-double-caret"),
    pytest.param("4", r"\boxed{3 {} 4}", id="R8-6-empty-braces"),
    pytest.param("4", r"\boxed{3 () 4}", id="R8-6-empty-parens"),
    pytest.param("4", r"\boxed{3 [] 4}", id="R8-6-empty-brackets"),
    pytest.param("4", r"\boxed{3^{} 4}", id="R8-6-empty-power"),
    pytest.param("4", r"\boxed{10^0 4}", id="R8-6-power-then-number"),
    pytest.param("3", r"\boxed{3 (4)}", id="R8-7-paren-glued"),
    pytest.param("12", r"\boxed{3 (4)}", id="R8-7-paren-glued-product"),
    pytest.param("4", r"\boxed{3 ( 4 )}", id="R8-7-paren-spaced"),
    pytest.param("4", r"\boxed{3 \left( 4 \right)}", id="R8-7-paren-sized"),
    pytest.param("12", r"\boxed{3 \left( 4 \right)}", id="R8-7-paren-sized-product"),
    pytest.param("2", r"\boxed{2(3+4)}", id="R8-7-paren-sum-read-as-first"),
    pytest.param("3", r"\boxed{3} cubed", id="R8-8-box-cubed"),
    pytest.param("3", r"\boxed{3} factorial", id="R8-8-box-factorial"),
    pytest.param("3", r"\boxed{3}M", id="R8-8-box-M"),
    pytest.param("3", r"\boxed{3} K", id="R8-8-box-K"),
    pytest.param("3", r"\boxed{3}千", id="R8-8-box-qian"),
    pytest.param("3", r"\boxed{3} B.C.E.", id="R8-8-box-bce"),
    pytest.param("3", r"\boxed{3} negative", id="R8-8-box-negative"),
    pytest.param("3", r"\boxed{3} and 1/2", id="R8-8-box-and-half"),
    pytest.param("3", r"\boxed{3}.5", id="R8-8-box-point-five"),
    pytest.param("3", "#### 3 quarters", id="R8-8-hash-quarters"),
    pytest.param("3", "#### 3 score", id="R8-8-hash-score"),
    pytest.param("3", "#### 3 squared", id="R8-8-hash-squared"),
    pytest.param("3", "#### 3 M", id="R8-8-hash-M"),
    pytest.param("3", "#### 3 тысяч", id="R8-8-hash-tysyach"),
    pytest.param("3", "The answer is 3 Mio.", id="R8-9-mio"),
    pytest.param("3", "The answer is 3 тысяч.", id="R8-9-tysyach"),
    pytest.param("3", "The answer is 3 млн.", id="R8-9-mln"),
    pytest.param("3", "The answer is 3 tausend.", id="R8-9-tausend"),
    pytest.param("3", "The answer is 3 millones.", id="R8-9-millones"),
    pytest.param("3", "The answer is 3 Hundert.", id="R8-9-hundert"),
    pytest.param("3", "The answer is 3 K.", id="R8-9-K"),
    pytest.param("3", "The answer is 3 hundredths.", id="R8-9-hundredths"),
    pytest.param("3", "The answer is 3 negative.", id="R8-9-negative"),
    pytest.param("3", "3 Mrd.", id="R8-9-mrd-alone"),
    pytest.param("3", "\\boxed{3}\n\n答え：4", id="R8-L-kotae"),
    pytest.param("3", "\\boxed{3}\n\nAntwoord: 4", id="R8-L-antwoord"),
    pytest.param("3", "\\boxed{3}\n\nOdpowiedź: 4", id="R8-L-odpowiedz"),
    pytest.param("3", "\\boxed{3}\n\nCevap: 4", id="R8-L-cevap"),
    pytest.param("3", "\\boxed{3}\n\n답: 4", id="R8-L-dap"),
    pytest.param("3", "\\boxed{3}\n\nĐáp án: 4", id="R8-L-dap-an"),
    pytest.param("3", "\\boxed{3}\n\nJawaban: 4", id="R8-L-jawaban"),
    pytest.param("3", "\\boxed{3}\n\nAns: 4", id="R8-L-ans"),
    pytest.param("3", "\\boxed{3}\n\n### Final Answer\n4", id="R8-L-final-answer-heading"),
]


@pytest.mark.parametrize(("reference", "reply"), FOUND)
def test_a_hedged_or_wrong_reply_is_never_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False


#: (reference, reply): one correct answer in a form the rule book promises to read, unpaid today.
FALSE_NEGATIVES = [
    pytest.param("90", r"\boxed{90\degree}", id="R8-N1-degree"),
    pytest.param("3", r"\boxed{\bigl(3\bigr)}", id="R8-N1-sizing"),
    pytest.param("3", "答案：3", id="R8-N1-full-width-colon"),
    pytest.param("4", "Answer:\n4", id="R8-N1-answer-next-line"),
    pytest.param("4", "### Final Answer\n4", id="R8-N1-final-answer-heading"),
    pytest.param("3", "\\boxed{3}\n\nAns: 3", id="R8-N1-box-and-same-ans"),
    # kept: words, units, punctuation and delimiters after a box change nothing
    pytest.param("3", r"\boxed{3} apples", id="R8-K-box-unit-word"),
    pytest.param("5", r"\boxed{5}\text{ cm}", id="R8-K-box-text-unit"),
    pytest.param("12", r"\boxed{12}cm", id="R8-K-box-glued-unit"),
    pytest.param("3", r"$\boxed{3}$.", id="R8-K-box-math-period"),
    pytest.param("3", r"\boxed{3} is the answer", id="R8-K-box-words"),
    pytest.param("3", r"$\boxed{3}$ - that is the answer.", id="R8-K-box-dash-words"),
    pytest.param("3", r"\boxed{3} or, equivalently, 3.0", id="R8-K-or-equal"),
    pytest.param("14", r"\boxed{2 \cdot (3+4)}", id="R8-K-product"),
    pytest.param("3", "The answer is 3 apples.", id="R8-K-sentence-unit"),
]


@pytest.mark.parametrize(("reference", "reply"), FALSE_NEGATIVES)
def test_a_promised_form_is_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is True
