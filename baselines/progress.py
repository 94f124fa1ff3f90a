"""What a training run shows while it runs: the phase inside a step, and steps that learn nothing.

* :class:`StepProgress` puts the current phase of a step on the progress bar, live: generation
  turn t of T with the tokens/s of the last call, environment stepping, scoring (MI diagnostics),
  the update (forward/backward). It wraps the rollout engine (:class:`ProgressEngine`) to see each
  generation call; nothing in the rollout loop changes.
* :class:`StallMonitor` watches for steps that teach nothing and says why (no valid actions, or
  no reward spread in any group), what helps, and stops the run after
  ``train.max_steps_without_update`` empty steps in a row (RAGEN stops after 5; Wang et al.,
  2025, ``ragen/trainer``), or after ``train.max_steps_without_signal`` steps in a row without a
  reward signal even where a step was taken on the regularisers or the critic alone.
"""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = [
    "StepProgress",
    "ProgressEngine",
    "StallMonitor",
    "RewardVarianceStop",
    "no_update_cause",
    "REMEDIES",
]

#: What helps when steps keep ending without an update (printed with the warning).
REMEDIES = (
    "remedies: start from a policy that already acts validly (a supervised warm start on oracle "
    "episodes: `agentgym export-sft --env ENV --out runs/sft/ENV.jsonl`, then "
    "`python -m baselines.sft --config baselines/configs/sft/...`; README, the multi-turn "
    "recipe), a larger model (model.path=...), a shorter or easier task (e.g. "
    "rollout.env_kwargs={max_turns: 2}, a smaller level), more episodes per group "
    "(rollout.group_size) or a higher rollout.temperature for reward spread, or more "
    "rollout.max_new_tokens when replies are cut before the answer"
)


def no_update_cause(metrics: dict[str, Any], critic: bool = False) -> str | None:
    """Why the step of ``metrics`` made no policy update from the task reward, or None when it
    made one.

    A step that still stepped on an entropy or KL term (as RAGEN does) or, with a critic (PPO), on
    the value baseline's errors alone counts as no update here: the task taught the policy
    nothing, which is what the stall monitor watches. Causes, first match: no valid actions
    (``rollout/valid_action_rate`` == 0), no reward spread (group-relative advantages: every
    group's rewards equal, ``filter/num_zero_spread`` == ``filter/num_groups``; with a critic,
    whose baseline is not the group's: every reward of the batch equal,
    ``rollout/reward_std`` == 0), filtering dropped every group, no policy tokens.

    Args:
        metrics: one step's metrics.
        critic: the advantages come from a learnt value baseline (PPO), not from groups.
    """
    skipped = bool(metrics.get("actor/skipped"))
    valid = metrics.get("rollout/valid_action_rate")
    groups = metrics.get("filter/num_groups")
    zero = metrics.get("filter/num_zero_spread")
    flat = metrics.get("rollout/reward_std") == 0 if critic else bool(groups and zero == groups)
    no_signal = valid == 0 or flat
    if not skipped and not no_signal:
        return None
    alone = ""
    if not skipped:
        moved = "the critic's errors and the regularisers" if critic else "the entropy/KL terms"
        alone = f" (a step was still taken, on {moved} alone)"
    if valid == 0:
        return (
            "no valid actions: every turn of every episode was invalid "
            f"(rollout/valid_action_rate=0), so every episode got the same reward{alone}"
        )
    if flat and critic:
        return (
            "no reward spread: every episode of the batch got the same reward "
            f"(rollout/reward_std=0), so the task gave no signal{alone}"
        )
    if flat:
        return (
            f"no reward spread: in all {int(groups)} groups every episode got the same reward "
            f"(filter/num_zero_spread = filter/num_groups), so every advantage is 0{alone}"
        )
    if metrics.get("filter/kept_fraction") == 0:
        return "SNR-Aware Filtering kept no group (filter/kept_fraction=0)"
    return "the kept episodes hold no policy tokens (actor/tokens_trained=0)"


class StallMonitor:
    """Counts steps in a row that taught the policy nothing; warns and decides when to stop.

    Two counts, each with its own limit:

    * ``count``: steps in a row without any update (``actor/skipped``), RAGEN's empty steps; the
      run stops at ``limit`` (``train.max_steps_without_update``), as RAGEN stops after 5.
    * ``silent``: steps in a row without a reward signal (:func:`no_update_cause` is not None),
      whether or not a step was taken on the entropy/KL terms or, with PPO, on the critic's
      errors; the run stops at ``signal_limit`` (``train.max_steps_without_signal``). RAGEN has no
      such stop (its empty-step count resets on such steps); without it, a multi-turn run whose
      every action is invalid trains on the regularisers for as long as it is let run.

    Args:
        limit: stop after this many empty steps in a row; 0 never stops on this count.
        count: empty steps already in a row (restored on resume).
        signal_limit: stop after this many steps in a row without a reward signal; 0 never.
        silent: steps without a reward signal already in a row (restored on resume).
        critic: advantages come from a value baseline (PPO): see :func:`no_update_cause`.
    """

    def __init__(
        self,
        limit: int,
        count: int = 0,
        signal_limit: int = 0,
        silent: int = 0,
        critic: bool = False,
    ):
        self.limit = limit
        self.count = count
        self.signal_limit = signal_limit
        self.silent = silent
        self.critic = critic

    def observe(self, step: int, metrics: dict[str, Any]) -> str | None:
        """Record one step; returns the warning to print, or None when the task taught it."""
        cause = no_update_cause(metrics, self.critic)
        if cause is None:
            self.count = self.silent = 0
            return None
        self.silent += 1
        silent = _in_a_row(self.silent, "max_steps_without_signal", self.signal_limit)
        if not metrics.get("actor/skipped"):
            # A step was taken, on the regularisers or the critic alone: an update (RAGEN's stop
            # counts only empty steps), but the task taught nothing.
            self.count = 0
            return (
                f"warning: step {step} had no reward signal ({silent} in a row): {cause}. "
                f"{REMEDIES}"
            )
        self.count += 1
        empty = _in_a_row(self.count, "max_steps_without_update", self.limit)
        return (
            f"warning: step {step} made no policy update ({empty} in a row; "
            f"without a reward signal: {silent}): {cause}. {REMEDIES}"
        )

    @property
    def should_stop(self) -> bool:
        return (bool(self.limit) and self.count >= self.limit) or (
            bool(self.signal_limit) and self.silent >= self.signal_limit
        )

    def stop_message(self) -> str:
        if self.limit and self.count >= self.limit:
            what = (
                f"{self.count} steps in a row without a policy update "
                f"(train.max_steps_without_update={self.limit}; 0 never stops)"
            )
        else:
            what = (
                f"{self.silent} steps in a row without a reward signal "
                f"(train.max_steps_without_signal={self.signal_limit}; 0 never stops)"
            )
        return (
            f"stopping: {what}. The checkpoint and metrics so far are kept; see the warnings "
            "above for the cause."
        )


class RewardVarianceStop:
    """RAGEN's reward-variance early stop (``ragen/trainer/agent_trainer.py:1211-1235``).

    Each step whose filter kept at least one group (RAGEN: a step whose filtered batch is not
    empty) gives its ``rollout/in_group_reward_std``: the mean over the step's groups of the
    unbiased std of their episode rewards (``rollout_filter.py:428,439``). The first
    :data:`BASE_STEPS` such steps set the base (their mean); from then on the last
    :data:`WINDOW` such steps are kept, and the run stops once all of them are below
    :data:`FRACTION` x base. A base of 0 never stops (nothing is below 0).

    Args:
        state: :meth:`state` of a run being resumed, or None for a fresh run.

    Example:
        >>> stop = RewardVarianceStop()
        >>> for std in [0.5] * 10 + [0.04] * 9:
        ...     stop.observe({"filter/num_kept": 8.0, "rollout/in_group_reward_std": std})
        >>> stop.should_stop, stop.base
        (False, 0.5)
        >>> stop.observe({"filter/num_kept": 8.0, "rollout/in_group_reward_std": 0.04})
        >>> stop.should_stop
        True
    """

    #: Steps whose mean std is the base (RAGEN ``first_10_steps_variances``).
    BASE_STEPS = 10
    #: Steps in a row that must all fall below the threshold (RAGEN ``deque(maxlen=10)``).
    WINDOW = 10
    #: The threshold as a share of the base (RAGEN ``0.1 * self.base_variance``).
    FRACTION = 0.1

    def __init__(self, state: dict[str, Any] | None = None):
        state = state or {}
        self.first: list[float] = [float(x) for x in state.get("first", [])]
        self.recent: list[float] = [float(x) for x in state.get("recent", [])]

    @property
    def base(self) -> float | None:
        """The mean of the first :data:`BASE_STEPS` stds, once there are that many."""
        if len(self.first) < self.BASE_STEPS:
            return None
        return sum(self.first) / self.BASE_STEPS

    def observe(self, metrics: dict[str, Any]) -> None:
        """Record one step's metrics (``filter/num_kept``, ``rollout/in_group_reward_std``)."""
        std = metrics.get("rollout/in_group_reward_std")
        if std is None or not metrics.get("filter/num_kept"):
            return
        if self.base is None:
            self.first.append(float(std))
        else:
            self.recent = [*self.recent, float(std)][-self.WINDOW :]

    @property
    def should_stop(self) -> bool:
        base = self.base
        return (
            base is not None
            and len(self.recent) == self.WINDOW
            and all(std < self.FRACTION * base for std in self.recent)
        )

    def stop_message(self) -> str:
        recent = ", ".join(f"{std:.4f}" for std in self.recent)
        return (
            f"stopping: the in-group reward std of the last {self.WINDOW} steps ({recent}) all "
            f"fell below {self.FRACTION} x its mean over the first {self.BASE_STEPS} steps "
            f"({self.base:.4f}) (train.reward_variance_stop, RAGEN's early stop). The "
            "checkpoint and metrics so far are kept."
        )

    def state(self) -> dict[str, list[float]]:
        """What a checkpoint keeps so that a resumed run stops where an unbroken one would."""
        return {"first": list(self.first), "recent": list(self.recent)}


def _in_a_row(count: int, setting: str, limit: int) -> str:
    """``"3 of train.<setting>=5"``, or ``"3"`` where the limit is 0 (never stops)."""
    return f"{count} of train.{setting}={limit}" if limit else f"{count}"


class StepProgress:
    """The phase of the current step, shown live as the progress bar's postfix.

    Args:
        bar: a tqdm bar (or None: phases are then only kept in :attr:`phase`).
        max_turns: turns per episode (T in "generation turn t/T"), or None when unknown.
    """

    def __init__(self, bar: Any | None, max_turns: int | None = None):
        self.bar = bar
        self.max_turns = max_turns
        self.step = 0
        self.turn = 0
        self.context = ""
        self.phase = ""
        self.history: list[str] = []

    def begin_step(self, step: int) -> None:
        self.step = step
        self.set("rollout")

    def set(self, phase: str) -> None:
        """Show ``phase`` (e.g. "scoring", "validation") for the current step. A phase starts
        its own turn count: the generations that follow are counted from turn 1 under it (the
        validation episodes' turns are not the rollout's turns 6, 7, ...)."""
        self.turn = 0
        self.context = "" if phase == "rollout" else f"{phase}: "
        self._show(phase)

    def _show(self, phase: str) -> None:
        self.phase = phase
        self.history.append(phase)
        if self.bar is not None:
            self.bar.set_postfix_str(f"step {self.step}: {phase}", refresh=True)

    def generating(self, episodes: int) -> None:
        self.turn += 1
        total = f"/{self.max_turns}" if self.max_turns else ""
        self._show(f"{self.context}generation turn {self.turn}{total} ({episodes} episodes)")

    def generated(self, tokens: int, seconds: float) -> None:
        total = f"/{self.max_turns}" if self.max_turns else ""
        rate = tokens / seconds if seconds > 0 else 0.0
        self._show(
            f"{self.context}env step after turn {self.turn}{total} ({tokens} tokens at "
            f"{rate:.0f} tokens/s)"
        )


class ProgressEngine:
    """A rollout engine that reports each ``generate`` call to a :class:`StepProgress`.

    Every other attribute (``name``, ``provides_logprobs``, ``samples_from_copy``,
    ``sync_weights``, ``release``, ``close``) is the wrapped engine's.
    """

    def __init__(self, engine: Any, progress: StepProgress):
        self._engine = engine
        self._progress = progress

    def generate(self, prompts: list[Any], sampling: Any, generators: Any = None) -> list[Any]:
        self._progress.generating(len(prompts))
        t0 = time.perf_counter()
        if generators is None:
            out = self._engine.generate(prompts, sampling)
        else:
            out = self._engine.generate(prompts, sampling, generators=generators)
        self._progress.generated(sum(len(g.sampled_ids) for g in out), time.perf_counter() - t0)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def max_turns_of(env_id: str, env_kwargs: dict[str, Any]) -> int | None:
    """The ``max_turns`` an environment of ``env_id`` would have (None when it has none)."""
    import gymnasium as gym

    try:
        env = gym.make(env_id, **env_kwargs)
    except Exception:  # only for display
        return None
    try:
        value = getattr(env.unwrapped, "max_turns", None)
        return int(value) if value else None
    finally:
        env.close()


def say(message: str) -> None:
    """Print ``message`` to stderr without breaking a tqdm bar."""
    try:
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)
    except ModuleNotFoundError:
        print(message, file=sys.stderr)
