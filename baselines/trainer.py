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
5. **Update** (:meth:`Trainer._update`, one page). Clipped surrogate with separate low/high
   bounds, token mean over each mini-batch, entropy bonus, optional KL to the frozen reference
   (k1/k3, k3 bounded as verl bounds it), value loss (PPO; with ``algorithm.critic: model`` the
   critic model's own loss and AdamW step instead), gradient clipping, one AdamW step per
   mini-batch of ``algorithm.ppo_mini_batch_size`` sequences (RAGEN's PPO mini-batches; 0: the
   whole batch) per PPO epoch, old log-probs from a pre-update pass when the policy moves within
   a batch. A mini-batch runs as micro-batches of at most ``algorithm.micro_batch_tokens``
   padded tokens (rows packed longest first) whose losses are weighted by their token share, so
   accumulation gives the gradient of one big batch.

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
the gradients are SUM-reduced before clipping and the AdamW step (:meth:`Trainer._update` says why
this is not a DDP wrapper). The MI diagnostics (and the entropies an entropy filter reads) are
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
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from agentgym import provenance
from baselines.checkpoint import (
    append_metrics_line,
    begin_resume,
    check_same_run,
    refuse_symlinks,
    save_checkpoint,
    truncate_metrics_after,
    write_text_durable,
)
from baselines.collapse import ZScoreTracker, episode_mi_diagnostics
from baselines.config import TrainConfig, config_to_dict
from baselines.distributed import Ranks, world_size_from_environment
from baselines.episodes import (
    TRAIN_STREAM,
    VALIDATION_STREAM,
    EpisodeRecord,
    collect_rollouts,
    episode_generators,
    write_rollouts,
)
from baselines.llm.critic import CriticModel, ValueHead, load_trainable, save_trainable
from baselines.llm.engines import SamplingSettings, logit_temperature
from baselines.llm.policy import load_policy
from baselines.llm.scoring import (
    autocast,
    checkpointed_if,
    resolve_autocast,
    score_targets,
    set_checkpointing,
)
from baselines.llm.threads import set_torch_threads
from baselines.rl.batch import (
    RolloutBatch,
    build_batch,
    gae_token_advantages,
    grpo_token_advantages,
)
from baselines.rl.filtering import snr_filter
from baselines.rl.losses import kl_penalty, masked_mean, policy_loss, value_loss
from baselines.rl.minibatches import minibatch_indices, pack_by_tokens

__all__ = ["Trainer", "signal_removed_groups", "vocabulary_texts"]

#: Settings a resumed run may change (they steer output and stopping, not what a step computes).
RESUMABLE_TRAIN_KEYS = frozenset(
    {
        "steps",
        "threads",
        "keep_checkpoints",
        "final_optimizer_state",
        "max_steps_without_update",
        "max_steps_without_signal",
        "reward_variance_stop",
        "report_to",
        "samples_per_step",
        "save_every",
    }
)


def vocabulary_texts(env_id: str, env_kwargs: dict[str, Any], seeds: range) -> list[str]:
    """Instructions and first observations of some episodes (the ``tiny`` model's vocabulary)."""
    import gymnasium as gym

    env = gym.make(env_id, **env_kwargs)
    texts = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        texts += [obs, info["instructions"]]
        for action in (info.get("valid_actions") or [])[:8]:
            texts.append(action)
    env.close()
    texts.append(
        "Turn State You have actions left up to this turn Reward Your last reply was "
        "invalid nothing happened system user assistant"
    )
    return texts


def _check_same_run(saved: dict[str, Any], now: dict[str, Any]) -> None:
    """:func:`baselines.checkpoint.check_same_run` with :data:`RESUMABLE_TRAIN_KEYS`."""
    check_same_run(saved, now, "train", RESUMABLE_TRAIN_KEYS, config_to_dict(TrainConfig()))


class _Meter:
    """Weighted sums of the logged figures: ``add(stats, w)`` adds ``w * value`` for each name;
    ``means()`` divides by the total weight of the passes (so each figure is the token-weighted
    mean over one pass, averaged over ``ppo_epochs`` passes)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weight = 0.0

    def add(self, stats: dict[str, torch.Tensor], weight: float) -> None:
        for key, value in stats.items():
            self.sums[key] = self.sums.get(key, 0.0) + weight * float(value)
        self.weight += weight

    def means(self) -> dict[str, float]:
        passes = self.weight if self.weight > 0 else 1.0
        return {key: value / passes for key, value in self.sums.items()}


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
        self.ranks = Ranks.from_environment(config.model.device)
        self.progress = progress and self.ranks.is_main
        refuse_symlinks(self.out_dir)  # fresh or resumed: nothing is written through a link
        # Crash safety: put the newest complete checkpoint back in place (baselines.checkpoint);
        # rank 0 alone moves files, the others wait for it.
        resume_from_scratch = False
        if self.ranks.is_main:
            resume_from_scratch = resume and begin_resume(
                self.out_dir, config.train.keep_checkpoints
            )
        resume_from_scratch = self.ranks.broadcast(resume_from_scratch)
        if (
            resume
            and not resume_from_scratch
            and not (self.checkpoint_dir / "state.json").is_file()
        ):
            raise FileNotFoundError(f"--resume: no checkpoint in {self.checkpoint_dir}")
        if resume_from_scratch:
            resume = False
            if self.ranks.is_main:
                print(
                    f"--resume: {self.out_dir} has no complete checkpoint yet (the run stopped "
                    "during its first step); starting again from step 0",
                    file=sys.stderr,
                )
                truncate_metrics_after(self.metrics_path, 0)
        elif not resume and self.metrics_path.exists():
            raise FileExistsError(
                f"{self.out_dir} already holds a run; pass --resume to continue it or choose "
                "another train.out_dir"
            )
        self.ranks.barrier()  # every rank has checked before rank 0 writes
        config_path = self.out_dir / "config.yaml"
        if self.ranks.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if (resume or resume_from_scratch) and config_path.is_file():
                _check_same_run(yaml.safe_load(config_path.read_text()), config_to_dict(config))
            write_text_durable(config_path, yaml.safe_dump(config_to_dict(config)))
            # The code that runs: commit, uncommitted changes, library versions (provenance.json).
            provenance.record(self.out_dir, resumed=resume, write=write_text_durable)
        self.ranks.barrier()

        rc, mc = config.rollout, config.model
        _seed_everything(config.train.seed)
        texts = vocabulary_texts(rc.env_id, rc.env_kwargs, range(32)) if mc.path == "tiny" else None
        source = str(self.checkpoint_dir) if resume else mc.path
        if resume and mc.path == "tiny":
            source = str(self.checkpoint_dir)
        # Float32 master weights and AdamW state whatever model.dtype says; model.dtype picks the
        # autocast of the forward/backward passes (baselines.llm.scoring.resolve_autocast).
        self.model, self.tokenizer = load_policy(
            source,
            device=self.ranks.device or mc.device,
            dtype="float32",
            texts=texts,
            seed=config.train.seed,
        )
        self.device = next(self.model.parameters()).device
        self.autocast_dtype = resolve_autocast(mc.dtype, self.device)
        if mc.gradient_checkpointing:
            set_checkpointing(self.model, True)
            self.model.config.use_cache = False
        self.lora = mc.lora_rank > 0
        # algorithm.critic=model starts from the checkpoint as loaded, before the policy's adapter
        # (resumed: overwritten by its own saved weights in _load_state).
        critic_body = copy.deepcopy(self.model) if config.algorithm.critic == "model" else None
        if self.lora:
            self._attach_lora(resume)
        self.ranks.broadcast_parameters(self.model)  # every rank starts from rank 0's weights
        self.reference = None
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
                reference = copy.deepcopy(self.model)
            self.reference = reference.eval().requires_grad_(False)
        self.value_head = None  # PPO, algorithm.critic=head
        params = [p for p in self.model.parameters() if p.requires_grad]
        groups = [{"params": params, "lr": config.algorithm.lr}]
        if config.algorithm.name == "ppo" and critic_body is None:
            self.value_head = ValueHead(self.model.config.hidden_size).to(self.device)
            groups.append(
                {"params": list(self.value_head.parameters()), "lr": config.algorithm.critic_lr}
            )
        self.optimizer = torch.optim.AdamW(groups, weight_decay=config.algorithm.weight_decay)
        self.critic = self.critic_optimizer = None  # PPO, algorithm.critic=model
        if critic_body is not None:
            self._build_critic(critic_body)
        self.tracker = ZScoreTracker.from_config(config.diagnostics)
        self.start_step = 0
        self.steps_without_update = 0  # in a row, for train.max_steps_without_update
        self.steps_without_signal = 0  # in a row, for train.max_steps_without_signal
        self.variance_stop_state: dict[str, Any] | None = None  # train.reward_variance_stop
        self.stopped_early = False
        self.phases = None  # baselines.progress.StepProgress while run() runs
        if resume:
            self._load_state()
        self.sampling = SamplingSettings(
            max_new_tokens=rc.max_new_tokens,
            temperature=rc.temperature,
            top_p=rc.top_p,
            think_prefix=rc.think_prefix,
            max_context_tokens=rc.max_context_tokens,
        )
        # The rollout engine (started once per run) and, with rollout.ray_workers, the Ray
        # actors that own the environments.
        from baselines.llm.engines import make_engine

        self.owns_engine = engine is None
        if engine is None:
            engine = make_engine(
                rc.engine,
                self.model,
                self.tokenizer,
                max_model_len=rc.max_context_tokens,
                seed=config.train.seed,
                max_batch_tokens=rc.generation_batch_tokens,
                kv_cache_bytes=int(rc.kv_cache_gib * 2**30),
                prefill_chunk_tokens=rc.prefill_chunk_tokens,
                gpu_memory_utilization=rc.vllm_gpu_memory_utilization,
                tensor_parallel_size=rc.vllm_tensor_parallel_size,
            )
        else:
            engine.sync_weights(self.model)
        self.engine = engine
        self.env_pool = None
        if rc.ray_workers:
            from baselines.ray_rollout import RayEnvPool

            self.env_pool = RayEnvPool(
                rc.env_id, rc.env_kwargs, rc.ray_workers, address=rc.ray_address or None
            )

    # ------------------------------------------------------------------ model parts

    def _attach_lora(self, resume: bool) -> None:
        from peft import PeftModel, get_peft_model

        if resume and (self.checkpoint_dir / "adapter").is_dir():
            self.model = PeftModel.from_pretrained(
                self.model, self.checkpoint_dir / "adapter", is_trainable=True
            )
            return
        self.model = get_peft_model(self.model, self._lora_config())

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

    def _build_critic(self, body: torch.nn.Module) -> None:
        """``algorithm.critic=model``: :class:`baselines.llm.critic.CriticModel` on ``body`` (a copy
        of the checkpoint the policy was loaded from; its own LoRA adapter with
        ``model.lora_rank``) and its own AdamW, like verl's critic worker
        (``ragen/workers/fsdp_workers.py:181-404``: own module and ``optim.AdamW``, the
        weight decay of its config). Every rank starts from rank 0's adapter and head."""
        ac = self.config.algorithm
        if self.lora:
            from peft import get_peft_model

            body = get_peft_model(body, self._lora_config())
        self.critic = CriticModel(body, self.model.config.hidden_size).to(self.device)
        self.ranks.broadcast_parameters(self.critic)
        self.critic_optimizer = torch.optim.AdamW(
            [p for p in self.critic.parameters() if p.requires_grad],
            lr=ac.critic_lr,
            weight_decay=ac.weight_decay,
        )

    def _amp(self):
        """The autocast of every forward pass (rollouts, scoring, update): ``model.dtype``
        resolved on this device (:func:`baselines.llm.scoring.resolve_autocast`); the weights stay
        float32."""
        return autocast(self.device, self.autocast_dtype)

    def _reference_context(self):
        if self.lora:
            return self.model.disable_adapter()
        return nullcontext()

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

    @staticmethod
    def rollout_metrics(episodes: list[EpisodeRecord], prefix: str) -> dict[str, float]:
        """Episode statistics under ``prefix`` (``rollout/`` or ``val/``)."""
        rewards = [e.total_reward for e in episodes]
        turns = [len(e.turns) for e in episodes]
        tokens = [len(t.sample.sampled_ids) for e in episodes for t in e.turns]
        return {
            f"{prefix}reward_mean": float(np.mean(rewards)),
            f"{prefix}reward_std": float(np.std(rewards)),
            f"{prefix}success_rate": float(np.mean([e.success for e in episodes])),
            f"{prefix}valid_action_rate": float(np.mean([e.valid_turn_fraction for e in episodes])),
            f"{prefix}turns_mean": float(np.mean(turns)),
            f"{prefix}response_tokens_mean": float(np.mean(tokens)) if tokens else 0.0,
        }

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

    def _episode_entropies(self, full: RolloutBatch, shape: tuple[int, int]) -> torch.Tensor:
        """Each episode's mean token entropy (nats) over its sampled tokens, float64 ``[G, N]``,
        at the sampling temperature (for ``filter.metric`` entropy / entropy_std)."""
        sums = torch.zeros(full.row_episode.max().item() + 1, dtype=torch.float64)
        counts = torch.zeros_like(sums)
        self.model.eval()
        with torch.no_grad():
            for rows in self._micro_batches(full, list(range(full.num_rows))):
                part = full.select(rows).to(self.device)
                scored = self._score(self.model, part, want_entropy=True)
                mask = part.loss_mask
                episode = full.row_episode[torch.as_tensor(rows)]
                sums.index_add_(0, episode, (scored["entropy"] * mask).sum(1).double().cpu())
                counts.index_add_(0, episode, mask.sum(1).double().cpu())
        out = torch.zeros(shape[0] * shape[1], dtype=torch.float64)
        out[: len(sums)] = sums / counts.clamp(min=1)
        return out.view(shape)

    def _micro_batches(self, batch: RolloutBatch, rows: list[int]) -> list[list[int]]:
        """``rows`` packed into micro-batches of at most ``algorithm.micro_batch_tokens`` padded
        tokens and ``algorithm.micro_batch_size`` rows (:func:`pack_by_tokens`)."""
        ac = self.config.algorithm
        lengths = batch.attention_mask[torch.as_tensor(rows, dtype=torch.long)].sum(1).tolist()
        packs = pack_by_tokens(lengths, ac.micro_batch_tokens, ac.micro_batch_size)
        return [[rows[i] for i in pack] for pack in packs]

    @property
    def logit_temperature(self) -> float:
        """The divisor of every logit the trainer turns into a log-prob: ``rollout.temperature``
        (the distribution the rollouts were sampled from, as in verl)."""
        return logit_temperature(self.config.rollout.temperature)

    def _score(
        self,
        model: torch.nn.Module,
        part: RolloutBatch,
        *,
        want_entropy: bool = False,
        want_values: bool = False,
    ) -> dict[str, torch.Tensor | None]:
        """One pass of ``model`` over a micro-batch, read at its loss positions only.

        Returns float32 ``[B, T-1]`` tensors (0 off the loss mask): ``logprobs`` of the sampled
        targets under the sampling distribution (logits / ``rollout.temperature``), ``entropy``
        of that distribution (if asked) and ``values`` of the value head on ``model``'s trunk
        (PPO with ``algorithm.critic=head``, if asked).
        No ``[B, T, V]`` logits tensor is made (:func:`baselines.llm.scoring.score_targets`).
        """
        with self._amp():
            out = score_targets(
                model,
                part.input_ids,
                part.attention_mask,
                part.loss_mask,
                temperature=self.logit_temperature,
                want_entropy=want_entropy,
                want_hidden=want_values,
            )
            out["values"] = self.value_head(out.pop("hidden")) if want_values else None
        return out

    def _critic_values(self, part: RolloutBatch) -> torch.Tensor:
        """The critic model's values of a micro-batch, float32 ``[B, T-1]`` (``critic=model``)."""
        with self._amp():
            return self.critic(part.input_ids, part.attention_mask)

    def _score_before_update(self, batch: RolloutBatch, need_old: bool, need_ref: bool) -> None:
        """The pre-update pass: old log-probs (when the policy moves within the batch), reference
        log-probs (KL) and values (PPO: the value head's, or the critic model's as verl's
        ``compute_values``), written into ``batch`` as float32 ``[R, T-1]``.

        Each rank scores its block of rows (:meth:`Ranks.block`) into zero-filled tensors that
        are then SUM-reduced: the blocks are disjoint, so every rank ends with every row's values
        exactly as its owner computed them (PPO's whitened GAE needs all of them)."""
        head = self.value_head is not None
        is_ppo = head or self.critic is not None
        old = torch.zeros_like(batch.loss_mask) if need_old else None
        ref = torch.zeros_like(batch.loss_mask) if need_ref else None
        values = torch.zeros_like(batch.loss_mask) if is_ppo else None
        self.model.eval()
        if self.critic is not None:
            self.critic.eval()
        with torch.no_grad():
            for rows in self._micro_batches(batch, list(self.ranks.block(batch.num_rows))):
                part = batch.select(rows).to(self.device)
                w = part.loss_mask.shape[1]
                index = torch.as_tensor(rows)
                if need_old or head:
                    scored = self._score(self.model, part, want_values=head)
                    if need_old:
                        old[index, :w] = scored["logprobs"].cpu()
                    if head:
                        values[index, :w] = scored["values"].float().cpu()
                if self.critic is not None:
                    values[index, :w] = self._critic_values(part).cpu()
                if need_ref:
                    with self._reference_context():
                        scored = self._score(self.reference or self.model, part)
                    ref[index, :w] = scored["logprobs"].cpu()
        for tensor in (old, ref, values):
            if tensor is not None:
                self.ranks.sum_(tensor)
        batch.old_logprobs, batch.ref_logprobs, batch.values = old, ref, values

    def _advantages(self, batch: RolloutBatch, group_rewards: torch.Tensor) -> None:
        """Advantages (and PPO's returns) of every sampled token, in one place.

        GRPO / Dr.GRPO (StarPO's trajectory-level credit): each episode's group-relative
        advantage on every token it sampled (:func:`grpo_token_advantages`). PPO: each turn's
        reward on its last sampled token, GAE over the episode's sampled tokens with the value
        head's values from the pre-update pass, whitened (:func:`gae_token_advantages`).
        """
        ac = self.config.algorithm
        if ac.name == "ppo":
            batch.advantages, batch.returns = gae_token_advantages(
                batch, batch.values, ac.gamma, ac.lam, turn_rewards=ac.turn_rewards
            )
        else:
            batch.advantages = grpo_token_advantages(
                batch, group_rewards, normalize_std=ac.name == "grpo"
            )

    def _loss(
        self, part: RolloutBatch, scored: dict[str, torch.Tensor | None], old: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of one micro-batch, token-mean over its sampled tokens (RAGEN-2 / verl):

            loss = pg_loss - entropy_coef * entropy [+ kl_coef * KL(pi || pi_ref)]
                   [+ value_coef * vf_loss  (PPO with a value head on the policy's trunk)]

        ``pg_loss``: :func:`policy_loss` (clipped surrogate, DAPO's clip-higher); entropy: the
        sampling distribution's at the sampled positions; KL: :func:`kl_penalty` (k3 bounded as
        verl bounds it); ``vf_loss``: :func:`value_loss`. With ``algorithm.critic=model`` the
        value loss is the critic's own (:meth:`_critic_loss`), not a term here.
        Returns the loss and detached stats.
        """
        ac = self.config.algorithm
        mask = part.loss_mask
        pg, stats = policy_loss(
            scored["logprobs"], old, part.advantages, mask, ac.clip_low, ac.clip_high
        )
        entropy = masked_mean(scored["entropy"], mask)
        loss = pg - ac.entropy_coef * entropy
        stats["actor/entropy"] = entropy.detach()
        if ac.kl_coef > 0:
            kl = masked_mean(
                kl_penalty(scored["logprobs"], part.ref_logprobs, ac.kl_estimator), mask
            )
            loss = loss + ac.kl_coef * kl
            stats["actor/kl_ref"] = kl.detach()
        if scored["values"] is not None:
            vf, vstats = value_loss(
                scored["values"], part.values, part.returns, mask, ac.value_clip
            )
            loss = loss + ac.value_coef * vf
            stats.update(vstats)
        return loss, stats

    def _critic_loss(self, part: RolloutBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The critic model's loss of one micro-batch: :func:`value_loss` alone, no coefficient
        (verl's ``update_critic``, ``ragen/workers/critic/dp_critic.py:244-257``)."""
        ac = self.config.algorithm
        values = self._critic_values(part)
        return value_loss(values, part.values, part.returns, part.loss_mask, ac.value_clip)

    def _update(self, batch: RolloutBatch, group_rewards: torch.Tensor, metrics, timings) -> None:
        """One update on the kept episodes (CleanRL's ``ppo.py`` layout), top to bottom:

        1. the pre-update scoring pass (old and reference log-probs, values) when needed;
        2. advantages (:meth:`_advantages`);
        3. ``ppo_epochs`` passes, each split into mini-batches of ``ppo_mini_batch_size``
           sequences, one AdamW step each; a mini-batch is run as token-bounded micro-batches
           whose losses are weighted by their share of the mini-batch's sampled tokens, so the
           accumulated gradient is that of the token-mean over the whole mini-batch;
        4. the logged figures, each a token-weighted mean over the pass (:class:`_Meter`).

        Data parallel (several ranks): every rank holds the whole batch; each mini-batch's rows
        are split over ranks in contiguous blocks (:meth:`Ranks.block`), each rank weights its
        micro-batch losses by ``tokens / (the mini-batch's sampled tokens over all ranks)``, and
        the accumulated gradients are SUM-reduced (:meth:`Ranks.sum_gradients`) before
        ``clip_grad_norm_`` and the AdamW step: the sum is the one-process gradient, so every
        rank takes the same step. Not DDP: :func:`baselines.llm.scoring.score_targets` runs the
        model's body and reads the LM head at the loss positions itself, bypassing a DDP
        wrapper's ``forward`` (whose hooks arm the reducer), and accumulation over micro-batches
        would need ``no_sync`` anyway; one explicit all-reduce per optimizer step is what DDP
        with ``no_sync`` does. The logged sums are gathered and added (:meth:`Ranks.sum_floats`).

        With ``algorithm.critic=model`` each micro-batch also runs the critic model's
        forward/backward on its own loss (:meth:`_critic_loss`, the same token weights), and each
        mini-batch ends with the critic's own SUM-reduction, clipping and AdamW step (RAGEN
        updates actor and critic on the same batch with the same ``ppo_mini_batch_size``,
        ``config/base.yaml:31,77``); ``actor/grad_norm`` is then the policy's alone.

        Args:
            batch: rows of the kept episodes.
            group_rewards: float ``[P_kept, N]`` episode rewards of the kept groups (GRPO).
        """
        ac = self.config.algorithm
        total_tokens = batch.num_tokens
        metrics["actor/tokens_trained"] = float(total_tokens)
        if total_tokens == 0:
            metrics["actor/skipped"] = 1.0
            return
        is_ppo = ac.name == "ppo"
        several_steps = len(minibatch_indices(batch.num_rows, ac.ppo_mini_batch_size)) > 1
        # Old log-probs from the pre-update pass whenever the policy moves within the batch;
        # else the update's own first forward is the old policy (ratio exactly 1).
        need_old = ac.ppo_epochs > 1 or several_steps
        need_ref = ac.kl_coef > 0
        t0 = time.perf_counter()
        if need_old or need_ref or is_ppo:
            self._score_before_update(batch, need_old, need_ref)
        timings["timing/ref_old_logprob_s"] = time.perf_counter() - t0
        self._advantages(batch, group_rewards)

        t0 = time.perf_counter()
        self.model.train()
        meter = _Meter()
        diffs: list[torch.Tensor] = []
        if need_old and self.engine.provides_logprobs:  # engine vs the pre-update pass
            gap = (batch.old_logprobs - batch.sampling_logprobs).abs()
            diffs.append(gap[batch.loss_mask.bool()])
        grad_norms: list[float] = []
        critic_grad_norms: list[float] = []  # algorithm.critic=model: its own clipping
        self.minibatch_stats = []  # one dict per optimizer step (ratio, clip fractions)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        critic = self.critic
        if critic is not None:
            critic.train()
            critic_params = [p for g in self.critic_optimizer.param_groups for p in g["params"]]
        for epoch in range(ac.ppo_epochs):
            for mini in minibatch_indices(batch.num_rows, ac.ppo_mini_batch_size):
                mini_tokens = float(batch.loss_mask[torch.as_tensor(mini)].sum())
                if mini_tokens == 0:
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                if critic is not None:
                    self.critic_optimizer.zero_grad(set_to_none=True)
                step_meter = _Meter()
                mine = [mini[i] for i in self.ranks.block(len(mini))]
                for rows in self._micro_batches(batch, mine) if mine else []:
                    part = batch.select(rows).to(self.device)
                    tokens = float(part.loss_mask.sum())
                    # A row over the token budget goes alone, checkpointed (scoring.py).
                    long = int(part.attention_mask.sum(1).max()) > ac.micro_batch_tokens
                    with checkpointed_if(self.model, long):
                        scored = self._score(
                            self.model,
                            part,
                            want_entropy=True,
                            want_values=self.value_head is not None,
                        )
                        if epoch == 0 and not need_old and self.engine.provides_logprobs:
                            gap = (scored["logprobs"].detach() - part.sampling_logprobs).abs()
                            diffs.append(gap[part.loss_mask.bool()].cpu())
                        old = part.old_logprobs if need_old else scored["logprobs"].detach()
                        loss, stats = self._loss(part, scored, old)
                        (loss * (tokens / mini_tokens)).backward()
                    if critic is not None:  # its own loss, only its own weights
                        with checkpointed_if(critic.model, long):
                            vf, vstats = self._critic_loss(part)
                            (vf * (tokens / mini_tokens)).backward()
                        stats.update(vstats)
                    meter.add(stats, tokens / total_tokens)
                    step_meter.add(stats, tokens / mini_tokens)
                self.ranks.sum_gradients(params)  # the one-process gradient on every rank
                grad_norm = torch.nn.utils.clip_grad_norm_(params, ac.grad_clip)
                self.optimizer.step()
                if critic is not None:
                    self.ranks.sum_gradients(critic_params)
                    norm = torch.nn.utils.clip_grad_norm_(critic_params, ac.grad_clip)
                    critic_grad_norms.append(float(norm))
                    self.critic_optimizer.step()
                grad_norms.append(float(grad_norm))
                self.minibatch_stats.append(self.ranks.sum_floats(step_meter.sums))
        if critic is not None:  # as large as its weights: freed until the next update
            self.critic_optimizer.zero_grad(set_to_none=True)
        if self.ranks.distributed:
            meter.sums = self.ranks.sum_floats(meter.sums)
            meter.weight = self.ranks.sum_floats({"w": meter.weight})["w"]
            if not need_old:  # each rank compared its own rows
                diffs = [torch.cat(diffs)] if diffs else []
                diffs = [d for d in self.ranks.gather(diffs) if d.numel()]
        metrics.update(meter.means())
        metrics["actor/grad_norm"] = float(np.mean(grad_norms)) if grad_norms else math.nan
        metrics["actor/optimizer_steps"] = float(len(grad_norms))
        if critic_grad_norms:  # before clipping, as actor/grad_norm (verl's critic/grad_norm)
            metrics["critic/grad_norm"] = float(np.mean(critic_grad_norms))
        metrics["actor/lr"] = ac.lr
        if diffs:
            flat = torch.cat(diffs)
            metrics["rollout/logprob_diff_max"] = float(flat.max())
            metrics["rollout/logprob_diff_mean"] = float(flat.mean())
        timings["timing/backward_s"] = time.perf_counter() - t0

    def step(self, step: int) -> dict[str, float]:
        """Run training step ``step`` and return its metrics."""
        cfg = self.config
        t_start = time.perf_counter()
        episodes, timings = self._rollout(step)
        release_memory()  # the decoding batches' KV caches are gone: give their pages back
        if self.ranks.is_main:
            self._on_rollout(step, episodes)  # hook: sample episodes as text
        metrics: dict[str, float] = {"step": float(step)}
        metrics.update(self.rollout_metrics(episodes, "rollout/"))
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

        if cfg.diagnostics.every and step % cfg.diagnostics.every == 0:
            t0 = time.perf_counter()
            self._phase("scoring (MI diagnostics)")  # hook: live progress
            self.model.eval()
            diag = {}
            if self.ranks.is_main:  # rank 0 scores, every rank gets its figures
                with self._amp():
                    diag = self._diagnostics(episodes, step)
            diag = self.ranks.broadcast(diag)
            timings["timing/diagnostics_s"] = time.perf_counter() - t0
        else:
            diag = {}

        extra: dict[str, torch.Tensor] = {}
        if cfg.filter.needs == "lengths":  # policy tokens of each episode
            extra["lengths"] = torch.tensor(
                [sum(len(t.sample.sampled_ids) for t in e.turns) for e in episodes],
                dtype=torch.float64,
            ).view(P, N)
        elif cfg.filter.needs == "entropies":  # rank 0 scores: every rank filters alike
            entropies = self._episode_entropies(full, (P, N)) if self.ranks.is_main else None
            extra["entropies"] = self.ranks.broadcast(entropies)
        result = snr_filter(rewards, cfg.filter, **extra)
        metrics.update(result.stats)
        # RAGEN's rollout/in_group_reward_std (rollout_filter.py:428,439): the mean over groups
        # of each group's unbiased reward std; read by train.reward_variance_stop.
        metrics["rollout/in_group_reward_std"] = float(rewards.std(dim=1).mean()) if N > 1 else 0.0
        kept_groups = result.kept.tolist()
        kept = [g * N + n for g in kept_groups for n in range(N)]
        metrics["filter/tokens_before"] = float(full.num_tokens)
        self._phase("update (forward/backward)")  # hook: live progress
        spread = rewards.amax(1) - rewards.amin(1)
        regularised = cfg.algorithm.entropy_coef != 0 or cfg.algorithm.kl_coef > 0
        if (
            cfg.algorithm.name != "ppo"
            and kept
            and not regularised
            and bool((spread[kept_groups] == 0).all())
        ):
            # Every kept group has equal rewards, so every GRPO advantage is 0 and, with no
            # entropy or KL term, the loss and its gradient are exactly 0: no update (RAGEN steps
            # anyway, moving the weights on Adam's momentum alone; docs/ragen2.md). With an entropy
            # or KL term the step is taken, as RAGEN takes it: that is how the regularisers come
            # to dominate a weak task signal (RAGEN-2's template collapse).
            kept = []
        if kept:
            batch = build_batch([episodes[i] for i in kept], pad)
            if removed:  # PPO reads the turns' rewards from the rows
                gone = set(removed)
                rows = [kept[e] // N in gone for e in batch.row_episode.tolist()]
                batch.token_rewards[torch.tensor(rows, dtype=torch.bool)] = 0.0
            metrics["filter/tokens_after"] = float(batch.num_tokens)
            self._update(batch, rewards[kept_groups], metrics, timings)
            # Gradients (as large as the weights) and the update's activations are not needed
            # until the next update: free them before the next rollout's KV caches.
            self.optimizer.zero_grad(set_to_none=True)
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
        if diag:
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
        return self.rollout_metrics(episodes, "val/")

    def _dump_rollouts(self, episodes: list[EpisodeRecord], step: int) -> None:
        """``train.dump_rollouts``: ``rollouts/step_NNNNNN.jsonl`` (format:
        :func:`baselines.episodes.write_rollouts`), and the tokenizer once, for the viewer."""
        folder = self.out_dir / "rollouts"
        if not (folder / "tokenizer").is_dir():
            self.tokenizer.save_pretrained(folder / "tokenizer")
        write_rollouts(folder / f"step_{step:06d}.jsonl", episodes, step)

    # ------------------------------------------------------------------ checkpoints

    def save(self, step: int, *, final: bool = False) -> None:
        """Write ``checkpoint/`` crash-safely (:func:`baselines.checkpoint.save_checkpoint`).

        ``final`` (the run's last step) leaves out the optimizer state when
        ``train.final_optimizer_state`` is false (a resume then restarts AdamW's moments).
        """
        tc = self.config.train

        def write(staging: Path) -> dict[str, Any]:
            if self.lora:
                self.model.save_pretrained(staging / "adapter")
                # The base weights under their own names: get_base_model() holds peft's injected
                # layers (q_proj.base_layer.weight, q_proj.lora_A...), which a plain model loading
                # this folder (a LoRA resume) would not find, initialising them anew.
                base = self.model.get_base_model()
                plain = {
                    k.replace(".base_layer.", "."): v
                    for k, v in base.state_dict().items()
                    if ".lora_" not in k
                }
                base.save_pretrained(staging, state_dict=plain, safe_serialization=True)
            else:
                self.model.save_pretrained(staging, safe_serialization=True)
            self.tokenizer.save_pretrained(staging)
            with_optimizer = not final or tc.final_optimizer_state
            if with_optimizer:
                torch.save(self.optimizer.state_dict(), staging / "optimizer.pt")
            if self.value_head is not None:
                torch.save(self.value_head.state_dict(), staging / "value_head.pt")
            if self.critic is not None:  # algorithm.critic=model: weights and AdamW state
                save_trainable(self.critic, staging / "critic.safetensors")
                if with_optimizer:
                    torch.save(self.critic_optimizer.state_dict(), staging / "critic_optimizer.pt")
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

    def _load_state(self) -> None:
        state = json.loads((self.checkpoint_dir / "state.json").read_text())
        if (self.checkpoint_dir / "optimizer.pt").is_file():
            self.optimizer.load_state_dict(
                torch.load(self.checkpoint_dir / "optimizer.pt", map_location=self.device)
            )
        else:
            print(
                f"note: {self.checkpoint_dir} holds no optimizer state (saved with "
                "train.final_optimizer_state=false): AdamW restarts from zero moments",
                file=sys.stderr,
            )
        if self.value_head is not None:
            self.value_head.load_state_dict(
                torch.load(self.checkpoint_dir / "value_head.pt", map_location=self.device)
            )
        if self.critic is not None:
            load_trainable(self.critic, self.checkpoint_dir / "critic.safetensors")
            if (self.checkpoint_dir / "critic_optimizer.pt").is_file():
                self.critic_optimizer.load_state_dict(
                    torch.load(
                        self.checkpoint_dir / "critic_optimizer.pt", map_location=self.device
                    )
                )
        self.tracker.load_state_dict(state["tracker"])
        self.steps_without_update = int(state.get("steps_without_update", 0))
        self.steps_without_signal = int(state.get("steps_without_signal", 0))
        self.variance_stop_state = state.get("reward_variance_stop")
        self.start_step = int(state["step"]) + 1
        # Drop lines of steps after the checkpoint (they run again), atomically (rank 0).
        if self.ranks.is_main:
            truncate_metrics_after(self.metrics_path, self.start_step)
        self.ranks.barrier()

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
