"""Tests of SNR-Aware Filtering (baselines.rl.filtering) against RAGEN's selection rule, by hand.

The rule is RAGEN's ``_select_top_groups`` (mll-lab-nu/RAGEN ragen/trainer/rollout_filter.py:68-185):
zero-score groups leave the candidates first unless include_zero; top_p with p >= 1 keeps every
candidate; softmax top_p keeps searchsorted(cumsum, p) + 1 groups; linear top_p adds scores until
p * sum - 0.01 is reached (and keeps nothing if it never is); top_k keeps int(p * G) (at least 1).

Hand table (G = 6 groups, N = 4 episodes). Unbiased std / variance / mean of each group:
    g0 [1,0,1,0]  std sqrt(1/3) = 0.57735   var 1/3   mean 0.5
    g1 [1,1,1,1]  zero spread                         mean 1
    g2 [0,0,0,1]  std 0.5                   var 0.25  mean 0.25
    g3 [2,0,2,0]  std sqrt(4/3) = 1.15470   var 4/3   mean 1
    g4 [0,0,0,0]  zero spread                         mean 0
    g5 [1,0,1,0]  std 0.57735 (ties g0)     var 1/3   mean 0.5
Ranking by std (desc, ties by index): g3, g0, g5, g2, g1, g4.  Sum of std S = 2.80940.
Linear top_p: threshold = p * S - 0.01; running sums 1.15470, 1.73205, 2.30940, 2.80940.
Softmax std, all six: exp(s) = 3.17313, 1.78131, 1.78131, 1.64872, 1, 1 (sum 10.38447);
    sorted cumulative 0.30557, 0.47711, 0.64865, 0.80742, 0.90372, 1.0.
Softmax std, zero groups removed (g3, g0, g5, g2): sum 8.38447; cumulative 0.37845, 0.59090,
    0.80336, 1.0.
Softmax of -std (smallest), all six: exp(-s) = 1 (g1), 1 (g4), 0.60653 (g2), 0.56137 (g0, g5),
    0.31515 (g3), sum 4.04442; cumulative 0.24725, 0.49450, 0.64447, ...
"""

import math

import pytest
import torch

from baselines.rl.filtering import FilterConfig, group_scores, snr_filter

REWARDS = torch.tensor(
    [
        [1.0, 0.0, 1.0, 0.0],
        [1.0, 1.0, 1.0, 1.0],
        [0.0, 0.0, 0.0, 1.0],
        [2.0, 0.0, 2.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
        [1.0, 0.0, 1.0, 0.0],
    ]
)
ALL = [0, 1, 2, 3, 4, 5]
NONZERO = [0, 2, 3, 5]


def kept(**kwargs) -> list[int]:
    return snr_filter(REWARDS, FilterConfig(**kwargs)).kept.tolist()


def test_group_scores_hand_values():
    scores, zero = group_scores(REWARDS, "std")
    s = math.sqrt(1 / 3)
    torch.testing.assert_close(
        scores, torch.tensor([s, 0.0, 0.5, 2 * s, 0.0, s], dtype=torch.float64)
    )
    assert zero.tolist() == [False, True, False, False, True, False]
    var, _ = group_scores(REWARDS, "variance")
    torch.testing.assert_close(
        var, torch.tensor([1 / 3, 0.0, 0.25, 4 / 3, 0.0, 1 / 3], dtype=torch.float64)
    )
    mean, _ = group_scores(REWARDS, "reward_mean")
    assert mean.tolist() == [0.5, 1.0, 0.25, 1.0, 0.0, 0.5]
    total, _ = group_scores(REWARDS, "reward_sum")
    assert total.tolist() == [2.0, 4.0, 1.0, 4.0, 0.0, 2.0]


# --- p = 1 is RAGEN's no-filter baseline (rollout_filter.py:87-88) ----------------------------


@pytest.mark.parametrize("mass_mode", ["linear", "softmax"])
def test_top_p_one_keeps_every_group(mass_mode):
    assert kept(strategy="top_p", p=1.0, mass_mode=mass_mode, include_zero=True) == ALL
    # include_zero=False removes the zero-spread groups first, then keeps every candidate.
    assert kept(strategy="top_p", p=1.0, mass_mode=mass_mode, include_zero=False) == NONZERO
    assert kept(strategy="none") == ALL


# --- linear top_p ------------------------------------------------------------------------------


@pytest.mark.parametrize("include_zero", [True, False])
@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.4, [3]),  # threshold 1.11376: g3's 1.15470 reaches it
        (0.5, [0, 3]),  # threshold 1.39470: needs g0 (1.73205)
        (0.8, [0, 3, 5]),  # threshold 2.23752: 2.30940
        # p * S = 2.31776 is above 2.30940, but RAGEN's epsilon lowers it to 2.30776: 3 groups.
        (0.825, [0, 3, 5]),
        (0.9, NONZERO),  # threshold 2.51846: needs g2 (2.80940)
    ],
)
def test_top_p_linear(p, expected, include_zero):
    # Zero-score groups carry no linear mass: include_zero does not change the result here.
    assert kept(strategy="top_p", mass_mode="linear", p=p, include_zero=include_zero) == expected


def test_top_p_linear_epsilon_is_configurable():
    # Without the epsilon, p = 0.825 needs g2 too (2.31776 > 2.30940).
    assert kept(strategy="top_p", mass_mode="linear", p=0.825, selection_eps=0.0) == NONZERO


def test_top_p_linear_variance():
    # Variances 4/3, 1/3, 1/3, 0.25 (sum 2.25); p = 0.5: threshold 1.115 -> g3 alone.
    assert kept(strategy="top_p", mass_mode="linear", metric="variance", p=0.5) == [3]
    # p = 0.7: threshold 1.565 -> 1.33333 + 0.33333 = 1.66667 -> g3, g0.
    assert kept(strategy="top_p", mass_mode="linear", metric="variance", p=0.7) == [0, 3]


def test_top_p_linear_smallest():
    # Ascending with zeros: the first score is 0, the loop stops at once (score <= 0) with a
    # running sum 0 below the threshold 1.3947: RAGEN keeps nothing.
    assert kept(strategy="top_p", mass_mode="linear", keep="smallest", p=0.5) == []
    # Zeros removed: ascending 0.5 (g2), 0.57735 (g0), 0.57735 (g5): 1.65470 >= 1.3947.
    got = kept(strategy="top_p", mass_mode="linear", keep="smallest", p=0.5, include_zero=False)
    assert got == [0, 2, 5]


def test_top_p_linear_all_zero_keeps_nothing():
    flat = torch.ones(6, 4)
    for include_zero in (True, False):
        cfg = FilterConfig(strategy="top_p", mass_mode="linear", p=0.9, include_zero=include_zero)
        result = snr_filter(flat, cfg)
        assert result.kept.tolist() == [] and not result.mask.any()
        assert math.isnan(result.stats["filter/score_mean_kept"])


# --- softmax top_p (the main table's mode) ------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "include_zero", "expected"),
    [
        (0.9, True, [0, 1, 2, 3, 5]),  # cumulative 0.90372 at the 5th: g3, g0, g5, g2, g1
        (0.5, True, [0, 3, 5]),  # 0.64865 at the 3rd
        (0.3, True, [3]),  # 0.30557 >= 0.3 at the 1st
        (0.9, False, NONZERO),  # 1.0 at the 4th candidate
        (0.8, False, [0, 3, 5]),  # 0.80336 at the 3rd
        (0.35, False, [3]),  # 0.37845 at the 1st
    ],
)
def test_top_p_softmax(p, include_zero, expected):
    assert kept(strategy="top_p", mass_mode="softmax", p=p, include_zero=include_zero) == expected


def test_top_p_softmax_smallest_and_temperature():
    # softmax(-s): g1, g4, g2 reach 0.64447 >= 0.5.
    assert kept(strategy="top_p", mass_mode="softmax", keep="smallest", p=0.5) == [1, 2, 4]
    # A tiny temperature (ours; RAGEN's is 1) puts all mass on the top group.
    assert kept(strategy="top_p", mass_mode="softmax", temperature=0.01, p=0.99) == [3]


def test_default_is_main_table_softmax_top_p_09_with_zero():
    cfg = FilterConfig()
    assert (cfg.strategy, cfg.p, cfg.mass_mode, cfg.include_zero, cfg.metric, cfg.keep) == (
        "top_p",
        0.9,
        "softmax",
        True,
        "std",
        "largest",
    )
    assert snr_filter(REWARDS).kept.tolist() == [0, 1, 2, 3, 5]


# --- top_k, top_k_abs, min_p ------------------------------------------------------------------


def test_top_k_truncates_like_ragen():
    assert kept(strategy="top_k", p=0.5) == [0, 3, 5]  # int(3.0) = 3: g3, g0, g5
    assert kept(strategy="top_k", p=0.3) == [3]  # int(1.8) = 1 (not ceil = 2)
    assert kept(strategy="top_k", p=0.05) == [3]  # int(0.3) = 0, at least 1
    assert kept(strategy="top_k", p=1.0) == ALL
    assert kept(strategy="top_k", p=1.0, include_zero=False) == NONZERO  # min(6, 4)
    assert kept(strategy="top_k", p=0.5, keep="smallest") == [1, 2, 4]  # g1, g4, g2
    # 0.29 * 100 is 28.999999999999996 in floating point: int gives 28 groups, as in RAGEN.
    hundred = torch.arange(100, dtype=torch.float64)[:, None] * torch.tensor([[0.0, 1.0]])
    got = snr_filter(hundred, FilterConfig(strategy="top_k", p=0.29)).kept.tolist()
    assert got == list(range(72, 100))


def test_top_k_abs():
    assert kept(strategy="top_k_abs", k=1) == [3]
    assert kept(strategy="top_k_abs", k=2) == [0, 3]  # g0 before g5 (equal score, lower index)
    assert kept(strategy="top_k_abs", k=100) == ALL
    assert kept(strategy="top_k_abs", k=100, include_zero=False) == NONZERO
    assert kept(strategy="top_k_abs", k=5) == [0, 1, 2, 3, 5]  # g1 before g4


def test_min_p():
    # largest: threshold p * 1.15470 - 1e-10: 0.45 -> 0.51962 (g3, g0, g5); 0.4 -> 0.46188 (+ g2)
    assert kept(strategy="min_p", p=0.45) == [0, 3, 5]
    assert kept(strategy="min_p", p=0.4) == [0, 2, 3, 5]
    assert kept(strategy="min_p", p=1.0) == [3]
    # smallest: min / p + 1e-10; with zeros the min is 0: only the zero groups.
    assert kept(strategy="min_p", keep="smallest", p=0.5) == [1, 4]
    # without them the min is 0.5: keep <= 1.0 -> g0, g2, g5.
    assert kept(strategy="min_p", keep="smallest", p=0.5, include_zero=False) == [0, 2, 5]


# --- RAGEN's ablation scores --------------------------------------------------------------------

ENTROPIES = torch.tensor(
    [
        [1.0, 1.0, 1.0, 1.0],  # mean 1, std 0
        [0.5, 1.5, 0.5, 1.5],  # mean 1, std sqrt(4 * 0.25 / 3) = 0.57735
        [2.0, 2.0, 2.0, 2.0],  # mean 2, std 0
        [0.0, 0.0, 0.0, 0.0],  # mean 0, std 0
        [1.0, 2.0, 3.0, 4.0],  # mean 2.5, std sqrt(5/3) = 1.29099
        [0.2, 0.2, 0.2, 0.2],  # mean 0.2, std 0
    ]
)
LENGTHS = torch.tensor([[10, 20, 30, 40], [5, 5, 5, 5], [1, 1, 1, 1]] * 2, dtype=torch.float64)


def test_reward_mean_and_sum_scores():
    assert kept(strategy="top_k_abs", k=2, metric="reward_mean") == [1, 3]  # both mean 1
    assert kept(strategy="top_k_abs", k=2, metric="reward") == [1, 3]  # RAGEN's name
    assert kept(strategy="top_k_abs", k=1, metric="reward_sum", keep="smallest") == [4]
    # g4's sum is 0: without zero-score groups the smallest is g2 (sum 1).
    got = kept(strategy="top_k_abs", k=1, metric="reward_sum", keep="smallest", include_zero=False)
    assert got == [2]


def test_entropy_scores():
    scores, _ = group_scores(REWARDS, "entropy", entropies=ENTROPIES)
    torch.testing.assert_close(scores, torch.tensor([1.0, 1.0, 2.0, 0.0, 2.5, 0.2]).double())
    scores, _ = group_scores(REWARDS, "entropy_variance", entropies=ENTROPIES)
    torch.testing.assert_close(
        scores, torch.tensor([0.0, math.sqrt(1 / 3), 0.0, 0.0, math.sqrt(5 / 3), 0.0]).double()
    )
    cfg = FilterConfig(strategy="top_k_abs", k=2, metric="entropy")
    assert snr_filter(REWARDS, cfg, entropies=ENTROPIES).kept.tolist() == [2, 4]
    cfg = FilterConfig(strategy="top_p", p=1.0, metric="entropy_std", include_zero=False)
    assert snr_filter(REWARDS, cfg, entropies=ENTROPIES).kept.tolist() == [1, 4]


def test_length_score_keep_smallest():
    # Mean lengths 25, 5, 1, 25, 5, 1: the two shortest groups are g2 and g5.
    cfg = FilterConfig(strategy="top_k_abs", k=2, metric="length", keep="smallest")
    assert snr_filter(REWARDS, cfg, lengths=LENGTHS).kept.tolist() == [2, 5]


def test_missing_per_episode_input_is_named():
    with pytest.raises(ValueError, match="needs entropies"):
        snr_filter(REWARDS, FilterConfig(metric="entropy"))
    with pytest.raises(ValueError, match="needs lengths"):
        snr_filter(REWARDS, FilterConfig(metric="length"))
    with pytest.raises(ValueError, match="group sizes must match"):
        snr_filter(REWARDS, FilterConfig(metric="length"), lengths=[[1.0]] * 6)


def test_ragen_metric_aliases_are_stored_canonically():
    assert FilterConfig(metric="reward_variance").metric == "std"
    assert FilterConfig(metric="reward_std").metric == "std"
    assert FilterConfig(metric="entropy_variance").metric == "entropy_std"
    assert FilterConfig(metric="entropy_std").needs == "entropies"


# --- result, stats, inputs ------------------------------------------------------------------


def test_result_mask_and_stats():
    result = snr_filter(REWARDS, FilterConfig(strategy="top_p", mass_mode="linear", p=0.5))
    assert result.mask.tolist() == [True, False, False, True, False, False]
    s = math.sqrt(1 / 3)
    assert result.stats["filter/num_groups"] == 6
    assert result.stats["filter/num_kept"] == 2
    assert result.stats["filter/kept_fraction"] == pytest.approx(2 / 6)
    assert result.stats["filter/num_zero_spread"] == 2
    assert result.stats["filter/num_zero_score"] == 2
    assert result.stats["filter/score_mean_kept"] == pytest.approx((2 * s + s) / 2)
    assert result.stats["filter/score_mean_dropped"] == pytest.approx((0 + 0.5 + 0 + s) / 4)


def test_ragged_groups_from_lists():
    # std: [1, 0] -> 0.70711; [3] -> one episode, score 0; [0, 0, 1] -> sqrt(1/3) = 0.57735
    result = snr_filter(
        [[1.0, 0.0], [3.0], [0.0, 0.0, 1.0]], FilterConfig(strategy="top_k_abs", k=3)
    )
    assert result.kept.tolist() == [0, 1, 2]
    torch.testing.assert_close(
        result.scores, torch.tensor([math.sqrt(0.5), 0.0, math.sqrt(1 / 3)], dtype=torch.float64)
    )
    cfg = FilterConfig(strategy="top_k_abs", k=3, include_zero=False)
    assert snr_filter([[1.0, 0.0], [3.0], [0.0, 0.0, 1.0]], cfg).kept.tolist() == [0, 2]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"strategy": "top_q"}, "strategy"),
        ({"metric": "range"}, "metric"),
        ({"keep": "biggest"}, "keep"),
        ({"p": 0.0}, "p"),
        ({"p": 1.5}, "p"),
        ({"k": 0}, "k"),
        ({"mass_mode": "exp"}, "mass_mode"),
        ({"temperature": 0.0}, "temperature"),
        ({"selection_eps": -0.1}, "selection_eps"),
        ({"include_zero": "yes"}, "include_zero"),
    ],
)
def test_config_validation_names_key(kwargs, key):
    with pytest.raises(ValueError, match=rf"^{key} must"):
        FilterConfig(**kwargs)


def test_bad_rewards():
    with pytest.raises(ValueError, match="no groups"):
        snr_filter([])
    with pytest.raises(ValueError, match="group 1 of rewards is empty"):
        snr_filter([[1.0, 0.0], []])
    with pytest.raises(ValueError, match="NaN or inf"):
        snr_filter([[1.0, float("nan")]])


def test_min_p_smallest_keeps_the_minimum_at_p_one():
    # RAGEN's float32 min / (1 + 1e-10) is min itself: the smallest group is always kept.
    got = snr_filter(
        [[0.0, 2.0], [0.0, 3.0]], FilterConfig(strategy="min_p", keep="smallest", p=1.0)
    )
    assert got.kept.tolist() == [0]
