"""Countdown-v0: reach a target number with the given numbers and + - * /.

Each episode draws ``num_numbers`` numbers (default 4, from 3 to 6) uniformly from 1 to
``max_number`` (default 100, repeats possible) from ``self.np_random``, then builds a random
expression tree over all of them whose every intermediate value is a positive integer no larger than
``max_target`` (default 1000): ``-`` only as larger minus smaller, ``/`` only when exact (divisor
above 1). Its value is the target, so every problem is solvable by construction, and the tree is
kept as the reference solution (the oracle's answer).

* Observation: ``Numbers: [86, 64, 52, 27]`` and ``Target: 3`` on two lines; after an attempt a
  third line says how it was scored (useful when ``max_turns > 1`` allows several attempts).
* Action: one arithmetic expression using ``+ - * /``, parentheses and integers, each given number
  exactly once (a number given twice is used twice; ``number_rule="subset"``: at most once),
  optionally followed by ``= <target>``;
  e.g. ``<think>...</think><answer>(44 + 19 + 35) * 2 = 196</answer>``. Evaluation is exact
  (fractions) by the safe parser of :mod:`agentgym.solvers.countdown_expr`; the text after ``=``
  must be a whole number and is not scored (the left side is).
* Reward (RAGEN's and TinyZero's rule, with the number check made explicit):

  - 1.0: the expression uses only given numbers and equals the target (``success``; terminated);
  - ``format_score`` (0.1): it uses only given numbers but has another value;
  - 0.0: it uses a number not given, or a number more often than given;
  - invalid action: the answer is not an arithmetic expression with a value (letters, ``**`` or
    ``^``, unbalanced parentheses, division by zero, over 200 characters, parentheses nested over
    16 deep). The shared policy of :class:`~agentgym.text_env.TextEnv` applies (default: reward
    -0.1); the observation says what was wrong.

  With several attempts (``max_turns > 1``) the reward of an attempt is its score's improvement
  over the best score of the episode so far, ``max(0, score - best)`` (as CodeExec's
  ``"counts"``): an episode's return from valid answers is its best attempt's score, so a wrong
  attempt pays the format score once, and solving at the third attempt after two wrong ones
  returns 0.1 + 0 + 0.9 = 1.0, no more than solving at once (stalling never pays). With the
  default single attempt this is the score itself. ``info["score"]`` holds the attempt's own
  score (1 / ``format_score`` / 0).

  So an answer that *is* arithmetic is a valid action and is scored by the task (1 / 0.1 / 0);
  one that is not is a malformed turn, like any unparsable action in every environment. Breaking
  the number rule scores 0 rather than RAGEN's format score 0.1, so that writing any number at all
  does not earn reward. RAGEN counts every digit run of the answer, so a trailing ``= 24`` there
  breaks the check; here the text after ``=`` is not scored.
* Options: ``reset(options={"numbers": [100, 4, 8, 2], "target": 24})`` poses a given problem
  (2 to 6 positive numbers) instead of a random one, e.g. to evaluate on a fixed data set; its
  oracle answer comes from the brute-force solver.
* Limits: ``max_turns`` attempts (default 1, one answer per turn); the attempts are the task's
  rule, so the episode *terminates* after the last one (``turn_limit_terminates``), or as soon as
  an answer is correct.

Sources: TinyZero's Countdown task (``countdown.py`` reward: 1 correct, 0.1 format score) and
RAGEN's Countdown environment (numbers 1..100, ``<answer>`` holding the equation).

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Countdown-v0")
    >>> obs, info = env.reset(seed=0)
    >>> answer = env.unwrapped.oracle_answer()
    >>> env.step(answer)[1]
    1.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.solvers.countdown import solve
from agentgym.solvers.countdown_expr import (
    ATOM_PRECEDENCE,
    MAX_DEPTH,
    MAX_LENGTH,
    PRECEDENCE,
    ExpressionResult,
    join_expression,
    parse_expression,
    uses_given_numbers,
)
from agentgym.text_env import ActionOutcome, TextEnv

__all__ = ["CountdownEnv", "generate_problem", "CountdownProblem"]

MIN_NUMBERS, MAX_NUMBERS = 3, 6
MIN_GIVEN = 2  # a problem given through reset options may hold as few as two numbers
NUMBER_RULES = ("exact", "subset")


@dataclass(frozen=True)
class CountdownProblem:
    """One Countdown problem.

    Attributes:
        numbers: the given numbers, in the order shown.
        target: the value to reach.
        solution: a reference expression (``None`` for a problem given through ``reset`` options
            until the oracle solves it).
    """

    numbers: tuple[int, ...]
    target: int
    solution: str | None


def generate_problem(
    rng: np.random.Generator, num_numbers: int = 4, max_number: int = 100, max_target: int = 1000
) -> CountdownProblem:
    """Draw a Countdown problem with a solution by construction.

    Numbers are drawn uniformly from ``1..max_number``. Then, until one value is left, two values
    are picked at random and replaced by ``a op b`` with ``op`` drawn among those that keep the
    result a positive integer ``<= max_target``: ``+`` and ``*`` if small enough, ``-`` as larger
    minus smaller when they differ, ``/`` when exact with a divisor above 1. One of them always
    applies (two equal values ``v`` allow ``v / v`` when ``v > 1``, else ``1 + 1``), so no redraw is
    needed. The last value is the target, in ``1..max_target``. A problem whose target is one of
    its numbers (about 2% of draws) is trivial and is drawn again.

    Args:
        rng: the generator (the environment's ``np_random``).
        num_numbers: how many numbers, >= 2.
        max_number: largest drawable number, >= 1 and <= ``max_target``.
        max_target: largest target and intermediate value.

    Returns:
        A :class:`CountdownProblem`; its solution uses every number once.
    """
    while True:
        problem = _draw_problem(rng, num_numbers, max_number, max_target)
        if problem.target not in problem.numbers:
            return problem


def _draw_problem(
    rng: np.random.Generator, num_numbers: int, max_number: int, max_target: int
) -> CountdownProblem:
    numbers = tuple(int(n) for n in rng.integers(1, max_number + 1, size=num_numbers))
    pool: list[tuple[int, str, int]] = [(n, str(n), ATOM_PRECEDENCE) for n in numbers]
    while len(pool) > 1:
        i, j = (int(k) for k in rng.choice(len(pool), size=2, replace=False))
        (a, a_text, a_prec), (b, b_text, b_prec) = pool[i], pool[j]
        if a < b:  # larger operand on the left, for - and /
            (a, a_text, a_prec), (b, b_text, b_prec) = (b, b_text, b_prec), (a, a_text, a_prec)
        options: list[tuple[str, int]] = []
        if a + b <= max_target:
            options.append(("+", a + b))
        if a * b <= max_target:
            options.append(("*", a * b))
        if a > b:
            options.append(("-", a - b))
        if b > 1 and a % b == 0:
            options.append(("/", a // b))
        op, value = options[int(rng.integers(len(options)))]
        text = join_expression(op, a_text, a_prec, b_text, b_prec)
        pool = [item for k, item in enumerate(pool) if k not in (i, j)]
        pool.append((value, text, PRECEDENCE[op]))
    target, solution, _ = pool[0]
    return CountdownProblem(numbers, target, solution)


class CountdownEnv(TextEnv):
    """Countdown: combine the given numbers with + - * / to reach the target (module docstring).

    Args:
        num_numbers: how many numbers per problem, 3 to 6 (default 4).
        max_number: numbers are drawn from ``1..max_number`` (default 100).
        max_target: bound on the target and every intermediate value of the reference (default
            1000).
        format_score: score of a well-formed answer over the given numbers with the wrong value
            (default 0.1, RAGEN's and TinyZero's format score), in [0, 1); paid once per
            episode (an attempt pays its improvement over the best score so far).
        max_turns: attempts per episode (default 1).
        number_rule: ``"exact"`` (default; RAGEN/TinyZero: every given number exactly once) or
            ``"subset"`` (each given number at most once, a subset allowed).
        max_actions_per_turn: must be 1 (one answer per turn).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range.
    """

    turn_limit_terminates = True  # the attempts are the task's rule: no bootstrap past the last

    def __init__(
        self,
        *,
        num_numbers: int = 4,
        max_number: int = 100,
        max_target: int = 1000,
        format_score: float = 0.1,
        max_turns: int = 1,
        max_actions_per_turn: int = 1,
        number_rule: str = "exact",
        **kwargs: Any,
    ):
        if number_rule not in NUMBER_RULES:
            raise ValueError(f"number_rule must be one of {NUMBER_RULES}, got {number_rule!r}")
        if isinstance(num_numbers, bool) or not isinstance(num_numbers, int):
            raise ValueError(f"num_numbers must be an int, got {num_numbers!r}")
        if not MIN_NUMBERS <= num_numbers <= MAX_NUMBERS:
            raise ValueError(
                f"num_numbers must lie in [{MIN_NUMBERS}, {MAX_NUMBERS}], got {num_numbers}"
            )
        if not isinstance(max_target, int) or max_target < 2:
            raise ValueError(f"max_target must be an int >= 2, got {max_target!r}")
        if not isinstance(max_number, int) or not 1 <= max_number <= max_target:
            raise ValueError(
                f"max_number must be an int in [1, max_target={max_target}], got {max_number!r}"
            )
        if not isinstance(format_score, (int, float)) or not 0.0 <= format_score < 1.0:
            raise ValueError(f"format_score must lie in [0, 1), got {format_score!r}")
        if max_actions_per_turn != 1:
            raise ValueError("Countdown takes one answer per turn: max_actions_per_turn must be 1")
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        self.num_numbers = num_numbers
        self.max_number = max_number
        self.max_target = max_target
        self.format_score = float(format_score)
        self.number_rule = number_rule
        self.problem = CountdownProblem((), 0, None)
        self._solved = False
        self._best = 0.0  # the best score of the episode's attempts so far
        self._feedback: str | None = None

    # ------------------------------------------------------------------ TextEnv hooks

    @property
    def instructions_text(self) -> str:
        return (
            "Countdown: using the given numbers, write an arithmetic expression that equals the "
            f"target. Use only + - * / and parentheses; {self._rule_text()}; no other numbers. "
            "You may end with '= target', e.g. "
            "(100 - 4) / 8 * 2 = 24. A correct answer scores 1; an expression over the given "
            f"numbers with another value {self.format_score:g}; any other expression 0."
        )

    def _rule_text(self) -> str:
        if self.number_rule == "exact":
            return "use every given number exactly once"
        return "each given number at most once (you need not use them all)"

    def _numbers_ok(self, used: tuple[int, ...] | list[int]) -> bool:
        if self.number_rule == "exact":
            return sorted(used) == sorted(self.problem.numbers)
        return uses_given_numbers(used, self.problem.numbers)

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        if "numbers" in options or "target" in options:
            self.problem = _problem_from_options(options)
        else:
            self.problem = generate_problem(
                self.np_random, self.num_numbers, self.max_number, self.max_target
            )
        self._solved = False
        self._best = 0.0
        self._feedback = None
        return {"numbers": list(self.problem.numbers), "target": self.problem.target}

    def _parse_action(self, token: str) -> ExpressionResult | None:
        result = parse_expression(token, max_length=MAX_LENGTH, max_depth=MAX_DEPTH)
        # No side effects here: an invalid turn must leave the state (and observation) unchanged;
        # the reason reaches the agent through info["invalid_reason"] and the chat layer.
        return result if result.ok else None

    def _action_name(self, action: ExpressionResult) -> str:
        return action.expression

    def _apply_action(self, action: ExpressionResult) -> ActionOutcome:
        assert action.value is not None
        numbers_ok = self._numbers_ok(action.numbers)
        correct = numbers_ok and action.value == self.problem.target
        if correct:
            score, self._feedback = 1.0, "Your answer is correct."
        elif numbers_ok:
            score = self.format_score
            self._feedback = f"Your expression equals {action.value}, not {self.problem.target}."
        else:
            score = 0.0
            self._feedback = (
                "Your expression must use every given number exactly once, and no other numbers."
                if self.number_rule == "exact"
                else "Your expression uses numbers that were not given (or too often)."
            )
        self._solved = self._solved or correct
        # Pay the improvement over the best attempt so far: the return is the best score.
        reward = max(0.0, score - self._best)
        self._best = max(self._best, score)
        return ActionOutcome(
            reward=reward,
            effective=True,
            terminated=correct,
            info={
                "expression_value": str(action.value),
                "numbers_ok": numbers_ok,
                "correct": correct,
                "score": score,
            },
        )

    def _success(self) -> bool:
        return self._solved

    def _render_state(self) -> str:
        lines = [f"Numbers: {list(self.problem.numbers)}", f"Target: {self.problem.target}"]
        if self._feedback and self.turn > 0:
            lines.append(self._feedback)
        return "\n".join(lines)

    def oracle_actions(self) -> list[str]:
        """The reference solution the problem was built from (it uses every number once).

        For a problem given through ``reset`` options, the brute-force solver's answer.

        Raises:
            RuntimeError: a problem given through options has no solution.
        """
        if self.problem.solution is None:
            solution = solve(
                self.problem.numbers, self.problem.target, use_all=self.number_rule == "exact"
            )
            if solution is None:
                raise RuntimeError(f"{self.problem} has no solution: the oracle has no answer")
            self.problem = CountdownProblem(self.problem.numbers, self.problem.target, solution)
        return [self.problem.solution]

    def oracle_reasoning(self, actions: list[str]) -> str:
        """The numbers, the target and the oracle's expression.

        Args:
            actions: the oracle's expression (:meth:`oracle_actions`).

        Returns:
            e.g. ``"The numbers are [86, 64, 52, 27] and the target is 3. 52 - (86 + 27 - 64)
            = 3."``

        Raises:
            RuntimeError: called before :meth:`reset`.
        """
        plan = self._oracle_plan_text(actions)
        numbers, target = list(self.problem.numbers), self.problem.target
        return f"The numbers are {numbers} and the target is {target}. {plan} = {target}."


def _problem_from_options(options: dict[str, Any]) -> CountdownProblem:
    numbers, target = options.get("numbers"), options.get("target")
    if (
        not isinstance(numbers, (list, tuple))
        or not MIN_GIVEN <= len(numbers) <= MAX_NUMBERS
        or not all(_is_positive_int(n) for n in numbers)
    ):
        raise ValueError(
            f"options['numbers'] must be a list of {MIN_GIVEN} to {MAX_NUMBERS} positive ints, "
            f"got {numbers!r}"
        )
    if not _is_positive_int(target):
        raise ValueError(f"options['target'] must be a positive int, got {target!r}")
    return CountdownProblem(tuple(int(n) for n in numbers), int(target), None)


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1
