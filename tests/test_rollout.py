"""Rollouts of the episode loop on a tiny policy: groups, seeds, context limit (the token-exact
rows are tested in tests/test_episodes.py)."""

from __future__ import annotations

import gymnasium
import pytest
import torch

from baselines.collapse.reasoning import extract_reasoning
from baselines.episodes import collect_rollouts, vocabulary_texts
from baselines.llm.engines import SamplingSettings
from baselines.llm.policy import load_policy


def test_extract_reasoning():
    assert extract_reasoning("<think>plan A</think><answer>Up</answer>") == "plan A"
    assert extract_reasoning("<think>unclosed reasoning") == "unclosed reasoning"
    assert extract_reasoning("<answer>Up</answer>") == ""


@pytest.fixture(scope="module")
def tiny_bandit():
    texts = vocabulary_texts("agentgym/Bandit-v0", {}, range(16))
    return load_policy("tiny", texts=texts, seed=0)


@pytest.fixture()
def bandit_rollouts(tiny_bandit):
    """``(seeds, group_size, **sampling)`` -> the tiny policy's Bandit-v0 episodes."""
    model, tokenizer = tiny_bandit

    def collect(seeds: list[int], group_size: int, **sampling):
        settings = SamplingSettings(**sampling)
        return collect_rollouts(
            model, tokenizer, "agentgym/Bandit-v0", seeds, group_size=group_size, sampling=settings
        )

    return collect


def test_groups_share_their_initial_state_and_differ_across_groups(bandit_rollouts):
    torch.manual_seed(0)
    episodes = bandit_rollouts([3, 4], group_size=3, max_new_tokens=4)
    assert [(e.group, e.seed) for e in episodes] == [(0, 3)] * 3 + [(1, 4)] * 3
    first_user = [e.chat.messages()[1]["content"] for e in episodes]
    assert len(set(first_user[:3])) == 1 and len(set(first_user[3:])) == 1
    # Bandit seeds 3 and 4 name different arm pairs (first observations, tests/golden).
    env = gymnasium.make("agentgym/Bandit-v0")
    assert env.reset(seed=3)[0] in first_user[0] and env.reset(seed=4)[0] in first_user[3]
    for e in episodes:
        assert len(e.turns) == 1 and e.terminated
        assert e.turns[0].action.startswith("<think>")  # the think prefix is part of the reply
        assert len(e.turns[0].sample.sampled_ids) <= 4


def test_rollouts_repeat_exactly_under_the_same_torch_seed(bandit_rollouts):
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        episodes = bandit_rollouts([0, 1], group_size=2, max_new_tokens=6)
        runs.append([(e.turns[0].action, e.total_reward) for e in episodes])
    assert runs[0] == runs[1]


def test_context_limit_truncates_the_episode(bandit_rollouts):
    episodes = bandit_rollouts([0], group_size=1, max_new_tokens=4, max_context_tokens=16)
    assert episodes[0].truncated and episodes[0].turns == []
