"""Bandit-v0: a two-armed bandit whose arms carry semantic names (RAGEN's BiArmBandit).

One arm is *safe*: it always pays ``low_arm_reward`` (default 0.15). The other is *risky*: it pays
``high_arm_reward`` (default 1.0) with probability ``high_arm_prob`` (default 0.25), else 0. The
expected payouts are ``E[safe] = low_arm_reward`` and ``E[risky] = high_arm_prob *
high_arm_reward``; with the defaults 0.25 beats 0.15, so the optimal choice is the risky arm. The
names hint at each arm's kind (a safe-sounding name for the safe arm, a bold one for the risky
arm), and which arm is listed first is drawn per episode, so the position carries no signal.

* Observation: the two arm names, in the episode's order.
* Actions: an arm's name (case-insensitive) or its position, ``1`` or ``2``; a short answer
  (<= 64 characters) that names exactly one arm as whole words, such as ``pull Teacher``, pulls
  that arm.
* Reward: the arm's payout, drawn from ``self.np_random``.
* Success: an arm with the highest expected payout was pulled (at least once). The *best arm* is
  the risky one if ``E[risky] > E[safe]``, the safe one if ``E[safe] > E[risky]``; on a tie both
  arms count as best (either pull succeeds) and the oracle pulls the safe arm (same expectation,
  no variance). E.g. ``high_arm_prob=0.05``: ``E[risky] = 0.05 * 1.0 = 0.05 < 0.15 = E[safe]``,
  so success means pulling the safe arm, and the oracle pulls it.
* Limits: ``max_turns`` pulls (default 1); the episode terminates after the last pull.

``name_split="train"`` draws from :data:`TRAIN_NAME_PAIRS`; ``"heldout"`` from
:data:`HELDOUT_NAME_PAIRS` (disjoint), to test whether a policy learned the names' meaning.
"""

from __future__ import annotations

import re
from typing import Any

from agentgym.text_env import ActionOutcome, TextEnv

__all__ = ["BanditEnv", "TRAIN_NAME_PAIRS", "HELDOUT_NAME_PAIRS"]

#: (safe arm, risky arm) name pairs for training.
TRAIN_NAME_PAIRS: tuple[tuple[str, str], ...] = (
    ("Teacher", "Explorer"),
    ("Librarian", "Gambler"),
    ("Accountant", "Adventurer"),
    ("Gardener", "Treasure Hunter"),
    ("Clerk", "Daredevil"),
    ("Nurse", "Stuntman"),
)
#: (safe arm, risky arm) name pairs held out from training.
HELDOUT_NAME_PAIRS: tuple[tuple[str, str], ...] = (
    ("Baker", "Pirate"),
    ("Tailor", "Mountaineer"),
    ("Postman", "Speculator"),
)


def _names(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` as whole words."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


class BanditEnv(TextEnv):
    """Two-armed bandit with a safe low arm and a risky high arm (see the module docstring).

    Args:
        name_split: ``"train"`` or ``"heldout"``.
        low_arm_reward: the safe arm's fixed payout.
        high_arm_reward: the risky arm's payout when it pays.
        high_arm_prob: probability that the risky arm pays, in [0, 1].
        **kwargs: :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an unknown split or a probability outside [0, 1].
    """

    turn_limit_terminates = True  # the pulls are the game: no bootstrap past the last one

    def __init__(
        self,
        *,
        name_split: str = "train",
        low_arm_reward: float = 0.15,
        high_arm_reward: float = 1.0,
        high_arm_prob: float = 0.25,
        max_turns: int = 1,
        max_actions_per_turn: int = 1,
        **kwargs: Any,
    ):
        if name_split not in ("train", "heldout"):
            raise ValueError(f"name_split must be 'train' or 'heldout', got {name_split!r}")
        if not 0.0 <= high_arm_prob <= 1.0:
            raise ValueError(f"high_arm_prob must lie in [0, 1], got {high_arm_prob!r}")
        if max_actions_per_turn != 1:
            raise ValueError("Bandit pulls one arm per turn: max_actions_per_turn must be 1")
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        self.name_split = name_split
        self.low_arm_reward = float(low_arm_reward)
        self.high_arm_reward = float(high_arm_reward)
        self.high_arm_prob = float(high_arm_prob)
        self._pairs = TRAIN_NAME_PAIRS if name_split == "train" else HELDOUT_NAME_PAIRS
        self._arms: tuple[str, str] = self._pairs[0]
        self._risky = 1
        self._pulled_best = False
        self._last: str | None = None

    @property
    def expected_payouts(self) -> tuple[float, float]:
        """``(E[safe], E[risky]) = (low_arm_reward, high_arm_prob * high_arm_reward)``, in reward
        units per pull."""
        return self.low_arm_reward, self.high_arm_prob * self.high_arm_reward

    @property
    def risky_is_best(self) -> bool:
        """Whether the risky arm has the strictly higher expected payout (a tie: the safe arm)."""
        safe, risky = self.expected_payouts
        return risky > safe

    @property
    def best_arm(self) -> str:
        """The name of the arm the oracle pulls this episode (see :attr:`risky_is_best`)."""
        best = self._risky if self.risky_is_best else 1 - self._risky
        return self._arms[best]

    @property
    def instructions_text(self) -> str:
        return (
            "You are playing a bandit game with two arms. Pulling an arm gives a reward; the arms' "
            "names hint at how each one pays. Goal: maximize your expected reward. "
            "Answer with the name of the arm to pull."
        )

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        safe, risky = self._pairs[int(self.np_random.integers(len(self._pairs)))]
        if self.np_random.random() < 0.5:
            self._arms, self._risky = (safe, risky), 1
        else:
            self._arms, self._risky = (risky, safe), 0
        self._pulled_best = False
        self._last = None
        return {"arms": self._arms}

    def valid_actions(self) -> list[str]:
        return list(self._arms)

    def _parse_action(self, token: str) -> int | None:
        key = " ".join(token.split()).casefold()
        for index, name in enumerate(self._arms):
            if key in (name.casefold(), str(index + 1)):
                return index
        # A short phrase naming exactly one arm ("pull the Teacher arm") pulls that arm, as an
        # LLM's answer often wraps the name; a phrase naming both arms, or neither, is invalid.
        if len(key) <= 64:
            named = [i for i, name in enumerate(self._arms) if _names(key, name.casefold())]
            if len(named) == 1:
                return named[0]
        return None

    def _action_name(self, action: int) -> str:
        return self._arms[action]

    def _apply_action(self, action: int) -> ActionOutcome:
        safe_value, risky_value = self.expected_payouts
        if action == self._risky:
            self._pulled_best |= risky_value >= safe_value
            paid = self.np_random.random() < self.high_arm_prob
            reward = self.high_arm_reward if paid else 0.0
        else:
            self._pulled_best |= safe_value >= risky_value
            reward = self.low_arm_reward
        self._last = f"You pulled {self._arms[action]} and received {reward:g}."
        return ActionOutcome(reward=reward, effective=True)

    def _success(self) -> bool:
        return self._pulled_best

    def _render_state(self) -> str:
        lines = [f"Arm 1: {self._arms[0]}", f"Arm 2: {self._arms[1]}"]
        if self._last:
            lines.append(self._last)
        return "\n".join(lines)

    def oracle_actions(self) -> list[str]:
        return [self.best_arm]

    def oracle_reasoning(self, actions: list[str]) -> str:
        """Both arm names, which one sounds risky and which safe, and the arm the oracle pulls.

        Args:
            actions: the oracle's pull (:meth:`oracle_actions`).

        Returns:
            e.g. ``"The arms are Nurse and Stuntman. Stuntman sounds like the arm with the higher
            expected reward, Nurse like the safe small one, so I pull Stuntman."``

        Raises:
            RuntimeError: called before :meth:`reset`.
        """
        plan = self._oracle_plan_text(actions)
        arms = self.valid_actions()
        other = [a for a in arms if a not in actions]
        rest = other[0] if other else plan
        if self.risky_is_best:
            return (
                f"The arms are {arms[0]} and {arms[1]}. {plan} sounds like the arm with the "
                f"higher expected reward, {rest} like the safe small one, so I pull {plan}."
            )
        # The settings make the safe arm at least as good in expectation (the success rule).
        return (
            f"The arms are {arms[0]} and {arms[1]}. {plan} sounds like the safe arm, {rest} like "
            f"the risky one; here the safe arm's expected reward is at least the risky one's, "
            f"so I pull {plan}."
        )
