"""The learner: the policy's :class:`Actor` and PPO's separate :class:`Critic`, in verl's shape.

The shape is verl's workers (``verl/workers/actor/dp_actor.py``, ``DataParallelPPOActor``:
``compute_log_prob``, ``update_policy``; ``verl/workers/critic/dp_critic.py``,
``DataParallelPPOCritic``: ``compute_values``, ``update_critic``): each worker owns its model and
its optimizer and has two verbs, a no-grad scoring pass and an update that reads epoch ->
mini-batch -> micro-batch -> score -> loss -> backward -> clip -> step.

- :meth:`Actor.compute_log_prob`: the one pre-update pass over the batch that gives the loss its
  inputs: old log-probs (when the policy moves within the batch), reference log-probs (KL) and,
  with a value head on the policy's trunk, the values.
- :meth:`Actor.update`: ``ppo_epochs`` passes, one AdamW step per mini-batch of
  ``ppo_mini_batch_size`` sequences (RAGEN's PPO mini-batches; 0: the whole batch), each run as
  micro-batches of at most ``micro_batch_tokens`` padded tokens (:func:`pack_by_tokens`) whose
  losses are weighted by their share of the mini-batch's sampled tokens (``token-mean``) or of
  its sequences (the ``seq-mean-*`` modes of ``algorithm.loss_agg_mode``), so the accumulated
  gradient is that of the aggregate over the whole mini-batch, whatever the split.
- :meth:`_Worker.step`: a step whose gradient norm is not finite is skipped (the gradients
  zeroed, the weights untouched), counted in ``actor/nonfinite_grad_steps`` (or ``critic/...``)
  and warned about once per worker (verl ``verl/workers/actor/dp_actor.py``,
  ``DataParallelPPOActor._optimizer_step``: ``if not torch.isfinite(grad_norm)``).
- :class:`Critic` (``algorithm.critic: model``): the same two verbs for the critic model, its own
  loop and its own AdamW (RAGEN updates actor and critic on the same batch with the same
  ``ppo_mini_batch_size``, ``config/base.yaml:31,77``). Running it after the actor's loop rather
  than interleaved with it gives bit-identical numbers: the critic model shares no parameter with
  the policy (a deep copy of the checkpoint with its own adapter), its inputs (values, returns)
  are fixed before the update, it walks the same mini-batches and micro-batches in the same order
  with the same token weights, and no pass draws random numbers (dropout off: HF attention and
  ``torch.nn.functional.dropout`` with ``p = 0`` draw nothing). The value head on the policy's
  trunk (``algorithm.critic: head``) cannot be split off: its loss is part of the actor's
  (``value_coef * vf_loss``, one backward through the shared trunk), so it stays in
  :meth:`Actor.loss`.

Data parallel (several ranks, :mod:`baselines.distributed`): every rank holds the whole batch;
each mini-batch's rows are split over ranks in contiguous blocks (:meth:`Ranks.block`), each
rank weights its micro-batch losses by ``tokens / (the mini-batch's sampled tokens over all
ranks)``, and PyTorch's ``DistributedDataParallel`` reduces the gradients
(:meth:`Ranks.data_parallel`): each worker's gradient pass is one module, :class:`ActorPass` (the
policy's scoring with its value head) or the critic model, wrapped in DDP, so its reducer's hooks
are armed by the forward; every micro-batch but the last of an optimizer step runs under
``no_sync()`` (local accumulation) and the last one's backward all-reduces the accumulated
gradients, bucketed and overlapped with that backward. The sum is the one-process gradient, so
every rank takes the same ``clip_grad_norm_`` and AdamW step. Under ``train.strategy: fsdp2`` the
same module is sharded by FSDP2 instead (:meth:`_Worker.distribute`): its forward and backward
all-gather each layer, every backward reduce-scatters into the rank's gradient shard, and AdamW
steps on the shards. Every rank must run the same number of (synchronising) passes: the ranks'
micro-batch counts are made equal (:func:`baselines.rl.minibatches.split_packs`, verl's
``same_micro_num_in_dp``), a rank short of rows running a zero-weighted pass. The logged sums are
gathered and added (:meth:`Ranks.sum_floats`).

The learner reads ``algorithm``'s settings (:class:`baselines.config.AlgorithmConfig`, imported
for its type only: at run time this module needs nothing of baselines but ``rl``, ``llm`` and
``distributed``, and the dataclass is the one documented definition of the fifteen settings it
reads).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from baselines.distributed import Ranks, block, rekey_optimizer_state
from baselines.llm.scoring import autocast, checkpointed_if, score_targets
from baselines.rl.batch import RolloutBatch
from baselines.rl.losses import agg_loss, kl_penalty, masked_mean, policy_loss, value_loss
from baselines.rl.minibatches import minibatch_indices, pack_by_tokens, split_packs

if TYPE_CHECKING:
    from baselines.config import AlgorithmConfig

__all__ = ["Actor", "ActorPass", "Critic", "Placement"]


class _Meter:
    """Weighted sums of the logged figures: ``add(stats, w)`` adds ``w * value`` for each name and
    ``w`` to the total weight (:meth:`_Figures.means` divides by it)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weight = 0.0

    def add(self, stats: dict[str, torch.Tensor], weight: float) -> None:
        for key, value in stats.items():
            self.sums[key] = self.sums.get(key, 0.0) + weight * float(value)
        self.weight += weight


class _Figures:
    """The logged figures of one update: each a token-weighted mean over the pass
    (:class:`_Meter`, summed over ranks), and one dict per optimizer step (``steps``: ratio,
    clip fractions) for the tests that read a single step."""

    def __init__(self, total_tokens: int, ranks: Ranks) -> None:
        self.total_tokens, self.ranks = total_tokens, ranks
        self.meter, self.step = _Meter(), _Meter()
        self.steps: list[dict[str, float]] = []
        self.grad_norms: list[float] = []
        self.nonfinite_steps = 0

    def add(self, stats: dict[str, torch.Tensor], tokens: float, mini_tokens: float) -> None:
        """One micro-batch's stats, weighted by its share of the batch and of its mini-batch."""
        self.meter.add(stats, tokens / self.total_tokens)
        self.step.add(stats, tokens / mini_tokens)

    def end_step(self, grad_norm: torch.Tensor) -> None:
        """An optimizer step taken with ``grad_norm`` (before clipping; a non-finite one: the
        step was skipped, :meth:`_Worker.step`, and the norm is left out of the mean)."""
        if math.isfinite(float(grad_norm)):
            self.grad_norms.append(float(grad_norm))
        else:
            self.nonfinite_steps += 1
        self.steps.append(self.ranks.sum_floats(self.step.sums))
        self.step = _Meter()

    def means(self) -> dict[str, float]:
        """Each figure's sum over the total weight of the passes: the token-weighted mean over one
        pass, averaged over ``ppo_epochs`` passes (summed over ranks first)."""
        sums, weight = self.meter.sums, self.meter.weight
        if self.ranks.distributed:
            sums = self.ranks.sum_floats(sums)
            weight = self.ranks.sum_floats({"w": weight})["w"]
        passes = weight if weight > 0 else 1.0
        return {key: value / passes for key, value in sums.items()}


class _LogprobGap:
    """``rollout/logprob_diff_max`` / ``_mean``: how far the engine's log-probs of the sampled
    tokens are from the trainer's. Read from the pre-update pass when there is one (``old``),
    else from the update's first forward of each micro-batch (epoch 0), this rank's rows then
    gathered."""

    def __init__(self, engine_logprobs: bool, batch: RolloutBatch, from_old: bool) -> None:
        self.per_micro_batch = engine_logprobs and not from_old
        self.from_old = from_old
        self.diffs: list[torch.Tensor] = []
        if engine_logprobs and from_old:  # engine vs the pre-update pass
            gap = (batch.old_logprobs - batch.sampling_logprobs).abs()
            self.diffs.append(gap[batch.loss_mask.bool()])

    def add(self, logprobs: torch.Tensor, part: RolloutBatch, epoch: int) -> None:
        if epoch == 0 and self.per_micro_batch:
            gap = (logprobs.detach() - part.sampling_logprobs).abs()
            self.diffs.append(gap[part.loss_mask.bool()].cpu())

    def metrics(self, ranks: Ranks) -> dict[str, float]:
        diffs = self.diffs
        if ranks.distributed and not self.from_old:  # each rank compared its own rows
            diffs = [torch.cat(diffs)] if diffs else []
            diffs = [d for d in ranks.gather(diffs) if d.numel()]
        if not diffs:
            return {}
        flat = torch.cat(diffs)
        return {
            "rollout/logprob_diff_max": float(flat.max()),
            "rollout/logprob_diff_mean": float(flat.mean()),
        }


class ActorPass(torch.nn.Module):
    """The actor's gradient pass as one module: the policy's log-probs and entropy at the loss
    positions (:func:`baselines.llm.scoring.score_targets`) and, with a value head on its trunk,
    the values. It is what DDP wraps (:meth:`baselines.distributed.Ranks.data_parallel`): DDP
    arms its reducer in the wrapper's ``forward``, which ``score_targets`` (the trunk run, then
    the LM head read at the loss positions only) would bypass on the bare policy. It holds no
    parameter of its own: ``policy`` and ``value_head`` are the worker's modules.

    Args:
        policy: the policy (a Hugging Face causal LM or peft model), float32 master weights.
        value_head: the value head on its trunk, or None.
        temperature: the divisor of the logits (the rollouts' sampling temperature).
    """

    def __init__(
        self, policy: torch.nn.Module, value_head: torch.nn.Module | None, temperature: float
    ) -> None:
        super().__init__()
        self.policy, self.value_head, self.temperature = policy, value_head, temperature

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        loss_mask: torch.Tensor,
        want_values: bool = False,
    ) -> dict[str, torch.Tensor | None]:
        """float32 ``[B, T-1]`` ``logprobs``, ``entropy`` and ``values`` (None without
        ``want_values``), 0 off ``loss_mask``; run it under the worker's autocast."""
        out = score_targets(
            self.policy,
            input_ids,
            attention_mask,
            loss_mask,
            temperature=self.temperature,
            want_entropy=True,
            want_hidden=want_values,
        )
        out["values"] = self.value_head(out.pop("hidden")) if want_values else None
        # Fresh tensors, not views: FSDP2 hooks the root's outputs for its backward, and an
        # in-place op on a view would drop that hook (torch warns of it).
        return {k: None if v is None else v.clone() for k, v in out.items()}


@dataclass(frozen=True)
class Placement:
    """Where a worker runs: this process's place among the data-parallel ranks, the device of
    its model and the autocast of its forward passes (``model.dtype`` resolved on that device,
    :func:`baselines.llm.scoring.resolve_autocast`; None: none; the weights stay float32)."""

    ranks: Ranks
    device: torch.device
    autocast_dtype: torch.dtype | None


@dataclass(eq=False)
class _Worker:
    """What the actor and the critic share: a model, its AdamW, the micro-batch packing, the
    mini-batch schedule and the optimizer step.

    Attributes:
        model: the worker's model (float32 master weights).
        optimizer: its AdamW.
        algorithm: ``algorithm``'s settings.
        placement: ranks, device and autocast.
        minibatch_stats: the last update's figures, one dict per optimizer step.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    algorithm: AlgorithmConfig
    placement: Placement
    minibatch_stats: list[dict[str, float]] = field(default_factory=list, init=False)
    _warned_nonfinite: bool = field(default=False, init=False, repr=False)
    #: The gradient pass: :meth:`pass_module`, under DDP or FSDP2 after :meth:`distribute`.
    learner: torch.nn.Module = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.learner = self.pass_module()

    def pass_module(self) -> torch.nn.Module:
        """The module whose forward is the worker's gradient pass (wrapped by DDP, sharded by
        FSDP2)."""
        return self.model

    def distribute(self, optimizer_state: dict[str, Any] | None = None) -> None:
        """Hand the gradient pass to the ranks' strategy (:meth:`Ranks.data_parallel`); a no-op
        with one process. Call it once the weights and the optimizer state are final (after a
        resume's loading). Under ``fsdp2`` the parameters become DTensor shards, so the
        optimizer is rebuilt on them (same class, same groups and settings) and a resume's
        state is put into the shards: ``optimizer_state``, the checkpoint's whole
        ``optimizer.state_dict()`` read to the CPU by rank 0 alone (None on the others), is
        broadcast from rank 0, each rank keeping its shard
        (``torch.distributed.checkpoint.state_dict.set_optimizer_state_dict`` with
        ``broadcast_from_rank0``): no rank holds the whole AdamW state on its device."""
        if not self.ranks.distributed:
            return
        module = self.pass_module()
        if not self.ranks.sharded:
            self.learner = self.ranks.data_parallel(module)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_optimizer_state_dict,
        )

        name_of = {id(p): n for n, p in module.named_parameters()}
        groups = [[name_of[id(p)] for p in g["params"]] for g in self.optimizer.param_groups]
        self.learner = self.ranks.data_parallel(module)
        now = dict(module.named_parameters())
        self.optimizer = type(self.optimizer)(
            [
                {
                    **{k: v for k, v in group.items() if k != "params"},
                    "params": [now[n] for n in names],
                }
                for group, names in zip(self.optimizer.param_groups, groups, strict=True)
            ]
        )
        # FSDP2 settles which unit is the root at the first forward; it must be the root's (a
        # decoder layer run first, by a rollout, would claim it): one no-grad pass on 2 tokens,
        # after which every unit is sharded again.
        ids = torch.zeros(1, 2, dtype=torch.long, device=self.device)
        with torch.no_grad():
            self._forward(ids, torch.ones_like(ids), torch.ones(1, 1, device=self.device))
        for unit in module.modules():
            if hasattr(unit, "reshard"):
                unit.reshard()
        if self.ranks.broadcast(optimizer_state is not None):  # a resume's AdamW moments
            named: dict[str, Any] = {}
            if self.ranks.is_main:
                by_name = [n for names in groups for n in names]
                named = rekey_optimizer_state(optimizer_state, by_name)
            options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
            set_optimizer_state_dict(module, self.optimizer, named, options=options)

    def _forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor
    ) -> Any:
        """One pass of :attr:`learner` (the critic's: values; :class:`Actor` overrides)."""
        return self.learner(input_ids, attention_mask)

    def sync(self, last: bool) -> Any:
        """The context of a micro-batch's backward. DDP: only the ``last`` micro-batch of an
        optimizer step all-reduces (``no_sync()`` for the others, which accumulate locally).
        FSDP2: every backward reduce-scatters into the sharded gradient, as verl's FSDP actor
        does; skipping it (``set_requires_gradient_sync(False)``) would keep every unit's whole
        unsharded gradient until the last micro-batch, undoing the sharding's saving."""
        if not self.ranks.distributed or self.ranks.sharded or last:
            return nullcontext()
        return self.learner.no_sync()

    @property
    def grad_scale(self) -> float:
        """The factor of each loss before its backward pass: the world size, since DDP and
        FSDP2 average the gradients over ranks and the losses are shares of the whole
        mini-batch (exact for a power-of-two world size)."""
        return float(self.ranks.world_size)

    @property
    def ranks(self) -> Ranks:
        return self.placement.ranks

    @property
    def device(self) -> torch.device:
        return self.placement.device

    def amp(self) -> Any:
        """The autocast of every forward pass (:class:`Placement`)."""
        return autocast(self.device, self.placement.autocast_dtype)

    def micro_batches(self, batch: RolloutBatch, rows: list[int]) -> list[list[int]]:
        """``rows`` packed into micro-batches of at most ``algorithm.micro_batch_tokens`` padded
        tokens and ``algorithm.micro_batch_size`` rows (:func:`pack_by_tokens`)."""
        ac = self.algorithm
        lengths = batch.attention_mask[torch.as_tensor(rows, dtype=torch.long)].sum(1).tolist()
        packs = pack_by_tokens(lengths, ac.micro_batch_tokens, ac.micro_batch_size)
        return [[rows[i] for i in pack] for pack in packs]

    def oversized(self, part: RolloutBatch) -> bool:
        """A row over the token budget goes alone, checkpointed (:func:`checkpointed_if`)."""
        return int(part.attention_mask.sum(1).max()) > self.algorithm.micro_batch_tokens

    def schedule(
        self, batch: RolloutBatch
    ) -> Iterator[
        tuple[int, tuple[float, float], Iterator[tuple[RolloutBatch, float, float, bool]]]
    ]:
        """``(epoch, the mini-batch's (sampled tokens, sequences), this rank's micro-batches)``
        for each optimizer step: ``ppo_epochs`` passes over :func:`minibatch_indices`,
        mini-batches without a sampled token left out, each mini-batch's rows split over ranks.
        The micro-batches come one at a time, on the device, as ``(part, sampled tokens,
        sequences, last)`` (sequences: rows with a sampled token,
        :func:`baselines.rl.losses.agg_units`; ``last``: the step's last micro-batch, whose
        backward synchronises, :meth:`sync`); the mini-batch's counts are over all ranks, so each
        micro-batch's share of them weights its loss. With several ranks every rank runs as many
        micro-batches as the rank with the most (:func:`split_packs`; every rank holds the batch,
        so each works out every rank's packing without a message); a rank short of rows runs a
        *dummy*, the mini-batch's shortest row with 0 tokens and 0 sequences, whose loss is
        weighted 0."""
        ac = self.algorithm
        world = self.ranks.world_size
        for epoch in range(ac.ppo_epochs):
            for mini in minibatch_indices(batch.num_rows, ac.ppo_mini_batch_size):
                mask = batch.loss_mask[torch.as_tensor(mini)]
                mini_tokens = float(mask.sum())
                if mini_tokens == 0:
                    continue
                mini_seqs = float(mask.bool().any(-1).sum())
                blocks = [[mini[i] for i in block(len(mini), r, world)] for r in range(world)]
                packs = [self.micro_batches(batch, rows) if rows else [] for rows in blocks]
                count = max(len(p) for p in packs)
                mine = split_packs(packs[self.ranks.rank], count)
                yield epoch, (mini_tokens, mini_seqs), self._on_device(batch, mine, mini)

    def _on_device(
        self, batch: RolloutBatch, packs: list[list[int] | None], mini: list[int]
    ) -> Iterator[tuple[RolloutBatch, float, float, bool]]:
        for i, rows in enumerate(packs):
            last = i == len(packs) - 1
            if rows is None:  # split_packs' padding: the shortest row, zero-weighted
                lengths = batch.attention_mask[torch.as_tensor(mini)].sum(1).tolist()
                shortest = mini[min(range(len(mini)), key=lambda j: (lengths[j], j))]
                yield batch.select([shortest]).to(self.device), 0.0, 0.0, last
                continue
            part = batch.select(rows).to(self.device)
            mask = part.loss_mask
            yield part, float(mask.sum()), float(mask.bool().any(-1).sum()), last

    #: The metric that counts skipped steps (:meth:`step`); the critic's is ``critic/...``.
    nonfinite_metric = "actor/nonfinite_grad_steps"

    def step(self) -> torch.Tensor:
        """Clip the gradients (already the one-process gradient on every rank: DDP reduced them
        in the step's last backward, FSDP2 into each rank's shard at every backward,
        :meth:`sync`) to ``algorithm.grad_clip`` (under FSDP2 the norm is over all shards) and
        take the AdamW step; returns the norm before clipping.

        A non-finite norm (an inf or NaN anywhere in the gradient) skips the step, as verl does
        (``verl/workers/actor/dp_actor.py``, ``DataParallelPPOActor._optimizer_step``): the
        gradients are zeroed and AdamW's weights and moments stay as they were, where stepping
        would write NaN into every weight. Every rank holds the same summed gradient, so every
        rank skips. Counted by :class:`_Figures` (:attr:`nonfinite_metric`), warned once per
        worker."""
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.algorithm.grad_clip)
        if hasattr(grad_norm, "full_tensor"):  # FSDP2: a DTensor, the norm over all shards
            grad_norm = grad_norm.full_tensor()
        if torch.isfinite(grad_norm):
            self.optimizer.step()
            return grad_norm
        self.optimizer.zero_grad(set_to_none=True)
        if not self._warned_nonfinite:
            self._warned_nonfinite = True
            warnings.warn(
                f"{self.nonfinite_metric.split('/')[0]}: the gradient norm is {float(grad_norm)}; "
                f"the optimizer step was skipped (counted in {self.nonfinite_metric}, warned "
                "once). If it recurs, lower algorithm.lr (or algorithm.critic_lr), and check "
                "the batch for NaN or inf rewards, advantages or log-probs",
                RuntimeWarning,
                stacklevel=2,
            )
        return grad_norm

    def score_rows(
        self, batch: RolloutBatch, names: list[str], score: Any
    ) -> dict[str, torch.Tensor]:
        """A no-grad pass: ``score(part)`` gives float ``[B, T-1]`` tensors, one per name of
        ``names``, for each micro-batch of this rank's block of rows (:meth:`Ranks.block`),
        written into zero-filled float32 ``[R, T-1]`` tensors that are then SUM-reduced in the
        order of ``names``: the blocks are disjoint, so every rank ends with every row's values
        exactly as its owner computed them (PPO's whitened GAE needs all of them)."""
        out = {name: torch.zeros_like(batch.loss_mask) for name in names}
        with torch.no_grad():
            for rows in self.micro_batches(batch, list(self.ranks.block(batch.num_rows))):
                part = batch.select(rows).to(self.device)
                index, w = torch.as_tensor(rows), part.loss_mask.shape[1]
                for name, value in score(part).items():
                    out[name][index, :w] = value.cpu()
        for tensor in out.values():
            self.ranks.sum_(tensor)
        return out


@dataclass(eq=False)
class Actor(_Worker):
    """The policy's learner (verl's ``DataParallelPPOActor``, ``verl/workers/actor/dp_actor.py``):
    the policy model, its AdamW (with the value head's parameter group under PPO with
    ``algorithm.critic: head``), the frozen reference for the KL term.

    Every log-prob (policy, old, reference, entropy) is of the sampling distribution,
    ``log_softmax(logits / temperature)`` with ``temperature`` the rollouts' (verl's
    convention), so the ratio and the KL are those of the policy that sampled the batch.

    Attributes (besides :class:`_Worker`'s; ``model`` is the policy, a peft model with LoRA):
        temperature: the divisor of every logit turned into a log-prob.
        reference: the frozen initial policy (KL without LoRA), or None.
        value_head: the value head on the policy's trunk (PPO, ``critic: head``), or None.
        lora: the policy is a LoRA adapter: the reference is the policy with it disabled.
    """

    temperature: float
    reference: torch.nn.Module | None = None
    value_head: torch.nn.Module | None = None
    lora: bool = False

    def pass_module(self) -> torch.nn.Module:
        """:class:`ActorPass` on the policy and its value head."""
        return ActorPass(self.model, self.value_head, self.temperature)

    def _forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor
    ) -> Any:
        return self.learner(
            input_ids, attention_mask, loss_mask, want_values=self.value_head is not None
        )

    def score(
        self,
        model: torch.nn.Module,
        part: RolloutBatch,
        *,
        want_entropy: bool = False,
        want_values: bool = False,
    ) -> dict[str, torch.Tensor | None]:
        """One pass of ``model`` over a micro-batch, read at its loss positions only.

        Returns float32 ``[B, T-1]`` tensors (0 off the loss mask): ``logprobs`` of the sampled
        targets under the sampling distribution (logits / temperature), ``entropy`` of that
        distribution (if asked) and ``values`` of the value head on ``model``'s trunk (PPO with
        ``algorithm.critic=head``, if asked). No ``[B, T, V]`` logits tensor is made
        (:func:`baselines.llm.scoring.score_targets`).
        """
        with self.amp():
            out = score_targets(
                model,
                part.input_ids,
                part.attention_mask,
                part.loss_mask,
                temperature=self.temperature,
                want_entropy=want_entropy,
                want_hidden=want_values,
            )
            out["values"] = self.value_head(out.pop("hidden")) if want_values else None
        return out

    def needs_old_logprobs(self, num_rows: int) -> bool:
        """Old log-probs from the pre-update pass whenever the policy moves within the batch
        (several epochs or mini-batches); else the update's own first forward is the old policy
        (detached: the ratio is exactly 1 and clipping starts to act from the second step)."""
        ac = self.algorithm
        return ac.ppo_epochs > 1 or len(minibatch_indices(num_rows, ac.ppo_mini_batch_size)) > 1

    def compute_log_prob(self, batch: RolloutBatch, *, old: bool, ref: bool) -> RolloutBatch:
        """The pre-update pass (verl's ``compute_log_prob`` and ``compute_ref_log_prob``): the
        batch with ``old_logprobs`` (if ``old``), ``ref_logprobs`` (if ``ref``) and, with a value
        head, ``values`` filled, float32 ``[R, T-1]``, from one pass over its micro-batches
        (:meth:`score_rows`); the batch itself when none is needed."""
        head = self.value_head is not None
        if not (old or ref or head):
            return batch
        self.model.eval()

        def score(part: RolloutBatch) -> dict[str, torch.Tensor]:
            out = {}
            if old or head:
                scored = self.score(self.model, part, want_values=head)
                if old:
                    out["old_logprobs"] = scored["logprobs"]
                if head:
                    out["values"] = scored["values"].float()
            if ref:
                with self.model.disable_adapter() if self.lora else nullcontext():
                    out["ref_logprobs"] = self.score(self.reference or self.model, part)["logprobs"]
            return out

        names = ["old_logprobs"] * old + ["ref_logprobs"] * ref + ["values"] * head
        return replace(batch, **self.score_rows(batch, names, score))

    def episode_entropies(self, full: RolloutBatch, shape: tuple[int, int]) -> torch.Tensor:
        """Each episode's mean token entropy (nats) over its sampled tokens, float64 ``[G, N]``,
        at the sampling temperature (for ``filter.metric`` entropy / entropy_std)."""
        sums = torch.zeros(full.row_episode.max().item() + 1, dtype=torch.float64)
        counts = torch.zeros_like(sums)
        self.model.eval()
        with torch.no_grad():
            for rows in self.micro_batches(full, list(range(full.num_rows))):
                part = full.select(rows).to(self.device)
                scored = self.score(self.model, part, want_entropy=True)
                mask = part.loss_mask
                episode = full.row_episode[torch.as_tensor(rows)]
                sums.index_add_(0, episode, (scored["entropy"] * mask).sum(1).double().cpu())
                counts.index_add_(0, episode, mask.sum(1).double().cpu())
        out = torch.zeros(shape[0] * shape[1], dtype=torch.float64)
        out[: len(sums)] = sums / counts.clamp(min=1)
        return out.view(shape)

    def loss(
        self,
        part: RolloutBatch,
        scored: dict[str, torch.Tensor | None],
        old: torch.Tensor,
        shares: tuple[float, float] = (1.0, 1.0),
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of one micro-batch, as its share of the mini-batch's (RAGEN-2 / verl
        ``update_policy``):

            loss = s_agg * (pg_loss - entropy_coef * entropy [+ kl_coef * KL(pi || pi_ref)])
                   [+ s_tok * value_coef * vf_loss  (PPO with a value head on the policy's trunk)]

        ``pg_loss``: :func:`policy_loss` (dual-clip surrogate, DAPO's clip-higher, the log-ratio
        clamped); it, the entropy and the KL (:func:`kl_penalty`, k3 bounded as verl bounds it)
        are aggregated by ``algorithm.loss_agg_mode`` (:func:`agg_loss`), as verl's
        ``update_policy`` aggregates all three; ``vf_loss``: :func:`value_loss`, a token mean.
        ``shares = (s_agg, s_tok)``: the micro-batch's share of the mini-batch's aggregation
        units (tokens or sequences, :func:`baselines.rl.losses.agg_units`) and of its tokens, so
        that the sum over micro-batches is the mini-batch's loss. With ``algorithm.critic=model``
        the value loss is the critic's own (:meth:`Critic.update`), not a term here.
        Returns the loss and detached stats (token means, whatever the aggregation).
        """
        ac = self.algorithm
        mode, horizon = ac.agg_mode, ac.loss_agg_horizon
        s_agg, s_tok = shares
        mask = part.loss_mask
        pg, stats = policy_loss(
            scored["logprobs"],
            old,
            part.advantages,
            mask,
            ac.clip_low,
            ac.clip_high,
            ac.clip_ratio_c,
            mode,
            horizon,
        )
        entropy = agg_loss(scored["entropy"], mask, mode, horizon)
        loss = pg - ac.entropy_coef * entropy
        stats["actor/entropy"] = masked_mean(scored["entropy"].detach(), mask)
        if ac.kl_coef > 0:
            # The loss's estimator is the one whose gradient is the reverse KL's (k2 by default,
            # AlgorithmConfig.kl_estimator); the logged value is k3's, unbiased for the KL.
            kl_tokens = kl_penalty(scored["logprobs"], part.ref_logprobs, ac.kl_estimator)
            loss = loss + ac.kl_coef * agg_loss(kl_tokens, mask, mode, horizon)
            if ac.kl_estimator == "k3":
                k3 = kl_tokens.detach()
            else:
                k3 = kl_penalty(scored["logprobs"].detach(), part.ref_logprobs, "k3")
            stats["actor/kl_ref"] = masked_mean(k3, mask)
        loss = loss * s_agg
        if scored["values"] is not None:
            vf, vstats = value_loss(
                scored["values"], part.values, part.returns, mask, ac.value_clip
            )
            loss = loss + (s_tok * ac.value_coef) * vf
            stats.update(vstats)
        return loss, stats

    def update(
        self, batch: RolloutBatch, *, need_old: bool, engine_logprobs: bool
    ) -> dict[str, float]:
        """One update on ``batch`` (its advantages set; verl's ``update_policy``): per optimizer
        step (:meth:`schedule`), each micro-batch scored, its loss (:meth:`loss`) weighted by its
        share of the mini-batch's sampled tokens and backpropagated; then :meth:`step`.

        Args:
            batch: rows of the kept episodes, with advantages (and old/reference log-probs and
                values from :meth:`compute_log_prob` where needed).
            need_old: the old log-probs come from the pre-update pass (:meth:`needs_old_logprobs`).
            engine_logprobs: the engine reported its log-probs (``rollout/logprob_diff_*``).

        Returns:
            The logged figures: ``actor/*`` (token-weighted means over the passes,
            ``grad_norm`` before clipping (mean over the finite ones), ``optimizer_steps``
            (steps taken), ``nonfinite_grad_steps`` (steps skipped), ``lr``) and, with engine
            log-probs, ``rollout/logprob_diff_*``. The gradients are freed afterwards (as large
            as the weights, unused until the next update).
        """
        figures = _Figures(batch.num_tokens, self.ranks)
        gap = _LogprobGap(engine_logprobs, batch, from_old=need_old)
        head = self.value_head is not None
        self.model.train()
        per_sequence = self.algorithm.agg_mode != "token-mean"
        for epoch, (mini_tokens, mini_seqs), micro_batches in self.schedule(batch):
            self.optimizer.zero_grad(set_to_none=True)
            for part, tokens, seqs, last in micro_batches:
                dummy = tokens == 0 and seqs == 0  # split_packs' padding: weighted 0
                token_share = tokens / mini_tokens
                shares = (seqs / mini_seqs if per_sequence else token_share, token_share)
                with checkpointed_if(self.model, self.oversized(part)), self.sync(last):
                    with self.amp():
                        scored = self.learner(
                            part.input_ids, part.attention_mask, part.loss_mask, want_values=head
                        )
                    if not dummy:
                        gap.add(scored["logprobs"], part, epoch)
                    old = part.old_logprobs if need_old else scored["logprobs"].detach()
                    loss, stats = self.loss(part, scored, old, shares)
                    (loss * self.grad_scale).backward()
                if not dummy:
                    figures.add(stats, tokens, mini_tokens)
            figures.end_step(self.step())
        self.optimizer.zero_grad(set_to_none=True)
        self.minibatch_stats = figures.steps
        norms = figures.grad_norms
        return {
            **figures.means(),
            "actor/grad_norm": float(np.mean(norms)) if norms else math.nan,
            "actor/optimizer_steps": float(len(norms)),
            "actor/nonfinite_grad_steps": float(figures.nonfinite_steps),
            "actor/lr": self.algorithm.lr,
            **gap.metrics(self.ranks),
        }


@dataclass(eq=False)
class Critic(_Worker):
    """PPO's separate critic model (``algorithm.critic: model``; verl's
    ``DataParallelPPOCritic``, ``verl/workers/critic/dp_critic.py``): a
    :class:`baselines.llm.critic.CriticModel` and its own AdamW (``algorithm.critic_lr``), with
    the actor's mini-batches and micro-batches (see the module docstring for why its own loop
    gives the numbers of running it inside the actor's)."""

    nonfinite_metric = "critic/nonfinite_grad_steps"

    def compute_values(self, batch: RolloutBatch) -> torch.Tensor:
        """The critic's values of every row, float32 ``[R, T-1]`` (verl's ``compute_values``)."""
        self.model.eval()
        scored = self.score_rows(batch, ["values"], lambda part: {"values": self.values(part)})
        return scored["values"]

    def values(self, part: RolloutBatch) -> torch.Tensor:
        """The critic model's values of a micro-batch, float32 ``[B, T-1]``."""
        with self.amp():
            return self.model(part.input_ids, part.attention_mask)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """verl's ``update_critic`` (``ragen/workers/critic/dp_critic.py:244-257``): per
        optimizer step, each micro-batch's :func:`value_loss` alone (no coefficient), weighted by
        its token share as the actor's; its own SUM-reduction, clipping and AdamW step.

        Returns ``critic/*``: the value-loss figures, ``critic/grad_norm`` (before clipping,
        as ``actor/grad_norm``; the policy's stays its own) and ``critic/nonfinite_grad_steps``
        (its steps skipped for a non-finite norm, :meth:`_Worker.step`)."""
        ac = self.algorithm
        figures = _Figures(batch.num_tokens, self.ranks)
        self.model.train()
        for _epoch, (mini_tokens, _), micro_batches in self.schedule(batch):
            self.optimizer.zero_grad(set_to_none=True)
            for part, tokens, _seqs, last in micro_batches:
                with checkpointed_if(self.model.model, self.oversized(part)), self.sync(last):
                    with self.amp():
                        values = self.learner(part.input_ids, part.attention_mask)
                    vf, stats = value_loss(
                        values, part.values, part.returns, part.loss_mask, ac.value_clip
                    )
                    (vf * (tokens / mini_tokens * self.grad_scale)).backward()
                if tokens:  # not split_packs' zero-weighted padding
                    figures.add(stats, tokens, mini_tokens)
            figures.end_step(self.step())
        self.optimizer.zero_grad(set_to_none=True)  # as large as its weights: freed
        self.minibatch_stats = figures.steps
        norms = figures.grad_norms
        return {
            **figures.means(),
            **({"critic/grad_norm": float(np.mean(norms))} if norms else {}),
            "critic/nonfinite_grad_steps": float(figures.nonfinite_steps),
        }
