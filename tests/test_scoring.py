"""baselines.llm.scoring: log-probs and entropy at scored positions only, equal to the full-logits path.

The independent implementation compared against is the plain one every trainer used before:
``log_softmax(model(...).logits / T)`` at every position, gathered at the targets, with the
entropy of the same full tensor (:func:`baselines.llm.scoring.logprobs_from_logits`,
:func:`baselines.llm.scoring.entropy_from_logits`). Values and gradients must agree in float32.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from baselines.llm.policy import load_policy
from baselines.llm.scoring import (
    autocast,
    entropy_from_logits,
    head_logprobs,
    logprobs_from_logits,
    resolve_autocast,
    score_targets,
)


def _batch(vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (3, 40), generator=g)
    attn = torch.ones_like(ids)
    attn[1, 30:] = 0  # a right-padded row
    mask = torch.zeros(3, 39)
    mask[:, 10:20] = 1
    mask[2, 25:35] = 1
    return ids, attn, mask


def _full_path(model, ids, attn, mask, temperature):
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits
    z = logits[:, :-1]
    z = (z if z.dtype == torch.float64 else z.float()) / temperature
    return logprobs_from_logits(z, ids[:, 1:]) * mask, entropy_from_logits(z) * mask


@pytest.mark.parametrize("path", ["tiny", "embedded"])
def test_values_and_gradients_equal_the_full_logits_path_in_float32(path):
    # The reference runs in float64 (a copy of the model): the full path's own float32 entropy
    # is off by up to 4e-4 nats on the embedded model (a sum over 49,152 products), the fused
    # head's by under 1e-5 (docs/performance.md).
    model, _ = load_policy(path, device="cpu", dtype="float32", texts=["a b c d e f g"] * 2)
    ids, attn, mask = _batch(model.config.vocab_size)
    temperature = 0.7
    model.train()
    reference = copy.deepcopy(model).double()
    lp_ref, ent_ref = _full_path(reference, ids, attn, mask.double(), temperature)
    ((lp_ref + 0.01 * ent_ref) * mask).sum().backward()
    grads_ref = [p.grad.float() for p in reference.parameters()]
    lp_ref, ent_ref = lp_ref.float(), ent_ref.float()

    out = score_targets(
        model, ids, attn, mask, temperature=temperature, want_entropy=True, chunk_size=7
    )
    ((out["logprobs"] + 0.01 * out["entropy"]) * mask).sum().backward()
    torch.testing.assert_close(out["logprobs"], lp_ref, rtol=0, atol=1e-4)
    torch.testing.assert_close(out["entropy"], ent_ref, rtol=0, atol=1e-4)
    assert out["logprobs"].dtype == torch.float32 and out["entropy"].dtype == torch.float32
    for p, g_ref in zip(model.parameters(), grads_ref, strict=True):
        scale = g_ref.abs().max().item() + 1e-12
        assert (p.grad - g_ref).abs().max().item() <= 1e-3 * scale


def test_unscored_positions_are_zero_and_get_no_gradient():
    model, _ = load_policy("tiny", device="cpu", dtype="float32", texts=["a b c"])
    ids, attn, mask = _batch(model.config.vocab_size, seed=1)
    hidden_grad = {}

    out = score_targets(model, ids, attn, mask, want_entropy=True, want_hidden=True)
    out["hidden"].register_hook(lambda g: hidden_grad.setdefault("g", g))
    (out["logprobs"].sum() + out["entropy"].sum()).backward()
    assert (out["logprobs"][mask == 0] == 0).all() and (out["entropy"][mask == 0] == 0).all()
    g = hidden_grad["g"]
    assert torch.isfinite(g).all()
    assert (g[mask == 0] == 0).all()  # the head never saw those positions


def test_head_logprobs_hand_values():
    # A head that is the identity on 3 tokens: logits = hidden. Row [0, 0, ln 2] at T=1:
    # logsumexp = ln(1 + 1 + 2) = ln 4; log p(token 2) = ln 2 - ln 4 = -ln 2;
    # entropy = -(1/4 ln 1/4 + 1/4 ln 1/4 + 1/2 ln 1/2) = 1.5 ln 2.
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(3, 3, bias=False)
            with torch.no_grad():
                self.head.weight.copy_(torch.eye(3))
            self.config = type("C", (), {})()

        def get_output_embeddings(self):
            return self.head

    hidden = torch.tensor([[0.0, 0.0, math.log(2.0)], [2.0, 2.0, 2.0]])
    lp, ent = head_logprobs(Head(), hidden, torch.tensor([2, 0]), want_entropy=True, chunk_size=1)
    torch.testing.assert_close(lp, torch.tensor([-math.log(2.0), -math.log(3.0)]))
    torch.testing.assert_close(ent, torch.tensor([1.5 * math.log(2.0), math.log(3.0)]))
    # T=2 halves the logits: row 1 stays uniform, so log p = -ln 3 whatever T.
    lp2, _ = head_logprobs(Head(), hidden, torch.tensor([2, 0]), temperature=2.0)
    assert lp2[1].item() == pytest.approx(-math.log(3.0), abs=1e-6)


class _LinearHead(torch.nn.Module):
    """A bare LM head (with a bias) for :func:`head_logprobs`."""

    def __init__(self, hidden: int, vocab: int, dtype: torch.dtype, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.head = torch.nn.Linear(hidden, vocab, dtype=dtype)
        with torch.no_grad():
            # logits of standard deviation ~3 for unit hidden states
            w = torch.randn(vocab, hidden, generator=g, dtype=dtype) * 3 / hidden**0.5
            self.head.weight.copy_(w)
            self.head.bias.copy_(torch.randn(vocab, generator=g, dtype=dtype))
        self.config = type("C", (), {})()

    def get_output_embeddings(self):
        return self.head


def _autograd_reference(head, hidden, targets, temperature, g_lp, g_ent):
    """Gradients of ``sum(g_lp * log p_y + g_ent * H)`` through plain autograd in float64."""
    w = head.head.weight.detach().double().requires_grad_()
    b = head.head.bias.detach().double().requires_grad_()
    h = hidden.detach().double().requires_grad_()
    logp = torch.log_softmax((h @ w.t() + b) / temperature, dim=-1)
    lp = logp.gather(-1, targets[:, None]).squeeze(-1)
    ent = -(logp.exp() * logp.masked_fill(torch.isneginf(logp), 0.0)).sum(-1)  # 0 log 0 = 0
    (g_lp.double() * lp + g_ent.double() * ent).sum().backward()
    return lp.detach(), ent.detach(), h.grad, w.grad, b.grad


@pytest.mark.parametrize("chunk_size", [1, 4, 64])
def test_the_fused_heads_gradients_equal_autograds_in_float64(chunk_size):
    # 37 rows: with chunk_size=4 the backward's weight-gradient groups are 16 rows, 16, then 5
    # (a partial chunk in a partial group); chunk_size=64 is one chunk of 37. Upstream gradients
    # of either sign on both outputs, T = 0.7, a head with a bias.
    g = torch.Generator().manual_seed(1)
    head = _LinearHead(8, 50, torch.float64)
    hidden = torch.randn(37, 8, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 50, (37,), generator=g)
    g_lp = torch.randn(37, generator=g, dtype=torch.float64)
    g_ent = torch.randn(37, generator=g, dtype=torch.float64)
    lp, ent = head_logprobs(
        head, hidden, targets, temperature=0.7, want_entropy=True, chunk_size=chunk_size
    )
    (g_lp * lp + g_ent * ent).sum().backward()
    lp_ref, ent_ref, dh, dw, db = _autograd_reference(head, hidden, targets, 0.7, g_lp, g_ent)
    assert lp.dtype == ent.dtype == torch.float64
    for got, want in [
        (lp, lp_ref),
        (ent, ent_ref),
        (hidden.grad, dh),
        (head.head.weight.grad, dw),
        (head.head.bias.grad, db),
    ]:
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_the_fused_heads_gradients_with_one_output_used_or_the_head_frozen():
    # The log-probs alone (no entropy asked, or its gradient None) and a frozen head (LoRA):
    # the hidden states' gradient only.
    g = torch.Generator().manual_seed(2)
    head = _LinearHead(8, 50, torch.float64)
    hidden = torch.randn(20, 8, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 50, (20,), generator=g)
    g_lp = torch.randn(20, generator=g, dtype=torch.float64)
    lp, ent = head_logprobs(head, hidden, targets, want_entropy=True, chunk_size=3)
    (g_lp * lp).sum().backward()  # the entropy output gets no gradient
    _, _, dh, dw, _ = _autograd_reference(head, hidden, targets, 1.0, g_lp, torch.zeros(20))
    torch.testing.assert_close(hidden.grad, dh, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(head.head.weight.grad, dw, rtol=1e-10, atol=1e-10)
    hidden.grad = None
    head.head.requires_grad_(False)
    lp, ent = head_logprobs(head, hidden, targets, chunk_size=3)
    assert ent is None
    (g_lp * lp).sum().backward()
    torch.testing.assert_close(hidden.grad, dh, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(head.head.weight.grad, dw, rtol=1e-10, atol=1e-10)  # untouched


def test_the_fused_head_under_bf16_autocast_is_within_bf16s_rounding_of_float64():
    # Under bf16 autocast the head's matmuls run in bf16 (the float32 weight cast once a call),
    # the softmax in float32, and the weight's gradient comes back float32. Against the float64
    # reference: relative error of each gradient under 3 % (measured 0.9-1.0 %), the log-probs
    # and entropy within 0.1 nats (measured 0.043 and 0.041: bf16 keeps 8 bits of mantissa).
    g = torch.Generator().manual_seed(3)
    head = _LinearHead(64, 3000, torch.float32)
    hidden = torch.randn(300, 64, generator=g, requires_grad=True)
    targets = torch.randint(0, 3000, (300,), generator=g)
    g_lp, g_ent = torch.randn(300, generator=g), torch.randn(300, generator=g)
    with autocast("cpu", torch.bfloat16):
        lp, ent = head_logprobs(head, hidden, targets, want_entropy=True, chunk_size=32)
    (g_lp * lp + g_ent * ent).sum().backward()
    lp_ref, ent_ref, dh, dw, db = _autograd_reference(head, hidden, targets, 1.0, g_lp, g_ent)
    assert lp.dtype == torch.float32 and head.head.weight.grad.dtype == torch.float32
    assert (lp.double() - lp_ref).abs().max() < 0.1
    assert (ent.double() - ent_ref).abs().max() < 0.1
    for got, want in [(hidden.grad, dh), (head.head.weight.grad, dw), (head.head.bias.grad, db)]:
        assert ((got.double() - want).norm() / want.norm()).item() < 0.03


def test_a_minus_inf_logit_a_bias_alone_and_a_float64_model():
    # A -inf logit (a bias entry of -inf) has p = 0: with the log-probs alone trained the
    # gradients stay finite and equal float64 autograd's (0 x -inf would be NaN); with the
    # entropy too, its forward and gradient stay finite. A head whose bias alone is trained
    # gets that bias's gradient. A float64 model's scores come back float64.
    g = torch.Generator().manual_seed(4)
    head = _LinearHead(8, 50, torch.float64)
    with torch.no_grad():
        head.head.bias[[3, 7]] = float("-inf")
    hidden = torch.randn(9, 8, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 50, (9,), generator=g)
    targets[targets == 3] = 4
    targets[targets == 7] = 4
    g_lp = torch.randn(9, generator=g, dtype=torch.float64)
    lp, ent = head_logprobs(head, hidden, targets, want_entropy=True, chunk_size=4)
    (g_lp * lp).sum().backward()
    _, _, dh, dw, _ = _autograd_reference(head, hidden, targets, 1.0, g_lp, torch.zeros(9))
    torch.testing.assert_close(hidden.grad, dh, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(head.head.weight.grad, dw, rtol=1e-10, atol=1e-10)
    hidden.grad = None
    lp, ent = head_logprobs(head, hidden, targets, want_entropy=True, chunk_size=4)
    assert torch.isfinite(ent).all()
    (lp.sum() + ent.sum()).backward()
    assert torch.isfinite(hidden.grad).all()

    frozen = _LinearHead(8, 50, torch.float64)
    frozen.head.weight.requires_grad_(False)
    lp, _ = head_logprobs(frozen, hidden.detach(), targets, chunk_size=4)
    (g_lp * lp).sum().backward()
    _, _, _, _, db = _autograd_reference(frozen, hidden, targets, 1.0, g_lp, torch.zeros(9))
    torch.testing.assert_close(frozen.head.bias.grad, db, rtol=1e-10, atol=1e-10)

    model, _ = load_policy("tiny", device="cpu", dtype="float32", texts=["a b c"])
    ids, attn, mask = _batch(model.config.vocab_size)
    out = score_targets(model.double(), ids, attn, mask, want_entropy=True)
    assert out["logprobs"].dtype == out["entropy"].dtype == torch.float64


def test_the_fused_head_refuses_a_second_derivative():
    head = _LinearHead(8, 50, torch.float64)
    hidden = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    lp, _ = head_logprobs(head, hidden, torch.zeros(5, dtype=torch.long))
    (grad,) = torch.autograd.grad(lp.sum(), hidden, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        grad.sum().backward()


def test_bad_shapes_are_refused():
    model, _ = load_policy("tiny", device="cpu", dtype="float32", texts=["a b"])
    ids = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"mask must be \[B, T-1\]"):
        score_targets(model, ids, torch.ones_like(ids), torch.ones(2, 5))
    with pytest.raises(ValueError, match="temperature"):
        head_logprobs(model, torch.zeros(1, 64), torch.zeros(1, dtype=torch.long), temperature=0)


def test_autocast_resolution():
    assert resolve_autocast("float32", "cpu") is None
    assert resolve_autocast("bfloat16", "cpu") is torch.bfloat16
    with pytest.raises(ValueError, match="model.dtype"):
        resolve_autocast("float16", "cpu")
    # The context computes a matmul in bf16 under bf16 and leaves float32 alone under None.
    a = torch.randn(4, 4)
    with autocast("cpu", torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    with autocast("cpu", None):
        assert (a @ a).dtype == torch.float32


def test_an_oversized_micro_batch_is_checkpointed_with_the_same_gradients():
    """checkpointed_if (a row over the token budget): the same loss and gradients in float32 as
    without checkpointing; the decoder layers checkpoint only inside the context."""
    from baselines.llm.scoring import checkpointed_if

    model, _ = load_policy("tiny", device="cpu", dtype="float32", texts=["a b c d e f g"] * 2)
    model.train()
    ids, attn, mask = _batch(model.config.vocab_size)

    def run(oversized: bool):
        model.zero_grad(set_to_none=True)
        with checkpointed_if(model, oversized):
            layers = [m for m in model.modules() if hasattr(m, "gradient_checkpointing")]
            inside = any(m.gradient_checkpointing for m in layers)
            logp = score_targets(model, ids, attn, mask, temperature=1.0)["logprobs"]
            (logp * mask).sum().backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        return float((logp * mask).sum().detach()), grads, inside

    plain, plain_grads, plain_inside = run(False)
    ckpt, ckpt_grads, ckpt_inside = run(True)
    assert (plain_inside, ckpt_inside) == (False, True)
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    assert ckpt == pytest.approx(plain, rel=1e-6)
    assert len(ckpt_grads) == len(plain_grads) > 0
    for a, b in zip(plain_grads, ckpt_grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_the_oversized_row_recomputes_no_matmul_and_no_attention():
    """checkpointed_if is selective (issue 41): the backward of a checkpointed micro-batch runs
    exactly the matmuls and attention kernels of the backward without checkpointing (it keeps
    their forward outputs), while full checkpointing (model.gradient_checkpointing) runs every
    layer's forward matmuls again; the gradients are the plain path's."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from baselines.llm.scoring import checkpointed_if, set_checkpointing

    heavy = {"mm", "addmm", "bmm", "_scaled_dot_product_flash_attention_for_cpu"}

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls += func.overloadpacket.__name__ in heavy
            return func(*args, **(kwargs or {}))

    model, _ = load_policy("tiny", device="cpu", dtype="float32", texts=["a b c d e f g"] * 2)
    model.train()
    ids, attn, _ = _batch(model.config.vocab_size)
    ids, attn = ids[:1], torch.ones_like(attn[:1])  # one unpadded row: SDPA's flash kernel
    mask = torch.ones(1, ids.shape[1] - 1)

    def backward_calls(mode: str):
        model.zero_grad(set_to_none=True)
        if mode == "full":
            set_checkpointing(model, True)
        try:
            with checkpointed_if(model, mode == "selective"):
                logp = score_targets(model, ids, attn, mask, temperature=1.0)["logprobs"]
                count = Count()
                with count:
                    logp.sum().backward()
        finally:
            set_checkpointing(model, False)
        return count.calls, [p.grad.clone() for p in model.parameters() if p.grad is not None]

    plain, plain_grads = backward_calls("plain")
    selective, selective_grads = backward_calls("selective")
    full, _ = backward_calls("full")
    layers = model.config.num_hidden_layers
    assert plain > 0
    assert selective == plain
    # Full checkpointing redoes each layer's forward: the q, k, v, o, gate and up matmuls and the
    # attention (down's output feeds nothing the backward reads: torch stops the recompute early).
    assert full == plain + 7 * layers
    for a, b in zip(plain_grads, selective_grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
