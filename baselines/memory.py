"""The trainer's memory line on one GPU, computed from the model's shape and the config.

Issue 42 asks for the memory of the 3B configs to be counted by a function the tests call, not by
hand: weights, gradients, optimizer state, activations at the configured micro-batch tokens, the
rollout engine. Here:

- :func:`parameter_count`: the exact parameters of a Llama / Mistral / Qwen2 decoder
  (``tests/test_memory.py`` compares it with ``sum(p.numel())`` of real models);
- :func:`activation_bytes_per_token`: what autograd keeps per token for the backward pass of one
  forward of the decoder under bf16 autocast with float32 weights (the trainer's setting), in each
  checkpointing mode, derived op by op (measured against ``saved_tensors_hooks`` in the tests);
- :func:`head_bytes`: the LM head's share, which :func:`baselines.llm.scoring.score_targets` reads
  in chunks of :data:`~baselines.llm.scoring.DEFAULT_CHUNK_ROWS` rows;
- :func:`autocast_copy_bytes`: the bf16 copies of the weights that autocast makes and the graph
  keeps until the backward pass;
- :func:`memory_line`: all of it for a :class:`~baselines.config.TrainConfig`, as a
  :class:`MemoryLine` of byte counts whose :meth:`MemoryLine.table` prints one line a part.

The Qwen2.5-3B-Instruct configs (``baselines/configs/ragen2/``), 3,085,938,688 parameters::

    >>> from transformers import Qwen2Config
    >>> qwen = Qwen2Config(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
    ...     num_attention_heads=16, num_key_value_heads=2, vocab_size=151936,
    ...     tie_word_embeddings=True)
    >>> parameter_count(qwen)
    3085938688
    >>> round(activation_bytes_per_token(qwen, checkpointing="none") / 1e6, 2)  # MB a token
    5.44

Everything is counted in bytes; the tables print GB (10^9 bytes). What is left out is listed in
:func:`memory_line`'s docstring.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from baselines.llm.scoring import DEFAULT_CHUNK_ROWS

if TYPE_CHECKING:
    from baselines.config import TrainConfig

__all__ = [
    "CHECKPOINTING_MODES",
    "SUPPORTED_MODEL_TYPES",
    "LORA_TARGET_MODULES",
    "MemoryLine",
    "activation_bytes_per_token",
    "autocast_copy_bytes",
    "head_bytes",
    "lora_parameter_count",
    "memory_line",
    "parameter_count",
]

#: ``model_type`` values whose decoder layer this module counts (SmolLM2 is a ``llama``).
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")

#: ``"none"``: every op keeps what its backward reads; ``"selective"``: the trainer's selective
#: checkpointing (:func:`baselines.llm.scoring.checkpointed_if`); ``"full"``: transformers'
#: gradient checkpointing (``model.gradient_checkpointing: true``).
CHECKPOINTING_MODES = ("none", "selective", "full")

#: The modules the trainer's LoRA adapters wrap (``Trainer._lora_config``).
LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj")

_F32, _BF16, _I64 = 4, 2, 8  # bytes of one element


class _Shape(NamedTuple):
    """A decoder's sizes, read once from its config (:func:`_shape`)."""

    hidden: int  # H
    intermediate: int  # I
    layers: int  # L
    heads: int  # query heads n_h
    kv_heads: int  # key/value heads n_kv
    head_dim: int  # d
    vocab: int  # V
    tied: bool  # the LM head is the input embedding
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool

    @property
    def attn(self) -> int:
        """A = n_h * d: the width of the queries and of the attention output."""
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:
        """K = n_kv * d: the width of the keys, and of the values."""
        return self.kv_heads * self.head_dim


def _shape(model_config: Any) -> _Shape:
    """The sizes of a Llama / Mistral / Qwen2 config.

    Raises:
        ValueError: another ``model_type``, or an activation other than SiLU.
    """
    model_type = getattr(model_config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"model_type {model_type!r} is not counted here; supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} (a decoder of RMSNorm, GQA attention and a "
            "SiLU-gated MLP)"
        )
    act = getattr(model_config, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"hidden_act {act!r}: only the SiLU-gated MLP ('silu') is counted here")
    hidden = int(model_config.hidden_size)
    heads = int(model_config.num_attention_heads)
    kv_heads = int(getattr(model_config, "num_key_value_heads", None) or heads)
    attention_bias = bool(getattr(model_config, "attention_bias", False))
    return _Shape(
        hidden=hidden,
        intermediate=int(model_config.intermediate_size),
        layers=int(model_config.num_hidden_layers),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=int(getattr(model_config, "head_dim", None) or hidden // heads),
        vocab=int(model_config.vocab_size),
        tied=bool(getattr(model_config, "tie_word_embeddings", False)),
        # Qwen2Attention: q/k/v_proj always with bias=True, o_proj bias=False (transformers'
        # modeling_qwen2.py); Llama: all four follow config.attention_bias; Mistral: none.
        qkv_bias=model_type == "qwen2" or (model_type == "llama" and attention_bias),
        o_bias=model_type == "llama" and attention_bias,
        mlp_bias=model_type == "llama" and bool(getattr(model_config, "mlp_bias", False)),
    )


def _linear_weights_per_layer(s: _Shape) -> int:
    """The weights (no biases) of one layer's seven linear maps: q, k, v, o, gate, up, down."""
    return (
        s.hidden * s.attn + 2 * s.hidden * s.kv + s.attn * s.hidden + 3 * s.hidden * s.intermediate
    )


def _biases_per_layer(s: _Shape) -> int:
    qkv = (s.attn + 2 * s.kv) if s.qkv_bias else 0
    o = s.hidden if s.o_bias else 0
    mlp = (2 * s.intermediate + s.hidden) if s.mlp_bias else 0
    return qkv + o + mlp


def _layer_copy_bytes(s: _Shape) -> int:
    """Bytes of the bf16 copies autocast makes of one decoder layer's linear weights and biases."""
    return _BF16 * (_linear_weights_per_layer(s) + _biases_per_layer(s))


def parameter_count(model_config: Any) -> int:
    """Parameters of a Llama / Mistral / Qwen2 causal LM, exactly as transformers builds it.

    With H hidden, I intermediate, L layers, A = heads x head_dim, K = kv_heads x head_dim, V
    vocabulary::

        embedding                      V H
        per layer   q, k, v, o         H A + 2 H K + A H   (+ biases: Qwen2 A + 2K on q, k, v;
                                                            Llama with attention_bias: A + 2K + H)
                    gate, up, down     3 H I               (+ Llama mlp_bias: 2I + H)
                    two RMSNorms       2 H
        final RMSNorm                  H
        LM head                        V H, unless tie_word_embeddings (then it is the embedding)

    Args:
        model_config: a ``transformers`` config (``LlamaConfig``, ``MistralConfig``,
            ``Qwen2Config``, or any whose ``model_type`` is one of :data:`SUPPORTED_MODEL_TYPES`).

    Returns:
        The parameter count (a tied weight once), as ``sum(p.numel() for p in
        model.parameters())``.

    Raises:
        ValueError: an unsupported ``model_type`` (the message names the supported ones).

    Example:
        >>> from transformers import LlamaConfig
        >>> parameter_count(LlamaConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=1,
        ...     num_attention_heads=2, num_key_value_heads=1, vocab_size=10,
        ...     tie_word_embeddings=True))
        680
    """
    s = _shape(model_config)
    per_layer = _linear_weights_per_layer(s) + _biases_per_layer(s) + 2 * s.hidden
    embedding = s.vocab * s.hidden
    head = 0 if s.tied else s.vocab * s.hidden
    return embedding + s.layers * per_layer + s.hidden + head


def lora_parameter_count(model_config: Any, rank: int) -> int:
    """Parameters of the trainer's LoRA adapters of rank ``rank`` (``Trainer._lora_config``: the
    seven linear maps of :data:`LORA_TARGET_MODULES` in every layer, no bias): each wrapped
    ``in -> out`` map gets ``A: rank x in`` and ``B: out x rank``, so per layer
    ``rank x (7 H + 2 A + 2 K + 3 I)``.

    Raises:
        ValueError: ``rank < 0`` or an unsupported ``model_type``.
    """
    if rank < 0:
        raise ValueError(f"rank must be >= 0; got {rank}")
    s = _shape(model_config)
    in_plus_out = (
        (s.hidden + s.attn)  # q_proj
        + 2 * (s.hidden + s.kv)  # k_proj, v_proj
        + (s.attn + s.hidden)  # o_proj
        + 3 * (s.hidden + s.intermediate)  # gate_proj, up_proj, down_proj
    )
    return s.layers * rank * in_plus_out


def _layer_bytes(s: _Shape, checkpointing: str, padded_row_tokens: int) -> int:
    """Bytes a token that one decoder layer keeps; see :func:`activation_bytes_per_token`."""
    H, I, A, K, nh = s.hidden, s.intermediate, s.attn, s.kv, s.heads  # noqa: E741 (I: as the paper)
    layer_input = _F32 * H  # the residual stream entering the layer (float32)
    if checkpointing == "full":
        return layer_input
    lse = _F32 * nh  # SDPA's log-sum-exp, one float32 per query head
    if checkpointing == "selective":
        matmul_outputs = _BF16 * (A + 2 * K + H) + _BF16 * (2 * I + H)  # q,k,v,o; gate,up,down
        attention = _BF16 * A + lse  # SDPA's output and log-sum-exp
        return layer_input + matmul_outputs + attention
    padded = padded_row_tokens > 0
    rms_norm = _F32 + _F32 * H  # rsqrt(mean(x^2) + eps) and x * rsqrt, float32
    norm_1 = rms_norm  # its input x is layer_input
    qkv_inputs = 3 * _BF16 * H  # autocast casts the norm's output once per linear
    kv_saved = A if padded else K  # a mask makes transformers repeat K/V to every query head
    sdpa = _BF16 * (A + 2 * kv_saved + A) + lse  # q, k, v, output (the o_proj input too)
    mask = _BF16 * padded_row_tokens if padded else 0  # the bf16 additive mask, per layer
    norm_2 = _F32 * H + rms_norm  # its input (the residual after attention) and its own two
    mlp_inputs = 2 * _BF16 * H  # gate_proj's and up_proj's bf16 casts of the norm's output
    mlp = 4 * _BF16 * I  # gate (SiLU's input), SiLU(gate), up (the product's two), the product
    return layer_input + norm_1 + qkv_inputs + sdpa + mask + norm_2 + mlp_inputs + mlp


def activation_bytes_per_token(
    model_config: Any, *, checkpointing: str, padded_row_tokens: int = 0
) -> int:
    """Bytes that autograd keeps per token for one forward of the decoder trunk (every layer, the
    final norm, the embedding lookup; not the LM head: :func:`head_bytes`), under bf16 autocast
    with float32 weights (``baselines.llm.scoring.autocast`` with
    ``resolve_autocast("bfloat16", device)``, the trainer's setting) and transformers' SDPA
    attention.

    Derived op by op from what each op saves for its backward. H hidden, I intermediate,
    A = heads x head_dim, K = kv_heads x head_dim, n_h query heads, L layers; bytes a token.
    The residual stream is float32 (the embedding's output, and a float32 + bf16 sum stays
    float32); transformers' RMSNorm upcasts to float32 and returns ``weight * (x * r)`` in
    float32; autocast casts every linear map's float32 input to bf16 anew (it caches the casts
    of weights, not of activations); the rotary embedding multiplies by float32 cos/sin, so
    queries and keys leave it in float32 and SDPA (an autocast op) casts them to bf16.

    ``"none"``, per layer::

        layer input x (float32; RMSNorm's pow saves it)        4 H
        input RMSNorm: r = rsqrt(mean(x^2)+eps), y = x r       4 + 4 H
        q, k, v projections: three bf16 casts of y             3 x 2 H
        SDPA: bf16 q, k, v and output, float32 log-sum-exp     2 A + 2 K + 2 K + 2 A + 4 n_h
          (o_proj's input is SDPA's output: same storage; the rotary products save only
          cos/sin, shared by all layers and rows, left out)
        the residual h = x + o (float32, saved by the norm)    4 H
        post-attention RMSNorm: r, y                           4 + 4 H
        gate and up projections: two bf16 casts of y           2 x 2 H
        MLP: gate output (SiLU's input), SiLU(gate) and up
          (the product's factors), the product (down's input)  4 x 2 I
        per layer                                              26 H + 4 A + 4 K + 4 n_h + 8 + 8 I

    ``"selective"`` (:func:`baselines.llm.scoring.checkpointed_if`): each layer keeps its input
    (the checkpoint's) and the outputs of its matmuls and attention kernel, everything else is
    recomputed::

        layer input                                            4 H
        q, k, v, o outputs (bf16)                              2 A + 4 K + 2 H
        gate, up, down outputs (bf16)                          4 I + 2 H
        SDPA output and log-sum-exp                            2 A + 4 n_h
        per layer                                              8 H + 4 A + 4 K + 4 n_h + 4 I

    ``"full"`` (transformers' gradient checkpointing): each layer keeps its input, 4 H.

    In every mode, once: the final RMSNorm (its input, r, its output: 8 H + 4) and the embedding's
    int64 token ids (8).

    ``padded_row_tokens``: 0 for a micro-batch of unpadded rows (one row, or rows of one length):
    transformers then passes no mask and SDPA runs causal with the K/V heads as they are (GQA).
    A micro-batch of right-padded rows (the trainer's, :func:`baselines.rl.batch.build_batch`)
    has a mask, and then (``"none"`` only) transformers repeats the keys and values to every
    query head (``2 K + 2 K`` becomes ``2 A + 2 A``) and SDPA turns the boolean mask into a bf16
    additive one in every layer, ``[rows, 1, T, T]``: ``2 T`` bytes a token a layer with T =
    ``padded_row_tokens`` (CUDA's memory-efficient kernel pads T to a multiple of 16; not
    counted). Under checkpointing both are recomputed.

    What SDPA saves depends on its kernel: CPU flash, CUDA flash and the memory-efficient kernel
    save q, k, v, output and log-sum-exp as above (the latter pads the log-sum-exp to 32
    positions and keeps two int64 RNG words: not counted). Eager attention would keep the
    ``T x T`` probabilities instead: not counted here.

    Args:
        model_config: a ``transformers`` config of :data:`SUPPORTED_MODEL_TYPES`.
        checkpointing: one of :data:`CHECKPOINTING_MODES`.
        padded_row_tokens: tokens of the padded rows, 0 for unpadded rows; >= 0.

    Returns:
        Bytes a token of the micro-batch (padded tokens count as tokens).

    Raises:
        ValueError: an unknown ``checkpointing``, a negative ``padded_row_tokens``, or an
            unsupported ``model_type`` (the message names the supported ones).

    Example:
        >>> from transformers import LlamaConfig
        >>> smollm2 = LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        ...     num_attention_heads=9, num_key_value_heads=3, vocab_size=49152)
        >>> [activation_bytes_per_token(smollm2, checkpointing=m) for m in CHECKPOINTING_MODES]
        [916020, 420420, 73740]
    """
    if checkpointing not in CHECKPOINTING_MODES:
        raise ValueError(
            f"checkpointing must be one of {list(CHECKPOINTING_MODES)}; got {checkpointing!r}"
        )
    if padded_row_tokens < 0:
        raise ValueError(f"padded_row_tokens must be >= 0; got {padded_row_tokens}")
    s = _shape(model_config)
    final_norm = _F32 * s.hidden + _F32 + _F32 * s.hidden  # input, r, output
    token_ids = _I64  # the embedding lookup's indices
    return s.layers * _layer_bytes(s, checkpointing, padded_row_tokens) + final_norm + token_ids


def head_bytes(
    model_config: Any,
    *,
    scored_tokens: int = 0,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> int:
    """Peak bytes of the LM head's part of one forward/backward through
    :func:`baselines.llm.scoring.score_targets` (with the entropy, as the update asks).

    The head runs over the ``scored_tokens`` gathered hidden states in chunks of ``chunk_rows``
    rows (:data:`~baselines.llm.scoring.DEFAULT_CHUNK_ROWS`; ``scoring._FusedHead``): the
    forward keeps each row's input, target, log-sum-exp and entropy, and the backward
    recomputes one chunk's logits at a time with the weight's bf16 copy, gathers the logits'
    bf16 gradients of ``4 r`` rows (``scoring._WEIGHT_GRAD_CHUNKS``) for one weight-gradient
    matmul, and sums the weight's gradient in bf16 until the last chunk is done, then casts the
    sum to float32 (with tied embeddings that float32 gradient then waits for the embedding's,
    at the very end of the backward). V vocabulary, H hidden, r = ``chunk_rows``::

        held from the forward to the backward, per scored token:
          the gathered hidden state (float32)                  4 H
          its row and column indices, its target id (int64)    3 x 8
          its log-sum-exp and entropy (float32)                2 x 4
        the larger of, in the backward:
          a chunk's logits phase: the float32 logits z and
            exp(z - lse), the bf16 logit gradients of 4 r
            rows, the weight's bf16 copy and the running
            bf16 gradient sum                                  2 x 4 V r + 2 x 4 V r + (2 + 2) V H
          the end of the chunks: the bf16 gradient sum and
            its float32 cast                                   (2 + 4) V H

    Measured with a live-storage tracker on CPU (``tests/test_memory.py``). For Qwen2.5-3B
    (r = 128) the second is larger, 1.87 GB against 1.56 GB: the chunk size hardly matters.

    Args:
        model_config: a ``transformers`` config of :data:`SUPPORTED_MODEL_TYPES`.
        scored_tokens: positions the loss reads in the micro-batch (at most its tokens).
        chunk_rows: rows of logits at once, >= 1.

    Returns:
        Bytes; the head weight's bf16 copy of the backward included, the forward's not (that
        one, made for the head's forward at the end of the trunk's, when the forward's
        activations are all alive, is in :func:`autocast_copy_bytes`).

    Raises:
        ValueError: ``scored_tokens < 0``, ``chunk_rows < 1``, or an unsupported ``model_type``.
    """
    if scored_tokens < 0 or chunk_rows < 1:
        raise ValueError(
            f"scored_tokens must be >= 0 and chunk_rows >= 1; got {scored_tokens}, {chunk_rows}"
        )
    s = _shape(model_config)
    held = scored_tokens * (_F32 * s.hidden + 3 * _I64 + 2 * _F32)
    vh = s.vocab * s.hidden
    logits_phase = (
        2 * _F32 * s.vocab * chunk_rows + _BF16 * s.vocab * 4 * chunk_rows + (_BF16 + _BF16) * vh
    )
    end_of_chunks = (_BF16 + _F32) * vh
    return held + max(logits_phase, end_of_chunks)


def autocast_copy_bytes(model_config: Any) -> int:
    """Bytes of the bf16 copies autocast makes of the float32 weights in one forward: 2 bytes for
    every weight and bias of the linear maps, the LM head's too (the embedding's lookup and the
    RMSNorm weights are not cast). Autocast caches the copy of each weight for the whole
    ``autocast`` block, and each linear map's backward keeps its weight's copy (it computes the
    input's gradient from it), so without checkpointing they stay until the backward pass reaches
    them; with checkpointing autocast's cache still holds them until the forward's end.

    Raises:
        ValueError: an unsupported ``model_type``.
    """
    s = _shape(model_config)
    return s.layers * _layer_copy_bytes(s) + _BF16 * s.vocab * s.hidden


@dataclass(frozen=True)
class MemoryLine:
    """The trainer's memory on one device at its peak, in bytes, part by part
    (:func:`memory_line` says how each is counted).

    ``weights`` to ``rollout`` are held through the update (``rollout`` only with vLLM);
    ``activations``, ``autocast_copies`` and ``head`` are transient, one micro-batch's forward
    and backward, and ``optimizer_step`` AdamW's step after them.

    Attributes:
        weights: the policy's float32 weights, 4 bytes a parameter (LoRA: the frozen base and the
            adapter).
        gradients: the policy's float32 gradients, 4 bytes a trained parameter (held through the
            update's micro-batches, freed after it).
        optimizer: the policy's AdamW state, ``exp_avg`` and ``exp_avg_sq``, 8 bytes a trained
            parameter.
        critic: PPO's critic: the value head's weights, gradient and AdamW state
            (``algorithm.critic: head``), or the critic model's weights and AdamW state
            (``model``; its gradients are freed before the policy's update, so they never
            coexist with the policy's); 0 for GRPO.
        reference: the frozen float32 reference model for the KL term (``kl_coef > 0`` without
            LoRA), 0 otherwise.
        rollout: the rollout engine's memory: vLLM's share of the GPU (held all along), or the HF
            engine's key/value store and decoding batch (during the rollout only).
        rollout_resident: whether ``rollout`` is held through the update too (vLLM).
        activations: what autograd keeps for the backward of one micro-batch of
            ``micro_batch_tokens`` tokens (:func:`activation_bytes_per_token`).
        recompute: with checkpointing, one layer recomputed in the backward: its activations
            without checkpointing and its weights' bf16 copies; 0 without.
        autocast_copies: the bf16 weight copies of the forward (:func:`autocast_copy_bytes`).
        head: the LM head's share (:func:`head_bytes`, every token scored).
        head_held: the part of ``head`` held from the forward on (the gathered hidden states).
        head_copy: the LM head weight's bf16 copy (in ``autocast_copies``, and made again in
            ``head``'s backward).
        optimizer_step: AdamW's own temporary in its step (the foreach implementation, CUDA's
            default, computes ``sqrt(exp_avg_sq)`` into a new tensor: 4 bytes a trained
            parameter); it comes after the backward, so it competes with the three above.
        checkpointing: the activation mode counted (:data:`CHECKPOINTING_MODES`).
        micro_batch_tokens: the tokens of the micro-batch counted.
        gpu_bytes: the device's memory, if given (for the table's last line).
        labels: each part's name in :meth:`table` (with its count), by field name.
        gathered_shards: under ``train.strategy: fsdp2``, the policy's own weight shards, held
            beside its gathered whole weights during the rollout (0 otherwise).
    """

    weights: int
    gradients: int
    optimizer: int
    critic: int
    reference: int
    rollout: int
    rollout_resident: bool
    activations: int
    recompute: int
    autocast_copies: int
    head: int
    head_held: int
    head_copy: int
    optimizer_step: int
    checkpointing: str
    micro_batch_tokens: int
    gpu_bytes: int | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict, compare=False)
    gathered_shards: int = 0

    @property
    def resident(self) -> int:
        """Bytes held through the update: weights, gradients, AdamW, critic, reference, and
        vLLM's share."""
        vllm = self.rollout if self.rollout_resident else 0
        return self.weights + self.gradients + self.optimizer + self.critic + self.reference + vllm

    @property
    def update_pass(self) -> int:
        """Bytes at the peak of a micro-batch's forward and backward, on top of :attr:`resident`.

        Without checkpointing: at the head's backward, every saved activation, the trunk's weight
        copies (held by the graph; the head's copy of the forward sat in autocast's cache and is
        gone) and the head's backward. With checkpointing the saved activations plus the largest
        of three moments: the forward's end (every copy in autocast's cache, the head's inputs),
        the head's backward, one layer's recomputation.
        """
        if self.checkpointing == "none":
            return self.activations + self.autocast_copies - self.head_copy + self.head
        forward_end = self.autocast_copies + self.head_held
        return self.activations + max(forward_end, self.head, self.recompute)

    @property
    def rollout_phase(self) -> int:
        """Bytes during the rollout: no gradients, no activations. With the HF engine the policy
        itself generates inside the trainer's autocast block, whose cache keeps the bf16 copies
        of the weights it used (:attr:`autocast_copies`) until the rollout ends; vLLM's own
        weights are inside its share."""
        copies = 0 if self.rollout_resident else self.autocast_copies
        held = self.weights + self.gathered_shards + self.optimizer + self.critic + self.reference
        return held + self.rollout + copies

    @property
    def total(self) -> int:
        """The peak: :attr:`resident` plus the larger of :attr:`update_pass` and
        :attr:`optimizer_step`, or the rollout phase if that is larger (the HF engine)."""
        return max(self.resident + max(self.update_pass, self.optimizer_step), self.rollout_phase)

    def fits(self, gpu_bytes: int | None = None) -> bool:
        """Whether :attr:`total` is within ``gpu_bytes`` (default: the line's own).

        Raises:
            ValueError: no ``gpu_bytes`` here or in the line.
        """
        limit = gpu_bytes if gpu_bytes is not None else self.gpu_bytes
        if limit is None:
            raise ValueError("fits() needs gpu_bytes (the device's memory in bytes)")
        return self.total <= limit

    def table(self) -> str:
        """One line a part, in GB (10^9 bytes), then the phases and the peak.

        Example (a line of it)::

            weights (float32, 3,085,938,688 params)          12.34 GB
        """
        rows = [
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimizer", self.optimizer),
            ("critic", self.critic),
            ("reference", self.reference),
            ("rollout", self.rollout),
            ("activations", self.activations),
            ("recompute", self.recompute),
            ("autocast_copies", self.autocast_copies),
            ("head", self.head),
            ("optimizer_step", self.optimizer_step),
            *([("gathered_shards", self.gathered_shards)] if self.gathered_shards else []),
        ]
        width = max(len(self.labels.get(name, name)) for name, _ in rows) + 2
        lines = [
            f"{self.labels.get(name, name):<{width}}{value / 1e9:8.2f} GB" for name, value in rows
        ]
        lines.append("-" * (width + 11))
        lines.append(f"{'resident through the update':<{width}}{self.resident / 1e9:8.2f} GB")
        lines.append(
            f"{'+ update pass (forward/backward)':<{width}}{self.update_pass / 1e9:8.2f} GB"
        )
        lines.append(f"{'  or + AdamW step':<{width}}{self.optimizer_step / 1e9:8.2f} GB")
        lines.append(f"{'rollout phase':<{width}}{self.rollout_phase / 1e9:8.2f} GB")
        lines.append(f"{'peak':<{width}}{self.total / 1e9:8.2f} GB")
        if self.gpu_bytes is not None:
            verdict = "fits" if self.fits() else "does NOT fit"
            lines.append(
                f"{'device':<{width}}{self.gpu_bytes / 1e9:8.2f} GB: {verdict} "
                f"({(self.gpu_bytes - self.total) / 1e9:+.2f} GB)"
            )
        return "\n".join(lines)


def memory_line(
    config: TrainConfig, model_config: Any, *, gpu_bytes: int | None = None, world_size: int = 1
) -> MemoryLine:
    """The memory of training ``config`` with the model ``model_config`` on one device (one
    rank of ``world_size``).

    What the trainer allocates (``baselines/trainer.py``, ``baselines/update.py``,
    ``baselines/llm/critic.py``), and how each part is counted:

    - the policy: float32 weights (``load_policy(..., dtype="float32")``) whatever
      ``model.dtype``; gradients and AdamW state (``exp_avg``, ``exp_avg_sq``) float32 for every
      trained parameter. ``model.lora_rank > 0``: the base weights are frozen, only the adapters
      (:func:`lora_parameter_count`) get gradients and AdamW state.
    - the critic (PPO): ``algorithm.critic: head`` adds a ``hidden_size + 1`` value head in the
      policy's AdamW (16 bytes a parameter). ``model``: a deep copy of the loaded model (4 bytes a
      parameter; with LoRA its own frozen base and adapter) with a value head and its own AdamW
      over the parameters that get a gradient (an untied LM head is never read: no state). The
      critic's update runs after the policy's, and each worker frees its gradients at the end of
      its update (``zero_grad(set_to_none=True)``), so the critic's gradients and activations
      never coexist with the policy's: its update phase holds the same parts with its gradients
      in place of the policy's (no larger) and is not counted apart.
    - the reference model: a float32 deep copy when ``algorithm.kl_coef > 0`` without LoRA (with
      LoRA the reference is the policy with its adapter off: nothing more).
    - no other copy of the weights: no bf16 copy for generation (vLLM has its own, inside its
      share; the HF engine samples from the policy), no old-policy model (old log-probs are a
      no-grad pass of the policy itself).
    - the rollout engine: ``rollout.engine`` ``vllm`` (or ``auto`` without LoRA, where vLLM is
      installed, as on a GPU machine): ``vllm_gpu_memory_utilization x gpu_bytes``, which vLLM
      reserves at start-up (its bf16 weights, activations and KV cache) and keeps (0 without
      ``gpu_bytes``). ``hf``: the key/value store between turns (``kv_cache_gib`` GiB) and one
      decoding batch of ``generation_batch_tokens`` slots (keys and values in bf16, 4 bytes a
      slot per key/value head dim per layer), during the rollout only.
    - activations: one micro-batch of ``algorithm.micro_batch_tokens`` padded tokens
      (:func:`activation_bytes_per_token`). The trainer checkpoints only a single row longer than
      the budget (:func:`baselines.llm.scoring.checkpointed_if`), so a micro-batch at the budget
      runs without checkpointing (``"none"``), unless ``model.gradient_checkpointing`` (``"full"``).
      The rows are taken as padded to ``min(rollout.max_context_tokens, micro_batch_tokens)``
      when more than one fits in the budget (the mask case), else as one unpadded row. With
      checkpointing, the backward recomputes one layer at a time (``recompute``: its
      ``"none"`` bytes and its weights' bf16 copies).
    - the bf16 weight copies of autocast (:func:`autocast_copy_bytes`) and the LM head's
      backward (:func:`head_bytes`, every token scored: an upper bound), combined with the
      activations as :attr:`MemoryLine.update_pass` says.
    - AdamW's step temporary (:attr:`MemoryLine.optimizer_step`).

    Not counted: the CUDA context and cuBLAS/cuDNN workspaces (about 0.5-1 GB a process), the
    caching allocator's fragmentation, the loss's own ``[rows, tokens]`` float32 tensors (tens
    of bytes a token), the gradients of one layer's activations in the backward, LoRA's own
    activations (a bf16 copy of each adapted map's input and its rank-wide output), the
    no-grad scoring passes (old, reference and critic values: transient, smaller than the
    update's), and the MI diagnostics' scoring.

    Several ranks: under ``train.strategy: ddp`` every rank holds all of this (replicas). Under
    ``fsdp2`` (:meth:`baselines.distributed.Ranks.data_parallel`) each rank holds ``1 /
    world_size`` of the policy's and the critic model's gradients (reduce-scattered at every
    micro-batch) and AdamW state (and of the optimizer step's temporary). Their weights are
    counted whole, an upper bound: the rollout gathers the policy whole beside its own shards
    (:attr:`MemoryLine.gathered_shards`, in the rollout phase) and the critic's scoring gathers
    the critic whole while the policy is sharded; the update holds only shards plus one
    gathered layer. The reference model is replicated.

    Args:
        config: the trainer's :class:`~baselines.config.TrainConfig` (as
            :func:`baselines.config.load_config` returns it).
        model_config: the ``transformers`` config of ``model.path`` (its ``config.json``), of
            :data:`SUPPORTED_MODEL_TYPES`.
        gpu_bytes: the device's memory in bytes (an H200: 143,771 MiB as nvidia-smi reports it,
            ``143771 * 2**20``); needed for vLLM's share and :meth:`MemoryLine.fits`.
        world_size: ranks (``torchrun --nproc_per_node``); read under ``train.strategy:
            fsdp2`` only.

    Returns:
        A :class:`MemoryLine`.

    Raises:
        ValueError: an unsupported ``model_type`` (the message names the supported ones), or
            ``gpu_bytes <= 0``.
    """
    if gpu_bytes is not None and gpu_bytes <= 0:
        raise ValueError(f"gpu_bytes must be > 0; got {gpu_bytes}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1; got {world_size}")
    mc, rc, ac = config.model, config.rollout, config.algorithm
    # fsdp2: gradients and AdamW state sharded (ceil: the last rank's shard is padded).
    shards = world_size if config.train.strategy == "fsdp2" else 1

    def shard(n: int) -> int:
        return -(-n // shards)

    s = _shape(model_config)
    params = parameter_count(model_config)
    lora = mc.lora_rank > 0
    adapter = lora_parameter_count(model_config, mc.lora_rank) if lora else 0
    trained = adapter if lora else params
    value_head = s.hidden + 1
    labels: dict[str, str] = {}

    weights = _F32 * (params + adapter)
    labels["weights"] = f"weights (float32, {params + adapter:,} params)"
    gradients = _F32 * shard(trained)
    optimizer = 2 * _F32 * shard(trained)
    of = f", 1/{shards} a rank" if shards > 1 else ""
    labels["gradients"] = f"gradients (float32, {trained:,} trained{of})"
    labels["optimizer"] = f"optimizer (AdamW exp_avg + exp_avg_sq{of})"

    critic = 0
    critic_trained = 0
    if ac.name == "ppo" and ac.critic == "model":
        # An untied LM head is never read by the critic: no gradient, no AdamW state.
        body_trained = adapter if lora else params - (0 if s.tied else s.vocab * s.hidden)
        critic_trained = body_trained + value_head
        critic = _F32 * (params + adapter + value_head) + 2 * _F32 * shard(critic_trained)
        labels["critic"] = f"critic (model: weights + AdamW{of}; grads apart)"
    elif ac.name == "ppo":
        critic = _F32 * value_head + 3 * _F32 * shard(value_head)
        critic_trained = value_head
        labels["critic"] = "critic (value head: weights, grad, AdamW)"
    reference = _F32 * params if ac.kl_coef > 0 and not lora else 0
    labels["reference"] = "reference (float32 copy for the KL term)"

    engine = rc.engine
    if engine == "auto":  # the trainer's choice: the HF engine under LoRA or sharding
        engine = "hf" if lora or shards > 1 else "vllm"
    if engine == "vllm":
        rollout = int(rc.vllm_gpu_memory_utilization * gpu_bytes) if gpu_bytes else 0
        resident = True
        share = f"{rc.vllm_gpu_memory_utilization:g} of the GPU"
        labels["rollout"] = (
            f"rollout (vLLM, {share})" if gpu_bytes else "rollout (vLLM, no gpu_bytes)"
        )
        if rc.engine == "auto":  # resolved at run time: vLLM where it is installed
            labels["rollout"] += "; engine auto taken as vLLM (rollout.engine=hf: the HF engine)"
    else:
        slot = 2 * _BF16 * s.layers * s.kv  # a key and a value per layer, bf16
        slots = rc.generation_batch_tokens or (
            rc.num_groups * rc.group_size * rc.max_context_tokens
        )
        rollout = int(rc.kv_cache_gib * 2**30) + slots * slot
        resident = False
        labels["rollout"] = f"rollout (HF: {rc.kv_cache_gib:g} GiB store + {slots:,} slots)"

    copies = autocast_copy_bytes(model_config)
    labels["autocast_copies"] = "autocast bf16 weight copies"
    labels["head"] = f"LM head ({DEFAULT_CHUNK_ROWS}-row chunks, backward)"
    labels["recompute"] = "recompute (one layer, checkpointing)"
    in_policy_adamw = value_head if ac.name == "ppo" and ac.critic == "head" else 0
    optimizer_step = _F32 * shard(max(trained + in_policy_adamw, critic_trained))
    labels["optimizer_step"] = "AdamW step temporary"
    labels["gathered_shards"] = "policy shards beside its gathered weights (rollout)"

    def line(tokens: int, mode: str, padded: int, what: str) -> MemoryLine:
        recompute = 0
        if mode != "none":
            recompute = tokens * _layer_bytes(s, "none", padded) + _layer_copy_bytes(s)
        head = head_bytes(model_config, scored_tokens=tokens)
        return MemoryLine(
            weights=weights,
            gradients=gradients,
            optimizer=optimizer,
            critic=critic,
            reference=reference,
            rollout=rollout,
            rollout_resident=resident,
            activations=tokens
            * activation_bytes_per_token(
                model_config, checkpointing=mode, padded_row_tokens=padded
            ),
            recompute=recompute,
            autocast_copies=copies,
            head=head,
            head_held=head - head_bytes(model_config),
            head_copy=_BF16 * s.vocab * s.hidden,
            optimizer_step=optimizer_step,
            checkpointing=mode,
            micro_batch_tokens=tokens,
            gpu_bytes=gpu_bytes,
            labels={**labels, "activations": f"activations ({what}, {mode})"},
            gathered_shards=_F32 * shard(params + adapter) if shards > 1 else 0,
        )

    tokens = ac.micro_batch_tokens
    mode = "full" if mc.gradient_checkpointing else "none"
    row = min(rc.max_context_tokens, tokens)
    padded = row if tokens // row >= 2 else 0
    rows = "one unpadded row" if not padded else f"rows padded to {padded:,}"
    best = line(tokens, mode, padded, f"up to {tokens:,} tokens, {rows}")
    if mode == "none" and rc.max_context_tokens > tokens:
        # A row longer than the budget is trained alone under selective checkpointing
        # (baselines.llm.scoring.checkpointed_if): counted when it is the larger pass.
        long = line(
            rc.max_context_tokens,
            "selective",
            0,
            f"one row of {rc.max_context_tokens:,} tokens over the budget",
        )
        if long.update_pass > best.update_pass:
            best = long
    return best


def main(argv: list[str] | None = None) -> int:
    """``python -m baselines.memory CONFIG [section.key=value ...] [--model-config PATH]
    [--gpu-mib N] [--world-size W]``: print :func:`memory_line`'s table for a config.

    The model's shape comes from ``--model-config`` (a ``config.json`` or the folder holding
    it), else from ``model.path``'s folder (``embedded``: SmolLM2-135M-Instruct's). Returns 0, or
    2 with a message naming the fix (no ``config.json``, a bad config, an unsupported model).
    """
    import argparse
    import sys
    from pathlib import Path

    from baselines.config import load_config

    parser = argparse.ArgumentParser(
        prog="python -m baselines.memory",
        description="The trainer's memory on one GPU, part by part (issue 42).",
    )
    parser.add_argument("config", help="a trainer YAML config")
    parser.add_argument("overrides", nargs="*", help="section.key=value, as baselines.train")
    parser.add_argument(
        "--model-config", default="", help="config.json (or its folder); default: model.path's"
    )
    parser.add_argument(
        "--gpu-mib", type=int, default=143_771, help="device memory in MiB (default: an H200)"
    )
    parser.add_argument(
        "--world-size", type=int, default=1, help="ranks (read under train.strategy=fsdp2)"
    )
    args = parser.parse_intermixed_args(argv)  # overrides may follow the options
    try:
        config = load_config(args.config, args.overrides)
        source = args.model_config or config.model.path
        if not args.model_config and source == "embedded":
            from baselines.llm.policy import embedded_model_path

            source = str(embedded_model_path())
        path = Path(source).expanduser()
        path = path if path.name.endswith(".json") else path / "config.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"no model config at {path}: pass --model-config PATH (a config.json, e.g. "
                "Qwen2.5-3B-Instruct's, or the folder holding it)"
            )
        if args.gpu_mib <= 0:
            raise ValueError(f"--gpu-mib must be > 0 (an H200: 143771); got {args.gpu_mib}")
        import json

        from transformers import AutoConfig

        try:  # the file named, whatever its name (not the config.json beside it)
            fields = json.loads(path.read_text())
            model_type = fields.pop("model_type")
            model_config = AutoConfig.for_model(model_type, **fields)
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, OSError) as err:
            raise ValueError(
                f"{path} is not a Hugging Face model config (a JSON object with a model_type): "
                f"{type(err).__name__}: {err}"
            ) from None
        line = memory_line(
            config, model_config, gpu_bytes=args.gpu_mib * 2**20, world_size=args.world_size
        )
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(line.table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
