"""Advantage estimators for the reference trainer: GRPO, Dr.GRPO and token-level GAE.

Pure torch functions, independent of environments and of how rollouts are produced. Shapes follow
the rollout layout of DESIGN.md ("The baselines"): P groups x N samples for the group-relative
estimators, and a batch of B trajectories x T token positions for GAE, where a boolean or 0/1
``mask`` marks the policy's own tokens (the only ones that enter the loss).

References:
    - GRPO: Shao et al. 2024, "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open
      Language Models", Sec. 4.1.2 (outcome supervision: ``(r_i - mean(r)) / std(r)``).
    - Dr.GRPO: Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective",
      Sec. 3.2 (drop the std division: ``r_i - mean(r)``).
    - GAE: Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
      Estimation", Eq. 16.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["grpo_advantages", "gae", "whiten"]


def grpo_advantages(rewards: Tensor, eps: float = 1e-6, normalize_std: bool = True) -> Tensor:
    """Group-relative advantages of GRPO (or Dr.GRPO with ``normalize_std=False``).

    ``A[g, i] = (r[g, i] - mean_g(r)) / (std_g(r) + eps)`` (GRPO, Shao et al. 2024), or
    ``A[g, i] = r[g, i] - mean_g(r)`` (Dr.GRPO, Liu et al. 2025). Same formula as RAGEN's
    ``compute_grpo_outcome_advantage`` (``ragen/trainer/core_algos.py:26-82``: unbiased
    ``torch.std``, ``epsilon=1e-6`` added to the std).

    The std is the **unbiased** sample std (Bessel's correction, divisor N - 1), which is what
    ``torch.std`` computes by default and what verl (``compute_grpo_outcome_advantage``) and TRL
    (``GRPOTrainer``) use.

    **Equal-reward groups give exactly 0.** A group whose rewards are all equal (``max == min``,
    decided exactly) gets advantage ``0.0`` for every member, in every dtype. Computed naively,
    float32 rounding makes ``mean`` differ from the rewards by one ulp (eight rewards of 0.3 give
    ``r - mean = 2.98e-8``) and the GRPO division by ``std + eps = 1e-6`` blows that up to
    ``+0.029`` for every member, all of one sign; Adam then normalises it into a full-size step
    (every weight moved by the learning rate with no task signal). Here the arithmetic runs in
    float64 and equal groups are zeroed explicitly, so this cannot happen; RAGEN has the same
    float32 arithmetic (``core_algos.py:72-79``) and keeps zero-spread groups in the main-table
    filter, so it can show the artefact; we do not copy it.

    Args:
        rewards: float tensor ``[G, N]``: the episode reward of sample i of group g (any float
            dtype: float16, bfloat16, float32, float64).
        eps: added to the std (not to the variance) to avoid division by zero.
        normalize_std: True for GRPO, False for Dr.GRPO.

    Returns:
        float tensor ``[G, N]``, same dtype and device as ``rewards``. Broadcast it over each
        episode's policy tokens to get token-level advantages.

    Raises:
        ValueError: ``rewards`` is not 2-D or not floating point, or the group size N is below 2
            (a group-relative baseline needs at least two samples per group).

    Example:
        >>> grpo_advantages(torch.tensor([[1.0, 0.0]]), eps=0.0)
        tensor([[ 0.7071, -0.7071]])
        >>> grpo_advantages(torch.full((1, 8), 0.3))
        tensor([[0., 0., 0., 0., 0., 0., 0., 0.]])
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must have shape [G, N]; got shape {tuple(rewards.shape)}")
    if not rewards.dtype.is_floating_point:
        raise ValueError(f"rewards must be a float tensor; got {rewards.dtype} (call .float())")
    if rewards.shape[1] < 2:
        raise ValueError(
            f"group size N must be >= 2 for group-relative advantages; got N={rewards.shape[1]}"
        )
    r = rewards.to(torch.float64)
    equal = (r.amax(dim=1, keepdim=True) == r.amin(dim=1, keepdim=True)).expand_as(r)
    centered = r - r.mean(dim=1, keepdim=True)
    if normalize_std:
        centered = centered / (r.std(dim=1, unbiased=True, keepdim=True) + eps)
    return torch.where(equal, torch.zeros_like(centered), centered).to(rewards.dtype)


def gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    last_values: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Generalized Advantage Estimation over the policy-token positions of each trajectory.

    Each row b is one trajectory laid out as tokens (prompt, policy turns, observations, ...).
    Only positions with ``mask[b, t] = 1`` are policy tokens: they are the GAE time steps, in order.
    Positions with ``mask = 0`` (prompt, environment observations, padding) are **skipped**: the
    recursion passes through them unchanged, with no discount and no TD error, so the next policy
    token after an observation is the "next state" of the previous policy token. This is the
    multi-turn form of verl's ``compute_gae_advantage_return`` used by RAGEN (there, ``nextvalues``
    and ``lastgaelam`` carry over positions whose response mask is 0).

    Over the valid positions t_1 < t_2 < ... < t_n of row b (Schulman et al. 2016, Eq. 16):

        delta_k = r[t_k] + gamma * V[t_{k+1}] - V[t_k]        (V[t_{n+1}] = last_values[b])
        A[t_k]  = delta_k + gamma * lam * A[t_{k+1}]          (A[t_{n+1}] = 0)
        R[t_k]  = A[t_k] + V[t_k]                             (the value target)

    Episode ends are terminal: by default ``last_values`` is 0, so nothing is bootstrapped past the
    last valid token. Pass ``last_values`` only for a trajectory cut by a time limit, with the
    value of the state that would have followed.

    Rewards go on valid positions (typically the last token of each turn, or of the episode);
    a nonzero reward on a masked position would be silently lost, so it raises instead.

    Args:
        rewards: float ``[B, T]``: the token-level reward (0 except where a reward is placed).
        values: float ``[B, T]``: the value head's estimate at each position.
        mask: bool or 0/1 ``[B, T]``: 1 on policy tokens.
        gamma: discount per policy token, in [0, 1].
        lam: GAE lambda, in [0, 1].
        last_values: optional float ``[B]``: bootstrap value after the last valid token of each
            row; ``None`` means 0 (terminal).

    Returns:
        ``(advantages, returns)``, both float ``[B, T]`` like ``values``, computed without gradient
        and exactly 0 at masked positions. Advantages are not whitened: see :func:`whiten`.

    Raises:
        ValueError: shapes differ, gamma or lam outside [0, 1], or a nonzero reward sits on a
            masked position.

    Example:
        >>> a, r = gae(torch.tensor([[0.0, 1.0]]), torch.zeros(1, 2), torch.ones(1, 2), 0.5, 1.0)
        >>> a
        tensor([[0.5000, 1.0000]])
    """
    if rewards.shape != values.shape or rewards.shape != mask.shape or rewards.dim() != 2:
        raise ValueError(
            "rewards, values and mask must share one shape [B, T]; got "
            f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}"
        )
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1]; got {gamma}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1]; got {lam}")
    valid = mask.bool()
    if torch.any((rewards != 0) & ~valid):
        raise ValueError(
            "a nonzero reward sits on a masked position (mask = 0); place each reward on a "
            "policy token, e.g. the last token of its turn"
        )
    batch, length = rewards.shape
    if last_values is not None and last_values.shape != (batch,):
        raise ValueError(
            f"last_values must have shape [B]=[{batch}]; got {tuple(last_values.shape)}"
        )

    with torch.no_grad():
        rewards = rewards.detach()
        values = values.detach()
        validf = valid.to(values.dtype)
        if last_values is None:
            next_value = torch.zeros(batch, dtype=values.dtype, device=values.device)
        else:
            next_value = last_values.detach().to(values.dtype)
        last_gae = torch.zeros(batch, dtype=values.dtype, device=values.device)
        advantages = torch.zeros_like(values)
        for t in reversed(range(length)):
            delta = rewards[:, t] + gamma * next_value - values[:, t]
            gae_t = delta + gamma * lam * last_gae
            m = validf[:, t]
            # On a masked position keep the carried value and advantage unchanged (skip it).
            last_gae = m * gae_t + (1.0 - m) * last_gae
            next_value = m * values[:, t] + (1.0 - m) * next_value
            advantages[:, t] = m * gae_t
        returns = (advantages + values) * validf
    return advantages, returns


def whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise ``x`` to zero mean and unit variance over the masked positions (PPO advantages).

    Mean and variance are taken over every position with ``mask = 1`` in the whole batch; the
    variance is unbiased (divisor n - 1), as in verl's ``masked_whiten`` and TRL's ``masked_var``.
    With ``shift_mean=False`` the mean is added back (only the scale changes). Masked positions
    come back as 0.

    Args:
        x: float tensor of any shape.
        mask: bool or 0/1 tensor of the same shape.
        shift_mean: subtract the mean (True) or only rescale (False).
        eps: added to the variance before the square root.

    Returns:
        float tensor shaped like ``x``.

    Raises:
        ValueError: shapes differ, or fewer than 2 positions are valid (variance undefined).
    """
    if x.shape != mask.shape:
        raise ValueError(
            f"x and mask must share a shape; got {tuple(x.shape)}, {tuple(mask.shape)}"
        )
    valid = mask.bool()
    n = int(valid.sum())
    if n < 2:
        raise ValueError(f"whiten needs at least 2 valid positions; got {n}")
    zeros = torch.zeros_like(x)
    mean = torch.where(valid, x, zeros).sum() / n
    var = torch.where(valid, (x - mean) ** 2, zeros).sum() / (n - 1)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(valid, out, zeros)
