"""The multi-turn RL trainer of RAGEN-2: StarPO rollouts, SNR-Aware Filtering, MI diagnostics.

One step, top to bottom (:meth:`Trainer.step`):

1. **Rollout.** P groups x N episodes (:func:`baselines.episodes.collect_rollouts`: token ids in,
   token ids out, each episode's training rows assembled from the ids the engine sampled); group g of
   step s resets with seed ``train_seed + s*P + g``, and member n of group g samples from its own
   ``torch.Generator`` seeded by :func:`baselines.episodes.episode_seed` of
   ``(train.seed, s, g, n)``, so a step is reproducible on its own, a resumed run repeats nothing,
   and an episode's ids do not depend on its decoding batch or on the number of ranks.
2. **MI diagnostics** (every ``diagnostics.every`` steps) on (prompt, reasoning) pairs of the batch
   *before* filtering: the matrix ``log p(z_m | x_j)`` (:func:`baselines.collapse.score_matrix`,
   which reuses each prompt's key/value cache) and its MI, retrieval and entropy estimates. z is
   RAGEN-2's (the sampled ids between ``<think>`` and the first sampled ``</think>``; empty or
   unclosed ones dropped and counted in ``valid_thinking_rate``); the collapse flag reads the
   whole sample's per-token conditional entropy estimate.
3. **SNR-Aware Filtering** (:func:`baselines.rl.filtering.snr_filter`): RAGEN's selection rule on a
   per-group score (reward std by default; per-episode lengths or token entropies ``[G, N]`` for
   those metrics). GRPO / Dr.GRPO make no update when every kept group has equal rewards and
   there is no entropy or KL term (the gradient would be exactly 0).
4. **Advantages**, on one padded batch (:func:`baselines.rl.batch.build_batch`). GRPO / Dr.GRPO: one
   advantage per episode from its group's rewards, given to every policy token of the episode
   (StarPO's trajectory-level credit). PPO: each turn's reward is placed on its last policy token
   and GAE runs over the episode's policy tokens with the critic's values (``algorithm.critic``:
   a value head on the policy's trunk, or RAGEN's separate critic model; :mod:`baselines.llm.critic`).
5. **Update** (:mod:`baselines.update`, verl's actor and critic workers). :class:`Actor`'s
   pre-update pass (old log-probs when the policy moves within a batch, reference log-probs,
   the value head's values) and :meth:`Actor.update`: clipped surrogate with separate low/high
   bounds, token mean over each mini-batch, entropy bonus, optional KL to the frozen reference
   (k1/k3, k3 bounded as verl bounds it), value loss (PPO with the value head), gradient
   clipping, one AdamW step per mini-batch of ``algorithm.ppo_mini_batch_size`` sequences
   (RAGEN's PPO mini-batches; 0: the whole batch) per PPO epoch. A mini-batch runs as
   micro-batches of at most ``algorithm.micro_batch_tokens`` padded tokens (rows packed longest
   first) whose losses are weighted by their token share, so accumulation gives the gradient of
   one big batch. With ``algorithm.critic: model``, :class:`Critic` scores the values and runs its
   own loss and AdamW steps, in its own loop.

Memory and precision: every pass reads the LM head only at the positions its loss or the MI
scorer uses (:mod:`baselines.llm.scoring`; never a ``[batch, tokens, vocab]`` tensor). Weights and
AdamW state are float32; rollouts, scoring and the update run under bf16 autocast where the
device has native bf16 (``model.dtype: auto``).

Every log-prob (policy, old, reference, entropy, MI scorer) is of the sampling distribution,
``log_softmax(logits / rollout.temperature)`` (verl's convention), so the ratio and the KL are
those of the policy that sampled the batch. With ``ppo_epochs == 1`` the policy that sampled the batch is the one being updated, so the old
log-probabilities equal the current ones and are taken from the same forward pass (detached);
the ratio is then exactly 1 and clipping starts to act from the second epoch.

Data parallel (:mod:`baselines.distributed`): launched by ``torchrun --nproc_per_node W -m
baselines.train ...`` (CPUs, gloo) or ``accelerate launch --num_processes W -m baselines.train
...`` (GPUs, nccl), the trainer starts ``accelerate.Accelerator`` and runs as W ranks that hold
identical weights and optimizer state. Each rank plays a contiguous block of ``P / W`` groups
(``rollout.num_groups`` must be a multiple of W) and the episode records are gathered to every
rank, so the filter, the advantages and the decision to update read the whole ``P x N`` batch
alike; the pre-update scoring and each mini-batch's rows are split over ranks, each rank's
micro-batch losses are weighted by their share of the mini-batch's *global* sampled tokens, and
PyTorch's ``DistributedDataParallel`` reduces the gradients before clipping and the AdamW step
(:mod:`baselines.update`: every rank runs as many micro-batches, the last one's backward
synchronising). With ``train.strategy: fsdp2`` the policy, its value head and the critic model are
sharded by FSDP2 instead: gathered whole for the rollout and the no-grad scoring, sharded for the
update, gathered to rank 0 for a checkpoint. The MI diagnostics (and the entropies an entropy filter reads) are
computed on rank 0 and broadcast; validation episodes are split and gathered. Rank 0 alone writes
``metrics.jsonl``, samples, dumps, plots, trackers and checkpoints (the others wait at a barrier
after each save); a checkpoint holds no per-rank state, so a run resumes at any world size.
``timing/*`` are rank 0's.

Outputs in ``train.out_dir``: ``metrics.jsonl`` (one JSON line per step, every name of
:data:`baselines.tracking.METRIC_NAMES`, null where undefined), ``plots/*.png``, ``checkpoint/``
(model, tokenizer, optimizer, trainer state; written crash-safely by :mod:`baselines.checkpoint`),
``samples/step_<step>.txt`` (a few episodes as text), ``tensorboard/`` (with
``train.report_to: [tensorboard]``), ``config.yaml`` and ``provenance.json`` (the code's commit and
versions: :mod:`agentgym.provenance`). While it runs, the progress bar shows the
phase of the step (:mod:`baselines.progress`); steps without an update or without a reward
signal are explained and, after ``train.max_steps_without_update`` (empty steps) or
``train.max_steps_without_signal`` of them in a row, end the run.
"""

from __future__ import annotations

import copy
import json
import math
import random
import sys
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.checkpoint import (
    append_metrics_line,
    prepare_run_folder,
    read_learner_files,
    save_checkpoint,
    truncate_metrics_after,
    write_learner_files,
)
from baselines.collapse import ZScoreTracker, episode_mi_diagnostics
from baselines.config import TrainConfig, config_to_dict, sampling_settings
from baselines.distributed import Ranks, world_size_from_environment
from baselines.episodes import (
    TRAIN_STREAM,
    VALIDATION_STREAM,
    EpisodeRecord,
    collect_rollouts,
    episode_generators,
    rollout_metrics,
    vocabulary_texts,
    write_rollouts,
)
from baselines.llm.critic import CriticModel, ValueHead
from baselines.llm.engines import SamplingSettings, logit_temperature, make_engine, vllm_dtype
from baselines.llm.policy import load_policy
from baselines.llm.scoring import autocast, resolve_autocast, set_checkpointing
from baselines.llm.threads import set_torch_threads
from baselines.rl.batch import (
    RolloutBatch,
    build_batch,
    gae_token_advantages,
    grpo_token_advantages,
    kept_rows,
)
from baselines.rl.filtering import no_group_gradient, snr_filter
from baselines.update import Actor, Critic, Placement

__all__ = ["Trainer", "signal_removed_groups"]


def release_memory() -> None:
    """Return freed heap memory to the system between the phases of a step.

    glibc may keep freed blocks in its heap (once its dynamic mmap threshold has risen, blocks up
    to 32 MB come from the heap), so memory torch freed after the rollout's KV caches or the
    update's activations can stay in the process's RSS while the next phase allocates again.
    ``malloc_trim(0)`` (glibc) hands free heap pages back; elsewhere this is a no-op. Added after
    the shipped Sokoban config (64 episodes) read 9.5 GB RSS in its second step; its effect on that
    run is not measured yet. Measured beside it (README, Memory): forcing large blocks to mmap
    (``MALLOC_MMAP_THRESHOLD_``) took 1.1 GB off a 6.1 GB peak but made generation 1.8x slower.
    """
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


#: Mixed into the generator of :func:`signal_removed_groups`, so its draws are apart from every
#: other stream seeded by ``train.seed``.
SIGNAL_SEED_SALT = 0x5167


def signal_removed_groups(fraction: float, num_groups: int, seed: int, step: int) -> list[int]:
    """The groups of step ``step`` whose rewards ``algorithm.signal_fraction`` removes.

    ``num_groups - floor(fraction * num_groups + 0.5)`` groups (the kept count rounded half
    up), drawn without replacement by a generator seeded by ``(seed, step, SIGNAL_SEED_SALT)``:
    the same on every rank and after a resume, different from step to step.

    Args:
        fraction: share of groups that keep their rewards, in [0, 1].
        num_groups: P, the step's groups.
        seed: ``train.seed``.
        step: the training step.

    Returns:
        Sorted group indices in ``[0, num_groups)``; empty at ``fraction`` 1.

    Example:
        >>> signal_removed_groups(0.0, 3, seed=0, step=5)
        [0, 1, 2]
        >>> len(signal_removed_groups(0.3, 8, seed=0, step=5))  # keeps round(2.4) = 2 of 8
        6
    """
    keep = math.floor(fraction * num_groups + 0.5)
    if keep >= num_groups:
        return []
    rng = np.random.default_rng([seed, step, SIGNAL_SEED_SALT])
    return sorted(int(g) for g in rng.choice(num_groups, num_groups - keep, replace=False))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _held_elements(modules: list[torch.nn.Module]) -> tuple[int, int]:
    """(elements of the parameters' local shards, elements of the whole parameters) of
    ``modules``: DTensors count their local shard, plain tensors in full."""
    held = total = 0
    for module in modules:
        for p in module.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            held, total = held + local.numel(), total + p.numel()
    return held, total


class Trainer:
    """Runs :class:`~baselines.config.TrainConfig` (see the module docstring for one step).

    Args:
        config: a validated configuration.
        resume: continue from ``out_dir/checkpoint`` (the step after the last saved one; metrics
            lines of later steps, written after the checkpoint, are dropped).
        progress: show a progress bar.
        engine: a running :class:`baselines.llm.engines.RolloutEngine` to use instead of starting
            the one ``rollout.engine`` names (its weights are synced to the policy at once; the
            caller closes it).

    Raises:
        FileExistsError: ``out_dir`` already holds a run and ``resume`` is False.
        SymlinkInRunFolder: ``out_dir`` holds a symbolic link (a ``ValueError``; see
            :func:`baselines.checkpoint.refuse_symlinks`).
        FileNotFoundError: ``resume`` is True but there is no checkpoint.
        ValueError: launched as W processes (``WORLD_SIZE``) with ``rollout.num_groups`` not a
            multiple of W.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        resume: bool = False,
        progress: bool = True,
        engine: Any | None = None,
    ):
        self.config = config
        self.out_dir = Path(config.train.out_dir)
        self.metrics_path = self.out_dir / "metrics.jsonl"
        self.checkpoint_dir = self.out_dir / "checkpoint"
        set_torch_threads(config.train.threads)
        P = config.rollout.num_groups
        world = world_size_from_environment()
        if P % world:
            raise ValueError(
                f"rollout.num_groups={P} is not divisible by the {world} processes (WORLD_SIZE): "
                f"each rank plays a whole block of groups; set rollout.num_groups to a multiple "
                f"of {world} or launch with --nproc_per_node dividing {P}"
            )
        # One process, or this rank of torchrun / accelerate launch (baselines.distributed).
        self.ranks = Ranks.from_environment(config.model.device, config.train.strategy)
        self.progress = progress and self.ranks.is_main
        # The run folder, crash-safe (baselines.checkpoint): a resume puts the newest complete
        # checkpoint back in place; config.yaml and provenance.json written by rank 0.
        resume = prepare_run_folder(
            self.out_dir,
            config_to_dict(config),
            config_to_dict(TrainConfig()),
            resume=resume,
            keep=config.train.keep_checkpoints,
            ranks=self.ranks,
        )

        rc, mc = config.rollout, config.model
        _seed_everything(config.train.seed)
        texts = vocabulary_texts(rc.env_id, rc.env_kwargs, range(32)) if mc.path == "tiny" else None
        source = str(self.checkpoint_dir) if resume else mc.path
        # Float32 master weights and AdamW state whatever model.dtype says; model.dtype picks the
        # autocast of the forward/backward passes (baselines.llm.scoring.resolve_autocast).
        model, self.tokenizer = load_policy(
            source,
            device=self.ranks.device or mc.device,
            dtype="float32",
            texts=texts,
            seed=config.train.seed,
        )
        self.device = next(model.parameters()).device
        self.autocast_dtype = resolve_autocast(mc.dtype, self.device)
        if mc.gradient_checkpointing:
            set_checkpointing(model, True)
            model.config.use_cache = False
        self.lora = mc.lora_rank > 0
        # algorithm.critic=model starts from the checkpoint as loaded, before the policy's adapter
        # (resumed: overwritten by its own saved weights in _load_state).
        critic_body = copy.deepcopy(model) if config.algorithm.critic == "model" else None
        if self.lora:
            model = self._attach_lora(model, resume)
        self.ranks.broadcast_parameters(model)  # every rank starts from rank 0's weights
        reference = None
        if config.algorithm.kl_coef > 0 and not self.lora:
            if resume:  # the reference is the initial policy (model.path), not the checkpoint
                reference, _ = load_policy(
                    mc.path,
                    device=self.ranks.device or mc.device,
                    dtype="float32",
                    texts=texts,
                    seed=config.train.seed,
                )
                self.ranks.broadcast_parameters(reference)
            else:
                reference = copy.deepcopy(model)
            reference = reference.eval().requires_grad_(False)
        value_head = None  # PPO, algorithm.critic=head
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": params, "lr": config.algorithm.lr}]
        if config.algorithm.name == "ppo" and critic_body is None:
            value_head = ValueHead(model.config.hidden_size).to(self.device)
            groups.append(
                {"params": list(value_head.parameters()), "lr": config.algorithm.critic_lr}
            )
        optimizer = torch.optim.AdamW(groups, weight_decay=config.algorithm.weight_decay)
        # The learner (baselines.update): the policy's worker and PPO's critic model's.
        self.actor = Actor(
            model,
            optimizer,
            config.algorithm,
            self._placement(),
            temperature=self.logit_temperature,
            reference=reference,
            value_head=value_head,
            lora=self.lora,
        )
        self.critic_worker = None  # PPO, algorithm.critic=model
        if critic_body is not None:
            self.critic_worker = self._build_critic(critic_body, model.config.hidden_size)
        self.tracker = ZScoreTracker.from_config(config.diagnostics)
        self.start_step = 0
        self.steps_without_update = 0  # in a row, for train.max_steps_without_update
        self.steps_without_signal = 0  # in a row, for train.max_steps_without_signal
        self.variance_stop_state: dict[str, Any] | None = None  # train.reward_variance_stop
        self.stopped_early = False
        self.phases = None  # baselines.progress.StepProgress while run() runs
        # fsdp2: a resume's AdamW states, read by rank 0 to the CPU for distribute() to shard.
        self._resumed_optimizers: dict[str, Any] | None = None
        if resume:
            self._load_state()
        # Under a launcher, each worker's gradient pass goes to DDP or is sharded by FSDP2
        # (train.strategy), now that its weights and optimizer state are final.
        resumed = self._resumed_optimizers or {}
        self.actor.distribute(resumed.get("optimizer"))
        if self.critic_worker is not None:
            self.critic_worker.distribute(resumed.get("critic_optimizer"))
        self._resumed_optimizers = None
        if self.ranks.sharded:  # what this rank holds of the learner's weights
            held, total = _held_elements(
                [self.actor.learner]
                + ([self.critic_worker.learner] if self.critic_worker is not None else [])
            )
            print(
                f"rank {self.ranks.rank}/{self.ranks.world_size} (fsdp2): holds {held:,} of "
                f"{total:,} weight elements of the policy and critic",
                file=sys.stderr,
            )
        self.sampling: SamplingSettings = sampling_settings(rc)
        # The rollout engine (started once per run) and, with rollout.ray_workers, the Ray
        # actors that own the environments.
        self.owns_engine = engine is None
        if engine is None:
            # fsdp2 gathers whole weights for the HF engine only (config.py refuses vllm).
            engine = make_engine(
                "hf" if self.ranks.sharded and rc.engine == "auto" else rc.engine,
                self.model,
                self.tokenizer,
                max_model_len=rc.max_context_tokens,
                seed=config.train.seed,
                max_batch_tokens=rc.generation_batch_tokens,
                kv_cache_bytes=int(rc.kv_cache_gib * 2**30),
                prefill_chunk_tokens=rc.prefill_chunk_tokens,
                gpu_memory_utilization=rc.vllm_gpu_memory_utilization,
                tensor_parallel_size=rc.vllm_tensor_parallel_size,
                dtype=vllm_dtype(self.autocast_dtype),  # vLLM samples as the HF engine would
            )
        else:
            if self.ranks.sharded and engine.samples_from_copy:
                raise ValueError(
                    "train.strategy=fsdp2 gathers the policy for an engine that samples from it "
                    "(the hf engine); this engine keeps its own copy (vllm): use "
                    "train.strategy=ddp, or no engine argument"
                )
            engine.sync_weights(self.model)
        self.engine = engine
        self.env_pool = None
        if rc.ray_workers:
            from baselines.ray_rollout import RayEnvPool

            self.env_pool = RayEnvPool(
                rc.env_id, rc.env_kwargs, rc.ray_workers, address=rc.ray_address or None
            )

    # ------------------------------------------------------------------ model parts

    def _attach_lora(self, model: torch.nn.Module, resume: bool) -> torch.nn.Module:
        """``model`` with its LoRA adapter: the checkpoint's when resuming, else a new one."""
        from peft import PeftModel, get_peft_model

        if resume and (self.checkpoint_dir / "adapter").is_dir():
            return PeftModel.from_pretrained(
                model, self.checkpoint_dir / "adapter", is_trainable=True
            )
        return get_peft_model(model, self._lora_config())

    def _lora_config(self) -> Any:
        from peft import LoraConfig

        mc = self.config.model
        return LoraConfig(
            r=mc.lora_rank,
            lora_alpha=mc.lora_alpha,
            target_modules=[
                "q_proj",
                "k_proj",
                "v_proj",
                "o_proj",
                "up_proj",
                "down_proj",
                "gate_proj",
            ],
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )

    def _build_critic(self, body: torch.nn.Module, hidden_size: int) -> Critic:
        """``algorithm.critic=model``: :class:`baselines.llm.critic.CriticModel` on ``body`` (a copy
        of the checkpoint the policy was loaded from; its own LoRA adapter with
        ``model.lora_rank``) and its own AdamW, like verl's critic worker
        (``ragen/workers/fsdp_workers.py:181-404``: own module and ``optim.AdamW``, the
        weight decay of its config). Every rank starts from rank 0's adapter and head."""
        ac = self.config.algorithm
        if self.lora:
            from peft import get_peft_model

            body = get_peft_model(body, self._lora_config())
        critic = CriticModel(body, hidden_size).to(self.device)
        self.ranks.broadcast_parameters(critic)
        optimizer = torch.optim.AdamW(
            [p for p in critic.parameters() if p.requires_grad],
            lr=ac.critic_lr,
            weight_decay=ac.weight_decay,
        )
        return Critic(critic, optimizer, ac, self._placement())

    def _placement(self) -> Placement:
        """Where the learner's workers run (:class:`baselines.update.Placement`)."""
        return Placement(self.ranks, self.device, self.autocast_dtype)

    # The learner's parts, read where a caller (checkpoints, tests, benchmarks) needs them.

    @property
    def model(self) -> torch.nn.Module:
        """The policy (:attr:`Actor.model`)."""
        return self.actor.model

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The policy's AdamW (with the value head's parameter group under ``critic: head``)."""
        return self.actor.optimizer

    @property
    def value_head(self) -> torch.nn.Module | None:
        """The value head on the policy's trunk (PPO, ``algorithm.critic: head``), or None."""
        return self.actor.value_head

    @property
    def critic(self) -> torch.nn.Module | None:
        """The critic model (PPO, ``algorithm.critic: model``), or None."""
        return self.critic_worker.model if self.critic_worker is not None else None

    @property
    def critic_optimizer(self) -> torch.optim.Optimizer | None:
        """The critic model's AdamW, or None."""
        return self.critic_worker.optimizer if self.critic_worker is not None else None

    @property
    def minibatch_stats(self) -> list[dict[str, float]]:
        """The last update's figures of each optimizer step (the actor's, then the critic's)."""
        steps = [dict(stats) for stats in self.actor.minibatch_stats]
        if self.critic_worker is not None:
            for stats, critic in zip(steps, self.critic_worker.minibatch_stats, strict=True):
                stats.update(critic)
        return steps

    def _amp(self):
        """The autocast of every forward pass (rollouts, scoring, update): ``model.dtype``
        resolved on this device (:func:`baselines.llm.scoring.resolve_autocast`); the weights stay
        float32."""
        return autocast(self.device, self.autocast_dtype)

    # ------------------------------------------------------------------ one step

    def _rollout(self, step: int) -> tuple[list[EpisodeRecord], dict[str, float]]:
        """This rank's block of the step's groups, played with one generator per episode
        (:func:`baselines.episodes.episode_seed` of ``(train.seed, step, group, member)``), then
        every rank's episodes gathered in group order on every rank. Timings are this rank's."""
        rc = self.config.rollout
        P, N = rc.num_groups, rc.group_size
        mine = self.ranks.block(P)
        seeds = [rc.train_seed + step * P + g for g in mine]
        generators = episode_generators(
            self.config.train.seed, TRAIN_STREAM, step, mine, N, self.device
        )
        torch.manual_seed(self.config.train.seed * 1_000_003 + step)  # anything else global
        self.model.eval()
        timings: dict[str, float] = {}
        with self._amp():
            episodes = collect_rollouts(
                self.model,
                self.tokenizer,
                rc.env_id,
                seeds,
                N,
                self.sampling,
                env_kwargs=rc.env_kwargs,
                envs=self.env_pool,
                timings=timings,
                engine=self.engine,
                generators=generators,
                first_group=mine.start,
            )
        return self.ranks.gather(episodes), timings

    def _diagnostics(self, episodes: list[EpisodeRecord], step: int) -> dict[str, float]:
        """MI diagnostics on the batch's (prompt ids, reasoning ids) pairs, at the sampling
        temperature: :func:`baselines.collapse.episode_mi_diagnostics` (the TRL integration
        runs the same function)."""
        return episode_mi_diagnostics(
            self.model,
            self.tokenizer,
            episodes,
            self.config.diagnostics,
            seed=self.config.train.seed,
            step=step,
            temperature=self.logit_temperature,
        )

    @property
    def logit_temperature(self) -> float:
        """The divisor of every logit the trainer turns into a log-prob: ``rollout.temperature``
        (the distribution the rollouts were sampled from, as in verl)."""
        return logit_temperature(self.config.rollout.temperature)

    def _advantages(self, batch: RolloutBatch, group_rewards: torch.Tensor) -> RolloutBatch:
        """The batch with the advantages (and PPO's returns) of every sampled token.

        GRPO / Dr.GRPO (StarPO's trajectory-level credit): each episode's group-relative
        advantage on every token it sampled (:func:`grpo_token_advantages`). PPO: each turn's
        reward on its last sampled token, GAE over the episode's sampled tokens with the critic's
        values from the pre-update pass, whitened (:func:`gae_token_advantages`).
        """
        ac = self.config.algorithm
        if ac.name == "ppo":
            advantages, returns = gae_token_advantages(
                batch, batch.values, ac.gamma, ac.lam, turn_rewards=ac.turn_rewards
            )
            return replace(batch, advantages=advantages, returns=returns)
        advantages = grpo_token_advantages(batch, group_rewards, normalize_std=ac.name == "grpo")
        return replace(batch, advantages=advantages)

    def _update(
        self,
        batch: RolloutBatch,
        group_rewards: torch.Tensor,
        metrics,
        timings,
        gathered: ExitStack | None = None,
    ) -> None:
        """One update on the kept episodes (:mod:`baselines.update`, verl's workers): the
        pre-update scoring (:meth:`Actor.compute_log_prob`: old and reference log-probs, the
        value head's values; :meth:`Critic.compute_values`), the advantages
        (:meth:`_advantages`), then :meth:`Actor.update` and :meth:`Critic.update`.

        Args:
            batch: rows of the kept episodes.
            group_rewards: float ``[P_kept, N]`` episode rewards of the kept groups (GRPO).
            gathered: the step's gathered policy weights (:meth:`_full_weights`), closed here
                after the policy's scoring: under ``fsdp2`` the critic is gathered alone for
                its values, and the gradient passes run sharded.
        """
        ac = self.config.algorithm
        metrics["actor/tokens_trained"] = float(batch.num_tokens)
        if batch.num_tokens == 0:
            metrics["actor/skipped"] = 1.0
            return
        need_old = self.actor.needs_old_logprobs(batch.num_rows)
        t0 = time.perf_counter()
        batch = self.actor.compute_log_prob(batch, old=need_old, ref=ac.kl_coef > 0)
        if gathered is not None:  # the policy's gradient passes run sharded under fsdp2
            gathered.close()
        if self.critic_worker is not None:
            with self.ranks.full_weights(self.critic_worker.learner):
                batch = replace(batch, values=self.critic_worker.compute_values(batch))
        timings["timing/ref_old_logprob_s"] = time.perf_counter() - t0
        batch = self._advantages(batch, group_rewards)
        t0 = time.perf_counter()
        engine_logprobs = self.engine.provides_logprobs
        metrics.update(self.actor.update(batch, need_old=need_old, engine_logprobs=engine_logprobs))
        if self.critic_worker is not None:
            metrics.update(self.critic_worker.update(batch))
        timings["timing/backward_s"] = time.perf_counter() - t0

    def _diagnose(
        self, episodes: list[EpisodeRecord], step: int, timings: dict[str, float]
    ) -> dict[str, float]:
        """The MI diagnostics of the step (:meth:`_diagnostics`): rank 0 scores, every rank
        gets its figures."""
        t0 = time.perf_counter()
        self._phase("scoring (MI diagnostics)")  # hook: live progress
        self.model.eval()
        diag = {}
        if self.ranks.is_main:
            with self._amp():
                diag = self._diagnostics(episodes, step)
        diag = self.ranks.broadcast(diag)
        timings["timing/diagnostics_s"] = time.perf_counter() - t0
        return diag

    def _filter_inputs(
        self, episodes: list[EpisodeRecord], full: RolloutBatch
    ) -> dict[str, torch.Tensor]:
        """What ``filter.metric`` reads besides the rewards, ``[P, N]``: each episode's policy
        tokens (length) or mean token entropy (entropy; rank 0 scores, every rank filters
        alike)."""
        P, N = self.config.rollout.num_groups, self.config.rollout.group_size
        needs = self.config.filter.needs
        if needs == "lengths":
            lengths = [sum(len(t.sample.sampled_ids) for t in e.turns) for e in episodes]
            return {"lengths": torch.tensor(lengths, dtype=torch.float64).view(P, N)}
        if needs == "entropies":
            entropies = self.actor.episode_entropies(full, (P, N)) if self.ranks.is_main else None
            return {"entropies": self.ranks.broadcast(entropies)}
        return {}

    def _full_weights(self) -> Any:
        """The policy's weights whole on every rank for the no-grad work (rollouts, its scoring,
        the MI diagnostics, validation): :meth:`Ranks.full_weights` of its gradient pass (a
        no-op but under ``fsdp2``). The critic model is gathered for its own scoring only
        (:meth:`_update`), after the policy is sharded again."""
        return self.ranks.full_weights(self.actor.learner)

    def step(self, step: int) -> dict[str, float]:
        """Run training step ``step`` and return its metrics."""
        with ExitStack() as gathered:
            gathered.enter_context(self._full_weights())
            return self._step(step, gathered)

    def _step(self, step: int, gathered: ExitStack) -> dict[str, float]:
        cfg = self.config
        t_start = time.perf_counter()
        episodes, timings = self._rollout(step)
        release_memory()  # the decoding batches' KV caches are gone: give their pages back
        if self.ranks.is_main:
            self._on_rollout(step, episodes)  # hook: sample episodes as text
        metrics: dict[str, float] = {"step": float(step)}
        metrics.update(rollout_metrics(episodes, "rollout/"))
        if cfg.train.dump_rollouts and self.ranks.is_main:
            self._dump_rollouts(episodes, step)
        P, N = cfg.rollout.num_groups, cfg.rollout.group_size
        rewards = torch.tensor([e.total_reward for e in episodes], dtype=torch.float64).view(P, N)
        removed = signal_removed_groups(cfg.algorithm.signal_fraction, P, cfg.train.seed, step)
        if removed:  # claim (a)'s manipulation: these groups teach the policy nothing
            rewards[removed] = 0.0
        metrics["rollout/signal_groups"] = float(P - len(removed))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        full = build_batch(episodes, pad)

        diag = {}
        if cfg.diagnostics.every and step % cfg.diagnostics.every == 0:
            diag = self._diagnose(episodes, step, timings)
        result = snr_filter(rewards, cfg.filter, **self._filter_inputs(episodes, full))
        metrics.update(result.stats)
        # RAGEN's rollout/in_group_reward_std (rollout_filter.py:428,439): the mean over groups
        # of each group's unbiased reward std; read by train.reward_variance_stop.
        metrics["rollout/in_group_reward_std"] = float(rewards.std(dim=1).mean()) if N > 1 else 0.0
        kept_groups = result.kept.tolist()
        kept = [g * N + n for g in kept_groups for n in range(N)]
        metrics["filter/tokens_before"] = float(full.num_tokens)
        self._phase("update (forward/backward)")  # hook: live progress
        ac = cfg.algorithm
        if kept and ac.name != "ppo" and no_group_gradient(rewards[kept_groups], ac):
            kept = []  # every advantage 0, no regulariser: the loss and its gradient are 0
        if kept:
            batch = kept_rows(full, kept)
            if removed:  # PPO reads the turns' rewards from the rows
                gone = set(removed)
                rows = [kept[e] // N in gone for e in batch.row_episode.tolist()]
                batch.token_rewards[torch.tensor(rows, dtype=torch.bool)] = 0.0
            metrics["filter/tokens_after"] = float(batch.num_tokens)
            self._update(batch, rewards[kept_groups], metrics, timings, gathered)
            # The update's activations (and, freed by the workers, its gradients) are not needed
            # until the next update: give their pages back before the next rollout's KV caches.
            release_memory()
        else:
            metrics["filter/tokens_after"] = 0.0
            metrics["actor/tokens_trained"] = 0.0
            metrics["actor/skipped"] = 1.0
        updated = not metrics.get("actor/skipped")
        if updated and self.engine.samples_from_copy:
            timings["timing/weight_sync_s"] = self.engine.sync_weights(self.model)
        timings["timing/step_s"] = time.perf_counter() - t_start
        gen_tokens = sum(len(t.sample.sampled_ids) for e in episodes for t in e.turns)
        if timings.get("timing/generation_s"):
            timings["timing/generated_tokens_per_s"] = gen_tokens / timings["timing/generation_s"]
        metrics.update(timings)
        if diag:
            metrics.update({f"collapse/{key}": value for key, value in diag.items()})
            # Entropy: the per-token conditional entropy estimate of the whole diagnostic
            # sample (before filtering), not the kept groups' actor entropy. An evaluation with
            # nothing to score still gets a state (format_collapsed / insufficient_sample).
            metrics.update(self.tracker.update(diag))
        return metrics

    def validate(self) -> dict[str, float]:
        """Play ``val_episodes`` held-out seeds (``val_seed + i``), greedy by default; episode i
        samples from its own generator (:func:`baselines.episodes.episode_seed` on the
        validation stream), the episodes split over ranks in blocks and gathered."""
        rc = self.config.rollout
        if rc.val_episodes == 0:
            return {}
        with self._full_weights():
            return self._validate()

    def _validate(self) -> dict[str, float]:
        rc = self.config.rollout
        sampling = copy.copy(self.sampling)
        sampling.temperature = rc.val_temperature
        torch.manual_seed(self.config.train.seed)
        mine = self.ranks.block(rc.val_episodes)  # this rank's block, gathered below
        generators = episode_generators(
            self.config.train.seed, VALIDATION_STREAM, 0, mine, 1, self.device
        )
        self.model.eval()
        with self._amp():
            episodes = collect_rollouts(
                self.model,
                self.tokenizer,
                rc.env_id,
                [rc.val_seed + i for i in mine],
                1,
                sampling,
                env_kwargs=rc.env_kwargs,
                envs=self.env_pool,
                engine=self.engine,
                generators=generators,
                first_group=mine.start,
            )
        episodes = self.ranks.gather(episodes)
        self.last_val_episodes = episodes
        return rollout_metrics(episodes, "val/")

    def _dump_rollouts(self, episodes: list[EpisodeRecord], step: int) -> None:
        """``train.dump_rollouts``: ``rollouts/step_NNNNNN.jsonl`` (format:
        :func:`baselines.episodes.write_rollouts`), and the tokenizer once, for the viewer."""
        folder = self.out_dir / "rollouts"
        if not (folder / "tokenizer").is_dir():
            self.tokenizer.save_pretrained(folder / "tokenizer")
        write_rollouts(folder / f"step_{step:06d}.jsonl", episodes, step)

    # ------------------------------------------------------------------ checkpoints

    def save(self, step: int, *, final: bool = False) -> None:
        """Write ``checkpoint/`` crash-safely (:func:`baselines.checkpoint.save_checkpoint`): the
        learner's files (:func:`baselines.checkpoint.write_learner_files`) and, in
        ``state.json``, the run's counters.

        ``final`` (the run's last step) leaves out the optimizer state when
        ``train.final_optimizer_state`` is false (a resume then restarts AdamW's moments).
        """
        tc = self.config.train
        with_optimizer = not final or tc.final_optimizer_state
        states = self._sharded_states(with_optimizer) if self.ranks.sharded else None

        def write(staging: Path) -> dict[str, Any]:
            write_learner_files(
                staging,
                model=self.model,
                tokenizer=self.tokenizer,
                lora=self.lora,
                with_optimizer=with_optimizer,
                states=states,
                **self._optimized_parts(),
            )
            return {
                "tracker": self.tracker.state_dict(),
                "optimizer_state": with_optimizer,
                "steps_without_update": self.steps_without_update,
                "steps_without_signal": self.steps_without_signal,
                "reward_variance_stop": self.variance_stop_state,
            }

        if self.ranks.is_main:  # every rank holds the same weights and optimizer state
            save_checkpoint(self.out_dir, write, step, keep=tc.keep_checkpoints)
        self.ranks.barrier()  # no rank reads a checkpoint rank 0 is still writing

    def _sharded_states(self, with_optimizer: bool) -> dict[str, Any]:
        """Under ``fsdp2``, what a checkpoint holds, gathered whole to rank 0 (every rank calls:
        collective), in the files' one-process layout (:meth:`Ranks.full_state`,
        :meth:`Ranks.full_optimizer_state`), for :func:`write_learner_files`."""
        ranks, actor = self.ranks, self.actor
        whole = ranks.full_state(actor.learner)  # ActorPass: policy.* and value_head.*
        # A tied weight (an LM head sharing the embedding) once, under its first name, as the
        # one-process save_pretrained writes it.
        model = self.model
        aliases = {n for n, _ in model.named_parameters(remove_duplicate=False)}
        aliases -= {n for n, _ in model.named_parameters()}

        def under(prefix: str) -> dict[str, Any]:
            return {k[len(prefix) :]: v for k, v in whole.items() if k.startswith(prefix)}

        policy = under("policy.")
        states: dict[str, Any] = {"model": {k: v for k, v in policy.items() if k not in aliases}}
        if actor.value_head is not None:
            states["value_head"] = under("value_head.")
        if with_optimizer:
            states["optimizer"] = ranks.full_optimizer_state(actor.learner, actor.optimizer)
        if self.critic_worker is not None:
            critic = self.critic_worker
            states["critic"] = ranks.full_state(critic.learner)
            if with_optimizer:
                states["critic_optimizer"] = ranks.full_optimizer_state(
                    critic.learner, critic.optimizer
                )
        return states

    def _load_state(self) -> None:
        """Resume: the learner's files (:func:`baselines.checkpoint.read_learner_files`) and
        the run's counters; ``metrics.jsonl`` lines of later steps are dropped (they run again)."""
        parts = self._optimized_parts()
        if self.ranks.sharded:  # rank 0 reads AdamW's state to the CPU; distribute() shards it
            self._resumed_optimizers = {} if self.ranks.is_main else None
            if not self.ranks.is_main:
                parts = {**parts, "optimizer": None, "critic_optimizer": None}
        state = read_learner_files(
            self.checkpoint_dir,
            device=self.device,
            optimizer_states=self._resumed_optimizers,
            say=self.ranks.is_main,
            **parts,
        )
        self.tracker.load_state_dict(state["tracker"])
        self.steps_without_update = int(state.get("steps_without_update", 0))
        self.steps_without_signal = int(state.get("steps_without_signal", 0))
        self.variance_stop_state = state.get("reward_variance_stop")
        self.start_step = int(state["step"]) + 1
        if self.ranks.is_main:  # atomically, rank 0 alone
            truncate_metrics_after(self.metrics_path, self.start_step)
        self.ranks.barrier()

    def _optimized_parts(self) -> dict[str, Any]:
        """What a checkpoint holds besides the policy's weights: its optimizer, the value head,
        the critic model and its optimizer (None where the run has none)."""
        return {
            "optimizer": self.optimizer,
            "value_head": self.value_head,
            "critic": self.critic,
            "critic_optimizer": self.critic_optimizer,
        }

    # ------------------------------------------------------------------ the run

    def _phase(self, phase: str) -> None:
        """Show the phase of the running step (:class:`baselines.progress.StepProgress`)."""
        if self.phases is not None:
            self.phases.set(phase)

    def _on_rollout(self, step: int, episodes: list[EpisodeRecord]) -> None:
        """Write a few episodes of the step as text (``train.samples_per_step``)."""
        from baselines.samples import write_samples

        write_samples(self.out_dir, step, episodes, self.config.train.samples_per_step)

    def run(self) -> list[dict[str, float]]:
        """Train from ``start_step`` to ``train.steps``; returns the metrics of each step run.

        Stops early after ``train.max_steps_without_update`` steps in a row without an update, or
        ``train.max_steps_without_signal`` without a reward signal
        (:class:`baselines.progress.StallMonitor`), with the checkpoint of the last step saved.
        """
        from tqdm import tqdm

        from baselines.plots import write_plots
        from baselines.progress import (
            ProgressEngine,
            RewardVarianceStop,
            StallMonitor,
            StepProgress,
            max_turns_of,
            say,
        )
        from baselines.tracking import complete_metrics, make_trackers

        cfg = self.config
        history = []
        bar = tqdm(
            range(self.start_step, cfg.train.steps),
            initial=self.start_step,
            total=cfg.train.steps,
            desc="train",
            disable=not self.progress,
            unit="step",
        )
        self.phases = StepProgress(
            bar if self.progress else None,
            max_turns_of(cfg.rollout.env_id, cfg.rollout.env_kwargs),
        )
        self.engine = ProgressEngine(self.engine, self.phases)
        stall = StallMonitor(
            cfg.train.max_steps_without_update,
            self.steps_without_update,
            cfg.train.max_steps_without_signal,
            self.steps_without_signal,
            critic=cfg.algorithm.name == "ppo",
        )
        variance_stop = RewardVarianceStop(self.variance_stop_state)
        trackers = []
        main = self.ranks.is_main  # rank 0 alone writes, logs and speaks

        def tell(message: str) -> None:
            if main:
                say(message)

        try:
            if main:
                trackers = make_trackers(cfg.train.report_to, self.out_dir, config_to_dict(cfg))
            initial = {}
            if self.start_step == 0 and cfg.rollout.val_episodes:
                # The policy before any update: the reference point of every validation curve.
                self.phases.set("validation before training")
                initial = {
                    k.replace("val/", "val_initial/", 1): v for k, v in self.validate().items()
                }
            for step in bar:
                if stall.should_stop:  # resumed at the limit: no step is rolled out
                    tell(stall.stop_message())
                    self.stopped_early = True
                    break
                if cfg.train.reward_variance_stop and variance_stop.should_stop:
                    tell(variance_stop.stop_message())
                    self.stopped_early = True
                    break
                self.phases.begin_step(step)
                metrics = self.step(step)
                if step == 0:
                    metrics.update(initial)
                last = step == cfg.train.steps - 1
                # The stop rules read the step's rollout and update figures, never validation's,
                # so they are judged first: a run that ends here validates the policy it ends with.
                warning = stall.observe(step, metrics)
                self.steps_without_update, self.steps_without_signal = stall.count, stall.silent
                variance_stop.observe(metrics)
                self.variance_stop_state = variance_stop.state()
                variance_stopped = cfg.train.reward_variance_stop and variance_stop.should_stop
                stop = stall.should_stop or variance_stopped
                if (step + 1) % cfg.rollout.val_every == 0 or last or stop:
                    self.phases.set("validation")
                    metrics.update(self.validate())
                line = complete_metrics(metrics)
                if main:
                    append_metrics_line(self.metrics_path, json.dumps(line, allow_nan=False))
                for tracker in trackers:
                    tracker.log(line, step)
                history.append(metrics)
                bar.set_postfix(
                    reward=f"{metrics['rollout/reward_mean']:.3f}",
                    success=f"{metrics['rollout/success_rate']:.2f}",
                    valid=f"{metrics['rollout/valid_action_rate']:.2f}",
                    updated="no" if metrics.get("actor/skipped") else "yes",
                )
                if warning:
                    tell(warning)
                every = cfg.train.save_every
                if (every and (step + 1) % every == 0) or last or stop:
                    self.phases.set("saving checkpoint")
                    self.save(step, final=last or stop)
                    if main:
                        write_plots(self.metrics_path, self.out_dir / "plots")
                if stop:
                    tell(variance_stop.stop_message() if variance_stopped else stall.stop_message())
                    self.stopped_early = True
                    break
        finally:
            for tracker in trackers:
                tracker.close()
            bar.close()
            self.close()
        return history

    def close(self) -> None:
        """Stop the rollout engine and the Ray actors (``run`` does this when it ends)."""
        if self.owns_engine:
            self.engine.close()
        if self.env_pool is not None:
            self.env_pool.close()
            self.env_pool = None
