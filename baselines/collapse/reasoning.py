"""The reasoning z of a reply: the one rule of what counts as the reasoning (RAGEN-2: the text
between ``<think>`` and ``</think>``), :func:`think_block`, and its views: the text the MI pairs
score (:func:`reasoning_text`), the raw text up to the end of an unclosed block
(:func:`extract_reasoning`) and the exact sampled ids (:func:`reasoning_span`,
:func:`reasoning_ids`). A change to what z is happens in :func:`think_block` alone.

Source: RAGEN takes z as the first ``<think>(.*?)</think>`` match
(``ragen/llm_agent/ctx_manager.py:660-669,726-738``) and scores it in
``ragen/trainer/collapse_metrics.py`` (the first turn's valid reasoning,
``first_turn_valid_rate``, ``collapse_metrics.py:199-205``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from agentgym.lockstep import Step
from agentgym.parsing import THINK_CLOSE, THINK_OPEN

__all__ = [
    "THINK_CLOSE",
    "THINK_OPEN",
    "Z_STATUSES",
    "ThinkBlock",
    "extract_reasoning",
    "reasoning_ids",
    "reasoning_span",
    "reasoning_text",
    "think_block",
]


class ThinkBlock(NamedTuple):
    """Where :func:`think_block` found z in a text: z is ``text[start:end]`` (neither tag).

    Attributes:
        start: the first character of z (just after ``<think>``; 0 when there is none).
        end: where z stops: the start of its ``</think>``; for an unclosed block ``start``
            (``unclosed="drop"``) or the end of the text (``unclosed="to_end"``).
        status: ``"valid"`` (a closed block), ``"no_think"`` (no ``<think>``, or not opening the
            text when ``anchored``) or ``"unclosed"`` (no ``</think>`` after it).
    """

    start: int
    end: int
    status: Literal["valid", "no_think", "unclosed"]


def think_block(
    text: str, *, anchored: bool = False, unclosed: Literal["drop", "to_end"] = "drop"
) -> ThinkBlock:
    """The one rule for z: the first ``<think>`` and the first ``</think>`` after it.

    As RAGEN's ``<think>(.*?)</think>`` (``ragen/llm_agent/ctx_manager.py:660-669``): the first
    opening tag, then the first closing tag after it (so z holds no ``</think>``); neither tag is
    part of z, and no ``</think>`` the policy never wrote is added. The two views that differ on
    some replies say so here, as parameters, not as rules of their own:

    Args:
        text: a reply (with the ``<think>`` prefix when the prompt ended with one), or the
            decoding of the ids sampled for it.
        anchored: ``<think>`` must open ``text`` (the token view, :func:`reasoning_span`: z is
            sampled right after the prompt's prefix); ``False`` takes the first ``<think>``
            anywhere (RAGEN's search, :func:`reasoning_text`).
        unclosed: what z is when no ``</think>`` follows: ``"drop"`` nothing (RAGEN: no match,
            no z), ``"to_end"`` everything after ``<think>`` (:func:`extract_reasoning`, the
            reasoning a reader is shown). The status is ``"unclosed"`` either way.

    Returns:
        A :class:`ThinkBlock`.

    Example:
        >>> think_block("<think>a</think><answer>A</answer>")
        ThinkBlock(start=7, end=8, status='valid')
        >>> think_block("<think>ab"), think_block("<think>ab", unclosed="to_end")
        (ThinkBlock(start=7, end=7, status='unclosed'), ThinkBlock(start=7, end=9, status='unclosed'))
        >>> think_block(" <think>a</think>", anchored=True).status
        'no_think'
    """
    start = 0 if text.startswith(THINK_OPEN) else -1 if anchored else text.find(THINK_OPEN)
    if start < 0:
        return ThinkBlock(0, 0, "no_think")
    start += len(THINK_OPEN)
    end = text.find(THINK_CLOSE, start)
    if end < 0:
        return ThinkBlock(start, len(text) if unclosed == "to_end" else start, "unclosed")
    return ThinkBlock(start, end, "valid")


def reasoning_text(response: str, special_tokens: Sequence[str] = ()) -> str:
    """The reasoning z of a reply, as RAGEN takes it: the stripped text inside ``<think>...</think>``.

    The text view of :func:`think_block` (the first closed pair, anywhere in the reply), as RAGEN
    (``ragen/llm_agent/ctx_manager.py:660-669,726-738``) takes it: the tokenizer's special tokens
    removed, white space stripped; a reply without a closed pair gives ``""``.

    Args:
        response: the reply as the environment saw it (with the ``<think>`` prefix when the
            prompt ended with one, see :func:`baselines.llm.prompts.render_prompt`).
        special_tokens: strings removed from z (e.g. ``tokenizer.all_special_tokens``).

    Returns:
        z, possibly ``""`` (no closed think block, or only white space in it): such a reply has
        no reasoning to score, and :func:`baselines.collapse.mi.mi_pairs` drops it.

    Example:
        >>> reasoning_text("<think> arm A paid 0.7 </think><answer>A</answer>")
        'arm A paid 0.7'
        >>> reasoning_text("<think>never closed"), reasoning_text("<think>  </think>")
        ('', '')
    """
    block = think_block(response)
    if block.status != "valid":
        return ""
    text = response[block.start : block.end]
    for token in special_tokens:
        if token:
            text = text.replace(token, "")
    return text.strip()


def extract_reasoning(response: str) -> str:
    """The text inside ``<think>...</think>`` of a reply (up to the end if unclosed), else ``""``.

    The raw view of :func:`think_block` with ``unclosed="to_end"`` (nothing stripped or removed).

    Example:
        >>> extract_reasoning("<think> plan"), extract_reasoning("<answer>A</answer>")
        (' plan', '')
    """
    block = think_block(response, unclosed="to_end")
    return response[block.start : block.end]


#: What :func:`reasoning_span` says of a turn's reasoning z.
Z_STATUSES = ("valid", "no_think", "unclosed", "empty", "special")


def reasoning_span(tokenizer: Any, turn: Step[Any]) -> tuple[list[int], str]:
    """The sampled ids of a turn's reasoning z, and what became of it: one rule for z.

    The token view of :func:`think_block` (``anchored=True``): z is the span the policy sampled
    between ``<think>`` (which must open the reply: the prompt ends with it, or the reply starts
    with it) and the first ``</think>``, without either tag, as RAGEN-2 takes it
    (``ragen/llm_agent/ctx_manager.py:660-669``); the rule is applied to the reply, then to the
    decoding of the sampled ids, which places z among them. The ids are exactly the sampled
    ones, never a re-tokenisation and never spliced: the longest prefix of the sampled ids (end
    token dropped) whose text ends before ``</think>`` starts, kept verbatim: ids that decode to
    white space at either end (a newline after ``<think>``) stay in z, since cutting them would
    score a sequence the policy never sampled (issue 44). A token that holds both the last characters of z and the start of
    ``</think>`` (e.g. ``"done</"``) is left out, as it is part of the closing tag.

    Statuses (:data:`Z_STATUSES`; the ids are ``[]`` unless ``"valid"``): ``"no_think"`` the
    reply does not open with ``<think>``; ``"unclosed"`` no sampled ``</think>``; ``"empty"``
    only white space inside; ``"special"`` the span holds a special-token id (e.g. an end of turn
    sampled inside the block): the MI scorer would otherwise teacher-force a sequence the policy
    never produced (RAGEN removes special tokens from the text and scores the rest; docs/ragen2.md,
    Z), so such a z is dropped and counted.

    Args:
        tokenizer: the policy's tokenizer.
        turn: a played turn (``action`` starts with ``<think>`` when the prompt ended with it).

    Returns:
        ``(ids, status)``: int token ids (``[]`` unless valid) and one of :data:`Z_STATUSES`.
    """
    status = think_block(turn.action, anchored=True).status
    if status != "valid":
        return [], status
    sample = turn.sample
    assert sample is not None, "a rollout turn carries its Sample"
    ids = list(sample.sampled_ids[:-1] if sample.ended_with_eos else sample.sampled_ids)

    def decode(part: list[int]) -> str:
        return tokenizer.decode(part, skip_special_tokens=False)

    def block_of(text: str) -> tuple[int, ThinkBlock]:
        # The sampled text, opened by its own <think> or by the prompt's (shift: the prompt's).
        shift = 0 if text.startswith(THINK_OPEN) else len(THINK_OPEN)
        return shift, think_block(THINK_OPEN[:shift] + text, anchored=True)

    # The first sampled id after which z has closed; cut: where its </think> starts.
    close = None
    for k in range(1, len(ids) + 1):
        shift, block = block_of(decode(ids[:k]))
        if block.status == "valid":
            close, cut = k, block.end - shift
            break
    if close is None:  # the <think> prefix came from the prompt and z closed in it: not sampled
        return [], "unclosed"
    end = close
    while end > 0 and len(decode(ids[:end])) > cut:
        end -= 1
    shift, block = block_of(decode(ids))
    begin = 0
    if shift == 0:
        # The reply sampled <think> itself (the prompt did not end with it): z starts after the
        # ids that spell the tag (a token holding its end and z's start belongs to the tag).
        begin = 1
        while len(decode(ids[:begin])) < block.start:
            begin += 1
    z = ids[begin:end]
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    if any(i in special_ids for i in z):
        return [], "special"
    # Kept verbatim: ids that decode to white space at either end (a newline after <think>)
    # were sampled and stay in z, so the scorer teacher-forces what the policy produced.
    return (z, "valid") if decode(z).strip() else ([], "empty")


def reasoning_ids(tokenizer: Any, turn: Step[Any]) -> list[int]:
    """The sampled ids of a turn's reasoning z (:func:`reasoning_span`), ``[]`` when it has none.

    Args:
        tokenizer: the policy's tokenizer.
        turn: a played turn.

    Returns:
        int token ids, possibly ``[]``.
    """
    return reasoning_span(tokenizer, turn)[0]
