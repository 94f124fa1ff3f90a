"""The RAGEN-2 study runner: its statistics on hand values, and ``--quick`` end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agentgym import provenance
from baselines.collapse.detector import STATES
from baselines.studies import stats
from baselines.studies.ragen2 import (
    RESULT_CODE,
    _correlations,
    _decide,
    _execute,
    _runs,
    _summary,
    _train_overrides,
    _void_summary,
    design_power,
    load_study,
    main,
    mark_stale,
    paired_t,
    result_code,
    shared_runs,
    spearman,
)
from tests.helpers import ROOT, assert_records_this_code, git, git_repo


def test_spearman_hand_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    # ranks (1, 2, 3, 4) vs (1, 2, 4, 3): 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    # ties share their mean rank: (1.5, 1.5, 3) vs (1, 2, 3): Pearson of ranks = 0.8660254
    assert spearman([5, 5, 7], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])) and math.isnan(spearman([1, 2], [1, 2]))


def test_claim_c_scores_are_means_of_the_last_three_evaluations(tmp_path):
    """(c) reads each score as a run's mean over its last 3 evaluations. Four evaluations:
    MI / ceiling 1/2, 0.5/2, 0.4/1, 0.3/1 -> (0.25 + 0.4 + 0.3) / 3; MI-ZScore 5, 4, 3, 2 -> 3;
    entropy 1, 2, 3 and a last evaluation without it -> (2 + 3) / 2 (a gap, not the first).
    Two evaluations: their mean; none with a value: NaN."""
    rows = [{"step": 0, "val/success_rate": 0.25}]
    for step, (mi, ceiling, z, h) in enumerate(
        [(1.0, 2.0, 5.0, 1.0), (0.5, 2.0, 4.0, 2.0), (0.4, 1.0, 3.0, 3.0), (0.3, 1.0, 2.0, None)]
    ):
        row = {"step": step + 1, "collapse/mi_estimate": mi, "collapse/mi_upper_bound": ceiling}
        row |= {"collapse/ragen_mi_zscore": z, "collapse/entropy": h}
        rows.append(row)
    rows.append({"step": 5, "val/success_rate": 0.5})
    # A fifth evaluation that could not score an MI (fewer than 2 prompts): it takes its place
    # in the window (the last 3 are then evaluations 3, 4, 5), so the means drop evaluation 2
    # rather than reach back past the gap; its valid rate 0.25 counts (valid 1.0 before it).
    for row in rows[1:5]:
        row |= {"collapse/num_pairs_total": 8.0, "collapse/valid_thinking_rate": 1.0}
    gap = {"step": 6, "collapse/num_pairs_total": 8.0, "collapse/valid_thinking_rate": 0.25}
    for name, kept in (
        ("four", rows),
        ("two", rows[:3]),
        ("none", rows[:1]),
        ("gap", [*rows, gap]),
    ):
        (tmp_path / name / "train").mkdir(parents=True)
        lines = "\n".join(json.dumps(r) for r in kept) + "\n"
        (tmp_path / name / "train" / "metrics.jsonl").write_text(lines)
    run = {"claim": "correlation", "env": "agentgym/Bandit-v0", "arm": "a", "seed": 0}
    four = _summary(run, tmp_path / "four")
    assert four["mi_fraction_last"] == pytest.approx((0.25 + 0.4 + 0.3) / 3)
    assert four["ragen_mi_zscore_last"] == pytest.approx(3.0)
    assert four["entropy_last"] == pytest.approx(2.5)
    assert four["final_val_success"] == 0.5
    two = _summary(run, tmp_path / "two")
    assert two["mi_fraction_last"] == pytest.approx((0.5 + 0.25) / 2)
    assert two["entropy_last"] == pytest.approx(1.5)
    assert math.isnan(_summary(run, tmp_path / "none")["entropy_last"])
    gapped = _summary(run, tmp_path / "gap")
    assert gapped["mi_fraction_last"] == pytest.approx((0.4 + 0.3) / 2)
    assert gapped["ragen_mi_zscore_last"] == pytest.approx((3.0 + 2.0) / 2)
    assert gapped["entropy_last"] == pytest.approx(3.0)
    assert gapped["valid_rate_last"] == pytest.approx((1.0 + 1.0 + 0.25) / 3)


def test_a_void_run_has_a_finished_runs_keys_with_nothing_scored(tmp_path):
    """A run the gate kept from starting is recorded with the same keys as a finished one (the
    report reads both), plus its reason; every score is empty: NaN, 0, False, ``{}``."""
    (tmp_path / "run" / "train").mkdir(parents=True)
    row = {"step": 0, "val/success_rate": 0.5, "collapse/mi_estimate": 0.2}
    row |= {"collapse/mi_upper_bound": 1.0, "collapse/retrieval_above_chance": 0.3}
    (tmp_path / "run" / "train" / "metrics.jsonl").write_text(json.dumps(row) + "\n")
    run = {"claim": "correlation", "env": "agentgym/Bandit-v0", "arm": "a", "seed": 0}
    void = _void_summary(run, "warm-start gate: success at its ceiling")
    assert set(void) == set(_summary(run, tmp_path / "run")) | {"void", "wall_s"}
    assert void["void"] == "warm-start gate: success at its ceiling"
    assert void["provenance"] is None and void["metrics_path"] is None
    assert math.isnan(void["final_val_success"]) and math.isnan(void["mi_fraction_last"])
    assert math.isnan(void["mean_kept_fraction"]) and void["series"] == {}
    assert void["near_chance_evaluations"] == 0 and void["run_s"] == 0.0
    assert void["entropy_held"] is False and void["flag_fired"] is False


def test_claim_c_statistic_is_signed_by_hand():
    """Five runs (one a seed), success ranks 1..5. MI-ZScore ranks 1, 2, 3, 5, 4: rho =
    1 - 6 x 2 / 120 = 0.9; entropy ranks 4, 5, 3, 1, 2: d^2 = 9 + 9 + 0 + 9 + 9 = 36, rho =
    1 - 216 / 120 = -0.8; between them d^2 = 9 + 9 + 0 + 16 + 4 = 38, rho = -0.9. The signed
    statistic is 0.9 - (-0.8) = 1.7 (by magnitude it would be 0.1); MI / ceiling ranked like
    success gives rho 1 and 1.8. The test is the signed Meng-Rosenthal-Rubin one."""
    zscores, entropies = [1, 2, 3, 5, 4], [4, 5, 3, 1, 2]
    runs = [
        {
            "seed": i,
            "final_val_success": 0.1 * (i + 1),
            "ragen_mi_zscore_last": float(zscores[i]),
            "mi_fraction_last": 0.1 * i,
            "entropy_last": float(entropies[i]),
        }
        for i in range(5)
    ]
    out = _correlations(runs)
    assert out["runs"] == 5 and out["seeds"] == 5
    assert out["spearman_ragen_mi_zscore"] == pytest.approx(0.9)
    assert out["spearman_entropy"] == pytest.approx(-0.8)
    assert out["spearman_zscore_entropy"] == pytest.approx(-0.9)
    assert out["zscore_minus_entropy"] == pytest.approx(1.7)
    assert out["fraction_minus_entropy"] == pytest.approx(1.8)
    expected = stats.dependent_correlations_test(0.9, -0.8, -0.9, 5, signed=True)
    assert out["mrr_z"] == pytest.approx(expected["z"]) and out["mrr_z"] > 0
    # A run with no scored evaluation (a NaN score) is left out of the sweep, and counted.
    out = _correlations([*runs, {**runs[0], "seed": 9, "entropy_last": math.nan}])
    assert out["runs"] == 5 and out["dropped"] == 1


def test_paired_t_hand_values():
    # diffs 0.1, 0.3: mean 0.2, sd 0.141421, t_0.975(1) = 12.7062: half-width 1.27062
    s = paired_t([0.1, 0.3])
    assert s["mean"] == pytest.approx(0.2) and s["low"] == pytest.approx(0.2 - 1.270620, abs=1e-6)
    # diffs 0, .1, .2, .1, .1: mean 0.1, SS 0.02, sd sqrt(0.02 / 4) = 0.0707107;
    # t_0.975(4) = 2.776445: half-width 2.776445 * 0.0707107 / sqrt(5) = 0.0877989
    s = paired_t([0.0, 0.1, 0.2, 0.1, 0.1])
    assert s["high"] == pytest.approx(0.1877989, abs=1e-6)
    assert math.isnan(paired_t([0.5])["low"])


def _filtering(p_one_sided: dict[str, float], n: int = 5) -> dict:
    return {
        "differences": {
            f"{env}/softmax": {"arm": "softmax", "n": n, "p_one_sided": p}
            for env, p in p_one_sided.items()
        }
    }


def test_verdicts_by_hand():
    """Holm over [0.01, 0.02, 0.03]: 0.01 x 3 = 0.03, 0.02 x 2 = 0.04, 0.03 x 1 -> 0.04 (kept
    monotone): all within 0.05, so (b) (both envs) and (c) (its interval above 0) reproduce.
    The power is that of the paper's effect at alpha / 3."""
    power = {
        "alpha": 0.05,
        "filtering_effect": 0.1,
        "filtering_sd": 0.14,
        "correlation_mi": 0.39,
        "correlation_entropy": -0.14,
        "correlation_between": 0.0,
    }
    claims = {
        "filtering": _filtering({"Bandit-v0": 0.01, "FrozenLake-v0": 0.02}),
        "correlation": {
            "p_one_sided": 0.03,
            "ci_zscore_minus_entropy": [0.1, 0.5],
            "ci_ragen_mi_zscore": [0.05, 0.6],
            "runs": 18,
        },
        "collapse": {"reproduced": False},
    }
    _decide(claims, power)
    b, c, a = claims["filtering"], claims["correlation"], claims["collapse"]
    assert [d["p_holm"] for d in b["differences"].values()] == [0.03, 0.04]
    assert c["p_holm"] == 0.04
    assert (b["verdict"], c["verdict"], a["verdict"]) == ("reproduced",) * 2 + ("inconclusive",)
    assert b["power"] == pytest.approx(
        stats.paired_t_power(0.1, 0.14, 5, 0.05 / 3, alternative="greater")
    )
    assert c["power"] == pytest.approx(
        stats.dependent_correlations_power(0.39, -0.14, 0.0, 18, 0.05 / 3, signed=True)
        * stats.correlation_power(0.39, 18, 2 * 0.05 / 3)
    )
    assert b["power"] < 0.8 and c["power"] < 0.8  # 5 seeds, 18 runs: far from enough
    # Not significant: "not reproduced" only when the data exclude the paper's effect at their
    # own sd (issue 44), whatever the power. Bandit: 5 pairs, mean -0.2, sd 0.1: t = (-0.2 -
    # 0.1) / (0.1 / sqrt 5) = -6.708, p = P(T_4 <= -6.708) = 0.0013 <= 0.05: excluded there;
    # with sd 1.0, t = -0.671, p 0.27: not excluded, so inconclusive, even at a power of 1.
    big = {**power, "filtering_effect": 0.1, "filtering_sd": 0.001}  # planned power ~1
    for sd, expected in ((0.1, "not reproduced"), (1.0, "inconclusive")):
        claims = {"filtering": _filtering({"Bandit-v0": 0.4, "FrozenLake-v0": 0.01})}
        bandit = claims["filtering"]["differences"]["Bandit-v0/softmax"]
        bandit.update(mean=-0.2, sd=sd)
        _decide(claims, big)
        assert claims["filtering"]["power"] > 0.99
        assert bandit["p_below_paper_effect"] == pytest.approx(
            0.0013 if sd == 0.1 else 0.2695, abs=1e-4
        )
        assert claims["filtering"]["verdict"] == expected and not claims["filtering"]["reproduced"]
    # (c) significant by its p but its seed-resampled interval reaches 0: not significant.
    claims = {
        "correlation": {
            "p_one_sided": 0.001,
            "ci_zscore_minus_entropy": [-0.1, 0.4],
            "ci_ragen_mi_zscore": [0.1, 0.5],
            "runs": 18,
        }
    }
    _decide(claims, power)
    # Not significant; the interval's top, 0.4, is below the paper's +0.53: not reproduced.
    assert not claims["correlation"]["significant"]
    assert claims["correlation"]["verdict"] == "not reproduced"
    # The difference is clear but made by entropy alone: rho(MI-ZScore)'s interval reaches 0.
    claims = {
        "correlation": {
            "p_one_sided": 0.001,
            "ci_zscore_minus_entropy": [0.2, 0.9],
            "ci_ragen_mi_zscore": [-0.2, 0.3],
            "runs": 18,
        }
    }
    _decide(claims, power)
    assert not claims["correlation"]["significant"]


def test_b_as_committed_is_inconclusive_with_the_power_at_the_observed_sd_beside_it():
    """(b) as it ran (docs/reproduction-filtering.md): 15 pairs, mean +0.048, p 0.25. The
    spec's paired sd 0.14 gave a planned power of 0.84, and the old rule called it "not
    reproduced"; the observed sd was 0.273 and its 95 % interval [-0.10, +0.20] holds the
    paper's +0.10 (issue 44): inconclusive. The power at the observed sd, by an independent
    computation (scipy's noncentral t, one-sided): 0.3835 at n = 15; n = 48 is the first to
    reach 0.8 (0.7958 at 47, 0.8034 at 48)."""
    from scipy import stats as sp

    def one_sided(sd: float, n: int) -> float:
        shift = 0.1 / (sd / math.sqrt(n))
        return float(sp.nct.sf(sp.t.ppf(0.95, n - 1), n - 1, shift))

    power = {"alpha": 0.05, "filtering_effect": 0.1, "filtering_sd": 0.14}
    claims = {"filtering": _filtering({"Bandit-v0": 0.2518}, n=15)}
    claims["filtering"]["differences"]["Bandit-v0/softmax"].update(mean=0.04792, sd=0.27327)
    _decide(claims, power)
    b = claims["filtering"]
    d = b["differences"]["Bandit-v0/softmax"]
    assert b["verdict"] == "inconclusive" and b["power"] == pytest.approx(0.8375, abs=1e-3)
    assert d["excludes_paper_effect"] is False and d["p_below_paper_effect"] > 0.05
    assert d["power_at_observed_sd"] == pytest.approx(one_sided(0.27327, 15), abs=1e-9)
    assert d["power_at_observed_sd"] == pytest.approx(0.3835, abs=5e-4)
    assert d["pairs_for_power_at_observed_sd"] == 48
    assert b["power_at_observed"] == d["power_at_observed_sd"]
    assert b["n_for_power_at_observed"] == 48
    assert one_sided(0.27327, 47) < 0.8 <= one_sided(0.27327, 48)
    claims = {"filtering": _filtering({"Bandit-v0": 0.2518}, n=15)}  # no sd: no check
    _decide(claims, power)
    d = claims["filtering"]["differences"]["Bandit-v0/softmax"]
    assert math.isnan(d["power_at_observed_sd"]) and d["pairs_for_power_at_observed_sd"] is None
    assert claims["filtering"]["verdict"] == "inconclusive"


def test_c_is_not_reproduced_only_when_its_intervals_exclude_the_paper():
    """(c): the paper's difference is 0.39 - (-0.14) = +0.53. An interval of the difference
    [-0.21, 0.17] excludes it (so would rho(MI-ZScore)'s [-0.02, 0.29] exclude +0.39); one
    reaching [-0.2, 0.6] with rho(MI-ZScore) in [-0.1, 0.5] does not."""
    power = {"alpha": 0.05, "correlation_mi": 0.39, "correlation_entropy": -0.14}
    for diff, mi, expected in (
        ([-0.21, 0.17], [0.0, 0.5], "not reproduced"),
        ([-0.2, 0.6], [-0.02, 0.29], "not reproduced"),
        ([-0.2, 0.6], [-0.1, 0.5], "inconclusive"),
    ):
        claims = {
            "correlation": {
                "p_one_sided": 0.5,
                "ci_zscore_minus_entropy": diff,
                "ci_ragen_mi_zscore": mi,
                "runs": 165,
                "spearman_zscore_entropy": -0.38,
            }
        }
        _decide(claims, power)
        c = claims["correlation"]
        assert c["paper_difference"] == pytest.approx(0.53) and c["verdict"] == expected
        # The power at the observed rho(MI-ZScore, entropy) replaces the spec's 0 (absent: 0).
        assert c["power_at_observed"] == pytest.approx(
            stats.dependent_correlations_power(0.39, -0.14, -0.38, 165, 0.05, signed=True)
            * stats.correlation_power(0.39, 165, 0.1)
        )


def test_an_arm_that_ends_at_its_floor_or_ceiling_voids_the_comparison_it_feeds():
    """Medians over seeds of the final success: none (0.0, 0.02, 0.5) = 0.02 <= 0.05 (floor);
    selective (0.9, 0.96, 1.0) = 0.96 >= 0.95 (ceiling); ppo (0.3, 0.5, 0.6) = 0.5 is free.
    Whatever the statistics say, a comparison fed by a bound arm is void."""
    from baselines.studies.ragen2 import _bounds, floor_ceiling

    def runs(claim: str, arm: str, finals: list[float]) -> list[dict]:
        return [
            {"claim": claim, "env": "agentgym/Bandit-v0", "arm": arm, "seed": i,
             "final_val_success": v}
            for i, v in enumerate(finals)
        ]  # fmt: skip

    table = floor_ceiling(
        runs("c", "none", [0.0, 0.02, 0.5]) + runs("c", "ppo", [0.3, 0.5, 0.6])
        + runs("c", "selective", [0.9, 0.96, 1.0]) + runs("c", "nan", [math.nan]),
        0.05, 0.95,
    )  # fmt: skip
    assert {k: v["median"] for k, v in table.items()} == {
        "Bandit-v0/none": 0.02,
        "Bandit-v0/ppo": 0.5,
        "Bandit-v0/selective": 0.96,
    }
    assert "at or below its floor 0.05" in table["Bandit-v0/none"]["void"]
    assert "at or above its ceiling 0.95" in table["Bandit-v0/selective"]["void"]
    assert table["Bandit-v0/ppo"]["void"] is None
    # Exactly at the bound counts (the gate's "at its floor").
    assert floor_ceiling(runs("c", "x", [0.05]), 0.05, 0.95)["Bandit-v0/x"]["void"]
    # (b): the filtered arm at its ceiling voids its comparison, even a significant one.
    power = {"alpha": 0.05, "filtering_effect": 0.1, "filtering_sd": 0.14}
    claims = {"filtering": {**_filtering({"Bandit-v0": 0.001}, n=3), "baseline": "ppo"}}
    claims["filtering"]["differences"]["Bandit-v0/softmax"].update(mean=0.3, sd=0.1)
    by_claim = {"filtering": runs("filtering", "ppo", [0.3, 0.5, 0.6])
                + runs("filtering", "softmax", [0.9, 0.96, 1.0])}  # fmt: skip
    _bounds(claims, by_claim, {"success_floor": 0.05, "success_ceiling": 0.95})
    _decide(claims, power)
    b = claims["filtering"]
    assert b["significant"] and b["verdict"] == stats.VOID == "void: floor/ceiling"
    assert not b["reproduced"] and "Bandit-v0/softmax" in b["floor_ceiling"][0]
    assert "Bandit-v0/softmax" in b["differences"]["Bandit-v0/softmax"]["void"]
    # (c): any arm of the sweep at its floor voids it (the GRPO arms of the committed sweep).
    claims = {
        "correlation": {
            "p_one_sided": 0.5, "ci_zscore_minus_entropy": [-0.2, 0.1],
            "ci_ragen_mi_zscore": [-0.1, 0.2], "runs": 6, "spearman_zscore_entropy": 0.0,
        }
    }  # fmt: skip
    by_claim = {"correlation": runs("correlation", "grpo", [0.0, 0.0, 0.1])
                + runs("correlation", "ppo", [0.3, 0.5, 0.6])}  # fmt: skip
    _bounds(claims, by_claim, {"success_floor": 0.05, "success_ceiling": 0.95})
    _decide(claims, {"alpha": 0.05, "correlation_mi": 0.39, "correlation_entropy": -0.14})
    assert claims["correlation"]["excludes_paper_effect"]  # the interval alone would say so
    assert claims["correlation"]["verdict"] == "void: floor/ceiling"


def test_committed_reports_regenerate_and_no_verdict_overclaims(tmp_path, monkeypatch):
    """--report-only re-decides each committed results.json by these rules, without a run:
    (b) inconclusive (its interval holds the paper's +0.10), (c) void (12 GRPO arms ended at
    their floor), the SmolLM2 (a) inconclusive, the confirmatory (c) reproduced on PPO and void
    on Dr.GRPO (one arm at the floor); the
    committed files already say so, and a second regeneration changes no statistic and no
    verdict."""
    import shutil

    docs = ROOT / "docs"
    expected = {
        "reproduction": ("ragen2.yaml", {"collapse": "inconclusive", "filtering":
                         "inconclusive", "correlation": "inconclusive"}),
        "reproduction-filtering": ("ragen2_filtering.yaml", {"filtering": "inconclusive"}),
        "reproduction-correlation": ("ragen2_correlation.yaml",
                                     {"correlation": "void: floor/ceiling"}),
        "reproduction-smollm2": ("ragen2_smollm2.yaml", {"collapse": "inconclusive"}),
        "reproduction-confirm-correlation-ppo": ("ragen2_confirm_correlation_ppo.yaml",
                                                 {"correlation": "reproduced"}),
        "reproduction-confirm-correlation-drgrpo": ("ragen2_confirm_correlation_drgrpo.yaml",
                                                    {"correlation": "void: floor/ceiling"}),
    }  # fmt: skip
    for name, (spec_name, verdicts) in expected.items():
        committed = json.loads((docs / name / "results.json").read_text())
        assert {k: c["verdict"] for k, c in committed["claims"].items()} == verdicts, name
        assert "| not reproduced |" not in (docs / f"{name}.md").read_text()
        for verdict in verdicts.values():
            assert f"| {verdict} |" in (docs / f"{name}.md").read_text()
        (tmp_path / name).mkdir()
        shutil.copy(docs / name / "results.json", tmp_path / name / "results.json")
        doc = tmp_path / f"{name}.md"
        spec = str(ROOT / "baselines" / "studies" / spec_name)
        assert main(["--spec", spec, "--doc", str(doc), "--report-only"]) == 0
        again = json.loads((tmp_path / name / "results.json").read_text())
        assert {k: c["verdict"] for k, c in again["claims"].items()} == verdicts, name
        for key, claim in committed["claims"].items():
            for stat in ("mean", "sd", "low", "high", "p_one_sided", "mrr_z", "ci_ragen_mi_zscore"):
                assert json.dumps(again["claims"][key].get(stat)) == json.dumps(claim.get(stat))
        text = doc.read_text()
        assert "Verdicts re-decided from the committed data, nothing re-run" in text
        assert "power: planned | at the observed variance | n for 0.8 at it" in text
    # Staleness is stated as of the commit whose code judged it, kept from the committed report.
    text = (tmp_path / "reproduction-filtering.md").read_text()
    assert "stale runs as of it (made by older code than it): 30 of 30" in text
    assert "**30 stale runs** as of commit `5bdfd8016312`:" in text
    b = json.loads((tmp_path / "reproduction-filtering" / "results.json").read_text())
    b = b["claims"]["filtering"]
    assert (round(b["power"], 2), round(b["power_at_observed"], 2)) == (0.84, 0.38)
    assert b["n_for_power_at_observed"] == 48
    c = json.loads((tmp_path / "reproduction-correlation" / "results.json").read_text())
    voided = c["claims"]["correlation"]["floor_ceiling"]
    assert len(voided) == 11 and all("grpo_" in v for v in voided)  # lr3e3_ent0_none: 0.055
    # The confirmatory (c) on PPO, recomputed independently (scipy) from its committed series:
    # each score the mean of a run's last 3 evaluations, Spearman with final success.
    from scipy.stats import spearmanr

    ppo = json.loads((docs / "reproduction-confirm-correlation-ppo" / "results.json").read_text())
    assert len(ppo["runs"]) == 100 and ppo["spec_fingerprint"] == "486ce97e1fbc461f"

    def last3(series: list) -> float:
        return sum(v for _, v in series[-3:]) / 3

    zscore = [last3(r["series"]["collapse/ragen_mi_zscore"]) for r in ppo["runs"]]
    entropy = [last3(r["series"]["collapse/entropy"]) for r in ppo["runs"]]
    success = [r["final_val_success"] for r in ppo["runs"]]
    claim = ppo["claims"]["correlation"]
    assert spearmanr(zscore, success)[0] == pytest.approx(claim["spearman_ragen_mi_zscore"])
    assert spearmanr(entropy, success)[0] == pytest.approx(claim["spearman_entropy"])
    assert round(claim["zscore_minus_entropy"], 3) == 0.703
    assert claim["floor_ceiling"] == [] and claim["ci_zscore_minus_entropy"][0] > 0
    drgrpo = json.loads(
        (docs / "reproduction-confirm-correlation-drgrpo" / "results.json").read_text()
    )
    assert drgrpo["spec_fingerprint"] == "cc83af10d8a1303f" and len(drgrpo["runs"]) == 100
    floored = drgrpo["claims"]["correlation"]["arm_final_success"]["Bandit-v0/drgrpo_lr1e3_ent01"]
    assert floored["median"] <= 0.05 and floored["void"]
    # No committed results beside the report: the fix is named.
    with pytest.raises(SystemExit):
        main(["--doc", str(tmp_path / "none.md"), "--report-only"])


def test_a_results_folder_is_refused_to_another_spec(tmp_path):
    """A spec's fingerprint is written into its folder; another spec, or a folder holding
    files without one, is refused with the fix named; the same spec (comments, key order
    aside) resumes."""
    from baselines.studies.ragen2 import SPEC_FILE, claim_folder, spec_fingerprint

    tiny = load_study(ROOT / "baselines" / "studies" / "ragen2_filtering.yaml")
    smol = load_study(ROOT / "baselines" / "studies" / "ragen2_smollm2.yaml")
    assert spec_fingerprint(tiny) != spec_fingerprint(smol)
    assert spec_fingerprint(tiny) == spec_fingerprint(dict(reversed(list(tiny.items()))))
    assert spec_fingerprint(load_study(quick=True)) != spec_fingerprint(load_study())
    out = tmp_path / "study"
    assert claim_folder(out, tiny, "ragen2_filtering.yaml") == spec_fingerprint(tiny)
    record = json.loads((out / SPEC_FILE).read_text())
    assert record["fingerprint"] == spec_fingerprint(tiny) and record["spec"]["model"] == "tiny"
    (out / "sft").mkdir()  # a warm start made by the tiny spec
    assert claim_folder(out, tiny, "ragen2_filtering.yaml") == spec_fingerprint(tiny)
    with pytest.raises(ValueError, match="was made by another spec") as err:
        claim_folder(out, smol, "baselines/studies/ragen2_smollm2.yaml")
    assert "give a new --out (this spec's default: runs/ragen2-smollm2) or delete" in str(err.value)
    legacy = tmp_path / "legacy"
    (legacy / "gate").mkdir(parents=True)
    with pytest.raises(ValueError, match="holds files but no spec.json"):
        claim_folder(legacy, smol, "ragen2_smollm2.yaml")
    assert not (legacy / SPEC_FILE).exists()
    # The command refuses before anything runs, naming the fix.
    with pytest.raises(SystemExit):
        main(["--spec", str(ROOT / "baselines" / "studies" / "ragen2_smollm2.yaml"),
              "--out", str(out)])  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["sft", SPEC_FILE]


def test_out_and_doc_default_by_the_spec_name():
    from baselines.studies.ragen2 import default_paths

    studies = ROOT / "baselines" / "studies"
    assert default_paths(studies / "ragen2.yaml", False) == (
        Path("runs/ragen2"), Path("docs/reproduction.md"))  # fmt: skip
    for name in ("filtering", "correlation", "smollm2", "collapse"):
        assert default_paths(studies / f"ragen2_{name}.yaml", False) == (
            Path(f"runs/ragen2-{name}"), Path(f"docs/reproduction-{name}.md"))  # fmt: skip
        # Each spec's own comment names the same command (--out and --doc spelled out).
        text = (studies / f"ragen2_{name}.yaml").read_text()
        if "--out" in text:
            assert f"--out runs/ragen2-{name} --doc docs/reproduction-{name}.md" in text
    assert default_paths("my_study.yaml", True) == (
        Path("runs/my-study-quick"), Path("runs/my-study-quick/reproduction.md"))  # fmt: skip
    assert default_paths("my_study.yaml", False)[1] == Path("docs/reproduction-my-study.md")


def test_design_power_is_stated_before_the_runs():
    """--plan's figures by hand. ragen2.yaml: (b) 2 envs x 2 filtered arms + (c) = 5 comparisons,
    so each at 0.05 / 5, one-sided (two-sided at twice the level), 5 pairs; (c) its 18 runs.
    ragen2_filtering.yaml: one comparison at 0.05, 15 pairs: at least 0.8."""
    plan = design_power(load_study())
    assert plan["filtering"]["runs"] == 30 and plan["filtering"]["n"] == 5
    assert plan["filtering"]["power"] == pytest.approx(
        stats.paired_t_power(0.10, 0.14, 5, 0.05 / 5, alternative="greater")
    )
    assert plan["correlation"]["power"] == pytest.approx(
        stats.dependent_correlations_power(0.39, -0.14, 0.0, 18, 0.05 / 5, signed=True)
        * stats.correlation_power(0.39, 18, 2 * 0.05 / 5)
    )
    assert math.isnan(plan["collapse"]["power"]) and plan["collapse"]["runs"] == 18
    spec = load_study(ROOT / "baselines" / "studies" / "ragen2_filtering.yaml")
    plan = design_power(spec)
    assert plan == {
        "filtering": {
            "runs": 30,
            "n": 15,
            "power": pytest.approx(
                stats.paired_t_power(0.10, 0.14, 15, 0.05, alternative="greater")
            ),
        }
    }
    assert plan["filtering"]["power"] >= 0.8


def test_plan_prints_runs_shared_runs_and_power(capsys):
    """--plan on ragen2.yaml: 66 runs, of which 6 (b) and 12 (c) repeat a (collapse or (b)) run
    and are shared (the 18 of the provenance test); (a) has no statistic; nothing runs."""
    assert main(["--plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "collapse: 18 runs; no test statistic, so no power: reproduced or inconclusive",
        "filtering: 30 runs (6 shared with another claim's identical run); power 0.11 for the "
        "paper's effect (n = 5)",
        "correlation: 18 runs (12 shared with another claim's identical run); power 0.04 for the "
        "paper's effect (n = 18)",
    ]


def test_the_filtering_study_runs_ppo_8x16_from_a_noisy_warm_start_on_disjoint_seeds():
    from agentgym.sft import SFT_SEED_START
    from baselines.config import load_config

    spec = load_study(ROOT / "baselines" / "studies" / "ragen2_filtering.yaml")
    assert spec["sft"]["epsilon"] == 0.9
    runs = _runs(spec)
    settings = [_train_overrides(run, Path("ckpt"), spec) for run in runs]
    assert shared_runs(settings) == list(range(30))  # every run valid, none repeated
    for run, argv in zip(runs, settings, strict=True):
        config = load_config(None, [a for a in argv if not a.startswith("model.path")])
        rc = config.rollout
        assert (config.algorithm.name, rc.num_groups, rc.group_size) == ("ppo", 8, 16)
        assert rc.val_temperature == 0.5 and config.train.steps == 150
        last_train_seed = rc.train_seed + config.train.steps * rc.num_groups
        assert last_train_seed < SFT_SEED_START <= SFT_SEED_START + spec["sft"]["episodes"]
        assert SFT_SEED_START + spec["sft"]["episodes"] < rc.val_seed
        assert (run["arm"] == "selective") == (config.filter.include_zero is False)


def test_the_correlation_study_sweeps_168_distinct_runs_with_power_for_the_signed_claim():
    """ragen2_correlation.yaml: 24 arms (algorithm x lr x entropy bonus x filter) x 7 seeds,
    every configuration distinct and valid, three evaluations in the last 15 of 40 steps, the
    validation seeds disjoint from the training and SFT ones; power (signed, alpha 0.05, all
    168 runs) from the spec alone, at least 0.8."""
    from agentgym.sft import SFT_SEED_START
    from baselines.config import load_config

    spec = load_study(ROOT / "baselines" / "studies" / "ragen2_correlation.yaml")
    runs = _runs(spec)
    settings = [_train_overrides(run, Path("ckpt"), spec) for run in runs]
    assert len(runs) == 168 and shared_runs(settings) == list(range(168))
    shapes = set()
    for argv in settings:
        config = load_config(None, [a for a in argv if not a.startswith("model.path")])
        a, rc, d = config.algorithm, config.rollout, config.diagnostics
        shapes.add((a.name, a.lr, a.entropy_coef, config.filter.p))
        evaluations = [s for s in range(config.train.steps) if s % d.every == 0]
        assert evaluations[-3:] == [25, 30, 35] and rc.val_temperature == 0.5
        assert rc.train_seed + config.train.steps * rc.num_groups < SFT_SEED_START
        assert SFT_SEED_START + spec["sft"]["episodes"] < rc.val_seed
    assert len(shapes) == 24
    plan = design_power(spec)["correlation"]
    assert plan["n"] == 168 and plan["power"] >= 0.8
    assert plan["power"] == pytest.approx(
        stats.dependent_correlations_power(0.39, -0.14, 0.0, 168, 0.05, signed=True)
        * stats.correlation_power(0.39, 168, 0.10)
    )


def test_the_collapse_study_removes_the_signal_with_and_without_a_bonus():
    """ragen2_collapse.yaml, (a) as a mechanism test: from one SmolLM2 warm start, GRPO without
    a filter; the verdict's two arms both have the signal removed, the bonus on one only; two
    more arms vary the share of groups with a signal at the same bonus."""
    from baselines.config import load_config

    spec = load_study(ROOT / "baselines" / "studies" / "ragen2_collapse.yaml")
    assert spec["model"] == "embedded" and spec["sft"]["epsilon"] == 0.9
    runs = _runs(spec)
    settings = [_train_overrides(run, Path("ckpt"), spec) for run in runs]
    assert len(runs) == 12 and shared_runs(settings) == list(range(12))
    arms = {}
    for run, argv in zip(runs, settings, strict=True):
        config = load_config(None, [a for a in argv if not a.startswith("model.path")])
        a = config.algorithm
        assert a.name == "grpo" and config.filter.p == 1.0
        assert config.train.max_steps_without_signal == 0  # the runs the regulariser drives
        assert config.train.max_steps_without_update == 0  # the control runs its 20 steps
        arms[run["arm"]] = (a.signal_fraction, a.entropy_coef)
    assert arms == {
        "regularised": (0.0, 0.1),
        "control": (0.0, 0.0),
        "half_signal": (0.5, 0.1),
        "full_signal": (1.0, 0.1),
    }


def test_a_run_stopped_before_its_first_checkpoint_starts_over(tmp_path):
    """A study stopped mid-run leaves the run's folder with metrics but no checkpoint (the study
    saves at the end). Resuming the study starts that run over instead of failing on the
    trainer's "already holds a run" (it once stopped a whole study)."""
    folder = tmp_path / "run"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "metrics.jsonl").write_text('{"step": 0}\n{"step": 1}\n')
    overrides = ["model.path=tiny", "rollout.env_id=agentgym/Bandit-v0", "rollout.num_groups=2",
                 "rollout.group_size=2", "rollout.max_new_tokens=8", "rollout.val_episodes=2",
                 "diagnostics.every=0", "train.steps=1", "train.threads=1"]  # fmt: skip
    _execute(overrides, folder)
    assert json.loads((folder / "done.json").read_text())["final_val_success"] in (0.0, 0.5, 1.0)
    lines = (folder / "train" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0]
    assert "started over" in (folder / "log.txt").read_text()


def test_spec_quick_replaces_sections():
    full, quick = load_study(), load_study(quick=True)
    assert len(full["claims"]["filtering"]["seeds"]) == 5
    assert quick["claims"]["filtering"]["seeds"] == [0, 1]
    assert set(full["claims"]["filtering"]["arms"]) == {"none", "linear", "softmax"}


def test_a_spec_may_hold_some_claims_but_only_known_ones(tmp_path):
    from baselines.studies.ragen2 import SPEC

    smol = load_study(SPEC.with_name("ragen2_smollm2.yaml"))
    assert set(smol["claims"]) == {"collapse"} and smol["model"] == "embedded"
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: tiny\nclaims:\n  colapse: {envs: [x], seeds: [0], arms: {}}\n")
    with pytest.raises(ValueError, match="claims must be some of collapse, filtering"):
        load_study(bad)
    bad.write_text("model: tiny\nclaims:\n  collapse: {envs: [x], arms: {}}\n")
    with pytest.raises(ValueError, match="claims.collapse needs envs, seeds and arms"):
        load_study(bad)
    # (c) is decided on its own sweep, so it needs arms too (it once read every run instead).
    bad.write_text("model: tiny\nclaims:\n  correlation: {envs: [x], seeds: [0], arms: {}}\n")
    with pytest.raises(ValueError, match="claims.correlation needs envs, seeds and arms"):
        load_study(bad)


def test_a_study_without_claim_c_draws_no_correlation_scatter(tmp_path):
    """Two runs of claim (a) make no correlation; the committed SmolLM2 report shows none."""
    from baselines.studies.ragen2 import _plots

    committed = Path(__file__).resolve().parents[1] / "docs" / "reproduction-smollm2"
    runs = json.loads((committed / "results.json").read_text())["runs"]
    assert sorted(r["arm"] for r in runs) == ["control", "regularised"]
    (tmp_path / "correlation.png").write_bytes(b"stale")  # from an earlier report in the folder
    assert _plots(runs, tmp_path, scatter=False) == ["entropy_mi.png"]
    assert (tmp_path / "entropy_mi.png").stat().st_size > 0
    assert not (tmp_path / "correlation.png").exists()
    assert "correlation.png" not in (committed.parent / "reproduction-smollm2.md").read_text()


def test_the_code_of_a_result_is_named_once_and_exists():
    assert result_code("agentgym/Bandit-v0") == [*RESULT_CODE, "agentgym/envs/bandit.py"]
    assert result_code("agentgym/FrozenLake-v0")[len(RESULT_CODE) :] == [
        "agentgym/envs/frozen_lake.py",
        "agentgym/solvers/frozen_lake.py",
    ]
    # Every path names a file of this checkout (a rename would silently stop the check).
    for env_id in ("agentgym/Bandit-v0", "agentgym/FrozenLake-v0", "agentgym/Sokoban-v0"):
        assert all((ROOT / p).is_file() for p in result_code(env_id)), env_id


def test_identical_configurations_run_once_and_are_shared_explicitly():
    """The full study names 66 runs; 18 of them have the resolved configuration of an earlier
    run (issue 23 found these 18 repeating an earlier run exactly). By hand, from ragen2.yaml and
    the defaults (algorithm.entropy_coef 0.001, filter.p 0.9): filtering's softmax arm (defaults)
    is collapse's entropy_holds (0.001, p 0.9) on both envs for seeds 0-2 (6); on Bandit,
    correlation's ent0_none is collapse's control, ent01_none its regularised, ent001_softmax
    its entropy_holds, ent001_none filtering's none (4 x 3 seeds)."""
    from baselines.studies.ragen2 import _runs, _short, _train_overrides

    spec = load_study()
    runs = _runs(spec)
    settings = [_train_overrides(r, Path("warm") / _short(r["env"]), spec) for r in runs]
    made_by = shared_runs(settings)

    def name(r):
        return (r["claim"], _short(r["env"]), r["arm"], r["seed"])

    shared = {name(runs[i]): name(runs[j]) for i, j in enumerate(made_by) if i != j}
    expected = {}
    for seed in (0, 1, 2):
        for env in ("Bandit-v0", "FrozenLake-v0"):
            expected[("filtering", env, "softmax", seed)] = ("collapse", env, "entropy_holds", seed)
        for arm, first in (
            ("ent0_none", ("collapse", "control")),
            ("ent01_none", ("collapse", "regularised")),
            ("ent001_softmax", ("collapse", "entropy_holds")),
            ("ent001_none", ("filtering", "none")),
        ):
            expected[("correlation", "Bandit-v0", arm, seed)] = (
                first[0],
                "Bandit-v0",
                first[1],
                seed,
            )
    assert len(runs) == 66 and shared == expected
    # Overrides in another order, or a default spelled out, are the same configuration.
    assert shared_runs([["algorithm.lr=0.1", "train.seed=1"], ["train.seed=1", "algorithm.lr=0.1"],
                        ["algorithm.lr=0.1", "train.seed=1", "algorithm.entropy_coef=0.001"],
                        ["algorithm.lr=0.1", "train.seed=2"]]) == [0, 0, 0, 3]  # fmt: skip


def test_runs_made_by_older_code_are_marked_stale(tmp_path):
    """A checkout with two commits, the second changing the trainer: runs recorded at the first
    are stale, through their RL run or their warm start; a change to another env's module makes
    no Bandit run stale; a run without a record is stale."""
    from baselines.studies.ragen2 import _provenance_lines

    root = git_repo(tmp_path / "repo")
    old = provenance.describe(root)
    (root / "baselines" / "trainer.py").write_text("lr = 2\n")
    git(root, "commit", "-q", "-am", "a newer trainer")
    new = provenance.describe(root)
    (root / "agentgym" / "envs" / "sokoban.py").write_text("walls = 2\n")
    git(root, "commit", "-q", "-am", "another env")
    records = [(new, new), (old, new), (new, old), (None, new)]
    runs = [
        {"claim": "filtering", "env": "agentgym/Bandit-v0", "arm": "none", "seed": seed}
        | {"provenance": rl, "warm_start_provenance": warm}
        for seed, (rl, warm) in enumerate(records)
    ]
    mark_stale(runs, root)
    c = old["commit"][:12]
    assert [r["stale"] for r in runs] == [
        None,
        f"RL run: baselines/trainer.py changed since {c}",
        f"warm start: baselines/trainer.py changed since {c}",
        "RL run: no provenance recorded (made by code older than the record)",
    ]
    # The report counts the runs of each code and lists the stale ones with their reason.
    lines = _provenance_lines(runs, [r for r in runs if r["stale"]])
    per_code = sorted([f"commit `{c}`: 1", f"commit `{new['commit'][:12]}`: 2", "not recorded: 1"])
    assert lines[3] == "RL runs per code: " + "; ".join(per_code) + "."
    assert lines[5].startswith("**3 stale runs**")
    # A void run never ran: counted apart, not as a run without a record.
    void = {**runs[3], "void": "warm-start gate: success at its ceiling", "provenance": None}
    assert (
        _provenance_lines([*runs[:3], void], [])[3]
        == "RL runs per code: "
        + "; ".join(
            sorted([f"commit `{c}`: 1", f"commit `{new['commit'][:12]}`: 2", "void (never ran): 1"])
        )
        + "."
    )
    assert (
        f"| filtering | Bandit-v0 | none | 2 | warm start: baselines/trainer.py changed since {c} |"
        in lines
    )
    # A run shared with another claim is listed with the run that made it.
    runs[0]["same_run_as"] = "collapse/Bandit-v0/control/seed0"
    lines = _provenance_lines(runs, [])
    assert lines[5].startswith("1 runs have the configuration (settings and seeds) of a run")
    assert "| filtering | Bandit-v0 | none | 0 | collapse/Bandit-v0/control/seed0 |" in lines


def test_quick_study_end_to_end_and_resume(tmp_path, capsys, monkeypatch):
    out, doc = tmp_path / "study", tmp_path / "docs" / "reproduction.md"
    assert main(["--quick", "--out", str(out), "--doc", str(doc), "--jobs", "2"]) == 0
    results = json.loads((out / "results.json").read_text())
    # The copy beside the report is the same data, self-contained (per-step series of each run).
    assert json.loads((doc.parent / "reproduction" / "results.json").read_text()) == results
    runs = results["runs"]
    # quick: collapse 2 arms x 1 seed, filtering 2 arms x 2 seeds, correlation 2 arms x 1 seed.
    assert len(runs) == 8
    assert all(r["same_run_as"] is None for r in runs)  # quick's (c) has its own seed: no sharing
    for run in runs:
        assert 0.0 <= run["final_val_success"] <= 1.0
        # The series are the run's metrics.jsonl values, step by step (steps 0..3 at most).
        rows = [json.loads(line) for line in open(run["metrics_path"], encoding="utf-8")]
        for key in ("collapse/mi_estimate", "val/success_rate"):
            logged = [[r["step"], r[key]] for r in rows if r.get(key) is not None]
            assert run["series"][key] == logged and {x for x, _ in logged} <= {0, 1, 2, 3, 4}
        assert run["series"]["val/success_rate"][-1][1] == run["final_val_success"]
        assert run["run_s"] > 0
        assert (out / "runs" / run["claim"] / "Bandit-v0" / run["arm"] / f"seed{run['seed']}"
                / "done.json").is_file()  # fmt: skip
    claims = results["claims"]
    assert set(claims) == {"collapse", "filtering", "correlation"}
    assert all(isinstance(c["reproduced"], bool) for c in claims.values())
    assert {c["verdict"] for c in claims.values()} <= {
        "reproduced",
        "not reproduced",
        "inconclusive",
        "void: floor/ceiling",
    }
    # The folder names the spec that made it (a resume of this spec matches it).
    from baselines.studies.ragen2 import SPEC_FILE, spec_fingerprint

    assert results["spec_fingerprint"] == spec_fingerprint(load_study(quick=True))
    assert json.loads((out / SPEC_FILE).read_text())["fingerprint"] == results["spec_fingerprint"]
    # The gate measured the warm start: its oracle reasoning keeps at least a twentieth of its
    # MI ceiling (the quick gate; its success check is off: see the quick spec, whose warm start
    # kept 0.12-0.44 of it as float rounding alone changed).
    gate = results["gate"]["agentgym/Bandit-v0"]
    assert gate["passed"] and gate["mi"] >= 0.05 * gate["mi_ceiling"] > 0
    # The gate's own command measures the same warm start to the same figures (its thresholds
    # are the full study's: it may refuse what the quick gate let through, never re-measure).
    from baselines.studies.gate import main as gate_main

    spec = load_study(quick=True)
    capsys.readouterr()  # the study's own lines
    code = gate_main([str(out / "sft" / "Bandit-v0" / "checkpoint"), "--env", "agentgym/Bandit-v0",
                      "--oracle-episodes", "16", "--out", str(tmp_path / "gate"), *spec["common"]])  # fmt: skip
    alone = json.loads(capsys.readouterr().out)
    assert code == (0 if alone["passed"] else 1)
    assert json.loads((tmp_path / "gate" / "gate.json").read_text()) == alone
    for key in ("mi", "mi_ceiling", "success", "val_episodes", "oracle_episodes"):
        assert alone[key] == pytest.approx(gate[key], abs=1e-6)
    assert all(r["void"] is None for r in runs)
    assert claims["filtering"]["differences"]["Bandit-v0/softmax"]["n"] == 2
    # (c) is computed on its own sweep; the pooled figures read all 8 runs, and count a run with
    # no scored evaluation as dropped (the tiny model's reasoning can be too short to score at
    # the last evaluations: 1 of the 8 with the sampler of issue 41), never silently.
    assert claims["correlation"]["runs"] == 2
    pooled = claims["correlation"]["pooled_all_runs"]
    assert pooled["runs"] + pooled["dropped"] == 8 and pooled["runs"] >= 6
    text = doc.read_text()
    assert "| (b) SNR filtering helps |" in text and "Command: `python -m baselines.studies" in text
    # (a) is decided by the detector's states, each run's sequence in the report.
    assert claims["collapse"]["rule"] == "detector states (issue 44)"
    assert "## (a) per seed, by the detector's states" in text
    for r in claims["collapse"]["per_run"]:
        assert r["states"] and set(r["states"]) <= set(STATES)
    assert (doc.parent / "reproduction" / "entropy_mi.png").is_file()
    assert (doc.parent / "reproduction" / "correlation.png").is_file()
    # Every run records the code of its RL run and of its warm start; made just now, by this
    # code, none is stale unless it ran on uncommitted changes.
    for run in runs:
        for record in (run["provenance"], run["warm_start_provenance"]):
            assert_records_this_code(record)
        assert run["stale"] is None or "uncommitted changes" in run["stale"]
    assert_records_this_code(results["provenance"])
    assert "## Provenance" in text and "stale runs as of it (made by older code than it): " in text
    assert f"Code of these statistics: commit `{results['provenance']['commit'][:12]}`" in text
    # Resume: every run is done, so the second call only recomputes the statistics. Without
    # --doc, from the checkout's root, a quick study writes its report into its results folder
    # and leaves docs/ as it was, byte for byte (it once overwrote docs/reproduction.md).
    before = {p: p.stat().st_mtime for p in out.glob("runs/**/done.json")}
    docs = {p: p.read_bytes() for p in (ROOT / "docs").rglob("*") if p.is_file()}
    monkeypatch.chdir(ROOT)
    assert main(["--quick", "--out", str(out)]) == 0
    assert {p: p.read_bytes() for p in (ROOT / "docs").rglob("*") if p.is_file()} == docs
    assert (out / "reproduction.md").read_text().startswith("# RAGEN-2's claims")
    assert (out / "reproduction" / "entropy_mi.png").is_file()
    assert {p: p.stat().st_mtime for p in out.glob("runs/**/done.json")} == before
    assert "reproduced=" in capsys.readouterr().out
    # Each finished run left a record beside the report (committed with it): on a fresh machine,
    # where runs/ is gone, the same command reads the records and runs nothing again.
    from baselines.studies import ragen2
    from baselines.studies.ragen2 import checkpoint_digest

    digest = checkpoint_digest(out / "sft" / "Bandit-v0" / "checkpoint")
    records = doc.parent / "reproduction" / "runs"
    for run in runs:
        record = json.loads((records / run["claim"] / "Bandit-v0" / run["arm"]
                             / f"seed{run['seed']}.json").read_text())  # fmt: skip
        assert record["warm_start_digest"] == digest
        assert record["spec_fingerprint"] == results["spec_fingerprint"]
        assert record["series"] == run["series"] and record["wall_s"] == run["wall_s"] > 0
    import shutil

    shutil.rmtree(out / "runs")

    def never(*args):
        raise AssertionError("a recorded run was run again")

    monkeypatch.setattr(ragen2, "_execute", never)
    assert main(["--quick", "--out", str(out), "--doc", str(doc)]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["runs"] == runs and again["claims"] == claims
    cost = f"the runs' own wall time {sum(r['wall_s'] for r in runs) / 3600:.2f} CPU-hours over 8"
    assert cost in doc.read_text()
    # A record from another warm start (rebuilt to other weights elsewhere) is refused, by name.
    first = sorted(records.rglob("*.json"))[0]
    kept = first.read_text()
    first.write_text(kept.replace(digest, "0" * 16))
    with pytest.raises(SystemExit):
        main(["--quick", "--out", str(out), "--doc", str(doc)])
    assert "runs from two warm starts do not mix" in capsys.readouterr().err
    first.write_text(kept)
    # --stop-after: no run starts after the time is up; without every record there is no report,
    # exit 3, and the message says how to go on.
    piece = tmp_path / "piece" / "reproduction.md"
    assert main(["--quick", "--out", str(out), "--doc", str(piece), "--stop-after", "0"]) == 3
    assert not piece.exists() and not (piece.parent / "reproduction" / "runs").exists()
    assert "0 of 8 recorded" in capsys.readouterr().out
    # A warm start that fails the gate: no run of its env starts, each is void with the reason,
    # and no claim counts one.
    import yaml

    spec = yaml.safe_load((ROOT / "baselines" / "studies" / "ragen2.yaml").read_text())
    spec["quick"]["gate"]["mi_fraction"] = 1.5  # more than any MI can reach
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump(spec))
    # Another spec: the study's folder is refused (its gate and runs are not this spec's) ...
    with pytest.raises(SystemExit):
        main(["--quick", "--spec", str(strict), "--out", str(out)])
    assert "was made by another spec" in capsys.readouterr().err
    # ... so it gets its own, given the same warm start on purpose (the check is of the gate).
    from baselines.studies.ragen2 import claim_folder

    fresh = tmp_path / "strict-study"
    claim_folder(fresh, load_study(strict, quick=True), strict)
    shutil.copytree(out / "sft", fresh / "sft")
    out = fresh
    assert main(["--quick", "--spec", str(strict), "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert not results["gate"]["agentgym/Bandit-v0"]["passed"]
    assert all(
        r["void"].startswith("warm-start gate: the oracle reasoning MI") for r in results["runs"]
    )
    assert not (out / "runs").exists()
    assert {c["verdict"] for c in results["claims"].values()} == {"inconclusive"}
    assert "| Bandit-v0 | False |" in (out / "reproduction.md").read_text()


def test_every_committed_spec_loads_including_the_pre_registrations() -> None:
    """Each spec in baselines/studies (the confirmatory ones of issue 44 were registered before
    they ran: docs/ragen2.md) is accepted by the loader as written, so a pre-registration cannot
    rot into a file the harness refuses on the day it runs."""
    specs = sorted((ROOT / "baselines" / "studies").glob("*.yaml"))
    names = {p.name for p in specs}
    assert {
        "ragen2_confirm_correlation_ppo.yaml",
        "ragen2_confirm_correlation_drgrpo.yaml",
        "ragen2_confirm_filtering.yaml",
        "ragen2_confirm_collapse.yaml",
    } <= names
    for path in specs:
        assert load_study(path) is not None, path.name
