"""Chat templates rendered in a worker under limits (baselines/llm/chat_template.py).

The renders equal ``apply_chat_template(..., tokenize=False)`` byte for byte; a template that loops
for hours or asks for gigabytes stops with a clear error within its limit, through the trainer's
own prompt renderer (:func:`baselines.llm.prompts.render_prompt`), and leaves no process behind.
Timing assertions are hang guards with a minute of slack (the machine is shared), never speed.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator

import jinja2
import psutil
import pytest
from transformers import AutoTokenizer

from baselines.llm import chat_template
from baselines.llm.chat_template import (
    TEMPLATE_CPU_S,
    ChatTemplateLimitError,
    close_template_workers,
    render_chat_template,
)
from baselines.llm.policy import build_tiny_policy, embedded_model_path
from baselines.llm.prompts import TokenContext, render_prompt

#: Slack over a limit for a loaded machine, seconds.
SLACK_S = 60.0

#: 10^10 loop turns: Jinja's sandbox caps one range at 100,000 items, not a nest of them.
NESTED_LOOPS = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: A 3 GiB string (only its length is printed).
BIG_STRING = "{% set s = 'x' * 3 * 2**30 %}{{ s|length }}<|im_start|>assistant\n"

CONVERSATIONS = [
    [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Turn 1:\nState: #."}],
    [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "Turn 1"},
        {"role": "assistant", "content": "<think>a</think><answer>Up</answer>"},
        {"role": "user", "content": "Reward: -0.1\nTurn 2"},
        {"role": "assistant", "content": "<think>b</think><answer>Left</answer>"},
        {"role": "user", "content": "Turn 3 \u00e9\u4e2d\U0001f600 {{ not jinja }} {% raw %}"},
    ],
    [{"role": "user", "content": "no system message"}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": "last reply"}],
]


@pytest.fixture(scope="module")
def smol():
    return AutoTokenizer.from_pretrained(embedded_model_path())


@pytest.fixture
def fresh_workers() -> Iterator[None]:
    """Each test starts and ends without render workers, so it sees only the ones it made."""
    close_template_workers()
    yield
    close_template_workers()


def _worker_pids() -> set[int]:
    pool = chat_template._pool
    return {w.proc.pid for w in pool._idle} if pool is not None else set()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_embedded_model_renders_as_by_hand(smol) -> None:
    """SmolLM2's template (hand-worked): ChatML turns, its default system message when there is
    none, and the assistant header for add_generation_prompt."""
    assert render_chat_template(smol, CONVERSATIONS[0], add_generation_prompt=True) == (
        "<|im_start|>system\nRules.<|im_end|>\n"
        "<|im_start|>user\nTurn 1:\nState: #.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render_chat_template(smol, CONVERSATIONS[2]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nno system message<|im_end|>\n"
    )


@pytest.mark.parametrize("generation_prompt", [False, True])
@pytest.mark.parametrize("index", range(len(CONVERSATIONS)))
def test_renders_equal_apply_chat_template_byte_for_byte(
    smol, index: int, generation_prompt: bool
) -> None:
    messages = CONVERSATIONS[index]
    want = smol.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt
    )
    got = render_chat_template(smol, messages, add_generation_prompt=generation_prompt)
    assert got.encode() == want.encode()


def test_special_tokens_and_named_templates_render_as_transformers_does(smol) -> None:
    """A template that reads special tokens by name, the tiny ChatML policy's tokenizer, and a
    dict of named templates (the "default" one is used)."""
    _, tiny = build_tiny_policy(["Rules. hi"])
    tok = copy.deepcopy(smol)
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{{ eos_token }}"
        "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    named = copy.deepcopy(smol)
    named.chat_template = {"default": tok.chat_template, "tool_use": "tools"}
    for tokenizer in (tok, tiny, named):
        for messages in CONVERSATIONS:
            want = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            assert render_chat_template(tokenizer, messages, add_generation_prompt=True) == want
    assert render_chat_template(tok, CONVERSATIONS[2]) == (
        "<|im_start|>[user]no system message<|im_end|>"
    )


def test_template_errors_pass_through_as_before(smol) -> None:
    tok = copy.deepcopy(smol)
    tok.chat_template = "{{ raise_exception('roles must alternate') }}"
    with pytest.raises(jinja2.TemplateError, match="roles must alternate"):
        render_chat_template(tok, CONVERSATIONS[0])
    tok.chat_template = "{% for %}"
    with pytest.raises(jinja2.TemplateError):
        render_chat_template(tok, CONVERSATIONS[0])
    with pytest.raises(ValueError, match="empty conversation"):
        render_chat_template(smol, [])
    with pytest.raises(ValueError, match="cpu_s must be a positive number"):
        render_chat_template(smol, CONVERSATIONS[0], cpu_s=0)
    # Jinja's sandbox refuses one range over 100,000 items itself, as apply_chat_template does
    tok.chat_template = "{% for i in range(10**9) %}{% endfor %}"
    with pytest.raises(OverflowError, match="Range too big"):
        render_chat_template(tok, CONVERSATIONS[0])


def test_hours_of_loops_stop_at_the_cpu_limit(smol, fresh_workers) -> None:
    """10^10 loop turns (hours): stopped after the CPU limit (counted in CPU seconds, so a loaded
    machine only makes it later: the wall limit is lifted here) with an error naming the model
    and the limit; the worker used at most the limit beyond its start, is idle after, and is gone
    once the pool closes. Before the fix this ran in the caller, unbounded."""
    tok = copy.deepcopy(smol)
    tok.chat_template = NESTED_LOOPS
    with pytest.raises(ChatTemplateLimitError) as err:
        render_chat_template(tok, CONVERSATIONS[0], add_generation_prompt=True, wall_s=3600)
    message = str(err.value)
    assert f"CPU-time limit of {TEMPLATE_CPU_S:g} s" in message
    assert "SmolLM2-135M-Instruct" in message and "fix or replace" in message
    pids = _worker_pids()
    assert len(pids) == 1
    (pid,) = pids
    worker = psutil.Process(pid)
    # its start (imports: about 1.5 s of CPU), the limit, and the limit's rounding up to 1 s
    assert sum(worker.cpu_times()[:2]) <= TEMPLATE_CPU_S + 6
    assert worker.cpu_percent(interval=0.5) < 50  # stopped, not still looping
    # The worker serves the next render.
    assert render_prompt(smol, CONVERSATIONS[0], False).endswith("<|im_start|>assistant\n")
    close_template_workers()
    assert _gone(pid)


def test_a_multi_gigabyte_string_stops_at_the_memory_limit(smol, fresh_workers) -> None:
    """A 3 GiB string from TokenContext's first turn (the trainer's and the hf: agent's prompt
    path): a MemoryError in the worker, reported as the memory limit. Before the fix the caller
    built it (88 s, then a SyntaxError: Jinja folds the constant into 3 GiB of generated source)."""
    tok = copy.deepcopy(smol)
    tok.chat_template = BIG_STRING
    with pytest.raises(ChatTemplateLimitError, match=r"memory limit of 1024 MiB"):
        TokenContext(tok, "<think>").prompt(CONVERSATIONS[0])
    pids = _worker_pids()
    assert len(pids) == 1
    (pid,) = pids
    assert psutil.Process(pid).memory_info().rss < 2**30  # the string was never built
    close_template_workers()
    assert _gone(pid)


def test_the_wall_time_limit_kills_the_worker(smol, fresh_workers) -> None:
    """With the CPU limit out of reach, the wall limit kills the rendering worker (the backstop
    where no signal handler runs); the pool's replacement serves the next render."""
    render_chat_template(smol, CONVERSATIONS[0])  # the worker's start is not timed
    (pid,) = _worker_pids()
    tok = copy.deepcopy(smol)
    tok.chat_template = NESTED_LOOPS
    start = time.monotonic()
    with pytest.raises(ChatTemplateLimitError, match=r"wall-time limit of 1 s; its worker was"):
        render_chat_template(tok, CONVERSATIONS[0], cpu_s=3600, wall_s=1)
    assert time.monotonic() - start <= 1 + SLACK_S
    assert _gone(pid)
    assert render_chat_template(smol, CONVERSATIONS[2]).endswith("no system message<|im_end|>\n")
    (replacement,) = _worker_pids()
    assert replacement != pid
    close_template_workers()
    assert _gone(replacement)


def test_an_oversized_text_is_not_sent_back(smol, fresh_workers) -> None:
    tok = copy.deepcopy(smol)
    tok.chat_template = "{{ 'x' * 1000 }}"
    with pytest.raises(ChatTemplateLimitError, match="more than 999 characters"):
        render_chat_template(tok, CONVERSATIONS[0], max_chars=999)
    assert render_chat_template(tok, CONVERSATIONS[0], max_chars=1000) == "x" * 1000
