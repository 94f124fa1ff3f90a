"""Unit tests of agentgym.parsing: each format, each error message, and format_answer's round trip.

Every expected value below was worked out by hand from the rules in the module docstring.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.parsing import ACTION_FORMATS, ParsedTurn, format_answer, parse_turn

# ----------------------------------------------------------------------------- well-formed turns


def test_think_answer_well_formed() -> None:
    parsed = parse_turn("<think>box is left</think><answer>Left || Up</answer>", "think_answer", 3)
    assert parsed == ParsedTurn(
        think="box is left", answer="Left || Up", actions=("Left", "Up"), dropped=(), error=None
    )
    assert parsed.format_ok


def test_think_answer_allows_white_space_around_and_between_tags() -> None:
    text = "\n  <think>\nplan\n</think>\n\n<answer> Up </answer>\n"
    parsed = parse_turn(text, "think_answer", 1)
    assert parsed.think == "\nplan\n"
    assert parsed.answer == " Up "  # the answer is kept verbatim; only the pieces are stripped
    assert parsed.actions == ("Up",)
    assert parsed.error is None


def test_empty_think_is_allowed() -> None:
    assert parse_turn("<think></think><answer>Up</answer>", "think_answer", 1).actions == ("Up",)


def test_answer_format() -> None:
    parsed = parse_turn("  <answer>Right||Down</answer> ", "answer", 2)
    assert (parsed.think, parsed.answer, parsed.actions, parsed.error) == (
        None,
        "Right||Down",
        ("Right", "Down"),
        None,
    )


def test_raw_format_takes_whole_text() -> None:
    assert parse_turn(" Up || Left ", "raw", 5).actions == ("Up", "Left")
    # Tags mean nothing in raw: the whole text is one action piece.
    assert parse_turn("<answer>Up</answer>", "raw", 1).actions == ("<answer>Up</answer>",)


def test_pieces_past_the_limit_are_dropped_and_reported() -> None:
    parsed = parse_turn("a || b || c || d", "raw", 2)
    assert parsed.actions == ("a", "b")
    assert parsed.dropped == ("c", "d")
    assert parsed.error is None


def test_unicode_actions() -> None:
    parsed = parse_turn("<think>思考</think><answer>Ärm 1 || 世界</answer>", "think_answer", 2)
    assert parsed.think == "思考"
    assert parsed.actions == ("Ärm 1", "世界")


# ----------------------------------------------------------------------------- error messages

MISSING_BOTH = "missing <think>...</think><answer>...</answer>"
REPEATED_ANSWER = "<answer> must appear exactly once (nested or repeated tags)"
REPEATED_THINK = "<think> must appear exactly once (nested or repeated tags)"


#: action format -> (text, the parser's error message)
ERRORS = {
    "think_answer": [
        ("Left", MISSING_BOTH),
        ("", MISSING_BOTH),
        ("<think>a</think>", "missing <answer>...</answer>"),
        ("<answer>Up</answer>", MISSING_BOTH),
        ("</think><answer>Up</answer>", "missing <think>"),
        ("<think>a<answer>Up</answer>", "unclosed <think>"),
        ("<think>a</think><answer>Up", "unclosed <answer>"),
        ("<think><think>a</think></think><answer>Up</answer>", REPEATED_THINK),
        ("<think>a</think><answer><answer>Up</answer></answer>", REPEATED_ANSWER),
        ("<think>a</think><answer>Up</answer><answer>Up</answer>", REPEATED_ANSWER),
        ("</think><think>a</think><answer>Up</answer>", "</think> before <think>"),
        ("hi <think>a</think><answer>Up</answer>", "text before <think>"),
        ("<think>a</think> so <answer>Up</answer>", "text between </think> and <answer>"),
        ("<think>a</think><answer>Up</answer> ok?", "text after </answer>"),
        ("<answer>a</answer><think>x</think>", "text after </answer>"),
        ("<think>a</think><answer>Up <think></answer>", "<think> inside <answer>"),
        ("<think>a</think><answer>Up</think></answer>", "<think> inside <answer>"),
        ("<think>a</think><answer> </answer>", "empty answer: no action given"),
        ("<think>a</think><answer>Up ||</answer>", "empty action between '||' separators"),
    ],
    "answer": [
        ("Up", "missing <answer>...</answer>"),
        ("<think>x</think><answer>Up</answer>", "text before <answer>"),
        ("</answer><answer>Up</answer>", "</answer> before <answer>"),
        ("<answer>Up", "unclosed <answer>"),
        ("<answer></answer>", "empty answer: no action given"),
    ],
    "raw": [
        ("", "empty answer: no action given"),
        ("  \n", "empty answer: no action given"),
        ("||", "empty answer: no action given"),
        ("Up |||| Left", "empty action between '||' separators"),
    ],
}


@pytest.mark.parametrize(
    ("text", "action_format", "error"),
    [(text, fmt, error) for fmt, cases in ERRORS.items() for text, error in cases],
)
def test_error_messages(text: str, action_format: str, error: str) -> None:
    parsed = parse_turn(text, action_format, 3)
    assert parsed.error == error
    assert parsed.actions == () and parsed.dropped == ()
    assert not parsed.format_ok


@pytest.mark.parametrize(
    ("value", "type_name"), [(None, "NoneType"), (3, "int"), (b"Up", "bytes"), (["Up"], "list")]
)
def test_non_str_is_malformed(value: object, type_name: str) -> None:
    for action_format in ACTION_FORMATS:
        parsed = parse_turn(value, action_format, 1)
        assert parsed.error == f"action must be a str, got {type_name}"


def test_100kb_of_text_is_parsed_not_raised() -> None:
    big = "<" * 100_000
    assert parse_turn(big, "think_answer", 5).error == MISSING_BOTH
    inside = f"<think>{big}</think><answer>{'x' * 100_000}</answer>"
    assert parse_turn(inside, "think_answer", 5).actions == ("x" * 100_000,)


def test_programming_errors_raise() -> None:
    with pytest.raises(ValueError, match="action_format must be one of"):
        parse_turn("Up", "json", 1)
    with pytest.raises(ValueError, match="max_actions_per_turn must be >= 1, got 0"):
        parse_turn("Up", "raw", 0)
    with pytest.raises(ValueError, match="action_format must be one of"):
        format_answer(["Up"], "json")


# ----------------------------------------------------------------------------- format_answer


def test_format_answer_by_hand() -> None:
    assert format_answer(["Up", "Left"], "think_answer", think="push") == (
        "<think>push</think><answer>Up || Left</answer>"
    )
    assert format_answer(["Up"], "think_answer") == "<think></think><answer>Up</answer>"
    assert format_answer(["Up", "Left"], "answer") == "<answer>Up || Left</answer>"
    assert format_answer(("Up", "Left"), "raw") == "Up || Left"


# An action piece as parse_turn returns it: stripped, non-empty, no separator, no tag characters.
_piece = (
    st.text(st.characters(exclude_characters="<>|", exclude_categories=("Cs",)), min_size=1)
    .map(str.strip)
    .filter(bool)
)


@settings(
    max_examples=100,
    derandomize=True,
    database=None,
)
@given(
    actions=st.lists(_piece, min_size=1, max_size=5),
    think=st.text(st.characters(exclude_characters="<>")),
    action_format=st.sampled_from(ACTION_FORMATS),
)
def test_format_answer_round_trip(actions: list[str], think: str, action_format: str) -> None:
    text = format_answer(actions, action_format, think=think)
    parsed = parse_turn(text, action_format, len(actions))
    assert parsed.error is None
    assert parsed.actions == tuple(actions)
    assert parsed.dropped == ()
    assert parsed.think == (think if action_format == "think_answer" else None)


@settings(
    max_examples=200,
    derandomize=True,
    database=None,
)
@given(text=st.text(), action_format=st.sampled_from(ACTION_FORMATS), limit=st.integers(1, 4))
def test_any_text_parses_without_raising(text: str, action_format: str, limit: int) -> None:
    parsed = parse_turn(text, action_format, limit)
    assert (parsed.error is None) == bool(parsed.actions)
    assert len(parsed.actions) <= limit
    assert all(a == a.strip() and a for a in parsed.actions)
