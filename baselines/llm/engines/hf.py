"""The in-process transformers engine (:class:`HFEngine`): decoding with a KV cache kept across
the turns of a batch (:func:`generate_cached`, :class:`PrefixCache`), or ``model.generate``
(:func:`generate`). The protocol and the shared stopping rule are in
:mod:`baselines.llm.engines.base`.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from baselines.llm.attention import use_packed_gqa
from baselines.llm.engines.base import (
    Generation,
    SamplingSettings,
    _cut,
    end_token_ids,
    logit_temperature,
)

__all__ = [
    "generate",
    "PrefixCache",
    "sample_rows",
    "generate_cached",
    "PREFILL_CHUNK_TOKENS",
    "HFEngine",
]


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
        #: prompt tokens not prefilled because another row of the batch had the same prompt
        #: (:func:`generate_cached`); ``prefilled_tokens`` counts those prefilled.
        self.shared_tokens = 0
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
        the freed blocks stayed in the heap (docs/memory.md). ``keys``/``values`` are views of
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

        def keep_rows(self, index: torch.Tensor) -> None:
            """Keep only the batch rows ``index`` (int64 ``[B']``): a new buffer of the same
            capacity holding their filled part (rows of a decoding batch that are done leave
            it)."""
            assert self._keys is not None and self._values is not None
            keys = self._keys.new_zeros((len(index), *self._keys.shape[1:]))
            values = self._values.new_zeros((len(index), *self._values.shape[1:]))
            keys[:, :, : self.filled] = self._keys[:, :, : self.filled].index_select(0, index)
            values[:, :, : self.filled] = self._values[:, :, : self.filled].index_select(0, index)
            self._keys, self._values = keys, values
            self.keys, self.values = keys[:, :, : self.filled], values[:, :, : self.filled]

        def _dtype(self, dtype: torch.dtype) -> torch.dtype:
            return self.low if self.low is not None and dtype == torch.float32 else dtype

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = key_states.shape[-2]
            if self._keys is None or self.filled + n > self._keys.shape[-2]:
                # The reserved capacity first; doubling only if a write ever goes past it.
                size = max(self.capacity, n) if self._keys is None else 2 * (self.filled + n)
                # Zeroed: attention may read the unused part (baselines.llm.attention).
                keys = key_states.new_zeros(
                    (*key_states.shape[:2], size, key_states.shape[-1]),
                    dtype=self._dtype(key_states.dtype),
                )
                values = value_states.new_zeros(
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
        low = _autocast_low(next(model.parameters()).device.type)
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

    With ``generators`` (one per row of ``probs``, on its device) row ``r`` draws by inversion of
    its distribution: one uniform ``u`` from ``generators[r]`` (``torch.rand``, float64), and the
    first token whose cumulative probability exceeds ``u`` times the row's total (float64 sums, in
    two levels: blocks of 1,024 tokens, then the tokens of one block), so its token depends only
    on its own distribution and generator: not on the other rows of the batch. A token of
    probability 0 (cut by top-p) is never drawn. Inversion needs one uniform a row where
    ``torch.multinomial`` draws ``V`` exponentials (ATen's one-sample path: ``argmax(p /
    Exp(1))``): a step of 16 rows of SmolLM2's 49,152 tokens took 23.0 ms with one
    ``torch.multinomial`` a row, 0.66 ms by inversion (``benchmarks/bench_generation.py
    --micro``). Rows not in ``rows`` (episodes that already stopped) draw nothing, so a
    generator advances once per token its episode samples, whatever the batch.
    Without ``generators`` one batched ``torch.multinomial`` from torch's global generator.

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
    if not rows:
        return chosen
    index = torch.tensor(rows, dtype=torch.long, device=probs.device)
    u = torch.cat(
        [
            torch.rand(1, generator=generators[r], dtype=torch.float64, device=probs.device)
            for r in rows
        ]
    )
    picked = probs.index_select(0, index)
    # Two levels (one pass over the row, then one block of _BLOCK tokens): the block whose
    # cumulative mass passes u x total, then the token inside it.
    vocab = picked.shape[1]
    blocks = -(-vocab // _BLOCK)
    if blocks * _BLOCK != vocab:
        picked = torch.nn.functional.pad(picked, (0, blocks * _BLOCK - vocab))
    picked = picked.view(len(rows), blocks, _BLOCK)
    block_cdf = picked.sum(dim=-1, dtype=torch.float64).cumsum(dim=-1)  # [R, blocks]
    target = (u * block_cdf[:, -1]).unsqueeze(1)
    block = torch.searchsorted(block_cdf, target, right=True)
    # u x total can round up to the total: then the last block of positive mass.
    block = torch.minimum(block, torch.searchsorted(block_cdf, block_cdf[:, -1:].contiguous()))
    below = torch.where(block > 0, block_cdf.gather(1, (block - 1).clamp(min=0)), 0.0)
    inner = picked.gather(1, block.unsqueeze(2).expand(-1, -1, _BLOCK)).squeeze(1)
    inner_cdf = inner.to(torch.float64).cumsum(dim=-1)  # [R, _BLOCK]
    drawn = torch.searchsorted(inner_cdf, (target - below).contiguous(), right=True)
    # The block's own sum and its cumsum round differently: at most its last positive token.
    last = torch.searchsorted(inner_cdf, inner_cdf[:, -1:].contiguous())
    drawn = torch.minimum(drawn, last)
    chosen[index] = (block * _BLOCK + drawn).squeeze(1)
    return chosen


#: Tokens per block of :func:`sample_rows`' two-level inversion.
_BLOCK = 1024


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

    Rows leave the decoding batch as they finish: once a quarter of the rows still in it are
    done, their keys/values go to ``store`` and the cache, mask and positions keep only the live
    rows (a turn's tail, its few longest replies, no longer decodes the whole batch's width).
    A row's logits do not depend on the rows beside it, so its ids are those it samples alone.

    Rows that share their whole prompt and have no stored prefix (the first turn of a GRPO
    group, whose episodes reset with one seed) are prefilled once: the other rows of the prompt
    start decoding from copies of the first one's keys, values and logits (vLLM's automatic
    prefix caching, for whole prompts), then each samples from its own generator. 16 Sokoban
    episodes in groups of 8 prefill 2 first prompts of ~415 tokens, not 16. Rows with nothing
    stored and distinct prompts that begin alike (an environment's instructions) get their
    longest common prefix prefilled once and copied in like a stored prefix
    (:func:`_share_common_prefix`).

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
    common = -1  # the store index of the prefix shared by the rows with nothing stored
    if store is not None:
        common = _share_common_prefix(model, prompt_ids, hits, store, prefill_chunk_tokens)
        hits = [common if h < 0 else h for h in hits]
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
    # Rows with the same prompt and no stored prefix (a group's first turn: its episodes reset
    # with one seed) are prefilled once, by the first of them (`lead`); the others get copies
    # of its keys, values and logits before decoding. Only a plain cache can copy rows.
    lead = _prompt_leads(prompt_ids, hits) if _supports_prefix_cache(cache) else list(range(batch))
    pre = sorted(set(lead))  # the rows that are prefilled
    if len(pre) < batch:
        chosen_rows = torch.tensor(pre, dtype=torch.long)
        ids, mask, positions = ids[chosen_rows], mask[chosen_rows], positions[chosen_rows]
    if past:
        # Each cached prefix is copied once, into its row of the batch's cache (right-aligned
        # before the new prompt tokens); a layer that is not reserved gets it through update.
        assert store is not None
        for index, layer in enumerate(cache.layers):
            keys = values = None
            for r, (h, k) in enumerate((hits[q], cached[q]) for q in pre):
                if h < 0:
                    continue
                kr, vr = store.entries[h][1][index]
                if keys is None:
                    shape = (len(pre), kr.shape[0], past, kr.shape[-1])
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
        # The last layer's views would keep its buffer alive after rows leave the batch.
        keys = values = None
        # Copied into the batch's cache: free those per-row tensors now (other rows' entries,
        # for another chunk of the same turn, stay).
        used = {h for h in hits if h >= 0}
        store.entries = [e for i, e in enumerate(store.entries) if i not in used]
    kwargs[cache_kw] = cache
    if "logits_to_keep" in params:
        kwargs["logits_to_keep"] = 1
    # Moved to the device once; each chunk's forward takes views of them.
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    columns = max(1, prefill_chunk_tokens // len(pre)) if prefill_chunk_tokens else width
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
    if len(pre) < batch:  # every row from its lead's prefilled row
        where = {r: j for j, r in enumerate(pre)}
        spread = torch.tensor([where[lead[r]] for r in range(batch)], device=device)
        for layer in cache.layers:
            _keep_batch_rows(layer, spread)
        logits = logits.index_select(0, spread)
        mask, positions = mask.index_select(0, spread), positions.index_select(0, spread)
    last = positions[:, -1].clone()
    t = logit_temperature(sampling.temperature)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    lps: list[list[float]] = [[] for _ in range(batch)]
    done = [False] * batch
    fed = 0  # sampled tokens fed back (their keys/values are in the cache)
    # The rows of the decoding batch, as prompt indices: a row that is done leaves the batch
    # (with its keys/values stored first) once a quarter of the batch is done, so the steps
    # after it decode only the live rows (the turn's tail is its longest replies).
    active = list(range(batch))
    compactable = _supports_prefix_cache(cache)
    low = _autocast_low(device.type)
    if store is not None and compactable:
        first = cache.layers[0]
        store.cache_dtypes = (first.keys.dtype, first.values.dtype)

    def keep(rows: list[int], where: list[int]) -> None:
        """Store rows ``rows`` (prompt indices) of the batch, found at batch rows ``where``."""
        assert store is not None
        held = store.nbytes()
        for r, j in zip(rows, where, strict=True):
            # The last sampled token of a row is never fed back (a row that stopped early had
            # a pad fed in its column after that), so its keys/values are not cached.
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
                    _stored(layer.keys[j].index_select(1, index), low),
                    _stored(layer.values[j].index_select(1, index), low),
                )
                for layer in cache.layers
            ]
            size = sum(k.nbytes + v.nbytes for k, v in kv)
            if store.max_bytes and held + size > store.max_bytes:
                store.dropped += 1  # this episode's next turn is prefilled in full
                continue
            held += size
            store.entries.append((list(prompt_ids[r]) + tokens[r][:g], kv))

    for step in range(sampling.max_new_tokens):
        scores = logits.float()
        logp = torch.log_softmax(scores / t, dim=-1)
        if sampling.temperature > 0:
            if sampling.top_p < 1.0:
                probs = torch.softmax(
                    _top_p_filter(scores / sampling.temperature, sampling.top_p), -1
                )
            else:
                probs = logp.exp()  # t is the temperature: the same distribution
            live = [j for j, r in enumerate(active) if not done[r]]
            rows = None if generators is None else [generators[r] for r in active]
            chosen = sample_rows(probs, live, rows)
        else:
            chosen = scores.argmax(dim=-1)
        chosen_lp = logp.gather(1, chosen.unsqueeze(1)).squeeze(1).tolist()
        for r, token, lp in zip(active, chosen.tolist(), chosen_lp, strict=True):
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
        finished = [j for j, r in enumerate(active) if done[r]]
        if compactable and 4 * len(finished) >= len(active):
            if store is not None:
                keep([active[j] for j in finished], finished)
            stay = [j for j, r in enumerate(active) if not done[r]]
            index = torch.tensor(stay, dtype=torch.long, device=device)
            for layer in cache.layers:
                _keep_batch_rows(layer, index)
            mask, last = mask.index_select(0, index), last.index_select(0, index)
            active = [active[j] for j in stay]
        feed = torch.tensor([[pad] if done[r] else [tokens[r][-1]] for r in active], device=device)
        mask = torch.cat(
            [mask, torch.ones((len(active), 1), dtype=mask.dtype, device=device)], dim=1
        )
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
        own = [h >= 0 and h != common for h in hits]  # a row's own entry from its last turn
        store.hits += sum(own)
        reused = sum(k for k, o in zip(cached, own, strict=True) if o)
        prefilled = sum(len(suffix[r]) for r in pre) + (
            cached[hits.index(common)] if common >= 0 else 0
        )
        store.reused_tokens += reused
        store.prefilled_tokens += prefilled
        store.shared_tokens += sum(map(len, prompt_ids)) - reused - prefilled
        if compactable:
            keep(active, list(range(len(active))))
    return results


def _prompt_leads(prompt_ids: list[list[int]], hits: list[int]) -> list[int]:
    """For each row, the first row with the same prompt and the same stored prefix
    (``hits[r]``, -1 for none).

    Example:
        >>> _prompt_leads([[1, 2], [3], [1, 2], [1, 2]], [-1, -1, -1, 0])
        [0, 1, 0, 3]
    """
    first: dict[tuple[int, ...], int] = {}
    return [
        first.setdefault((h, *p), r) for r, (p, h) in enumerate(zip(prompt_ids, hits, strict=True))
    ]


#: The shortest prefix that the rows of a batch with nothing stored must share for
#: :func:`generate_cached` to prefill it once for all of them, in tokens.
MIN_SHARED_PREFIX = 32


def _share_common_prefix(
    model: Any, prompt_ids: list[list[int]], hits: list[int], store: PrefixCache, chunk: int
) -> int:
    """Prefill once the longest prefix that every row with nothing stored (``hits[r] < 0``)
    shares, when there are two distinct such prompts and the prefix is at least
    :data:`MIN_SHARED_PREFIX` tokens (the instructions of one environment: 178 of FrozenLake's
    230 first-prompt tokens, 274 of Sokoban's ~391), and add it to ``store`` as an entry; each
    row keeps at least one token of its own to prefill. The prefix is one unpadded row, in
    forwards of at most ``chunk`` tokens (0: one forward).

    Returns:
        The entry's index in ``store.entries``, or -1 when nothing was shared.
    """
    distinct = {tuple(prompt_ids[r]) for r, h in enumerate(hits) if h < 0}
    if len(distinct) < 2:
        return -1
    shared = os.path.commonprefix(sorted(distinct))
    n = min(len(shared), min(map(len, distinct)) - 1)
    if n < MIN_SHARED_PREFIX:
        return -1
    device = next(model.parameters()).device
    cache = _decoding_cache(model, n)
    if not _supports_prefix_cache(cache):
        return -1
    params = _forward_params(model)
    cache_kw = "cache" if "cache" in params else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    ids = torch.tensor([shared[:n]], dtype=torch.long, device=device)
    for start in range(0, n, chunk or n):
        end = min(n, start + (chunk or n))
        out = model(
            input_ids=ids[:, start:end],
            position_ids=torch.arange(start, end, device=device).unsqueeze(0),
            use_cache=True,
            **{cache_kw: cache},
            **extra,
        )
        cache = getattr(out, "cache", None) or out.past_key_values
    low = _autocast_low(device.type)
    kv = [(_stored(layer.keys[0], low), _stored(layer.values[0], low)) for layer in cache.layers]
    store.entries.append((list(shared[:n]), kv))
    return len(store.entries) - 1


def _keep_batch_rows(layer: Any, index: torch.Tensor) -> None:
    """Keep only the batch rows ``index`` (int64 ``[B']``) of a plain cache layer (a reserved
    layer keeps its capacity; a ``DynamicLayer`` its filled part)."""
    if hasattr(layer, "keep_rows"):
        layer.keep_rows(index)
    else:
        layer.keys = layer.keys.index_select(0, index)
        layer.values = layer.values.index_select(0, index)


def _autocast_low(kind: str) -> torch.dtype | None:
    """The autocast dtype on device type ``kind`` when autocast is on there, else None."""
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None


def _stored(x: torch.Tensor, low: torch.dtype | None) -> torch.Tensor:
    """``x`` as the prefix store keeps it: in the autocast dtype when there is one."""
    return x if low is None or x.dtype == low or not x.is_floating_point() else x.to(low)


#: Default bound of one prefill forward of the HF engine, in tokens (``rollout.prefill_chunk_tokens``,
#: :func:`generate_cached`; docs/memory.md).
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
    (:func:`generate`), which prefills every prompt in full. A model on transformers' SDPA
    attention is switched to :func:`baselines.llm.attention.sdpa_packed_gqa` (the same attention;
    one-token CPU decoding steps on the fast kernel whether or not the batch is padded).

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
    samples_from_copy = False

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
        use_packed_gqa(model)  # one-token CPU decoding steps on the fast SDPA path
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
        use_packed_gqa(model)
        if self.cache is not None:
            self.cache.clear()
        return 0.0

    def release(self) -> None:
        """Drop the stored keys and values of the batch just played (not needed again)."""
        if self.cache is not None:
            self.cache.clear()

    def close(self) -> None:
        self.release()
