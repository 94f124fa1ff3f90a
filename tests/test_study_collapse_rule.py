"""Claim (a) decided by the collapse detector's states (issue 44, item 4): the rule
pre-registered in docs/ragen2.md, "(a), with an informative control, decided by the detector's
states", on runs whose state sequences and entropies are written by hand."""

from __future__ import annotations

import json
import math

import pytest

from baselines.collapse.detector import STATES
from baselines.studies.ragen2 import (
    SERIES_KEYS,
    _claim_collapse,
    _decide,
    _scores,
    state_sequence,
)


def _run(arm: str, seed: int, states: list[str], entropy: list[float], mi=None) -> dict:
    """A run's record as :func:`_scores` makes it from metrics rows: one evaluation every 2
    steps with the given state, entropy and MI (ceiling 2.0; an MI only where the state holds
    one)."""
    rows = []
    for i, (state, h) in enumerate(zip(states, entropy, strict=True)):
        row = {"step": 2 * i, "collapse/entropy": h, "collapse/valid_thinking_rate": 0.9}
        row |= {f"collapse/state_{s}": float(s == state) for s in STATES}
        if state not in ("format_collapsed", "insufficient_sample"):
            row |= {"collapse/mi_estimate": (mi or [1.0] * len(states))[i]}
            row |= {"collapse/mi_upper_bound": 2.0, "collapse/retrieval_above_chance": 0.2}
            row |= {"collapse/num_reasonings": 32.0}
        rows.append(row)
    rows.append({"step": 2 * len(states), "val/success_rate": 0.5})
    rows = [json.loads(json.dumps(r)) for r in rows]
    return {"claim": "collapse", "env": "agentgym/Bandit-v0", "arm": arm, "seed": seed,
            **_scores(rows)}  # fmt: skip


D, C, U, F, N, G = "dependent", "collapsed", "undecided", "format_collapsed", "insufficient_sample", "degenerate"  # fmt: skip


def test_state_series_are_kept_for_every_state():
    assert {f"collapse/state_{s}" for s in STATES} | {"collapse/num_reasonings"} <= set(SERIES_KEYS)
    run = _run("control", 0, [D, N, C], [1.0, 1.0, 1.0])
    assert state_sequence(run["series"]) == [(0, D), (2, N), (4, C)]
    assert state_sequence({}) == []


def test_reproduced_when_every_seed_passes_all_three_checks():
    runs = [
        _run("regularised", 0, [D, D, U, C, C], [1.0, 1.0, 1.1, 1.2, 1.2]),
        _run("control", 0, [D, D, D, D, D], [1.0, 0.9, 0.8, 0.8, 0.8]),
        # Ends insufficient_sample after collapsed: the MI history's last state is collapsed.
        _run("regularised", 1, [D, C, C, N], [1.0, 1.3, 1.3, 1.3]),
        # The control's last evaluation has no MI: its MI history still ends dependent.
        _run("control", 1, [D, U, D, F], [1.0, 1.0, 1.0, 1.0]),
    ]
    a = _claim_collapse(runs)
    assert a["per_seed"] == [
        {"seed": 0, "regularised_collapses": True, "control_holds": True, "bonus_not_inert": True},
        {"seed": 1, "regularised_collapses": True, "control_holds": True, "bonus_not_inert": True},
    ]
    assert a["reproduced"] is True
    by = {(r["arm"], r["seed"]): r for r in a["per_run"]}
    # The last 3 MI-history evaluations: (1.1 + 1.2 + 1.2) / 3 and (0.8 * 3) / 3.
    assert by["regularised", 0]["entropy_mi_history_last"] == pytest.approx(3.5 / 3)
    assert by["control", 0]["entropy_mi_history_last"] == pytest.approx(0.8)
    # Seed 1's regularised run: its MI history is D, C, C (the N holds no MI).
    assert by["regularised", 1]["mi_history_evaluations"] == 3
    assert by["regularised", 1]["last_state"] == N
    assert by["regularised", 1]["last_mi_history_state"] == C
    claims = {"collapse": a}
    _decide(claims, {})
    assert claims["collapse"]["verdict"] == "reproduced"


@pytest.mark.parametrize(
    ("treated", "control", "failed"),
    [
        # The regularised run's last state breaks the format, or is noise: not a template.
        (([D, C, C, F], [1, 2, 2, 2]), ([D, D, D, D], [1, 1, 1, 1]), "regularised_collapses"),
        (([D, C, C, G], [1, 2, 2, 2]), ([D, D, D, D], [1, 1, 1, 1]), "regularised_collapses"),
        # It was collapsed once but its MI history ends dependent again.
        (([D, C, D, N], [1, 2, 2, 2]), ([D, D, D, D], [1, 1, 1, 1]), "regularised_collapses"),
        # The control collapses, or goes degenerate, or ends undecided.
        (([D, C, C, C], [1, 2, 2, 2]), ([D, C, D, D], [1, 1, 1, 1]), "control_holds"),
        (([D, C, C, C], [1, 2, 2, 2]), ([D, G, D, D], [1, 1, 1, 1]), "control_holds"),
        (([D, C, C, C], [1, 2, 2, 2]), ([D, D, D, U], [1, 1, 1, 1]), "control_holds"),
        # Both pass their states but the bonus was inert: the control's entropy is as high.
        (([D, C, C, C], [1, 2, 2, 2]), ([D, D, D, D], [1, 2, 2, 2]), "bonus_not_inert"),
    ],
)
def test_each_check_alone_makes_a_seed_fail(treated, control, failed):
    runs = [_run("regularised", 0, *treated), _run("control", 0, *control)]
    a = _claim_collapse(runs)
    checks = {k: v for k, v in a["per_seed"][0].items() if k != "seed"}
    assert checks == {k: k != failed for k in checks}
    assert a["reproduced"] is False
    claims = {"collapse": a}
    _decide(claims, {})
    assert claims["collapse"]["verdict"] == "inconclusive"  # never "not reproduced"


def test_a_missing_control_or_missing_states_satisfies_nothing():
    a = _claim_collapse([_run("regularised", 0, [D, C, C], [1, 2, 2])])
    assert a["per_seed"][0]["control_holds"] is False and a["reproduced"] is False
    bare = {**_run("control", 0, [D], [1.0]), "series": {}}
    a = _claim_collapse([_run("regularised", 0, [D, C, C], [1, 2, 2]), bare])
    assert a["per_seed"][0]["control_holds"] is False
    assert _claim_collapse([])["reproduced"] is False


def test_mi_is_read_only_from_the_mi_history():
    # MI / ceiling over the last 3 MI-history evaluations: the F and N evaluations carry no MI,
    # so the mean is over the evaluations at MI 1.0, 0.4 and 0.2 (ceiling 2.0): 1.6 / 6.
    run = _run("regularised", 0, [D, D, F, D, N, D], [1] * 6, mi=[2.0, 1.0, 0, 0.4, 0, 0.2])
    (r,) = _claim_collapse([run])["per_run"]
    assert r["mi_fraction_mi_history_last"] == pytest.approx((0.5 + 0.2 + 0.1) / 3)
    assert r["mi_history_evaluations"] == 4
    assert math.isnan(_claim_collapse([_run("control", 0, [F], [1.0])])["per_run"][0][
        "mi_fraction_mi_history_last"])  # fmt: skip
