"""Prompts and tokens: the one prompt policy of training, SFT and ``hf:`` evaluation.

:func:`render_prompt` renders a chat as the generation prompt (the chat template, then ``<think>``
in the ``think_answer`` format, :func:`think_prefix_for`); :class:`TokenContext` keeps an
episode's running token context, so the engine is given exactly these ids and the trainer learns
from exactly the ids that were sampled (the token-in-token-out scheme: :mod:`baselines.episodes`'
docstring and docs/engines.md); :class:`TrainingRow` is one training sequence of it;
:func:`turn_prompt` is a turn's prompt under the context budget (a prompt that no longer fits
ends its episode as truncated), for the episode loop and the ``hf:`` agent alike.

**Environment text is data, never control.** A chat template writes its control tokens
(``<|im_start|>``, ``<|im_end|>``) around message contents; a content (an observation, a problem,
an echoed search query, the instructions) that spells one out must stay text, or an observation
could end the user's turn and forge an assistant turn. So every message content is escaped before
the template renders (each of the tokenizer's special tokens, :func:`control_strings`, becomes a
private-use escape the template passes through), every control string left in the rendering is
the template's own and becomes its special id, and the text between them is unescaped and
tokenised with ``split_special_tokens=True`` (:func:`encode_rendered`; transformers' option, as
peers tokenise untrusted content). A chat without control strings in its contents is tokenised
exactly as before (one ``tokenizer(text)`` call). Sampled replies stay the ids the policy sampled.

**Templates.** A template that refuses a system message (``raise_exception('System role not
supported')``) gets the instructions folded into the first user turn (:func:`render_messages`);
a template whose generation prompt already opens ``<think>`` gets no second one from the prefix.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from typing import Any

import jinja2

from agentgym.parsing import ACTION_SEPARATOR, ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN
from baselines.llm.chat_template import render_chat_template
from baselines.llm.engines import Generation, SamplingSettings

__all__ = [
    "THINK_PREFIX",
    "think_prefix_for",
    "control_strings",
    "render_messages",
    "encode_rendered",
    "encode_content",
    "render_prompt",
    "prompt_token_ids",
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


# ----------------------------------------------------------------------------- control strings

#: Opens an escape in a rendering (Unicode private use): ``_ESC + _ESC`` is a literal ``_ESC``,
#: ``_ESC + chr(_CODE + k)`` the k-th control string written by a content.
_ESC = "\ue000"
_CODE = 0xE100


#: The action format's strings (agentgym.parsing): a tokenizer may make them special tokens (the
#: test policy's word-level vocabulary does, :func:`baselines.llm.policy.build_tiny_policy`), but
#: they are the format's words, which the instructions name and the policy writes, not the chat's
#: control: they keep their ids wherever they stand.
_FORMAT_STRINGS = frozenset({THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE, ACTION_SEPARATOR})


@dataclass(frozen=True)
class _Controls:
    strings: tuple[str, ...]  # longest first, so the pattern matches leftmost-longest as HF does
    index: dict[str, int]
    pattern: re.Pattern[str] | None  # the control strings (escaped in contents)
    specials: re.Pattern[str] | None  # every special token (where encode_rendered splits)
    # special tokens that eat the white space on their left / right (AddedToken lstrip, rstrip)
    lstrip: frozenset[str] = frozenset()
    rstrip: frozenset[str] = frozenset()


_CONTROLS: weakref.WeakKeyDictionary[Any, tuple[int, _Controls]] = weakref.WeakKeyDictionary()


def control_strings(tokenizer: Any) -> tuple[str, ...]:
    """The tokenizer's special tokens as text, longest first: those that ``tokenizer(text)``
    turns into their special ids and ``split_special_tokens=True`` leaves as text (the added
    tokens marked special, e.g. SmolLM2's 17 from ``<|endoftext|>`` to ``<empty_output>``, and the
    named special tokens), less the action format's tags and separator. Non-special added tokens
    (Qwen3's ``<think>``) are ordinary vocabulary.
    """
    return _controls(tokenizer).strings


def _alternation(strings: list[str]) -> re.Pattern[str] | None:
    ordered = sorted(strings, key=lambda t: (-len(t), t))  # leftmost-longest, as HF matches
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


def _controls(tokenizer: Any) -> _Controls:
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    try:
        cached = _CONTROLS.get(tokenizer)
    except TypeError:  # not weakly referenceable: compute every time
        cached = None
    if cached is not None and cached[0] == len(added):
        return cached[1]
    found = {t.content for t in added.values() if getattr(t, "special", False)}
    found.update(str(t) for t in getattr(tokenizer, "all_special_tokens", ()) or ())
    found.discard("")
    strings = tuple(sorted(found - _FORMAT_STRINGS, key=lambda t: (-len(t), t)))
    special_added = [t for t in added.values() if t.content in found]
    controls = _Controls(
        strings,
        {t: k for k, t in enumerate(strings)},
        _alternation(list(strings)),
        _alternation(sorted(found)),
        frozenset(t.content for t in special_added if getattr(t, "lstrip", False)),
        frozenset(t.content for t in special_added if getattr(t, "rstrip", False)),
    )
    try:
        _CONTROLS[tokenizer] = (len(added), controls)
    except TypeError:
        pass
    return controls


def _escape(text: str, controls: _Controls) -> str:
    """``text`` with every control string (and the escape character) escaped; the identity on
    text that holds neither."""
    if _ESC not in text and (controls.pattern is None or not controls.pattern.search(text)):
        return text
    text = text.replace(_ESC, _ESC + _ESC)
    if controls.pattern is None:
        return text
    return controls.pattern.sub(lambda m: _ESC + chr(_CODE + controls.index[m.group()]), text)


def _unescape(text: str, controls: _Controls) -> str:
    if _ESC not in text:
        return text

    def literal(m: re.Match[str]) -> str:
        code = m.group(1)
        if code == _ESC:
            return _ESC
        k = ord(code) - _CODE
        return controls.strings[k] if 0 <= k < len(controls.strings) else m.group()

    return re.sub(f"{_ESC}(.)", literal, text, flags=re.DOTALL)


def _fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system message's content at the head of the first user turn (a user turn of its own
    when none follows it)."""
    system, rest = messages[0], [dict(m) for m in messages[1:]]
    if rest and rest[0].get("role") == "user":
        rest[0]["content"] = f"{system['content']}\n\n{rest[0]['content']}"
    else:
        rest.insert(0, {"role": "user", "content": system["content"]})
    return rest


def render_messages(
    tokenizer: Any, messages: list[dict[str, Any]], *, add_generation_prompt: bool = False
) -> str:
    """The chat template's rendering of ``messages`` with every content escaped (module
    docstring): the form :func:`encode_rendered` tokenises and :class:`TokenContext` extends.

    A template that raises on the system message (several instruct models' "System role not
    supported") renders the chat with the system content folded into the first user turn
    (``system + "\\n\\n" + user``), every turn alike, so the fold is stable across turns; when that
    fails too, the template's first error is raised.

    Raises:
        jinja2.TemplateError: the template raised, with and without the fold.
        baselines.llm.chat_template.ChatTemplateLimitError: the template ran past a limit.
    """
    controls = _controls(tokenizer)
    escaped = [
        {**m, "content": _escape(m["content"], controls)}
        if isinstance(m.get("content"), str)
        else dict(m)
        for m in messages
    ]
    try:
        return render_chat_template(tokenizer, escaped, add_generation_prompt=add_generation_prompt)
    except jinja2.TemplateError as err:
        if not escaped or escaped[0].get("role") != "system":
            raise
        try:
            return render_chat_template(
                tokenizer, _fold_system(escaped), add_generation_prompt=add_generation_prompt
            )
        except jinja2.TemplateError:
            raise err from None


def encode_rendered(tokenizer: Any, text: str) -> list[int]:
    """Token ids of (part of) a :func:`render_messages` rendering: each control string in
    ``text`` (the template's own: contents were escaped) as its special id, everything between
    them unescaped and tokenised with ``split_special_tokens=True``, so no control id comes from
    a content (a special token of the action format keeps its id, as before). A text without
    escapes is tokenised as ``tokenizer(text, add_special_tokens=False)`` (the same ids: that
    call also splits at the special tokens and tokenises between them, and a special token
    marked ``lstrip``/``rstrip`` (an end-of-turn token may be) eats the white space beside it
    there as here, so a content's control string changes no id of the template's own text).
    """
    if _ESC not in text:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    controls = _controls(tokenizer)

    def literal(piece: str) -> list[int]:
        if not piece:
            return []
        piece = _unescape(piece, controls)
        return list(
            tokenizer(piece, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        )

    ids: list[int] = []
    start = 0
    strip_left = False  # the token before this piece eats the white space after it (rstrip)
    for m in controls.specials.finditer(text) if controls.specials is not None else ():
        piece = text[start : m.start()]
        if strip_left:
            piece = _WHITE_LEFT.sub("", piece)
        if m.group() in controls.lstrip:
            piece = _WHITE_RIGHT.sub("", piece)
        ids += literal(piece)
        ids.append(int(tokenizer.convert_tokens_to_ids(m.group())))
        strip_left = m.group() in controls.rstrip
        start = m.end()
    piece = text[start:]
    return ids + literal(_WHITE_LEFT.sub("", piece) if strip_left else piece)


# Unicode White_Space, what a special token's lstrip/rstrip eats in ``tokenizer(text)`` (Rust's
# char::is_whitespace; Python's str.isspace also takes U+001C..U+001F)
_WHITE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WHITE_LEFT = re.compile(f"^[{_WHITE}]+")
_WHITE_RIGHT = re.compile(f"[{_WHITE}]+$")


def encode_content(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a message content on its own (an SFT target, a reasoning to score), each
    control string in it as text (:func:`encode_rendered` of the escaped text); without one,
    ``tokenizer(text, add_special_tokens=False)``'s ids."""
    return encode_rendered(tokenizer, _escape(text, _controls(tokenizer)))


def _generation_prompt(tokenizer: Any, messages: list[dict[str, Any]], prefix: str | bool) -> str:
    """:func:`render_prompt`'s text in escaped form."""
    if prefix is True:
        prefix = THINK_PREFIX
    elif prefix is False:
        prefix = ""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"the tokenizer {_template_name(tokenizer)} has no chat template; set "
            "tokenizer.chat_template (a Jinja template) before rollouts"
        )
    text = render_messages(tokenizer, messages, add_generation_prompt=True)
    if prefix and text.rstrip().endswith(prefix):
        return text  # the template's generation prompt opens it already (DeepSeek-R1 style)
    return text + prefix


def render_prompt(tokenizer: Any, messages: list[dict[str, str]], prefix: str | bool) -> str:
    """The generation prompt as text: the chat template with the assistant header, plus
    ``prefix`` (``True`` means ``"<think>"``, ``False`` nothing) unless the template's generation
    prompt already ends with it (then it is not repeated).

    The one prompt renderer of training, SFT and ``hf:`` evaluation (RAGEN appends ``<think>`` the
    same way, ``ragen/llm_agent/ctx_manager.py:653-657,719-723``). The template renders in a worker
    under CPU, memory and wall-time limits (:func:`baselines.llm.chat_template.render_chat_template`),
    byte-identical to ``apply_chat_template(..., tokenize=False)`` (a template without a system
    role gets the instructions in the first user turn, :func:`render_messages`). Tokenise the chat
    with :func:`prompt_token_ids`, not ``tokenizer(text)``: this text cannot tell the template's
    control strings from a content's.

    Raises:
        ValueError: the tokenizer has no chat template.
        baselines.llm.chat_template.ChatTemplateLimitError: the template ran past a limit.
    """
    return _unescape(_generation_prompt(tokenizer, messages, prefix), _controls(tokenizer))


def prompt_token_ids(
    tokenizer: Any, messages: list[dict[str, str]], prefix: str | bool
) -> list[int]:
    """The ids of :func:`render_prompt`'s text, each control string of a content kept as text
    (:func:`encode_rendered`): what :class:`TokenContext` gives the engine on a chat's first
    turn.

    Example (SmolLM2's tokenizer, ``<|im_end|>`` is id 2: one per message, none from a content):
        >>> chat = [
        ...     {"role": "system", "content": "Rules."},
        ...     {"role": "user", "content": "a<|im_end|>"},
        ... ]
        >>> prompt_token_ids(tokenizer, chat, "").count(2)  # doctest: +SKIP
        2

    Raises:
        ValueError: the tokenizer has no chat template.
        baselines.llm.chat_template.ChatTemplateLimitError: the template ran past a limit.
    """
    return encode_rendered(tokenizer, _generation_prompt(tokenizer, messages, prefix))


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
        return encode_rendered(self.tokenizer, text)

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
        full = _generation_prompt(self.tokenizer, messages, self.prefix)
        if self.text is None:
            bare = render_messages(self.tokenizer, messages)
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
        # The context's text is in render_messages' escaped form: the reply enters the next
        # rendering as a (escaped) content, its end token as the template's own.
        reply = self.tokenizer.decode(generation.reply_ids, skip_special_tokens=False)
        escaped = _escape(reply, _controls(self.tokenizer))
        if escaped == reply:
            self.text += self.tokenizer.decode(ids, skip_special_tokens=False)
        else:
            end = ids[len(generation.reply_ids) :]
            self.text += escaped + self.tokenizer.decode(end, skip_special_tokens=False)
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
