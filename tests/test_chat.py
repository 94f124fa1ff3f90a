"""Unit tests of agentgym.chat.ChatEpisode against chat text written out by hand."""

from __future__ import annotations

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.chat import ChatEpisode

BANDIT_RULES = (
    "You are playing a bandit game with two arms. Pulling an arm gives a reward; the arms' names "
    "hint at how each one pays. Goal: maximize your expected reward. Answer with the name of the "
    "arm to pull."
)


def test_scripted_three_turn_bandit_episode() -> None:
    """Three pulls of Bandit-v0 at seed 0 (arms Nurse, Stuntman): an invalid turn, the safe arm,
    then the risky arm (made to always pay, so that every reward is known in advance)."""
    env = gymnasium.make("agentgym/Bandit-v0", max_turns=3, high_arm_prob=1.0)
    chat = ChatEpisode.from_reset(*env.reset(seed=0))
    replies = [
        "<think>go up</think><answer>Up</answer>",
        "<think>safe</think><answer>Nurse</answer>",
        "<think>bold</think><answer>Stuntman</answer>",
    ]
    rewards = []
    for reply in replies:
        assert not chat.done
        observation, reward, terminated, truncated, info = env.step(reply)
        rewards.append(reward)
        chat.record(reply, observation, reward, terminated, truncated, info)
    assert rewards == [-0.1, 0.15, 1.0]
    assert chat.done

    system = (
        BANDIT_RULES + "\n\nReply with your reasoning inside <think></think> and then your "
        "action(s) inside <answer></answer>, and nothing else, e.g. "
        "<think>...</think><answer>Nurse</answer>. Give exactly one action per turn. "
        "The episode ends after 3 turns or 3 actions."
    )
    assert chat.messages() == [
        {"role": "system", "content": system},
        {
            "role": "user",
            "content": "Turn 1:\nState:\nArm 1: Nurse\nArm 2: Stuntman\n"
            "You have 3 actions left (up to 1 this turn).",
        },
        {"role": "assistant", "content": "<think>go up</think><answer>Up</answer>"},
        {
            "role": "user",
            "content": "Reward: -0.1\n"
            "Your last reply was invalid (unrecognised action(s): 'Up'); nothing happened.\n"
            "Turn 2:\nState:\nArm 1: Nurse\nArm 2: Stuntman\n"
            "You have 3 actions left (up to 1 this turn).",
        },
        {"role": "assistant", "content": "<think>safe</think><answer>Nurse</answer>"},
        {
            "role": "user",
            "content": "Reward: 0.15\n"
            "Turn 3:\nState:\nArm 1: Nurse\nArm 2: Stuntman\n"
            "You pulled Nurse and received 0.15.\n"
            "You have 2 actions left (up to 1 this turn).",
        },
        {"role": "assistant", "content": "<think>bold</think><answer>Stuntman</answer>"},
    ]
    # The chat keeps the conversation only; each turn's reward and info are on its lockstep Step.
    assert [t.response for t in chat.turns] == replies
    with pytest.raises(RuntimeError, match="already ended"):
        chat.record("again", "", 0.0, True, False, {})
    env.close()


def test_running_episode_ends_with_the_user_message() -> None:
    chat = ChatEpisode("Rules.", "S0", max_turns=4, actions_left=8, max_actions_per_turn=5)
    assert chat.messages() == [
        {"role": "system", "content": "Rules."},
        {
            "role": "user",
            "content": "Turn 1:\nState:\nS0\nYou have 8 actions left (up to 5 this turn).",
        },
    ]
    info = {"action_is_valid": True, "actions_left": 3}
    chat.record("<answer>a || b</answer>", "S1", 1.0, False, False, info)
    # Reward 1.0 prints as "1" (format ":g"); the per-turn cap falls to the 3 actions left.
    assert chat.messages()[-1] == {
        "role": "user",
        "content": "Reward: 1\nTurn 2:\nState:\nS1\nYou have 3 actions left (up to 3 this turn).",
    }
    assert chat.messages()[-2] == {"role": "assistant", "content": "<answer>a || b</answer>"}
    assert not chat.done


def test_truncation_ends_the_chat() -> None:
    chat = ChatEpisode("R", "S0", max_turns=1, actions_left=1, max_actions_per_turn=1)
    chat.record("x", "S0", -0.1, False, True, {"action_is_valid": False, "actions_left": 1})
    assert chat.done
    assert [m["role"] for m in chat.messages()] == ["system", "user", "assistant"]
