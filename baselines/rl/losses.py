"""Loss terms of the reference trainer: PPO clipped surrogate, clipped value loss, KL, entropy.

Every loss is aggregated by **token mean**: the sum over all masked (policy) tokens of the batch
divided by their count, so long and short responses weigh each token equally (DAPO, Yu et al. 2025,
Sec. 3.3 "token-level policy gradient loss").

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


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate with asymmetric clip bounds, token-mean aggregated.

    With ``ratio = exp(logprobs - old_logprobs)`` (Schulman et al. 2017, Eq. 7; DAPO Eq. 10):

        loss_t = max(-A_t * ratio_t, -A_t * clip(ratio_t, 1 - clip_low, 1 + clip_high))
        loss   = token mean of loss_t over the masked positions of the whole batch

    Stats (detached 0-dim tensors; call ``.item()`` when logging):
        ``actor/pg_loss``: the loss value.
        ``actor/pg_clipfrac_low``: share of tokens where the low bound is active
        (``ratio < 1 - clip_low`` and ``A < 0``: the clipped branch wins, the gradient is 0).
        ``actor/pg_clipfrac_high``: share where ``ratio > 1 + clip_high`` and ``A > 0``.
        ``actor/pg_clipfrac``: their sum.
        ``actor/ppo_kl``: k3 estimate of KL(pi_old || pi) from the rollout (old-policy) samples,
        ``mean((r - 1) - log r)`` with ``r = pi / pi_old`` (always >= 0).
        ``actor/ratio_mean``: mean of the ratio.

    Args:
        logprobs: float ``[B, T]``: log pi(a_t | s_t) under the current policy (with gradient).
        old_logprobs: float ``[B, T]``: the same under the policy that produced the rollout.
        advantages: float ``[B, T]``.
        mask: bool or 0/1 ``[B, T]``: 1 on policy tokens.
        clip_low: the ratio is clipped below at ``1 - clip_low``, in [0, 1).
        clip_high: the ratio is clipped above at ``1 + clip_high``, >= 0.

    Returns:
        ``(loss, stats)``: 0-dim loss with gradient w.r.t. ``logprobs``, and the stats above.

    Raises:
        ValueError: shapes differ or clip bounds out of range.
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
    old_logprobs = old_logprobs.detach()
    advantages = advantages.detach()
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    surrogate = -advantages * ratio
    surrogate_clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = masked_mean(torch.maximum(surrogate, surrogate_clipped), mask)

    with torch.no_grad():
        r = ratio.detach()
        clipped_low = ((r < 1.0 - clip_low) & (advantages < 0)).to(r.dtype)
        clipped_high = ((r > 1.0 + clip_high) & (advantages > 0)).to(r.dtype)
        frac_low = masked_mean(clipped_low, mask)
        frac_high = masked_mean(clipped_high, mask)
        stats = {
            "actor/pg_loss": loss.detach(),
            "actor/pg_clipfrac_low": frac_low,
            "actor/pg_clipfrac_high": frac_high,
            "actor/pg_clipfrac": frac_low + frac_high,
            "actor/ppo_kl": masked_mean((r - 1.0) - log_ratio.detach(), mask),
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
