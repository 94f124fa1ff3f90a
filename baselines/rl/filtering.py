"""SNR-Aware Filtering of rollout groups (RAGEN-2, "Reasoning Collapse in Agentic RL", 2026).

Rollouts come as G groups of N episodes that share an initial state (DESIGN.md, "The baselines").
Group-relative advantages (GRPO, Dr.GRPO) are ``r_i - mean(r)`` (possibly divided by the std), so a
group whose episodes all earn the same reward contributes exactly zero advantage: its tokens add no
policy-gradient signal, only the noise of the regularisers (entropy bonus, KL) and of the batch
normalisation. A group's reward spread is a proxy for its signal-to-noise ratio. SNR-Aware
Filtering scores each group and keeps only some groups before advantages and the loss.

The selection rule is RAGEN's ``RolloutFilter._select_top_groups``
(mll-lab-nu/RAGEN ``ragen/trainer/rollout_filter.py:68-185``), rewritten here; every step below
names the lines it follows. Order of operations (fixed here, not left to callers):

1. score each group (:func:`group_scores`): by default the unbiased std of its episode rewards
   (RAGEN's ``reward_variance`` metric is this std, ``rollout_filter.py:361-365,428``), or one of
   the ablation scores of RAGEN (reward mean or sum, mean or std of episode entropy, mean length);
2. unless ``include_zero``, remove groups whose score is 0 (``|score| <= 1e-10``) from the
   candidates (``rollout_filter.py:74-80``); an empty candidate set keeps nothing;
3. choose among the candidates by ``strategy`` (see :class:`FilterConfig`), ranking by score
   descending (``keep="largest"``) or ascending (``keep="smallest"``).

Ties are broken by group index (a stable sort); RAGEN's ``torch.sort``/``topk`` leave tie order
unspecified. Scores are float64 here (RAGEN casts to float32, ``rollout_filter.py:70``); this can
matter only when a cumulative mass equals ``p`` to within float32 rounding.

The result may be empty (e.g. every group has zero spread and ``include_zero`` is off); the trainer
then skips the update.

Example:
    >>> rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.5]])
    >>> snr_filter(rewards, FilterConfig(strategy="top_k_abs", k=2)).kept.tolist()
    [0, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "FilterConfig",
    "FilterResult",
    "group_scores",
    "no_group_gradient",
    "select_groups",
    "snr_filter",
]

STRATEGIES = ("top_p", "top_k", "top_k_abs", "min_p", "none")
# Canonical metric names; RAGEN's spellings are accepted as aliases (see METRIC_ALIASES).
METRICS = ("std", "variance", "reward_mean", "reward_sum", "entropy", "entropy_std", "length")
METRIC_ALIASES = {
    "reward_variance": "std",  # RAGEN's name; its value is the std (rollout_filter.py:365,428)
    "reward_std": "std",  # RAGEN alias (rollout_filter.py:784)
    "reward": "reward_mean",  # rollout_filter.py:361-362
    "entropy_variance": "entropy_std",  # RAGEN's name; its value is the std (:653,716)
}
MASS_MODES = ("linear", "softmax")
KEEP = ("largest", "smallest")

# RAGEN's zero test for include_zero and min_p's slack (rollout_filter.py:75,170,176).
ZERO_TOL = 1e-10


@dataclass
class FilterConfig:
    """Settings of SNR-Aware Filtering. Checked on construction (:meth:`validate`).

    The defaults are RAGEN-2's main-table filter (``scripts/runs/run_main_table_diff_algo.sh``
    lines 255-274: ``top_p`` 0.9, ``softmax`` mass, ``largest``, ``reward_variance``,
    ``include_zero=True``). Its no-filter baseline is ``strategy="top_p", p=1.0`` (or ``"none"``).

    Attributes:
        strategy: how groups are chosen among the candidates (n of them, out of G):
            ``"top_p"``: ``p >= 1`` keeps every candidate (``rollout_filter.py:87-88``). Else
            with ``mass_mode="softmax"``: ``probs = softmax(+-score / temperature)`` (sign by
            ``keep``), sorted descending; keep the shortest prefix whose cumulative probability
            is >= p (``searchsorted(cumsum, p) + 1``, capped at n; ``:91-105``). With
            ``"linear"``: sort the scores (descending for largest, ascending for smallest),
            ``threshold = p * sum(scores) - selection_eps``; add scores while the running sum is
            below the threshold and the next score is > 0; keep that prefix if the running sum
            reached the threshold, else keep nothing (``:107-130``).
            ``"top_k"``: ``k = max(min(int(p * G), n), 1)`` groups (``int`` truncates, as RAGEN:
            ``:137-150``).
            ``"top_k_abs"``: ``max(min(k, n), 1)`` groups (``:152-164``).
            ``"min_p"``: largest: every candidate with ``score >= p * max - 1e-10``; smallest:
            ``score <= min / p + 1e-10`` (``:166-180``; RAGEN writes ``min / (p + 1e-10)``, whose
            1e-10 vanishes in its float32 arithmetic).
            ``"none"``: every group; filtering is off and ``include_zero`` is ignored.
        metric: the group score, computed by :func:`group_scores`: ``"std"`` (unbiased std of the
            rewards; RAGEN ``reward_variance``/``reward_std``), ``"variance"`` (its square; ours),
            ``"reward_mean"`` (RAGEN ``reward``), ``"reward_sum"``, ``"entropy"`` (mean over the
            group of each episode's mean token entropy), ``"entropy_std"`` (their unbiased std;
            RAGEN ``entropy_variance``), ``"length"`` (mean over the group of each episode's
            policy-token count). RAGEN's spellings are accepted and stored canonically.
        keep: ``"largest"`` or ``"smallest"`` scores (RAGEN ``rollout_filter_type``).
        p: > 0 and <= 1: mass share (top_p; 1 keeps all), fraction of groups (top_k) or of the top
            score (min_p). Unused by top_k_abs and none.
        k: >= 1: number of groups kept by top_k_abs.
        mass_mode: ``"linear"`` or ``"softmax"`` (top_p only).
        temperature: > 0, softmax temperature in score units (top_p softmax only; RAGEN has none,
            i.e. 1.0).
        selection_eps: >= 0, RAGEN's linear top-p slack in score units (``selection_eps``, 0.01).
        include_zero: keep zero-score groups among the candidates (RAGEN default and main table:
            True). False removes them before selection.
    """

    strategy: str = "top_p"
    metric: str = "std"
    keep: str = "largest"
    p: float = 0.9
    k: int = 1
    mass_mode: str = "softmax"
    temperature: float = 1.0
    selection_eps: float = 0.01
    include_zero: bool = True

    def __post_init__(self) -> None:
        self.metric = METRIC_ALIASES.get(self.metric, self.metric)
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the bad key and the allowed values."""
        self.metric = METRIC_ALIASES.get(self.metric, self.metric)
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}; got {self.strategy!r}")
        if self.metric not in METRICS:
            raise ValueError(
                f"metric must be one of {METRICS} (or RAGEN's {sorted(METRIC_ALIASES)}); "
                f"got {self.metric!r}"
            )
        if self.keep not in KEEP:
            raise ValueError(f"keep must be one of {KEEP}; got {self.keep!r}")
        if self.mass_mode not in MASS_MODES:
            raise ValueError(f"mass_mode must be one of {MASS_MODES}; got {self.mass_mode!r}")
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 < self.p <= 1:
            raise ValueError(f"p must be a number in (0, 1]; got {self.p!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be an integer >= 1; got {self.k!r}")
        if not isinstance(self.temperature, (int, float)) or not self.temperature > 0:
            raise ValueError(f"temperature must be a number > 0; got {self.temperature!r}")
        if not isinstance(self.selection_eps, (int, float)) or not self.selection_eps >= 0:
            raise ValueError(f"selection_eps must be a number >= 0; got {self.selection_eps!r}")
        if not isinstance(self.include_zero, bool):
            raise ValueError(f"include_zero must be True or False; got {self.include_zero!r}")

    @property
    def needs(self) -> str:
        """Which per-episode input the metric reads: ``"rewards"``, ``"entropies"``, ``"lengths"``."""
        if self.metric in ("entropy", "entropy_std"):
            return "entropies"
        return "lengths" if self.metric == "length" else "rewards"


@dataclass
class FilterResult:
    """Outcome of :func:`snr_filter`.

    Attributes:
        kept: int64 ``[n_kept]``: indices of the kept groups, ascending.
        mask: bool ``[G]``: True for kept groups.
        scores: float64 ``[G]``: each group's score (the configured metric).
        stats: ``filter/num_groups``, ``filter/num_kept``, ``filter/kept_fraction``,
            ``filter/num_zero_spread`` (groups whose rewards are all equal),
            ``filter/num_zero_score`` (``|score| <= 1e-10``, RAGEN's ``filter_zero_count``),
            ``filter/score_mean_kept`` and ``filter/score_mean_dropped`` (NaN when that set is
            empty), as floats.
    """

    kept: Tensor
    mask: Tensor
    scores: Tensor
    stats: dict[str, float] = field(default_factory=dict)


def _as_groups(values: Tensor | Sequence[Sequence[float]], name: str) -> list[Tensor]:
    if isinstance(values, Tensor):
        if values.dim() != 2:
            raise ValueError(f"{name} must have shape [G, N]; got {tuple(values.shape)}")
        groups = list(values.detach().to("cpu", torch.float64))
    else:
        groups = [torch.as_tensor(g, dtype=torch.float64).reshape(-1) for g in values]
    if not groups:
        raise ValueError(f"{name} holds no groups")
    for g, r in enumerate(groups):
        if r.numel() == 0:
            raise ValueError(f"group {g} of {name} is empty")
        if not torch.isfinite(r).all():
            raise ValueError(f"group {g} of {name} holds NaN or inf: {r.tolist()}")
    return groups


def _spread(r: Tensor, squared: bool) -> float:
    """Unbiased std (or variance) of a group; exactly 0 for one episode or equal values."""
    if r.numel() < 2 or bool(r.max() == r.min()):
        return 0.0
    var = float(r.var(unbiased=True))
    return var if squared else var**0.5


def group_scores(
    rewards: Tensor | Sequence[Sequence[float]],
    metric: str = "std",
    *,
    entropies: Tensor | Sequence[Sequence[float]] | None = None,
    lengths: Tensor | Sequence[Sequence[float]] | None = None,
) -> tuple[Tensor, Tensor]:
    """Each group's score under ``metric``, and which groups have zero reward spread.

    Args:
        rewards: float ``[G, N]`` episode rewards, or a list of G per-group lists (sizes may differ).
        metric: one of :data:`METRICS` or a RAGEN alias (see :class:`FilterConfig`). ``std`` and
            ``variance`` are unbiased (divisor N - 1, ``torch.std``'s default, as RAGEN); a group of
            one episode, or of equal values, scores exactly 0 (RAGEN's ``torch.std`` would give NaN
            for one episode).
        entropies: ``[G, N]`` (or lists) of each episode's mean token entropy in nats (the mean over
            its policy tokens, RAGEN ``rollout_filter.py:670-672``); needed by ``entropy`` and
            ``entropy_std``.
        lengths: ``[G, N]`` (or lists) of each episode's policy-token count (RAGEN sums the
            response mask, ``rollout_filter.py:260``); needed by ``length``.

    Returns:
        ``(scores, zero_spread)``: float64 ``[G]`` and bool ``[G]``, True where all of a group's
        rewards are equal (decided exactly, by max == min).

    Raises:
        ValueError: unknown metric, a tensor that is not 2-D, no groups, an empty group, NaN or inf,
            a missing ``entropies``/``lengths`` input, or one whose group sizes differ from
            ``rewards``.
    """
    metric = METRIC_ALIASES.get(metric, metric)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}; got {metric!r}")
    groups = _as_groups(rewards, "rewards")
    zero = torch.tensor([bool(r.max() == r.min()) for r in groups], dtype=torch.bool)
    source = groups
    if metric in ("entropy", "entropy_std", "length"):
        name = "lengths" if metric == "length" else "entropies"
        given = lengths if metric == "length" else entropies
        if given is None:
            raise ValueError(
                f"metric {metric!r} needs {name}=[G, N] per-episode values; pass {name}=..."
            )
        source = _as_groups(given, name)
        sizes = [r.numel() for r in groups]
        if [r.numel() for r in source] != sizes:
            raise ValueError(f"{name} group sizes must match rewards' {sizes}")
    if metric in ("std", "entropy_std", "variance"):
        values = [_spread(r, squared=metric == "variance") for r in source]
    elif metric == "reward_sum":
        values = [float(r.sum()) for r in source]
    else:  # reward_mean, entropy, length: the group mean
        values = [float(r.mean()) for r in source]
    return torch.tensor(values, dtype=torch.float64), zero


def _ranked(scores: Tensor, keep: str) -> Tensor:
    """Positions of ``scores`` from best to worst; ties keep ascending position (stable)."""
    return torch.sort(scores, descending=keep == "largest", stable=True).indices


def select_groups(scores: Tensor, config: FilterConfig) -> Tensor:
    """RAGEN's selection rule on group scores; see :class:`FilterConfig` for each strategy.

    Args:
        scores: float ``[G]`` (any sign; spreads are >= 0).
        config: the filter settings.

    Returns:
        bool ``[G]``: the kept groups.
    """
    num = scores.numel()
    keep = torch.zeros(num, dtype=torch.bool)
    if config.strategy == "none":
        return ~keep
    s_all = scores.detach().to("cpu", torch.float64)
    candidates = torch.arange(num)
    if not config.include_zero:  # rollout_filter.py:74-80
        candidates = candidates[s_all.abs() > ZERO_TOL]
        if candidates.numel() == 0:
            return keep
    s = s_all[candidates]
    n = candidates.numel()
    largest = config.keep == "largest"
    chosen: Tensor
    if config.strategy == "top_p":
        if config.p >= 1.0:  # rollout_filter.py:87-88: the no-filter baseline
            chosen = candidates
        elif config.mass_mode == "softmax":  # :91-105
            logits = (s if largest else -s) / config.temperature
            probs = torch.softmax(logits, dim=0)
            order = torch.sort(probs, descending=True, stable=True).indices
            cumulative = torch.cumsum(probs[order], dim=0)
            count = min(int(torch.searchsorted(cumulative, config.p)) + 1, n)
            chosen = candidates[order[:count]]
        else:  # linear, :107-130
            order = _ranked(s, config.keep)
            threshold = config.p * float(s.sum()) - config.selection_eps
            running, count = 0.0, 0
            for score in s[order].tolist():
                if running >= threshold or score <= 0:
                    break
                running += score
                count += 1
            chosen = candidates[order[:count]] if running >= threshold else candidates[:0]
    elif config.strategy in ("top_k", "top_k_abs"):  # :137-164
        k = int(config.p * num) if config.strategy == "top_k" else config.k
        k = max(min(k, n), 1)
        chosen = candidates[_ranked(s, config.keep)[:k]]
    else:  # min_p, :166-180
        if largest:
            mask = s >= s.max() * config.p - ZERO_TOL
        else:
            # RAGEN writes min / (p + 1e-10) + 1e-10 in float32, where both 1e-10 vanish; in
            # float64 they would drop the minimum itself at p = 1. Its effective rule is min / p.
            mask = s <= s.min() / config.p + ZERO_TOL
        chosen = candidates[mask]
    keep[chosen] = True
    return keep


def snr_filter(
    rewards: Tensor | Sequence[Sequence[float]],
    config: FilterConfig | None = None,
    *,
    entropies: Tensor | Sequence[Sequence[float]] | None = None,
    lengths: Tensor | Sequence[Sequence[float]] | None = None,
) -> FilterResult:
    """SNR-Aware Filtering: keep the rollout groups whose score passes RAGEN's selection rule.

    Args:
        rewards: float ``[G, N]`` episode rewards, or a list of G per-group reward lists.
        config: filter settings; ``None`` means ``FilterConfig()`` (RAGEN-2's main-table filter:
            softmax top-p 0.9 on the reward std, zero-spread groups included).
        entropies: per-episode mean token entropies ``[G, N]``, for the entropy metrics.
        lengths: per-episode policy-token counts ``[G, N]``, for the length metric.

    Returns:
        :class:`FilterResult` (kept indices ascending, boolean mask, scores, stats).

    Raises:
        ValueError: malformed inputs (see :func:`group_scores`).
    """
    config = FilterConfig() if config is None else config
    config.validate()
    scores, zero = group_scores(rewards, config.metric, entropies=entropies, lengths=lengths)
    mask = select_groups(scores, config)
    kept = torch.nonzero(mask).flatten()
    num, n_kept = scores.numel(), int(mask.sum())
    nan = float("nan")
    stats = {
        "filter/num_groups": float(num),
        "filter/num_kept": float(n_kept),
        "filter/kept_fraction": n_kept / num,
        "filter/num_zero_spread": float(zero.sum()),
        "filter/num_zero_score": float((scores.abs() <= ZERO_TOL).sum()),
        "filter/score_mean_kept": float(scores[mask].mean()) if n_kept else nan,
        "filter/score_mean_dropped": float(scores[~mask].mean()) if n_kept < num else nan,
    }
    return FilterResult(kept=kept, mask=mask, scores=scores, stats=stats)


def no_group_gradient(kept_rewards: Tensor, algorithm: Any) -> bool:
    """Whether a GRPO-family step on these groups has exactly zero gradient: every kept group's
    rewards are equal, so every group-normalised advantage is 0, and no entropy or KL term
    (``algorithm.entropy_coef`` 0, ``algorithm.kl_coef`` <= 0) adds one. The trainer then skips
    the update; RAGEN steps anyway, moving the weights on Adam's momentum alone (docs/ragen2.md).
    With an entropy or KL term the step is taken, as RAGEN takes it: that is how the regularisers
    come to dominate a weak task signal (RAGEN-2's template collapse). Not for PPO, whose
    advantages come from a critic.

    Args:
        kept_rewards: episode rewards of the kept groups, ``[K, N]``, any float dtype.
        algorithm: ``entropy_coef`` and ``kl_coef`` (:class:`baselines.config.AlgorithmConfig`).

    Example:
        >>> import torch
        >>> from types import SimpleNamespace as NS
        >>> no_group_gradient(torch.tensor([[1.0, 1.0], [0.0, 0.0]]), NS(entropy_coef=0, kl_coef=0))
        True
        >>> no_group_gradient(torch.tensor([[1.0, 0.0]]), NS(entropy_coef=0, kl_coef=0))
        False
    """
    if algorithm.entropy_coef != 0 or algorithm.kl_coef > 0:
        return False
    return bool((kept_rewards.amax(1) == kept_rewards.amin(1)).all())
