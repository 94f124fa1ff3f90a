"""Loss terms of the reference trainer: PPO clipped surrogate, clipped value loss, KL, entropy.

The policy's terms are aggregated by one of verl's four ``loss_agg_mode`` values
(:func:`agg_loss`; verl ``verl/trainer/ppo/core_algos.py``, ``agg_loss``): ``token-mean`` (the
default; DAPO, Yu et al. 2025, Sec. 3.3 "token-level policy gradient loss"), ``seq-mean-token-sum``,
``seq-mean-token-mean`` and ``seq-mean-token-sum-norm`` (Dr.GRPO's constant normaliser). The value
loss is always a token mean.

Safety nets, as verl has them (``core_algos.py``, ``compute_policy_loss_vanilla``): the log-ratio is
clamped to [-20, 20] before ``exp`` and dual-clip PPO caps a negative-advantage token's loss at
``-A * clip_ratio_c`` (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep
Reinforcement Learning", arXiv:1912.09729).

References:
    - PPO: Schulman et al. 2017, "Proximal Policy Optimization Algorithms", Eq. 7 (clipped
      surrogate) and the clipped value loss of the OpenAI baselines implementation.
    - Clip-higher: Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at
      Scale", Sec. 3.1 (separate ``eps_low`` and ``eps_high``).
    - KL estimators: J. Schulman 2020, "Approximating KL Divergence",
      http://joschu.net/blog/kl-approx.html (k1, k2, k3).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "LOSS_AGG_MODES",
    "LOG_RATIO_CLAMP",
    "agg_loss",
    "agg_units",
    "masked_mean",
    "policy_loss",
    "value_loss",
    "kl_penalty",
]


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` over the positions where ``mask`` is 1.

    Masked-out entries never reach the sum (``torch.where``, so a NaN or inf there is harmless).
    An empty mask gives 0, not NaN, so a fully filtered batch yields a zero loss.

    Args:
        x: float tensor.
        mask: bool or 0/1 tensor of the same shape.
        dim: reduce over this dimension only; ``None`` reduces over everything (token mean).

    Returns:
        0-dim tensor (``dim=None``) or ``x`` reduced along ``dim``.

    Raises:
        ValueError: shapes differ.
    """
    if x.shape != mask.shape:
        raise ValueError(
            f"x and mask must share a shape; got {tuple(x.shape)}, {tuple(mask.shape)}"
        )
    valid = mask.bool()
    total = torch.where(valid, x, torch.zeros_like(x))
    if dim is None:
        return total.sum() / valid.sum().clamp(min=1)
    return total.sum(dim) / valid.sum(dim).clamp(min=1)


#: verl's loss aggregation modes (``verl/trainer/ppo/core_algos.py``, ``agg_loss``).
LOSS_AGG_MODES = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)


def agg_units(mask: Tensor, mode: str) -> Tensor:
    """What :func:`agg_loss` averages over, counted in ``mask``: sampled tokens for
    ``token-mean``, sequences (rows with at least one sampled token) for the ``seq-mean-*`` modes.

    A micro-batch's :func:`agg_loss` times ``agg_units(micro) / agg_units(mini-batch)``, summed
    over the micro-batches, is the mini-batch's :func:`agg_loss`, whatever the split: that is how
    the learner accumulates gradients (:meth:`baselines.update.Actor.update`).

    Returns:
        0-dim float tensor (float64 for exact counts).
    """
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES}; got {mode!r}")
    valid = mask.bool()
    if mode == "token-mean":
        return valid.sum().to(torch.float64)
    return valid.any(dim=-1).sum().to(torch.float64)


def agg_loss(
    loss_mat: Tensor, mask: Tensor, mode: str = "token-mean", horizon: int | None = None
) -> Tensor:
    """A ``[B, T]`` matrix of per-token losses aggregated to a scalar, by verl's ``loss_agg_mode``
    (``verl/trainer/ppo/core_algos.py``, ``agg_loss``), with ``S`` the sequences (rows with a
    sampled token) and ``m`` the mask:

        token-mean               sum_{i,t} m l / sum_{i,t} m
        seq-mean-token-sum       (1/S) sum_i sum_t m l
        seq-mean-token-mean      (1/S) sum_i (sum_t m l / sum_t m)
        seq-mean-token-sum-norm  (1/S) sum_i sum_t m l / horizon

    The last is Dr.GRPO's (Liu et al. 2025, "Understanding R1-Zero-Like Training",
    arXiv:2503.20783: each response's token sum over a constant ``MAX_TOKENS``) and TRL's ``dr_grpo``
    (``trl/trainer/grpo_trainer.py``, ``GRPOTrainer._compute_loss``: ``sum / (B *
    max_completion_length)``). verl's ``agg_loss`` divides the sum by the padded width only,
    without ``1/S``; its gradient accumulation then multiplies by micro-batch size / mini-batch
    size, which gives this formula at one sequence per micro-batch and a gradient that grows with
    the micro-batch size otherwise. Here ``horizon`` is a constant (``algorithm.loss_agg_horizon``)
    rather than the padded width, which changes from batch to batch.

    verl's ``seq-mean-*`` modes average over every row; rows without a sampled token count for
    nothing here (no 0/0 in ``seq-mean-token-mean``, no dilution), as in :func:`agg_units`.

    Args:
        loss_mat: float ``[B, T]``.
        mask: bool or 0/1 ``[B, T]``: 1 on policy tokens.
        mode: one of :data:`LOSS_AGG_MODES`.
        horizon: the constant divisor of ``seq-mean-token-sum-norm`` (> 0); not read otherwise.

    Returns:
        0-dim tensor; 0 when the mask is empty.

    Raises:
        ValueError: unknown mode, shapes differ, or no positive ``horizon`` for the norm mode.
    """
    if loss_mat.shape != mask.shape:
        raise ValueError(
            f"loss_mat and mask must share a shape; got {tuple(loss_mat.shape)}, "
            f"{tuple(mask.shape)}"
        )
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES}; got {mode!r}")
    if mode == "token-mean":
        return masked_mean(loss_mat, mask)
    valid = mask.bool()
    seq_sums = torch.where(valid, loss_mat, torch.zeros_like(loss_mat)).sum(-1)
    seqs = valid.any(-1).sum().clamp(min=1)
    if mode == "seq-mean-token-sum":
        return seq_sums.sum() / seqs
    if mode == "seq-mean-token-mean":
        return (seq_sums / valid.sum(-1).clamp(min=1)).sum() / seqs
    if horizon is None or horizon <= 0:
        raise ValueError(
            f"loss_agg_mode seq-mean-token-sum-norm needs a constant horizon > 0 "
            f"(algorithm.loss_agg_horizon); got {horizon!r}"
        )
    return seq_sums.sum() / (seqs * horizon)


#: verl's clamp of the PPO log-ratio before ``exp`` (``core_algos.py``,
#: ``compute_policy_loss_vanilla``: ``torch.clamp(negative_approx_kl, min=-20.0, max=20.0)``).
LOG_RATIO_CLAMP = 20.0


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
    horizon: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Dual-clip PPO surrogate with asymmetric clip bounds (verl ``core_algos.py``,
    ``compute_policy_loss_vanilla``).

    With ``log r = clamp(logprobs - old_logprobs, -20, 20)`` (:data:`LOG_RATIO_CLAMP`, verl's
    clamp: without it a log-ratio of 100 gives ``exp(100) = inf`` and NaN weights) and
    ``r = exp(log r)`` (Schulman et al. 2017, Eq. 7; DAPO Eq. 10; dual clip: Ye et al. 2020):

        l_t = max(-A_t r_t, -A_t clip(r_t, 1 - clip_low, 1 + clip_high))
        l_t = min(l_t, -A_t * clip_ratio_c)          where A_t < 0 (dual clip)
        loss = agg_loss(l, mask, loss_agg_mode)

    The dual clip bounds a negative-advantage token's loss (and gradient) when the ratio has
    grown far past ``clip_ratio_c``: a log-ratio of 5 with A = -1 gives ``e^5 = 148.4`` without
    it, 3 with it.

    Stats (detached 0-dim tensors, token means over the mask whatever the aggregation; call
    ``.item()`` when logging):
        ``actor/pg_loss``: the loss value.
        ``actor/pg_clipfrac_low``: share of tokens where the low bound is active
        (``r < 1 - clip_low`` and ``A < 0``: the clipped branch wins, the gradient is 0).
        ``actor/pg_clipfrac_high``: share where ``r > 1 + clip_high`` and ``A > 0``.
        ``actor/pg_clipfrac``: their sum.
        ``actor/pg_clipfrac_lower``: share where the dual clip is active (``A < 0`` and
        ``-A r > -A clip_ratio_c``, i.e. ``r > clip_ratio_c``); verl's name.
        ``actor/ppo_kl``: verl's ``ppo_kl``, the k1 estimate of KL(pi_old || pi) on the sampled
        tokens, ``mean(old_logprobs - logprobs)`` of the clamped log-ratio (can be negative).
        ``actor/ratio_mean``: mean of the ratio.

    Args:
        logprobs: float ``[B, T]``: log pi(a_t | s_t) under the current policy (with gradient).
        old_logprobs: float ``[B, T]``: the same under the policy that produced the rollout.
        advantages: float ``[B, T]``.
        mask: bool or 0/1 ``[B, T]``: 1 on policy tokens.
        clip_low: the ratio is clipped below at ``1 - clip_low``, in [0, 1).
        clip_high: the ratio is clipped above at ``1 + clip_high``, >= 0.
        clip_ratio_c: the dual clip's bound, > 1 (verl's ``clip_ratio_c``, default 3.0).
        loss_agg_mode: one of :data:`LOSS_AGG_MODES` (:func:`agg_loss`).
        horizon: :func:`agg_loss`'s constant for ``seq-mean-token-sum-norm``.

    Returns:
        ``(loss, stats)``: 0-dim loss with gradient w.r.t. ``logprobs``, and the stats above.

    Raises:
        ValueError: shapes differ, clip bounds out of range or an unknown ``loss_agg_mode``.
    """
    if not (logprobs.shape == old_logprobs.shape == advantages.shape == mask.shape):
        raise ValueError(
            "logprobs, old_logprobs, advantages and mask must share one shape; got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(advantages.shape)}, "
            f"{tuple(mask.shape)}"
        )
    if not 0.0 <= clip_low < 1.0:
        raise ValueError(f"clip_low must be in [0, 1); got {clip_low}")
    if clip_high < 0.0:
        raise ValueError(f"clip_high must be >= 0; got {clip_high}")
    if not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (verl's default is 3.0); got {clip_ratio_c}")
    old_logprobs = old_logprobs.detach()
    advantages = advantages.detach()
    log_ratio = (logprobs - old_logprobs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    surrogate = -advantages * ratio
    surrogate_clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(surrogate, surrogate_clipped)
    dual_bound = -advantages * clip_ratio_c
    negative = advantages < 0
    per_token = torch.where(negative, torch.minimum(clipped, dual_bound), clipped)
    loss = agg_loss(per_token, mask, loss_agg_mode, horizon)

    with torch.no_grad():
        r = ratio.detach()
        clipped_low = ((r < 1.0 - clip_low) & negative).to(r.dtype)
        clipped_high = ((r > 1.0 + clip_high) & (advantages > 0)).to(r.dtype)
        dual = ((clipped.detach() > dual_bound) & negative).to(r.dtype)
        frac_low = masked_mean(clipped_low, mask)
        frac_high = masked_mean(clipped_high, mask)
        stats = {
            "actor/pg_loss": loss.detach(),
            "actor/pg_clipfrac_low": frac_low,
            "actor/pg_clipfrac_high": frac_high,
            "actor/pg_clipfrac": frac_low + frac_high,
            "actor/pg_clipfrac_lower": masked_mean(dual, mask),
            "actor/ppo_kl": masked_mean(-log_ratio.detach(), mask),
            "actor/ratio_mean": masked_mean(r, mask),
        }
    return loss, stats


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip: float = 0.2,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped value loss of PPO, token-mean aggregated.

    ``v_clip = old_values + clamp(values - old_values, -clip, clip)`` and
    ``loss = 0.5 * token_mean(max((values - R)^2, (v_clip - R)^2))`` (the OpenAI baselines / verl
    form; the 0.5 makes the gradient ``values - R``).

    Args:
        values: float ``[B, T]``: the value head now (with gradient).
        old_values: float ``[B, T]``: the value head at rollout time.
        returns: float ``[B, T]``: targets, e.g. from :func:`baselines.rl.advantages.gae`.
        mask: bool or 0/1 ``[B, T]``.
        clip: half-width of the trust region around ``old_values``, > 0.

    Returns:
        ``(loss, stats)`` with ``critic/vf_loss``, ``critic/vf_clipfrac`` (share of tokens where
        the clipped term is the larger one) and ``critic/vpred_mean``.

    Raises:
        ValueError: shapes differ or ``clip <= 0``.
    """
    if not (values.shape == old_values.shape == returns.shape == mask.shape):
        raise ValueError(
            "values, old_values, returns and mask must share one shape; got "
            f"{tuple(values.shape)}, {tuple(old_values.shape)}, {tuple(returns.shape)}, "
            f"{tuple(mask.shape)}"
        )
    if clip <= 0:
        raise ValueError(f"clip must be > 0; got {clip}")
    old_values = old_values.detach()
    returns = returns.detach()
    v_clipped = old_values + (values - old_values).clamp(-clip, clip)
    loss_unclipped = (values - returns) ** 2
    loss_clipped = (v_clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(loss_unclipped, loss_clipped), mask)
    with torch.no_grad():
        stats = {
            "critic/vf_loss": loss.detach(),
            "critic/vf_clipfrac": masked_mean(
                (loss_clipped > loss_unclipped).to(values.dtype), mask
            ),
            "critic/vpred_mean": masked_mean(values.detach(), mask),
        }
    return loss, stats


#: verl's bounds for the k3 estimator (``verl/trainer/ppo/core_algos.py``, ``kl_penalty``,
#: the ``low_var_kl`` branch): the log-ratio is clamped to +-20 before ``exp``, the estimate to
#: +-10. Without them a sampled token with log pi = -95 under a reference at -5 gives
#: ``exp(90)``: an infinite loss and NaN weights.
K3_LOG_RATIO_CLAMP = 20.0
K3_CLAMP = 10.0


def kl_penalty(
    logprobs: Tensor,
    ref_logprobs: Tensor,
    kind: str = "k3",
    clamp: float | None = None,
) -> Tensor:
    """Per-token estimate of KL(pi || pi_ref) from tokens sampled from the policy pi.

    With ``log r = ref_logprobs - logprobs`` (r = pi_ref / pi, evaluated at a ~ pi), Schulman 2020:

        k1 = -log r = logprobs - ref_logprobs               unbiased, can be negative
        k2 = 0.5 * (log r)^2                                biased, low variance, >= 0
        k3 = (r - 1) - log r                                unbiased, low variance, >= 0

    k3 is bounded as verl bounds it (:data:`K3_LOG_RATIO_CLAMP` on ``log r`` before ``exp``,
    then ``clamp`` or :data:`K3_CLAMP` on the estimate), so it is always finite; a saturated
    token gets no gradient from the KL term. Average with :func:`masked_mean` for the loss.

    Args:
        logprobs: float tensor: log pi(a) of the sampled tokens (with gradient if it is a loss).
        ref_logprobs: float tensor, same shape: log pi_ref(a) under the frozen reference model.
        kind: ``"k1"``, ``"k2"`` or ``"k3"``.
        clamp: clamp the estimate to ``[-clamp, clamp]``; ``None``: k3 uses :data:`K3_CLAMP`,
            k1 and k2 are not clamped.

    Returns:
        float tensor shaped like ``logprobs``.

    Raises:
        ValueError: unknown ``kind`` or shapes differ.
    """
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(
            f"logprobs and ref_logprobs must share a shape; got {tuple(logprobs.shape)}, "
            f"{tuple(ref_logprobs.shape)}"
        )
    log_r = ref_logprobs.detach() - logprobs
    if kind == "k1":
        kl = -log_r
    elif kind == "k2":
        kl = 0.5 * log_r**2
    elif kind == "k3":
        log_r = log_r.clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
        kl = torch.expm1(log_r) - log_r
        clamp = K3_CLAMP if clamp is None else clamp
    else:
        raise ValueError(f"kind must be one of 'k1', 'k2', 'k3'; got {kind!r}")
    if clamp is not None:
        kl = kl.clamp(-clamp, clamp)
    return kl
