"""Chat templates rendered under limits: a checkpoint's template cannot stall or exhaust the caller.

A chat template is a Jinja program shipped with a checkpoint. transformers renders it in Jinja's
sandbox, which stops *code* (no attribute access to internals, no imports) but not *work*:
``{% for i in range(100000) %}{% for j in range(100000) %}...`` runs for hours and
``{% set s = 'x' * 2**33 %}`` asks for 8 GiB, inside the trainer, the ``hf:`` agent of
``agentgym eval`` or a TRL rollout. :func:`render_chat_template` therefore renders in a worker
process of a per-process :class:`sandboxes.deadline.WorkerPool` (a fresh interpreter, never a fork),
with transformers' own renderer (``transformers.utils.chat_template_utils.render_jinja_template``,
what ``tokenizer.apply_chat_template(..., tokenize=False)`` calls), so the text is byte-identical
to ``apply_chat_template``'s, under four limits per render:

* :data:`TEMPLATE_CPU_S` seconds of CPU time (``RLIMIT_CPU``, raised to "used so far + limit" for
  the render and lifted after it: its ``SIGXCPU`` stops the render, the worker lives on);
* :data:`TEMPLATE_MEMORY_MB` MiB of address space above what the worker already holds
  (``RLIMIT_AS``, likewise per render: over it the render gets ``MemoryError``);
* :data:`TEMPLATE_WALL_S` seconds of wall time from the request (the pool's hard deadline: the
  worker gets SIGKILL and a fresh one replaces it; the backstop where no signal can run);
* :data:`TEMPLATE_MAX_CHARS` characters of rendered text (a longer one is not sent back).

Over a limit, :class:`ChatTemplateLimitError` names the tokenizer, the limit and the fix. The
compiled template stays cached in the worker (transformers' ``lru_cache``), so a render costs two
pipe messages and the pickling of the messages and the text: 0.19-0.30 ms more than
``apply_chat_template`` for chats of 1-20 turns on a loaded 2-core machine (0.08-0.42 ms in the
caller, 0.27-0.72 ms bounded; the first render waits about 2 s for its worker to start), against
hundreds of milliseconds of generation per turn (``benchmarks/bench_chat_template.py``).

Example:
    >>> text = render_chat_template(tokenizer, messages, add_generation_prompt=True)  # doctest: +SKIP
    >>> text == tokenizer.apply_chat_template(  # doctest: +SKIP
    ...     messages, tokenize=False, add_generation_prompt=True
    ... )
    True
"""

from __future__ import annotations

import math
import resource
import signal
import threading
from typing import Any

from agentgym.deadline import DeadlineExceeded, WorkerCrashed, WorkerPool

__all__ = [
    "TEMPLATE_CPU_S",
    "TEMPLATE_MAX_CHARS",
    "TEMPLATE_MEMORY_MB",
    "TEMPLATE_WALL_S",
    "ChatTemplateLimitError",
    "render_chat_template",
    "close_template_workers",
]

#: CPU seconds one render may use (a real template needs milliseconds).
TEMPLATE_CPU_S = 5.0
#: MiB of address space one render may add to its worker (the messages, the text and Jinja's work).
TEMPLATE_MEMORY_MB = 1024
#: Wall seconds from the request to the rendered text; past it the worker is killed. Generous, so
#: that a loaded machine never trips it before the CPU limit does.
TEMPLATE_WALL_S = 60.0
#: Most characters of one rendered text (a long episode's prompt is well under a million).
TEMPLATE_MAX_CHARS = 2**24
#: Most worker processes rendering at once in one process (renders take milliseconds).
MAX_WORKERS = 2

_INITIALIZER = "baselines.llm.chat_template:_start_worker"
_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


class ChatTemplateLimitError(RuntimeError):
    """A chat template ran past a limit of :func:`render_chat_template` (the message names the
    tokenizer, the limit and the fix)."""


def _tokenizer_name(tokenizer: Any) -> str:
    return f"{type(tokenizer).__name__}({getattr(tokenizer, 'name_or_path', '') or 'unnamed'})"


def _workers() -> WorkerPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = WorkerPool(_INITIALIZER, max_workers=MAX_WORKERS)
        return _pool


def close_template_workers() -> None:
    """Stop this process's render workers (a later render starts new ones; also done at exit)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


def _normalized(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as ``apply_chat_template`` hands them to the template (message objects as
    dicts, keys whose value is None dropped), with transformers' own function where it has one."""
    try:
        from transformers.tokenization_utils_base import _normalize_chat_messages
    except ImportError:  # a transformers without it: the same for plain dicts
        return [{k: v for k, v in dict(m).items() if v is not None} for m in messages]
    return _normalize_chat_messages(messages)


def render_chat_template(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = False,
    cpu_s: float = TEMPLATE_CPU_S,
    memory_mb: int = TEMPLATE_MEMORY_MB,
    wall_s: float = TEMPLATE_WALL_S,
    max_chars: int = TEMPLATE_MAX_CHARS,
) -> str:
    """``tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...)``,
    byte for byte, rendered in a worker process under limits (module docstring).

    Args:
        tokenizer: a transformers tokenizer with a chat template (``get_chat_template`` and
            ``special_tokens_map`` are read here; nothing of it is sent but those).
        messages: one conversation, ``[{"role": ..., "content": ...}, ...]``.
        add_generation_prompt: end with the template's assistant header.
        cpu_s: CPU seconds the render may use, > 0 (whole seconds are enforced, rounded up).
        memory_mb: MiB of address space the render may add to its worker, > 0.
        wall_s: wall seconds from the request to the text, > 0; past it the worker is killed.
        max_chars: most characters of the rendered text, > 0 (a longer text is not sent back).

    Returns:
        The rendered text.

    Raises:
        ChatTemplateLimitError: the template ran past ``cpu_s``, ``memory_mb``, ``wall_s`` or
            ``max_chars``, or killed its worker.
        ValueError: no chat template, an empty conversation, or a limit that is not positive.
        jinja2.TemplateError: the template does not parse or raised (``raise_exception``), as
            ``apply_chat_template`` raises it.
    """
    limits = (
        ("cpu_s", cpu_s),
        ("memory_mb", memory_mb),
        ("wall_s", wall_s),
        ("max_chars", max_chars),
    )
    for name, value in limits:
        if not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not messages:
        raise ValueError("cannot render a chat template for an empty conversation")
    # What apply_chat_template reads from the tokenizer: the template (a dict of named templates
    # resolved as it resolves them) and the special tokens, which templates read by name.
    template = tokenizer.get_chat_template()
    conversation = _normalized(messages)
    special = dict(tokenizer.special_tokens_map)
    name = _tokenizer_name(tokenizer)
    fix = (
        "A chat template needs milliseconds: fix or replace the checkpoint's template "
        "(tokenizer.chat_template), or raise the limit (render_chat_template's cpu_s, memory_mb, "
        "wall_s, max_chars; the defaults are baselines.llm.chat_template.TEMPLATE_*)"
    )
    try:
        status, value = _workers().call(
            wall_s,
            _render_in_worker,
            template,
            conversation,
            bool(add_generation_prompt),
            special,
            float(cpu_s),
            int(memory_mb),
            int(max_chars),
        )
    except DeadlineExceeded:
        raise ChatTemplateLimitError(
            f"the chat template of {name} ran past the wall-time limit of {wall_s:g} s; its "
            f"worker was killed. {fix}"
        ) from None
    except WorkerCrashed as err:
        raise ChatTemplateLimitError(
            f"the chat template of {name} killed its render worker ({err}). {fix}"
        ) from None
    if status == "cpu":
        raise ChatTemplateLimitError(
            f"the chat template of {name} ran past the CPU-time limit of {cpu_s:g} s and was "
            f"stopped. {fix}"
        )
    if status == "memory":
        raise ChatTemplateLimitError(
            f"the chat template of {name} ran past the memory limit of {memory_mb} MiB and was "
            f"stopped. {fix}"
        )
    if status == "size":
        raise ChatTemplateLimitError(
            f"the chat template of {name} rendered more than {max_chars} characters (the limit); "
            f"the text was dropped. {fix}"
        )
    return value


# ----------------------------------------------------------------------------- the worker side


class _CPUTimeUp(BaseException):
    """Raised by the SIGXCPU handler; a BaseException so that Jinja's handlers pass it through."""


def _on_sigxcpu(signum: int, frame: Any) -> None:
    raise _CPUTimeUp


def _start_worker() -> None:
    """The pool's initializer: import the renderer before the worker counts as ready."""
    import transformers.utils.chat_template_utils  # noqa: F401

    signal.signal(signal.SIGXCPU, _on_sigxcpu)


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _render_in_worker(
    template: str,
    conversation: list[dict[str, Any]],
    add_generation_prompt: bool,
    special: dict[str, Any],
    cpu_s: float,
    memory_mb: int,
    max_chars: int,
) -> tuple[str, str | None]:
    """``("ok", text)``, or ``("cpu" | "memory" | "size", None)`` over a limit (then this worker's memory
    is freed and it serves the next render)."""
    import jinja2
    from transformers.utils.chat_template_utils import render_jinja_template

    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    cpu_before = resource.getrlimit(resource.RLIMIT_CPU)
    as_before = resource.getrlimit(resource.RLIMIT_AS)
    cpu_hard, as_hard = cpu_before[1], as_before[1]
    cpu_soft = math.ceil(used + cpu_s)
    as_soft = _address_space_bytes() + memory_mb * 2**20
    if cpu_hard != resource.RLIM_INFINITY:
        cpu_soft = min(cpu_soft, cpu_hard)
    if as_hard != resource.RLIM_INFINITY:
        as_soft = min(as_soft, as_hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (as_soft, as_hard))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_soft, cpu_hard))
        try:
            rendered, _ = render_jinja_template(
                conversations=[conversation],
                chat_template=template,
                add_generation_prompt=add_generation_prompt,
                **special,
            )
        finally:
            resource.setrlimit(resource.RLIMIT_CPU, cpu_before)
            resource.setrlimit(resource.RLIMIT_AS, as_before)
    except _CPUTimeUp:
        return "cpu", None
    except MemoryError:
        return "memory", None
    except jinja2.TemplateError as err:
        # Some of Jinja's errors take more than a message to rebuild: send one that pickles.
        raise jinja2.TemplateError(str(err)) from None
    if len(rendered[0]) > max_chars:
        return "size", None
    return "ok", rendered[0]
