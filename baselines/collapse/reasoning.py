"""The reasoning z of a reply: the one rule of what counts as the reasoning (RAGEN-2: the text
between ``<think>`` and ``</think>``), as text (:func:`reasoning_text`) and as the exact sampled
ids (:func:`reasoning_span`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.lockstep import Step

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def reasoning_text(response: str, special_tokens: Sequence[str] = ()) -> str:
    """The reasoning z of a reply, as RAGEN takes it: the stripped text inside ``<think>...</think>``.

    RAGEN (``ragen/llm_agent/ctx_manager.py:660-669,726-738``) matches
    ``<think>(.*?)</think>`` (the first closed pair), removes the tokenizer's special tokens from
    it and strips white space; a reply without a closed pair gives ``""``. Neither tag is part of
    z, and no ``</think>`` that the policy never sampled is added.

    Args:
        response: the reply as the environment saw it (with the ``<think>`` prefix when the
            prompt ended with one, see :func:`baselines.episodes.render_prompt`).
        special_tokens: strings removed from z (e.g. ``tokenizer.all_special_tokens``).

    Returns:
        z, possibly ``""`` (no closed think block, or only white space in it): such a reply has
        no reasoning to score, and :func:`mi_pairs` drops it.

    Example:
        >>> reasoning_text("<think> arm A paid 0.7 </think><answer>A</answer>")
        'arm A paid 0.7'
        >>> reasoning_text("<think>never closed"), reasoning_text("<think>  </think>")
        ('', '')
    """
    start = response.find(THINK_OPEN)
    if start < 0:
        return ""
    start += len(THINK_OPEN)
    end = response.find(THINK_CLOSE, start)
    if end < 0:
        return ""
    text = response[start:end]
    for token in special_tokens:
        if token:
            text = text.replace(token, "")
    return text.strip()


def extract_reasoning(response: str) -> str:
    """The text inside ``<think>...</think>`` of a reply (up to the end if unclosed), else ``""``."""
    start = response.find("<think>")
    if start < 0:
        return ""
    start += len("<think>")
    end = response.find("</think>", start)
    return response[start:] if end < 0 else response[start:end]


#: What :func:`reasoning_span` says of a turn's reasoning z.
Z_STATUSES = ("valid", "no_think", "unclosed", "empty", "special")


def reasoning_span(tokenizer: Any, turn: Step[Any]) -> tuple[list[int], str]:
    """The sampled ids of a turn's reasoning z, and what became of it: one rule for z.

    z is the span the policy sampled between ``<think>`` (which must open the reply: the prompt
    ends with it, or the reply starts with it) and the first ``</think>``, without either tag, as
    RAGEN-2 takes it (``ragen/llm_agent/ctx_manager.py:660-669``). The ids are exactly the sampled
    ones, never a re-tokenisation and never spliced: the longest prefix of the sampled ids (end
    token dropped) whose text ends before ``</think>`` starts, less leading/trailing ids that
    decode to white space only. A token that holds both the last characters of z and the start of
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
    if not turn.action.startswith(THINK_OPEN):
        return [], "no_think"
    if THINK_CLOSE not in turn.action[len(THINK_OPEN) :]:
        return [], "unclosed"
    sample = turn.sample
    assert sample is not None, "a rollout turn carries its Sample"
    ids = list(sample.sampled_ids[:-1] if sample.ended_with_eos else sample.sampled_ids)
    close = None
    for k in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:k], skip_special_tokens=False)
        if THINK_CLOSE in text:
            close, cut = k, text.index(THINK_CLOSE)
            break
    if close is None:  # the <think> prefix came from the prompt and z closed in it: not sampled
        return [], "unclosed"
    end = close
    while end > 0 and len(tokenizer.decode(ids[:end], skip_special_tokens=False)) > cut:
        end -= 1
    begin = 0
    if tokenizer.decode(ids, skip_special_tokens=False).startswith(THINK_OPEN):
        # The reply sampled <think> itself (the prompt did not end with it): z starts after the
        # ids that spell the tag (a token holding its end and z's start belongs to the tag).
        begin = 1
        while len(tokenizer.decode(ids[:begin], skip_special_tokens=False)) < len(THINK_OPEN):
            begin += 1
    z = ids[begin:end]
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    if any(i in special_ids for i in z):
        return [], "special"

    def blank(i: int) -> bool:
        return not tokenizer.decode([i], skip_special_tokens=False).strip()

    while z and blank(z[0]):
        z.pop(0)
    while z and blank(z[-1]):
        z.pop()
    return (z, "valid") if z else ([], "empty")


def reasoning_ids(tokenizer: Any, turn: Step[Any]) -> list[int]:
    """The sampled ids of a turn's reasoning z (:func:`reasoning_span`), ``[]`` when it has none.

    Args:
        tokenizer: the policy's tokenizer.
        turn: a played turn.

    Returns:
        int token ids, possibly ``[]``.
    """
    return reasoning_span(tokenizer, turn)[0]
