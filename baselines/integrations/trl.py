"""Train on any agentgym environment with Hugging Face TRL's ``GRPOTrainer`` (TRL 1.x).

Two pieces, both on the agentgym trainer's own data path (DESIGN.md, "The baselines"):

* :class:`AgentgymRollout`, a TRL ``rollout_func``. It plays each batch through
  :func:`baselines.episodes.collect_rollouts`, the episode loop of the agentgym trainer and of
  ``agentgym eval`` (one lock-step loop, one prompt renderer,
  :class:`~baselines.llm.prompts.TokenContext`, and a
  :class:`~baselines.llm.engines.RolloutEngine`): the same prompts, the same end-of-turn ids
  (:func:`baselines.llm.engines.end_token_ids`, so an eos that is not the turn end never runs a
  reply into a fake user turn) and the same stop strings. **Token in, token out**: TRL gets, per
  episode, exactly the episode's training row(s): ``completion_ids`` holds the sampled ids
  (``env_mask`` 1) and the ids the episode loop appended for the environment (``env_mask`` 0),
  nothing re-tokenised, and ``logprobs`` holds the engine's sampling log-probs (at TRL's
  ``temperature``; 0.0 on environment ids, which are masked out).
* :class:`AgentgymGRPOTrainer`, a ``GRPOTrainer`` subclass that adds RAGEN-2's tools with the
  agentgym trainer's code and metric names (:data:`baselines.tracking.METRIC_NAMES`): the
  SNR-Aware Filter (:func:`baselines.rl.filtering.snr_filter` with a
  :class:`~baselines.rl.filtering.FilterConfig`: ``filter/*``), the MI diagnostics
  (:func:`baselines.collapse.episode_mi_diagnostics`) and the collapse tracker
  (:class:`~baselines.collapse.ZScoreTracker`: ``collapse/*``), plus ``rollout/*`` and
  ``timing/*``. They go into TRL's own metrics (``self._metrics``), so ``report_to`` logs them.
  It also trains templates that rewrite earlier turns exactly (below).

**Templates that rewrite history** (e.g. ones that drop earlier ``<think>`` blocks): the episode
loop closes the row and starts a new one from the fresh rendering, so such an episode has several
rows, each exact. TRL takes one sequence per episode, so the rows are laid end to end (the first
row's prompt is ``prompt_ids``; the rest of it and the later rows, prompts included, make
``completion_ids``), and :class:`AgentgymGRPOTrainer` scores every row as a sequence of its own
(:meth:`AgentgymGRPOTrainer._get_per_token_logps_and_entropies`): each sampled id is scored in
exactly the context it was sampled in, as the agentgym trainer scores it. A plain
``GRPOTrainer`` would let a later row attend to the earlier ones, so :class:`AgentgymRollout`
refuses such episodes there (``ValueError`` naming :class:`AgentgymGRPOTrainer`). Under a
prefix-preserving template (ChatML, SmolLM2) every episode is one row and either trainer works.

**Groups.** TRL repeats each prompt ``num_generations`` times in a row; the rollout plays them as
one group (the same reset seed) exactly as the trainer's ``collect_rollouts`` call does (a process
whose prompts split a group plays each episode as a group of one, with the same seeds).

**The filter inside TRL.** After TRL computed its rewards and advantages,
:meth:`AgentgymGRPOTrainer._generate_and_score_completions` scores each group (TRL's summed,
weighted rewards over all processes, ``[G, N]``) with ``snr_filter`` and zeroes, for every episode
of a dropped group, its advantage and its loss mask (``tool_mask``), then recomputes
``num_items_in_batch`` from the kept tokens. With TRL's token-normalised losses (``dapo``, the
TRL 1.x default, ``cispo``, ``vespo``; ``bnpo`` per micro-batch) the loss is then exactly the loss
over the kept groups alone (``tests/test_trl.py`` checks it by hand). With the
sequence-normalised ones (``grpo``, ``dr_grpo``, ``sapo``, ``luspo``: a mean over all rows) the
kept rows' advantages are multiplied by ``rows / kept rows``, which gives the same loss since
those losses are linear in the advantage; there a KL term (``beta > 0``) would not be rescaled, so
that combination is refused. TRL's advantages of a kept group do not depend on the other groups
unless ``scale_rewards="batch"`` (then the std is of the whole batch, dropped groups included).
The dropped rows still go through TRL's forward and backward passes (with a zero mask): the
filter changes the gradient, not the cost of the update, unlike the agentgym trainer, which
leaves them out of the batch.

**vLLM.** With ``GRPOConfig(use_vllm=True)`` (colocate or server mode) the rollout generates
through TRL's own vLLM (:class:`TRLVLLMEngine`: TRL syncs the weights before each rollout), turn by
turn through the same episode loop, and each reply is cut at the engine's end ids and stop
strings as :class:`~baselines.llm.engines.VLLMEngine` cuts it. vLLM is not installed where this was
written: that path is untested here. In server mode every process must call the server the same
number of times (a collective): give every rank the same number of turns (fixed ``max_turns``,
episodes that run to it) or use colocate mode.

**TRL's private API.** ``rollout_func`` is experimental in TRL, and :class:`AgentgymGRPOTrainer`
overrides or calls methods TRL (and transformers' ``Trainer`` under it) keep private:
:data:`TRL_PRIVATE_METHODS` lists each with the leading parameters it relies on, and
:data:`TRL_PRIVATE_ATTRIBUTES` the attributes it reads, as of TRL :data:`TRL_TESTED_VERSION`.
``pyproject.toml`` pins TRL to that minor release, and
``tests/test_trl.py::test_trls_private_api_is_the_one_the_adapter_was_checked_against`` fails,
naming what moved, when an installed TRL differs.

**Finished replies.** TRL counts a completion as truncated when its last id is not an EOS (its
``completions/clipped_ratio``; with ``mask_truncated_completions`` such a completion carries no
loss). A reply the episode loop ended at a stop string (``</answer>``) is finished, so the rollout
closes it with the tokenizer's EOS as a template id (mask 0, never trained;
:func:`episode_sequence`); a reply cut at ``max_new_tokens`` stays truncated.

Example (the README's "With Hugging Face TRL" holds the full CPU version, which a test runs)::

    from trl import GRPOConfig
    from baselines.integrations.trl import AgentgymGRPOTrainer, AgentgymRollout, episode_return
    from baselines.llm.policy import load_policy

    model, tokenizer = load_policy("embedded", device="cpu", dtype="float32")
    rollout = AgentgymRollout("Bandit-v0", tokenizer, max_new_tokens=48)
    trainer = AgentgymGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=episode_return,
        train_dataset=rollout.dataset(num_prompts=8), rollout_func=rollout,
        args=GRPOConfig(output_dir="runs/trl", num_generations=4, max_steps=2, use_cpu=True,
                        bf16=False, per_device_train_batch_size=8),
    )
    trainer.train()

Needs ``pip install 'agentgym[trl]'`` (TRL, datasets) and torch. It lives in ``baselines`` (the
LLM layer), not in ``agentgym``, which imports no torch (the import-linter contracts).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from accelerate.utils import gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from agentgym.chat import ChatEpisode
from agentgym.registration import resolve_env_id
from baselines.collapse import ZScoreTracker, episode_mi_diagnostics
from baselines.config import DiagnosticsConfig, sampling_settings
from baselines.episodes import (
    TRAIN_STREAM,
    EpisodeRecord,
    collect_rollouts,
    episode_generators,
    rollout_metrics,
)
from baselines.llm.engines import (
    Generation,
    HFEngine,
    RolloutEngine,
    SamplingSettings,
    end_token_ids,
    logit_temperature,
)
from baselines.llm.engines.base import _cut
from baselines.rl.filtering import FilterConfig, snr_filter

__all__ = [
    "AgentgymRollout",
    "AgentgymGRPOTrainer",
    "DiagnosticsConfig",
    "FilterConfig",
    "RolloutBatch",
    "SEED_KEY",
    "TRLVLLMEngine",
    "episode_return",
    "episode_sequence",
]


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            f"baselines.integrations.trl needs {err.name!r}: pip install 'agentgym[trl]' "
            "(and torch: pip install torch==2.13.0 on CPU)"
        ) from err


GRPOTrainer = _require("trl").GRPOTrainer


def episode_return(completions: list[Any], episode_return: list[float], **kwargs: Any) -> list:
    """TRL reward function: the return of each episode (the sum of its rewards).

    Args:
        completions: the trainer's decoded completions (one per episode; unused).
        episode_return: filled in by :class:`AgentgymRollout` (one float per episode).

    Returns:
        One float per episode.
    """
    return [float(r) for r in episode_return]


@dataclass
class EpisodeSequence:
    """One episode as TRL's one sequence (see the module docstring).

    Attributes:
        prompt_ids: the first row's ids before its first sampled id.
        completion_ids: the rest of the first row, then every later row whole.
        env_mask: 1 on sampled ids, 0 on the environment's and the template's (same length).
        logprobs: the engine's sampling log-prob on sampled ids, 0.0 elsewhere (same length).
        row_index: which training row each entry of ``completion_ids`` belongs to (0, 1, ...).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    row_index: list[int]


def episode_sequence(episode: EpisodeRecord, close_id: int | None = None) -> EpisodeSequence:
    """Lay an episode's training rows end to end as one TRL sequence.

    ``close_id``: an end-of-turn id appended after the last reply (``env_mask`` 0, log-prob 0.0:
    the template's id that closes the turn, never trained on). :class:`AgentgymRollout` passes it
    when the last reply ended at a stop string (``</answer>``): TRL counts a completion whose last
    id is not an EOS as truncated, and with ``mask_truncated_completions`` drops its loss, but the
    reply ended as the episode loop ends finished replies (issue 42). A reply cut at
    ``max_new_tokens`` gets none and stays truncated for TRL.

    Raises:
        ValueError: the episode has no row (it sampled nothing: a first prompt that did not fit
            ``max_context_tokens``).
    """
    if not episode.rows:
        raise ValueError(
            f"episode with seed {episode.seed} sampled no token (its first prompt does not fit "
            "max_context_tokens - max_new_tokens); raise max_context_tokens"
        )
    first = episode.rows[0]
    start = first.loss_mask.index(1)
    out = EpisodeSequence(
        list(first.input_ids[:start]),
        list(first.input_ids[start:]),
        list(first.loss_mask[start:]),
        list(first.logprobs[start:]),
        [0] * (len(first.input_ids) - start),
    )
    for r, row in enumerate(episode.rows[1:], start=1):
        out.completion_ids += row.input_ids
        out.env_mask += row.loss_mask
        out.logprobs += row.logprobs
        out.row_index += [r] * len(row.input_ids)
    if close_id is not None:
        out.completion_ids.append(int(close_id))
        out.env_mask.append(0)
        out.logprobs.append(0.0)
        out.row_index.append(len(episode.rows) - 1)
    return out


@dataclass
class RolloutBatch:
    """What :class:`AgentgymRollout` played for one TRL generation batch (this process's part).

    Attributes:
        episodes: the episode records, in TRL's prompt order.
        sequences: :func:`episode_sequence` of each.
        timings: ``timing/generation_s``, ``timing/env_s``, ``timing/prompt_s`` (seconds).
    """

    episodes: list[EpisodeRecord]
    sequences: list[EpisodeSequence]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def multi_row(self) -> bool:
        """Some episode has more than one training row (a template rewrote history)."""
        return any(len(e.rows) > 1 for e in self.episodes)


class TRLVLLMEngine:
    """A :class:`~baselines.llm.engines.RolloutEngine` on TRL's own vLLM (``use_vllm=True``).

    Each turn's prompts go to ``trainer.vllm_generation.generate`` as token ids (one generation
    each, TRL's sampling settings and weights, ``max_completion_length`` set to the turn's
    ``max_new_tokens`` for the call); every reply is cut at the first end id or stop string as
    :class:`~baselines.llm.engines.VLLMEngine` cuts it. Untested here (no vLLM in this venv).

    Args:
        trainer: a ``GRPOTrainer`` built with ``use_vllm=True``.
        tokenizer: the policy's tokenizer.
    """

    name = "trl-vllm"
    provides_logprobs = True
    samples_from_copy = False  # TRL syncs its vLLM itself before calling rollout_func

    def __init__(self, trainer: Any, tokenizer: Any):
        self.trainer, self.tokenizer = trainer, tokenizer
        model = trainer.accelerator.unwrap_model(trainer.model)
        self.ends = end_token_ids(model, tokenizer)

    def generate(self, prompt_ids: list[list[int]], sampling: SamplingSettings) -> list[Generation]:
        generation = self.trainer.vllm_generation
        budget = generation.max_completion_length
        generation.max_completion_length = sampling.max_new_tokens
        try:
            _, completions, logprobs, _ = generation.generate(
                prompts=[list(p) for p in prompt_ids], images=None, num_generations=1
            )
        finally:
            generation.max_completion_length = budget
        out = []
        for ids, lps in zip(completions, logprobs, strict=True):
            ids = [int(t) for t in ids]
            lps = [float("nan") if lp[0] is None else float(lp[0]) for lp in lps]
            n, why = _cut(self.tokenizer, ids, self.ends, tuple(sampling.stop_strings))
            ended = why == "end"
            ids, lps = ids[:n], lps[:n]
            text = self.tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=False)
            out.append(Generation(ids, text, lps, ended))
        return out

    def sync_weights(self, model: Any) -> float:
        return 0.0  # TRL syncs its vLLM before calling rollout_func

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def generation_context(trainer: Any) -> Iterator[Any]:
    """The trainer's policy, ready for forward passes outside the update: TRL's
    ``unwrap_model_for_generation`` (ZeRO-3 shards gathered, gradient checkpointing off), FSDP1
    parameters summoned, ``torch.no_grad``, the accelerator's autocast and eval mode (restored
    after). Yields the model."""
    models = _require("trl.models")
    args = trainer.args
    dist = getattr(trainer, "_dist", None)
    full = dist.summon_full_params(trainer.model_wrapped, recurse=False) if dist else nullcontext()
    with (
        models.unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
        ) as model,
        torch.no_grad(),
        full,
        trainer.accelerator.autocast(),
    ):
        training = model.training
        model.eval()  # as the agentgym trainer rolls out and scores (no dropout)
        try:
            yield model
        finally:
            model.train(training)


class AgentgymRollout:
    """A TRL ``rollout_func`` that plays agentgym episodes on the shared episode loop.

    Args:
        env_id: a registered id; the short form (``Sokoban-v0``) is accepted.
        tokenizer: the policy's tokenizer (with a chat template that renders a generation prompt).
        env_kwargs: constructor arguments (e.g. ``{"max_turns": 3, "invalid_action": "penalize"}``).
        max_new_tokens: most tokens the policy samples per turn (the end token counts).
        seed: the reset seed of the dataset's first prompt (prompt i resets with ``seed + i``).
        think_prefix: end each generation prompt with ``<think>`` in the ``think_answer`` format
            (``rollout.think_prefix`` of the agentgym trainer).
        max_context_tokens: an episode whose next prompt would not leave ``max_new_tokens`` within
            this is truncated (``rollout.max_context_tokens``).
        stop_strings: a reply stops once its text ends with one of these.
        generation_batch_tokens: bound of one decoding batch of the transformers engine
            (``rollout.generation_batch_tokens``; 0: every prompt in one batch).
        engine: a :class:`~baselines.llm.engines.RolloutEngine` to generate with instead of the
            trainer's model (``None``: :class:`~baselines.llm.engines.HFEngine` on the trainer's
            model, or :class:`TRLVLLMEngine` under ``use_vllm``).
        sampling_seed: the seed of the episodes' own sampling generators, as the agentgym
            trainer's ``train.seed`` (``None``: the TRL trainer's ``args.seed``). Each episode
            samples from :func:`baselines.episodes.episode_generators` of (this seed, the
            training stream, TRL's ``global_step``, its group's index in the step's batch over
            all processes, its index in the group), so the trainer and TRL sample the same
            episodes from the same policy and seeds. With ``engine`` or ``use_vllm`` the engine
            samples as it does (TRL's vLLM seeds its own requests).

    Sampling follows the TRL trainer's ``temperature`` and ``top_p`` (read at every call);
    ``top_k``, ``min_p`` and ``repetition_penalty`` must keep TRL's defaults (the episode loop's
    engines do not apply them; ``ValueError`` otherwise).

    Raises:
        ValueError: an unknown ``env_id``.
    """

    def __init__(
        self,
        env_id: str,
        tokenizer: Any,
        *,
        env_kwargs: dict[str, Any] | None = None,
        max_new_tokens: int = 64,
        seed: int = 0,
        think_prefix: bool = True,
        max_context_tokens: int = 4096,
        stop_strings: tuple[str, ...] = ("</answer>",),
        generation_batch_tokens: int = 16384,
        engine: RolloutEngine | None = None,
        sampling_seed: int | None = None,
    ):
        self.env_id = resolve_env_id(env_id)  # the short id too; a ValueError names an unknown one
        self.tokenizer = tokenizer
        self.env_kwargs = dict(env_kwargs or {})
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.think_prefix = think_prefix
        self.max_context_tokens = max_context_tokens
        self.stop_strings = tuple(stop_strings)
        self.generation_batch_tokens = generation_batch_tokens
        self.engine = engine
        self.sampling_seed = sampling_seed
        self.last: RolloutBatch | None = None
        self.__name__ = "agentgym_rollout"  # TRL logs functions by name

    # ------------------------------------------------------------------ the dataset

    def dataset(self, num_prompts: int) -> Any:
        """A ``datasets.Dataset`` of ``num_prompts`` conversational prompts (column ``prompt``):
        the first chat of the episodes with seeds ``seed .. seed + num_prompts - 1``.

        The first message of each prompt carries its reset seed (key :data:`SEED_KEY`, which
        chat templates do not read), so episodes whose first chats are equal (e.g. every Bandit
        seed) still reset with their own seeds, as the agentgym trainer's groups do.
        """
        datasets = _require("datasets")
        prompts = []
        env = gym.make(self.env_id, **self.env_kwargs)
        try:
            for i in range(num_prompts):
                observation, info = env.reset(seed=self.seed + i)
                messages = ChatEpisode.from_reset(observation, info).messages()
                messages[0] = {**messages[0], SEED_KEY: self.seed + i}
                prompts.append(messages)
        finally:
            env.close()
        return datasets.Dataset.from_dict({"prompt": prompts})

    # ------------------------------------------------------------------ the rollout

    def sampling(self, trainer: Any) -> SamplingSettings:
        """The episode loop's settings for ``trainer``'s sampling (TRL's temperature and top-p).

        Raises:
            ValueError: TRL's ``top_k``, ``min_p`` or ``repetition_penalty`` is set.
        """
        args = trainer.args
        if (args.top_k or 0) > 0 or args.min_p is not None or args.repetition_penalty != 1.0:
            raise ValueError(
                "AgentgymRollout samples with temperature and top_p only; leave GRPOConfig's "
                f"top_k (0), min_p (None) and repetition_penalty (1.0) at their defaults (got "
                f"{args.top_k}, {args.min_p}, {args.repetition_penalty})"
            )
        # max_new_tokens, think_prefix and max_context_tokens are this rollout's own
        return sampling_settings(
            self, temperature=trainer.temperature, top_p=args.top_p, stop_strings=self.stop_strings
        )

    def _groups(self, prompts: list[Any], trainer: Any) -> tuple[list[int], int]:
        """The reset seed of each group and the group size: TRL's ``num_generations`` copies of a
        prompt in a row (``num_generations_eval`` in evaluation)."""
        training = trainer.model.training
        size = trainer.num_generations if training else trainer.num_generations_eval
        size = size or 1
        seeds = []
        for prompt in prompts:
            seed = prompt[0].get(SEED_KEY) if prompt and isinstance(prompt[0], dict) else None
            if seed is None:
                raise ValueError(
                    "a prompt that AgentgymRollout.dataset() did not make (its first message has "
                    f"no {SEED_KEY!r}): build train_dataset with rollout.dataset(num_prompts)"
                )
            seeds.append(int(seed))
        if len(seeds) % size or any(seeds[i] != seeds[i - i % size] for i in range(len(seeds))):
            size = 1  # a group split across processes: each episode a group of one
        return seeds[::size], size

    def _engine(self, trainer: Any, model: Any) -> RolloutEngine:
        if self.engine is not None:
            return self.engine
        if getattr(trainer, "use_vllm", False):
            return TRLVLLMEngine(trainer, self.tokenizer)
        return HFEngine(model, self.tokenizer, max_batch_tokens=self.generation_batch_tokens)

    def play(self, prompts: list[Any], trainer: Any) -> RolloutBatch:
        """Play one episode per prompt with ``trainer``'s policy through
        :func:`baselines.episodes.collect_rollouts`; returns the records and TRL sequences."""
        seeds, size = self._groups(prompts, trainer)
        sampling = self.sampling(trainer)
        timings: dict[str, float] = {}
        # The groups of this call are a block of the step's batch over all processes.
        process = int(getattr(getattr(trainer, "accelerator", None), "process_index", 0) or 0)
        first = process * len(seeds)
        seed = self.sampling_seed
        if seed is None:
            seed = int(getattr(getattr(trainer, "args", None), "seed", 0) or 0)
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        # The policy itself generates only with the transformers engine (vLLM holds a copy);
        # that engine samples each episode from its own generator, as the trainer's does.
        own = self.engine is None and not getattr(trainer, "use_vllm", False)
        generators = (
            episode_generators(seed, TRAIN_STREAM, step, range(first, first + len(seeds)), size)
            if own
            else None
        )
        with generation_context(trainer) if own else nullcontext(trainer.model) as model:
            episodes = collect_rollouts(
                model,
                self.tokenizer,
                self.env_id,
                seeds,
                size,
                sampling,
                env_kwargs=self.env_kwargs,
                timings=timings,
                engine=self._engine(trainer, model),
                generators=generators,
                first_group=first,
            )
        sequences = [episode_sequence(e, self._close_id(e)) for e in episodes]
        return RolloutBatch(episodes, sequences, timings)

    def _close_id(self, episode: EpisodeRecord) -> int | None:
        """The tokenizer's EOS when ``episode``'s last reply ended at a stop string (it is then a
        finished completion for TRL, :func:`episode_sequence`), else None."""
        eos = self.tokenizer.eos_token_id
        if eos is None or not episode.turns or not self.stop_strings:
            return None
        sample = episode.turns[-1].sample
        if sample is None or sample.ended_with_eos or not sample.sampled_ids:
            return None
        n, why = _cut(self.tokenizer, sample.sampled_ids, set(), self.stop_strings)
        return int(eos) if why == "stop" and n == len(sample.sampled_ids) else None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        """TRL's ``rollout_func`` contract: one episode per prompt.

        Returns:
            ``prompt_ids``, ``completion_ids``, ``env_mask`` (int lists), ``logprobs`` (float
            lists, the engine's sampling log-probs; 0.0 on environment ids), and per episode
            ``episode_return`` (float), ``success`` (bool), ``turns`` (int), for the reward
            functions.

        Raises:
            ValueError: a prompt not made by :meth:`dataset`; TRL sampling options the engines do
                not apply; an episode of several rows (a template that rewrote history) under a
                trainer that is not :class:`AgentgymGRPOTrainer`.
        """
        batch = self.play(prompts, trainer)
        hook = getattr(trainer, "agentgym_rollout_done", None)
        if batch.multi_row and hook is None:
            raise ValueError(
                "the chat template rewrote an earlier turn, so an episode has several training "
                "rows; a plain GRPOTrainer would score a later row with the earlier ones in its "
                "context. Use baselines.integrations.trl.AgentgymGRPOTrainer, which scores each "
                "row on its own"
            )
        self.last = batch
        if hook is not None:
            hook(batch)
        seqs = batch.sequences
        return {
            "prompt_ids": [s.prompt_ids for s in seqs],
            "completion_ids": [s.completion_ids for s in seqs],
            "env_mask": [s.env_mask for s in seqs],
            "logprobs": [s.logprobs for s in seqs],
            "episode_return": [e.total_reward for e in batch.episodes],
            "success": [e.success for e in batch.episodes],
            "turns": [len(e.turns) for e in batch.episodes],
        }


#: The TRL release the adapter was last checked against (``pyproject.toml`` pins ``trl`` to its
#: minor release).
TRL_TESTED_VERSION = "1.16.0"

#: TRL's private methods :class:`AgentgymGRPOTrainer` overrides or calls (``GRPOTrainer``'s, and
#: transformers' ``Trainer``'s for the checkpoint ones), each with the leading parameters the
#: adapter passes or receives, as of :data:`TRL_TESTED_VERSION`. ``_get_per_token_logps_and_entropies``
#: returns ``(logps, entropies, aux)`` there.
TRL_PRIVATE_METHODS: dict[str, tuple[str, ...]] = {
    "_generate_and_score_completions": ("self", "inputs"),
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_get_per_token_logps_and_entropies": (
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
    ),  # fmt: skip
    "_compute_loss": ("self", "model", "inputs"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    "_get_output_dir": ("self", "trial"),
}

#: Attributes of a built ``GRPOTrainer`` the adapter reads (``_metrics`` is private) or relies on
#: (``eos_token_ids``: TRL's truncation test, which the closing EOS of a finished reply passes).
TRL_PRIVATE_ATTRIBUTES = (
    "_metrics",
    "loss_type",
    "beta",
    "num_generations",
    "num_generations_eval",
    "temperature",
    "model_wrapped",
    "accelerator",
    "eos_token_ids",
)

#: The key of a prompt's first message that holds the episode's reset seed
#: (:meth:`AgentgymRollout.dataset`).
SEED_KEY = "agentgym_seed"

#: The collapse tracker's state in a TRL checkpoint folder.
_TRACKER_FILE = "agentgym_collapse.json"

#: TRL loss types normalised by the number of rows (a mean over sequences), not by tokens.
_PER_ROW_LOSSES = ("grpo", "dr_grpo", "sapo", "luspo")


class AgentgymGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` with RAGEN-2's SNR-Aware Filter, MI diagnostics and collapse
    tracker, and exact scoring of episodes whose template rewrote history (module docstring).

    Takes ``GRPOTrainer``'s arguments (``rollout_func`` must be an :class:`AgentgymRollout`),
    plus:

    Args:
        snr_filter: the filter settings (``None``: ``FilterConfig()``, RAGEN-2's main-table
            filter, the agentgym trainer's default); ``FilterConfig(strategy="none")`` turns it off.
        diagnostics: a :class:`baselines.config.DiagnosticsConfig` (``None``: its defaults, MI
            every step; ``every=0`` turns the diagnostics off).

    Logged (TRL's ``self._metrics``, so every ``report_to`` tracker gets them), with the agentgym
    trainer's names: ``rollout/*`` (all processes' episodes), ``filter/*``,
    ``rollout/in_group_reward_std``, ``collapse/*``, ``timing/generation_s``, ``timing/env_s``,
    ``timing/prompt_s``, ``timing/diagnostics_s``; a value that is not defined for a step (NaN)
    is left out, as the agentgym trackers leave it out.

    Raises:
        TypeError: ``rollout_func`` is not an :class:`AgentgymRollout`.
        ValueError: a per-row ``loss_type`` (``grpo``, ``dr_grpo``, ``sapo``, ``luspo``) with
            ``beta > 0`` (see the module docstring).
    """

    def __init__(
        self,
        *args: Any,
        snr_filter: FilterConfig | None = None,
        diagnostics: DiagnosticsConfig | None = None,
        **kwargs: Any,
    ):
        rollout = kwargs.get("rollout_func")
        if not isinstance(rollout, AgentgymRollout):
            raise TypeError(
                "AgentgymGRPOTrainer needs rollout_func=AgentgymRollout(...) (the filter and "
                f"the diagnostics read its episodes); got {type(rollout).__name__}"
            )
        super().__init__(*args, **kwargs)
        self.filter_config = FilterConfig() if snr_filter is None else snr_filter
        self.filter_config.validate()
        self.diagnostics = DiagnosticsConfig() if diagnostics is None else diagnostics
        self.collapse_tracker = ZScoreTracker.from_config(self.diagnostics)
        if self.loss_type in _PER_ROW_LOSSES and self.beta != 0.0:
            raise ValueError(
                f"loss_type={self.loss_type!r} averages over rows, so the filter rescales "
                "the kept rows' advantages, which would leave the KL term unscaled; use "
                "beta=0.0 or a token-normalised loss_type ('dapo', 'bnpo', 'cispo')"
            )
        self._agentgym_batch: RolloutBatch | None = None
        self._agentgym_rewards: torch.Tensor | None = None
        self._agentgym_rows: torch.Tensor | list[list[int]] | None = None

    # ---------------------------------------------------------------- hooks

    def agentgym_rollout_done(self, batch: RolloutBatch) -> None:
        """Called by :class:`AgentgymRollout` with what it played (before TRL scores it)."""
        self._agentgym_batch = batch
        self._agentgym_rows = [s.row_index for s in batch.sequences] if batch.multi_row else None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._agentgym_rewards = rewards  # [all processes' rows, reward functions]
        return rewards

    # ---------------------------------------------------------------- scoring rows apart

    def _row_tensor(self, width: int, device: torch.device) -> torch.Tensor | None:
        rows = self._agentgym_rows
        if rows is None or isinstance(rows, torch.Tensor):
            return rows
        out = torch.full((len(rows), width), -1, dtype=torch.long)
        for b, r in enumerate(rows):
            out[b, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out.to(device)

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs
    ):
        """TRL's scoring; an episode of several rows is scored row by row (each row a
        sequence of its own, so each sampled id sees exactly the context it was sampled in).
        Returns TRL's ``(logps [B, C], entropies [B, C] or None, aux)``."""
        rows = self._row_tensor(logits_to_keep, input_ids.device)
        if rows is None or int(rows.max()) <= 0:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs
            )
        width = input_ids.size(1) - logits_to_keep  # the (left-padded) prompt part
        segments: list[torch.Tensor] = []
        where: list[tuple[int, int, int, int]] = []  # (b, t, segment, position in segment)
        for b in range(input_ids.size(0)):
            prompt = input_ids[b, :width][attention_mask[b, :width].bool()]
            for r in range(int(rows[b].max()) + 1):
                pos = torch.nonzero(rows[b] == r).flatten()
                ids = input_ids[b, width + pos]
                lead = len(prompt) if r == 0 else 0
                if r == 0:
                    ids = torch.cat([prompt, ids])
                for k, t in enumerate(pos.tolist()):
                    where.append((b, t, len(segments), lead + k))
                segments.append(ids)
        longest = max(len(s) for s in segments)
        pad = self.processing_class.pad_token_id or 0
        seg_ids = input_ids.new_full((len(segments), longest), pad)
        seg_mask = attention_mask.new_zeros((len(segments), longest))
        for s, ids in enumerate(segments):
            seg_ids[s, longest - len(ids) :] = ids
            seg_mask[s, longest - len(ids) :] = 1
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(
            model, seg_ids, seg_mask, longest - 1, batch_size, **kwargs
        )
        # Column j of the segment scores predict its position j + 1 (left-padded).
        b_idx = torch.tensor([w[0] for w in where], device=input_ids.device)
        t_idx = torch.tensor([w[1] for w in where], device=input_ids.device)
        s_idx = torch.tensor([w[2] for w in where], device=input_ids.device)
        at = torch.tensor(
            [longest - len(segments[w[2]]) + w[3] - 1 for w in where], device=input_ids.device
        )
        scored = torch.tensor([w[3] > 0 for w in where], device=input_ids.device)
        col = at.clamp(min=0)

        def place(values: torch.Tensor) -> torch.Tensor:
            out = values.new_zeros((input_ids.size(0), logits_to_keep))
            picked = values[s_idx, col] * scored.to(values.dtype)
            return out.index_put((b_idx, t_idx), picked)

        return place(logps), (None if entropies is None else place(entropies)), aux

    def _compute_loss(self, model, inputs):
        self._agentgym_rows = inputs.get("agentgym_row")
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._agentgym_rows = None

    # ---------------------------------------------------------------- checkpoints

    def _save_checkpoint(self, model, trial):
        """TRL's checkpoint, plus the collapse tracker's state (``agentgym_collapse.json``)."""
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            path = Path(self._get_output_dir(trial=trial)) / folder / _TRACKER_FILE
            path.write_text(json.dumps(self.collapse_tracker.state_dict()))

    def _load_optimizer_and_scheduler(self, checkpoint):
        """TRL's resume, plus the collapse tracker's state when the checkpoint holds it."""
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and (Path(checkpoint) / _TRACKER_FILE).is_file():
            state = json.loads((Path(checkpoint) / _TRACKER_FILE).read_text())
            self.collapse_tracker.load_state_dict(state)

    # ---------------------------------------------------------------- RAGEN-2's tools

    def _log(self, mode: str, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and math.isfinite(float(value)):
                self._metrics[mode][key].append(float(value))

    def _generate_and_score_completions(self, inputs):
        self._agentgym_batch = None
        output = super()._generate_and_score_completions(inputs)
        batch = self._agentgym_batch
        if batch is None:
            raise RuntimeError("rollout_func did not report its batch (not AgentgymRollout?)")
        if batch.multi_row:
            output["agentgym_row"] = self._row_tensor(
                output["completion_ids"].size(1), output["completion_ids"].device
            )
        self._agentgym_rows = None
        mode = "train" if self.model.training else "eval"
        step = self.state.global_step
        # Every process sees the whole batch (as the agentgym trainer does), so the metrics and
        # the diagnostics are of all episodes and every rank runs the same forward passes (a
        # sharded model's forward is a collective).
        episodes = batch.episodes
        if self.accelerator.num_processes > 1:
            episodes = gather_object(episodes)
        metrics = rollout_metrics(episodes, "rollout/")
        metrics.update(batch.timings)
        if mode == "train" and self.diagnostics.every and step % self.diagnostics.every == 0:
            t0 = time.perf_counter()
            with generation_context(self) as model:
                diag = episode_mi_diagnostics(
                    model,
                    self.processing_class,
                    episodes,
                    self.diagnostics,
                    seed=self.args.seed,
                    step=step,
                    temperature=logit_temperature(self.temperature),
                )
            metrics["timing/diagnostics_s"] = time.perf_counter() - t0
            metrics.update({f"collapse/{k}": v for k, v in diag.items()})
            metrics.update(self.collapse_tracker.update(diag))
        if mode == "train":
            metrics.update(self._filter(output))
        self._log(mode, metrics)
        return output

    def _filter(self, output: dict[str, Any]) -> dict[str, float]:
        """SNR-Aware Filtering of the whole generation batch (all processes); zeroes the
        dropped groups' advantages and loss mask in ``output``. Returns ``filter/*`` and
        ``rollout/in_group_reward_std``."""
        size = self.num_generations
        weights = self.reward_weights.to(self._agentgym_rewards.device)
        rewards = (self._agentgym_rewards * weights.unsqueeze(0)).nansum(dim=1)
        grouped = rewards.detach().to("cpu", torch.float64).view(-1, size)
        completion_mask = output["completion_mask"]
        tool_mask = output.get("tool_mask")
        if tool_mask is None:
            tool_mask = torch.ones_like(completion_mask)
        loss_mask = completion_mask * tool_mask
        extra: dict[str, torch.Tensor] = {}
        if self.filter_config.needs == "lengths":
            lengths = self.accelerator.gather(loss_mask.sum(1))
            extra["lengths"] = lengths.to("cpu", torch.float64).view(-1, size)
        elif self.filter_config.needs == "entropies":
            extra["entropies"] = self._episode_entropies(output, loss_mask).view(-1, size)
        result = snr_filter(grouped, self.filter_config, **extra)
        stats = dict(result.stats)
        stats["rollout/in_group_reward_std"] = float(grouped.std(dim=1).mean()) if size > 1 else 0.0
        keep_rows = result.mask.repeat_interleave(size)  # all processes' rows
        local = len(output["advantages"])
        start = self.accelerator.process_index * local
        keep = keep_rows[start : start + local].to(loss_mask.device)
        tokens = self.accelerator.gather(loss_mask.sum().reshape(1)).sum()
        stats["filter/tokens_before"] = float(tokens)
        output["tool_mask"] = tool_mask * keep.unsqueeze(1).to(tool_mask.dtype)
        advantages = output["advantages"] * keep.to(output["advantages"].dtype)
        kept_rows = int(keep_rows.sum())
        if self.loss_type in _PER_ROW_LOSSES and kept_rows:
            advantages = advantages * (len(keep_rows) / kept_rows)
        output["advantages"] = advantages
        kept_mask = completion_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(kept_mask.sum()).sum()
        stats["filter/tokens_after"] = float(output["num_items_in_batch"])
        return stats

    def _episode_entropies(self, output: dict[str, Any], loss_mask: torch.Tensor):
        """Each episode's mean token entropy over its sampled ids (nats, at TRL's
        temperature), all processes, float64 ``[rows]`` (``filter.metric`` entropy)."""
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        if "agentgym_row" in output:
            self._agentgym_rows = output["agentgym_row"]
        try:
            with torch.no_grad():
                _, entropies, _ = self._get_per_token_logps_and_entropies(
                    self.model,
                    ids,
                    mask,
                    output["completion_ids"].size(1),
                    compute_entropy=True,
                )
        finally:
            self._agentgym_rows = None
        means = (entropies * loss_mask).sum(1) / loss_mask.sum(1).clamp(min=1)
        return self.accelerator.gather(means).to("cpu", torch.float64)
