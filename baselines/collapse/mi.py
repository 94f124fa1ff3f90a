"""Mutual-information estimate of template collapse (RAGEN-2, "Reasoning Collapse in Agentic RL").

Template collapse: the policy's reasonings z stay diverse (high entropy within an input) but stop
depending on the input x: the mutual information I(X; Z) falls to zero, so z is a template that
could have been written for any prompt. Token entropy alone cannot see it; this estimate can.

Every sampled reasoning z_m is teacher-forced against every distinct prompt x_j of the sample,
giving the matrix ``loglik[m, j] = l_j(z_m) = log p(z_m | x_j)``
(:func:`baselines.collapse.scorer.score_matrix`); from it :func:`mi_metrics` computes, with i(m)
the prompt z_m was sampled from and w_j the mixture weights:

    marginal(z_m)  = log sum_j w_j exp(l_j(z_m))             (log p(z_m) under the prompt mixture)
    mi_estimate    = mean_m [ l_{i(m)}(z_m) - marginal(z_m) ]
                   = reasoning_entropy_est - conditional_entropy_est
    retrieval      = does argmax_j l_j(z_m) recover i(m)?

With uniform weights the marginal is ``logsumexp_j l_j(z_m) - log K`` exactly. Each term is the
pointwise MI of a sample (x, z) ~ p(x, z), so the mean is an unbiased Monte Carlo estimate of I(X; Z)
when the weights are the true prompt distribution, and ``mi_estimate <= log K`` always holds for
uniform weights (since l_{i(m)} <= logsumexp_j l_j).

:func:`mi_pairs` picks the (prompt, reasoning) pairs from the replies as RAGEN does
(:func:`baselines.collapse.reasoning.reasoning_text`: the stripped text between ``<think>`` and
``</think>``; empty or unclosed ones dropped), and :func:`retrieval_chance` gives the chance level
the retrieval accuracy is compared with. The detector that follows the z-scores over training and
gives each evaluation a state is :class:`baselines.collapse.detector.ZScoreTracker`
(:data:`baselines.collapse.detector.STATES`).

Names next to RAGEN's (mll-lab-nu/RAGEN ``ragen/trainer/collapse_metrics.py``):
``mi_estimate`` (summed log-likelihoods, our headline: an MI estimate in nats) is RAGEN's
``collapse/mi_seq_estimate`` (``:291``); ``mi_estimate_per_token`` is RAGEN's headline
``collapse/mi_estimate`` (per-token means, ``:551-555,599-601``), which is not an estimate of
I(X; Z) (a difference of per-token averages), kept for comparison. ``mi_zscore`` is our permutation
z-score; RAGEN's MI-ZScore is ``ragen_mi_zscore`` (``:305-313``) and its moving form
``ragen_mi_zscore_ema`` (kept by :class:`~baselines.collapse.detector.ZScoreTracker`,
``:315-323,336-342``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from baselines.collapse.reasoning import reasoning_text

__all__ = [
    "RETRIEVAL_KS",
    "RAGEN_STD_EPS",
    "mi_pairs",
    "retrieval_chance",
    "mi_metrics",
]

# -inf log-likelihoods (impossible under a prompt) are replaced by this floor so the permutation
# null stays finite; exp(-1e30) is 0 in float64, so logsumexp and the MI estimate are unchanged.
_LOGLIK_FLOOR = -1e30


RETRIEVAL_KS = (1, 2, 4)


# RAGEN's MI-ZScore denominator constant (collapse_metrics.py:41 ``std_eps=1e-3``).
RAGEN_STD_EPS = 1e-3


def mi_pairs(
    prompts: Sequence[str], responses: Sequence[str], special_tokens: Sequence[str] = ()
) -> tuple[list[str], list[str], Tensor, dict[str, float]]:
    """(prompt, reasoning) pairs for :func:`baselines.collapse.scorer.score_matrix`, empty
    reasonings dropped.

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
            :func:`baselines.collapse.scorer.score_matrix`). ``-inf`` is allowed off the
            matched prompt.
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
