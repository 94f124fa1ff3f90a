"""The collapse detector's near-chance rule, its degeneracy state and its simulated controls
(issue 44, item 3): :func:`mi_fraction_upper_bound`, the ``degenerate`` state of
:class:`ZScoreTracker`, and :mod:`baselines.collapse.controls` at 100 seeded runs a scenario.

The hand-worked numbers: ceiling log 8 = 2.079442; z_0.95 = Phi^-1(0.95) = 1.644854.
"""

from __future__ import annotations

import math

import pytest
import torch

from baselines.collapse import (
    STATES,
    DetectorSettings,
    ZScoreTracker,
    mi_fraction_upper_bound,
    mi_metrics,
)
from baselines.collapse.controls import SCENARIOS, run_scenario

LOG8 = math.log(8)


def metrics(
    mi: float,
    se: float = 0.0,
    *,
    p: float = 0.5,
    entropy: float = 1.0,
    nll: float | None = None,
) -> dict[str, float]:
    """What mi_metrics and the trainer hand the tracker, written by hand: 32 pairs of 8 prompts."""
    out = {
        "mi_zscore": 0.0,
        "mi_estimate": mi,
        "mi_upper_bound": LOG8,
        "mi_pvalue": p,
        "mi_stderr": se,
        "num_reasonings": 32.0,
        "num_prompts": 8.0,
        "conditional_entropy_est_per_token": entropy,
        "valid_thinking_rate": 1.0,
    }
    if nll is not None:
        out["reference_nll_per_token"] = nll
    return out


def states(tracker: ZScoreTracker, evaluations) -> list[str]:
    out = []
    for m in evaluations:
        logged = tracker.update(m)
        assert sum(logged[f"collapse/state_{s}"] for s in STATES) == 1.0
        out.append(tracker.state)
    return out


DEPENDENT = metrics(1.6, 0.1, p=0.01)  # 77 % of the ceiling, significant


# ---------------------------------------------------------------- the upper confidence bound


def test_upper_bound_by_hand():
    # f = mean(0.05, 0.10, 0.15) / log 8 = 0.10 / 2.079442 = 0.048090;
    # s = sqrt(3 x 0.06^2) / 3 / log 8 = 0.034641 / 2.079442 = 0.016659;
    # ucb = 0.048090 + 1.644854 x 0.016659 = 0.075491.
    assert mi_fraction_upper_bound([0.05, 0.10, 0.15], [0.06] * 3, [LOG8] * 3) == pytest.approx(
        0.075491, abs=1e-6
    )
    # se 0.2 each: s = 0.115470 / 2.079442 = 0.055529; ucb = 0.048090 + 0.091337 = 0.139427.
    assert mi_fraction_upper_bound([0.05, 0.10, 0.15], [0.2] * 3, [LOG8] * 3) == pytest.approx(
        0.139427, abs=1e-6
    )
    # At 0.99 (z = 2.326348): 0.048090 + 2.326348 x 0.016659 = 0.086845.
    assert mi_fraction_upper_bound(
        [0.05, 0.10, 0.15], [0.06] * 3, [LOG8] * 3, confidence=0.99
    ) == pytest.approx(0.086845, abs=1e-6)
    # No spread: the bound is the mean; an unknown stderr counts as 0; one prompt gives 0.
    assert mi_fraction_upper_bound([0.2], [0.0], [2.0]) == pytest.approx(0.1)
    assert mi_fraction_upper_bound([0.2], [math.nan], [2.0]) == pytest.approx(0.1)
    assert mi_fraction_upper_bound([0.0], [0.5], [0.0]) == 0.0
    # Confidence 0.5 (z = 0): the plain mean.
    assert mi_fraction_upper_bound([0.1, 0.3], [1.0, 1.0], [1.0, 1.0], 0.5) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="confidence"):
        mi_fraction_upper_bound([0.1], [0.1], [1.0], confidence=1.0)
    with pytest.raises(ValueError, match="equal"):
        mi_fraction_upper_bound([0.1], [], [1.0])


def test_near_chance_is_decided_by_the_bound_not_the_p_values():
    # Significant p-values (0.001) in the window no longer block "near chance": the bound 0.0755
    # is below 0.1 (the old rule called this window undecided).
    window = [metrics(mi, 0.06, p=0.001) for mi in (0.05, 0.10, 0.15)]
    assert states(ZScoreTracker(), window) == ["undecided"] * 2 + ["never_dependent"]
    # The boundary sits at the hand-worked 0.075491.
    assert states(ZScoreTracker(near_fraction=0.0755), window)[-1] == "never_dependent"
    assert states(ZScoreTracker(near_fraction=0.0754), window)[-1] == "undecided"
    # The same means with a wide error (bound 0.1394): not shown to be near chance.
    wide = [metrics(mi, 0.2) for mi in (0.05, 0.10, 0.15)]
    assert states(ZScoreTracker(), wide)[-1] == "undecided"


# ---------------------------------------------------------------- the degeneracy state


@pytest.mark.parametrize(
    ("after", "state"),
    [
        (metrics(0.0, entropy=1.0), "collapsed"),  # a template: MI at chance, entropy held
        (metrics(0.0, entropy=1.4), "collapsed"),  # 1.4 x the warm start: within 1.5
        (metrics(0.0, entropy=1.6), "degenerate"),  # 1.6 x: noise
        (metrics(0.0, entropy=3.0), "degenerate"),
        (metrics(0.0, entropy=1.0, nll=2.0), "degenerate"),  # unlikely under the warm start
        (metrics(0.0, entropy=1.0, nll=1.2), "collapsed"),
    ],
)
def test_noise_is_degenerate_not_a_template(after, state):
    # Warm start (the first evaluation) at entropy 1.0; the fall: 1.6 nats (se of the window's
    # mean sqrt(3 x 0.1^2) / 3 = 0.058) to 0, far beyond 4 standard errors.
    tracker = ZScoreTracker()
    got = states(tracker, [DEPENDENT] * 3 + [after] * 3)
    assert got == ["dependent"] * 3 + ["undecided"] * 2 + [state]
    assert tracker.template_collapse == (state == "collapsed")


def test_degenerate_needs_near_chance_and_a_never_dependent_policy_can_be_degenerate():
    # Dependent but noisy (entropy 3 x): still dependent; MI is what is read first.
    loud = metrics(1.6, 0.1, p=0.01, entropy=3.0)
    assert states(ZScoreTracker(), [DEPENDENT] + [loud] * 3)[-1] == "dependent"
    # Never dependent, then blind noise: degenerate once the whole window is noise.
    blind = [metrics(0.0, entropy=1.0)] * 3 + [metrics(0.0, entropy=2.0)] * 4
    got = states(ZScoreTracker(), blind)
    assert got == ["undecided"] * 2 + ["never_dependent"] * 3 + ["degenerate"] * 2


def test_one_noisy_evaluation_does_not_make_a_window_degenerate():
    # The switch of the real-run prototype: entropies 0.49, 0.44 then 0.16 at a warm start of
    # 0.16 (mean 0.36 > 1.5 x 0.16, but the last is at the warm start's level): a template.
    warm = metrics(2.0, 0.0, p=0.01, entropy=0.155)
    switch = [metrics(0.0, entropy=h) for h in (0.485, 0.437, 0.156)]
    assert states(ZScoreTracker(), [warm] * 3 + switch)[-1] == "collapsed"


def test_the_reference_entropy_setting_replaces_the_first_evaluation():
    noise = metrics(0.0, entropy=3.0)
    # Warm start measured at 2.5 nats per token: 3.0 < 1.5 x 2.5, a template.
    assert states(ZScoreTracker(reference_entropy=2.5), [DEPENDENT] * 3 + [noise] * 3)[-1] == (
        "collapsed"
    )
    assert states(ZScoreTracker(degenerate_factor=4.0), [DEPENDENT] * 3 + [noise] * 3)[-1] == (
        "collapsed"
    )


def test_noise_after_a_collapse_clears_the_flag():
    template, noise = metrics(0.0, entropy=1.0), metrics(0.0, entropy=3.0)
    tracker = ZScoreTracker()
    got = states(tracker, [DEPENDENT] * 3 + [template] * 3 + [noise] * 4 + [template])
    assert got == (
        ["dependent"] * 3
        + ["undecided"] * 2
        + ["collapsed"] * 3  # the flag holds while the window still has a template in it
        + ["degenerate"] * 2  # a window of noise: the flag is cleared
        + ["collapsed"]  # a template again (near chance, the fall, entropy >= 0.8 x 1.0)
    )
    restored = ZScoreTracker()
    restored.load_state_dict(tracker.state_dict())
    assert [e.state for e in restored.history] == got


def test_new_settings_are_checked():
    for name, bad in (("near_confidence", 1.0), ("near_confidence", 0.4)):
        with pytest.raises(ValueError, match=rf"diagnostics\.{name}: must lie in \[0.5, 1\)"):
            DetectorSettings(**{name: bad}).check_settings("diagnostics.")
    with pytest.raises(ValueError, match="degenerate_factor: must be >= 1"):
        DetectorSettings(degenerate_factor=0.9).check_settings()
    with pytest.raises(ValueError, match="reference_entropy: must be >= 0"):
        DetectorSettings(reference_entropy=-1.0).check_settings()


# ---------------------------------------------------------------- simulated controls

# Measured with `python scripts/collapse_controls.py` (100 runs each, seeds 0-99; docs/ragen2.md):
# flagged 100, 100, 96, 100, 0, 0 of 100; degenerate 0, 0, 0, 0, 0, 100. The margins below are
# wide (a change of the simulator's draws must not fail them; a change of the rules should).
# scenario: allowed (flagged, flagged within one window, degenerate), each a closed range of runs.
MARGINS = {
    "residual MI 0.03 nats": ((90, 100), (85, 100), (0, 0)),
    "residual MI 0.05 nats": ((90, 100), (80, 100), (0, 0)),
    "residual MI 0.10 nats": ((80, 100), (50, 100), (0, 0)),
    "exact independence": ((95, 100), (95, 100), (0, 0)),
    "input-dependent throughout": ((0, 2), (0, 2), (0, 0)),
    "input-blind noise, entropy x3": ((0, 2), (0, 2), (95, 100)),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_simulated_control(scenario):
    result = run_scenario(scenario, runs=100, seed=0)
    print(
        f"\n{scenario.name}: flagged {result.flagged}/100, within one window "
        f"{result.within_window}/100, latency {result.latency()}, degenerate {result.degenerate}/100"
    )
    keys = ("flagged", "within_window", "degenerate")
    for key, (low, high) in zip(keys, MARGINS[scenario.name], strict=True):
        assert low <= getattr(result, key) <= high, (key, getattr(result, key))
    # A flag never comes before the change: delays are >= 0.
    assert all(d >= 0 for d in result.delays)


# ---------------------------------------------------------------- real-run controls

# The "tiny" policy (2-layer, 64-wide Llama, word-level vocabulary; nothing downloaded), trained by
# teacher forcing on (prompt, reasoning) pairs, and evaluated as the trainer does: 4 reasonings
# sampled from each of 8 prompts, scored against every prompt (score_matrix), mi_metrics with 99
# permutations, the tracker's state. The arm sits just before <think>, so a 2-layer model learns
# to copy it within a few hundred steps (the warm start trains until its loss shows it has).
ARMS = ("Teacher", "Doctor", "Farmer", "Pilot", "Singer", "Baker", "Judge", "Nurse")
FILLERS = ("let me think", "I will look again", "one more careful look", "first read the names")
PROMPT = "<|im_start|> user Pick an arm <|im_end|> <|im_start|> assistant {arm} <think>"


def oracle(arm: str, filler: str) -> str:
    """Input-dependent: names the prompt's arm, then one of 4 fillers (log 4 nats of its own)."""
    return f"{arm} , {filler} </think>"


def blind(arm: str, filler: str) -> str:
    """Well-formed and input-blind: the same 4 fillers, closed by </think>, the arm never read."""
    return f"mine , {filler} </think>"


#: Well-formed, input-blind, high-entropy reasonings: 6 words drawn uniformly (with replacement)
#: from the fillers' 14 words (log 14 = 2.6 nats a word), closed by </think>; ``real_run`` draws
#: them afresh at every step.
NOISE = "noise"
NOISE_WORDS = sorted({w for f in FILLERS for w in f.split()})


# The oracle's loss floor: log 4 nats (the filler) over its 6-8 tokens, ~0.2 a token; a warm start
# that has not learned to copy the arm sits at ~0.5 (log 8 more).
WARM_LOSS, MAX_WARM_STEPS = 0.3, 1000  # seeds 0-2 took 188, 482, 165


def real_run(seed: int, then, evaluations: int = 5, every: int = 10):
    """States of 3 evaluations of an oracle warm start (oracle steps until the mean loss of 10
    steps is below ``WARM_LOSS``), then ``evaluations`` more, each after ``every`` steps on
    ``then``'s reasonings (Adam, lr 1e-2, 32 pairs a step)."""
    from baselines.collapse import score_matrix
    from baselines.llm.policy import build_tiny_policy

    torch.manual_seed(seed)
    texts = [PROMPT.format(arm=a) for a in ARMS] + list(FILLERS) + ["mine , </think>"]
    model, tok = build_tiny_policy(texts, seed=seed)
    close = tok.convert_tokens_to_ids("</think>")
    prompts = [tok(PROMPT.format(arm=a), add_special_tokens=False).input_ids for a in ARMS]
    targets = {
        (make, j, f): tok(make(a, filler), add_special_tokens=False).input_ids
        for make in (oracle, blind)
        for j, a in enumerate(ARMS)
        for f, filler in enumerate(FILLERS)
    }
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(seed)

    def step(make) -> float:
        fillers = torch.randint(len(FILLERS), (len(ARMS), 4), generator=gen).tolist()
        if make == NOISE:
            picks = torch.randint(len(NOISE_WORDS), (len(ARMS) * 4, 6), generator=gen).tolist()
            words = [" ".join(NOISE_WORDS[w] for w in row) + " </think>" for row in picks]
            zs = [tok(text, add_special_tokens=False).input_ids for text in words]
            rows = [(prompts[r // 4], z) for r, z in enumerate(zs)]
        else:
            rows = [
                (prompts[j], targets[(make, j, f)]) for j in range(len(ARMS)) for f in fillers[j]
            ]

        width = max(len(p) + len(z) for p, z in rows)
        ids = torch.full((len(rows), width), close)
        labels = torch.full((len(rows), width), -100)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (p, z) in enumerate(rows):
            ids[r, : len(p) + len(z)] = torch.tensor(p + z)
            labels[r, len(p) : len(p) + len(z)] = torch.tensor(z)
            mask[r, : len(p) + len(z)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    def evaluate(e: int) -> dict[str, float]:
        model.eval()
        torch.manual_seed(1000 * seed + e)
        x = torch.tensor([p for p in prompts for _ in range(4)])  # all prompts have one length
        with torch.no_grad():
            out = model.generate(
                input_ids=x,
                attention_mask=torch.ones_like(x),
                do_sample=True,
                max_new_tokens=12,
                eos_token_id=close,
                pad_token_id=close,
            )
        model.train()
        zs, index = [], []
        for r, row in enumerate(out[:, x.shape[1] :].tolist()):
            if close in row and row.index(close) > 0:
                zs.append(row[: row.index(close)])
                index.append(r // 4)
        m = mi_metrics(
            score_matrix(model, prompts, zs),
            torch.tensor(index),
            torch.tensor([len(z) for z in zs]),
            num_permutations=99,
            seed=e,
        )
        m.update(valid_thinking_rate=len(zs) / len(out))
        return m

    losses = [step(oracle) for _ in range(10)]
    while sum(losses[-10:]) / 10 >= WARM_LOSS:
        assert len(losses) < MAX_WARM_STEPS, f"seed {seed}: the warm start did not learn the arm"
        losses.append(step(oracle))
    print(f"\nseed {seed}: warm start {len(losses)} oracle steps, loss {losses[-1]:.3f}")
    tracker = ZScoreTracker()
    got = []
    for e in range(3 + evaluations):
        if e >= 3:
            for _ in range(every):
                step(then)
        tracker.update(evaluate(e))
        got.append(tracker.state)
    return got


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_real_run_positive_control_input_blind_training_is_a_template(seed):
    got = real_run(seed, blind)
    print(f"\nseed {seed}, oracle then input-blind: {got}")
    assert got[:3] == ["dependent"] * 3
    assert got[-1] == "collapsed" and "degenerate" not in got


def test_real_run_negative_control_oracle_training_is_never_flagged():
    got = real_run(0, oracle)
    print(f"\noracle throughout: {got}")
    assert "collapsed" not in got and "degenerate" not in got
    assert got.count("dependent") >= 6


def test_real_run_noise_control_is_degenerate_not_a_template():
    got = real_run(0, NOISE)
    print(f"\noracle then input-blind noise: {got}")
    assert got[:3] == ["dependent"] * 3
    assert got[-1] == "degenerate" and "collapsed" not in got
