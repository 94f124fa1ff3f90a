"""Log-probs and entropy of chosen tokens, read from the LM head only where a loss needs them.

A causal LM's head turns every position's hidden state into ``V`` logits (SmolLM2: 49,152). A
trainer that asks the model for ``.logits`` at every position of a ``[B, T]`` batch holds a
``[B, T, V]`` tensor (one 2,000-token row of SmolLM2: 393 MB in float32), then again for the
log-softmax, the entropy and their gradients, although the loss reads only the positions of the
policy's own tokens (a tenth of the row in multi-turn Sokoban). Here:

1. the transformer trunk runs once (``model.get_decoder()``: every layer but the head), giving the
   last hidden state ``[B, T, H]``;
2. the hidden states of the scored positions alone are gathered, ``[N, H]``;
3. the head runs over them in chunks of ``chunk_size`` rows; each chunk's logits become the
   chosen token's log-prob (``z_y - logsumexp(z)``, TRL's ``selective_log_softmax`` habit) and,
   when asked, the entropy ``logsumexp(z) - sum_v softmax(z)_v z_v``, both in float32;
4. the backward (:class:`_FusedHead`, written by hand) recomputes each chunk's logits instead of
   keeping them, so peak memory is one chunk of ``chunk_size x V`` floats (and its softmax)
   and the bf16 logit gradients of four chunks, whatever ``N`` is. The price is one more head matmul over the scored rows. (A model with a
   logit soft cap, Gemma 2, takes autograd's own backward with each chunk checkpointed.)

No ``[B, T, V]`` tensor exists at any point. In float32 the values equal those of the full
``log_softmax(model(...).logits / T)`` to float rounding (``tests/test_scoring.py`` compares them
on a real model). Mixed precision (:func:`autocast`) applies to the trunk and the head matmul; the
softmax, log-sum-exp and entropy are float32 (float64 for a float64 model).

Sources: TRL ``trl/trainer/utils.py`` (``selective_log_softmax``) and GRPOTrainer's
``logits_to_keep``; the chunked, recomputed head is the idea of Liger-Kernel's fused linear
cross-entropy (Hsu et al. 2024, "Liger Kernel", Sec. 3.3), here on plain torch ops.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "autocast",
    "bf16_supported",
    "resolve_autocast",
    "trunk",
    "hidden_states",
    "head_logprobs",
    "score_targets",
]

#: Rows of logits materialised at once by :func:`head_logprobs` (SmolLM2: 128 x 49,152 float32 =
#: 25 MB, and as much again for the softmax). Below glibc's largest mmap threshold (32 MB), so the
#: chunks' tensors are reused from the heap; at 512 rows (100 MB) every one was a fresh mmap whose
#: pages faulted in on first touch: the head's forward and backward over 1,116 rows took 4.6 s at
#: 512 rows and 2.1 s at 128 (1 thread, bf16 autocast; 64 rows: 2.4 s).
DEFAULT_CHUNK_ROWS = 128


def bf16_supported(device: torch.device | str) -> bool:
    """Whether ``device`` computes bfloat16 matmuls natively (fast, not emulated).

    CUDA: ``torch.cuda.is_bf16_supported()`` (Ampere and later). CPU: oneDNN's check for
    AVX-512 BF16 or AMX (``torch.ops.mkldnn._is_mkldnn_bf16_supported``); without them bf16 is
    emulated and slower than float32.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            return False
    return False


def resolve_autocast(dtype: str, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype of ``model.dtype`` on ``device``, ``None`` for plain float32.

    ``"auto"``: bfloat16 where :func:`bf16_supported`, else float32; ``"float32"``: none;
    ``"bfloat16"``: bfloat16 (emulated where the hardware lacks it: slow, but the user asked).
    Parameters and AdamW state stay float32 in every case: updates of ``lr * grad`` below
    bfloat16's spacing (2^-8 relative) would round away in bf16 weights.

    Raises:
        ValueError: another ``dtype``.
    """
    if dtype == "auto":
        return torch.bfloat16 if bf16_supported(device) else None
    if dtype == "float32":
        return None
    if dtype == "bfloat16":
        return torch.bfloat16
    raise ValueError(f"model.dtype must be 'auto', 'float32' or 'bfloat16'; got {dtype!r}")


def describe_precision(setting: str, device: torch.device | str, dtype: torch.dtype | None) -> str:
    """One line saying what ``model.dtype: setting`` resolved to on ``device`` (printed when a
    run starts), e.g. ``"precision: float32 weights and AdamW state, bfloat16 autocast
    (model.dtype=auto on cpu)"``."""
    compute = "float32 compute" if dtype is None else f"{str(dtype).split('.')[-1]} autocast"
    where = torch.device(device).type
    return (
        f"precision: float32 weights and AdamW state, {compute} (model.dtype={setting} on {where})"
    )


@contextlib.contextmanager
def checkpointed_if(model: torch.nn.Module, oversized: bool):
    """Selective activation checkpointing for one forward/backward whose micro-batch is over its
    token budget (a single row longer than ``micro_batch_tokens``, which
    :func:`baselines.rl.minibatches.pack_by_tokens` must leave alone), so that the budget bounds
    activation memory for every row: a 4,096-token SmolLM2 row held 7.7 GB without it
    (docs/memory.md). Each decoder layer keeps the outputs of its matmuls and of its attention
    kernel (:func:`set_checkpointing` with ``selective=True``: SmolLM2 in bf16 ~0.35 MB a
    token over its 30 layers by count, against ~1.6 MB a token without checkpointing) and
    recomputes only the element-wise work in the backward pass (norms, rotary embedding,
    activations): no matmul and no attention is computed twice. A no-op when ``oversized`` is
    False or checkpointing is already on (``model.gradient_checkpointing``, which keeps that
    setting's full recompute). The forward and the backward both run inside the context.
    """
    base = _causal_lm(model)
    if not oversized or any(getattr(m, "gradient_checkpointing", False) for m in base.modules()):
        yield
        return
    set_checkpointing(base, True, selective=True)
    try:
        yield
    finally:
        set_checkpointing(base, False)


def _saved_by_selective_checkpointing() -> frozenset:
    """The ops whose outputs a selectively checkpointed layer keeps: matmuls and the attention
    kernels of every backend this torch has (CPU flash, CUDA flash, memory-efficient, cuDNN)."""
    aten = torch.ops.aten
    names = (
        "mm",
        "addmm",
        "bmm",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    )
    return frozenset(getattr(aten, name).default for name in names if hasattr(aten, name))


def _keep_matmuls(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """torch's selective-checkpoint policy: keep the outputs of
    :func:`_saved_by_selective_checkpointing`'s ops, recompute everything else."""
    from torch.utils.checkpoint import CheckpointPolicy

    keep = op in _SAVED_OPS
    return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE


_SAVED_OPS = _saved_by_selective_checkpointing()


def _selective_context() -> Any:
    """``context_fn`` of :func:`torch.utils.checkpoint.checkpoint` for :func:`_keep_matmuls`."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(_keep_matmuls)


def set_checkpointing(model: torch.nn.Module, on: bool, *, selective: bool = False) -> None:
    """Turn a transformers model's activation (gradient) checkpointing on or off, non-reentrant:
    ``activation_checkpointing_enable`` where transformers has it, else the older
    ``gradient_checkpointing_enable``.

    ``selective``: each layer keeps its matmul and attention outputs and recomputes the rest
    (PyTorch's selective activation checkpointing, ``torch.utils.checkpoint
    .create_selective_checkpoint_contexts``): about a fifth of a layer's activations for
    SmolLM2, and the backward pays element-wise work again instead of a whole extra forward
    (a 4-row Sokoban update: 82.0 s against 94.5 s, medians of 3 alternating runs,
    docs/performance.md). Otherwise a layer keeps its input alone (``model.gradient_checkpointing``:
    the least memory).
    """
    kwargs: dict[str, Any] = {"use_reentrant": False}
    if selective:
        kwargs["context_fn"] = _selective_context
    if hasattr(model, "activation_checkpointing_enable"):
        if on:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.activation_checkpointing_disable()
    elif on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_disable()


def autocast(device: torch.device | str, dtype: torch.dtype | None):
    """``torch.autocast(device.type, dtype)``, or a no-op context for ``dtype=None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def _causal_lm(model: torch.nn.Module) -> Any:
    """The ``*ForCausalLM`` module under a peft wrapper (LoRA layers stay injected in it)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def trunk(model: torch.nn.Module) -> torch.nn.Module:
    """Every layer of a causal LM but its head (``get_decoder()``, under a peft wrapper too):
    called like the model, it returns ``last_hidden_state`` (and the KV cache) without logits."""
    return _causal_lm(model).get_decoder()


def hidden_states(
    model: torch.nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None, **kwargs: Any
) -> Tensor:
    """The trunk's last hidden state (after the final norm, before the head), ``[B, T, H]``.

    Args:
        model: a Hugging Face causal LM (or a peft model around one) whose ``get_decoder()``
            returns the trunk.
        input_ids: long ``[B, T]``.
        attention_mask: long ``[B, T]`` or ``None``.
        **kwargs: passed to the trunk (``position_ids``, ``past_key_values``, ``use_cache``).

    Returns:
        ``[B, T, H]`` in the model's (or autocast's) dtype.
    """
    kwargs.setdefault("use_cache", False)
    out = trunk(model)(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def _head_chunk(
    hidden: Tensor,
    targets: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    temperature: float,
    softcap: float | None,
    want_entropy: bool,
) -> tuple[Tensor, Tensor]:
    """One chunk through autograd's own ops: the path of a head with a logit soft cap."""
    logits = torch.nn.functional.linear(hidden, weight, bias)
    if softcap:  # Gemma 2's final logit soft-capping (config.final_logit_softcapping)
        logits = torch.tanh(logits / softcap) * softcap
    z = logits.float()  # under autocast a float32 copy no backward reads: divided in place
    if temperature != 1.0:
        z = z.div_(temperature) if z is not logits else z / temperature
    lse = torch.logsumexp(z, dim=-1)
    picked = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    if not want_entropy:
        return picked, torch.zeros_like(picked)
    probs = torch.softmax(z, dim=-1)
    entropy = lse - torch.linalg.vecdot(probs, z)  # no [N, V] product tensor
    return picked, entropy


#: Rows whose logit gradients the backward of :class:`_FusedHead` gathers (in the compute
#: dtype) before one weight-gradient matmul: a matmul over 128 rows ran at 179 GFLOP/s on this
#: CPU, over 512 at 395 (``[V, r] x [r, H]``, bf16, one thread).
_WEIGHT_GRAD_CHUNKS = 4


def _chunk_logits(h: Tensor, weight: Tensor, bias: Tensor | None, temperature: float) -> Tensor:
    """``[r, V]`` logits over the temperature, computed in ``weight``'s dtype, then float32 (or
    float64 for a float64 weight)."""
    z = torch.nn.functional.linear(h.to(weight.dtype), weight, bias)
    z = z if z.dtype == torch.float64 else z.float()
    return z.div_(temperature) if temperature != 1.0 else z


def _fused_head_forward(
    hidden: Tensor,
    targets: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    temperature: float,
    want_entropy: bool,
    chunk_size: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(logprobs, entropy, lse)``, float32 ``[N]`` each (float64 for a float64 ``weight``;
    ``entropy`` zeros unless asked), one
    ``[chunk_size, V]`` chunk of logits at a time, in ``weight``'s dtype (already the compute
    dtype). With ``m`` the chunk's max and ``s = sum_v exp(z_v - m)``: ``lse = m + log s``,
    ``log p_y = (z_y - m) - log s`` and the entropy ``log s - sum_v exp(z_v - m)(z_v - m) / s``."""
    n = hidden.shape[0]
    out = torch.float64 if weight.dtype == torch.float64 else torch.float32
    logprobs = torch.empty(n, dtype=out, device=hidden.device)
    entropy = torch.zeros(n, dtype=out, device=hidden.device)
    lse = torch.empty(n, dtype=out, device=hidden.device)
    for start in range(0, n, chunk_size):
        end = min(start + chunk_size, n)
        z = _chunk_logits(hidden[start:end], weight, bias, temperature)
        m = z.amax(dim=-1, keepdim=True)
        z.sub_(m)
        e = torch.exp(z)
        s = e.sum(dim=-1)
        log_s = s.log()
        lse[start:end] = m.squeeze(-1) + log_s
        logprobs[start:end] = z.gather(-1, targets[start:end].unsqueeze(-1)).squeeze(-1) - log_s
        if want_entropy:
            # A -inf logit has e = 0: its shifted logit is clipped so that 0 x it stays 0.
            entropy[start:end] = log_s - torch.linalg.vecdot(e, z.clamp_(min=-1e4)) / s
    return logprobs, entropy, lse


class _FusedHead(torch.autograd.Function):
    """The head's log-probs and entropy with a hand-written backward over recomputed chunks.

    Forward: :func:`_fused_head_forward`; it keeps the hidden states, the targets and each row's
    ``lse`` and entropy (8 bytes a row), no logits. Backward, a chunk at a time: the logits again,
    ``log p = z - lse``, ``p = exp(log p)`` and, from ``d log p_y / dz = onehot(y) - p`` and
    ``dH / dz = p (E_p[z] - z) = -p (H + log p)`` (``H = lse - E_p[z]``)::

        dz = p * (-g_lp - g_H * (H + log p)) + g_lp * onehot(y),   d logits = dz / T

    rounded to the compute dtype; every :data:`_WEIGHT_GRAD_CHUNKS` chunks one matmul gives the
    hidden states' gradient (``d logits @ W``) and one ``addmm_`` adds ``d logits^T @ h`` to the
    weight's gradient, summed in the compute dtype until the end (as autograd sums the chunks'
    bf16 weight gradients), then cast to the weight's dtype. The same gradients as autograd
    through :func:`_head_chunk` (``tests/test_scoring.py`` checks them against float64
    autograd), with a few passes over a chunk's ``[r, V]`` floats where autograd's softmax,
    log-sum-exp and their backward (under checkpointing) took about twenty: forward and backward
    over 2,506 SmolLM2 rows 4.9 s -> 1.8 s on one thread under bf16 autocast, a Sokoban update
    37.7 s -> 35.0 s (docs/performance.md).
    """

    @staticmethod
    def forward(ctx, hidden, targets, weight, bias, temperature, want_entropy, chunk_size, dtype):
        kind = hidden.device.type
        with torch.autocast(device_type=kind, enabled=False):
            w = weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            logprobs, entropy, lse = _fused_head_forward(
                hidden, targets, w, b, temperature, want_entropy, chunk_size
            )
            del w, b
        # The entropy is saved as a copy, so that a caller may change the returned one in place.
        ctx.save_for_backward(hidden, targets, weight, bias, lse, entropy.clone())
        ctx.temperature, ctx.chunk_size, ctx.dtype = temperature, chunk_size, dtype
        # An output the loss does not read gets None, not zeros (no 0 x -inf for a -inf logit).
        ctx.set_materialize_grads(False)
        return logprobs, entropy

    @staticmethod
    @once_differentiable
    def backward(ctx, g_lp, g_ent):
        hidden, targets, weight, bias, lse, entropy = ctx.saved_tensors
        need_h, _, need_w, need_b = ctx.needs_input_grad[:4]
        temperature, chunk_size, dtype = ctx.temperature, ctx.chunk_size, ctx.dtype
        n, dev = hidden.shape[0], hidden.device
        with torch.autocast(device_type=dev.type, enabled=False):
            w = weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            grad_h = torch.empty_like(hidden) if need_h else None
            grad_w = torch.zeros(weight.shape, dtype=dtype, device=dev) if need_w else None
            grad_b = torch.zeros(weight.shape[0], dtype=lse.dtype, device=dev) if need_b else None
            group = chunk_size * _WEIGHT_GRAD_CHUNKS
            block = torch.empty(min(group, n), weight.shape[0], dtype=dtype, device=dev)
            for g_start in range(0, n, group):
                g_end = min(g_start + group, n)
                for start in range(g_start, g_end, chunk_size):
                    end = min(start + chunk_size, g_end)
                    z = _chunk_logits(hidden[start:end], w, b, temperature)
                    z.sub_(lse[start:end, None])  # log p
                    p = torch.exp(z)
                    lp_grad = (
                        g_lp[start:end]
                        if g_lp is not None
                        else torch.zeros(end - start, dtype=lse.dtype, device=dev)
                    )
                    if g_ent is not None:
                        ent_grad = g_ent[start:end]
                        shift = ent_grad * entropy[start:end] + lp_grad
                        # A -inf logit has p = 0: its log p is clipped so that 0 x it stays 0
                        # (exp underflows to 0 from -104 in float32, -745 in float64).
                        z.clamp_(min=-1e4)
                        dz = z.mul_(-ent_grad[:, None]).sub_(shift[:, None]).mul_(p)
                    else:
                        dz = p.mul_(-lp_grad[:, None])
                    rows = torch.arange(end - start, device=dev)
                    dz.index_put_((rows, targets[start:end]), lp_grad, accumulate=True)
                    if temperature != 1.0:
                        dz.div_(temperature)
                    block[start - g_start : end - g_start].copy_(dz)
                    del z, p, dz
                d_logits = block[: g_end - g_start]
                if need_h:
                    grad_h[g_start:g_end] = d_logits @ w
                if need_w:
                    grad_w.addmm_(d_logits.t(), hidden[g_start:g_end].to(dtype))
                if need_b:
                    grad_b += d_logits.to(lse.dtype).sum(0)
            # The weight's copy and the gathered logit gradients go before the float32 cast of
            # the weight's gradient (memory.head_bytes: the end of the chunks is 2 + 4 bytes VH).
            del w, b, block, d_logits
        if grad_w is not None:
            grad_w = grad_w.to(weight.dtype)
        if grad_b is not None:
            grad_b = grad_b.to(bias.dtype)
        return grad_h, None, grad_w, grad_b, None, None, None, None


def head_logprobs(
    model: torch.nn.Module,
    hidden: Tensor,
    targets: Tensor,
    *,
    temperature: float = 1.0,
    want_entropy: bool = False,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
) -> tuple[Tensor, Tensor | None]:
    """``log softmax(head(h) / T)[y]`` and the entropy of that distribution, chunked.

    The head's matmul runs in autocast's dtype when autocast is on and the weight is float32
    (else in the weight's dtype); the softmax, log-sum-exp and entropy in float32 (float64 for a
    float64 head). With gradients the backward is
    :class:`_FusedHead`'s (a model with a logit soft cap, Gemma 2: autograd's own, each chunk
    checkpointed).

    Args:
        model: the causal LM whose output embedding (``get_output_embeddings()``) is the head.
        hidden: ``[N, H]`` hidden states (from :func:`hidden_states`, gathered at the scored
            positions); gradients flow back into them and into the head's weight.
        targets: long ``[N]``, the token each row predicts, in ``[0, V)``.
        temperature: the logits are divided by it (the sampling temperature), > 0.
        want_entropy: also return the entropy (nats) of each row's distribution.
        chunk_size: rows whose logits exist at once, >= 1. With gradients enabled each chunk is
            recomputed in the backward pass, so no more than one chunk of ``[chunk_size, V]``
            float32 logits is ever held (and the logits' gradients of
            :data:`_WEIGHT_GRAD_CHUNKS` chunks, in the compute dtype).

    Returns:
        ``(logprobs, entropy)``: float32 ``[N]`` each, float64 for a float64 head (``entropy``
        is ``None`` unless asked).

    Raises:
        ValueError: shapes disagree, ``temperature <= 0`` or ``chunk_size < 1``.
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(
            f"hidden must be [N, H] and targets [N]; got {tuple(hidden.shape)} and "
            f"{tuple(targets.shape)}"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    causal = _causal_lm(model)
    head = causal.get_output_embeddings()
    softcap = getattr(causal.config, "final_logit_softcapping", None)
    targets = targets.long()
    if hidden.shape[0] == 0:
        empty = hidden.new_zeros(
            0, dtype=torch.float64 if head.weight.dtype == torch.float64 else torch.float32
        )
        return empty, (empty if want_entropy else None)
    if not softcap:
        kind = hidden.device.type
        dtype = (
            torch.get_autocast_dtype(kind)
            if torch.is_autocast_enabled(kind) and head.weight.dtype == torch.float32
            else head.weight.dtype
        )
        # Without gradients (or with nothing that needs one) the Function records no graph.
        logprobs, entropy = _FusedHead.apply(
            hidden,
            targets,
            head.weight,
            head.bias,
            float(temperature),
            want_entropy,
            chunk_size,
            dtype,
        )
        return logprobs, (entropy if want_entropy else None)
    pieces_lp, pieces_ent = [], []
    recompute = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (hidden, head.weight, head.bias)
    )
    for start in range(0, hidden.shape[0], chunk_size):
        args = (
            hidden[start : start + chunk_size],
            targets[start : start + chunk_size],
            head.weight,
            head.bias,
            float(temperature),
            softcap,
            want_entropy,
        )
        if recompute:
            lp, ent = checkpoint(_head_chunk, *args, use_reentrant=False)
        else:
            lp, ent = _head_chunk(*args)
        pieces_lp.append(lp)
        pieces_ent.append(ent)
    logprobs = torch.cat(pieces_lp)
    return logprobs, (torch.cat(pieces_ent) if want_entropy else None)


def score_targets(
    model: torch.nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    mask: Tensor,
    *,
    temperature: float = 1.0,
    want_entropy: bool = False,
    want_hidden: bool = False,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
) -> dict[str, Tensor | None]:
    """Log-probs (and entropy) of the targets ``input_ids[:, 1:]`` where ``mask`` is set.

    One trunk pass over the batch, then :func:`head_logprobs` at the masked positions only.

    Args:
        model: a Hugging Face causal LM (or peft model).
        input_ids: long ``[B, T]``.
        attention_mask: long ``[B, T]``.
        mask: ``[B, T-1]`` bool or 0/1: the target positions to score (a loss mask).
        temperature: divisor of the logits (the sampling temperature), > 0.
        want_entropy: also the entropy at those positions.
        want_hidden: also return the hidden states ``[B, T-1, H]`` of the predicting positions
            (for a value head).
        chunk_size: see :func:`head_logprobs`.

    Returns:
        ``{"logprobs": float32 [B, T-1] (float64 for a float64 model), "entropy": the same or None,
        "hidden": [B, T-1, H] or None}``; 0 outside ``mask`` (no gradient flows there, and no
        NaN can: unscored positions never see the head).

    Raises:
        ValueError: ``mask`` is not ``[B, T-1]``.
    """
    b, t = input_ids.shape
    if tuple(mask.shape) != (b, t - 1):
        raise ValueError(f"mask must be [B, T-1] = {(b, t - 1)}; got {tuple(mask.shape)}")
    hidden = hidden_states(model, input_ids, attention_mask)[:, :-1]
    # Column t of a target mask stands for input_ids[:, t + 1], predicted by position t.
    rows, cols = mask.bool().nonzero(as_tuple=True)
    lp, ent = head_logprobs(
        model,
        hidden[rows, cols],
        input_ids[rows, cols + 1],
        temperature=temperature,
        want_entropy=want_entropy,
        chunk_size=chunk_size,
    )
    logprobs = torch.zeros((b, t - 1), dtype=lp.dtype, device=input_ids.device)
    logprobs = logprobs.index_put((rows, cols), lp)
    entropy = None
    if want_entropy:
        entropy = torch.zeros_like(logprobs).index_put((rows, cols), ent)
    return {"logprobs": logprobs, "entropy": entropy, "hidden": hidden if want_hidden else None}


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the categorical distribution softmax(logits) over the last dimension.

    ``H = logsumexp(z) - sum_v softmax(z)_v * z_v``, which never takes the log of a probability
    (stable for very peaked or very flat distributions); ``-inf`` logits (masked tokens) are
    allowed. Computed in at least float32.

    Args:
        logits: float ``[..., V]``.

    Returns:
        float ``[...]`` in nats; ``log V`` for uniform logits.
    """
    z = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    probs = torch.softmax(z, dim=-1)
    # A -inf logit (a masked-out token) has probability 0; zero it so 0 * -inf gives no NaN.
    z_finite = torch.where(torch.isneginf(z), torch.zeros_like(z), z)
    return torch.logsumexp(z, dim=-1) - (probs * z_finite).sum(dim=-1)


def logprobs_from_logits(logits: Tensor, tokens: Tensor, chunk_size: int = 1024) -> Tensor:
    """Log-probability of ``tokens`` under softmax(logits): ``log_softmax(logits)[..., token]``.

    Computed as ``logits[token] - logsumexp(logits)`` in row chunks, so the full ``[..., V]``
    log-softmax (and, for bf16/fp16 input, its float32 copy) is never materialised at once:
    peak extra memory is about ``chunk_size * V`` floats. Gradients flow through ``logits``.
    Align logits and tokens before calling (for a causal LM: ``logits[:, :-1]``, ``ids[:, 1:]``).

    Args:
        logits: float ``[..., V]``.
        tokens: integer ``[...]`` (the leading shape of ``logits``), values in [0, V).
        chunk_size: rows processed at once.

    Returns:
        float32 (or float64 for float64 input) tensor shaped like ``tokens``.

    Raises:
        ValueError: leading shapes differ.
    """
    if logits.shape[:-1] != tokens.shape:
        raise ValueError(
            f"tokens must have the leading shape of logits {tuple(logits.shape[:-1])}; "
            f"got {tuple(tokens.shape)}"
        )
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_tokens = tokens.reshape(-1, 1).long()
    out_dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    pieces = []
    for start in range(0, flat_logits.shape[0], chunk_size):
        rows = flat_logits[start : start + chunk_size].to(out_dtype)
        picked = rows.gather(-1, flat_tokens[start : start + chunk_size]).squeeze(-1)
        pieces.append(picked - torch.logsumexp(rows, dim=-1))
    if not pieces:
        return torch.zeros(tokens.shape, dtype=out_dtype, device=logits.device)
    return torch.cat(pieces).reshape(tokens.shape)
