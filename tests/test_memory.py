"""baselines.memory: parameter counts, activation bytes and the memory line of the 3B configs.

Every expected value is worked out by hand (in the comments) or measured independently:

- parameter counts against ``sum(p.numel())`` of models transformers builds;
- activation bytes against what one forward through the trainer's own scoring path
  (:func:`baselines.llm.scoring.score_targets` under :func:`~baselines.llm.scoring.autocast`
  bf16, with :func:`~baselines.llm.scoring.checkpointed_if` / ``set_checkpointing``) really keeps
  for the backward pass: every tensor autograd saves (``torch.autograd.graph.saved_tensors_hooks``)
  and, under selective checkpointing, every output the checkpoint stores, counted once per
  storage, parameters left out and autocast's bf16 weight copies counted apart;
- the update's transient peak and AdamW's step against the bytes of all live tensors, followed
  op by op through a real forward, backward and step (a ``TorchDispatchMode``).
"""

from __future__ import annotations

import gc
import types
import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, MistralConfig, Qwen2Config

from baselines.config import load_config
from baselines.llm import scoring
from baselines.llm.critic import ValueHead
from baselines.memory import (
    CHECKPOINTING_MODES,
    MemoryLine,
    activation_bytes_per_token,
    autocast_copy_bytes,
    head_bytes,
    lora_parameter_count,
    memory_line,
    parameter_count,
)

#: An H200 as nvidia-smi reports it: 143,771 MiB.
H200_BYTES = 143_771 * 2**20
QWEN_3B_PARAMS = 3_085_938_688

#: A small decoder with the ratios of real ones (intermediate ~2.75 x hidden, 4 query heads per
#: key/value head, head_dim 32).
SMALL = dict(
    hidden_size=256,
    intermediate_size=704,
    num_hidden_layers=3,
    num_attention_heads=8,
    num_key_value_heads=2,
    vocab_size=512,
    max_position_embeddings=1024,
)


def qwen25_3b() -> Qwen2Config:
    """Qwen2.5-3B-Instruct's published config.json (huggingface.co/Qwen/Qwen2.5-3B-Instruct)."""
    return Qwen2Config(
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        hidden_act="silu",
    )


def smollm2_135m() -> LlamaConfig:
    """SmolLM2-135M(-Instruct): the embedded policy."""
    return LlamaConfig(
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        vocab_size=49152,
        tie_word_embeddings=True,
    )


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    "config",
    [
        LlamaConfig(**SMALL, tie_word_embeddings=True),
        LlamaConfig(**SMALL, tie_word_embeddings=False),
        LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True, head_dim=48),
        Qwen2Config(**SMALL, tie_word_embeddings=True),
        Qwen2Config(**SMALL, tie_word_embeddings=False),
        MistralConfig(**SMALL, tie_word_embeddings=False),
    ],
    ids=[
        "llama-tied",
        "llama-untied",
        "llama-biases-head_dim",
        "qwen2-tied",
        "qwen2-untied",
        "mistral",
    ],
)
def test_parameter_count_equals_the_built_model(config):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_parameter_count_of_a_two_layer_model_by_hand():
    # H = 8, I = 16, 2 query heads and 1 key/value head of d = 4 (A = 8, K = 4), V = 10.
    # embedding 10 x 8 = 80
    # a layer: q 8 x 8 = 64, k 8 x 4 = 32, v 32, o 64, gate/up/down 3 x 8 x 16 = 384, norms 16
    #          = 592
    # final norm 8; tied head 0: 80 + 2 x 592 + 8 = 1,272
    shape = dict(
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=10,
    )
    assert parameter_count(LlamaConfig(**shape, tie_word_embeddings=True)) == 1272
    # Qwen2, untied: q, k, v biases 8 + 4 + 4 = 16 a layer, and a 10 x 8 head:
    # 80 + 2 x (592 + 16) + 8 + 80 = 1,384
    assert parameter_count(Qwen2Config(**shape, tie_word_embeddings=False)) == 1384


def test_qwen25_3b_has_3_085_938_688_parameters():
    config = qwen25_3b()
    with torch.device("meta"):  # shapes only, no memory
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == QWEN_3B_PARAMS
    assert parameter_count(config) == QWEN_3B_PARAMS


def test_lora_adapter_count_equals_peft_on_the_trainers_targets():
    pytest.importorskip("peft")
    from peft import get_peft_model

    from baselines.config import TrainConfig
    from baselines.trainer import Trainer

    config = Qwen2Config(**SMALL, tie_word_embeddings=True)
    train = TrainConfig()
    train.model.lora_rank = 4
    lora = Trainer._lora_config(types.SimpleNamespace(config=train))  # the trainer's own targets
    model = get_peft_model(AutoModelForCausalLM.from_config(config), lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert lora_parameter_count(config, 4) == trainable
    # by hand: 4 x (7 x 256 + 2 x 256 + 2 x 64 + 3 x 704) = 4 x 4,544 = 18,176 a layer, 3 layers
    assert trainable == 3 * 18_176


def test_unsupported_model_type_and_mode_are_errors_that_name_the_choices():
    with pytest.raises(ValueError, match="llama, mistral, qwen2"):
        parameter_count(GPT2Config())
    with pytest.raises(ValueError, match="'none', 'selective', 'full'"):
        activation_bytes_per_token(LlamaConfig(**SMALL), checkpointing="some")
    with pytest.raises(ValueError, match="silu"):
        parameter_count(LlamaConfig(**SMALL, hidden_act="gelu"))


# ----------------------------------------------------------------------------- activations

_CAST_OR_VIEW = {
    "TBackward0",
    "ToCopyBackward0",
    "ViewBackward0",
    "TransposeBackward0",
    "PermuteBackward0",
    "UnsafeViewBackward0",
}


def _is_weight_copy(t: torch.Tensor, params: set[int]) -> bool:
    """Whether ``t`` is a parameter cast (and transposed) by autocast: its history is casts and
    views back to a parameter's gradient accumulator."""
    fn = t.grad_fn
    while fn is not None and fn.name() in _CAST_OR_VIEW:
        parents = [f for f, _ in fn.next_functions if f is not None]
        if len(parents) != 1:
            return False
        fn = parents[0]
    return fn is not None and hasattr(fn, "variable") and id(fn.variable) in params


def _leaves(obj):
    """Tensors inside selective checkpointing's storage (dicts and lists of wrapped outputs)."""
    if isinstance(obj, dict):
        for value in obj.values():
            yield from _leaves(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _leaves(value)
    elif isinstance(obj, torch.Tensor):
        yield obj
    elif hasattr(obj, "val"):  # torch.utils.checkpoint's _VersionWrapper
        yield from _leaves(obj.val)


def _kept_bytes(model, rows: int, tokens: int, mode: str, *, padded: bool = False, device="cpu"):
    """``(activation bytes, autocast weight-copy bytes)`` that one forward of ``rows x tokens``
    through the trainer's scoring path keeps for its backward, each storage counted once.

    Counted: every tensor autograd saves (its pack hook); under selective checkpointing also the
    op outputs the checkpoint stores instead (read from the storage of the contexts
    ``scoring._selective_context`` creates: torch's own ``_CachingTorchDispatchMode.storage``).
    Left out: parameters. Rows after the first are half padding when ``padded``. The loss reads
    the same 8 positions of row 0 in every call, so the LM head's share is the same whatever
    ``rows``. The backward then runs (and frees the graph: the head's checkpoint frames and the
    graph hold each other, so a graph never backpropagated would stay). ``device``: where the
    model is (``scripts/gpu_check.py`` measures on CUDA with this function).
    """
    params = {id(p) for p in model.parameters()}
    param_storage = {p.untyped_storage().data_ptr() for p in model.parameters()}
    acts: dict[int, int] = {}
    copies: dict[int, int] = {}

    def count(t: torch.Tensor) -> None:
        ptr = t.untyped_storage().data_ptr()
        if ptr in param_storage or ptr in acts or ptr in copies:
            return
        (copies if _is_weight_copy(t, params) else acts)[ptr] = t.untyped_storage().nbytes()

    def pack(t: torch.Tensor) -> torch.Tensor:
        count(t)
        return t

    original = scoring._selective_context
    contexts = []

    def recording():
        forward_context, recompute_context = original()
        contexts.append(forward_context)
        return forward_context, recompute_context

    g = torch.Generator().manual_seed(rows * 1000 + tokens)
    ids = torch.randint(0, model.config.vocab_size, (rows, tokens), generator=g)
    attention = torch.ones(rows, tokens, dtype=torch.long)
    if padded:
        attention[1:, tokens // 2 :] = 0
    mask = torch.zeros(rows, tokens - 1, dtype=torch.bool)
    mask[0, -8:] = True
    ids, attention, mask = ids.to(device), attention.to(device), mask.to(device)
    model.train()
    if mode == "full":
        scoring.set_checkpointing(model, True)
    scoring._selective_context = recording
    try:
        with scoring.checkpointed_if(model, mode == "selective"):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                with scoring.autocast(device, torch.bfloat16):
                    out = scoring.score_targets(model, ids, attention, mask, want_entropy=True)
            for context in contexts:
                for t in _leaves(context.storage):
                    count(t)
            (out["logprobs"].sum() + out["entropy"].sum()).backward()
    finally:
        scoring._selective_context = original
        if mode == "full":
            scoring.set_checkpointing(model, False)
        model.zero_grad(set_to_none=True)
        gc.collect()
    return sum(acts.values()), sum(copies.values())


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def small_model(request):
    torch.manual_seed(0)
    cls = LlamaConfig if request.param == "llama" else Qwen2Config
    return AutoModelForCausalLM.from_config(cls(**SMALL, tie_word_embeddings=True))


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("mode", CHECKPOINTING_MODES)
def test_activation_bytes_per_token_equal_what_the_scoring_path_keeps(small_model, mode, padded):
    # Per token by difference: 3 rows against 1 (padded: 4 against 2, the mask in both), each of
    # 64 tokens, so whatever does not grow with the rows cancels: the rotary cos/sin (one row of
    # positions), autocast's weight copies, the LM head's 8 scored positions. Tolerance 1 %: the
    # count matched to the byte here (torch 2.13, transformers 5.24; on an H200 with torch 2.11 and
    # transformers 5.24's sibling 5.17 too, for a Qwen2.5-3B shape in "none" mode), and 1 % leaves
    # room for kernel-internal padding other versions add (CUDA's memory-efficient kernel pads its
    # log-sum-exp to 32 positions) while any missed tensor of 2 H bytes a layer (a bf16 copy of
    # the residual, 1.2 % of the "none" figure here) fails.
    tokens = 64
    low, high = (2, 4) if padded else (1, 3)
    kept_low, _ = _kept_bytes(small_model, low, tokens, mode, padded=padded)
    kept_high, _ = _kept_bytes(small_model, high, tokens, mode, padded=padded)
    measured = (kept_high - kept_low) / ((high - low) * tokens)
    predicted = activation_bytes_per_token(
        small_model.config, checkpointing=mode, padded_row_tokens=tokens if padded else 0
    )
    assert measured == pytest.approx(predicted, rel=0.01)


@pytest.mark.parametrize("mode", CHECKPOINTING_MODES)
def test_the_rest_of_one_forward_is_the_head_cos_sin_and_the_weight_copies(small_model, mode):
    # One unpadded row of T = 64 tokens: what is kept beyond T x the per-token figure is
    #   the rotary cos and sin, float32 [1, T, head_dim] each, saved by the products of "none"
    #   (checkpointed layers recompute them): 2 x 64 x 32 x 4 = 16,384 bytes;
    #   the LM head's inputs for its 8 scored positions (head_bytes' held part).
    # And autocast's bf16 weight copies: without checkpointing the graph keeps the copy of
    # every linear weight of the trunk, 2 bytes each (biases are not saved: their gradient is a
    # sum); checkpointed layers keep none (autocast's cache holds them until the forward ends).
    tokens, config = 64, small_model.config
    kept, copies = _kept_bytes(small_model, 1, tokens, mode)
    per_token = activation_bytes_per_token(config, checkpointing=mode)
    cos_sin = 2 * tokens * 32 * 4 if mode == "none" else 0
    held_by_head = head_bytes(config, scored_tokens=8) - head_bytes(config, scored_tokens=0)
    assert held_by_head == 8 * (4 * 256 + 3 * 8 + 2 * 4)
    assert kept == tokens * per_token + cos_sin + held_by_head
    trunk_weights = sum(
        m.weight.numel()
        for m in small_model.get_decoder().layers.modules()
        if isinstance(m, torch.nn.Linear)
    )
    assert copies == (2 * trunk_weights if mode == "none" else 0)
    # autocast_copy_bytes adds the biases and the head's copy to the trunk's weights
    biases = sum(
        m.bias.numel()
        for m in small_model.get_decoder().layers.modules()
        if isinstance(m, torch.nn.Linear) and m.bias is not None
    )
    assert autocast_copy_bytes(config) == 2 * (trunk_weights + biases + 512 * 256)


class _LiveBytes(TorchDispatchMode):
    """Bytes of the tensors ops have made that are still alive, and their peak: each op's
    outputs counted once per storage, and taken off when the storage is freed."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.storages: set[int] = set()

    def _freed(self, ptr: int, nbytes: int) -> None:
        if ptr in self.storages:
            self.storages.discard(ptr)
            self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                ptr, nbytes = storage.data_ptr(), storage.nbytes()
                if nbytes and ptr not in self.storages:
                    self.storages.add(ptr)
                    self.live += nbytes
                    weakref.finalize(storage, self._freed, ptr, nbytes)
                    self.peak = max(self.peak, self.live)
        return out

    def restart(self) -> int:
        """Start a new peak from the bytes alive now; returns them."""
        gc.collect()
        self.peak = self.live
        return self.live


@pytest.mark.parametrize("checkpointing", [False, True], ids=["none", "full"])
def test_update_pass_and_adamw_step_as_measured(checkpointing):
    # PPO with the value head, one micro-batch of 2 rows x 512 tokens (the second padded after
    # 300), every position scored, gradients and AdamW state already there (the second
    # optimizer step), AdamW's foreach implementation (CUDA's default). A vocabulary of 8,192
    # makes the head's share visible beside the trunk's.
    config = Qwen2Config(**{**SMALL, "vocab_size": 8192}, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).train()
    value_head = ValueHead(config.hidden_size)
    params = list(model.parameters()) + list(value_head.parameters())
    adamw = torch.optim.AdamW(params, foreach=True)
    if checkpointing:
        scoring.set_checkpointing(model, True)
    ids = torch.randint(0, 8192, (2, 512), generator=torch.Generator().manual_seed(0))
    attention = torch.ones(2, 512, dtype=torch.long)
    attention[1, 300:] = 0
    mask = torch.ones(2, 511, dtype=torch.bool)

    def micro_batch() -> None:  # as Actor.update: score under autocast, the loss outside it
        with scoring.autocast("cpu", torch.bfloat16):
            out = scoring.score_targets(
                model, ids, attention, mask, want_entropy=True, want_hidden=True
            )
            values = value_head(out.pop("hidden"))
        loss = -out["logprobs"].mean() - 1e-3 * out["entropy"].mean() + ((values - 1) ** 2).mean()
        loss.backward()

    live = _LiveBytes()
    with live:
        micro_batch()
        adamw.step()  # gradients and AdamW state exist from here on
        start = live.restart()
        micro_batch()
        update_pass = live.peak - start
        start = live.restart()
        adamw.step()
        step = live.peak - start
    train = load_config(
        None,
        [
            "algorithm.name=ppo",
            "algorithm.micro_batch_tokens=1024",
            "rollout.max_context_tokens=512",  # two padded rows of 512
            f"model.gradient_checkpointing={str(checkpointing).lower()}",
        ],
    )
    line = memory_line(train, config)
    # sqrt(exp_avg_sq) into new tensors: 4 bytes a trained parameter, exactly
    assert step == line.optimizer_step == 4 * sum(p.numel() for p in params)
    # Within 10 %: measured 2.7 % (none) and 7.9 % (full) above the line here (1-8 % with
    # vocabularies of 512 and 32,768):
    # the gradients of the activations in the backward (a few float32 [tokens, H] tensors) are
    # not in the line.
    assert update_pass == pytest.approx(line.update_pass, rel=0.10)


def test_smollm2_figures_by_hand():
    # H = 576, I = 1536, A = 9 x 64 = 576, K = 3 x 64 = 192, n_h = 9, 30 layers.
    # none, a layer: 26 H + 4 A + 4 K + 4 n_h + 8 + 8 I
    #   = 14,976 + 2,304 + 768 + 36 + 8 + 12,288 = 30,380
    # selective, a layer: 8 H + 4 A + 4 K + 4 n_h + 4 I = 4,608 + 2,304 + 768 + 36 + 6,144 = 13,860
    # full, a layer: 4 H = 2,304
    # once: final norm 8 H + 4 = 4,612, token ids 8
    config = smollm2_135m()
    assert activation_bytes_per_token(config, checkpointing="none") == 30 * 30_380 + 4_620
    assert activation_bytes_per_token(config, checkpointing="selective") == 30 * 13_860 + 4_620
    assert activation_bytes_per_token(config, checkpointing="full") == 30 * 2_304 + 4_620
    # scoring.py's docstring says ~1.6 MB a token without checkpointing (a peak-RSS figure: it
    # holds what the backward allocates too) and ~0.35 MB selective "by count": the saved
    # tensors are 0.92 MB and 0.42 MB.


# ----------------------------------------------------------------------------- memory line


def _ragen2(name: str, *overrides: str):
    """A shipped 3B config, read as ``python -m baselines.train --config`` reads it."""
    return load_config(f"baselines/configs/ragen2/{name}.yaml", list(overrides))


@pytest.mark.parametrize("name", ["sokoban", "frozen_lake"])
def test_memory_line_of_the_ragen2_3b_configs(name):
    qwen = qwen25_3b()
    H = 2048
    shipped = memory_line(_ragen2(name), qwen, gpu_bytes=H200_BYTES)
    with_head = memory_line(_ragen2(name, "algorithm.critic=head"), qwen, gpu_bytes=H200_BYTES)
    plain = memory_line(
        _ragen2(name, "model.gradient_checkpointing=false"), qwen, gpu_bytes=H200_BYTES
    )
    plain_head = memory_line(
        _ragen2(name, "model.gradient_checkpointing=false", "algorithm.critic=head"),
        qwen,
        gpu_bytes=H200_BYTES,
    )
    for line in (shipped, with_head, plain, plain_head):
        # float32 weights 4 B, gradients 4 B, AdamW's two moments 8 B: 16 B a parameter
        assert line.weights + line.gradients + line.optimizer == 16 * QWEN_3B_PARAMS
        # vLLM takes rollout.vllm_gpu_memory_utilization = 0.3 of the GPU, all along
        assert line.rollout == int(0.3 * H200_BYTES) and line.rollout_resident
        assert line.micro_batch_tokens == 8192
        assert line.reference == 0  # kl_coef 0
        # AdamW's foreach step: one float32 temporary of the policy's trained parameters
        assert line.optimizer_step >= 4 * QWEN_3B_PARAMS
    # The shipped configs checkpoint every layer, as verl's defaults (which RAGEN runs) do:
    # each layer keeps its input, 8,192 tokens of rows padded to max_context_tokens = 3,600.
    assert shipped.checkpointing == with_head.checkpointing == "full"
    per_token = activation_bytes_per_token(qwen, checkpointing="full", padded_row_tokens=3600)
    assert shipped.activations == 8192 * per_token
    assert plain.checkpointing == "none"
    per_token = activation_bytes_per_token(qwen, checkpointing="none", padded_row_tokens=3600)
    assert plain.activations == 8192 * per_token
    # critic: model, a second Qwen2.5-3B (tied: every parameter is read, so all get AdamW
    # state) with a 2,049-parameter value head: 4 B weights + 8 B AdamW a parameter (its
    # gradients are freed before the policy's update: not at the same time)
    assert shipped.critic == 12 * (QWEN_3B_PARAMS + H + 1)
    # critic: head, the value head in the policy's AdamW: 16 B a parameter
    assert with_head.critic == 16 * (H + 1)
    # Held through the update: policy 16 B + critic 12 B a parameter (86.4 GB) and vLLM's share
    # (45.2 GB): 131.6 GB, then AdamW's 12.3 GB temporary, above the checkpointed pass (8.8 GB).
    # 144.0 GB within one H200 (143,771 MiB = 150.75 GB), which is what the configs' headers say.
    resident = 28 * QWEN_3B_PARAMS + 12 * (H + 1) + int(0.3 * H200_BYTES)
    # (the AdamW temporary is the larger of the two steps': the critic's, value head included)
    assert shipped.total == resident + 4 * (QWEN_3B_PARAMS + H + 1)
    assert shipped.fits() and H200_BYTES - shipped.total > 5e9
    assert with_head.fits() and H200_BYTES - with_head.total > 40e9
    # Without checkpointing one micro-batch's activations are 48.8 GB: the separate critic's
    # line is 187.9 GB (no single GPU), the value head's 150.9 GB (past the card at its edge).
    assert plain.total > H200_BYTES + 30e9
    assert plain_head.total == pytest.approx(H200_BYTES, abs=1e9)


def test_memory_line_under_fsdp2_shards_gradients_and_adamw_state():
    """RAGEN-2's PPO config on 4 ranks under ``train.strategy=fsdp2`` (the HF engine: fsdp2
    gathers its weights for it): each rank holds a quarter of the policy's and the critic
    model's gradients and AdamW moments (dim-0 shards, padded: ceil), the weights whole (the
    rollout and scoring gather them); ``ddp`` ignores the world size (replicas)."""
    qwen, H = qwen25_3b(), 2048
    hf = ("rollout.engine=hf", "rollout.kv_cache_gib=4")
    ddp = memory_line(_ragen2("sokoban", *hf), qwen, gpu_bytes=H200_BYTES, world_size=4)
    one = memory_line(_ragen2("sokoban", *hf), qwen, gpu_bytes=H200_BYTES)
    assert ddp == one
    fsdp = memory_line(
        _ragen2("sokoban", *hf, "train.strategy=fsdp2"), qwen, gpu_bytes=H200_BYTES, world_size=4
    )
    quarter = -(-QWEN_3B_PARAMS // 4)  # 771,484,672: the parameter count divides by 4
    assert quarter * 4 == QWEN_3B_PARAMS
    assert fsdp.weights == ddp.weights == 4 * QWEN_3B_PARAMS
    assert fsdp.gradients == 4 * quarter
    assert fsdp.optimizer == 8 * quarter
    critic = QWEN_3B_PARAMS + H + 1  # a second Qwen2.5-3B and its value head
    assert fsdp.critic == 4 * critic + 8 * -(-critic // 4)
    assert fsdp.optimizer_step == 4 * -(-critic // 4)  # the critic's step is the larger
    # The rollout gathers the policy whole while its own quarter stays: 1.25 x its weights.
    assert fsdp.gathered_shards == 4 * quarter and ddp.gathered_shards == 0
    assert fsdp.rollout_phase - fsdp.gathered_shards == (
        fsdp.weights + fsdp.optimizer + fsdp.critic + fsdp.rollout + fsdp.autocast_copies
    )
    # Every phase holds at least the AdamW moments, 3/4 of them gone: 6 B a parameter of the
    # policy and of the critic, 37 GB less at the peak (49.8 GB measured by the line).
    assert ddp.total - fsdp.total >= 6 * (QWEN_3B_PARAMS + critic)
    head = memory_line(
        _ragen2("sokoban", *hf, "train.strategy=fsdp2", "algorithm.critic=head"),
        qwen,
        world_size=4,
    )
    assert head.critic == 4 * (H + 1) + 12 * -(-(H + 1) // 4)
    with pytest.raises(ValueError, match="world_size must be >= 1"):
        memory_line(_ragen2("sokoban"), qwen, world_size=0)


def test_memory_line_parts_of_a_small_lora_kl_hf_run_by_hand():
    # GRPO with LoRA rank 4, a KL term and the HF engine on SMALL (Qwen2, tied): 1,182,976
    # parameters (test above: built model), adapters 3 x 18,176 = 54,528.
    config = Qwen2Config(**SMALL, tie_word_embeddings=True)
    params, adapter = parameter_count(config), 54_528
    train = load_config(
        None,
        [
            "model.lora_rank=4",
            "algorithm.kl_coef=0.1",
            "rollout.engine=hf",
            "rollout.kv_cache_gib=0.5",
            "rollout.generation_batch_tokens=1000",
            "algorithm.micro_batch_tokens=512",
            "rollout.max_context_tokens=512",
        ],
    )
    line = memory_line(train, config)
    assert line.weights == 4 * (params + adapter)  # the frozen base and the adapters
    assert line.gradients == 4 * adapter and line.optimizer == 8 * adapter
    assert line.reference == 0  # with LoRA the reference is the policy with its adapter off
    assert line.critic == 0  # GRPO
    # HF engine: 0.5 GiB store + 1,000 slots x (key + value) x 3 layers x 2 x 32 x 2 B
    assert line.rollout == 2**29 + 1000 * 2 * 3 * 64 * 2 and not line.rollout_resident
    assert line.optimizer_step == 4 * adapter
    # without LoRA the KL term holds a float32 copy of the policy
    plain = memory_line(load_config(None, ["algorithm.kl_coef=0.1"]), config)
    assert plain.reference == 4 * params
    # one row of 512 tokens fills the budget: unpadded, no checkpointing
    assert line.activations == 512 * activation_bytes_per_token(config, checkpointing="none")


def test_memory_line_table_has_one_line_a_part_in_gb():
    line = memory_line(
        _ragen2("sokoban", "model.gradient_checkpointing=false"), qwen25_3b(), gpu_bytes=H200_BYTES
    )
    text = line.table()
    assert "weights (float32, 3,085,938,688 params)" in text
    assert f"{4 * QWEN_3B_PARAMS / 1e9:8.2f} GB" in text  # 12.34
    for part in ("gradients", "optimizer", "critic", "rollout", "activations", "head", "peak"):
        assert part in text
    assert "does NOT fit" in text
    with pytest.raises(AttributeError):
        line.weights = 0  # frozen
    assert isinstance(line, MemoryLine)


def test_the_command_prints_the_shipped_configs_line_and_names_the_fix(tmp_path, capsys):
    from baselines.memory import main

    qwen25_3b().to_json_file(tmp_path / "config.json")
    assert main(["baselines/configs/ragen2/sokoban.yaml", "--model-config", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "weights (float32, 3,085,938,688 params)" in out
    assert "143.98 GB" in out and "fits (+6.78 GB)" in out  # the configs' headers quote these
    # model.path is a placeholder folder without config.json: the message names the option
    assert main(["baselines/configs/ragen2/sokoban.yaml"]) == 2
    assert "--model-config" in capsys.readouterr().err


def test_a_row_longer_than_the_budget_is_counted_alone_under_selective_checkpointing():
    # sokoban.yaml: micro-batches of 1,024 tokens, rows up to 4,096. A longer row is trained
    # alone with selective checkpointing (scoring.checkpointed_if); at 4,096 tokens that pass is
    # larger than the 1,024-token one, so the line counts it.
    smol = smollm2_135m()
    line = memory_line(load_config("baselines/configs/sokoban.yaml", ["rollout.engine=hf"]), smol)
    assert line.checkpointing == "selective" and line.micro_batch_tokens == 4096
    assert line.activations == 4096 * activation_bytes_per_token(smol, checkpointing="selective")
    short = memory_line(
        load_config(
            "baselines/configs/sokoban.yaml",
            ["rollout.engine=hf", "rollout.max_context_tokens=1024"],
        ),
        smol,
    )
    assert short.checkpointing == "none" and line.update_pass > short.update_pass
    # the HF engine generates inside the trainer's autocast block: its bf16 weight copies count
    assert line.rollout_phase == (
        line.weights + line.optimizer + line.critic + line.rollout + autocast_copy_bytes(smol)
    )


def test_the_command_reads_the_config_file_it_is_given(tmp_path, capsys):
    from baselines.memory import main

    # a SmolLM2 config.json beside qwen.json: --model-config qwen.json must read qwen.json
    smollm2_135m().to_json_file(tmp_path / "config.json")
    qwen25_3b().to_json_file(tmp_path / "qwen.json")
    argv = ["baselines/configs/ragen2/sokoban.yaml", "--model-config", str(tmp_path / "qwen.json")]
    assert main([*argv, "algorithm.critic=head"]) == 0  # an override after the options
    assert "3,085,938,688 params" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{not json")
    assert (
        main(["baselines/configs/sokoban.yaml", "--model-config", str(tmp_path / "bad.json")]) == 2
    )
    assert "not a Hugging Face model config" in capsys.readouterr().err


def test_the_heads_peak_in_its_backward_is_head_bytes():
    # The LM head alone (scoring.head_logprobs under bf16 autocast, with the entropy), 700 scored
    # rows of a 512-wide hidden state over 8,192 tokens in chunks of 32 rows: 6 weight-gradient
    # groups of 128 rows (the last of 60), so the backward's logits phase and its end both
    # happen. Every tensor the ops make is tracked: the peak from the call on is head_bytes
    # (its held part, then the larger backward phase) plus the hidden states' float32 gradient,
    # which head_bytes leaves to the trunk's count. Measured 0.02 % under it (the held part
    # counts the gathered hidden states and indices that score_targets makes, made here before
    # the count starts); keeping the weight's bf16 copy and the gathered logit gradients alive
    # into the float32 cast of the weight's gradient measured 37 % over.
    config = LlamaConfig(**{**SMALL, "hidden_size": 512, "vocab_size": 8192})

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(512, 8192, bias=False)
            self.config = types.SimpleNamespace()

        def get_output_embeddings(self):
            return self.head

    g = torch.Generator().manual_seed(0)
    head = Head()
    hidden = torch.randn(700, 512, generator=g, requires_grad=True)
    targets = torch.randint(0, 8192, (700,), generator=g)
    live = _LiveBytes()
    with live:
        start = live.restart()
        with scoring.autocast("cpu", torch.bfloat16):
            lp, ent = scoring.head_logprobs(head, hidden, targets, want_entropy=True, chunk_size=32)
        (lp.sum() + ent.sum()).backward()
        peak = live.peak - start
    predicted = head_bytes(config, scored_tokens=700, chunk_rows=32)
    grad_hidden = 700 * 512 * 4
    assert head.head.weight.grad.dtype == torch.float32
    assert peak == pytest.approx(predicted + grad_hidden, rel=0.01)
