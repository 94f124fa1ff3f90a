"""Tests of baselines.rl.losses against values worked out by hand (in the comments)."""

import math

import pytest
import torch

from baselines.llm.scoring import entropy_from_logits, logprobs_from_logits
from baselines.rl.losses import (
    LOSS_AGG_MODES,
    agg_loss,
    agg_units,
    kl_penalty,
    masked_mean,
    policy_loss,
    value_loss,
)


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
    # verl's ppo_kl, k1 of KL(old || new): mean(-log r) = -(2 ln 0.7 + 2 ln 1.5 + ln 1.1) / 5
    # = -(-0.7133499 + 0.8109302 + 0.0953102) / 5 = -0.0385781 (k1 can be negative).
    kl = -(2 * math.log(0.7) + 2 * math.log(1.5) + math.log(1.1)) / 5
    assert stats["actor/ppo_kl"].item() == pytest.approx(kl, abs=1e-6)
    # No ratio reaches the dual clip's 3 (t4 has A < 0 but r = 1.5).
    assert stats["actor/pg_clipfrac_lower"].item() == 0.0
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


def test_only_k2_as_a_loss_has_the_reverse_kl_gradient():
    # On a 5-token vocabulary the expectation over y ~ pi is a sum, so the estimator's expected
    # gradient is exact: grad_theta sum_y pi(y) k(log pi_theta(y), log q(y)), with pi(y) the
    # (detached) sampling weight. The true gradient is autograd's of KL(pi || q) itself.
    # By hand: grad k2 = (log pi - log q) grad log pi, whose expectation is grad KL(pi || q)
    # (sum_y pi grad log pi = 0 removes the rest); grad k1 = grad log pi, expectation 0;
    # grad k3 = (1 - q/pi) grad log pi, expectation sum_y (pi - q) grad log pi = grad KL(q || pi).
    theta = torch.tensor([0.3, -1.2, 2.0, 0.0, -0.5], dtype=torch.float64, requires_grad=True)
    q = torch.tensor([0.1, 0.2, 0.3, 0.25, 0.15], dtype=torch.float64)

    def grad(f):
        (g,) = torch.autograd.grad(f(torch.log_softmax(theta, -1)), theta)
        return g

    reverse = grad(lambda lp: (lp.exp() * (lp - q.log())).sum())
    forward = grad(lambda lp: (q * (q.log() - lp)).sum())
    assert reverse.abs().max() > 0.05 and (reverse - forward).abs().max() > 0.05  # they differ

    def expected(kind):
        return grad(lambda lp: (lp.exp().detach() * kl_penalty(lp, q.log(), kind)).sum())

    torch.testing.assert_close(expected("k2"), reverse, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        expected("k1"), torch.zeros(5, dtype=torch.float64), atol=1e-12, rtol=0
    )
    torch.testing.assert_close(expected("k3"), forward, rtol=0, atol=1e-12)
    from baselines.config import AlgorithmConfig

    assert AlgorithmConfig().kl_estimator == "k2"  # the trainer's KL loss uses k2 by default


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


def test_dual_clip_caps_a_negative_advantage_loss_as_verl_does():
    # Issue 42's repro: log-ratio 5, A = -1. r = e^5 = 148.413159.
    # Without the dual clip: max(-A r, -A clip(r, 0.8, 1.28)) = max(148.41, 1.28) = 148.41.
    # With it (verl clip_ratio_c = 3): min(148.41, -A * 3) = 3; the branch is a constant, so the
    # token gets no gradient.
    logprobs = torch.tensor([[5.0]], requires_grad=True)
    old, adv, mask = torch.zeros(1, 1), torch.tensor([[-1.0]]), torch.ones(1, 1)
    loss, stats = policy_loss(logprobs, old, adv, mask)
    assert loss.item() == pytest.approx(3.0)
    assert math.exp(5) == pytest.approx(148.413159, abs=1e-6)  # what the loss was before
    assert stats["actor/pg_clipfrac_lower"].item() == 1.0
    loss.backward()
    assert logprobs.grad.item() == 0.0
    # A positive advantage is not dual-clipped: r = e^5 > 1.28, loss = -A * 1.28.
    pos, pos_stats = policy_loss(torch.tensor([[5.0]]), old, -adv, mask)
    assert pos.item() == pytest.approx(-1.28)
    assert pos_stats["actor/pg_clipfrac_lower"].item() == 0.0
    # Below clip_ratio_c nothing changes: r = 2, A = -1 -> max(2, 1.28) = 2 < 3.
    two, _ = policy_loss(torch.tensor([[math.log(2.0)]]), old, adv, mask)
    assert two.item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        policy_loss(logprobs, old, adv, mask, clip_ratio_c=1.0)


def test_a_log_ratio_of_100_gives_a_finite_loss_and_gradient():
    # exp(100) = 2.7e43 overflows float32 (max 3.4e38) to inf; clamped to 20, r = e^20 = 4.85e8.
    # A = -1: dual clip, loss 3. A = +1: max(-4.85e8, -1.28) = -1.28. Token mean: 0.86. Without
    # the clamp the backward multiplies inf by the zero gradient of the unselected branch: NaN.
    logprobs = torch.tensor([[100.0, 100.0]], requires_grad=True)
    adv = torch.tensor([[-1.0, 1.0]])
    loss, stats = policy_loss(logprobs, torch.zeros(1, 2), adv, torch.ones(1, 2))
    assert loss.item() == pytest.approx((3.0 - 1.28) / 2)
    loss.backward()
    assert torch.isfinite(logprobs.grad).all()
    assert all(torch.isfinite(v).all() for v in stats.values())
    assert stats["actor/ppo_kl"].item() == pytest.approx(-20.0)  # the clamped log-ratio


def test_agg_loss_modes_hand_values():
    # Row 0: losses 1, 2, 3 (3 tokens); row 1: 4 (1 token, the rest masked, a NaN among them);
    # row 2: no sampled token (counts for nothing).
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, float("nan"), 9.0], [7.0, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    # token-mean: (1+2+3+4)/4 = 2.5; seq-mean-token-sum: (6+4)/2 = 5;
    # seq-mean-token-mean: (2+4)/2 = 3; seq-mean-token-sum-norm, horizon 10: (6+4)/(2*10) = 0.5.
    expected = {
        "token-mean": 2.5,
        "seq-mean-token-sum": 5.0,
        "seq-mean-token-mean": 3.0,
        "seq-mean-token-sum-norm": 0.5,
    }
    for mode, value in expected.items():
        assert agg_loss(loss, mask, mode, horizon=10).item() == pytest.approx(value), mode
    assert agg_units(mask, "token-mean").item() == 4
    assert agg_units(mask, "seq-mean-token-mean").item() == 2
    assert agg_loss(loss, torch.zeros(3, 3), "seq-mean-token-mean").item() == 0.0
    with pytest.raises(ValueError, match="horizon"):
        agg_loss(loss, mask, "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="token-mean"):
        agg_loss(loss, mask, "sum")


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batch_split_gives_the_gradient_of_one_batch(mode):
    # The learner's rule (baselines/update.py, Actor.update): each micro-batch's loss times its
    # share of the mini-batch's agg_units, summed. In float64 the split changes only the order
    # of the additions: agreement to 1e-12 (float64 eps 2.2e-16 times a few dozen terms of
    # size <= 10, with margin).
    gen = torch.Generator().manual_seed(0)
    rows, width = 7, 9
    logprobs = (-3 * torch.rand(rows, width, generator=gen, dtype=torch.float64)).requires_grad_()
    old = logprobs.detach() + 0.5 * torch.randn(rows, width, generator=gen, dtype=torch.float64)
    adv = torch.randn(rows, 1, generator=gen, dtype=torch.float64).expand(rows, width)
    lengths = torch.tensor([9, 1, 4, 0, 7, 2, 5])  # row 3: no sampled token
    mask = (torch.arange(width)[None, :] < lengths[:, None]).to(torch.float64)
    kwargs = {"loss_agg_mode": mode, "horizon": 16}

    whole, _ = policy_loss(logprobs, old, adv, mask, **kwargs)
    (g_whole,) = torch.autograd.grad(whole, logprobs)
    total_units = agg_units(mask, mode)
    split = 0
    for part in ([0, 1], [2, 3, 4], [5], [6]):
        idx = torch.tensor(part)
        loss, _ = policy_loss(logprobs[idx], old[idx], adv[idx], mask[idx], **kwargs)
        split = split + loss * (agg_units(mask[idx], mode) / total_units)
    (g_split,) = torch.autograd.grad(split, logprobs)
    assert split.item() == pytest.approx(whole.item(), abs=1e-12)
    torch.testing.assert_close(g_split, g_whole, rtol=0, atol=1e-12)
    assert g_whole.abs().sum() > 0
