"""Issue 13's diagnostics faults, each pinned by values worked out by hand.

Reference: mll-lab-nu/RAGEN ``ragen/trainer/collapse_metrics.py`` (MI-ZScore, its EMA, the chance
level with repeated prompts) and ``ragen/llm_agent/ctx_manager.py`` (the reasoning span).
"""

import math

import pytest
import torch

from baselines.collapse import ZScoreTracker, mi_metrics, mi_pairs, reasoning_text, retrieval_chance

# ---------------------------------------------------------------- Z: the span RAGEN scores


@pytest.mark.parametrize(
    ("response", "z"),
    [
        ("<think> arm A paid 0.7 </think><answer>A</answer>", "arm A paid 0.7"),
        ("<think>\nline one\nline two\n</think> <answer>B</answer>", "line one\nline two"),
        ("<think>first</think> text <think>second</think>", "first"),  # first closed pair
        ("<think>never closed, no </think> sampled", "never closed, no"),
        ("<think>never closed", ""),  # no </think> is invented
        ("<think>   </think><answer>A</answer>", ""),  # empty after strip
        ("<answer>A</answer>", ""),  # no think block
        ("</think> stray close", ""),
    ],
)
def test_reasoning_text_spans(response, z):
    assert reasoning_text(response) == z
    assert "</think>" not in reasoning_text(response)


def test_reasoning_text_removes_special_tokens():
    assert reasoning_text("<think> a<|im_end|>b </think>", ["<|im_end|>"]) == "ab"


def test_mi_pairs_drops_empty_and_counts():
    prompts = ["x1", "x1", "x2", "x2", "x3"]
    responses = [
        "<think>pull A</think><answer>A</answer>",
        "<think>unclosed",
        "<think>pull B</think><answer>B</answer>",
        "<think> </think><answer>B</answer>",
        "<answer>C</answer>",
    ]
    distinct, zs, index, stats = mi_pairs(prompts, responses)
    assert distinct == ["x1", "x2"]  # x3 has no reasoning left: it is not a column
    assert zs == ["pull A", "pull B"]
    assert index.tolist() == [0, 1]
    assert stats == {"num_pairs_total": 5.0, "num_pairs_valid": 2.0, "valid_thinking_rate": 0.4}
    with pytest.raises(ValueError, match="differ in length"):
        mi_pairs(["x"], [])


# ---------------------------------------------------------------- chance with repeated prompts


def test_chance_with_a_repeated_prompt_hand_values():
    # 4 groups of 2; prompt 0 drawn by two groups: shares w = (1/2, 1/4, 1/4).
    index = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])
    assert retrieval_chance(index, 3, 1) == (0.5, 0.375)  # max w; RAGEN: sum w^2 = 3/8
    assert retrieval_chance(index, 3, 2) == (0.75, 0.75)  # 1/2 + 1/4; RAGEN min(2 * 3/8, 1)
    assert retrieval_chance(index, 3, 4) == (1.0, 1.0)
    # Equal counts: k / K, as before.
    assert retrieval_chance(torch.tensor([0, 0, 1, 1, 2, 2]), 3, 1) == pytest.approx((1 / 3, 1 / 3))


def test_input_agnostic_template_is_not_above_chance():
    # Every z scores the same row: log-likelihoods favour prompt 0 whatever z is (a template:
    # z carries nothing about x). Retrieval always names prompt 0: accuracy = w_0 = 1/2.
    index = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])
    loglik = torch.tensor([[-10.0, -11.0, -12.0]]).repeat(8, 1)
    out = mi_metrics(loglik, index)
    assert out["retrieval_accuracy"] == 0.5
    assert out["retrieval_chance"] == 0.5  # the old min(k / K, 1) said 1/3: "above chance"
    assert out["retrieval_above_chance"] == 0.0
    assert out["retrieval_chance_ragen"] == 0.375
    # No positive MI: the row does not depend on z, so the mean pointwise MI is
    # sum_j w_j l_j - log sum_j w_j exp(l_j) <= 0 (Jensen).
    assert out["mi_estimate"] <= 0


# ---------------------------------------------------------------- RAGEN's MI-ZScore and its EMA


def test_ragen_mi_zscore_hand_values():
    # Two prompts, one z each; per-token probabilities p(z_m | x_j):
    #   z0: 0.6 under x0, 0.2 under x1 -> marginal 0.4, pointwise MI log(0.6 / 0.4) = log 1.5
    #   z1: 0.1 under x0, 0.3 under x1 -> marginal 0.2, pointwise MI log(0.3 / 0.2) = log 1.5
    # population std of (log 0.4, log 0.2) = log(2) / 2 = 0.346574
    # RAGEN MI-ZScore = log 1.5 / (0.346574 + 1e-3) = 0.405465 / 0.347574 = 1.166559
    loglik = torch.tensor([[0.6, 0.2], [0.1, 0.3]]).log()
    index = torch.tensor([0, 1])
    out = mi_metrics(loglik, index, lengths=torch.tensor([1, 1]))
    assert out["mi_estimate"] == pytest.approx(math.log(1.5))
    assert out["ragen_marginal_std_seq"] == pytest.approx(math.log(2) / 2)
    assert out["ragen_mi_zscore_seq"] == pytest.approx(math.log(1.5) / (math.log(2) / 2 + 1e-3))
    assert out["ragen_mi_zscore"] == pytest.approx(1.166559, abs=1e-5)
    # Per-token with lengths 2: every log-likelihood halves; std log(2)/4, MI log(1.5)/2.
    out2 = mi_metrics(loglik * 2, index, lengths=torch.tensor([2, 2]))
    assert out2["mi_estimate_per_token"] == pytest.approx(math.log(1.5))
    assert out2["ragen_mi_zscore"] == pytest.approx(1.166559, abs=1e-5)
    # Summed (the headline) sees probabilities 0.36/0.04 and 0.01/0.09: pointwise MI
    # log(0.36 / 0.2) = log(0.09 / 0.05) = log 1.8.
    assert out2["mi_estimate"] == pytest.approx(math.log(1.8))
    # Equal marginals: std 0, MI-ZScore = MI / 1e-3 = 405.465.
    flat = mi_metrics(torch.tensor([[0.6, 0.2], [0.2, 0.6]]).log(), index)
    assert flat["ragen_mi_zscore_seq"] == pytest.approx(405.465, abs=1e-3)


def test_ragen_zscore_ema_in_tracker():
    loglik = torch.tensor([[0.6, 0.2], [0.1, 0.3]]).log()
    index = torch.tensor([0, 1])
    first = mi_metrics(loglik, index, lengths=torch.tensor([1, 1]))
    second = mi_metrics(torch.tensor([[0.6, 0.2], [0.2, 0.6]]).log(), index, torch.tensor([1, 1]))
    tracker = ZScoreTracker(ema_decay=0.9)
    out = tracker.update(first)
    assert out["collapse/ragen_marginal_std_ema"] == pytest.approx(math.log(2) / 2)
    out = tracker.update(second)
    # EMA: 0.9 * 0.346574 + 0.1 * 0 = 0.311916; z = log 1.5 / (0.311916 + 1e-3) = 1.295762
    assert out["collapse/ragen_marginal_std_ema"] == pytest.approx(0.9 * math.log(2) / 2)
    assert out["collapse/ragen_mi_zscore_ema"] == pytest.approx(1.295762, abs=1e-5)
    assert out["collapse/ragen_mi_zscore_ema_seq"] == pytest.approx(1.295762, abs=1e-5)
    # The permutation z-score keeps its own name.
    assert out["collapse/mi_zscore"] == second["mi_zscore"]


# ---------------------------------------------------------------- the flag: hysteresis


U = math.log(4)


def evaluation(above: float, mi_share: float, pvalue: float) -> dict[str, float]:
    return {
        "mi_zscore": 0.0,
        "mi_estimate": mi_share * U,
        "mi_upper_bound": U,
        "mi_pvalue": pvalue,
        "retrieval_accuracy": 0.25 + above,
        "retrieval_chance": 0.25,
        "num_reasonings": 32.0,
        "num_prompts": 8.0,
    }


DEP = evaluation(0.5, 0.8, 0.005)  # significant, >= 0.2 of the ceiling on average
NEAR = evaluation(0.0, 0.02, 0.5)  # < 0.1 of the ceiling on average, not significant
BETWEEN = evaluation(0.07, 0.15, 0.5)  # neither: the hysteresis band


def run(tracker, sequence, entropy=1.0):
    return [
        (tracker.update(m, entropy)["collapse/template_collapse"], tracker.never_dependent)
        for m in sequence
    ]


def test_flag_rises_after_window_and_holds_through_the_band():
    tracker = ZScoreTracker(window=3)
    flags = [f for f, _ in run(tracker, [DEP, DEP, NEAR, NEAR, NEAR, BETWEEN, DEP, DEP, DEP])]
    # Rises at the 3rd NEAR; a BETWEEN or 2 DEP do not clear it; the 3rd DEP in a row does.
    assert flags == [0, 0, 0, 0, 1, 1, 1, 1, 0]


def test_flag_does_not_flap_around_one_threshold():
    tracker = ZScoreTracker(window=2)
    seq = [DEP, NEAR, NEAR, BETWEEN, NEAR, BETWEEN, NEAR, BETWEEN]
    flags = [f for f, _ in run(tracker, seq)]
    assert flags == [0, 0, 1, 1, 1, 1, 1, 1]  # the old window flag went 1,0,0,0,0,0 here


def test_never_dependent_is_not_collapse():
    # A random-init model: near chance from the first evaluation on.
    tracker = ZScoreTracker(window=3)
    out = run(tracker, [NEAR, NEAR, NEAR, NEAR])
    assert [f for f, _ in out] == [0, 0, 0, 0]
    assert [n for _, n in out] == [False, False, True, True]
    # Once input-dependent, the same pattern is a collapse.
    run(tracker, [DEP])
    out = run(tracker, [NEAR, NEAR, NEAR])
    assert out[-1] == (1.0, False)


def test_flag_reads_whole_batch_entropy_from_the_metrics():
    tracker = ZScoreTracker(window=2, entropy_tol=0.1)
    seq = [
        {**DEP, "conditional_entropy_est_per_token": 2.0},
        {**NEAR, "conditional_entropy_est_per_token": 2.0},
        {**NEAR, "conditional_entropy_est_per_token": 1.9},  # within 10 %
    ]
    outs = [tracker.update(m) for m in seq]
    assert outs[-1]["collapse/entropy"] == 1.9
    assert outs[-1]["collapse/template_collapse"] == 1.0
    # Entropy falling with the MI (1.0 < 0.9 * 2.0) is not template collapse.
    tracker = ZScoreTracker(window=2)
    for m, h in [(DEP, 2.0), (NEAR, 2.0), (NEAR, 1.0)]:
        out = tracker.update({**m, "conditional_entropy_est_per_token": h})
    assert out["collapse/template_collapse"] == 0.0
    with pytest.raises(KeyError, match="conditional_entropy_est_per_token"):
        ZScoreTracker().update(DEP)


def test_flag_state_survives_a_checkpoint():
    tracker = ZScoreTracker(window=2)
    run(tracker, [DEP, NEAR, NEAR, BETWEEN])
    restored = ZScoreTracker(window=2)
    restored.load_state_dict(tracker.state_dict())
    assert restored.template_collapse
    # A state saved before the states (no p-values in its history) keeps its saved flag.
    fields = ("entropy", "retrieval_above_chance", "mi_estimate", "mi_upper_bound")
    history = [{k: e[k] for k in fields} for e in tracker.state_dict()["history"]]
    old = {"zscore_ema": 0.0, "history": history, "flag": True, "ever_dependent": True}
    replayed = ZScoreTracker(window=2)
    replayed.load_state_dict(old)
    assert replayed.template_collapse
    with pytest.raises(ValueError, match="dependent_fraction"):
        ZScoreTracker(near_fraction=0.3, dependent_fraction=0.2)
