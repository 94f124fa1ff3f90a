"""Simulated controls of the collapse detector (issue 44, item 3): runs of evaluations whose MI
metrics come from :func:`~baselines.collapse.mi.mi_metrics` on log-likelihood matrices drawn with a
known dependence, fed to :class:`~baselines.collapse.detector.ZScoreTracker`.

The model (also that of ``tests/test_collapse_detector.py``): K prompts x ``per`` reasonings;
reasoning m of prompt x carries a class c_m, equal to x with probability q, else uniform over the K
prompts, and a free part of L_m ~ U{10..30} tokens at entropy h nats per token. Then
``log p(z_m | x_j) = log p(rest_m) + log(q [c_m = j] + (1 - q) / K)`` exactly, and

    I(X; Z) = a log(aK) + (K - 1) b log(bK),   a = q + (1 - q) / K,  b = (1 - q) / K.

Each run has ``DEPENDENT_EVALUATIONS`` evaluations at q = 0.9 (I = 1.61 nats, 78 % of the ceiling
log 8, entropy h = 1), then ``AFTER_EVALUATIONS`` at the scenario's (q, h) (:data:`SCENARIOS`).
Run ``python scripts/collapse_controls.py`` for the table of ``docs/ragen2.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from baselines.collapse.detector import ZScoreTracker
from baselines.collapse.mi import mi_metrics

__all__ = [
    "SCENARIOS",
    "Scenario",
    "ControlResult",
    "true_mi",
    "q_for_mi",
    "simulated_evaluation",
    "run_scenario",
]

K, PER = 8, 4  # 32 pairs, ceiling log 8 = 2.08 nats
PERMUTATIONS = 99  # smallest p-value 0.01: the default significance is reachable
DEPENDENT_EVALUATIONS, AFTER_EVALUATIONS = 5, 10
DEPENDENT_Q = 0.9


def true_mi(q: float, k: int = K) -> float:
    """I(X; Z) in nats of the model above (uniform prompts)."""
    a, b = q + (1 - q) / k, (1 - q) / k
    return a * math.log(a * k) + ((k - 1) * b * math.log(b * k) if b > 0 else 0.0)


def q_for_mi(target: float, k: int = K) -> float:
    """The q whose :func:`true_mi` is ``target`` (bisection; ``true_mi`` increases with q)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if true_mi(mid, k) < target else (lo, mid)
    return lo


def simulated_evaluation(
    gen: torch.Generator,
    q: float,
    h: float = 1.0,
    *,
    k: int = K,
    per: int = PER,
    seed: int = 0,
    valid_rate: float = 1.0,
    permutations: int = PERMUTATIONS,
) -> dict[str, float]:
    """One evaluation: :func:`mi_metrics` of a simulated ``[k * per, k]`` matrix, with the
    trainer's sample statistics (``valid_thinking_rate`` and the pair counts)."""
    m = k * per
    x = torch.arange(k).repeat_interleave(per)
    informative = torch.rand(m, generator=gen) < q
    c = torch.where(informative, x, torch.randint(k, (m,), generator=gen))
    probs = torch.full((m, k), (1 - q) / k, dtype=torch.float64)
    probs[torch.arange(m), c] += q
    lengths = torch.randint(10, 31, (m,), generator=gen)
    noise = torch.randn(m, generator=gen, dtype=torch.float64)
    rest = -h * lengths + 0.5 * lengths.double().sqrt() * noise
    out = mi_metrics(
        rest[:, None] + probs.log(), x, lengths=lengths, num_permutations=permutations, seed=seed
    )
    out.update(
        num_pairs_total=m / valid_rate, num_pairs_valid=float(m), valid_thinking_rate=valid_rate
    )
    return out


@dataclass(frozen=True)
class Scenario:
    """One control: after the dependent evaluations, the policy's reasonings carry ``mi`` nats
    (``None``: stay at q = 0.9) at ``entropy`` nats per token; ``expect`` is the state it should
    reach (``"collapsed"`` for a template, ``"degenerate"`` for noise, ``""`` for none)."""

    name: str
    mi: float | None
    entropy: float
    expect: str


SCENARIOS = (
    Scenario("residual MI 0.03 nats", 0.03, 1.0, "collapsed"),
    Scenario("residual MI 0.05 nats", 0.05, 1.0, "collapsed"),
    Scenario("residual MI 0.10 nats", 0.10, 1.0, "collapsed"),
    Scenario("exact independence", 0.0, 1.0, "collapsed"),
    Scenario("input-dependent throughout", None, 1.0, ""),
    Scenario("input-blind noise, entropy x3", 0.0, 3.0, "degenerate"),
)


@dataclass
class ControlResult:
    """Counts over a scenario's runs: ``flagged`` (ever ``collapsed``), ``degenerate`` (ever
    ``degenerate``), ``within_window`` (``collapsed`` within ``window`` evaluations of the change),
    and ``delays`` (evaluations from the first changed one to the first ``collapsed``; 0 = that
    one, ``window - 1`` = the first full window after the change)."""

    scenario: Scenario
    runs: int
    flagged: int = 0
    degenerate: int = 0
    within_window: int = 0
    delays: tuple[int, ...] = ()

    def latency(self) -> str:
        """Median and range of the delays, ``"-"`` when nothing was flagged."""
        if not self.delays:
            return "-"
        d = sorted(self.delays)
        return f"{d[len(d) // 2]} ({d[0]}-{d[-1]})"


def run_scenario(
    scenario: Scenario, runs: int = 100, seed: int = 0, tracker_kwargs: dict | None = None
) -> ControlResult:
    """``runs`` runs of the scenario, run r drawn from ``torch.Generator().manual_seed(seed + r)``."""
    q_after = DEPENDENT_Q if scenario.mi is None else q_for_mi(scenario.mi)
    plan: Sequence[tuple[float, float]] = [(DEPENDENT_Q, 1.0)] * DEPENDENT_EVALUATIONS + [
        (q_after, scenario.entropy)
    ] * AFTER_EVALUATIONS
    result = ControlResult(scenario, runs)
    delays = []
    for r in range(runs):
        gen = torch.Generator().manual_seed(seed + r)
        tracker = ZScoreTracker(**(tracker_kwargs or {}))
        states = []
        for s, (q, h) in enumerate(plan):
            tracker.update(simulated_evaluation(gen, q, h, seed=s))
            states.append(tracker.state)
        after = states[DEPENDENT_EVALUATIONS:]
        result.degenerate += "degenerate" in after
        if "collapsed" in states:
            result.flagged += 1
            delay = states.index("collapsed") - DEPENDENT_EVALUATIONS
            delays.append(delay)
            result.within_window += 0 <= delay < tracker.window
    result.delays = tuple(delays)
    return result
