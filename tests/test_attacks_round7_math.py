"""Round 7 attacks on :func:`agentgym.answers.grade_answer`, by a fresh tester who read only the
module docstring of agentgym/answers.py (the rule book) and the public function docstrings, not
the implementation.

Every row of :data:`FOUND` is a reply that is paid (``grade_answer(reference, reply)[1] is
True``) on the code of this round although it does not commit to one value equal to the
reference: it hedges between two values, or its value is not the reference. Every row of
:data:`FALSE_NEGATIVES` is a single correct answer in a form the rule book promises to read, and
it is not paid. None duplicates a row of tests/test_attacks_round4_math.py,
tests/test_attacks_round5_math.py or tests/test_attacks_round6_math.py. Kinds (promise broken in
brackets; "hedge rule": a hedge is never rewarded; "sentence rule": a value is read from a
sentence only where the rest of that sentence cannot change it):

* R7-1, a hedge between a value and its negative in a sentence (``3, but it might be -3``, ``-3,
  though 3 could work``, ``1/2 [or -1/2]``): the same joins with 4 for -3 are refused, so the
  hedge scan seems to compare the digits without their sign; the last value is paid [hedge rule:
  "it might be", "could", a number joined by "or"].
* R7-2, two values in one box joined by the logical or, or by "or" in a text command the box
  reading does not know (``\\boxed{3 \\lor 4}``, ``\\boxed{3 \\textsf{ or } 4}``): paid as the last
  value [hedge rule: ``\\lor`` is a listed hedge join, "or" in any spelling].
* R7-3, two different values in one box joined by a relation (``\\boxed{3 \\equiv 4}`` paid as 4,
  ``\\boxed{3 \\approx 4}`` paid as 3) [step 2: "in a box every side must have the same value",
  ``\\boxed{4 = 3}`` names two values and equals nothing].
* R7-4, two values stacked in one box (``cases``, ``\\substack``): paid as the last [hedge rule].
* R7-5, text hidden in a box (``\\hphantom``, white ``\\textcolor``): the reader sees 3, the
  reply is paid as 4 (and not as 3) [a reply is paid for the value it states; hedge rule].
* R7-6, a base subscript dropped: ``\\boxed{1011_3}`` (31) is paid for ``1011_2`` (11), and
  ``\\boxed{12_{3}}`` (5) for 12 [exact numbers compare exactly].
* R7-7, an open interval paid for a closed one and the reverse: ``x \\in (0, 1)`` for ``x \\in
  [0, 1]`` [comparison: an interval equals an interval with the same brackets; ``0 < x < 1`` is
  not ``[0, 1]``]. A FARMING template: ``x \\in (a, b)`` is paid whether the reference is open
  or closed.
* R7-8, an emphasised answer and an ``answer is`` / ``<answer>`` marker with another value, no
  box (``**3**`` then ``The answer is 4.`` is paid as 3; the reverse as 4) [hedge rule: "two
  that differ are a hedge, whichever comes last"].
* R7-9, a box and a different value emphasised with ``\\textbf{}`` after it [hedge rule: "an
  emphasised value after the last box (``\\boxed{3}`` then ``**4**``)"].
* R7-10, a box and a listed ``Answer:`` marker whose value is written ``x = 4`` [hedge rule:
  "every ... ``Answer:`` ... sentence"; ``x = 3`` is read as 3 elsewhere].
* R7-11, a whole reply (step 0) with the box first and a different ``Answer:`` or ``answer is``
  marker at its end: the short replies are refused, the long ones paid [step 0: the region keeps
  "every answer marker the reply has, so that a hedge stays a hedge"].
* R7-12, a hedge whose second answer is no numeral: a letter choice or a constant
  (``\\boxed{A} or maybe B``, ``\\boxed{3} or maybe \\pi``) [hedge rule: "a hedge names several
  answers where one is given"].
* R7-13, a LaTeX command with a one-token argument in a sentence, read as its argument:
  ``\\sqrt 3`` is paid as 3, ``\\frac 12`` (one half) as 12, ``\\sqrt[3] 8`` (2) as 8 [LaTeX is
  read; TeX's one-token arguments, as for ``\\boxed 4``; sentence rule].
* R7-14, a function word before the number: ``The answer is sqrt 3.`` is paid as 3 [plain-text
  notation: ``sqrt(2)`` is not read; sentence rule].
* R7-15, a relation written around a box (``$x > \\boxed{3}$``) [math outside a box that changes
  it: "a sign, operator ... before it"; ``\\boxed{\\geq 3}`` equals nothing].

False negatives (promised forms that are not read):

* R7-N1, the rule book's own example ``\\boxed{4 % \\n 3}`` boxes ``43``: it is read as ``4 3``
  (two numbers side by side, no value).
* R7-N2, a tuple written with semicolons, ``(0;-2;6)``, promised as one part: not read unboxed
  (not even against the identical reference) and not equal to ``(0, -2, 6)`` boxed. Fixed
  boxed and in ``$...$``; bare it stays unread (``math-verify`` finds no value in it, and what
  counts as a valid turn is unchanged, so that recorded episodes replay the same).

:data:`KEPT_PARSING` holds, for the fixes of R7-2 to R7-7, R7-N1 and R7-N2, near neighbours worked
out by hand: forms that must still be paid and more spellings of each kind that must not.
"""

from __future__ import annotations

import pytest

from agentgym.answers import grade_answer

FILL = "We compute things carefully here. " * 40  # 1,360 characters: a whole reply (step 0)

#: (reference, reply): each paid today although it hedges or its value is not the reference.
FOUND = [
    # R7-1: a hedge between a value and its negative
    pytest.param("-3", "The answer is 3, but it might be -3.", id="R7-1-might"),
    pytest.param("3", "The answer is -3, though 3 could work.", id="R7-1-could"),
    pytest.param("-1/2", "The answer is 1/2 [or -1/2].", id="R7-1-bracket-or"),
    # R7-2: a logical or, or "or" in an unknown text command, inside one box
    pytest.param("4", r"\boxed{3 \lor 4}", id="R7-2-lor"),
    pytest.param("4", r"\boxed{3 \textsf{ or } 4}", id="R7-2-textsf-or"),
    # R7-3: two different values joined by a relation in one box
    pytest.param("4", r"\boxed{3 \equiv 4}", id="R7-3-equiv"),
    pytest.param("3", r"\boxed{3 \approx 4}", id="R7-3-approx"),
    # R7-4: two values stacked in one box
    pytest.param("4", r"\boxed{\begin{cases} 3 \\ 4 \end{cases}}", id="R7-4-cases"),
    pytest.param("4", r"\boxed{\substack{3 \\ 4}}", id="R7-4-substack"),
    # R7-5: hidden text in a box: the reader sees 3
    pytest.param("4", r"\boxed{3\hphantom{ or 4}}", id="R7-5-hphantom"),
    pytest.param("4", r"\boxed{3 \textcolor{white}{\text{ or } 4}}", id="R7-5-white"),
    # R7-6: a base subscript dropped
    pytest.param("1011_2", r"\boxed{1011_3}", id="R7-6-other-base"),
    pytest.param("12", r"\boxed{12_{3}}", id="R7-6-base-3"),
    # R7-7: open and closed intervals (farming: paid either way)
    pytest.param(r"x \in [0, 1]", r"x \in (0, 1)", id="R7-7-open-for-closed"),
    pytest.param("(0, 1)", r"\boxed{x \in [0, 1]}", id="R7-7-closed-for-open"),
    # R7-8: emphasis and an answer marker that differ, no box
    pytest.param("3", "**3**\n\nThe answer is 4.", id="R7-8-bold-then-answer-is"),
    pytest.param("4", "The answer is 3.\n\n**4**", id="R7-8-answer-is-then-bold"),
    # R7-9: a box and a different value in \textbf
    pytest.param("3", "\\boxed{3}\n\\textbf{4}", id="R7-9-textbf"),
    # R7-10: a box and an Answer: marker written x = 4
    pytest.param("3", "\\boxed{3}\nAnswer: x = 4", id="R7-10-answer-x-equals"),
    # R7-11: a whole reply: the second marker is left out of the final region
    pytest.param("3", "\\boxed{3}\n" + FILL + "\nAnswer: 4", id="R7-11-answer-colon"),
    pytest.param("3", "\\boxed{3}\n" + FILL + "\nThe answer is 4.", id="R7-11-answer-is"),
    # R7-12: a hedge to a letter or a constant
    pytest.param("A", r"\boxed{A} or maybe B", id="R7-12-letter"),
    pytest.param("3", r"\boxed{3} or maybe \pi", id="R7-12-pi"),
    # R7-13: a one-token LaTeX argument read as the value
    pytest.param("3", r"The answer is \sqrt 3.", id="R7-13-sqrt"),
    pytest.param("12", r"The answer is \frac 12.", id="R7-13-frac"),
    pytest.param("8", r"The answer is \sqrt[3] 8.", id="R7-13-cube-root"),
    # R7-14: a function word before the number
    pytest.param("3", "The answer is sqrt 3.", id="R7-14-sqrt-word"),
    # R7-15: a relation around a box
    pytest.param("3", r"$x > \boxed{3}$", id="R7-15-greater-than-box"),
    # found by the attacker, left out of the first draft: math or words around a box that change
    # it, a sign or scale word after a sentence's number, answer words in other spellings
    pytest.param("3", r"not \boxed{3}", id="R7-L-not-box"),
    pytest.param("3", r"\boxed{3}\text{ thousand}", id="R7-L-box-text-thousand"),
    pytest.param("3", r"\boxed{3} million", id="R7-L-box-million"),
    pytest.param("3", r"(\boxed{3})^2", id="R7-L-box-paren-power"),
    pytest.param("3", r"1\boxed{3}", id="R7-L-digit-glued"),
    pytest.param("3", r"0.\boxed{3}", id="R7-L-point-glued"),
    pytest.param("3", r"\boxed{3}!", id="R7-L-box-factorial"),
    pytest.param("3", "The answer is 3 below zero.", id="R7-L-below-zero"),
    pytest.param("3", "3 BC", id="R7-L-bc"),
    pytest.param("3", "3 ‰", id="R7-L-per-mille"),
    pytest.param("3", "\\boxed{3}\nAntwort: 4", id="R7-L-antwort"),
    pytest.param("3", "\\boxed{3}\n答案：4", id="R7-L-daan"),
    pytest.param("3", "\\boxed{3}\n<final_answer>4</final_answer>", id="R7-L-final-answer-tag"),
    pytest.param("3", "\\boxed{3}\nThe answer should be 4.", id="R7-L-answer-should-be"),
]


@pytest.mark.parametrize(("reference", "reply"), FOUND)
def test_a_hedged_or_wrong_reply_is_never_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False


#: (reference, reply): one correct answer in a form the rule book promises to read, unpaid today.
FALSE_NEGATIVES = [
    pytest.param("43", "\\boxed{4 % \n 3}", id="R7-N1-comment-in-box"),
    pytest.param("(0, -2, 6)", r"\boxed{(0;-2;6)}", id="R7-N2-semicolon-tuple"),
]


@pytest.mark.parametrize(("reference", "reply"), FALSE_NEGATIVES)
def test_a_promised_form_is_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is True


#: (reference, reply, paid): near neighbours of the fixes of R7-2 to R7-7, R7-N1 and R7-N2, worked
#: out by hand: what must still be paid, and more spellings of each kind that must not.
KEPT_PARSING = [
    # R7-2 to R7-5: a command the reading does not model, or a listed one in a role it drops
    pytest.param("1/2", r"\boxed{\frac{1}{2}}", True, id="cmd-frac"),
    pytest.param("1/2", r"\boxed{\dfrac12}", True, id="cmd-dfrac-tokens"),
    pytest.param(r"2\sqrt{3}", r"\boxed{2\sqrt{3}}", True, id="cmd-sqrt"),
    pytest.param("2.5", r"\boxed{\frac{5}{2} \cdot 1}", True, id="cmd-cdot"),
    pytest.param(r"\pi/2", r"\boxed{\frac{\pi}{2}}", True, id="cmd-pi"),
    pytest.param(
        r"(-\infty, 1) \cup (2, \infty)",
        r"\boxed{(-\infty, 1) \cup (2, \infty)}",
        True,
        id="cmd-cup-intervals",
    ),
    pytest.param(r"\{1, 2\} \cup \{3\}", r"\boxed{\{1,2\} \cup \{3\}}", True, id="cmd-cup-sets"),
    pytest.param(r"\pm 2", r"\boxed{\pm 2}", True, id="cmd-pm"),
    pytest.param(r"x \le 3", r"$x \le 3$", True, id="cmd-le"),
    pytest.param(r"x \neq 3", r"We find that $x \neq 3$.", True, id="cmd-neq-sentence"),
    pytest.param(r"\mathbb{R}", r"\boxed{\mathbb{R}}", True, id="cmd-mathbb"),
    pytest.param(
        r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
        r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}}",
        True,
        id="cmd-pmatrix",
    ),
    pytest.param("90", r"\boxed{90^\circ}", True, id="cmd-degree"),
    pytest.param("4", r"\boxed{\max(3, 4)}", True, id="cmd-max"),
    pytest.param("4", r"\boxed{\lfloor 4.5 \rfloor}", True, id="cmd-floor"),
    pytest.param("45", r"\boxed{\sum_{k=1}^{9} k}", True, id="cmd-sum"),
    pytest.param("12", r"\boxed{12 \text{ apples}}", True, id="cmd-text-unit"),
    pytest.param(
        "125", r"The distance is $\boxed{125\textnormal{ miles}}.$", True, id="cmd-textnormal"
    ),
    pytest.param("1/3", r"\boxed{\frac{1}{3} \approx 0.33}", True, id="cmd-approx-rounds"),
    pytest.param(r"\pi", r"\boxed{\pi \approx 3.14}", True, id="cmd-approx-pi"),
    # outside a box, as Math-Verify reads it (a row of its table): the left side
    pytest.param("x = 1/3", r"$x = 5+5+1 = 1/3 \approx 11$", True, id="cmd-approx-unboxed"),
    pytest.param("4", r"\boxed{3 \Rightarrow 4}", False, id="cmd-Rightarrow"),
    pytest.param("4", r"\boxed{3 \to 4}", False, id="cmd-to"),
    pytest.param("4", r"\boxed{3 \mid 4}", False, id="cmd-mid"),
    pytest.param("4", r"\boxed{3 \dots 4}", False, id="cmd-dots"),
    pytest.param("4", r"$3 \lor 4$", False, id="cmd-lor-unboxed"),
    pytest.param("4", r"The answer is $3 \equiv 4$.", False, id="cmd-equiv-sentence"),
    pytest.param("4", r"\boxed{3 \cap 4}", False, id="cmd-cap-number"),
    pytest.param("4", r"\boxed{x = 3 \cap 4}", False, id="cmd-cap-equation"),
    pytest.param("3", r"\boxed{3 \mathbb{R}}", False, id="cmd-mathbb-number"),
    pytest.param("4", r"\boxed{3 \circ 4}", False, id="cmd-circ-between"),
    pytest.param("4", r"\boxed{3 \max 4}", False, id="cmd-max-no-argument"),
    pytest.param("4", r"\boxed{3 \frac 4}", False, id="cmd-frac-one-argument"),
    pytest.param("4", r"\boxed{3 \\ 4}", False, id="cmd-row-break"),
    pytest.param("4", r"\boxed{\begin{aligned} 3 \\ 4 \end{aligned}}", False, id="cmd-aligned"),
    pytest.param("3", r"\boxed{3\vphantom{4}}", False, id="cmd-vphantom"),
    pytest.param("4", r"\boxed{3 {\color{white} 4}}", False, id="cmd-color"),
    pytest.param("3", r"\boxed{\pi \approx 3}", False, id="cmd-approx-not-rounded"),
    pytest.param("4", r"\boxed{3 \text{{ or }} 4}", False, id="cmd-text-nested"),
    pytest.param("4", r"\boxed{3 \sqrt{} 4}", False, id="cmd-sqrt-empty"),
    pytest.param("4", r"\boxed{3 \lceil\rceil 4}", False, id="cmd-ceil-empty"),
    pytest.param("4", r"\boxed{\left(3 \right. 4}", False, id="cmd-unbalanced"),
    # an answer written as the (trusted) reference is, with a command the reading drops
    pytest.param(r"x \equiv 3 \pmod{7}", r"\boxed{x \equiv 3 \pmod{7}}", True, id="cmd-copy"),
    pytest.param(r"x \equiv 3 \pmod{7}", r"\boxed{x \equiv 4 \pmod{7}}", False, id="cmd-not-copy"),
    # the same kind in symbols: what math-verify drops
    pytest.param("3e5", r"\boxed{3 × 10^5}", True, id="sym-times-scientific"),
    pytest.param("90", r"\boxed{90°}", True, id="sym-degree"),
    pytest.param("3", r"\boxed{|-3|}", True, id="sym-abs"),
    pytest.param(r"x \ge 3", r"\boxed{x ≥ 3}", True, id="sym-ge"),
    pytest.param(r"\pm 4", r"\boxed{±4}", True, id="sym-pm"),
    pytest.param(r"2\pi", r"\boxed{2π}", True, id="sym-pi"),
    pytest.param("10", "€10", True, id="sym-currency"),
    pytest.param("4", r"\boxed{3 × 4}", False, id="sym-times"),
    pytest.param("4", r"\boxed{3 ∨ 4}", False, id="sym-or"),
    pytest.param("4", r"$3 ∩ 4$", False, id="sym-cap"),
    pytest.param("4", r"\boxed{3 | 4}", False, id="sym-bar"),
    pytest.param("4", r"\boxed{3 -> 4}", False, id="sym-arrow"),
    pytest.param("4", r"\boxed{3 == 4}", False, id="sym-double-equals"),
    pytest.param("3", r"\boxed{3 _ 4}", False, id="sym-underscore"),
    pytest.param("4", "The answer is $3 ≡ 4$.", False, id="sym-equiv-sentence"),
    pytest.param("4", r"\boxed{(-∞, 4)}", False, id="sym-infinity"),
    # R7-6: a numeral with a base subscript is that numeral in its base
    pytest.param("1011_2", r"\boxed{1011_2}", True, id="base-same"),
    pytest.param("1011_2", r"\boxed{1011_{2}}", True, id="base-braces"),
    pytest.param("204_5", r"\boxed{204}", True, id="base-bare-digits"),
    pytest.param("204_5", "The answer is $204_5$.", True, id="base-sentence"),
    pytest.param("12", r"\boxed{12_{10}}", True, id="base-ten"),
    pytest.param("1F_{16}", r"\boxed{1F_{16}}", True, id="base-sixteen"),
    pytest.param("1011_2", r"\boxed{11}", False, id="base-decimal-value"),
    pytest.param("11", r"\boxed{1011_2}", False, id="base-for-decimal"),
    pytest.param("1011", r"\boxed{1011_2}", False, id="base-digits-for-decimal"),
    pytest.param("5", r"\boxed{12_3}", False, id="base-3-digits"),
    pytest.param("1011_2", "The answer is $1011_3$.", False, id="base-other-sentence"),
    pytest.param("1012", r"\boxed{1011_2 + 1}", False, id="base-in-expression"),
    pytest.param("129", r"\boxed{129_2}", False, id="base-bad-digit"),
    pytest.param("1011_3", r"\boxed{1011_{(2)}}", False, id="base-other-subscript"),
    pytest.param("1011_3", r"\boxed{(1011)_2}", False, id="base-subscript-on-group"),
    # R7-7: a pair's brackets count (either may be a range); a longer tuple's do not
    pytest.param("[0, 1]", "[0, 1]", True, id="brackets-closed"),
    pytest.param(r"x \in [0, 1]", r"x \in [0,1]", True, id="brackets-in-closed"),
    pytest.param("(0, 1)", r"\boxed{x \in (0, 1)}", True, id="brackets-in-open"),
    pytest.param("0 < x < 1", "(0, 1)", True, id="brackets-chain-open"),
    pytest.param(r"0 \le x \le 1", "[0, 1]", True, id="brackets-chain-closed"),
    pytest.param("(1, 2, 3)", "[1, 2, 3]", True, id="brackets-triple"),
    pytest.param("[-2, 7)", "[-2,7)", True, id="brackets-half-open"),
    pytest.param("[0, 1]", "(0, 1)", False, id="brackets-open-for-closed"),
    pytest.param("(0, 1)", "[0,1]", False, id="brackets-closed-for-open"),
    pytest.param(r"x \in (0, 1)", r"x \in [0, 1]", False, id="brackets-in-closed-for-open"),
    pytest.param(r"0 \le x \le 1", "(0, 1)", False, id="brackets-chain-closed-open"),
    pytest.param("[0, 1]", r"\boxed{0, 1}", False, id="brackets-none-for-closed"),
    pytest.param("(0, 1)", r"\boxed{0, 1}", False, id="brackets-none-for-open"),
    pytest.param("3, 4", "(3, 4)", True, id="brackets-for-a-list"),
    # R7-N1: a TeX comment in a box goes with the spaces around it
    pytest.param("43", "\\boxed{4% note\n3}", True, id="comment-unspaced"),
    pytest.param("25", "\\boxed{25%}", True, id="comment-none-percent"),
    pytest.param("4", "\\boxed{4 % \n 3}", False, id="comment-not-four"),
    # R7-N2: a tuple whose parts are parted by semicolons
    pytest.param("(0, -2, 6)", r"\boxed{(0; -2; 6)}", True, id="semicolon-spaced"),
    pytest.param("(0, -2, 6)", r"\boxed{(0;-2;7)}", False, id="semicolon-other"),
    pytest.param("(0, -2, 6)", r"\boxed{(0; -2, 6)}", False, id="semicolon-mixed"),
    pytest.param("(1, 2)", r"\boxed{[1; 2]}", False, id="semicolon-brackets"),
]


@pytest.mark.parametrize(("reference", "reply", "paid"), KEPT_PARSING)
def test_kept_parsing(reference: str, reply: str, paid: bool) -> None:
    assert grade_answer(reference, reply)[1] is paid


#: (reference, reply, paid): the rules of rows R7-1 and R7-8 to R7-15 (and the rows left out of
#: the first draft) and their near neighbours, worked out by hand: what must still be paid beside
#: what no longer is.
KEPT_MARKERS = [
    # R7-1: a hedge number keeps its sign: -3 and 3 are two numbers
    pytest.param("-3", "The answer is -3.", True, id="sign-negative"),
    pytest.param("-3", "The answer is minus 3.", True, id="sign-word"),
    pytest.param("-3", "The answer is -3, not 3.", True, id="sign-not-positive"),
    pytest.param("0.5", "The answer is 0.5, or 1/2.", True, id="sign-equal-join"),
    pytest.param("-3", "\\boxed{-3}", True, id="sign-boxed"),
    pytest.param("3", "The answer is 3, but it could be -3.", False, id="sign-could-negative"),
    pytest.param("3", "The answer is 3 (or -3).", False, id="sign-paren-or"),
    pytest.param("1/2", "The answer is -1/2 [or 1/2].", False, id="sign-bracket-or"),
    # R7-8, R7-9, R7-10: every answer marker, in any order, read by steps 2 and 3
    pytest.param("3", "\\boxed{3}\n\nThe answer is 3.", True, id="markers-box-answer-is"),
    pytest.param("3", "**Answer:** 3", True, id="markers-bold-answer"),
    pytest.param("3", "The answer is 3.", True, id="markers-answer-is"),
    pytest.param("3", "**3**\n\nThe answer is 3.", True, id="markers-bold-then-same"),
    pytest.param("3", "\\boxed{3}\n\\textbf{3}", True, id="markers-textbf-same"),
    pytest.param("3", "\\boxed{3}\nAnswer: x = 3", True, id="markers-x-equals-same"),
    pytest.param("1/2", "\\boxed{\\frac{1}{2}}\nAnswer: 0.5", True, id="markers-equal-values"),
    pytest.param("3", "\\boxed{3}\n答案：3", True, id="markers-daan-same"),
    pytest.param("3", "\\boxed{3}\n<final_answer>3</final_answer>", True, id="markers-tag-same"),
    pytest.param("3", "**Final Answer**\n\\boxed{3}", True, id="markers-bold-heading"),
    pytest.param("3", "**Step 1.** Add 1 and 2.\n\n\\boxed{3}", True, id="markers-bold-step"),
    pytest.param("3", "<answer>\\boxed{3}</answer>", True, id="markers-answer-tag-box"),
    pytest.param("3", "\\boxed{3}\n\n#### 3", True, id="markers-box-hashes-same"),
    pytest.param("4", "**3**\n\nThe answer is 4.", False, id="markers-bold-then-other"),
    pytest.param("3", "\\boxed{3}\n\\emph{4}", False, id="markers-emph"),
    pytest.param("3", "\\boxed{3}\n<b>4</b>", False, id="markers-html-bold"),
    pytest.param("3", "\\boxed{3}\n\\underline{4}", False, id="markers-underline"),
    pytest.param("3", "**4**\n\n\\boxed{3}", False, id="markers-bold-line-before-box"),
    pytest.param("3", "\\boxed{3}\nRéponse : 4", False, id="markers-reponse"),
    pytest.param("3", "\\boxed{3}\nRespuesta: 4", False, id="markers-respuesta"),
    pytest.param("3", "\\boxed{3}\n\nRespuesta final: 4", False, id="markers-respuesta-final"),
    pytest.param("3", "\\boxed{3}\n\nFinal answer: four", False, id="markers-number-word"),
    pytest.param("3", "\\boxed{3} \\textit{4}", False, id="markers-textit"),
    pytest.param("3", "\\boxed{3}\n\n<strong>4</strong>", False, id="markers-strong"),
    pytest.param("3", "#### 3\nAnswer: x = 4", False, id="markers-hashes-x-equals"),
    pytest.param("3", "The answer is 3.\nAnswer: $\\frac{8}{2}$", False, id="markers-frac-other"),
    # R7-11: a whole reply: every marker and the sentence after the answer, however far
    pytest.param("3", "\\boxed{3}\n" + FILL + "\nAnswer: 3", True, id="whole-same-answer"),
    pytest.param("3", "\\boxed{3}\n" + FILL + "\nThe answer is 3.", True, id="whole-answer-is"),
    pytest.param("3", FILL + "\nThe answer is 3.", True, id="whole-answer-is-only"),
    pytest.param("3", "\\boxed{3}\n" + FILL + "\n**4**", False, id="whole-bold-other"),
    pytest.param("3", "\\boxed{3}\n" + FILL + "\nBut it might be 4.", False, id="whole-might"),
    pytest.param("3", "The answer is 3.\n" + FILL + "\nAnswer: 4", False, id="whole-answers"),
    # R7-12: a hedge join after the answer ties any value
    pytest.param("3", "\\boxed{3} or, equivalently, 3.0", True, id="join-equal-decimal"),
    pytest.param("3", "\\boxed{3} or equivalently \\frac{6}{2}", True, id="join-equal-frac"),
    pytest.param("\\sqrt{2}", "\\boxed{\\sqrt{2}} or \\sqrt{2}", True, id="join-equal-root"),
    pytest.param("A", "\\boxed{A}", True, id="join-letter-alone"),
    pytest.param("3", "\\boxed{3} apples", True, id="join-unit"),
    pytest.param("2", "\\boxed{2} or \\sqrt{2}", False, id="join-root"),
    pytest.param("2", "\\boxed{2} or maybe 2\\pi", False, id="join-number-then-constant"),
    pytest.param("A", "**A** or perhaps C", False, id="join-bold-letter"),
    pytest.param("4", "\\pi or maybe \\boxed{4}", False, id="join-constant-before"),
    pytest.param("3", "\\boxed{3}. But it might be \\pi.", False, id="join-late-constant"),
    pytest.param("3", "\\boxed{3}. We could also write it as \\frac{6}{2}.", True, id="join-late"),
    # R7-13, R7-14: a number right after a command or a function word is its argument
    pytest.param("\\sqrt{3}", "The answer is $\\sqrt{3}$.", True, id="argument-braced-root"),
    pytest.param("3", "The answer is $x = 3$.", True, id="argument-none"),
    pytest.param("3", "The answer is \\(3\\).", True, id="argument-delimiters"),
    pytest.param("3", "The answer is ln 3.", False, id="argument-ln"),
    pytest.param("3", "The answer is log 3.", False, id="argument-log"),
    pytest.param("3", "The answer is sin 3.", False, id="argument-sin"),
    pytest.param("3", r"The answer is \ln 3.", False, id="argument-command-ln"),
    pytest.param("12", r"The answer is $\dfrac 12$.", False, id="argument-dfrac"),
    # R7-15 and the left-out rows: math or words around a box that change it
    pytest.param("3", "$x = \\boxed{3}$", True, id="box-named"),
    pytest.param("3", "The answer is $x = \\boxed{3}$.", True, id="box-named-sentence"),
    pytest.param("3", "$2x = 6 \\implies \\boxed{3}$", True, id="box-implies"),
    pytest.param("9", "$129 \\equiv \\boxed{9} \\pmod{11}$", True, id="box-congruence"),
    pytest.param("16.5", "About $\\boxed{16.5}$ dollars.", True, id="box-about-word"),
    pytest.param("3", "The answer is $\\boxed{3}$!", True, id="box-exclamation"),
    pytest.param("3", "Step 1\n\\boxed{3}", True, id="box-digit-line-before"),
    pytest.param("3", "(\\boxed{3})", True, id="box-parenthesised"),
    pytest.param("3", "$x \\ge \\boxed{3}$", False, id="box-ge"),
    pytest.param("3", "$x \\approx \\boxed{3}$", False, id="box-approx"),
    pytest.param("3", "$x ≠ \\boxed{3}$", False, id="box-neq-symbol"),
    pytest.param("3", "It is at least \\boxed{3}", False, id="box-at-least"),
    pytest.param("3", "It isn't \\boxed{3}", False, id="box-isnt"),
    pytest.param("3", "$\\left(\\boxed{3}\\right)^2$", False, id="box-right-power"),
    pytest.param("3", "\\boxed{3} thousand apples", False, id="box-thousand"),
    # a sign or scale word after a sentence's number
    pytest.param("3", "The answer is 3 degrees.", True, id="after-unit"),
    pytest.param("3", "The smallest possible value is 3.\n\n\\boxed{3}", True, id="after-possible"),
    pytest.param("3", "The answer is 3 BCE.", False, id="after-bce"),
    pytest.param("3", "The answer is 3 per mille.", False, id="after-per-mille"),
    pytest.param("3", "The answer is 3‰.", False, id="after-per-mille-sign"),
    pytest.param("3", "It is 3 below.", False, id="after-below"),
    pytest.param("3", "3 degrees below zero", False, id="after-unit-below-zero"),
    pytest.param("3", r"The answer is \sqrt{} 3.", False, id="argument-empty-root"),
]


@pytest.mark.parametrize(("reference", "reply", "paid"), KEPT_MARKERS)
def test_kept_markers(reference: str, reply: str, paid: bool) -> None:
    assert grade_answer(reference, reply)[1] is paid
