"""The environment contract of DESIGN.md, implemented once: :class:`TextEnv`.

Every agentgym environment subclasses :class:`TextEnv` and supplies only its game: how a state is
generated from ``self.np_random``, how one action token is recognised, what an action does, and how
the state is drawn as text. The base class owns everything the contract fixes:

* the spaces (:class:`~agentgym.spaces.UnicodeText` for both observation and action);
* the action format (``think_answer`` / ``answer`` / ``raw``) and ``||``-separated multi-action
  turns up to ``max_actions_per_turn`` (:mod:`agentgym.parsing`);
* the invalid-action policy, one for all environments (``invalid_action=``):

  - ``"penalize"`` (default): a turn that is malformed or holds any unrecognised action is rejected
    whole: no action executes, the state is unchanged, the reward is ``format_penalty``
    (default -0.1), and the turn counts against ``max_turns``.
  - ``"terminate"``: as ``penalize``, and the episode ends (``terminated=True``).
  - ``"noop"``: no penalty; unrecognised actions are skipped and the recognised ones execute.
    A malformed turn executes nothing.

* turn and step budgets: when ``max_turns`` turns or ``max_steps`` executed actions are used up,
  the episode is truncated, or terminated in environments whose budget is a rule of the task
  (:attr:`TextEnv.turn_limit_terminates`: Bandit's pulls, Countdown's single attempt);
* the ``info`` keys (see :data:`STEP_INFO_KEYS`), and ``render()`` as text.

No action string ever raises: a bad action is an invalid action. Calling ``step`` before ``reset``
or after the episode ended is a programming error and raises ``RuntimeError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym

from agentgym.parsing import ACTION_FORMATS, format_answer, parse_turn
from agentgym.spaces import UnicodeText

__all__ = [
    "TextEnv",
    "ActionOutcome",
    "INVALID_ACTION_POLICIES",
    "STEP_INFO_KEYS",
    "RESET_INFO_KEYS",
]

INVALID_ACTION_POLICIES: tuple[str, ...] = ("penalize", "terminate", "noop")

#: Keys present in every ``info`` returned by ``reset``.
RESET_INFO_KEYS: tuple[str, ...] = (
    "instructions",  # str: task rules and action format (system-prompt material)
    "valid_actions",  # list[str] | None: the action vocabulary where it is finite
    "turn",  # int: turns taken so far (0 after reset)
    "max_turns",  # int
    "max_actions_per_turn",  # int
    "actions_left",  # int: actions still allowed in the episode
    "success",  # bool
)

#: Keys present in every ``info`` returned by ``step`` (plus those of reset but ``instructions``).
STEP_INFO_KEYS: tuple[str, ...] = (
    "action_is_valid",  # bool: well formed, and every action recognised
    "action_is_effective",  # bool: the state changed this turn
    "success",  # bool: the task is solved
    "turn",  # int: turns taken, this one included
    "actions",  # tuple[str, ...]: the action pieces parsed from the answer (up to the limit)
    "executed_actions",  # tuple[str, ...]: canonical names of the actions that executed
    "dropped_actions",  # tuple[str, ...]: pieces past max_actions_per_turn, not executed
    "invalid_reason",  # str | None: why the turn or an action was invalid
    "format_penalty",  # float: the penalty applied this turn (0.0 if none)
    "actions_left",  # int
    "valid_actions",  # list[str] | None
)


@dataclass(frozen=True)
class ActionOutcome:
    """What one executed action did.

    Attributes:
        reward: reward of this action (float).
        effective: whether the state changed.
        terminated: whether the episode reached a terminal state (solved or failed).
        info: extra per-action facts merged into the step ``info``.
    """

    reward: float
    effective: bool
    terminated: bool = False
    info: dict[str, Any] | None = None


class TextEnv(gym.Env[str, str]):
    """Base class of every agentgym environment (see the module docstring for the contract).

    Subclasses implement :meth:`_reset_state`, :meth:`_parse_action`, :meth:`_apply_action`,
    :meth:`_render_state`, :meth:`_success`, the :attr:`instructions_text` property, and optionally
    :meth:`valid_actions`, :meth:`oracle_actions` and :meth:`oracle_reasoning`.

    Args:
        max_turns: most turns (model replies) per episode, >= 1.
        max_actions_per_turn: most ``||``-separated actions executed per turn, >= 1.
        max_steps: most actions executed per episode (``None``: ``max_turns * max_actions_per_turn``).
        action_format: ``"think_answer"`` (default), ``"answer"`` or ``"raw"``.
        invalid_action: ``"penalize"`` (default), ``"terminate"`` or ``"noop"``.
        format_penalty: reward of an invalid turn under ``penalize``/``terminate``, <= 0
            (default -0.1).
        render_mode: ``None`` or ``"ansi"``; ``render()`` returns the state text in both.
        max_observation_length: observation space size in code points.
        max_action_length: action space size in code points (longer actions are still accepted
            by ``step`` and handled like any other text).

    Raises:
        ValueError: any argument out of range; the message names the argument and its allowed values.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}
    #: ``True`` where the turn budget is a rule of the task (a fixed number of pulls or attempts):
    #: running out of it then *terminates* the episode. ``False`` (default) where it is a time
    #: limit on a task that could go on: running out *truncates* it (Gymnasium's convention).
    turn_limit_terminates: ClassVar[bool] = False

    def __init__(
        self,
        *,
        max_turns: int,
        max_actions_per_turn: int,
        max_steps: int | None = None,
        action_format: str = "think_answer",
        invalid_action: str = "penalize",
        format_penalty: float = -0.1,
        render_mode: str | None = None,
        max_observation_length: int = 8192,
        max_action_length: int = 16384,
    ):
        _check_int("max_turns", max_turns)
        _check_int("max_actions_per_turn", max_actions_per_turn)
        if max_steps is not None:
            _check_int("max_steps", max_steps)
        if action_format not in ACTION_FORMATS:
            raise ValueError(
                f"action_format must be one of {ACTION_FORMATS}, got {action_format!r}"
            )
        if invalid_action not in INVALID_ACTION_POLICIES:
            raise ValueError(
                f"invalid_action must be one of {INVALID_ACTION_POLICIES}, got {invalid_action!r}"
            )
        if not isinstance(format_penalty, (int, float)) or format_penalty > 0:
            raise ValueError(f"format_penalty must be a number <= 0, got {format_penalty!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.max_turns = max_turns
        self.max_actions_per_turn = max_actions_per_turn
        self.max_steps = max_steps if max_steps is not None else max_turns * max_actions_per_turn
        self.action_format = action_format
        self.invalid_action = invalid_action
        self.format_penalty = float(format_penalty)
        self.render_mode = render_mode
        self.observation_space = UnicodeText(max_length=max_observation_length)
        self.action_space = UnicodeText(max_length=max_action_length)
        self._turn = 0
        self._num_steps = 0
        self._episode_over = True
        self._has_reset = False

    # ------------------------------------------------------------------ subclass hooks

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        """Build a new initial state from ``self.np_random`` (and ``options``); return extra info."""
        raise NotImplementedError

    def _parse_action(self, token: str) -> Any | None:
        """Recognise one action piece (already stripped); ``None`` if it is not an action."""
        raise NotImplementedError

    def _apply_action(self, action: Any) -> ActionOutcome:
        """Execute one recognised action on the state."""
        raise NotImplementedError

    def _render_state(self) -> str:
        """The state as text: the observation."""
        raise NotImplementedError

    def _success(self) -> bool:
        """Whether the task is solved in the current state."""
        raise NotImplementedError

    def _action_name(self, action: Any) -> str:
        """Canonical text of a recognised action (for ``info['executed_actions']``)."""
        return str(action)

    @property
    def instructions_text(self) -> str:
        """Task rules (no format or budget text; :attr:`instructions` adds those)."""
        raise NotImplementedError

    def valid_actions(self) -> list[str] | None:
        """The action vocabulary where it is finite, else ``None``."""
        return None

    def example_actions(self) -> list[str]:
        """Actions the format example of :attr:`instructions` shows: the first valid actions by
        default; an environment whose action set is not finite names a typical one."""
        return list(self.valid_actions() or [])

    def oracle_actions(self) -> list[str]:
        """Actions an oracle takes next from the current state (at most ``max_actions_per_turn``).

        Raises:
            NotImplementedError: the environment has no oracle.
        """
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def oracle_reasoning(self, actions: list[str]) -> str:
        """Why the oracle plays ``actions`` this turn: the ``<think>`` text of ``export-sft`` data.

        Written from the current state, before the move, from facts the observation shows. This
        default names the plan only; an environment whose state has more to name (the arms, the
        position, the boxes, the numbers) overrides it.

        Args:
            actions: what the oracle plays this turn (:meth:`oracle_actions` in this state).

        Returns:
            One or two sentences without tags, e.g. ``"The plan for this turn: Up, Left."``.

        Raises:
            RuntimeError: called before :meth:`reset`.
        """
        return f"The plan for this turn: {self._oracle_plan_text(actions)}."

    def _oracle_plan_text(self, actions: list[str]) -> str:
        """``actions`` as :meth:`oracle_reasoning` names them; refuses a state before reset."""
        if not self._has_reset:
            raise RuntimeError("call reset() before oracle_reasoning()")
        return ", ".join(actions)

    # ------------------------------------------------------------------ the contract

    @property
    def instructions(self) -> str:
        """Task rules plus the action format and budget: the system-prompt material."""
        example = self.example_actions()
        example_actions = example[: min(2, self.max_actions_per_turn)] or ["..."]
        fmt = {
            "think_answer": (
                "Reply with your reasoning inside <think></think> and then your action(s) inside "
                "<answer></answer>, and nothing else, e.g. "
                + format_answer(example_actions, "think_answer", think="...")
            ),
            "answer": "Reply with your action(s) inside <answer></answer>, and nothing else, e.g. "
            + format_answer(example_actions, "answer"),
            "raw": "Reply with your action(s) only, e.g. " + format_answer(example_actions, "raw"),
        }[self.action_format]
        multi = (
            f" You may give up to {self.max_actions_per_turn} actions in one turn, separated by '||'."
            if self.max_actions_per_turn > 1
            else " Give exactly one action per turn."
        )
        return (
            f"{self.instructions_text}\n\n{fmt}.{multi} The episode ends after {self.max_turns} "
            f"turns or {self.max_steps} actions."
        )

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def actions_left(self) -> int:
        return self.max_steps - self._num_steps

    def _budget_info(self) -> dict[str, Any]:
        return {
            "turn": self._turn,
            "max_turns": self.max_turns,
            "max_actions_per_turn": self.max_actions_per_turn,
            "actions_left": self.actions_left,
            "valid_actions": self.valid_actions(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        self._turn = 0
        self._num_steps = 0
        extra = self._reset_state(dict(options or {}))
        self._episode_over = False
        self._has_reset = True
        info = {
            "instructions": self.instructions,
            **self._budget_info(),
            "success": self._success(),
        }
        info.update(extra or {})
        return self._render_state(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        if self._episode_over:
            raise RuntimeError("the episode is over (terminated or truncated): call reset()")
        parsed = parse_turn(action, self.action_format, self.max_actions_per_turn)
        self._turn += 1

        recognised = [self._parse_action(piece) for piece in parsed.actions]
        invalid_reason = parsed.error
        if invalid_reason is None:
            unknown = [p for p, a in zip(parsed.actions, recognised, strict=True) if a is None]
            if unknown:
                invalid_reason = (
                    f"unrecognised action(s): {', '.join(repr(u[:80]) for u in unknown)}"
                )
        is_valid = invalid_reason is None

        reward = 0.0
        penalty = 0.0
        effective = False
        terminated = False
        executed: list[str] = []
        extra: dict[str, Any] = {}
        if is_valid or (self.invalid_action == "noop" and parsed.error is None):
            for act in recognised:
                if act is None:  # noop policy: skip unrecognised pieces
                    continue
                if self._num_steps >= self.max_steps:
                    break
                outcome = self._apply_action(act)
                self._num_steps += 1
                executed.append(self._action_name(act))
                reward += float(outcome.reward)
                effective = effective or outcome.effective
                if outcome.info:
                    extra.update(outcome.info)
                if outcome.terminated:
                    terminated = True
                    break
        if not is_valid and self.invalid_action != "noop":
            penalty = self.format_penalty
            reward += penalty
            if self.invalid_action == "terminate":
                terminated = True

        truncated = False
        if not terminated and (self._turn >= self.max_turns or self._num_steps >= self.max_steps):
            if self.turn_limit_terminates:
                terminated = True
            else:
                truncated = True
        self._episode_over = terminated or truncated
        info = {
            **self._budget_info(),
            "action_is_valid": is_valid,
            "action_is_effective": effective,
            "success": self._success(),
            "actions": parsed.actions,
            "executed_actions": tuple(executed),
            "dropped_actions": parsed.dropped,
            "invalid_reason": invalid_reason,
            "format_penalty": penalty,
            **extra,
        }
        return self._render_state(), reward, terminated, truncated, info

    def render(self) -> str:
        """The current state as text (the observation), whatever ``render_mode`` is."""
        if not self._has_reset:
            raise RuntimeError("call reset() before render()")
        return self._render_state()

    def oracle_answer(self) -> str:
        """The oracle's next turn, written in this environment's action format."""
        return format_answer(self.oracle_actions(), self.action_format, think="oracle")


def _check_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
