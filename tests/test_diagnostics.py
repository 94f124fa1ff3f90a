"""Tests of the MI diagnostics (baselines.collapse) against closed-form ground truth."""

import math

import pytest
import torch
import transformers

from baselines.collapse import ZScoreTracker, mi_metrics, score_matrix, score_matrix_naive


def balanced_index(num_prompts: int, per_prompt: int) -> torch.Tensor:
    return torch.arange(num_prompts).repeat_interleave(per_prompt)


# ---------------------------------------------------------------- (a) z a function of x


@pytest.mark.parametrize("off", [float("-inf"), -1e4])
def test_deterministic_reasoning_reaches_log_k(off):
    # log p(z | x_j) = 0 for the prompt z came from, "impossible" otherwise: I(X; Z) = H(X) = log K.
    num_prompts = 4
    idx = balanced_index(num_prompts, 8)
    loglik = torch.full((32, num_prompts), off)
    loglik[torch.arange(32), idx] = 0.0
    out = mi_metrics(loglik, idx)
    assert out["mi_estimate"] == pytest.approx(math.log(4), abs=1e-9)
    assert out["mi_upper_bound"] == pytest.approx(math.log(4), abs=1e-12)
    assert out["retrieval_accuracy"] == 1.0 and out["retrieval_accuracy@2"] == 1.0
    assert out["retrieval_chance"] == 0.25 and out["retrieval_chance@2"] == 0.5
    assert out["retrieval_above_chance"] == 0.75
    assert out["conditional_entropy_est"] == pytest.approx(0.0, abs=1e-12)  # H(Z|X) = 0
    assert out["reasoning_entropy_est"] == pytest.approx(math.log(4), abs=1e-9)  # H(Z) = log 4
    assert out["mi_zscore"] > 5 and out["mi_pvalue"] < 0.01


# ---------------------------------------------------------------- (b) z independent of x


def test_independent_reasoning_gives_zero_mi_and_chance_retrieval():
    # Every column equal: p(z | x_j) = p(z) for all j. MI = 0 exactly; ties give chance credit.
    num_prompts = 8
    idx = balanced_index(num_prompts, 3)
    row = -torch.rand(24, generator=torch.Generator().manual_seed(0)) * 50
    loglik = row[:, None].expand(24, num_prompts).clone()
    lengths = torch.randint(1, 40, (24,), generator=torch.Generator().manual_seed(1))
    out = mi_metrics(loglik, idx, lengths)
    assert out["mi_estimate"] == pytest.approx(0.0, abs=1e-9)
    assert out["mi_estimate_per_token"] == pytest.approx(0.0, abs=1e-9)
    assert out["retrieval_accuracy"] == pytest.approx(1 / 8)
    assert out["retrieval_accuracy@2"] == pytest.approx(2 / 8)
    assert out["retrieval_accuracy@4"] == pytest.approx(4 / 8)
    assert out["retrieval_above_chance"] == pytest.approx(0.0, abs=1e-12)
    assert out["mi_zscore"] == 0.0 and out["mi_zscore_per_token"] == 0.0
    assert out["conditional_entropy_est"] == pytest.approx(out["reasoning_entropy_est"])


def test_retrieval_tie_credit_hand_rows():
    loglik = torch.tensor([[-1.0, -1.0, -2.0, -1.0], [-0.5, -1.0, -1.0, -3.0]])
    idx = torch.tensor([1, 2])
    out = mi_metrics(loglik, idx)
    # row 0: none higher, 3 tied (itself included): @1 1/3, @2 2/3, @4 1
    # row 1: one higher (-0.5), 2 tied: @1 0, @2 (2 - 1)/2 = 1/2, @4 1
    assert out["retrieval_accuracy"] == pytest.approx((1 / 3 + 0) / 2)
    assert out["retrieval_accuracy@2"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert out["retrieval_accuracy@4"] == pytest.approx(1.0)
    assert out["retrieval_chance@4"] == 1.0


# ---------------------------------------------------------------- (c) known joint, exact MI


def noisy_channel(num_prompts, eps, x, gen):
    """z = x with probability 1 - eps, else uniform over the other K - 1 symbols."""
    flip = torch.rand(x.shape, generator=gen) < eps
    shift = torch.randint(1, num_prompts, x.shape, generator=gen)
    z = torch.where(flip, (x + shift) % num_prompts, x)
    # loglik[m, j] = log p(z_m | x_j) from the true conditionals
    match = z[:, None] == torch.arange(num_prompts)[None, :]
    loglik = torch.where(
        match, torch.tensor(math.log(1 - eps)), torch.tensor(math.log(eps / (num_prompts - 1)))
    ).double()
    return z, loglik


def test_mi_estimate_matches_exact_mi_of_noisy_channel():
    num_prompts, eps, per_prompt = 4, 0.2, 1000
    num_z = num_prompts * per_prompt
    x = balanced_index(num_prompts, per_prompt)
    z, loglik = noisy_channel(num_prompts, eps, x, torch.Generator().manual_seed(0))
    # X uniform, Z uniform by symmetry: I = log K - H(Z|X)
    #   = log 4 + 0.8 ln 0.8 + 0.2 ln(0.2/3) = 1.386294 - 0.178515 - 0.541610 = 0.666169
    exact = math.log(num_prompts) + (1 - eps) * math.log(1 - eps) + eps * math.log(eps / 3)
    # Each term is the pointwise MI: log(K (1-eps)) w.p. 1-eps, log(K eps/(K-1)) w.p. eps, so the
    # mean is unbiased with sd = sqrt(eps (1-eps)) * |difference| = 0.4 * 2.484907 = 0.993963
    # and standard error sd / sqrt(M) = 0.0157 for M = 4000. Allow 4 standard errors.
    sd = math.sqrt(eps * (1 - eps)) * abs(
        math.log(num_prompts * (1 - eps)) - math.log(num_prompts * eps / (num_prompts - 1))
    )
    bound = 4 * sd / math.sqrt(num_z)
    out = mi_metrics(loglik, x)
    assert abs(out["mi_estimate"] - exact) < bound
    assert out["mi_estimate"] == pytest.approx(
        mi_metrics(loglik, x, mixture="uniform")["mi_estimate"]
    )
    # The likelihood argmax is right exactly when z = x (prob 0.8): sd sqrt(0.16 / 4000) = 0.0063.
    assert abs(out["retrieval_accuracy"] - (1 - eps)) < 4 * math.sqrt(eps * (1 - eps) / num_z)
    assert out["retrieval_accuracy"] == pytest.approx(float((z == x).double().mean()))
    assert out["mi_zscore"] > 20
    # Per-token keys are the same statistics on loglik / lengths.
    lengths = torch.randint(1, 30, (num_z,), generator=torch.Generator().manual_seed(2))
    per_token = mi_metrics(loglik, x, lengths)
    direct = mi_metrics(loglik / lengths[:, None], x)
    assert per_token["mi_estimate_per_token"] == pytest.approx(direct["mi_estimate"])
    assert per_token["mi_zscore_per_token"] == pytest.approx(direct["mi_zscore"])


def test_empirical_mixture_with_unequal_prompt_frequencies():
    # X ~ (0.4, 0.3, 0.2, 0.1), same channel. Exact I = H(Z) - H(Z|X), with
    # p(z) = 0.8 p_x(z) + (0.2/3)(1 - p_x(z)). The estimate weights the mixture by the sample's
    # prompt frequencies; besides the sampling error (4 standard errors, from the sample's own sd)
    # that adds an O(K / M) bias, covered by the extra 0.01.
    num_prompts, eps, num_z = 4, 0.2, 4000
    px = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    x = torch.multinomial(px, num_z, replacement=True, generator=gen)
    _, loglik = noisy_channel(num_prompts, eps, x, gen)
    pz = (1 - eps) * px + eps / 3 * (1 - px)
    h_z_given_x = -((1 - eps) * math.log(1 - eps) + eps * math.log(eps / 3))
    exact = float(-(pz * pz.log()).sum()) - h_z_given_x
    out = mi_metrics(loglik, x)
    weights = torch.bincount(x, minlength=4).double() / num_z
    pmi = loglik[torch.arange(num_z), x] - torch.logsumexp(loglik + weights.log(), dim=1)
    assert out["mi_estimate"] == pytest.approx(float(pmi.mean()))
    assert abs(out["mi_estimate"] - exact) < 4 * float(pmi.std()) / math.sqrt(num_z) + 0.01
    assert out["mi_upper_bound"] == pytest.approx(float(-(weights * weights.log()).sum()))
    assert out["mi_upper_bound"] < math.log(4)


def test_zscore_is_seeded_and_inputs_checked():
    x = balanced_index(4, 50)
    _, loglik = noisy_channel(4, 0.6, x, torch.Generator().manual_seed(5))
    a = mi_metrics(loglik, x, seed=1)
    assert a == mi_metrics(loglik, x, seed=1)
    assert a["mi_null_mean"] != mi_metrics(loglik, x, seed=2)["mi_null_mean"]
    with pytest.raises(ValueError, match=r"\[0, K\)"):
        mi_metrics(loglik, x + 1)
    with pytest.raises(ValueError, match="integer"):
        mi_metrics(loglik, x.double())
    with pytest.raises(ValueError, match="lengths must be >= 1"):
        mi_metrics(loglik, x, torch.zeros(200))
    bad = loglik.clone()
    bad[0, x[0]] = float("-inf")
    with pytest.raises(ValueError, match="matched position"):
        mi_metrics(bad, x)


# ---------------------------------------------------------------- the z-score tracker


HEALTHY = {
    "mi_zscore": 10.0,
    "mi_estimate": 1.0,
    "mi_upper_bound": math.log(4),
    "retrieval_accuracy": 0.9,
    "retrieval_chance": 0.25,
    "mi_pvalue": 0.005,
    "num_reasonings": 32.0,
    "num_prompts": 4.0,
}
COLLAPSED = {
    **HEALTHY,
    "mi_zscore": 0.0,
    "mi_estimate": 0.05,
    "mi_pvalue": 0.4,
    "retrieval_accuracy": 0.27,
}


def test_tracker_ema_and_template_collapse_flag():
    tracker = ZScoreTracker(ema_decay=0.5, window=3)
    flags = []
    for metrics, entropy in [
        (HEALTHY, 1.0),
        (HEALTHY, 1.0),
        (HEALTHY, 1.0),
        (COLLAPSED, 1.0),
        (COLLAPSED, 0.95),  # within the 10 % entropy tolerance
        (COLLAPSED, 1.02),
    ]:
        out = tracker.update(metrics, entropy)
        flags.append(out["collapse/template_collapse"])
    # Flag only once the whole window (last 3 evaluations) is near chance with entropy holding.
    assert flags == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    # EMA: 10, 10, 10, then 0.5 * previous: 5, 2.5, 1.25
    assert out["collapse/mi_zscore_ema"] == pytest.approx(1.25)
    assert tracker.template_collapse
    # A checkpoint round trip keeps the EMA and the flag.
    restored = ZScoreTracker(ema_decay=0.5, window=3)
    restored.load_state_dict(tracker.state_dict())
    assert restored.zscore_ema == pytest.approx(1.25) and restored.template_collapse


def test_tracker_no_flag_when_entropy_collapses_too():
    tracker = ZScoreTracker(window=3, entropy_tol=0.1)
    tracker.update(HEALTHY, 1.0)
    for entropy in (1.0, 0.8, 0.6):  # the policy collapses to one output: not template collapse
        out = tracker.update(COLLAPSED, entropy)
    assert out["collapse/template_collapse"] == 0.0
    # A NaN entropy (update skipped) in the window gives no verdict, whatever its position.
    for entropies in ([float("nan"), 1.0, 1.0], [1.0, 1.0, float("nan")]):
        tracker = ZScoreTracker(window=3)
        tracker.update(HEALTHY, 1.0)
        for entropy in entropies:
            out = tracker.update(COLLAPSED, entropy)
        assert out["collapse/template_collapse"] == 0.0
    with pytest.raises(ValueError, match="window"):
        ZScoreTracker(window=0)


# ---------------------------------------------------------------- the scorer


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.1,  # larger than default: prompts change log p(z | x) visibly
    )
    return transformers.LlamaForCausalLM(config).float().eval()


def random_ids(lengths, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 512, (n,), generator=gen).tolist() for n in lengths]


def test_naive_scorer_is_plain_teacher_forcing(tiny_model):
    prompt, reasoning = random_ids([6], 0)[0], random_ids([5], 1)[0]
    ids = torch.tensor([prompt + reasoning])
    with torch.no_grad():
        logp = torch.log_softmax(tiny_model(input_ids=ids).logits[0, :-1], dim=-1)
    expected = logp[torch.arange(5, 10), torch.tensor(reasoning)].sum()
    got = score_matrix_naive(tiny_model, [prompt], [reasoning])
    assert got[0, 0].item() == pytest.approx(expected.item(), abs=1e-5)


def test_kv_cache_scorer_matches_naive(tiny_model):
    prompts = random_ids([5, 9, 1, 13], 2)
    reasonings = random_ids([1, 4, 7, 0, 3, 12, 7], 3)
    naive = score_matrix_naive(tiny_model, prompts, reasonings, batch_size=5)
    for batch_size in (1, 3, 16):
        fast = score_matrix(tiny_model, prompts, reasonings, batch_size=batch_size)
        assert fast.shape == (7, 4) and fast.dtype == torch.float32
        torch.testing.assert_close(fast, naive, atol=1e-4, rtol=0)
    assert torch.equal(naive[3], torch.zeros(4))  # the empty reasoning scores log 1
    # The prompt matters (so the comparison above is not trivially equal columns).
    assert (naive[5] - naive[5, 0]).abs().max() > 1e-2


def test_scorer_restores_training_mode_and_checks_input(tiny_model):
    tiny_model.train()
    try:
        score_matrix(tiny_model, [[1, 2]], [[3]])
        assert tiny_model.training
    finally:
        tiny_model.eval()
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        score_matrix(tiny_model, [[1], []], [[3]])
    with pytest.raises(ValueError, match="batch_size"):
        score_matrix(tiny_model, [[1]], [[3]], batch_size=0)
