"""Hedged math answers that are still rewarded: a fresh attacker's findings after the whole-reply
reading of issue 45 landed (2026-12-05), each a strict xfail until the rule is fixed.

The promise (agentgym/answers.py, issue 45 item 3): a hedge (several different boxed answers,
"a or b", a list where one value is asked) is never rewarded. Each row below is a reply that
names two different values and is graded correct today. A strict xfail: when a fix makes a row
pass, the test fails until its marker is removed. Suggested fixes, per kind:

* mixed ``\\fbox``/``\\boxed``, ``\\boxed {4}`` and ``\\boxed 4``: read every box command, with
  white space or a one-token argument, into one list of runs;
* an unclosed ``\\boxed{``: a reply with one is read but equal to nothing (today it hides the boxes
  after it);
* ``final answer is $3$ or $4$``: the opening math counts only when the sentence ends after it;
* several different bold or emphasised values, and a sentence joining two different numbers with
  ``or`` (any spelling) or a hedge word: read, equal to nothing;
* two markers with different values (``\\boxed{3}`` and ``#### 4``): a hedge;
* step 0's tail: start only after a line that ends a sentence, so the cut cannot split one.
"""

from __future__ import annotations

import pytest

from agentgym.answers import grade_answer

FILL = "We compute things carefully here. " * 40  # ~1,360 characters: a whole reply (step 0)
HEAD = "We compute things carefully here. " * 20
TAIL = " Thus we are done and every step above checks out." * 19

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
    ("4", HEAD + "The answer is 3 or\n4, as the work shows." + TAIL),  # the tail cuts the hedge
    ("3", "\\boxed{3}\n#### 4"),
    ("3", "The final answer is $4$. \\boxed{3}"),
]


@pytest.mark.xfail(strict=True, reason="hedge still rewarded: open finding of issue 45, item 5")
@pytest.mark.parametrize(("reference", "reply"), HEDGES)
def test_a_hedged_reply_is_never_rewarded(reference: str, reply: str) -> None:
    assert grade_answer(reference, reply)[1] is False
