"""Controls of the collapse detector (issue 23): :class:`ZScoreTracker` on simulated evaluations.

Every evaluation here is what the trainer hands the tracker: :func:`mi_metrics` of a
log-likelihood matrix, plus the sample statistics. The matrices are drawn from a model with a known
dependence, so the p-values, MI and entropies come from the real estimator:

K prompts x ``per`` reasonings; reasoning m of prompt x carries a class c_m, equal to x with
probability q, else uniform over the K prompts, and a free part of L_m tokens at entropy h nats per
token. Then ``log p(z_m | x_j) = log p(rest_m) + log(q [c_m = j] + (1 - q) / K)`` exactly, and
``I(X; Z) = a log(aK) + (K - 1) b log(bK)`` with ``a = q + (1 - q) / K``, ``b = (1 - q) / K``.
"""

from __future__ import annotations

import math

import pytest
import torch

from baselines.collapse import STATES, ZScoreTracker, mi_metrics
from baselines.collapse.controls import q_for_mi, simulated_evaluation, true_mi

K, PER = 8, 4  # 32 pairs, ceiling log 8 = 2.08 nats
PERMUTATIONS = 99  # smallest p-value 0.01: the default significance is reachable

# The simulator is shared with the controls of issue 44 (tests/test_collapse_controls.py).
evaluation = simulated_evaluation


def run(tracker: ZScoreTracker, evaluations) -> list[str]:
    states = []
    for metrics in evaluations:
        out = tracker.update(metrics)
        assert sum(out[f"collapse/state_{s}"] for s in STATES) == 1.0
        assert out["collapse/template_collapse"] == out["collapse/state_collapsed"]
        states.append(tracker.state)
    return states


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def test_simulator_has_the_stated_dependence():
    gen = torch.Generator().manual_seed(0)
    q = q_for_mi(0.04)
    mis = [evaluation(gen, q, seed=s)["mi_estimate"] for s in range(100)]
    mean = sum(mis) / len(mis)
    assert true_mi(q) == pytest.approx(0.04, abs=1e-9)
    assert mean == pytest.approx(0.04, abs=0.015)  # unbiased estimator, SD of one ~0.055
    assert evaluation(gen, 0.0)["mi_estimate"] == pytest.approx(0.0, abs=1e-12)  # equal columns


def test_mi_stderr_is_the_spread_of_the_pointwise_terms():
    loglik = torch.tensor(
        [[0.6, 0.2, 0.2], [0.1, 0.3, 0.6], [0.5, 0.4, 0.1], [0.2, 0.2, 0.6]]
    ).log()
    index = torch.tensor([0, 1, 1, 2])
    weights = torch.tensor([0.25, 0.5, 0.25]).log()
    pointwise = loglik[torch.arange(4), index] - torch.logsumexp(loglik + weights, dim=1)
    out = mi_metrics(loglik, index)
    assert out["mi_estimate"] == pytest.approx(float(pointwise.mean()))
    assert out["mi_stderr"] == pytest.approx(float(pointwise.std()) / 2)
    assert mi_metrics(loglik[:1, :1], index[:1])["mi_stderr"] == 0.0


# ---------------------------------------------------------------- positive control

# Input-dependent (I = 1.61 nats, 78 % of the ceiling), then MI falls to chance (q = 0: exact
# independence) at evaluation 7 and stays there.
FALL = [0.9] * 5 + [0.6, 0.3] + [0.0] * 8
REACHES_CHANCE = FALL.index(0.0)
CONSTANT = [1.0] * len(FALL)
# A template settling from an entropy peak at the onset of the collapse (1.3, then down 8 % an
# evaluation to 0.9): the old rule (window minimum >= 0.9 x the window's first entropy) waited
# until the drift stopped (fired 5-6 evaluations after MI reached chance on the 3 seeds).
SETTLING = [1.0] * 5 + [1.1, 1.25, 1.3, 1.2, 1.1, 1.02, 0.95] + [0.9] * 3


@pytest.mark.parametrize("entropies", [CONSTANT, SETTLING], ids=["constant", "settling"])
def test_collapse_fires_within_one_window_of_mi_reaching_chance(entropies):
    delays = []
    for seed in range(3):
        gen = torch.Generator().manual_seed(100 + seed)
        tracker = ZScoreTracker()
        evals = [
            evaluation(gen, q, h, seed=s)
            for s, (q, h) in enumerate(zip(FALL, entropies, strict=True))
        ]
        states = run(tracker, evals)
        assert states[:5] == ["dependent"] * 5
        fired = states.index("collapsed")
        assert "collapsed" not in states[:REACHES_CHANCE]
        assert set(states[fired:]) == {"collapsed"}  # stays raised
        delays.append(fired - REACHES_CHANCE)
    print(f"\ndetection delay (evaluations after MI reached chance), 3 seeds: {delays}")
    assert all(0 <= d < tracker.window for d in delays)


def test_flag_clears_after_window_dependent_evaluations():
    gen = torch.Generator().manual_seed(7)
    qs = [0.9] * 3 + [0.0] * 3 + [0.9] * 4
    states = run(ZScoreTracker(), [evaluation(gen, q, seed=s) for s, q in enumerate(qs)])
    assert states == ["dependent"] * 3 + ["undecided"] * 2 + ["collapsed"] * 4 + ["dependent"]


# ---------------------------------------------------------------- negative controls


def test_exact_independence_is_never_dependent_and_never_fires():
    gen = torch.Generator().manual_seed(1)
    states = run(ZScoreTracker(), [evaluation(gen, 0.0, seed=s) for s in range(10)])
    assert states == ["undecided"] * 2 + ["never_dependent"] * 8


def test_entropy_falling_with_the_mi_is_not_template_collapse():
    gen = torch.Generator().manual_seed(2)
    entropies = [1.0] * 7 + [0.6] * 8  # the policy converging to one output
    evals = [
        evaluation(gen, q, h, seed=s) for s, (q, h) in enumerate(zip(FALL, entropies, strict=True))
    ]
    states = run(ZScoreTracker(), evals)
    assert "collapsed" not in states and states[-1] == "undecided"


def report(label: str, fired: int, runs: int) -> float:
    """Print the false-positive rate with its Wilson 95 % interval; return the upper bound."""
    low, high = wilson(fired, runs)
    print(f"\n{label}: flag fired in {fired}/{runs} runs, Wilson 95% [{low:.3f}, {high:.3f}]")
    return high


def stationary_runs(q: float, k: int, per: int, runs: int, seed: int) -> tuple[int, int]:
    """Runs of 15 evaluations at a constant dependence q: (runs flagged, runs with a dependent
    evaluation)."""
    fired = dependent = 0
    for r in range(runs):
        gen = torch.Generator().manual_seed(seed + r)
        states = run(ZScoreTracker(), [evaluation(gen, q, k=k, per=per, seed=s) for s in range(15)])
        fired += "collapsed" in states
        dependent += "dependent" in states
    return fired, dependent


def test_stationary_weak_dependence_false_positive_rate():
    """I = 0.04 nats (1.9 % of the ceiling), 32 pairs, entropy constant, 15 evaluations a run:
    the flag fired in 30 of these 200 runs under the old rule (15 %)."""
    runs = 200
    fired, dependent = stationary_runs(q_for_mi(0.04), k=K, per=PER, runs=runs, seed=10_000)
    assert dependent == 0  # never significant and material together
    assert report("stationary I = 0.04 nats, 32 pairs", fired, runs) <= 0.05


def test_stationary_dependence_at_the_minimum_sample_false_positive_rate():
    """16 pairs of 4 prompts (the smallest sample with a verdict), I = 0.16 nats (11 % of the
    ceiling): the averaged fraction crosses both bands by noise; without the significant-fall
    test the flag fired in 192 of 500 runs (38 %)."""
    runs = 200
    fired, _ = stationary_runs(0.35, k=4, per=4, runs=runs, seed=20_000)
    assert report("stationary I = 0.16 nats, 16 pairs", fired, runs) <= 0.05


# ---------------------------------------------------------------- format collapse, tiny samples


def test_format_collapse_is_its_own_state():
    gen = torch.Generator().manual_seed(3)
    evals = [evaluation(gen, 0.9, seed=s) for s in range(5)]
    # Replies stop closing </think>: 64 turns, of which 26, 6, 1, 0 keep a reasoning.
    evals.append(evaluation(gen, 0.0, per=3, seed=5, valid_rate=0.4))  # 24 pairs scored
    tiny = torch.tensor([0, 1, 2, 3, 0, 1]), torch.zeros(6, 4)
    evals.append(mi_metrics(tiny[1], tiny[0], torch.full((6,), 20), num_permutations=PERMUTATIONS))
    evals[-1].update(num_pairs_total=64.0, num_pairs_valid=6.0, valid_thinking_rate=6 / 64)
    for valid in (1, 0):  # fewer than 2 prompts: the trainer scores nothing
        evals.append(
            {
                "num_pairs_total": 64.0,
                "num_pairs_valid": float(valid),
                "valid_thinking_rate": valid / 64,
                "num_reasonings": float(valid),
                "num_prompts": float(valid),
            }
        )
    tracker = ZScoreTracker()
    states = run(tracker, evals)
    assert states == ["dependent"] * 5 + ["format_collapsed"] * 4
    out = tracker.update(evals[-1])
    assert out["collapse/template_collapse"] == 0.0
    assert "collapse/mi_fraction" not in out  # nothing scored, nothing made up


def test_tiny_samples_are_insufficient():
    gen = torch.Generator().manual_seed(4)
    evals = [evaluation(gen, 0.9, seed=s) for s in range(4)]
    # Evaluations of 3 valid replies of 3 prompts (the old flag fired on these), then 16 pairs of
    # 2 prompts: at chance, but no verdict.
    evals += [evaluation(gen, 0.0, k=3, per=1, seed=10 + s) for s in range(4)]
    evals += [evaluation(gen, 0.0, k=2, per=8, seed=20 + s) for s in range(3)]
    states = run(ZScoreTracker(), evals)
    assert states == ["dependent"] * 4 + ["insufficient_sample"] * 7
    # The sample limits are settings.
    assert run(ZScoreTracker(min_pairs=2, min_prompts=2), evals[4:5]) == ["undecided"]


def test_checkpoint_round_trip_keeps_the_state():
    gen = torch.Generator().manual_seed(5)
    qs = [0.9] * 3 + [0.0] * 3 + [0.9]
    tracker = ZScoreTracker()
    states = run(tracker, [evaluation(gen, q, seed=s) for s, q in enumerate(qs)])
    assert states[-1] == "collapsed"  # one dependent evaluation does not clear it
    restored = ZScoreTracker()
    restored.load_state_dict(tracker.state_dict())
    assert [e.state for e in restored.history] == states
    assert restored.template_collapse and restored._clear_run == 1
    nothing = {"valid_thinking_rate": 0.0, "num_reasonings": 0.0, "num_prompts": 0.0}
    assert restored.update(nothing)["collapse/state_format_collapsed"] == 1.0
    with pytest.raises(KeyError, match="mi_estimate"):
        restored.update({"mi_zscore": 1.0})


@pytest.fixture(scope="module")
def smol_tokenizer():
    from transformers import AutoTokenizer

    from baselines.llm.policy import embedded_model_path

    tok = AutoTokenizer.from_pretrained(embedded_model_path())
    tok.padding_side = "left"
    return tok


def test_a_z_that_starts_or_ends_with_white_space_ids_is_scored_verbatim(smol_tokenizer):
    """Issue 44: a newline sampled right after ``<think>`` (and one before ``</think>``) was cut
    from the scored z, so the scorer teacher-forced a sequence the policy never sampled. z is now
    every sampled id between the tags; a span of white space only is still ``"empty"``."""
    from baselines.collapse.reasoning import reasoning_span
    from tests.test_episodes import ScriptedEngine, _play

    tok = smol_tokenizer
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert newline and not tok.decode(newline).strip()  # ids that decode to white space only
    body = tok("arm A paid 0.7", add_special_tokens=False)["input_ids"]
    close = tok("</think><answer>Up</answer>", add_special_tokens=False)["input_ids"]
    reply = newline + body + newline + close
    (episode,) = _play(tok, ScriptedEngine(tok, [reply], set()), env_kwargs={"max_turns": 1})
    z, status = reasoning_span(tok, episode.turns[0])
    assert status == "valid" and z == newline + body + newline
    assert tok.decode(z) == "\narm A paid 0.7\n"
    # Only white space inside: no z to score, dropped as empty (and counted as invalid thinking).
    reply = newline + newline + close
    (episode,) = _play(tok, ScriptedEngine(tok, [reply], set()), env_kwargs={"max_turns": 1})
    assert reasoning_span(tok, episode.turns[0]) == ([], "empty")
