"""SNR-Aware Filtering of rollout groups (RAGEN-2, "Reasoning Collapse in Agentic RL", 2026).

Rollouts come as G groups of N episodes that share an initial state (DESIGN.md, "The baselines").
Group-relative advantages (GRPO, Dr.GRPO) are ``r_i - mean(r)`` (possibly divided by the std), so a
group whose episodes all earn the same reward contributes exactly zero advantage: its tokens add no
policy-gradient signal, only the noise of the regularisers (entropy bonus, KL) and of the batch
normalisation. More generally a group's reward spread is a proxy for its signal-to-noise ratio: the
gradient signal it carries grows with the spread, while the noise of a sampled gradient does not.
SNR-Aware Filtering scores each group by that spread (std or variance of its episode rewards) and
keeps only the high-signal groups before advantages and the loss are computed.

Order of operations (fixed here, not left to callers):

1. score each group: ``std`` (unbiased, divisor N - 1, as in :func:`baselines.advantages.
   grpo_advantages`) or ``variance`` of its rewards; a group of one episode scores 0;
2. rank all G groups by score, descending, ties broken by group index (a stable sort);
3. choose a set by ``strategy`` over all G groups (see :class:`FilterConfig`);
4. unless ``include_zero``, drop zero-spread groups (all rewards equal) from that set.

The result may be empty (e.g. every group has zero spread); the trainer then skips the update.

Example:
    >>> rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.5]])
    >>> snr_filter(rewards, FilterConfig(strategy="top_k_abs", k=2)).kept.tolist()
    [0, 2]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["FilterConfig", "FilterResult", "group_scores", "select_groups", "snr_filter"]

STRATEGIES = ("top_p", "top_k", "top_k_abs", "min_p", "none")
METRICS = ("std", "variance")
MASS_MODES = ("linear", "softmax")

# Slack when comparing a cumulative mass share with p, so that p = 0.3 is reached by shares
# 0.1 + 0.2 (= 0.30000000000000004 in floating point) exactly as by hand.
_MASS_TOL = 1e-9


@dataclass
class FilterConfig:
    """Settings of SNR-Aware Filtering. Checked on construction (:meth:`validate`).

    Attributes:
        strategy: how groups are chosen, over all G groups ranked by score:
            ``"top_p"``: the smallest top-ranked prefix whose share of the total score mass is
            >= ``p``; the mass is the scores themselves (``mass_mode="linear"``; if every score is
            0 the mass is uniform) or ``softmax(scores / temperature)`` (``"softmax"``).
            ``"top_k"``: the top ``ceil(p * G)`` groups (ceil, so any p > 0 keeps at least one
            group; computed as ``ceil(p * G - 1e-9)`` so that 0.3 * 10 gives 3, not 4).
            ``"top_k_abs"``: the top ``min(k, G)`` groups.
            ``"min_p"``: every group with ``score >= p * max(score)``.
            ``"none"``: every group; filtering is off and ``include_zero`` is ignored.
        metric: ``"std"`` or ``"variance"`` of a group's episode rewards.
        p: in (0, 1]: mass share (top_p), fraction of groups (top_k) or fraction of the top score
            (min_p). Unused by top_k_abs and none.
        k: >= 1: number of groups kept by top_k_abs.
        mass_mode: ``"linear"`` or ``"softmax"`` (top_p only).
        temperature: > 0, softmax temperature in score units (top_p with softmax mass only).
        include_zero: keep zero-spread groups if the strategy picks them. Default False: they
            carry no group-relative advantage.
    """

    strategy: str = "top_p"
    metric: str = "std"
    p: float = 0.9
    k: int = 1
    mass_mode: str = "linear"
    temperature: float = 1.0
    include_zero: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the bad key and the allowed values."""
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}; got {self.strategy!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}; got {self.metric!r}")
        if self.mass_mode not in MASS_MODES:
            raise ValueError(f"mass_mode must be one of {MASS_MODES}; got {self.mass_mode!r}")
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 < self.p <= 1:
            raise ValueError(f"p must be a number in (0, 1]; got {self.p!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be an integer >= 1; got {self.k!r}")
        if not isinstance(self.temperature, (int, float)) or not self.temperature > 0:
            raise ValueError(f"temperature must be a number > 0; got {self.temperature!r}")
        if not isinstance(self.include_zero, bool):
            raise ValueError(f"include_zero must be True or False; got {self.include_zero!r}")


@dataclass
class FilterResult:
    """Outcome of :func:`snr_filter`.

    Attributes:
        kept: int64 ``[n_kept]``: indices of the kept groups, ascending.
        mask: bool ``[G]``: True for kept groups.
        scores: float64 ``[G]``: each group's spread (the configured metric).
        stats: ``filter/num_groups``, ``filter/num_kept``, ``filter/kept_fraction``,
            ``filter/num_zero_spread``, ``filter/score_mean_kept`` and
            ``filter/score_mean_dropped`` (NaN when that set is empty), as floats.
    """

    kept: Tensor
    mask: Tensor
    scores: Tensor
    stats: dict[str, float] = field(default_factory=dict)


def group_scores(
    rewards: Tensor | Sequence[Sequence[float]], metric: str = "std"
) -> tuple[Tensor, Tensor]:
    """Spread of each group's episode rewards, and which groups have zero spread.

    Args:
        rewards: float ``[G, N]``, or a list of G per-group reward lists (sizes may differ).
        metric: ``"std"`` or ``"variance"``, both unbiased (divisor N - 1).

    Returns:
        ``(scores, zero)``: float64 ``[G]`` (a one-episode group scores 0) and bool ``[G]``, True
        where all of a group's rewards are equal (decided exactly, by max == min, not by a
        floating-point std).

    Raises:
        ValueError: unknown metric, a tensor that is not 2-D, no groups, or an empty group.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}; got {metric!r}")
    if isinstance(rewards, Tensor):
        if rewards.dim() != 2:
            raise ValueError(f"rewards must have shape [G, N]; got {tuple(rewards.shape)}")
        groups = list(rewards.detach().to("cpu", torch.float64))
    else:
        groups = [torch.as_tensor(g, dtype=torch.float64).reshape(-1) for g in rewards]
    if not groups:
        raise ValueError("rewards holds no groups")
    scores = torch.zeros(len(groups), dtype=torch.float64)
    zero = torch.zeros(len(groups), dtype=torch.bool)
    for g, r in enumerate(groups):
        if r.numel() == 0:
            raise ValueError(f"group {g} has no rewards")
        zero[g] = bool(r.max() == r.min())
        if r.numel() >= 2 and not zero[g]:
            var = r.var(unbiased=True)
            scores[g] = var if metric == "variance" else var.sqrt()
    return scores, zero


def select_groups(scores: Tensor, zero: Tensor, config: FilterConfig) -> Tensor:
    """Apply a strategy to group scores; see :class:`FilterConfig` for each rule.

    Args:
        scores: float ``[G]``, >= 0.
        zero: bool ``[G]``: zero-spread groups (vetoed unless ``config.include_zero``).
        config: the filter settings.

    Returns:
        bool ``[G]``: the kept groups.
    """
    num = scores.numel()
    if config.strategy == "none":
        return torch.ones(num, dtype=torch.bool)
    s = scores.to(torch.float64)
    # Stable sort: equal scores keep ascending group index (deterministic tie-breaking).
    order = torch.sort(s, descending=True, stable=True).indices
    keep = torch.zeros(num, dtype=torch.bool)
    if config.strategy == "top_p":
        if config.mass_mode == "softmax":
            mass = torch.softmax(s / config.temperature, dim=0)
        elif s.sum() > 0:
            mass = s / s.sum()
        else:
            mass = torch.full_like(s, 1.0 / num)
        cumulative = torch.cumsum(mass[order], dim=0)
        reached = torch.nonzero(cumulative >= config.p - _MASS_TOL)
        n_keep = int(reached[0]) + 1 if reached.numel() else num
        keep[order[:n_keep]] = True
    elif config.strategy == "top_k":
        keep[order[: math.ceil(config.p * num - _MASS_TOL)]] = True
    elif config.strategy == "top_k_abs":
        keep[order[: min(config.k, num)]] = True
    elif config.strategy == "min_p":
        keep = s >= config.p * s.max()
    if not config.include_zero:
        keep &= ~zero
    return keep


def snr_filter(
    rewards: Tensor | Sequence[Sequence[float]], config: FilterConfig | None = None
) -> FilterResult:
    """SNR-Aware Filtering: keep the rollout groups whose reward spread carries learning signal.

    Args:
        rewards: float ``[G, N]`` episode rewards, or a list of G per-group reward lists.
        config: filter settings; ``None`` means ``FilterConfig()`` (top_p, p=0.9, linear std mass).

    Returns:
        :class:`FilterResult` (kept indices ascending, boolean mask, scores, stats).

    Raises:
        ValueError: malformed rewards (see :func:`group_scores`).
    """
    config = FilterConfig() if config is None else config
    config.validate()
    scores, zero = group_scores(rewards, config.metric)
    mask = select_groups(scores, zero, config)
    kept = torch.nonzero(mask).flatten()
    num, n_kept = scores.numel(), int(mask.sum())
    nan = float("nan")
    stats = {
        "filter/num_groups": float(num),
        "filter/num_kept": float(n_kept),
        "filter/kept_fraction": n_kept / num,
        "filter/num_zero_spread": float(zero.sum()),
        "filter/score_mean_kept": float(scores[mask].mean()) if n_kept else nan,
        "filter/score_mean_dropped": float(scores[~mask].mean()) if n_kept < num else nan,
    }
    return FilterResult(kept=kept, mask=mask, scores=scores, stats=stats)
