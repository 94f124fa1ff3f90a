"""One padded tensor batch of rollouts, built in one place, read by every advantage estimator.

:func:`build_batch` turns episode records (:mod:`baselines.episodes`) into a
:class:`RolloutBatch`: the training rows of all episodes, right-padded to one width. Per-token
tensors are aligned with the *targets* ``input_ids[:, 1:]`` (width ``T - 1``), the layout of the
log-probs a causal LM gives (CleanRL's ``ppo.py`` and TRL's GRPO trainer keep the same
"one batch of tensors" shape). :func:`grpo_token_advantages` (GRPO, Dr.GRPO) and
:func:`gae_token_advantages` (PPO) read the batch and write ``advantages`` (and ``returns``).

Example:
    >>> batch = build_batch(episodes, pad_id=tokenizer.pad_token_id)  # doctest: +SKIP
    >>> batch.advantages = grpo_token_advantages(batch, rewards.view(P, N))
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor

from baselines.rl.advantages import gae, grpo_advantages, whiten

__all__ = [
    "RolloutBatch",
    "build_batch",
    "grpo_token_advantages",
    "gae_token_advantages",
    "kept_rows",
]


@dataclass
class RolloutBatch:
    """R training rows (one or more per episode), right-padded.

    Attributes:
        input_ids: long ``[R, T]``, padding ``pad_id``.
        attention_mask: long ``[R, T]``, 1 on real tokens.
        loss_mask: float32 ``[R, T-1]``: 1 where the target ``input_ids[:, t+1]`` is a sampled id.
        sampling_logprobs: float32 ``[R, T-1]``: the engine's log-prob of each sampled target
            (logits / temperature), 0 elsewhere.
        token_rewards: float32 ``[R, T-1]``: each turn's reward on the target position of its last
            sampled id (for GAE), 0 elsewhere.
        row_episode: long ``[R]``: index of each row's episode in the list given to
            :func:`build_batch`.
        advantages, returns, old_logprobs, ref_logprobs, values: float32 ``[R, T-1]`` or ``None``,
            filled by the trainer.
    """

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    sampling_logprobs: Tensor
    token_rewards: Tensor
    row_episode: Tensor
    advantages: Tensor | None = None
    returns: Tensor | None = None
    old_logprobs: Tensor | None = None
    ref_logprobs: Tensor | None = None
    values: Tensor | None = None

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_tokens(self) -> int:
        """Trained (sampled) tokens in the batch."""
        return int(self.loss_mask.sum().item())

    def select(self, rows: list[int]) -> RolloutBatch:
        """Rows ``rows`` as a batch, trimmed to their own longest row (a micro-batch)."""
        index = torch.as_tensor(rows, dtype=torch.long)
        width = int(self.attention_mask[index].sum(dim=1).max().item())
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                out[f.name] = None
            elif f.name == "row_episode":
                out[f.name] = value[index.to(value.device)]
            elif f.name in ("input_ids", "attention_mask"):
                out[f.name] = value[index.to(value.device), :width]
            else:
                out[f.name] = value[index.to(value.device), : width - 1]
        return RolloutBatch(**out)

    def to(self, device: torch.device | str) -> RolloutBatch:
        """The batch with every tensor on ``device``."""
        moved = {
            f.name: (None if getattr(self, f.name) is None else getattr(self, f.name).to(device))
            for f in fields(self)
        }
        return replace(self, **moved)


def build_batch(episodes: list[Any], pad_id: int) -> RolloutBatch:
    """Stack the training rows of ``episodes`` (:class:`baselines.episodes.EpisodeRecord`).

    Args:
        episodes: records whose ``rows`` and ``turns`` the episode loop filled.
        pad_id: id written in padding (never attended to, never trained).

    Returns:
        A CPU :class:`RolloutBatch`; rows of episode e come in order, episodes in list order.

    Raises:
        ValueError: no rows (no episode sampled a token).
    """
    rows = [(e, row) for e, episode in enumerate(episodes) for row in episode.rows]
    if not rows:
        raise ValueError("no training rows: no episode sampled a token")
    width = max(len(row.input_ids) for _, row in rows)
    r_count = len(rows)
    ids = torch.full((r_count, width), int(pad_id), dtype=torch.long)
    attn = torch.zeros((r_count, width), dtype=torch.long)
    mask = torch.zeros((r_count, width), dtype=torch.float32)
    lps = torch.zeros((r_count, width), dtype=torch.float32)
    rewards = torch.zeros((r_count, width - 1), dtype=torch.float32)
    owner = torch.zeros(r_count, dtype=torch.long)
    for r, (e, row) in enumerate(rows):
        n = len(row.input_ids)
        ids[r, :n] = torch.tensor(row.input_ids, dtype=torch.long)
        attn[r, :n] = 1
        mask[r, :n] = torch.tensor(row.loss_mask, dtype=torch.float32)
        lps[r, :n] = torch.tensor(row.logprobs, dtype=torch.float32)
        owner[r] = e
        for turn, end in zip(row.turns, row.turn_ends, strict=True):
            if end >= 1:  # position p is predicted at target index p - 1
                rewards[r, end - 1] += float(episodes[e].turns[turn].reward)
    return RolloutBatch(ids, attn, mask[:, 1:], lps[:, 1:], rewards, owner)


def grpo_token_advantages(
    batch: RolloutBatch, group_rewards: Tensor, *, normalize_std: bool = True
) -> Tensor:
    """GRPO / Dr.GRPO: each episode's group-relative advantage on every sampled token it owns.

    Args:
        batch: rows of the ``P * N`` episodes whose rewards are ``group_rewards`` (row-major:
            episode ``g * N + n``).
        group_rewards: float ``[P, N]`` episode rewards.
        normalize_std: GRPO (divide by the group's std) or Dr.GRPO (``False``).

    Returns:
        float32 ``[R, T-1]`` on the batch's device, 0 where ``loss_mask`` is 0.
    """
    per_episode = grpo_advantages(group_rewards.float(), normalize_std=normalize_std).reshape(-1)
    per_episode = per_episode.to(batch.loss_mask.device)
    return per_episode[batch.row_episode][:, None] * batch.loss_mask


def gae_token_advantages(
    batch: RolloutBatch,
    values: Tensor,
    gamma: float,
    lam: float,
    *,
    turn_rewards: bool = True,
) -> tuple[Tensor, Tensor]:
    """PPO: GAE over each episode's sampled tokens (all its rows, in order), then whitened.

    The GAE time steps of an episode are its sampled tokens across its rows; the rows are joined
    (real positions only) before :func:`baselines.rl.advantages.gae` and split back after, so an
    episode trained in several rows gets the same advantages as in one.

    Args:
        batch: the batch (``token_rewards`` and ``loss_mask`` are read).
        values: float ``[R, T-1]`` value estimates at each target position.
        gamma, lam: discount and GAE lambda.
        turn_rewards: each turn's reward stays on the last token of its turn (True), or the
            episode's summed reward moves to its last sampled token (False: RAGEN's
            ``use_turn_scores: False``, ``ragen/llm_agent/ctx_manager.py:66-68``).

    Returns:
        ``(advantages, returns)``, float32 ``[R, T-1]``; advantages whitened over all sampled
        tokens of the batch (:func:`baselines.rl.advantages.whiten`).
    """
    adv = torch.zeros_like(batch.loss_mask)
    ret = torch.zeros_like(batch.loss_mask)
    lengths = (batch.attention_mask.sum(dim=1) - 1).tolist()
    for e in batch.row_episode.unique().tolist():
        rows = (batch.row_episode == e).nonzero().flatten().tolist()
        spans = [(r, int(lengths[r])) for r in rows]

        def join(t: Tensor, spans=spans) -> Tensor:
            return torch.cat([t[r, :n] for r, n in spans])[None]

        rewards, mask = join(batch.token_rewards), join(batch.loss_mask)
        if not turn_rewards:
            total = rewards.sum()
            rewards = torch.zeros_like(rewards)
            sampled = mask[0].nonzero()
            if len(sampled):
                rewards[0, int(sampled[-1])] = total
        a, g = gae(rewards, join(values.float()), mask, gamma, lam)
        offset = 0
        for r, n in spans:
            adv[r, :n] = a[0, offset : offset + n]
            ret[r, :n] = g[0, offset : offset + n]
            offset += n
    return whiten(adv, batch.loss_mask) * batch.loss_mask, ret


def kept_rows(full: RolloutBatch, kept: list[int]) -> RolloutBatch:
    """The rows of the episodes ``kept`` (indices into ``full``'s episodes, ascending), their
    episodes numbered ``0 .. len(kept) - 1``: the batch :func:`build_batch` makes of those
    episodes (the same rows in the same order, trimmed to their longest row), taken from the
    step's one batch instead of built a second time.

    Raises:
        ValueError: no rows (no kept episode sampled a token), as :func:`build_batch`.
    """
    episodes = torch.tensor(kept, dtype=torch.long)
    rows = torch.isin(full.row_episode, episodes).nonzero().flatten().tolist()
    if not rows:
        raise ValueError("no training rows: no episode sampled a token")
    batch = full.select(rows)
    return replace(batch, row_episode=torch.searchsorted(episodes, batch.row_episode))
