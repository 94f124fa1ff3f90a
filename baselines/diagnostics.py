"""Mutual-information diagnostics of template collapse (RAGEN-2, "Reasoning Collapse in Agentic RL").

Template collapse: the policy's reasonings z stay diverse (high entropy within an input) but stop
depending on the input x: the mutual information I(X; Z) falls to zero, so z is a template that
could have been written for any prompt. Token entropy alone cannot see it; these diagnostics can.

Teacher-force every sampled reasoning z_m against every distinct prompt x_j of the sample, giving
the matrix ``loglik[m, j] = l_j(z_m) = log p(z_m | x_j)`` (:func:`score_matrix`); then
(:func:`mi_metrics`), with i(m) the prompt z_m was sampled from and w_j the mixture weights:

    marginal(z_m)  = log sum_j w_j exp(l_j(z_m))             (log p(z_m) under the prompt mixture)
    mi_estimate    = mean_m [ l_{i(m)}(z_m) - marginal(z_m) ]
                   = reasoning_entropy_est - conditional_entropy_est
    retrieval      = does argmax_j l_j(z_m) recover i(m)?

With uniform weights the marginal is ``logsumexp_j l_j(z_m) - log K`` exactly. Each term is the
pointwise MI of a sample (x, z) ~ p(x, z), so the mean is an unbiased Monte Carlo estimate of I(X; Z)
when the weights are the true prompt distribution, and ``mi_estimate <= log K`` always holds for
uniform weights (since l_{i(m)} <= logsumexp_j l_j).

:func:`reasoning_text` and :func:`mi_pairs` pick the reasonings z from the replies as RAGEN does
(the stripped text between ``<think>`` and ``</think>``; empty or unclosed ones dropped).
:class:`ZScoreTracker` follows the z-scores over training and gives each evaluation a state
(:data:`STATES`): dependent, collapsed (template collapse, a flag with hysteresis), format-collapsed,
never dependent, too small a sample, or undecided, telling a policy that collapsed from one that
never depended on its input or stopped writing reasonings.

Names next to RAGEN's (mll-lab-nu/RAGEN ``ragen/trainer/collapse_metrics.py``):
``mi_estimate`` (summed log-likelihoods, our headline: an MI estimate in nats) is RAGEN's
``collapse/mi_seq_estimate`` (``:291``); ``mi_estimate_per_token`` is RAGEN's headline
``collapse/mi_estimate`` (per-token means, ``:551-555,599-601``), which is not an estimate of
I(X; Z) (a difference of per-token averages), kept for comparison. ``mi_zscore`` is our permutation
z-score; RAGEN's MI-ZScore is ``ragen_mi_zscore`` (``:305-313``) and its moving form
``ragen_mi_zscore_ema`` (:class:`ZScoreTracker`, ``:315-323,336-342``).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from baselines.losses import logprobs_from_logits
from baselines.scoring import head_logprobs, trunk

__all__ = [
    "mi_metrics",
    "mi_pairs",
    "reasoning_text",
    "retrieval_chance",
    "DetectorSettings",
    "STATES",
    "ZScoreTracker",
    "score_matrix",
    "score_matrix_naive",
    "episode_mi_diagnostics",
]

# -inf log-likelihoods (impossible under a prompt) are replaced by this floor so the permutation
# null stays finite; exp(-1e30) is 0 in float64, so logsumexp and the MI estimate are unchanged.
_LOGLIK_FLOOR = -1e30
RETRIEVAL_KS = (1, 2, 4)
# RAGEN's MI-ZScore denominator constant (collapse_metrics.py:41 ``std_eps=1e-3``).
RAGEN_STD_EPS = 1e-3
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def reasoning_text(response: str, special_tokens: Sequence[str] = ()) -> str:
    """The reasoning z of a reply, as RAGEN takes it: the stripped text inside ``<think>...</think>``.

    RAGEN (``ragen/llm_agent/ctx_manager.py:660-669,726-738``) matches
    ``<think>(.*?)</think>`` (the first closed pair), removes the tokenizer's special tokens from
    it and strips white space; a reply without a closed pair gives ``""``. Neither tag is part of
    z, and no ``</think>`` that the policy never sampled is added.

    Args:
        response: the reply as the environment saw it (with the ``<think>`` prefix when the
            prompt ended with one, see :func:`baselines.episodes.render_prompt`).
        special_tokens: strings removed from z (e.g. ``tokenizer.all_special_tokens``).

    Returns:
        z, possibly ``""`` (no closed think block, or only white space in it): such a reply has
        no reasoning to score, and :func:`mi_pairs` drops it.

    Example:
        >>> reasoning_text("<think> arm A paid 0.7 </think><answer>A</answer>")
        'arm A paid 0.7'
        >>> reasoning_text("<think>never closed"), reasoning_text("<think>  </think>")
        ('', '')
    """
    start = response.find(THINK_OPEN)
    if start < 0:
        return ""
    start += len(THINK_OPEN)
    end = response.find(THINK_CLOSE, start)
    if end < 0:
        return ""
    text = response[start:end]
    for token in special_tokens:
        if token:
            text = text.replace(token, "")
    return text.strip()


def mi_pairs(
    prompts: Sequence[str], responses: Sequence[str], special_tokens: Sequence[str] = ()
) -> tuple[list[str], list[str], Tensor, dict[str, float]]:
    """(prompt, reasoning) pairs for :func:`score_matrix`, empty reasonings dropped.

    Args:
        prompts: the generation prompt of each reply (everything before z, ``<think>`` included).
        responses: the replies, same length.
        special_tokens: passed to :func:`reasoning_text`.

    Returns:
        ``(distinct_prompts, reasonings, prompt_index, stats)``: the K distinct prompts of the kept
        pairs in first-seen order, the M kept reasonings z (non-empty, stripped), int64 ``[M]``
        index of each z's prompt, and ``{"num_pairs_total", "num_pairs_valid",
        "valid_thinking_rate"}`` (RAGEN's ``first_turn_valid_rate``, ``collapse_metrics.py:199-205``).

    Raises:
        ValueError: the two lists differ in length.

    Example:
        >>> ps, zs, idx, st = mi_pairs(["x1", "x2", "x1"], ["<think>a</think>", "<think>", "<think>b</think>"])
        >>> ps, zs, idx.tolist(), st["valid_thinking_rate"]
        (['x1'], ['a', 'b'], [0, 0], 0.6666666666666666)
    """
    if len(prompts) != len(responses):
        raise ValueError(
            f"prompts and responses differ in length: {len(prompts)} vs {len(responses)}"
        )
    distinct: dict[str, int] = {}
    reasonings: list[str] = []
    index: list[int] = []
    for prompt, response in zip(prompts, responses, strict=True):
        z = reasoning_text(response, special_tokens)
        if not z:
            continue
        reasonings.append(z)
        index.append(distinct.setdefault(prompt, len(distinct)))
    total = len(prompts)
    stats = {
        "num_pairs_total": float(total),
        "num_pairs_valid": float(len(reasonings)),
        "valid_thinking_rate": len(reasonings) / total if total else 0.0,
    }
    return list(distinct), reasonings, torch.tensor(index, dtype=torch.long), stats


def retrieval_chance(prompt_index: Tensor, num_prompts: int, k: int = 1) -> tuple[float, float]:
    """Chance levels of top-k retrieval when prompts repeat in the sample.

    With w_j the share of reasonings sampled from prompt j, a predictor that ignores z can do no
    better than always naming the k most frequent prompts: its accuracy is the sum of the k
    largest w_j. That is our chance level; with every prompt equally frequent it is
    ``min(k / K, 1)``. When prompts repeat (a prompt seen by two groups), ``k / K`` is too low:
    an input-agnostic template whose log-likelihoods favour the frequent prompt beats it.

    RAGEN's chance (``collapse_metrics.py:655-681``, columns = groups, columns with the same prompt
    counted correct) is ``sum_j w_j * c_j / G`` with c_j the groups showing prompt j; with equal
    reasonings per group ``c_j / G = w_j``, so it is ``min(k * sum_j w_j^2, 1)``, the accuracy of
    a guess drawn at random from the prompt frequencies (lower than ours when frequencies differ).

    Args:
        prompt_index: int ``[M]``, in [0, K).
        num_prompts: K.
        k: >= 1.

    Returns:
        ``(ours, ragens)``, both in (0, 1].

    Example:
        >>> retrieval_chance(torch.tensor([0, 0, 1, 2]), 3)  # prompt 0 seen by 2 of 4 groups
        (0.5, 0.375)
    """
    w = torch.bincount(prompt_index.to(torch.long), minlength=num_prompts).to(torch.float64)
    w = w / w.sum()
    ours = float(torch.sort(w, descending=True).values[:k].sum())
    ragen = min(k * float((w * w).sum()), 1.0)
    return min(ours, 1.0), ragen


def _check_inputs(loglik: Tensor, prompt_index: Tensor) -> None:
    if loglik.dim() != 2 or loglik.shape[0] < 1 or loglik.shape[1] < 1:
        raise ValueError(f"loglik must have shape [M, K] with M, K >= 1; got {tuple(loglik.shape)}")
    num_z, num_prompts = loglik.shape
    if prompt_index.shape != (num_z,):
        raise ValueError(
            f"prompt_index must have shape [M]=[{num_z}]; got {tuple(prompt_index.shape)}"
        )
    if prompt_index.dtype.is_floating_point or prompt_index.dtype == torch.bool:
        raise ValueError(f"prompt_index must be an integer tensor; got {prompt_index.dtype}")
    if int(prompt_index.min()) < 0 or int(prompt_index.max()) >= num_prompts:
        raise ValueError(f"prompt_index values must be in [0, K) = [0, {num_prompts})")
    if torch.isnan(loglik).any() or torch.isposinf(loglik).any():
        raise ValueError("loglik must not hold NaN or +inf (log-likelihoods are <= 0 or finite)")


def _retrieval_credit(loglik: Tensor, matched: Tensor, k: int) -> Tensor:
    """Expected top-k hit of the matched prompt when ties are broken uniformly at random.

    With g prompts scoring strictly higher than the matched one and t prompts tied with it (itself
    included), a uniform random tie order puts it at rank g + 1, ..., g + t with equal probability,
    so P(rank <= k) = clamp((k - g) / t, 0, 1). All-equal rows give exactly k / K (chance).
    """
    greater = (loglik > matched[:, None]).sum(dim=1).to(loglik.dtype)
    ties = (loglik == matched[:, None]).sum(dim=1).to(loglik.dtype)
    return ((k - greater) / ties).clamp(0.0, 1.0)


def _mi_block(
    loglik: Tensor, prompt_index: Tensor, log_w: Tensor, perms: Tensor, suffix: str
) -> dict[str, float]:
    """MI, entropies and the permutation z-score of one (float64, floored) loglik matrix."""
    rows = torch.arange(loglik.shape[0])
    matched = loglik[rows, prompt_index]
    marginal = torch.logsumexp(loglik + log_w, dim=1)
    pointwise = matched - marginal
    mi = float(pointwise.mean())
    # Standard error of the mean of the M pointwise MI terms (their spread / sqrt(M)).
    count = pointwise.numel()
    stderr = float(pointwise.std(unbiased=True)) / math.sqrt(count) if count > 1 else 0.0
    # Null: the same matrix with the prompt labels shuffled (prompt counts, hence w, unchanged).
    null = (loglik[rows[None, :], prompt_index[perms]] - marginal[None, :]).mean(dim=1)
    null_mean = float(null.mean())
    null_std = float(null.std(unbiased=True)) if null.numel() > 1 else 0.0
    # Spreads at the level of float64 rounding of the log-likelihoods count as zero: otherwise a
    # matrix with equal columns (MI exactly 0) would divide rounding noise by rounding noise.
    real = loglik[loglik > _LOGLIK_FLOOR / 2]
    tol = 1e-12 * max(1.0, float(real.abs().max()) if real.numel() else 1.0)
    diff = mi - null_mean
    if null_std > tol:
        zscore = diff / null_std
    else:
        zscore = 0.0 if abs(diff) <= tol else math.copysign(math.inf, diff)
    # RAGEN's MI-ZScore (collapse_metrics.py:305-313): the mean pointwise MI over the population
    # std of log p(z) under the mixture, plus 1e-3. Not a z-score against a null.
    marginal_std = float(marginal.std(unbiased=False)) if marginal.numel() > 1 else 0.0
    ragen = "" if suffix else "_seq"
    return {
        f"ragen_marginal_std{ragen}": marginal_std,
        f"ragen_mi_zscore{ragen}": mi / (marginal_std + RAGEN_STD_EPS),
        f"mi_estimate{suffix}": mi,
        f"conditional_entropy_est{suffix}": float(-matched.mean()),
        f"reasoning_entropy_est{suffix}": float(-marginal.mean()),
        f"mi_zscore{suffix}": zscore,
        f"mi_null_mean{suffix}": null_mean,
        f"mi_null_std{suffix}": null_std,
        f"mi_stderr{suffix}": stderr,
        f"mi_pvalue{suffix}": float((1 + (null >= mi - 1e-12).sum()) / (null.numel() + 1)),
    }


def mi_metrics(
    loglik: Tensor,
    prompt_index: Tensor,
    lengths: Tensor | None = None,
    *,
    mixture: str = "empirical",
    num_permutations: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """MI estimate, retrieval accuracy, entropies and z-score from a reasoning-by-prompt matrix.

    Args:
        loglik: float ``[M, K]``: ``log p(z_m | x_j)`` summed over the tokens of z_m (e.g. from
            :func:`score_matrix`). ``-inf`` is allowed off the matched prompt.
        prompt_index: integer ``[M]``: the prompt each z_m was sampled from, in [0, K).
        lengths: optional integer ``[M]``, >= 1: token count of each z_m. When given, the
            ``*_per_token`` keys repeat the MI, entropies and z-score on ``loglik / lengths``.
        mixture: weights w_j of the marginal ``p(z) = sum_j w_j p(z | x_j)``:
            ``"empirical"`` (default): w_j = (number of z sampled from x_j) / M, the prompt
            distribution the sample was drawn from, so each term stays a pointwise MI when prompts
            have different multiplicities; ``"uniform"``: w_j = 1 / K. The two agree (exactly)
            when every prompt has the same number of samples.
        num_permutations: B, permutations of ``prompt_index`` for the null of the z-score (>= 2).
        seed: seed of the ``torch.Generator`` that draws the permutations.

    Returns:
        dict of floats:
        ``mi_estimate``: mean_m of ``l_{i(m)}(z_m) - log sum_j w_j exp(l_j(z_m))`` (nats).
        ``mi_upper_bound``: H(w), the entropy of the mixture weights; ``log K`` when uniform.
        ``conditional_entropy_est``: ``-mean_m l_{i(m)}(z_m)``, estimate of H(Z | X).
        ``reasoning_entropy_est``: ``-mean_m marginal(z_m)``, estimate of H(Z).
        ``retrieval_accuracy`` (and ``@2``, ``@4``): share of z whose own prompt is among the k
        highest ``l_j(z)``; ties are broken uniformly at random in expectation (fractional credit),
        so a z that scores the same under every prompt earns exactly k / K.
        ``retrieval_chance`` (and ``@2``, ``@4``): the sum of the k largest prompt shares w_j, the
        best accuracy of any guess that ignores z (:func:`retrieval_chance`); ``min(k / K, 1)``
        when every prompt has the same count. ``retrieval_chance_ragen`` (and ``@k``): RAGEN's
        ``min(k * sum_j w_j^2, 1)``.
        ``retrieval_above_chance``: ``retrieval_accuracy - retrieval_chance``.
        ``mi_zscore``: ``(mi_estimate - mean(null)) / std(null)`` where null holds the MI estimate
        for B seeded random permutations of ``prompt_index`` (the marginal is unchanged by a
        permutation; only which column counts as matched moves). ~0 without dependence, large when
        reasonings identify their prompts. If the null has zero spread (below float64 rounding of
        the log-likelihoods) the z-score is 0 when the estimate equals it, else +-inf. Also ``mi_null_mean``, ``mi_null_std`` and ``mi_pvalue``
        (``(1 + #{null >= mi}) / (B + 1)``).
        ``mi_stderr``: standard error of ``mi_estimate``, the spread of the M pointwise terms
        (unbiased std) over sqrt(M); 0 for one reasoning.
        ``num_reasonings`` M, ``num_prompts`` K; and the ``*_per_token`` keys when ``lengths``.
        ``ragen_mi_zscore_seq`` and ``ragen_marginal_std_seq``: RAGEN's MI-ZScore
        ``mean_m[l_i(m)(z_m) - marginal(z_m)] / (std(marginal) + 1e-3)`` (population std) on the
        summed log-likelihoods; with ``lengths``, ``ragen_mi_zscore`` and ``ragen_marginal_std``
        on the per-token ones (RAGEN's ``collapse/mi_zscore``, ``collapse_metrics.py:305-313``).

    Raises:
        ValueError: bad shapes, prompt indices out of range, NaN or +inf in ``loglik``,
            ``-inf`` at a matched position, lengths < 1, unknown mixture, num_permutations < 2.
    """
    _check_inputs(loglik, prompt_index)
    if mixture not in ("empirical", "uniform"):
        raise ValueError(f"mixture must be 'empirical' or 'uniform'; got {mixture!r}")
    if num_permutations < 2:
        raise ValueError(f"num_permutations must be >= 2; got {num_permutations}")
    num_z, num_prompts = loglik.shape
    ll = loglik.detach().to("cpu", torch.float64)
    idx = prompt_index.detach().to("cpu", torch.long)
    rows = torch.arange(num_z)
    if torch.isneginf(ll[rows, idx]).any():
        raise ValueError("loglik is -inf at a matched position: z_m is impossible under its prompt")
    ll = ll.clamp(min=_LOGLIK_FLOOR)

    if mixture == "empirical":
        weights = torch.bincount(idx, minlength=num_prompts).to(torch.float64) / num_z
    else:
        weights = torch.full((num_prompts,), 1.0 / num_prompts, dtype=torch.float64)
    log_w = weights.log()  # -inf for prompts without samples: they leave the mixture
    support = weights > 0
    upper = float(-(weights[support] * log_w[support]).sum())

    gen = torch.Generator().manual_seed(seed)
    perms = torch.stack([torch.randperm(num_z, generator=gen) for _ in range(num_permutations)])

    matched = ll[rows, idx]
    out: dict[str, float] = {"num_reasonings": float(num_z), "num_prompts": float(num_prompts)}
    out.update(_mi_block(ll, idx, log_w, perms, suffix=""))
    out["mi_upper_bound"] = upper if mixture == "empirical" else math.log(num_prompts)
    for k in RETRIEVAL_KS:
        key = "" if k == 1 else f"@{k}"
        out[f"retrieval_accuracy{key}"] = float(_retrieval_credit(ll, matched, k).mean())
        chance, chance_ragen = retrieval_chance(idx, num_prompts, k)
        out[f"retrieval_chance{key}"] = chance
        out[f"retrieval_chance_ragen{key}"] = chance_ragen
    out["retrieval_above_chance"] = out["retrieval_accuracy"] - out["retrieval_chance"]

    if lengths is not None:
        if lengths.shape != (num_z,):
            raise ValueError(f"lengths must have shape [M]=[{num_z}]; got {tuple(lengths.shape)}")
        lens = lengths.detach().to("cpu", torch.float64)
        if (lens < 1).any():
            raise ValueError(
                "lengths must be >= 1 (a reasoning with no tokens has no per-token rate)"
            )
        out.update(_mi_block(ll / lens[:, None], idx, log_w, perms, suffix="_per_token"))
    return out


#: The states :class:`ZScoreTracker` gives each evaluation (``collapse/state_<name>`` one-hot).
STATES = (
    "dependent",
    "collapsed",
    "format_collapsed",
    "never_dependent",
    "insufficient_sample",
    "undecided",
)
_NO_MI_STATES = ("format_collapsed", "insufficient_sample")


@dataclass
class _Evaluation:
    """What the tracker keeps of one evaluation (defaults: fields a checkpoint from before the
    states did not save)."""

    entropy: float
    retrieval_above_chance: float = math.nan
    mi_estimate: float = math.nan
    mi_upper_bound: float = math.nan
    mi_pvalue: float = math.nan
    mi_stderr: float = math.nan
    ragen_mi_zscore: float = math.nan
    num_reasonings: float = math.inf
    num_prompts: float = math.inf
    valid_thinking_rate: float = math.nan
    state: str = ""

    @property
    def fraction(self) -> float:
        """MI / its ceiling (0 when the ceiling is 0: one prompt)."""
        return self.mi_estimate / self.mi_upper_bound if self.mi_upper_bound > 0 else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _level(window: Sequence[_Evaluation]) -> tuple[float, float]:
    """Mean MI estimate of a window and its standard error (from each evaluation's
    ``mi_stderr``; 0 where unknown)."""
    variance = sum(e.mi_stderr**2 for e in window if math.isfinite(e.mi_stderr))
    return _mean([e.mi_estimate for e in window]), math.sqrt(variance) / len(window)


@dataclass
class DetectorSettings:
    """The thresholds of the collapse detector (:class:`ZScoreTracker`), also the
    ``diagnostics.*`` keys of the trainer's config (:class:`baselines.config.DiagnosticsConfig`).

    Attributes:
        window: >= 1: evaluations averaged (MI fraction, entropy, RAGEN's MI-ZScore), needed
            for a near-chance verdict, and dependent ones in a row that clear the flag.
        significance: in (0, 1): largest permutation p-value that counts as significant. The
            p-value is at least ``1 / (B + 1)`` with B permutations, so B must be at least
            ``1 / significance - 1`` (``diagnostics.permutations``, 199 by default).
        near_fraction: in [0, 1]: averaged MI / ceiling below this is near chance.
        dependent_fraction: in [near_fraction, 1]: averaged MI / ceiling that counts as
            materially dependent (the band between the two is the hysteresis).
        entropy_tol: in [0, 1]: largest relative fall of the window's mean entropy below its
            level at the last dependent evaluation that still counts as holding.
        min_pairs: >= 2: fewest scored reasonings for a verdict.
        min_prompts: >= 2: fewest distinct prompts among them for a verdict.
        min_valid_rate: in [0, 1]: ``valid_thinking_rate`` below this is ``format_collapsed``.
        drop_z: >= 0: standard errors (``mi_stderr``, combined over the windows) by which the
            window's mean MI must have fallen below its level at the last dependent evaluation
            for ``collapsed``.
    """

    window: int = 3
    significance: float = 0.01
    near_fraction: float = 0.1
    dependent_fraction: float = 0.2
    entropy_tol: float = 0.2
    min_pairs: int = 16
    min_prompts: int = 4
    min_valid_rate: float = 0.5
    drop_z: float = 4.0

    def check_settings(self, prefix: str = "") -> None:
        """Raise ``ValueError`` naming the first setting out of its range (``prefix`` + name)."""
        ranges = {
            "window": (1, math.inf),
            "significance": (0.0, 1.0),
            "near_fraction": (0.0, 1.0),
            "dependent_fraction": (self.near_fraction, 1.0),
            "entropy_tol": (0.0, 1.0),
            "min_pairs": (2, math.inf),
            "min_prompts": (2, math.inf),
            "min_valid_rate": (0.0, 1.0),
            "drop_z": (0.0, math.inf),
        }
        for name, (low, high) in ranges.items():
            value = getattr(self, name)
            open_ends = name == "significance" and not 0.0 < value < 1.0
            if open_ends or not low <= value <= high:
                bound = f"lie in [{low}, {high}]" if high < math.inf else f"be >= {low}"
                bound = "lie in (0, 1)" if name == "significance" else bound
                raise ValueError(f"{prefix}{name}: must {bound}, got {value!r}")


@dataclass
class ZScoreTracker(DetectorSettings):
    """Moving averages of the z-scores, and a state for every evaluation with stated error rates.

    Call :meth:`update` once per diagnostic evaluation with the dict of :func:`mi_metrics` plus the
    trainer's sample statistics (``valid_thinking_rate``; ``num_reasonings`` and ``num_prompts``
    come with :func:`mi_metrics`), or with those statistics alone when too few prompts kept a
    reasoning to score. The entropy is the policy's mean token entropy over the **whole** batch,
    or, when not passed, ``conditional_entropy_est_per_token`` of the metrics (the diagnostic
    sample is drawn from the whole batch before filtering; the kept groups' entropy moves with
    what the filter keeps).

    Each evaluation gets one state (:data:`STATES`), the first rule that applies:

    1. ``format_collapsed``: ``valid_thinking_rate < min_valid_rate``: most replies no longer
       hold a closed think block, so the scored reasonings are a minority picked by the format
       and say nothing of the policy's reasoning. Not a template collapse; the evaluation does
       not enter the MI history.
    2. ``insufficient_sample``: no MI metrics, or fewer than ``min_pairs`` scored reasonings or
       ``min_prompts`` distinct prompts. No verdict; it does not enter the MI history.
    3. Every other evaluation enters the MI history. Its **window** is the last ``window`` such
       evaluations (itself included); ``f`` is the mean over the window of MI / ceiling
       (``mi_estimate / mi_upper_bound``, the ceiling being H(prompt mixture), ``log K`` when
       balanced) and the entropy level is the window's mean entropy.

       - ``dependent``: significant (permutation ``mi_pvalue <= significance``) **and** material
         (``f >= dependent_fraction``). Sets "was dependent" and the entropy reference (the
         window's mean entropy at this evaluation).
       - ``never_dependent``: a full window with ``f < near_fraction`` and no significant p-value
         in it, and no evaluation so far was dependent (a policy that never read its input did not collapse).
       - ``collapsed`` (``template_collapse``): a full window with ``f < near_fraction`` and no
         significant p-value in it, an earlier dependent evaluation, a significant fall (the
         window's mean ``mi_estimate`` at least ``drop_z`` standard errors below its mean at
         the last dependent evaluation, each evaluation's error its ``mi_stderr``), and the entropy holding: every entropy of the window finite
         and their mean ``>= (1 - entropy_tol) * reference``. Once raised it stays
         (hysteresis) until ``window`` dependent evaluations in a row clear it; the evaluations
         between report ``collapsed``.
       - ``undecided``: anything else: between the two fractions, material but not significant,
         a window not yet full, a fall within the noise, or near chance with the entropy falling
         from the reference (the policy converging to one output: a third failure, not template
         collapse).

    Why these rules (issue 23; rates measured in ``tests/test_collapse_detector.py`` on MI metrics
    of simulated log-likelihood matrices, 32 pairs of 8 prompts): one evaluation "1.7 SD above
    chance" set "was dependent" for good, and the weak noise of a stationary policy with
    I = 0.04 nats then raised the flag in 15-25 % of runs; requiring a significant **and**
    material (averaged) MI brings that to 0 of 200 runs. At 16 pairs of 4 prompts a stationary
    MI of 8-15 % of the ceiling crosses both fractions by noise (12-38 % of runs without the fall
    test); a fall of ``drop_z`` = 4 standard errors brings that under 1 %. The entropy is judged against its level
    when the policy was last dependent, averaged over a window, with a relative band
    ``entropy_tol`` (0.2: the per-token conditional entropy estimate of 16-64 reasonings moves
    a few percent from batch to batch; a template that settles from its peak drifted more than
    the old 10 % of the window's first evaluation, which missed a known collapse).

    RAGEN's MI-ZScore (``ragen_mi_zscore``, per token, else ``ragen_mi_zscore_seq``) is averaged
    over the same window and logged (``collapse/ragen_mi_zscore_avg``) but not thresholded: it
    has no null distribution, so no threshold on it has a stated error rate.

    :meth:`state_dict` and :meth:`load_state_dict` save and restore it with a checkpoint.

    RAGEN's MI-ZScore EMA (``collapse_metrics.py:315-323,336-342``): the population std of the
    marginal log-likelihood is smoothed, ``ema <- decay * ema + (1 - decay) * std`` (the first
    value initialises it; RAGEN's decay is 0.9), and
    ``ragen_mi_zscore_ema = mi_estimate_per_token / (ema + 1e-3)`` (and ``_seq`` with the summed
    ones), which equals RAGEN's ``mean((matched - marginal) / (ema + 1e-3))``.

    Attributes:
        ema_decay: in [0, 1): decay of every moving average here; the z-score's is
            ``ema <- ema_decay * ema + (1 - ema_decay) * z``, the first z initialising it.
        window, significance, near_fraction, dependent_fraction, entropy_tol, min_pairs,
            min_prompts, min_valid_rate, drop_z: the thresholds (:class:`DetectorSettings`).
    """

    ema_decay: float = 0.9
    zscore_ema: float | None = field(default=None, init=False)
    history: list[_Evaluation] = field(default_factory=list, init=False, repr=False)
    _latched: bool = field(default=False, init=False, repr=False)
    _clear_run: int = field(default=0, init=False, repr=False)
    _ever_dependent: bool = field(default=False, init=False, repr=False)
    _reference: float = field(default=math.nan, init=False, repr=False)
    _mi_reference: tuple[float, float] = field(default=(math.nan, 0.0), init=False, repr=False)
    _std_ema: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1); got {self.ema_decay}")
        self.check_settings()

    @classmethod
    def from_config(cls, config: object) -> ZScoreTracker:
        """A tracker with the settings of a :class:`baselines.config.DiagnosticsConfig`."""
        names = [f.name for f in dataclasses.fields(DetectorSettings)]
        return cls(ema_decay=config.ema, **{name: getattr(config, name) for name in names})

    # ------------------------------------------------------------------ the states

    @property
    def state(self) -> str:
        """The state of the last evaluation (``""`` before the first)."""
        return self.history[-1].state if self.history else ""

    @property
    def template_collapse(self) -> bool:
        """The last evaluation's state is ``collapsed``."""
        return self.state == "collapsed"

    @property
    def never_dependent(self) -> bool:
        """The last evaluation's state is ``never_dependent``."""
        return self.state == "never_dependent"

    def _window(self) -> list[_Evaluation]:
        """The last ``window`` evaluations of the MI history (the last one included)."""
        scored = [e for e in self.history if e.state not in _NO_MI_STATES]
        return scored[-self.window :]

    def _classify(self, e: _Evaluation) -> str:
        """The state of ``e``, the last of :attr:`history`; moves the flag's running state."""
        if math.isfinite(e.valid_thinking_rate) and e.valid_thinking_rate < self.min_valid_rate:
            return "format_collapsed"
        if (
            not math.isfinite(e.mi_estimate)
            or e.num_reasonings < self.min_pairs
            or e.num_prompts < self.min_prompts
        ):
            return "insufficient_sample"
        e.state = "scored"  # enters the window
        recent = self._window()
        fraction = _mean([r.fraction for r in recent])
        entropies = [r.entropy for r in recent]
        level = _level(recent)
        dependent = e.mi_pvalue <= self.significance and fraction >= self.dependent_fraction
        if dependent:
            self._ever_dependent = True
            self._reference = _mean([h for h in entropies if math.isfinite(h)])
            self._mi_reference = level
        if self._latched:
            self._clear_run = self._clear_run + 1 if dependent else 0
            if self._clear_run < self.window:
                return "collapsed"
            self._latched, self._clear_run = False, 0
        if dependent:
            return "dependent"
        near = fraction < self.near_fraction and not any(
            r.mi_pvalue <= self.significance for r in recent
        )
        if len(recent) < self.window or not near:
            return "undecided"
        if not self._ever_dependent:
            return "never_dependent"
        (mi_ref, se_ref), (mi_now, se_now) = self._mi_reference, level
        if not mi_ref - mi_now >= self.drop_z * math.hypot(se_ref, se_now):
            return "undecided"  # no significant fall from the dependent level
        holding = (
            all(math.isfinite(h) for h in entropies)
            and _mean(entropies) >= (1.0 - self.entropy_tol) * self._reference
        )
        if holding:
            self._latched, self._clear_run = True, 0
            return "collapsed"
        return "undecided"

    def _replay(self) -> None:
        """Recompute every state from :attr:`history` (the states are a function of it)."""
        history, self.history = self.history, []
        self._latched, self._clear_run, self._ever_dependent = False, 0, False
        self._reference, self._mi_reference = math.nan, (math.nan, 0.0)
        for e in history:
            self.history.append(e)
            e.state = self._classify(e)

    def state_dict(self) -> dict[str, object]:
        """The running state (averages, history with states) as plain Python data."""
        return {
            "version": 2,
            "zscore_ema": self.zscore_ema,
            "history": [dataclasses.asdict(e) for e in self.history],
            "std_ema": dict(self._std_ema),
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore what :meth:`state_dict` returned (settings stay those of this tracker).

        The states are recomputed from the history. A state saved before the states existed (no
        ``version``) lacks the p-values, so its evaluations cannot be dependent again: its saved
        ``flag`` and ``ever_dependent`` are kept instead.
        """
        self.zscore_ema = state["zscore_ema"]
        self._std_ema = dict(state.get("std_ema", {}))
        self.history = [_Evaluation(**e) for e in state["history"]]
        self._replay()
        if "version" not in state:
            self._ever_dependent = self._ever_dependent or bool(state.get("ever_dependent"))
            if state.get("flag"):
                self._latched, self._clear_run = True, 0
                if self.history:
                    self.history[-1].state = "collapsed"

    def _ema(self, key: str, value: float) -> float:
        old = self._std_ema.get(key)
        if old is None or not math.isfinite(old):
            self._std_ema[key] = value
        else:
            self._std_ema[key] = self.ema_decay * old + (1.0 - self.ema_decay) * value
        return self._std_ema[key]

    def update(
        self, metrics: Mapping[str, float], entropy: float | None = None
    ) -> dict[str, float]:
        """Record one evaluation.

        Args:
            metrics: output of :func:`mi_metrics` (needs ``mi_zscore``, ``mi_estimate``,
                ``mi_upper_bound``, ``mi_pvalue``, ``num_reasonings``, ``num_prompts``; and
                ``conditional_entropy_est_per_token`` when ``entropy`` is None), with the
                trainer's ``valid_thinking_rate`` when known; or, for an evaluation with nothing
                to score, only the sample statistics (``num_reasonings``, ``num_prompts``,
                ``valid_thinking_rate``). The RAGEN moving averages are added when
                ``ragen_marginal_std`` (and ``_seq``) are present.
            entropy: mean policy token entropy (nats) over the whole batch at this evaluation;
                None reads the per-token conditional entropy estimate from ``metrics``.

        Returns:
            ``collapse/state_<s>`` for each state of :data:`STATES` (1.0 for this evaluation's,
            else 0.0), ``collapse/template_collapse`` and ``collapse/never_dependent`` (the same
            as ``state_collapsed`` and ``state_never_dependent``); with MI metrics also
            ``collapse/mi_zscore``, ``collapse/mi_zscore_ema``, ``collapse/entropy``,
            ``collapse/mi_fraction`` (``mi_estimate / mi_upper_bound``); when the evaluation
            enters the MI history ``collapse/mi_fraction_avg``, ``collapse/entropy_avg``,
            ``collapse/ragen_mi_zscore_avg`` (window means) and ``collapse/entropy_reference``
            (once an evaluation was dependent); and when available
            ``collapse/ragen_marginal_std_ema``, ``collapse/ragen_mi_zscore_ema`` and their
            ``_seq`` forms.

        Raises:
            KeyError: a required metric is missing (the message names it).
        """
        has_mi = "mi_estimate" in metrics
        if has_mi:
            required = ("mi_zscore", "mi_upper_bound", "mi_pvalue", "num_reasonings")
            missing = [k for k in required + ("num_prompts",) if k not in metrics]
            if entropy is None and "conditional_entropy_est_per_token" not in metrics:
                missing.append("conditional_entropy_est_per_token (or pass entropy=...)")
        else:
            stats = ("num_reasonings", "num_prompts", "valid_thinking_rate")
            missing = [] if any(k in metrics for k in stats) else ["mi_estimate", *stats]
        if missing:
            raise KeyError(f"ZScoreTracker.update: metrics lack {missing}")
        if entropy is None:
            entropy = float(metrics.get("conditional_entropy_est_per_token", math.nan))
        ragen = metrics.get("ragen_mi_zscore", metrics.get("ragen_mi_zscore_seq", math.nan))
        evaluation = _Evaluation(
            entropy=float(entropy),
            retrieval_above_chance=float(
                metrics.get("retrieval_accuracy", math.nan)
                - metrics.get("retrieval_chance", math.nan)
            ),
            mi_estimate=float(metrics.get("mi_estimate", math.nan)),
            mi_upper_bound=float(metrics.get("mi_upper_bound", math.nan)),
            mi_pvalue=float(metrics.get("mi_pvalue", math.nan)),
            mi_stderr=float(metrics.get("mi_stderr", math.nan)),
            ragen_mi_zscore=float(ragen),
            num_reasonings=float(metrics.get("num_reasonings", 0.0)),
            num_prompts=float(metrics.get("num_prompts", 0.0)),
            valid_thinking_rate=float(metrics.get("valid_thinking_rate", math.nan)),
        )
        self.history.append(evaluation)
        evaluation.state = self._classify(evaluation)
        out = {f"collapse/state_{s}": float(s == evaluation.state) for s in STATES}
        out["collapse/template_collapse"] = float(self.template_collapse)
        out["collapse/never_dependent"] = float(self.never_dependent)
        if not has_mi:
            return out
        z = float(metrics["mi_zscore"])
        if self.zscore_ema is None or not math.isfinite(self.zscore_ema):
            self.zscore_ema = z
        else:
            self.zscore_ema = self.ema_decay * self.zscore_ema + (1.0 - self.ema_decay) * z
        out.update(
            {
                "collapse/mi_zscore": z,
                "collapse/mi_zscore_ema": self.zscore_ema,
                "collapse/entropy": float(entropy),
                "collapse/mi_fraction": evaluation.fraction,
            }
        )
        if evaluation.state not in _NO_MI_STATES:
            recent = self._window()
            out["collapse/mi_fraction_avg"] = _mean([r.fraction for r in recent])
            out["collapse/entropy_avg"] = _mean([r.entropy for r in recent])
            out["collapse/ragen_mi_zscore_avg"] = _mean([r.ragen_mi_zscore for r in recent])
            if math.isfinite(self._reference):
                out["collapse/entropy_reference"] = self._reference
        for suffix, mi_key in (("", "mi_estimate_per_token"), ("_seq", "mi_estimate")):
            std = metrics.get(f"ragen_marginal_std{suffix}")
            if std is None or mi_key not in metrics:
                continue
            ema = self._ema(suffix or "token", float(std))
            out[f"collapse/ragen_marginal_std_ema{suffix}"] = ema
            out[f"collapse/ragen_mi_zscore_ema{suffix}"] = float(metrics[mi_key]) / (
                ema + RAGEN_STD_EPS
            )
        return out


# ----------------------------------------------------------------------------------------------
# Scoring log p(z | x) with a causal LM
# ----------------------------------------------------------------------------------------------


@contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) for the duration, then the model's previous mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the KV-cache argument: ``cache`` (transformers >= 5.x) or ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _output_cache(output: object) -> object:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _check_ids(
    prompts_ids: Sequence[Sequence[int]], reasonings_ids: Sequence[Sequence[int]]
) -> None:
    if len(prompts_ids) == 0 or len(reasonings_ids) == 0:
        raise ValueError("need at least one prompt and one reasoning")
    for j, x in enumerate(prompts_ids):
        if len(x) == 0:
            raise ValueError(f"prompt {j} is empty; a prompt needs at least one token (e.g. BOS)")


def _pad_right(seqs: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad with token 0 (never attended to, never scored); returns (ids, mask) [b, L]."""
    width = max(1, max(len(s) for s in seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[r, : len(s)] = 1
    return ids.to(device), mask.to(device)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def score_matrix(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    reasonings_ids: Sequence[Sequence[int]],
    batch_size: int = 16,
    temperature: float = 1.0,
) -> Tensor:
    """``log p(z_m | x_j)`` for every reasoning and prompt, reusing each prompt's KV cache.

    For each prompt x_j: one forward pass over x_j with ``use_cache=True`` gives its key/value
    cache and the next-token distribution for the first token of z. Then the reasonings are scored
    in batches of ``batch_size`` continuing from that cache, copied and repeated along the batch
    dimension (``Cache.batch_repeat_interleave``): the prompt is encoded K times in all, instead of
    M * K times as in :func:`score_matrix_naive`. The trunk runs without the LM head, which then
    reads only the scored positions (:func:`baselines.scoring.head_logprobs`): memory follows
    the number of z tokens, never ``[batch, width, V]``. Reasonings are sorted by length before batching
    (less padding), right-padded, given position ids ``len(x_j) + t`` and an attention mask of ones
    over the prompt and the real z tokens; padded positions are never scored. Log-probabilities are
    taken in float32.

    ``prompts_ids[j]`` is every token that precedes the reasoning in the policy's context (chat
    template and the opening ``<think>`` included); ``reasonings_ids[m]`` the reasoning tokens.

    Args:
        model: a Hugging Face causal LM (``AutoModelForCausalLM``-compatible, with a cache that
            supports ``copy.deepcopy`` and ``batch_repeat_interleave``, e.g. ``DynamicCache``).
            Run in eval mode for the call; its previous mode is restored.
        prompts_ids: K token-id lists, each non-empty.
        reasonings_ids: M token-id lists; an empty one scores 0 (log 1).
        batch_size: reasonings per forward pass, >= 1.
        temperature: logits are divided by it (the sampling temperature: z is scored under the
            distribution it was sampled from), > 0.

    Returns:
        float32 CPU tensor ``[M, K]``.

    Raises:
        ValueError: no prompts or reasonings, an empty prompt, ``batch_size < 1`` or
            ``temperature <= 0``.
    """
    _check_ids(prompts_ids, reasonings_ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")
    device = _model_device(model)
    body = trunk(model)
    cache_kw = _cache_kwarg(body)
    num_z = len(reasonings_ids)
    order = sorted(range(num_z), key=lambda m: -len(reasonings_ids[m]))
    batches = []
    for start in range(0, num_z, batch_size):
        members = order[start : start + batch_size]
        ids, mask = _pad_right([reasonings_ids[m] for m in members], device)
        batches.append((torch.tensor(members), ids, mask))

    out = torch.zeros(num_z, len(prompts_ids), dtype=torch.float32)
    with _eval_mode(model):
        for j, prompt in enumerate(prompts_ids):
            prompt_len = len(prompt)
            x = torch.as_tensor([list(prompt)], dtype=torch.long, device=device)
            encoded = body(input_ids=x, use_cache=True)
            prompt_cache = _output_cache(encoded)
            # The prompt's last position predicts the first reasoning token: its hidden state
            # alone goes through the head.
            last = encoded.last_hidden_state[0, -1:]
            for members, ids, mask in batches:
                b, width = ids.shape
                first, _ = head_logprobs(
                    model, last.expand(b, -1), ids[:, 0], temperature=temperature
                )
                total = first * mask[:, 0]
                if width > 1:
                    cache = copy.deepcopy(prompt_cache)
                    cache.batch_repeat_interleave(b)
                    inputs = ids[:, :-1]
                    attention = torch.cat(
                        [torch.ones(b, prompt_len, dtype=mask.dtype, device=device), mask[:, :-1]],
                        dim=1,
                    )
                    positions = torch.arange(prompt_len, prompt_len + width - 1, device=device)
                    hidden = body(
                        input_ids=inputs,
                        attention_mask=attention,
                        position_ids=positions.unsqueeze(0).expand(b, -1),
                        use_cache=True,
                        **{cache_kw: cache},
                    ).last_hidden_state
                    # The head reads only the real z positions (never a [b, width, V] tensor).
                    rows, cols = mask[:, 1:].bool().nonzero(as_tuple=True)
                    lp, _ = head_logprobs(
                        model, hidden[rows, cols], ids[rows, cols + 1], temperature=temperature
                    )
                    total = total.float().index_add(0, rows, lp)
                out[members, j] = total.float().cpu()
    return out


@torch.no_grad()
def score_matrix_naive(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    reasonings_ids: Sequence[Sequence[int]],
    batch_size: int = 16,
) -> Tensor:
    """Reference for :func:`score_matrix`: teacher-force ``x_j + z_m`` afresh for every pair.

    All M * K concatenations are right-padded and run in batches of ``batch_size`` without a
    cache; the log-probabilities of the z tokens (positions ``len(x_j) .. len(x_j) + len(z_m) - 1``,
    predicted by the logits one position earlier) are summed. Same arguments, result and errors
    as :func:`score_matrix`; K times more prompt tokens go through the model.
    """
    _check_ids(prompts_ids, reasonings_ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    device = _model_device(model)
    pairs = [(m, j) for j in range(len(prompts_ids)) for m in range(len(reasonings_ids))]
    out = torch.zeros(len(reasonings_ids), len(prompts_ids), dtype=torch.float32)
    with _eval_mode(model):
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            seqs = [list(prompts_ids[j]) + list(reasonings_ids[m]) for m, j in chunk]
            ids, mask = _pad_right(seqs, device)
            logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
            token_logprobs = logprobs_from_logits(logits[:, :-1], ids[:, 1:])
            score_mask = torch.zeros_like(token_logprobs)
            for r, (m, j) in enumerate(chunk):
                first = len(prompts_ids[j]) - 1
                score_mask[r, first : first + len(reasonings_ids[m])] = 1.0
            totals = (token_logprobs * score_mask).sum(dim=1).float().cpu()
            for r, (m, j) in enumerate(chunk):
                out[m, j] = totals[r]
    return out


def episode_mi_diagnostics(
    model: torch.nn.Module,
    tokenizer: object,
    episodes: Sequence[object],
    config: object,
    *,
    seed: int,
    step: int,
    temperature: float,
) -> dict[str, float]:
    """MI diagnostics of a batch of played episodes, scored at the sampling temperature.

    One function for the agentgym trainer (``Trainer._diagnostics``) and the TRL integration
    (:class:`baselines.integrations.trl.AgentgymGRPOTrainer`). z is RAGEN-2's reasoning taken
    token-exact (:func:`baselines.episodes.reasoning_span`: the sampled ids between the think
    tags of a block that opens the reply; empty, unclosed and special-id spans dropped). Up to
    ``config.max_pairs`` pairs are drawn among the valid z (``numpy`` generator seeded
    ``seed * 7919 + step``), scored by :func:`score_matrix` against every distinct prompt.

    Args:
        model: the policy (put in eval mode by the caller; scored under ``torch.no_grad``).
        tokenizer: its tokenizer.
        episodes: :class:`baselines.episodes.EpisodeRecord` of the batch, before filtering.
        config: a :class:`baselines.config.DiagnosticsConfig` (``turn``, ``max_pairs``,
            ``permutations``).
        seed: the run's seed; step: the step (seeds the pair draw and the permutations).
        temperature: the divisor of the logits (the sampling temperature, 1 for greedy).

    Returns:
        :func:`mi_metrics`' values and ``num_pairs_total`` (candidate turns),
        ``num_pairs_valid`` (valid z among them), ``valid_thinking_rate``, ``z_special_rate``
        (share dropped for a special id), ``num_reasonings`` and ``num_prompts`` (the scored pairs
        and their distinct prompts), as floats; only these when fewer than 2 distinct prompts
        keep a z.
    """
    import numpy as np

    from baselines.episodes import reasoning_span  # episodes imports this module

    turns = []
    for episode in episodes:
        turns.extend(episode.turns[:1] if config.turn == "first" else episode.turns)
    # One rule for z (reasoning_span): the exact sampled ids of a think block that opens
    # the reply; a block holding a special id is dropped, never spliced. Pairs are drawn
    # among the valid z, as RAGEN samples among valid reasonings.
    spans = [reasoning_span(tokenizer, t) for t in turns]
    valid = [(tuple(t.sample.prompt_ids), z) for t, (z, ok) in zip(turns, spans, strict=True) if z]
    stats = {
        "num_pairs_total": float(len(turns)),
        "num_pairs_valid": float(len(valid)),
        "valid_thinking_rate": len(valid) / len(turns) if turns else 0.0,
        "z_special_rate": (sum(ok == "special" for _, ok in spans) / len(turns) if turns else 0.0),
    }
    rng = np.random.default_rng(seed * 7919 + step)
    pairs = valid
    if len(pairs) > config.max_pairs:
        pick = np.sort(rng.choice(len(pairs), size=config.max_pairs, replace=False))
        pairs = [pairs[i] for i in pick]
    prompts = sorted({p for p, _ in pairs})
    stats["num_reasonings"], stats["num_prompts"] = float(len(pairs)), float(len(prompts))
    if len(prompts) < 2:
        return stats
    index = {p: j for j, p in enumerate(prompts)}
    z_ids = [z for _, z in pairs]
    with torch.no_grad():
        loglik = score_matrix(
            model, [list(p) for p in prompts], z_ids, batch_size=8, temperature=temperature
        )
    prompt_index = torch.tensor([index[p] for p, _ in pairs])
    lengths = torch.tensor([len(z) for z in z_ids])
    out = mi_metrics(
        loglik, prompt_index, lengths=lengths, num_permutations=config.permutations, seed=step
    )
    out.update(stats)
    return out
