"""Tests of SNR-Aware Filtering (baselines.filtering) on a hand table of group rewards.

Hand table (G = 6 groups, N = 4 episodes). Unbiased std / variance of each group:
    g0 [1,0,1,0]  std sqrt(1/3) = 0.57735   var 1/3
    g1 [1,1,1,1]  zero spread
    g2 [0,0,0,1]  std 0.5                   var 0.25
    g3 [2,0,2,0]  std sqrt(4/3) = 1.15470   var 4/3
    g4 [0,0,0,0]  zero spread
    g5 [1,0,1,0]  std 0.57735 (ties g0)     var 1/3
Ranking (score desc, then index): g3, g0, g5, g2, g1, g4.
Linear std mass, total 2.80940: shares 0.41101, 0.20551, 0.20551, 0.17797, 0, 0;
    cumulative 0.41101, 0.61652, 0.82203, 1.0, 1.0, 1.0.
Linear variance mass, total 2.25: shares 0.59259, 0.14815, 0.14815, 0.11111;
    cumulative 0.59259, 0.74074, 0.88889, 1.0.
Softmax std mass (T = 1): exp(s) = 3.17313, 1.78131, 1.78131, 1.64872, 1, 1 (sum 10.38447);
    cumulative 0.30557, 0.47711, 0.64865, 0.80742, 0.90372, 1.0.
"""

import math

import pytest
import torch

from baselines.filtering import FilterConfig, group_scores, snr_filter

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


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.4, [3]),  # 0.41101 >= 0.4 after g3
        (0.5, [0, 3]),  # needs g0: 0.61652
        (0.8, [0, 3, 5]),  # 0.82203
        (0.9, [0, 2, 3, 5]),  # needs g2: 1.0
        (1.0, [0, 2, 3, 5]),  # zero-spread groups carry no linear mass and are never reached
    ],
)
def test_top_p_linear_std(p, expected):
    assert kept(strategy="top_p", p=p) == expected


def test_top_p_linear_variance():
    assert kept(strategy="top_p", metric="variance", p=0.5) == [3]  # 0.59259
    assert kept(strategy="top_p", metric="variance", p=0.7) == [0, 3]  # 0.74074
    assert kept(strategy="top_p", metric="variance", p=0.75) == [0, 3, 5]  # 0.88889


def test_top_p_softmax_and_include_zero():
    assert kept(strategy="top_p", mass_mode="softmax", p=0.5) == [0, 3, 5]  # 0.64865
    # p = 0.85 reaches g1 (0.90372): {3, 0, 5, 2, 1}; g1 has zero spread and is dropped ...
    assert kept(strategy="top_p", mass_mode="softmax", p=0.85) == [0, 2, 3, 5]
    # ... unless include_zero.
    assert kept(strategy="top_p", mass_mode="softmax", p=0.85, include_zero=True) == [0, 1, 2, 3, 5]
    # A tiny temperature puts all mass on the top group.
    assert kept(strategy="top_p", mass_mode="softmax", temperature=0.01, p=0.99) == [3]


def test_top_k_fraction_ceil_and_tie_breaking():
    assert kept(strategy="top_k", p=0.5) == [0, 3, 5]  # ceil(3.0) = 3: g3, g0, g5
    assert kept(strategy="top_k", p=0.3) == [
        0,
        3,
    ]  # ceil(1.8) = 2: g3, then g0 wins the tie with g5
    assert kept(strategy="top_k", p=0.05) == [3]  # ceil(0.3) = 1
    assert kept(strategy="top_k", p=1.0) == [0, 2, 3, 5]
    assert kept(strategy="top_k", p=1.0, include_zero=True) == [0, 1, 2, 3, 4, 5]
    # 0.3 * 10 is 3.0000000000000004 in floating point: still 3 groups, not 4.
    ten = torch.arange(10, dtype=torch.float64)[:, None] * torch.tensor([[0.0, 1.0]])
    assert snr_filter(ten, FilterConfig(strategy="top_k", p=0.3)).kept.tolist() == [7, 8, 9]


def test_top_k_abs():
    assert kept(strategy="top_k_abs", k=1) == [3]
    assert kept(strategy="top_k_abs", k=2) == [0, 3]  # g0 before g5 (equal score, lower index)
    assert kept(strategy="top_k_abs", k=100) == [0, 2, 3, 5]
    assert kept(strategy="top_k_abs", k=5, include_zero=True) == [0, 1, 2, 3, 5]  # g1 before g4


def test_min_p():
    # threshold p * 1.15470: 0.45 -> 0.51962 (g3, g0, g5); 0.4 -> 0.46188 (g2's 0.5 too)
    assert kept(strategy="min_p", p=0.45) == [0, 3, 5]
    assert kept(strategy="min_p", p=0.4) == [0, 2, 3, 5]
    assert kept(strategy="min_p", p=1.0) == [3]


def test_none_keeps_everything():
    assert kept(strategy="none") == [0, 1, 2, 3, 4, 5]


def test_result_mask_and_stats():
    result = snr_filter(REWARDS, FilterConfig(strategy="top_p", p=0.5))
    assert result.mask.tolist() == [True, False, False, True, False, False]
    s = math.sqrt(1 / 3)
    assert result.stats["filter/num_groups"] == 6
    assert result.stats["filter/num_kept"] == 2
    assert result.stats["filter/kept_fraction"] == pytest.approx(2 / 6)
    assert result.stats["filter/num_zero_spread"] == 2
    assert result.stats["filter/score_mean_kept"] == pytest.approx((2 * s + s) / 2)
    assert result.stats["filter/score_mean_dropped"] == pytest.approx((0 + 0.5 + 0 + s) / 4)


def test_all_zero_spread():
    flat = torch.ones(6, 4)
    result = snr_filter(flat, FilterConfig(strategy="top_p", p=0.9))
    assert result.kept.tolist() == [] and not result.mask.any()
    assert math.isnan(result.stats["filter/score_mean_kept"])
    # With include_zero the linear mass falls back to uniform: p = 0.5 keeps 3 of 6.
    result = snr_filter(flat, FilterConfig(strategy="top_p", p=0.5, include_zero=True))
    assert result.kept.tolist() == [0, 1, 2]


def test_ragged_groups_from_lists():
    # std: [1, 0] -> 0.70711; [3] -> one episode, zero spread; [0, 0, 1] -> sqrt(1/3) = 0.57735
    result = snr_filter(
        [[1.0, 0.0], [3.0], [0.0, 0.0, 1.0]], FilterConfig(strategy="top_k_abs", k=3)
    )
    assert result.kept.tolist() == [0, 2]
    torch.testing.assert_close(
        result.scores, torch.tensor([math.sqrt(0.5), 0.0, math.sqrt(1 / 3)], dtype=torch.float64)
    )


def test_default_config_is_top_p_09():
    assert snr_filter(REWARDS).kept.tolist() == [0, 2, 3, 5]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"strategy": "top_q"}, "strategy"),
        ({"metric": "range"}, "metric"),
        ({"p": 0.0}, "p"),
        ({"p": 1.5}, "p"),
        ({"k": 0}, "k"),
        ({"mass_mode": "exp"}, "mass_mode"),
        ({"temperature": 0.0}, "temperature"),
        ({"include_zero": "yes"}, "include_zero"),
    ],
)
def test_config_validation_names_key(kwargs, key):
    with pytest.raises(ValueError, match=rf"^{key} must"):
        FilterConfig(**kwargs)


def test_bad_rewards():
    with pytest.raises(ValueError, match="no groups"):
        snr_filter([])
    with pytest.raises(ValueError, match="group 1 has no rewards"):
        snr_filter([[1.0, 0.0], []])
