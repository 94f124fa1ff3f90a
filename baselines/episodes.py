"""The episode loop and its records: token ids in, token ids out.

:func:`collect_rollouts` plays every episode the trainer learns from and validates on, in the one
lock-step loop of the project (:func:`agentgym.lockstep.play_lockstep`, which ``agentgym eval``
plays in too); the ``hf:`` agent of ``agentgym eval`` builds its prompts with the same
:class:`TokenContext` and engine, so a checkpoint is scored on exactly the prompts it was trained
on.

**One record per turn.** The policy returns each reply as an :class:`agentgym.lockstep.Action`
whose ``sample`` is a :class:`Sample` (prompt ids, sampled ids, log-probs, end token, training
row); the loop keeps it on the turn's :class:`agentgym.lockstep.Step` beside the action text,
reward and ``info``, and :attr:`EpisodeRecord.turns` is those steps. The trainer, advantages,
diagnostics, the rollout dump, the samples writer and the TRL integration all read that record.

**Token-in-token-out** (the scheme of docs/engines.md). Each episode keeps a running token
context. On turn 1 the chat template's generation prompt (plus ``<think>`` in the
``think_answer`` format) is tokenised once. After the policy replies, its sampled ids (the end
token included when it sampled one) are appended *as ids*, never re-tokenised from text, and the
rendered text is extended by their decoding. On the next turn the template renders the whole chat
again; when that text starts with the text the context already stands for, only the new part
(the template's end of the assistant turn, the next user message and the next generation header)
is tokenised and appended. The engine is given exactly these ids, and the training row is these
same ids: the trainer learns from the very ids that were sampled, in the very context they were
sampled in, whatever BPE would merge on a re-tokenisation (``'Cast','ing'`` stays two tokens, a
``</think>`` right after the ``<think>`` prefix stays its own token).

**Templates that rewrite earlier turns** (e.g. ones that drop the reasoning of earlier assistant
turns): the new rendering does not start with the context's text, so the row so far is closed and
a new row starts from the freshly tokenised prompt. Each row is exact (what the policy was given
that turn, then what it sampled); every sampled token is trained in exactly one row. An episode is
one row under a prefix-preserving template (ChatML, SmolLM2) and one row per changed prefix
otherwise. A chat template that renders no generation prompt cannot be used and raises
:class:`ValueError` naming the template.

**Per-episode randomness.** Given ``generators`` (:func:`episode_generators`), every episode
samples from its own ``torch.Generator``, seeded by :func:`episode_seed` from (``train.seed``,
stream, step, group, member) and carried across its turns, so its token ids do not depend on the
other episodes of its decoding batch, on how batches are split or on which rank plays it.

Source: the token-in-token-out multi-turn rollouts of verl (``agent_loop``) and RAGEN, and
TRL's GRPO trainer (training on the completion ids the generator returned).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import agentgym  # noqa: F401  (registers the ids)
from agentgym.chat import ChatEpisode
from agentgym.lockstep import END_EPISODE, Action, LiveEpisode, LocalEnvs, Step, play_lockstep
from baselines.checkpoint import open_new_file
from baselines.llm.engines import HFEngine, RolloutEngine, SamplingSettings
from baselines.llm.prompts import TokenContext, TrainingRow, think_prefix_for, turn_prompt

__all__ = [
    "TRAIN_STREAM",
    "VALIDATION_STREAM",
    "episode_seed",
    "episode_generators",
    "Sample",
    "EpisodeRecord",
    "collect_rollouts",
    "episode_json",
    "write_rollouts",
    "rollout_metrics",
    "vocabulary_texts",
]

#: :func:`episode_seed` streams: training rollouts and validation episodes never share a seed.
TRAIN_STREAM = 0


VALIDATION_STREAM = 1


def episode_seed(seed: int, stream: int, step: int, group: int, member: int) -> int:
    """The seed of one episode's sampling generator, a function of where the episode sits only.

    ``np.random.SeedSequence([seed mod 2**64, stream, step, group, member])``'s first 64-bit word,
    top bit cleared (a non-negative ``int`` below ``2**63``, as ``torch.Generator.manual_seed``
    takes it). SeedSequence hashes its whole entropy list, so neighbouring tuples give unrelated
    seeds (no ``seed + index`` overlaps between steps or groups).

    Args:
        seed: ``train.seed``.
        stream: :data:`TRAIN_STREAM` (training rollouts) or :data:`VALIDATION_STREAM`
            (validation: ``step`` 0, ``group`` the validation episode's index, ``member`` 0).
        step: the training step (>= 0).
        group: the group's index in the step's batch (>= 0), the same on every rank.
        member: the episode's index in its group (>= 0).

    Raises:
        ValueError: a negative ``stream``, ``step``, ``group`` or ``member``.

    Example:
        >>> episode_seed(0, TRAIN_STREAM, 0, 0, 0) == episode_seed(0, TRAIN_STREAM, 0, 0, 0)
        True
        >>> episode_seed(0, TRAIN_STREAM, 0, 0, 1) != episode_seed(0, TRAIN_STREAM, 0, 1, 0)
        True
    """
    if min(stream, step, group, member) < 0:
        raise ValueError(
            f"episode_seed: stream, step, group and member must be >= 0; got {stream}, {step}, "
            f"{group}, {member}"
        )
    words = np.random.SeedSequence([seed % 2**64, stream, step, group, member]).generate_state(
        1, dtype=np.uint64
    )
    return int(words[0]) & (2**63 - 1)


def episode_generators(
    seed: int,
    stream: int,
    step: int,
    groups: range,
    group_size: int,
    device: torch.device | str = "cpu",
) -> list[torch.Generator]:
    """One seeded ``torch.Generator`` per episode of ``groups`` (group-major, member-minor: the
    order of :func:`collect_rollouts`), on ``device``, seeded by :func:`episode_seed`.

    Example:
        >>> len(episode_generators(0, TRAIN_STREAM, 3, range(2, 4), 4))
        8
    """
    out = []
    for group in groups:
        for member in range(group_size):
            g = torch.Generator(device=device)
            g.manual_seed(episode_seed(seed, stream, step, group, member))
            out.append(g)
    return out


@dataclass(frozen=True)
class Sample:
    """What the policy was given and sampled on one turn: the payload that
    :func:`collect_rollouts`' policy returns with each action (:class:`agentgym.lockstep.Action`)
    and the loop keeps on that turn's :class:`agentgym.lockstep.Step` (``step.sample``).

    Attributes:
        prompt_ids: the int token ids the engine was given (the whole context, length P).
        sampled_ids: the int token ids it sampled, the end token included when sampled (length
            T): :attr:`baselines.llm.engines.Generation.sampled_ids`, the ids the trainer learns from.
        logprobs: the sampling log-prob of each sampled id (float, natural log; length T; 0.0
            each when the engine gives none).
        ended_with_eos: the policy sampled an end token.
        row: index of the episode's :class:`TrainingRow` that trains this turn.
    """

    prompt_ids: list[int]
    sampled_ids: list[int]
    logprobs: list[float]
    ended_with_eos: bool
    row: int = 0


@dataclass
class EpisodeRecord:
    """One finished episode.

    Attributes:
        group: index of its group in the batch (episodes of a group share ``seed``).
        seed: the reset seed.
        chat: its :class:`ChatEpisode` (``chat.messages()`` is the whole conversation).
        env_id: the environment id.
        turns: one :class:`agentgym.lockstep.Step` per turn, the loop's own: ``action`` (the text
            the environment received, ``<think>`` prefix included), ``reward``, ``terminated``,
            ``truncated``, ``info``, and ``sample``, the turn's :class:`Sample` (its token ids).
        rows: the training rows (:class:`TokenContext`), usually one.
        terminated, truncated: how it ended (``truncated`` also when the context ran out).
    """

    group: int
    seed: int
    chat: ChatEpisode
    env_id: str = ""
    turns: list[Step[Sample]] = field(default_factory=list)
    rows: list[TrainingRow] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False

    @property
    def total_reward(self) -> float:
        return float(sum(t.reward for t in self.turns))

    @property
    def success(self) -> bool:
        return bool(self.turns and self.turns[-1].info.get("success", False))

    @property
    def valid_turn_fraction(self) -> float:
        if not self.turns:
            return 0.0
        return float(np.mean([t.info.get("action_is_valid", False) for t in self.turns]))


def collect_rollouts(
    model: Any,
    tokenizer: Any,
    env_id: str,
    seeds: list[int],
    group_size: int,
    sampling: SamplingSettings,
    env_kwargs: dict[str, Any] | None = None,
    envs: list[gym.Env] | Any | None = None,
    timings: dict[str, float] | None = None,
    engine: RolloutEngine | None = None,
    generators: list[torch.Generator] | None = None,
    first_group: int = 0,
) -> list[EpisodeRecord]:
    """Play ``len(seeds) * group_size`` episodes in lock step; group g resets with ``seeds[g]``.

    Args:
        model: a causal LM (Hugging Face); used only when ``engine`` is ``None``.
        tokenizer: its tokenizer, with a chat template.
        env_id: a registered agentgym id.
        seeds: one reset seed per group.
        group_size: N episodes per group.
        sampling: generation settings.
        env_kwargs: constructor overrides for the environment (its ``action_format`` decides
            whether the ``<think>`` prefix applies).
        envs: environments to reuse (at least ``len(seeds) * group_size``), or an environment
            pool with ``reset_many(seeds)`` and ``step_many(indices, actions)`` (e.g.
            :class:`baselines.ray_rollout.RayEnvPool`); made in-process if ``None`` and closed
            at the end.
        timings: if given, receives ``timing/generation_s`` (engine), ``timing/env_s``
            (environment resets and steps) and ``timing/prompt_s`` (rendering and tokenising
            the new part of each prompt), in seconds.
        engine: a :class:`baselines.llm.engines.RolloutEngine`; ``None`` uses
            :class:`baselines.llm.engines.HFEngine` on ``model``.
        generators: one ``torch.Generator`` per episode (:func:`episode_generators`), used by
            every turn of that episode; ``None``: the engine's default (torch's global generator).
        first_group: the batch index of ``seeds[0]``'s group (``EpisodeRecord.group`` is
            ``first_group + g``), for a rank that plays a block of the step's groups.

    Returns:
        Episodes ordered by group, then member (``group * group_size + member``), each with its
        turns and training rows.

    Raises:
        ValueError: fewer environments than episodes, ``generators`` not one per episode, or an
            unusable chat template.
    """
    if generators is not None and len(generators) != len(seeds) * group_size:
        raise ValueError(
            f"collect_rollouts: {len(generators)} generators for {len(seeds) * group_size} "
            "episodes; give one per episode (episode_generators)"
        )
    if not seeds:
        return []
    if engine is None:
        engine = HFEngine(model, tokenizer)
    env_kwargs = dict(env_kwargs or {})
    prefix = think_prefix_for(sampling, env_kwargs.get("action_format", "think_answer"))
    count = len(seeds) * group_size
    own_envs = envs is None
    if envs is None:
        envs = [gym.make(env_id, **env_kwargs) for _ in range(count)]
    pool = envs if hasattr(envs, "step_many") else LocalEnvs(envs)
    contexts = [TokenContext(tokenizer, prefix) for _ in range(count)]
    clock = {"timing/generation_s": 0.0, "timing/prompt_s": 0.0, "timing/env_s": 0.0}

    def policy(live: list[LiveEpisode]) -> list[Any]:
        t0 = time.perf_counter()
        prompts = [
            turn_prompt(contexts[e.index], e.chat.messages(), sampling)  # type: ignore[union-attr]
            for e in live
        ]
        clock["timing/prompt_s"] += time.perf_counter() - t0
        actions: list[Any] = [END_EPISODE] * len(live)  # a prompt that no longer fits ends it
        fits = [j for j, p in enumerate(prompts) if p is not None]
        if not fits:
            return actions
        t0 = time.perf_counter()
        chosen = [prompts[j] for j in fits]
        if generators is None:
            generations = engine.generate(chosen, sampling)
        else:
            rows = [generators[live[j].index] for j in fits]
            generations = engine.generate(chosen, sampling, generators=rows)
        clock["timing/generation_s"] += time.perf_counter() - t0
        for j, gen in zip(fits, generations, strict=True):
            row = contexts[live[j].index].add(gen)
            logprobs = list(gen.logprobs) or [0.0] * len(gen.sampled_ids)
            sample = Sample(prompts[j], list(gen.sampled_ids), logprobs, gen.ended_with_eos, row)
            actions[j] = Action(prefix + gen.text, sample)
        return actions

    try:
        played = play_lockstep(
            pool, [seeds[i // group_size] for i in range(count)], policy, timings=clock
        )
    finally:
        engine.release()  # e.g. the HF engine's keys/values of this batch: not needed again
        if own_envs:
            for env in envs:
                env.close()
    episodes: list[EpisodeRecord] = []
    for live, context in zip(played, contexts, strict=True):
        assert live.chat is not None
        episode = EpisodeRecord(
            first_group + live.index // group_size,
            live.seed,
            live.chat,
            env_id,
            turns=live.steps,
            rows=context.finish(),
            terminated=live.terminated,
            truncated=live.truncated,
        )
        episodes.append(episode)
    if timings is not None:
        for key, value in clock.items():
            timings[key] = timings.get(key, 0.0) + value
    return episodes


def _plain(value: Any) -> Any:
    """``info`` values as JSON (numpy scalars and arrays to Python, anything else to ``str``)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def episode_json(episode: EpisodeRecord) -> dict[str, Any]:
    """One line of a rollout dump (``train.dump_rollouts``).

    Keys: ``env_id``, ``seed``, ``group``, ``reward`` (episode total), ``success``,
    ``terminated``, ``truncated``; ``turns``: per turn ``prompt_ids``, ``sampled_ids``,
    ``logprobs`` (sampling log-probs, natural log), ``response`` (the action text),
    ``ended_with_eos``, ``reward``, ``row``, ``info``; and the trained rows: ``input_ids`` and
    ``loss_mask`` (lists with one entry per training row, usually one; ``loss_mask`` 1 on the
    sampled ids).
    """
    return {
        "env_id": episode.env_id,
        "seed": episode.seed,
        "group": episode.group,
        "reward": episode.total_reward,
        "success": episode.success,
        "terminated": episode.terminated,
        "truncated": episode.truncated,
        "turns": [
            {
                "prompt_ids": t.sample.prompt_ids,
                "sampled_ids": t.sample.sampled_ids,
                "logprobs": t.sample.logprobs,
                "response": t.action,
                "ended_with_eos": t.sample.ended_with_eos,
                "reward": t.reward,
                "row": t.sample.row,
                "info": _plain(t.info),
            }
            for t in episode.turns
        ],
        "input_ids": [row.input_ids for row in episode.rows],
        "loss_mask": [row.loss_mask for row in episode.rows],
    }


def write_rollouts(path: str | os.PathLike[str], episodes: list[EpisodeRecord], step: int) -> None:
    """Write ``episodes`` as JSON lines (:func:`episode_json`, plus ``step``) to ``path``.

    The file is written under a temporary name and renamed, so a reader never sees half a file.
    """
    target = os.fspath(path)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    tmp = target + ".tmp"
    with os.fdopen(open_new_file(Path(tmp)), "w", encoding="utf-8") as fh:  # never through a link
        for episode in episodes:
            fh.write(json.dumps({"step": step, **episode_json(episode)}, allow_nan=False) + "\n")
    os.replace(tmp, target)


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


def vocabulary_texts(env_id: str, env_kwargs: dict[str, Any], seeds: range) -> list[str]:
    """Instructions and first observations of some episodes (the ``tiny`` model's vocabulary)."""
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
