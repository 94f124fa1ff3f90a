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
* Reward: the arm's payout; the risky arm's is drawn as ``payout_draws`` says (below).
* Success: an arm with the highest expected payout was pulled (at least once). The *best arm* is
  the risky one if ``E[risky] > E[safe]``, the safe one if ``E[safe] > E[risky]``; on a tie both
  arms count as best (either pull succeeds) and the oracle pulls the safe arm (same expectation,
  no variance). E.g. ``high_arm_prob=0.05``: ``E[risky] = 0.05 * 1.0 = 0.05 < 0.15 = E[safe]``,
  so success means pulling the safe arm, and the oracle pulls it.
* Limits: ``max_turns`` pulls (default 1); the episode terminates after the last pull.

Names. ``name_split="train"`` draws from the training pairs, ``"heldout"`` from the held-out
pairs (disjoint), to test whether a policy learned the names' meaning. ``name_set="agentgym"``
(default) uses :data:`TRAIN_NAME_PAIRS` (6) and :data:`HELDOUT_NAME_PAIRS` (3);
``name_set="ragen"`` uses RAGEN's :data:`RAGEN_TRAIN_NAME_PAIRS` (12) and
:data:`RAGEN_TEST_NAME_PAIRS` (8, RAGEN's ``"test"`` split). At reset the pair is drawn from
``self.np_random`` (``integers(len(pairs))``), then the order (``random() < 0.5``: safe first).

Payout draws (``payout_draws``), the one setting that decides what a GRPO group sees:

* ``"seeded"`` (default; the golden files pin it): the risky payout is the next
  ``self.np_random.random() < high_arm_prob``, after the two reset draws. The whole episode is a
  function of the reset seed and the actions, so every member of a group (same reset seed) that
  pulls the risky arm gets the **same** payout: one draw per group.
* ``"per_episode"``: the arm names and their order still come from ``self.np_random`` (so a group
  still shares its prompt), but the risky payouts come from a generator of their own,
  ``numpy.random.default_rng(SeedSequence(seed, spawn_key=(k,)))`` (the k-th child that
  ``SeedSequence(seed).spawn`` gives), where ``seed`` is the reset seed and ``k`` the **draw
  index**: ``options["payout_draw"]`` if the reset passes one, else the number of earlier
  ``per_episode`` resets with the same seed in this process (every ``BanditEnv`` counts in one
  table, :meth:`BanditEnv.clear_payout_draw_counts` empties it). Episodes of one seed thus draw
  independently. Reproducible: in a fresh process (or after clearing the table) the same resets
  in the same order, on any instances, give the same draws; a reset with ``payout_draw=k``
  gives the same draws anywhere; ``info["payout_draw"]`` records ``k`` so that any episode can
  be replayed exactly. The trainer makes its environments afresh and resets a group's members
  one after another in one process, so member n of a group whose seed is new gets ``k = n``.
  Caveat: a pool that resets one group's members in different processes (the Ray pool spreads
  episodes round-robin over its actors) counts per process, so members in different actors can
  share a draw unless the caller passes ``payout_draw``. A reset without a seed draws the payout
  from ``self.np_random``, whose stream already differs from episode to episode.

RAGEN's Bandit (``mll-lab-nu/RAGEN`` at commit ``20daedc``, the reference of docs/ragen2.md):

* payouts ``lo_arm_score: 0.1``, ``hi_arm_loscore: 0.0``, ``hi_arm_hiscore: 1.0``,
  ``hi_arm_hiscore_prob: 0.25`` (``ragen/env/bandit/config.py:8-11``); ours differ only in the
  safe payout, 0.15 (``low_arm_reward=0.1`` gives RAGEN's);
* name pairs ``ARM_NAMES["train"]`` (12) and ``["test"]`` (8) (``config.py:16-41``), the pair
  drawn as ``int(np_random.random() * len)`` at reset (``env.py:61-62``), then the order
  (``env.py:29-40``, ``random() < 0.5``: safe first);
* the risky payout ``np_random.random() < hi_arm_hiscore_prob`` at the pull (``env.py:48-51``),
  from a generator seeded at reset with ``seed + self.internal_seed`` (``env.py:56-60``,
  "add internal seed to differ random reward generator inside the same group"), where
  ``internal_seed`` is a class-wide count of the instances made before (``env.py:16,25-26``); the
  es_manager gives a group's members one seed (``ragen/llm_agent/es_manager.py:115-117``) and an
  instance each, made once at the start (``:69-89``). So RAGEN draws payouts per episode (our
  ``"per_episode"``); the offset also changes the *names and order* of each member, so RAGEN's
  group members do not share a prompt, against its own config's "under the same group, the env
  config and env seed are ensured to be equal" (``config/base.yaml:159``). ``"per_episode"``
  follows the intent (shared prompt, independent payouts); why, and every other difference:
  docs/ragen2.md, section "Bandit next to RAGEN's".

:data:`RAGEN_KWARGS` holds RAGEN's settings: ``gymnasium.make("agentgym/Bandit-v0",
**RAGEN_KWARGS)``.

``name_set`` and ``payout_draws`` are task parameters (``agentgym/envs/__init__.py``; ``agentgym
list`` prints them): a result bundle records them in ``env_kwargs``, they key a leaderboard of
their own (``name_set="ragen"`` is another board than the default names), and the replay builds
the env with them. A bundle with ``payout_draws="per_episode"`` is refused by the leaderboard,
naming the fix (``"seeded"``): its payouts depend on the evaluating process's reset counts,
which no replay can reproduce.
"""

from __future__ import annotations

import re
import threading
from typing import Any, ClassVar

import numpy as np

from agentgym.text_env import ActionOutcome, TextEnv

__all__ = [
    "BanditEnv",
    "TRAIN_NAME_PAIRS",
    "HELDOUT_NAME_PAIRS",
    "RAGEN_TRAIN_NAME_PAIRS",
    "RAGEN_TEST_NAME_PAIRS",
    "RAGEN_KWARGS",
    "PAYOUT_DRAWS",
    "NAME_SETS",
]

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
#: RAGEN's (safe, risky) training pairs, ``ARM_NAMES["train"]`` (``mll-lab-nu/RAGEN@20daedc``,
#: ``ragen/env/bandit/config.py:17-30``), spelt as RAGEN spells them.
RAGEN_TRAIN_NAME_PAIRS: tuple[tuple[str, str], ...] = (
    ("Teacher", "Trader"),
    ("Nurse", "StartupFounder"),
    ("Librarian", "Investor"),
    ("Accountant", "StockBroker"),
    ("Engineer", "RealEstateAgent"),
    ("Pharmacist", "Musician"),
    ("Clerk", "Freelancer"),
    ("Technician", "Youtuber"),
    ("Planner", "Artist"),
    ("Postman", "Pilot"),
    ("Banker", "VentureCapitalist"),
    ("Gardener", "Cryptominer"),
)
#: RAGEN's (safe, risky) test pairs, ``ARM_NAMES["test"]`` (``config.py:31-40``).
RAGEN_TEST_NAME_PAIRS: tuple[tuple[str, str], ...] = (
    ("Receptionist", "Explorer"),
    ("Archivist", "Filmmaker"),
    ("Bookkeeper", "Consultant"),
    ("SocialWorker", "Photographer"),
    ("Mechanic", "GameDesigner"),
    ("Secretary", "Entrepreneur"),
    ("Cashier", "DataScientist"),
    ("CivilServant", "StartupAccelerator"),
)
#: The values of ``payout_draws`` (module docstring).
PAYOUT_DRAWS: tuple[str, ...] = ("seeded", "per_episode")
#: The values of ``name_set``: which (train, held-out) name pairs.
NAME_SETS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    "agentgym": (TRAIN_NAME_PAIRS, HELDOUT_NAME_PAIRS),
    "ragen": (RAGEN_TRAIN_NAME_PAIRS, RAGEN_TEST_NAME_PAIRS),
}
#: RAGEN's Bandit settings (module docstring, with file:line): safe arm 0.1, risky 1.0 with
#: probability 0.25 else 0.0, RAGEN's name pairs, payouts drawn per episode.
RAGEN_KWARGS: dict[str, Any] = {
    "name_set": "ragen",
    "low_arm_reward": 0.1,
    "high_arm_reward": 1.0,
    "high_arm_prob": 0.25,
    "payout_draws": "per_episode",
}


def _names(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` as whole words."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


class BanditEnv(TextEnv):
    """Two-armed bandit with a safe low arm and a risky high arm (see the module docstring).

    Args:
        name_split: ``"train"`` or ``"heldout"``.
        name_set: ``"agentgym"`` (default) or ``"ragen"``: whose name pairs
            (:data:`NAME_SETS`).
        low_arm_reward: the safe arm's fixed payout (RAGEN: 0.1).
        high_arm_reward: the risky arm's payout when it pays.
        high_arm_prob: probability that the risky arm pays, in [0, 1].
        payout_draws: ``"seeded"`` (default: one draw per reset seed, so a same-seed group
            shares it) or ``"per_episode"`` (RAGEN's: each episode draws its own; module
            docstring).
        **kwargs: :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an unknown split, name set or ``payout_draws``, or a probability outside
            [0, 1].

    Reset option (``reset(seed=s, options={"payout_draw": k})``), ``"per_episode"`` only: the
    draw index ``k`` (an ``int`` >= 0) instead of the process's count; needs a seed.
    """

    turn_limit_terminates = True  # the pulls are the game: no bootstrap past the last one

    #: Per reset seed, how many ``per_episode`` resets with it this process has made (the
    #: default draw index); shared by every instance, guarded by ``_draw_lock``.
    _draw_counts: ClassVar[dict[int, int]] = {}
    _draw_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        *,
        name_split: str = "train",
        name_set: str = "agentgym",
        low_arm_reward: float = 0.15,
        high_arm_reward: float = 1.0,
        high_arm_prob: float = 0.25,
        payout_draws: str = "seeded",
        max_turns: int = 1,
        max_actions_per_turn: int = 1,
        **kwargs: Any,
    ):
        if name_split not in ("train", "heldout"):
            raise ValueError(f"name_split must be 'train' or 'heldout', got {name_split!r}")
        if name_set not in NAME_SETS:
            raise ValueError(
                f"name_set must be one of {sorted(NAME_SETS)}, got {name_set!r} "
                "(use name_set='ragen' for RAGEN's name pairs)"
            )
        if payout_draws not in PAYOUT_DRAWS:
            raise ValueError(
                f"payout_draws must be 'seeded' or 'per_episode', got {payout_draws!r} "
                "(use payout_draws='per_episode' for RAGEN's independent draw per episode)"
            )
        if not 0.0 <= high_arm_prob <= 1.0:
            raise ValueError(f"high_arm_prob must lie in [0, 1], got {high_arm_prob!r}")
        if max_actions_per_turn != 1:
            raise ValueError("Bandit pulls one arm per turn: max_actions_per_turn must be 1")
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        self.name_split = name_split
        self.name_set = name_set
        self.low_arm_reward = float(low_arm_reward)
        self.high_arm_reward = float(high_arm_reward)
        self.high_arm_prob = float(high_arm_prob)
        self.payout_draws = payout_draws
        train, heldout = NAME_SETS[name_set]
        self._pairs = train if name_split == "train" else heldout
        self._arms: tuple[str, str] = self._pairs[0]
        self._risky = 1
        self._pulled_best = False
        self._last: str | None = None
        self._seed: int | None = None
        self._payout_rng: np.random.Generator | None = None

    @classmethod
    def clear_payout_draw_counts(cls) -> None:
        """Forget the process's ``per_episode`` draw counts: the next reset with any seed gets
        draw index 0 again, as in a fresh process."""
        with cls._draw_lock:
            cls._draw_counts.clear()

    @classmethod
    def _next_draw_index(cls, seed: int) -> int:
        with cls._draw_lock:
            k = cls._draw_counts.get(seed, 0)
            cls._draw_counts[seed] = k + 1
        return k

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
    def risky_arm(self) -> str:
        """The name of this episode's risky arm."""
        return self._arms[self._risky]

    @property
    def safe_arm(self) -> str:
        """The name of this episode's safe arm."""
        return self._arms[1 - self._risky]

    @property
    def instructions_text(self) -> str:
        return (
            "You are playing a bandit game with two arms. Pulling an arm gives a reward; the arms' "
            "names hint at how each one pays. Goal: maximize your expected reward. "
            "Answer with the name of the arm to pull."
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._seed = None if seed is None else int(seed)
        return super().reset(seed=seed, options=options)

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        draw = options.get("payout_draw")
        if draw is not None and self.payout_draws != "per_episode":
            raise ValueError(
                "options['payout_draw'] applies only with payout_draws='per_episode'; "
                f"this env has payout_draws={self.payout_draws!r}"
            )
        if draw is not None and (
            isinstance(draw, bool) or not isinstance(draw, (int, np.integer)) or draw < 0
        ):
            raise ValueError(f"options['payout_draw'] must be an int >= 0, got {draw!r}")
        if draw is not None and self._seed is None:
            raise ValueError("options['payout_draw'] needs a reset seed: reset(seed=..., ...)")
        safe, risky = self._pairs[int(self.np_random.integers(len(self._pairs)))]
        if self.np_random.random() < 0.5:
            self._arms, self._risky = (safe, risky), 1
        else:
            self._arms, self._risky = (risky, safe), 0
        self._pulled_best = False
        self._last = None
        extra: dict[str, Any] = {"arms": self._arms}
        self._payout_rng = None
        if self.payout_draws == "per_episode" and self._seed is not None:
            k = self._next_draw_index(self._seed) if draw is None else int(draw)
            sequence = np.random.SeedSequence(self._seed, spawn_key=(k,))
            self._payout_rng = np.random.default_rng(sequence)
            extra["payout_draw"] = k
        return extra

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
            rng = self.np_random if self._payout_rng is None else self._payout_rng
            paid = rng.random() < self.high_arm_prob
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
