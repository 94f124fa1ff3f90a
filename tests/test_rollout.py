"""Rollouts and the loss mask, with the embedded SmolLM2 tokenizer (its real chat template)."""

from __future__ import annotations

import gymnasium
import pytest
import torch
from transformers import AutoTokenizer

from agentgym.chat import ChatEpisode
from baselines.policy import embedded_model_path, load_policy
from baselines.rollout import (
    EpisodeRecord,
    SamplingSettings,
    TurnRecord,
    collect_rollouts,
    extract_reasoning,
    tokenize_episode,
)
from baselines.trainer import vocabulary_texts


@pytest.fixture(scope="module")
def smol_tokenizer():
    return AutoTokenizer.from_pretrained(embedded_model_path())


def _scripted_episode(replies: list[str], eos: list[bool]) -> EpisodeRecord:
    """Play Sokoban-v0 seed 0 with scripted replies (what a policy would have written)."""
    env = gymnasium.make("agentgym/Sokoban-v0")
    obs, info = env.reset(seed=0)
    episode = EpisodeRecord(group=0, seed=0, chat=ChatEpisode.from_reset(obs, info))
    for reply, ended in zip(replies, eos, strict=True):
        obs, reward, terminated, truncated, info = env.step(reply)
        episode.chat.record(reply, obs, reward, terminated, truncated, info)
        episode.turns.append(TurnRecord("", reply, [], ended, float(reward), info))
    env.close()
    return episode


def _runs(ids: list[int], mask: list[int]) -> list[list[int]]:
    runs, current = [], []
    for token, m in zip(ids, mask, strict=True):
        if m:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def test_loss_mask_decodes_to_exactly_the_assistant_text_of_a_3_turn_episode(smol_tokenizer):
    # Seed 0's room (see tests/golden): the box is left of the player; "Right" walks away, the
    # second reply is malformed (penalised, state unchanged), the third is a valid move.
    replies = [
        "<think>I should look around first.</think><answer>Right</answer>",
        "<think>hmm</think> no answer tags here",
        "<think>Back up.</think><answer>Up || Left</answer>",
    ]
    episode = _scripted_episode(replies, eos=[True, False, True])
    assert len(episode.turns) == 3
    tokenized = tokenize_episode(smol_tokenizer, episode, think_prefix=True)
    runs = _runs(tokenized.input_ids, tokenized.loss_mask)
    decoded = [smol_tokenizer.decode(run) for run in runs]
    # With think_prefix the "<think>" opening is the prompt's, not the policy's; the end-of-turn
    # token is the policy's only when it generated it (turns 1 and 3).
    assert decoded == [
        "I should look around first.</think><answer>Right</answer><|im_end|>",
        "hmm</think> no answer tags here",
        "Back up.</think><answer>Up || Left</answer><|im_end|>",
    ]
    # Each turn's reward goes on its last policy token.
    assert tokenized.turn_ends == [run_end for run_end in _run_ends(tokenized.loss_mask)]
    # Everything outside the mask is prompt: system, user turns, assistant headers.
    unmasked = smol_tokenizer.decode(
        [t for t, m in zip(tokenized.input_ids, tokenized.loss_mask, strict=True) if not m]
    )
    assert "Turn 1:" in unmasked and "Turn 3:" in unmasked and "Right</answer>" not in unmasked


def _run_ends(mask: list[int]) -> list[int]:
    return [i for i, m in enumerate(mask) if m and (i + 1 == len(mask) or not mask[i + 1])]


def test_loss_mask_without_think_prefix_covers_the_whole_reply(smol_tokenizer):
    reply = "<think>a</think><answer>Down</answer>"
    episode = _scripted_episode([reply], eos=[True])
    tokenized = tokenize_episode(smol_tokenizer, episode, think_prefix=False)
    (run,) = _runs(tokenized.input_ids, tokenized.loss_mask)
    assert smol_tokenizer.decode(run) == reply + "<|im_end|>"


def test_extract_reasoning():
    assert extract_reasoning("<think>plan A</think><answer>Up</answer>") == "plan A"
    assert extract_reasoning("<think>unclosed reasoning") == "unclosed reasoning"
    assert extract_reasoning("<answer>Up</answer>") == ""


@pytest.fixture(scope="module")
def tiny_bandit():
    texts = vocabulary_texts("agentgym/Bandit-v0", {}, range(16))
    return load_policy("tiny", texts=texts, seed=0)


def test_groups_share_their_initial_state_and_differ_across_groups(tiny_bandit):
    model, tokenizer = tiny_bandit
    torch.manual_seed(0)
    episodes = collect_rollouts(
        model,
        tokenizer,
        "agentgym/Bandit-v0",
        [3, 4],
        group_size=3,
        sampling=SamplingSettings(max_new_tokens=4),
    )
    assert [(e.group, e.seed) for e in episodes] == [(0, 3)] * 3 + [(1, 4)] * 3
    first_user = [e.chat.messages()[1]["content"] for e in episodes]
    assert len(set(first_user[:3])) == 1 and len(set(first_user[3:])) == 1
    # Bandit seeds 3 and 4 name different arm pairs (first observations, tests/golden).
    env = gymnasium.make("agentgym/Bandit-v0")
    assert env.reset(seed=3)[0] in first_user[0] and env.reset(seed=4)[0] in first_user[3]
    for e in episodes:
        assert len(e.turns) == 1 and e.terminated
        assert e.turns[0].response.startswith("<think>")  # the think prefix is part of the reply
        assert len(e.turns[0].generated_ids) <= 4


def test_rollouts_repeat_exactly_under_the_same_torch_seed(tiny_bandit):
    model, tokenizer = tiny_bandit
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        episodes = collect_rollouts(
            model,
            tokenizer,
            "agentgym/Bandit-v0",
            [0, 1],
            group_size=2,
            sampling=SamplingSettings(max_new_tokens=6),
        )
        runs.append([(e.turns[0].response, e.total_reward) for e in episodes])
    assert runs[0] == runs[1]


def test_context_limit_truncates_the_episode(tiny_bandit):
    model, tokenizer = tiny_bandit
    episodes = collect_rollouts(
        model,
        tokenizer,
        "agentgym/Bandit-v0",
        [0],
        group_size=1,
        sampling=SamplingSettings(max_new_tokens=4, max_context_tokens=16),
    )
    assert episodes[0].truncated and episodes[0].turns == []
