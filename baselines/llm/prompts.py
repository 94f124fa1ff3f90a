"""Prompts and tokens: the one prompt policy of training, SFT and ``hf:`` evaluation.

:func:`render_prompt` renders a chat as the generation prompt (the chat template, then ``<think>``
in the ``think_answer`` format, :func:`think_prefix_for`); :class:`TokenContext` keeps an
episode's running token context, so the engine is given exactly these ids and the trainer learns
from exactly the ids that were sampled (the token-in-token-out scheme: :mod:`baselines.episodes`'
docstring and docs/engines.md); :class:`TrainingRow` is one training sequence of it;
:func:`turn_prompt` is a turn's prompt under the context budget (a prompt that no longer fits
ends its episode as truncated), for the episode loop and the ``hf:`` agent alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgym.parsing import THINK_OPEN
from baselines.llm.chat_template import render_chat_template
from baselines.llm.engines import Generation, SamplingSettings

__all__ = [
    "THINK_PREFIX",
    "think_prefix_for",
    "render_prompt",
    "TrainingRow",
    "TokenContext",
    "prompt_fits",
    "turn_prompt",
]

#: What ends a generation prompt in the ``think_answer`` format: the action format's opening tag.
THINK_PREFIX = THINK_OPEN


def think_prefix_for(sampling: SamplingSettings, action_format: str) -> str:
    """``"<think>"`` when ``sampling.think_prefix`` is set and the format is ``think_answer``."""
    return THINK_PREFIX if sampling.think_prefix and action_format == "think_answer" else ""


def _template_name(tokenizer: Any) -> str:
    return f"{type(tokenizer).__name__}({getattr(tokenizer, 'name_or_path', '') or 'unnamed'})"


def render_prompt(tokenizer: Any, messages: list[dict[str, str]], prefix: str | bool) -> str:
    """The generation prompt as text: the chat template with the assistant header, plus
    ``prefix`` (``True`` means ``"<think>"``, ``False`` nothing).

    The one prompt renderer of training, SFT and ``hf:`` evaluation (RAGEN appends ``<think>`` the
    same way, ``ragen/llm_agent/ctx_manager.py:653-657,719-723``). The template renders in a worker
    under CPU, memory and wall-time limits (:func:`baselines.llm.chat_template.render_chat_template`),
    byte-identical to ``apply_chat_template(..., tokenize=False)``.

    Raises:
        ValueError: the tokenizer has no chat template.
        baselines.llm.chat_template.ChatTemplateLimitError: the template ran past a limit.
    """
    if prefix is True:
        prefix = THINK_PREFIX
    elif prefix is False:
        prefix = ""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"the tokenizer {_template_name(tokenizer)} has no chat template; set "
            "tokenizer.chat_template (a Jinja template) before rollouts"
        )
    text = render_chat_template(tokenizer, messages, add_generation_prompt=True)
    return text + prefix


@dataclass
class TrainingRow:
    """One training sequence of an episode (exactly what the policy was given and sampled).

    Attributes:
        input_ids: token ids (length L).
        loss_mask: 1 on sampled ids (the end token included when sampled), else 0 (length L).
        logprobs: the engine's sampling log-prob on sampled ids, 0.0 elsewhere (length L).
        turns: indices of the episode's turns sampled in this row, in order.
        turn_ends: per entry of ``turns``, the position of that turn's last sampled id (-1 when
            the turn sampled nothing).
    """

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)


class TokenContext:
    """The running token context of one episode (see the module docstring for the scheme).

    Args:
        tokenizer: the policy's tokenizer, with a chat template.
        prefix: text that ends every generation prompt (``"<think>"`` or ``""``).

    Example:
        >>> ctx = TokenContext(tokenizer, "<think>")  # doctest: +SKIP
        >>> ids = ctx.prompt(chat.messages())          # give these to the engine
        >>> ctx.add(generation)                        # then record what it sampled
    """

    def __init__(self, tokenizer: Any, prefix: str = THINK_PREFIX):
        self.tokenizer, self.prefix = tokenizer, prefix
        self.rows: list[TrainingRow] = []
        self.row = TrainingRow()
        self.text: str | None = None
        self.turn = 0

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _close_row(self) -> None:
        row = self.row
        if any(row.loss_mask):
            last = max(i for i, m in enumerate(row.loss_mask) if m)  # trailing prompt: no loss
            del row.input_ids[last + 1 :], row.loss_mask[last + 1 :], row.logprobs[last + 1 :]
            self.rows.append(row)
        self.row = TrainingRow()

    def prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """The ids to give the engine for the turn that answers ``messages``' last message.

        Raises:
            ValueError: no chat template, or one that adds nothing for
                ``add_generation_prompt=True`` (the reply would not be marked as the assistant's).
        """
        full = render_prompt(self.tokenizer, messages, self.prefix)
        if self.text is None:
            bare = render_chat_template(self.tokenizer, messages)
            if bare + self.prefix == full:
                raise ValueError(
                    f"the chat template of {_template_name(self.tokenizer)} renders no "
                    "generation prompt (add_generation_prompt=True adds nothing), so a reply "
                    "would not be marked as the assistant's; use a template with one"
                )
        if self.text is not None and full.startswith(self.text):
            new = self._encode(full[len(self.text) :])
        else:
            self._close_row()  # first turn, or the template rewrote an earlier turn
            new = self._encode(full)
        row = self.row
        row.input_ids += new
        row.loss_mask += [0] * len(new)
        row.logprobs += [0.0] * len(new)
        self.text = full
        return list(row.input_ids)

    def add(self, generation: Generation) -> int:
        """Append the ids the policy sampled for the current turn; returns this turn's row index."""
        ids = list(generation.sampled_ids)
        lps = list(generation.logprobs) or [0.0] * len(ids)
        if len(lps) != len(ids):
            raise ValueError(f"{len(ids)} sampled ids but {len(lps)} log-probs")
        row = self.row
        row.input_ids += ids
        row.loss_mask += [1] * len(ids)
        row.logprobs += lps
        row.turns.append(self.turn)
        row.turn_ends.append(len(row.input_ids) - 1 if ids else -1)
        self.turn += 1
        assert self.text is not None, "call prompt() before add()"
        self.text += self.tokenizer.decode(ids, skip_special_tokens=False)
        return len(self.rows)

    def finish(self) -> list[TrainingRow]:
        """Close the context; returns every row that holds sampled ids."""
        self._close_row()
        self.text = None
        return self.rows


def prompt_fits(ids: list[int], sampling: SamplingSettings) -> bool:
    """The one context rule of a turn: a prompt of ``len(ids)`` tokens may be generated from when
    it plus ``sampling.max_new_tokens`` is at most ``sampling.max_context_tokens``.

    :func:`turn_prompt` (training, SFT checks) and :class:`baselines.hf_agent.HFAgent`
    (``hf:`` evaluation) both decide with it, so they refuse the same prompts; what follows is
    each caller's: the rollout ends the episode as truncated, the agent fails the episode with an
    error (a leaderboard bundle holds whole episodes, so evaluation cannot stop one early).

    Example:
        >>> prompt_fits([1] * 60, SamplingSettings(max_new_tokens=4, max_context_tokens=64))
        True
        >>> prompt_fits([1] * 61, SamplingSettings(max_new_tokens=4, max_context_tokens=64))
        False
    """
    return len(ids) + sampling.max_new_tokens <= sampling.max_context_tokens


def turn_prompt(
    context: TokenContext, messages: list[dict[str, str]], sampling: SamplingSettings
) -> list[int] | None:
    """The episode loop's prompt of a turn: the ids to give the engine, or ``None`` when the
    episode must end.

    The prompt is ``context.prompt(messages)`` (the chat template, the context's prefix, earlier
    replies kept as their sampled ids); one that does not fit (:func:`prompt_fits`) is never
    generated from (its turn is not played: no sample, no trained id), and the caller ends the
    episode as truncated (:data:`agentgym.lockstep.END_EPISODE`).

    Args:
        context: the episode's running token context.
        messages: the chat so far (its last message is the one to answer).
        sampling: the budget: ``max_new_tokens`` and ``max_context_tokens``.

    Returns:
        The prompt ids, or ``None`` when the prompt no longer fits.
    """
    ids = context.prompt(messages)
    return ids if prompt_fits(ids, sampling) else None
