"""Attention for one-token decoding steps on the CPU (:data:`ATTENTION`).

transformers' SDPA path (``transformers.integrations.sdpa_attention``) treats a decoding step
(one query per row) in two ways. With an attention mask (a padded batch) it packs the query
heads that share a key/value head into the query axis, ``[B, H, 1, D] -> [B, H_kv, H/H_kv, D]``,
and calls SDPA on the key/value heads as they are. Without a mask (no row padded: transformers
drops an all-ones mask) it calls SDPA with ``enable_gqa=True``, whose CPU kernel is several times
slower under bf16 autocast, and even the packed SDPA call takes longer than two plain matmuls
(``benchmarks/bench_generation.py --micro``, one layer's step, 2026-12-03: 16 rows x 600 keys
14.6 ms with ``enable_gqa``, 3.2 ms packed, 1.3 ms as two matmuls; 64 x 1,200: 107, 22.8 and
16.2 ms; issue 41's profile: 25.6 ms against 4.8 ms a layer call). :func:`sdpa_packed_gqa` computes every CPU decoding step on the
packed heads, mask or not, with two matmuls, and hands everything else (prefill, training,
CUDA) to transformers' own ``sdpa_attention_forward`` unchanged. Both compute the same softmax
attention (``softmax(q k^T * scale) v`` with query head ``j`` on key/value head
``j // (H / H_kv)``, as ``repeat_kv``); only the kernel and its rounding differ.

:func:`use_packed_gqa` registers it with transformers (``AttentionInterface`` and the SDPA mask
builder under the name :data:`ATTENTION`) and switches a model to it when the model uses SDPA.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["ATTENTION", "SegmentRows", "SharedSegments", "sdpa_packed_gqa", "use_packed_gqa"]

#: The attention implementation's name in transformers' registry.
ATTENTION = "agentgym_sdpa"


def sdpa_packed_gqa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of ``query [B, H, Q, D]`` over ``key``/``value [B, H_kv, K, D]``.

    A CPU decoding step (``Q == 1``, no position bias or soft cap) runs on the packed query
    ``[B, H_kv, H / H_kv, D]`` and the unrepeated keys and values as two matmuls around a
    float32 softmax: ``softmax(q k^T * scale + mask) v`` (Vaswani et al. 2017, eq. 1), the mask
    boolean (True: attend) or additive, ``[B, 1, 1, K]``, broadcast over the heads; with no mask
    every cached key is seen (one query, the last position). Under bf16 autocast both matmuls
    run in bf16: the scores are rounded to bf16 before the float32 softmax (SDPA's CPU kernel
    keeps them in float32) and the probabilities before the second matmul. Measured against a
    float32 reference (9 heads on 3, 600 keys): max error 2.0e-3 against SDPA's 8.2e-4 at unit
    scale, 8.2e-2 against 5.8e-2 with queries and keys 4x larger; in float32 both agree to
    1e-7. The trained log-probs come from the trainer's own scoring pass (prefill path), not from
    here; ``scaled_dot_product_attention``'s CPU kernel took twice the time for the same step
    (``benchmarks/bench_generation.py --micro``). Any other call is transformers'
    ``sdpa_attention_forward``.

    Returns:
        ``(output [B, Q, H, D], None)``, as transformers' attention functions.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if (
        query.shape[2] == 1
        and query.device.type == "cpu"
        and kwargs.get("position_bias") is None
        and kwargs.get("softcap") is None
        and not kwargs.get("output_attentions", False)
    ):
        b, h, _, d = query.shape
        packed = query.reshape(b, h // groups, groups, d)
        scale = kwargs.get("scaling")
        scale = d**-0.5 if scale is None else scale
        kv = key.shape[2]
        # A matmul on a view of a larger buffer (the engine's reserved cache: the filled part
        # of [B, H_kv, capacity, D]) copies it first; on the whole contiguous buffer it does not.
        # The scores past the filled part are cut off, and the probabilities padded with zeros
        # to the buffer's length (the buffer's unused part holds zeros: 0 x 0 adds nothing).
        keys, values = _whole_buffer(key), _whole_buffer(value)
        if keys is None or values is None or keys.shape[2] != values.shape[2]:
            keys, values = key, value
        shared = getattr(keys, "shared_segments", None)
        lead = 0 if shared is None else shared.keys.shape[2]
        # float32 scores [B, H_kv, G, lead + K]: a row's shared segment first, then its own keys,
        # written in place (one softmax over both). A power-of-two scale (head_dim 64: 1/8) is
        # applied to the queries: exact in any float format, so the scores are bit for bit those
        # scaled afterwards, one pass over them fewer.
        exact = math.frexp(scale)[0] == 0.5
        if exact:
            packed = packed * scale
        scores = torch.empty((b, h // groups, groups, lead + kv), device=query.device)
        own = scores[..., lead:]
        own.copy_(torch.matmul(packed, keys.transpose(-1, -2))[..., :kv])
        if not exact:
            own.mul_(scale)
        if attention_mask is not None:  # [B, H_kv, G, K] scores
            if attention_mask.dtype == torch.bool:
                own.masked_fill_(~attention_mask, float("-inf"))
            else:
                own.add_(attention_mask.float())
        if shared is not None:
            shared.scores(packed, 1.0 if exact else scale, out=scores[..., :lead])
        # A query that sees no key (a padding position of a left-padded prefill chunk) gets
        # zeros, as SDPA's CPU kernel gives it, not NaN (which its keys/values would carry on).
        probs = torch.softmax(scores, dim=-1).nan_to_num_(0.0).to(values.dtype)
        if shared is not None:
            head, probs = probs.split([probs.shape[-1] - kv, kv], dim=-1)
        if values.shape[2] != kv:
            probs = torch.nn.functional.pad(probs, (0, values.shape[2] - kv))
        out = torch.matmul(probs, values)  # [B, H_kv, G, D]
        if shared is not None:
            out = shared.add_values(head, out)
        return out.reshape(b, h, 1, value.shape[-1]).transpose(1, 2).contiguous(), None
    if getattr(_whole_buffer(key), "shared_segments", None) is not None:
        raise RuntimeError(
            "sdpa_packed_gqa: a cache split into shared segments serves one-token CPU decoding "
            "steps only (baselines.llm.engines.hf.generate_cached splits it after the prefill)"
        )
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


class SegmentRows:
    """Which shared segment each row of a decoding batch attends to (-1: none), one map for all
    the layers of the batch's cache (:class:`SharedSegments`), as index tensors: ``slot_rows``
    ``[S x N]`` lays the rows out segment by segment (``N`` the largest segment's row count; a
    short segment's spare slots repeat a row, and are never read back), ``row_slot [B]`` is each
    row's slot (a row with no segment takes slot 0, masked whole by ``row_valid`` and
    ``row_none``).

    Args:
        row_segment: the segment of each batch row, in batch order.
        lengths: the real length of each segment, in tokens.
        device: where the indices live (the model's device).
    """

    def __init__(
        self, row_segment: list[int], lengths: list[int], device: torch.device | str = "cpu"
    ) -> None:
        self.device, self.lengths = device, list(lengths)
        self._index(list(row_segment))

    def _index(self, row_segment: list[int]) -> None:
        self.row_segment = row_segment
        count = len(self.lengths)
        members = [[r for r, s in enumerate(row_segment) if s == t] for t in range(count)]
        self.width = max(1, max(map(len, members)))
        slots = [m[j] if j < len(m) else (m[0] if m else 0) for m in members
                 for j in range(self.width)]  # fmt: skip
        where = {r: t * self.width + j for t, m in enumerate(members) for j, r in enumerate(m)}
        valid = torch.zeros((len(row_segment), max(self.lengths)), dtype=torch.bool)
        for r, s in enumerate(row_segment):
            if s >= 0:
                valid[r, : self.lengths[s]] = True
        self.slot_rows = torch.tensor(slots, dtype=torch.long, device=self.device)
        self.row_slot = torch.tensor(
            [where.get(r, 0) for r in range(len(row_segment))], dtype=torch.long, device=self.device
        )
        self.row_valid = valid[:, None, None, :].to(self.device)  # [B, 1, 1, L]
        self.row_none = torch.tensor([s < 0 for s in row_segment], device=self.device)
        self.row_none = self.row_none[:, None, None, None]  # [B, 1, 1, 1]

    def keep(self, index: list[int]) -> None:
        """Keep the batch rows ``index`` (in that order), as the cache's ``keep_rows`` does."""
        self._index([self.row_segment[j] for j in index])


class SharedSegments:
    """The keys and values that several rows of a decoding batch share, held once.

    The rows of a GRPO group begin with one prompt, and every prompt of an environment with its
    instructions: the same tokens, whose keys and values the engine computed once and copied
    (``baselines.llm.engines.hf.generate_cached``). A decoding step streams every key and value
    of every row from memory, and at the engine's shapes that traffic is most of its cost
    (docs/performance.md). Held once, a segment's keys are read once per step for all of its
    rows: their queries are stacked, ``[H_kv, rows x G, D]``, against its ``[H_kv, L, D]`` keys
    (Hydragen, Juravsky et al. 2024; FlashInfer's cascade attention), all segments in one
    batched matmul. The scores of the segment and of the row's own keys go through one softmax
    (their concatenation), so the attention is the one over all of the row's keys; only the
    rounding of the two value matmuls' sum differs from one matmul.

    Args:
        keys, values: ``[S, H_kv, L, D]``, segment ``s`` in ``[s, :, :n_s]`` (zeros after).
        rows: which segment each batch row attends to (shared by the cache's layers).
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, rows: SegmentRows) -> None:
        self.keys, self.values, self.rows = keys, values, rows

    def _slots(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, H_kv, G, *]`` laid out per segment: ``[S, H_kv, N x G, *]``."""
        s, n = self.keys.shape[0], self.rows.width
        y = x.index_select(0, self.rows.slot_rows).view(s, n, *x.shape[1:])
        return y.transpose(1, 2).reshape(s, x.shape[1], n * x.shape[2], x.shape[3])

    def _rows(self, y: torch.Tensor, groups: int) -> torch.Tensor:
        """The inverse of :meth:`_slots`: ``[S, H_kv, N x G, *]`` back to ``[B, H_kv, G, *]``."""
        s, hk, _, last = y.shape
        y = y.view(s, hk, self.rows.width, groups, last).transpose(1, 2)
        return y.reshape(-1, hk, groups, last).index_select(0, self.rows.row_slot)

    def scores(self, packed: torch.Tensor, scale: float, out: torch.Tensor) -> torch.Tensor:
        """``q k^T * scale`` of the packed queries ``[B, H_kv, G, D]`` over each row's segment,
        written into ``out`` (float32 ``[B, H_kv, G, L]``, a view may do): -inf past a
        segment's end and for rows with none. Returns ``out``."""
        part = torch.matmul(self._slots(packed), self.keys.transpose(-1, -2))
        out.copy_(self._rows(part, packed.shape[2]))
        if scale != 1.0:
            out.mul_(scale)
        return out.masked_fill_(~self.rows.row_valid, float("-inf"))

    def add_values(self, probs: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out + probs v`` over each row's segment, ``probs [B, H_kv, G, L]`` (zero where
        :meth:`scores` is -inf), ``out [B, H_kv, G, D]``: summed in float32, returned in
        ``out``'s dtype."""
        part = self._rows(torch.matmul(self._slots(probs), self.values), probs.shape[2])
        part = part.masked_fill_(self.rows.row_none, 0.0)  # slot 0 is not theirs
        return (out.float() + part.float()).to(out.dtype)


def _whole_buffer(view: torch.Tensor) -> torch.Tensor | None:
    """The contiguous ``[B, H, capacity, D]`` tensor whose first positions ``view`` is
    (``view == base[:, :, :K]``), or None."""
    base = view._base
    if (
        base is None
        or base.dim() != 4
        or not base.is_contiguous()
        or base.dtype != view.dtype
        or base.data_ptr() != view.data_ptr()
        or base.shape[:2] != view.shape[:2]
        or base.shape[3] != view.shape[3]
        or base.shape[2] < view.shape[2]
        or base.stride() != view.stride()
    ):
        return None
    return base


def use_packed_gqa(model: Any) -> bool:
    """Switch ``model`` (a transformers model, or a PEFT model around one) from ``"sdpa"`` to
    :func:`sdpa_packed_gqa`; a model on another implementation (eager, flash) is left as it is.

    Returns:
        Whether the model now uses it.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, sdpa_packed_gqa)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    current = getattr(base.config, "_attn_implementation", None)
    if current == ATTENTION:
        return True
    if current != "sdpa":
        return False
    base.set_attn_implementation(ATTENTION)
    return True
