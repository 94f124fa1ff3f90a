"""The action parser shared by every agentgym environment.

An LLM's turn is free text. Three formats are understood (the ``action_format`` constructor argument
of every environment):

* ``think_answer`` (default, as in RAGEN): ``<think>reasoning</think><answer>actions</answer>``;
  only white space may stand before ``<think>``, between ``</think>`` and ``<answer>`` and after
  ``</answer>``; each tag appears exactly once.
* ``answer``: ``<answer>actions</answer>`` alone (white space around it allowed).
* ``raw``: the whole text is the answer.

The answer holds one or more actions separated by ``||`` (e.g. ``Up || Left``); pieces are stripped
of white space. Pieces past ``max_actions_per_turn`` are dropped and reported, never executed.
Parsing never raises on any input string; it scans with ``str.find`` (linear time), so 100 kB of
text costs microseconds, and returns a :class:`ParsedTurn` whose ``error`` names what is wrong.

Example:
    >>> p = parse_turn("<think>box is left</think><answer>Left || Up</answer>", "think_answer", 3)
    >>> p.actions, p.think, p.error
    (('Left', 'Up'), 'box is left', None)
    >>> parse_turn("Left", "think_answer", 3).error
    'missing <think>...</think><answer>...</answer>'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ACTION_FORMATS",
    "ACTION_SEPARATOR",
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "THINK_CLOSE",
    "THINK_OPEN",
    "ActionFormat",
    "ParsedTurn",
    "parse_turn",
    "format_answer",
]

ActionFormat = Literal["think_answer", "answer", "raw"]
ACTION_FORMATS: tuple[str, ...] = ("think_answer", "answer", "raw")
ACTION_SEPARATOR = "||"

#: The action format's tags: their one home. The chat layer's ``<think>`` prefix
#: (:data:`agentgym.chat.THINK_PREFIX`), the baselines' prompts, tokenizer tags and reasoning z
#: (``baselines.collapse.reasoning``) all import these.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
_TAGS = {"think": (THINK_OPEN, THINK_CLOSE), "answer": (ANSWER_OPEN, ANSWER_CLOSE)}
#: The error of a ``think_answer`` turn with neither think tag nor an answer block.
_MISSING_THINK_ANSWER = f"missing {THINK_OPEN}...{THINK_CLOSE}{ANSWER_OPEN}...{ANSWER_CLOSE}"


@dataclass(frozen=True)
class ParsedTurn:
    """One turn's text, parsed.

    Attributes:
        think: the text inside ``<think>`` (``None`` unless the format is ``think_answer`` and valid).
        answer: the text inside ``<answer>`` (or the whole text for ``raw``); ``None`` if malformed.
        actions: the action pieces to execute, in order, at most ``max_actions_per_turn``.
        dropped: pieces past ``max_actions_per_turn``, not executed.
        error: ``None`` if the format is well formed and every piece is non-empty, else the reason.
    """

    think: str | None
    answer: str | None
    actions: tuple[str, ...]
    dropped: tuple[str, ...]
    error: str | None

    @property
    def format_ok(self) -> bool:
        return self.error is None


def _one_tag_block(text: str, tag: str) -> tuple[int, int, str] | str:
    """Find exactly one ``<tag>...</tag>``: (start, end, inner) or an error message."""
    open_tag, close_tag = _TAGS[tag]
    start = text.find(open_tag)
    if start < 0:
        return f"missing {open_tag}"
    close = text.find(close_tag, start)
    if close < 0:
        return f"unclosed {open_tag}"
    if text.find(open_tag, start + 1) >= 0 or text.find(close_tag, close + 1) >= 0:
        return f"{open_tag} must appear exactly once (nested or repeated tags)"
    if text.find(close_tag) < start:
        return f"{close_tag} before {open_tag}"
    return start, close + len(close_tag), text[start + len(open_tag) : close]


def _split(answer: str, max_actions: int) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    pieces = [piece.strip() for piece in answer.split(ACTION_SEPARATOR)]
    if not any(pieces):
        return (), (), "empty answer: no action given"
    if not all(pieces):
        return (), (), f"empty action between '{ACTION_SEPARATOR}' separators"
    return tuple(pieces[:max_actions]), tuple(pieces[max_actions:]), None


def parse_turn(text: object, action_format: str, max_actions_per_turn: int) -> ParsedTurn:
    """Parse one turn of model text into actions.

    Args:
        text: the model's output for this turn; anything that is not a ``str`` is malformed.
        action_format: ``"think_answer"``, ``"answer"`` or ``"raw"``.
        max_actions_per_turn: how many ``||``-separated actions may execute (>= 1).

    Returns:
        A :class:`ParsedTurn`; ``error`` is ``None`` exactly when the turn is well formed.

    Raises:
        ValueError: ``action_format`` or ``max_actions_per_turn`` is invalid (a programming error,
            never the model's text).
    """
    if action_format not in ACTION_FORMATS:
        raise ValueError(f"action_format must be one of {ACTION_FORMATS}, got {action_format!r}")
    if max_actions_per_turn < 1:
        raise ValueError(f"max_actions_per_turn must be >= 1, got {max_actions_per_turn}")
    if not isinstance(text, str):
        return ParsedTurn(None, None, (), (), f"action must be a str, got {type(text).__name__}")

    think: str | None = None
    if action_format == "raw":
        answer = text
    else:
        found = _one_tag_block(text, "answer")
        if isinstance(found, str):
            if found == f"missing {ANSWER_OPEN}":
                found = f"missing {ANSWER_OPEN}...{ANSWER_CLOSE}"
                if action_format == "think_answer" and THINK_OPEN not in text:
                    found = _MISSING_THINK_ANSWER
            return ParsedTurn(None, None, (), (), found)
        a_start, a_end, answer = found
        if text[a_end:].strip():
            return ParsedTurn(None, None, (), (), f"text after {ANSWER_CLOSE}")
        before = text[:a_start]
        if action_format == "think_answer":
            block = _one_tag_block(before, "think")
            if isinstance(block, str):
                if THINK_OPEN not in text and THINK_CLOSE not in text:
                    block = _MISSING_THINK_ANSWER
                return ParsedTurn(None, None, (), (), block)
            t_start, t_end, think = block
            if before[:t_start].strip():
                return ParsedTurn(None, None, (), (), f"text before {THINK_OPEN}")
            if before[t_end:].strip():
                why = f"text between {THINK_CLOSE} and {ANSWER_OPEN}"
                return ParsedTurn(None, None, (), (), why)
            if THINK_OPEN in answer or THINK_CLOSE in answer:
                return ParsedTurn(None, None, (), (), f"{THINK_OPEN} inside {ANSWER_OPEN}")
        elif before.strip():
            return ParsedTurn(None, None, (), (), f"text before {ANSWER_OPEN}")
    actions, dropped, error = _split(answer, max_actions_per_turn)
    return ParsedTurn(think, answer, actions, dropped, error)


def format_answer(actions: list[str] | tuple[str, ...], action_format: str, think: str = "") -> str:
    """Write actions as a turn in ``action_format`` (the inverse of :func:`parse_turn`).

    Example:
        >>> format_answer(["Up", "Left"], "think_answer", think="push")
        '<think>push</think><answer>Up || Left</answer>'
    """
    answer = f" {ACTION_SEPARATOR} ".join(actions)
    if action_format == "raw":
        return answer
    if action_format == "answer":
        return f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
    if action_format == "think_answer":
        return f"{THINK_OPEN}{think}{THINK_CLOSE}{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
    raise ValueError(f"action_format must be one of {ACTION_FORMATS}, got {action_format!r}")
