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

from typing import Any

import torch

__all__ = ["ATTENTION", "sdpa_packed_gqa", "use_packed_gqa"]

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
        scores = torch.matmul(packed, keys.transpose(-1, -2))[..., :kv].float() * scale
        if attention_mask is not None:  # [B, H_kv, G, K] scores
            if attention_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attention_mask, float("-inf"))
            else:
                scores = scores + attention_mask.float()
        # A query that sees no key (a padding position of a left-padded prefill chunk) gets
        # zeros, as SDPA's CPU kernel gives it, not NaN (which its keys/values would carry on).
        probs = torch.softmax(scores, dim=-1).nan_to_num_(0.0).to(values.dtype)
        if values.shape[2] != kv:
            probs = torch.nn.functional.pad(probs, (0, values.shape[2] - kv))
        out = torch.matmul(probs, values)  # [B, H_kv, G, D]
        return out.reshape(b, h, 1, value.shape[-1]).transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


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
