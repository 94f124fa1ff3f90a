"""Tests of baselines.rl.losses against values worked out by hand (in the comments)."""

import math

import pytest
import torch

from baselines.llm.scoring import entropy_from_logits, logprobs_from_logits
from baselines.rl.losses import kl_penalty, masked_mean, policy_loss, value_loss


def test_policy_loss_asymmetric_clip_hand_values():
    # ratio r and advantage A per token; the last token is masked out (must not count).
    ratios = torch.tensor([[0.7, 1.5, 1.1, 0.7, 1.5, 10.0]])
    adv = torch.tensor([[-1.0, 2.0, 1.0, 1.0, -1.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    old = torch.zeros_like(ratios)
    logprobs = ratios.log().requires_grad_(True)
    # loss_t = max(-A r, -A clip(r, 0.8, 1.28)):
    #  t0 r=0.7 A=-1: max(0.7, 0.8)   =  0.8   low clip active
    #  t1 r=1.5 A=+2: max(-3, -2.56)  = -2.56  high clip active
    #  t2 r=1.1 A=+1: inside           = -1.1
    #  t3 r=0.7 A=+1: max(-0.7, -0.8) = -0.7   unclipped (pessimistic branch)
    #  t4 r=1.5 A=-1: max(1.5, 1.28)  =  1.5   unclipped
    # token mean over 5 tokens: (0.8 - 2.56 - 1.1 - 0.7 + 1.5) / 5 = -2.06 / 5 = -0.412
    loss, stats = policy_loss(logprobs, old, adv, mask, clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(-0.412, abs=1e-6)
    assert stats["actor/pg_clipfrac_low"].item() == pytest.approx(0.2)
    assert stats["actor/pg_clipfrac_high"].item() == pytest.approx(0.2)
    assert stats["actor/pg_clipfrac"].item() == pytest.approx(0.4)
    assert stats["actor/ratio_mean"].item() == pytest.approx(1.1, abs=1e-6)
    # k3 = (r - 1) - log r: 0.7 -> 0.0566749, 1.5 -> 0.0945349, 1.1 -> 0.0046898
    kl = (2 * (-0.3 - math.log(0.7)) + 2 * (0.5 - math.log(1.5)) + (0.1 - math.log(1.1))) / 5
    assert stats["actor/ppo_kl"].item() == pytest.approx(kl, abs=1e-6)
    # Gradient d loss / d logprob = -A r / 5 on unclipped tokens, 0 on clipped or masked ones.
    loss.backward()
    expected_grad = torch.tensor([[0.0, 0.0, -1.1 / 5, -0.7 / 5, 1.5 / 5, 0.0]])
    torch.testing.assert_close(logprobs.grad, expected_grad)


def test_policy_loss_rejects_bad_args():
    t = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="clip_low"):
        policy_loss(t, t, t, t, clip_low=1.0)
    with pytest.raises(ValueError, match="share one shape"):
        policy_loss(t, torch.zeros(2, 2), t, t)


def test_value_loss_hand_values():
    values = torch.tensor([[1.0, 0.0, 0.5]], requires_grad=True)
    old = torch.tensor([[0.5, 0.5, 0.5]])
    returns = torch.tensor([[2.0, 0.0, 0.0]])
    mask = torch.ones(1, 3)
    # t0: v_clip = 0.7; (1-2)^2 = 1 vs (0.7-2)^2 = 1.69 -> 1.69 (clipped larger)
    # t1: v_clip = 0.3; 0 vs 0.09 -> 0.09 (clipped larger)
    # t2: v = old -> 0.25 both.  0.5 * (1.69 + 0.09 + 0.25) / 3 = 0.3383333
    loss, stats = value_loss(values, old, returns, mask, clip=0.2)
    assert loss.item() == pytest.approx(0.5 * 2.03 / 3, abs=1e-6)
    assert stats["critic/vf_clipfrac"].item() == pytest.approx(2 / 3)


def test_kl_penalty_hand_values():
    logp = torch.tensor([math.log(0.5), math.log(0.2)])
    ref = torch.tensor([math.log(0.25), math.log(0.4)])
    ln2 = math.log(2.0)
    # token 0: log r = log(0.25/0.5) = -ln2;  token 1: log r = +ln2   (r = pi_ref / pi)
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), torch.tensor([ln2, -ln2]))
    torch.testing.assert_close(kl_penalty(logp, ref, "k2"), torch.tensor([0.5 * ln2**2] * 2))
    # k3 = (r - 1) - log r: (0.5 - 1) + ln2 = 0.1931472;  (2 - 1) - ln2 = 0.3068528
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), torch.tensor([ln2 - 0.5, 1 - ln2]))
    with pytest.raises(ValueError, match="k1"):
        kl_penalty(logp, ref, "k4")


def test_kl_estimators_are_unbiased_for_kl_policy_to_reference():
    # Samples come from pi = p: E_p[k1] = E_p[k3] = KL(p || q) exactly (not KL(q || p)).
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    exact = 0.3 * math.log(2.5)  # 0.5 ln 2.5 + 0.3 ln 1 + 0.2 ln 0.4 = 0.2748872
    for kind in ("k1", "k3"):
        est = (p * kl_penalty(p.log(), q.log(), kind)).sum().item()
        assert est == pytest.approx(exact, abs=1e-12)


def test_masked_mean_ignores_masked_nan_and_empty_is_zero():
    x = torch.tensor([1.0, 3.0, float("nan")])
    assert masked_mean(x, torch.tensor([1, 1, 0])).item() == 2.0
    assert masked_mean(x, torch.zeros(3)).item() == 0.0
    rows = masked_mean(
        torch.tensor([[1.0, 2.0], [4.0, 8.0]]), torch.tensor([[1, 0], [1, 1]]), dim=1
    )
    torch.testing.assert_close(rows, torch.tensor([1.0, 6.0]))


def test_entropy_from_logits():
    vocab = 7
    assert entropy_from_logits(torch.zeros(vocab)).item() == pytest.approx(math.log(vocab))
    # p = (1/2, 1/4, 1/4): H = 0.5 ln 2 + 0.5 ln 4 = 1.5 ln 2
    h = entropy_from_logits(torch.tensor([0.5, 0.25, 0.25]).log())
    assert h.item() == pytest.approx(1.5 * math.log(2.0), abs=1e-6)
    # Masked tokens (-inf) and huge logits stay finite; a one-hot distribution has entropy 0.
    peaked = torch.tensor([[0.0, float("-inf"), float("-inf")], [1e4, 0.0, -1e4]])
    torch.testing.assert_close(entropy_from_logits(peaked), torch.zeros(2))
    assert entropy_from_logits(torch.zeros(2, 3, 5, dtype=torch.bfloat16)).dtype == torch.float32


def test_logprobs_from_logits_matches_log_softmax_in_chunks():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=gen, requires_grad=True)
    tokens = torch.randint(0, 11, (3, 5), generator=gen)
    reference = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    for chunk in (1, 4, 1024):
        torch.testing.assert_close(
            logprobs_from_logits(logits, tokens, chunk_size=chunk), reference
        )
    logprobs_from_logits(logits, tokens, chunk_size=4).sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert logprobs_from_logits(logits.detach().bfloat16(), tokens).dtype == torch.float32
    with pytest.raises(ValueError, match="leading shape"):
        logprobs_from_logits(logits, tokens[:, :-1])


def test_k3_is_bounded_as_verl_bounds_it():
    # log pi = -95, log pi_ref = -5: log r = 90, exp(90) = 1.2e39 would overflow the loss. The
    # log-ratio is clamped to 20 (e^20 - 1 - 20 = 4.85e8), then the estimate to 10.
    logp = torch.tensor([-95.0, -5.0, -1.0], requires_grad=True)
    ref = torch.tensor([-5.0, -95.0, -1.0])
    kl = kl_penalty(logp, ref, "k3")
    # Token 2: log r = -90 -> clamp -20: (e^-20 - 1) + 20 = 19.0000000021 -> 10. Token 3: 0.
    torch.testing.assert_close(kl, torch.tensor([10.0, 10.0, 0.0]))
    kl.sum().backward()
    assert torch.isfinite(logp.grad).all()
    assert logp.grad.tolist() == [0.0, 0.0, 0.0]  # saturated tokens, and k3' = 0 at r = 1
    # Inside the bounds nothing changes: log r = 2 -> e^2 - 3 = 4.389056.
    two = kl_penalty(torch.tensor([0.0]), torch.tensor([2.0]), "k3")
    assert two.item() == pytest.approx(math.exp(2) - 3, abs=1e-5)
