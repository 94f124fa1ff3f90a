"""Multi-turn rollouts: P environment groups x N samples, one batched ``generate`` per turn.

The N episodes of a group reset with the same seed, so they start from the same state (the same
prompt); groups differ by seed. Each turn, every live episode's chat (the
:class:`agentgym.ChatEpisode` of the episode so far, rendered by the tokenizer's chat template) is
generated in one left-padded batch; each reply is stepped in its environment. With
``think_prefix`` the generation prompt ends with ``<think>`` (as in RAGEN) and the reply the
environment sees is ``"<think>" + generated text``.

:func:`tokenize_episode` turns a finished episode into the one token sequence the trainer learns
from, with a loss mask that covers only the policy's own tokens (each reply and the end-of-turn
token it generated), found by character offsets in the rendered chat, and the index of the last
policy token of each turn (where that turn's reward is placed for GAE).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import agentgym  # noqa: F401  (registers the ids)
from agentgym.chat import ChatEpisode

__all__ = [
    "THINK_PREFIX",
    "TurnRecord",
    "EpisodeRecord",
    "SamplingSettings",
    "TokenizedEpisode",
    "collect_rollouts",
    "generate",
    "render_prompt",
    "tokenize_episode",
    "extract_reasoning",
]

THINK_PREFIX = "<think>"


@dataclass
class SamplingSettings:
    """Generation settings for one rollout.

    Attributes:
        max_new_tokens: per turn.
        temperature: 0 for greedy decoding.
        top_p: nucleus mass.
        think_prefix: end each generation prompt with ``<think>``.
        max_context_tokens: an episode whose prompt would exceed this is truncated.
        stop_strings: generation of a reply stops once its text ends with one of these (RAGEN
            stops at ``</answer>``: what a model writes after its answer is never an action).
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    think_prefix: bool = True
    max_context_tokens: int = 4096
    stop_strings: tuple[str, ...] = ("</answer>",)


@dataclass
class TurnRecord:
    """One turn: the prompt text, the policy's reply and what the environment returned."""

    prompt: str
    response: str
    generated_ids: list[int]
    ended_with_eos: bool
    reward: float
    info: dict[str, Any]
    logprobs: list[float] = field(default_factory=list)  # the engine's, per generated id


@dataclass
class EpisodeRecord:
    """One finished episode.

    Attributes:
        group: index of its group in the batch (episodes of a group share ``seed``).
        seed: the reset seed.
        chat: its :class:`ChatEpisode` (``chat.messages()`` is the whole conversation).
        turns: one :class:`TurnRecord` per turn.
        terminated, truncated: how it ended (``truncated`` also when the context ran out).
    """

    group: int
    seed: int
    chat: ChatEpisode
    turns: list[TurnRecord] = field(default_factory=list)
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


def render_prompt(tokenizer: Any, messages: list[dict[str, str]], think_prefix: bool) -> str:
    """The generation prompt: the chat template with the assistant header, plus ``<think>``."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text + (THINK_PREFIX if think_prefix else "")


class _StopOnText:
    """Stops a row once its generated text ends with a stop string.

    transformers' own ``stop_strings`` needs a tokenizer whose vocabulary it can map to text
    pieces (BPE/SentencePiece); decoding the last few tokens works with any tokenizer.
    """

    def __init__(self, tokenizer: Any, stops: tuple[str, ...], prompt_length: int, tail: int = 8):
        self.tokenizer, self.stops = tokenizer, stops
        self.prompt_length, self.tail = prompt_length, tail

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[1] <= self.prompt_length:
            return done
        tails = input_ids[:, max(self.prompt_length, input_ids.shape[1] - self.tail) :].tolist()
        for row, ids in enumerate(tails):
            text = self.tokenizer.decode(ids, skip_special_tokens=False).rstrip()
            done[row] = any(text.endswith(stop) for stop in self.stops)
        return done


@torch.no_grad()
def generate(
    model: Any, tokenizer: Any, prompts: list[str], sampling: SamplingSettings
) -> list[tuple[list[int], bool]]:
    """Generate one reply per prompt in one left-padded batch.

    Args:
        prompts: rendered prompt texts (special tokens written out).
        sampling: generation settings; sampling uses torch's global generator (seed it).

    Returns:
        Per prompt: ``(generated token ids without the end-of-turn token and padding,
        whether the policy itself ended the reply with the end-of-turn token)``. A reply cut by a
        stop string counts as not ended by the policy (padding may equal the end-of-turn token).
    """
    device = next(model.parameters()).device
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    eos_id = model.generation_config.eos_token_id
    eos_ids = set(eos_id if isinstance(eos_id, list) else [eos_id])
    kwargs: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": eos_id,
    }
    if sampling.stop_strings:
        from transformers import StoppingCriteriaList

        kwargs["stopping_criteria"] = StoppingCriteriaList(
            [_StopOnText(tokenizer, sampling.stop_strings, enc["input_ids"].shape[1])]
        )
    if sampling.temperature > 0:
        kwargs.update(
            do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0
        )
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    out = model.generate(
        input_ids=enc["input_ids"].to(device),
        attention_mask=enc["attention_mask"].to(device),
        **kwargs,
    )
    new_tokens = out[:, enc["input_ids"].shape[1] :].tolist()
    results = []
    for row in new_tokens:
        ids: list[int] = []
        ended = False
        for token in row:
            if token in eos_ids:
                ended = True
                break
            ids.append(token)
        if ended and sampling.stop_strings:
            text = tokenizer.decode(ids, skip_special_tokens=False).rstrip()
            ended = not any(text.endswith(stop) for stop in sampling.stop_strings)
        results.append((ids, ended))
    return results


def extract_reasoning(response: str) -> str:
    """The text inside ``<think>...</think>`` of a reply (up to the end if unclosed), else ``""``."""
    start = response.find("<think>")
    if start < 0:
        return ""
    start += len("<think>")
    end = response.find("</think>", start)
    return response[start:] if end < 0 else response[start:end]


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
    engine: Any | None = None,
) -> list[EpisodeRecord]:
    """Play ``len(seeds) * group_size`` episodes; group g resets every member with ``seeds[g]``.

    Args:
        model: a causal LM (Hugging Face).
        tokenizer: its tokenizer, padding on the left, with a chat template.
        env_id: a registered agentgym id.
        seeds: one reset seed per group.
        group_size: N episodes per group.
        sampling: generation settings.
        env_kwargs: constructor overrides for the environment.
        envs: environments to reuse (at least ``len(seeds) * group_size``), or an environment
            pool with ``reset_many(seeds)`` and ``step_many(indices, actions)`` (e.g.
            :class:`baselines.ray_rollout.RayEnvPool`, whose actors own the environments);
            made in-process if ``None`` and closed at the end.
        timings: if given, receives ``timing/generation_s`` (model) and ``timing/env_s``
            (environment resets and steps, chat rendering excluded), in seconds.
        engine: a :class:`baselines.engines.RolloutEngine`; ``None`` generates with
            :func:`generate` on ``model`` (:class:`baselines.engines.HFEngine`).

    Returns:
        Episodes ordered by group, then member (``group * group_size + member``).
    """
    from baselines.engines import HFEngine

    if engine is None:
        engine = HFEngine(model, tokenizer)
    count = len(seeds) * group_size
    own_envs = envs is None
    if envs is None:
        envs = [gym.make(env_id, **(env_kwargs or {})) for _ in range(count)]
    pool = envs if hasattr(envs, "step_many") else _LocalEnvs(envs)
    if len(pool) < count:
        raise ValueError(f"need {count} environments, got {len(pool)}")
    episodes: list[EpisodeRecord] = []
    gen_s = env_s = 0.0
    try:
        t0 = time.perf_counter()
        resets = pool.reset_many([seeds[index // group_size] for index in range(count)])
        env_s += time.perf_counter() - t0
        for index, (observation, info) in enumerate(resets):
            group, seed = index // group_size, seeds[index // group_size]
            episodes.append(EpisodeRecord(group, seed, ChatEpisode.from_reset(observation, info)))
        prefix = THINK_PREFIX if sampling.think_prefix else ""
        live = list(range(count))
        while live:
            prompts = [
                render_prompt(tokenizer, episodes[i].chat.messages(), sampling.think_prefix)
                for i in live
            ]
            lengths = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
            fits = [n + sampling.max_new_tokens <= sampling.max_context_tokens for n in lengths]
            for i, ok in zip(live, fits, strict=True):
                if not ok:
                    episodes[i].truncated = True  # the context is full: end the episode
            live = [i for i, ok in zip(live, fits, strict=True) if ok]
            prompts = [p for p, ok in zip(prompts, fits, strict=True) if ok]
            if not live:
                break
            t0 = time.perf_counter()
            generations = engine.generate(prompts, sampling)
            gen_s += time.perf_counter() - t0
            responses = [prefix + g.text for g in generations]
            t0 = time.perf_counter()
            results = pool.step_many(live, responses)
            env_s += time.perf_counter() - t0
            still_live = []
            for i, prompt, gen, response, result in zip(
                live, prompts, generations, responses, results, strict=True
            ):
                obs, reward, terminated, truncated, info = result
                episode = episodes[i]
                episode.chat.record(response, obs, reward, terminated, truncated, info)
                episode.turns.append(
                    TurnRecord(
                        prompt,
                        response,
                        gen.token_ids,
                        gen.ended_with_eos,
                        float(reward),
                        info,
                        gen.logprobs,
                    )
                )
                if terminated or truncated:
                    episode.terminated, episode.truncated = bool(terminated), bool(truncated)
                else:
                    still_live.append(i)
            live = still_live
    finally:
        if own_envs:
            for env in envs:
                env.close()
    if timings is not None:
        timings["timing/generation_s"] = timings.get("timing/generation_s", 0.0) + gen_s
        timings["timing/env_s"] = timings.get("timing/env_s", 0.0) + env_s
    return episodes


class _LocalEnvs:
    """In-process environments behind the pool interface of :func:`collect_rollouts`."""

    def __init__(self, envs: list[gym.Env]):
        self.envs = envs

    def __len__(self) -> int:
        return len(self.envs)

    def reset_many(self, seeds: list[int]) -> list[tuple[Any, dict[str, Any]]]:
        return [self.envs[i].reset(seed=seed) for i, seed in enumerate(seeds)]

    def step_many(self, indices: list[int], actions: list[str]) -> list[tuple]:
        return [self.envs[i].step(a) for i, a in zip(indices, actions, strict=True)]


@dataclass
class TokenizedEpisode:
    """An episode as one token sequence.

    Attributes:
        input_ids: the whole chat, tokenized (list of int, length L).
        loss_mask: 1 on the policy's own tokens, else 0 (length L).
        turn_ends: per turn, the index of its last policy token (-1 if the turn has none).
    """

    input_ids: list[int]
    loss_mask: list[int]
    turn_ends: list[int]


def tokenize_episode(
    tokenizer: Any, episode: EpisodeRecord, think_prefix: bool
) -> TokenizedEpisode:
    """Tokenize an episode's chat and mark the policy's tokens.

    Each assistant message is ``[<think> prefix] + reply``; the mask covers the reply and, when the
    policy generated it, the end-of-turn token after it. Tokens are assigned by their character
    offsets in the rendered chat, so the mask holds exactly the reply text (a token that straddles
    the border of a reply, which chat templates avoid, is left out).

    Raises:
        ValueError: the chat template does not render the conversation as a sequence of
            prefixes (a template that rewrites earlier turns cannot be trained turn by turn).
    """
    messages = episode.chat.messages()
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    prefix_len = len(THINK_PREFIX) if think_prefix else 0
    eos_text = tokenizer.eos_token or ""
    spans: list[tuple[int, int]] = []
    turn = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        head = tokenizer.apply_chat_template(
            messages[:index], tokenize=False, add_generation_prompt=True
        )
        if not full.startswith(head):
            raise ValueError("the chat template does not render earlier turns as a prefix")
        start = len(head) + prefix_len
        end = len(head) + len(message["content"])
        if episode.turns[turn].ended_with_eos and eos_text and full.startswith(eos_text, end):
            end += len(eos_text)
        spans.append((start, end))
        turn += 1
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    mask = [0] * len(ids)
    turn_ends = []
    pos = 0
    for start, end in spans:
        last = -1
        while pos < len(ids) and offsets[pos][0] < end:
            s, e = offsets[pos]
            if s >= start and e <= end and e > s:
                mask[pos] = 1
                last = pos
            pos += 1
        turn_ends.append(last)
    return TokenizedEpisode(list(ids), mask, turn_ends)
