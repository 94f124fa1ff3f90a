"""The chat layer: an episode as chat messages for a tokenizer's chat template (RAGEN style).

The system message holds the environment's ``instructions`` (rules, action format and the action
budget). Each user message holds ``Turn t:``, the reward of the previous turn (and why it was invalid,
if it was), the state, and the actions left; each assistant message is the policy's reply verbatim.
The trainer and the eval harness both build prompts from :class:`ChatEpisode`, so a model sees the
same text in training and in evaluation. The chat template that turns these messages into a
prompt runs in :func:`baselines.llm.prompts.render_prompt` (under CPU and memory limits: a
checkpoint's template is untrusted code), since rendering needs transformers.

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Bandit-v0")
    >>> obs, info = env.reset(seed=0)
    >>> chat = ChatEpisode.from_reset(obs, info)
    >>> [m["role"] for m in chat.messages()]
    ['system', 'user']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentgym.parsing import THINK_OPEN

__all__ = ["ChatEpisode", "ChatTurn", "THINK_PREFIX"]

#: The text that ends a generation prompt in the ``think_answer`` format (RAGEN): the action
#: format's opening think tag (:data:`agentgym.parsing.THINK_OPEN`), under its chat-layer name.
THINK_PREFIX = THINK_OPEN


@dataclass
class ChatTurn:
    """One turn of the conversation: the user message the policy saw and its reply (``None``
    until it replies). The turn's reward and ``info`` live on its
    :class:`agentgym.lockstep.Step`, the one record of a played turn."""

    user: str
    response: str | None = None


class ChatEpisode:
    """The chat of one episode.

    Args:
        instructions: ``info["instructions"]`` from ``reset``.
        observation: the first observation.
        max_turns: the episode's turn budget.
        actions_left: actions still allowed (``info["actions_left"]``).
        max_actions_per_turn: most actions per turn.
    """

    def __init__(
        self,
        instructions: str,
        observation: str,
        *,
        max_turns: int,
        actions_left: int,
        max_actions_per_turn: int,
    ):
        self.instructions = instructions
        self.max_turns = max_turns
        self.max_actions_per_turn = max_actions_per_turn
        self.turns: list[ChatTurn] = [ChatTurn(self._user_text(1, observation, actions_left))]
        self.done = False

    @classmethod
    def from_reset(cls, observation: str, info: dict[str, Any]) -> ChatEpisode:
        """Start a chat from the ``(observation, info)`` that ``env.reset`` returned."""
        return cls(
            info["instructions"],
            observation,
            max_turns=info["max_turns"],
            actions_left=info["actions_left"],
            max_actions_per_turn=info["max_actions_per_turn"],
        )

    def _user_text(self, turn: int, observation: str, actions_left: int, prefix: str = "") -> str:
        per_turn = min(self.max_actions_per_turn, actions_left)
        return (
            f"{prefix}Turn {turn}:\nState:\n{observation}\n"
            f"You have {actions_left} actions left (up to {per_turn} this turn)."
        )

    def record(
        self,
        response: str,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """Add the policy's ``response`` and what ``env.step(response)`` returned.

        Raises:
            RuntimeError: the episode already ended.
        """
        if self.done:
            raise RuntimeError("the episode already ended; start a new ChatEpisode")
        self.turns[-1].response = response
        if terminated or truncated:
            self.done = True
            return
        prefix = f"Reward: {reward:g}\n"
        if not info.get("action_is_valid", True):
            prefix += (
                f"Your last reply was invalid ({info.get('invalid_reason')}); nothing happened.\n"
            )
        self.turns.append(
            ChatTurn(
                self._user_text(len(self.turns) + 1, observation, info["actions_left"], prefix)
            )
        )

    def messages(self) -> list[dict[str, str]]:
        """``[{"role": ..., "content": ...}, ...]``: system, then user/assistant pairs.

        While the episode runs the list ends with the user message awaiting a reply; once it has
        ended, with the last assistant reply.
        """
        out = [{"role": "system", "content": self.instructions}]
        for turn in self.turns:
            out.append({"role": "user", "content": turn.user})
            if turn.response is not None:
                out.append({"role": "assistant", "content": turn.response})
        return out
