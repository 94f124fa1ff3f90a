"""The study's statistics (baselines/studies/stats.py) against published tables, hand
arithmetic and seeded Monte Carlo (an independent implementation of each power formula)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.studies.stats import (
    VOID,
    below_effect_paired,
    cluster_bootstrap,
    correlation_power,
    dependent_correlations_power,
    dependent_correlations_test,
    holm,
    paired_t,
    paired_t_power,
    spearman,
    verdict,
)


def test_paired_t_by_hand() -> None:
    # diffs 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.464 on 2 df; t_0.975(2) = 4.303.
    out = paired_t([1.0, 2.0, 3.0])
    assert (out["mean"], out["sd"]) == pytest.approx((2.0, 1.0))
    assert (out["low"], out["high"]) == pytest.approx(
        (2 - 4.3027 / 3**0.5, 2 + 4.3027 / 3**0.5), abs=1e-4
    )
    assert out["p"] == pytest.approx(0.0742, abs=1e-4)
    assert math.isnan(paired_t([1.0])["mean"])


def test_paired_t_power_matches_gpower_and_monte_carlo() -> None:
    # G*Power, "means: difference from constant", d = 0.5, two-sided 0.05: n = 34 gives 0.8078.
    assert paired_t_power(0.5, 1.0, 34) == pytest.approx(0.8078, abs=5e-4)
    # Monte Carlo: 20,000 seeded samples of 12 normal differences with mean 0.3, sd 0.4.
    rng = np.random.default_rng(0)
    from scipy import stats

    draws = rng.normal(0.3, 0.4, size=(20_000, 12))
    rejected = np.mean(stats.ttest_1samp(draws, 0.0, axis=1).pvalue < 0.05)
    assert paired_t_power(0.3, 0.4, 12) == pytest.approx(rejected, abs=0.01)
    with pytest.raises(ValueError, match="sd > 0"):
        paired_t_power(0.3, 0.0, 12)
    # One-sided ("greater"): G*Power, d = 0.5, one-tailed 0.05, n = 27 gives 0.8118; and the same
    # 20,000 samples, rejected by scipy's one-sided test. The lower tail is not power here.
    assert paired_t_power(0.5, 1.0, 27, alternative="greater") == pytest.approx(0.8118, abs=5e-4)
    greater = stats.ttest_1samp(draws, 0.0, axis=1, alternative="greater").pvalue < 0.05
    assert paired_t_power(0.3, 0.4, 12, alternative="greater") == pytest.approx(
        np.mean(greater), abs=0.01
    )
    assert paired_t_power(-0.1, 0.4, 12, alternative="greater") < 0.05
    with pytest.raises(ValueError, match="alternative"):
        paired_t_power(0.3, 0.4, 12, alternative="less")


def test_correlation_power_matches_cohens_table() -> None:
    # Cohen (1988), Table 3.4.1: r = 0.30 at two-sided 0.05 needs n = 85 for power 0.80
    # (Pearson, variance 1): sqrt(82) * atanh(0.3) = 2.803, Phi(2.803 - 1.960) = 0.800.
    assert correlation_power(0.3, 85, variance=1.0) == pytest.approx(0.800, abs=0.005)
    # Spearman's variance 1.06 costs power: sqrt(82 / 1.06) * 0.3095 = 2.722 -> Phi(0.762).
    assert correlation_power(0.3, 85) == pytest.approx(0.777, abs=0.003)


def test_dependent_correlations_by_hand_and_by_simulation() -> None:
    # r1 = 0.39, r2 = -0.14 (the paper's MI-ZScore and entropy Spearman figures), r12 = 0, n = 150,
    # Pearson variance. Sign normalisation: |r2| = 0.14, r12 stays 0. mean r^2 = 0.08585,
    # f = 1 / (2 * 0.91415) = 0.54696, h = (1 - 0.54696 * 0.08585) / 0.91415 = 1.04256,
    # z = (atanh 0.39 - atanh 0.14) / sqrt(2 * 1.04256 / 147) = 0.27087 / 0.11910 = 2.2743.
    out = dependent_correlations_test(0.39, -0.14, 0.0, 150, variance=1.0)
    assert out["z"] == pytest.approx(2.2743, abs=2e-3)
    assert out["p"] == pytest.approx(0.01148, abs=3e-4)
    # Power at one-sided 0.05 by simulation: trivariate normal, Pearson r, the test applied to
    # each sample as the study applies it (|r1| against |r2|). Correlations far from 0, so the
    # sample r2 keeps its sign (the formula does not model |r| folding over 0; see its docstring).
    rng = np.random.default_rng(1)
    cov = np.array([[1.0, 0.3, 0.7], [0.3, 1.0, -0.45], [0.7, -0.45, 1.0]])
    reps = 4000
    hits = 0
    for _ in range(reps):
        x = rng.multivariate_normal(np.zeros(3), cov, size=40)
        c = np.corrcoef(x.T)
        z = dependent_correlations_test(c[0, 2], c[1, 2], c[0, 1], 40, variance=1.0)["z"]
        hits += z > 1.6449
    expected = dependent_correlations_power(0.7, -0.45, 0.3, 40, variance=1.0)
    assert 0.3 < expected < 0.9 and expected == pytest.approx(hits / reps, abs=0.02)


def test_signed_dependent_correlations_by_hand_and_by_simulation() -> None:
    # Claim (c)'s signed form: r2 = -0.14 is not negated, so the numerator is
    # atanh 0.39 - atanh(-0.14) = 0.41180 + 0.14093 = 0.55273; the divisor is the magnitude
    # form's (mean r^2, f and h use squares; r12 = 0): 0.11910, so z = 4.6410.
    out = dependent_correlations_test(0.39, -0.14, 0.0, 150, variance=1.0, signed=True)
    assert out["z"] == pytest.approx(4.6410, abs=2e-3)
    assert out["p"] == pytest.approx(1.73e-6, rel=0.05)
    # r2 near 0, where the magnitude form folds: the signed power is close to a simulation's
    # and conservative (0.893 vs 0.917 simulated at n = 60; 0.635 vs 0.667 at n = 30).
    rng = np.random.default_rng(2)
    cov = np.array([[1.0, 0.0, 0.39], [0.0, 1.0, -0.14], [0.39, -0.14, 1.0]])
    reps, n, hits = 4000, 60, 0
    for _ in range(reps):
        c = np.corrcoef(rng.multivariate_normal(np.zeros(3), cov, size=n).T)
        z = dependent_correlations_test(c[0, 2], c[1, 2], c[0, 1], n, variance=1.0, signed=True)
        hits += z["z"] > 1.6449
    expected = dependent_correlations_power(0.39, -0.14, 0.0, n, variance=1.0, signed=True)
    assert 0.8 < expected < 0.95 and expected == pytest.approx(hits / reps, abs=0.04)
    assert expected <= hits / reps + 0.01  # never claims more power than the design has


def test_spearman_holm_verdict_and_cluster_bootstrap() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([0.5, math.nan]) == [0.5, math.nan] or math.isnan(holm([0.5, math.nan])[1])
    assert verdict(True, False) == "reproduced"
    assert verdict(False, True) == "not reproduced"
    assert verdict(False, False) == "inconclusive"
    assert verdict(True, False, "B-v0/x at floor") == verdict(False, True, "x") == VOID
    with pytest.raises(TypeError, match="power no longer decides"):
        verdict(False, 0.85)  # the old signature (significant, power) is refused
    # Three seeds whose runs carry values 1, 2, 3: the mean over resampled seeds lies in [1, 3]
    # and, with 3 clusters, only 10 distinct resample means exist (1, 4/3, ..., 3).
    values = {"a": [1.0, 1.0], "b": [2.0, 2.0], "c": [3.0, 3.0]}
    low, high = cluster_bootstrap(
        lambda picked: float(np.mean([v for s in picked for v in values[s]])),
        ["a", "a", "b", "b", "c", "c"],
        n_resamples=999,
    )
    assert 1.0 <= low <= 2.0 <= high <= 3.0 and low < high
    assert cluster_bootstrap(lambda picked: 0.0, ["a", "a"]) == (
        pytest.approx(math.nan, nan_ok=True),
        pytest.approx(math.nan, nan_ok=True),
    )


def test_b_as_committed_is_inconclusive_not_not_reproduced() -> None:
    """Issue 44 (b), by hand: 15 pairs, mean +0.048, observed paired sd 0.273, the paper's gain
    +0.10. The 95 % t interval: t_0.975(14) = 2.144787, half-width 2.144787 x 0.273 / sqrt(15)
    = 0.151184, so [-0.103, +0.199]: it holds +0.10, so the data do not exclude the paper's
    effect. The one-sided test of "gain >= 0.10": t = (0.048 - 0.10) / (0.273 / sqrt(15)) =
    -0.052 / 0.070488 = -0.73771, p = P(T_14 <= -0.73771) = 0.2364 > 0.05: not excluded, so
    *inconclusive*. Power at sd 0.273 for the planned 15 pairs (one-sided t at 0.05, noncentral
    t with nc = 0.10 / 0.273 x sqrt(15) = 1.41865): 0.384; 48 pairs reach 0.8 (47: 0.796)."""
    from scipy import stats as sp

    half = 2.144787 * 0.273 / math.sqrt(15)
    assert sp.t.ppf(0.975, 14) == pytest.approx(2.144787, abs=1e-6)
    assert 0.048 - half == pytest.approx(-0.1032, abs=1e-4)
    assert 0.048 + half == pytest.approx(0.1992, abs=1e-4)
    below = below_effect_paired(0.048, 0.273, 15, 0.10)
    assert below["t"] == pytest.approx(-0.73771, abs=1e-5)
    assert below["p"] == pytest.approx(0.2364, abs=1e-4) and below["excluded"] is False
    assert verdict(False, below["excluded"]) == "inconclusive"
    assert paired_t_power(0.10, 0.273, 15, 0.05, alternative="greater") == pytest.approx(
        0.384, abs=1e-3
    )
    powers = {n: paired_t_power(0.10, 0.273, n, 0.05, alternative="greater") for n in (47, 48)}
    assert powers[47] < 0.8 <= powers[48]
    # The interval wholly below the paper's effect: the same mean and sd on 100 pairs
    # (upper bound 0.048 + 1.66 x 0.0273 = 0.093 < 0.10 one-sided) excludes it.
    assert below_effect_paired(0.048, 0.273, 100, 0.10)["excluded"] is True
    assert below_effect_paired(0.048, 0.0, 15, 0.10)["excluded"] is True
    assert below_effect_paired(0.048, 0.273, 1, 0.10)["excluded"] is False
