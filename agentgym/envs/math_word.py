"""Math-v0 and MathFile-v0: multi-turn math word problems; answers checked by :mod:`agentgym.answers`.

Problems come from one of two sources:

* :class:`MathEnv` (``Math-v0``, ``MathArithmetic-v0``, ``MathChainSum-v0``): generated offline by
  ``reasoning-gym`` (Apache-2.0). ``Math-v0`` uses its ``gsm_symbolic`` task, GSM8K-derived word
  problem templates (GSM-Symbolic, Mirzadeh et al. 2024) with fresh names and numbers; ``task=``
  selects any other reasoning-gym task whose answers are numbers (``basic_arithmetic``,
  ``chain_sum``, ``decimal_arithmetic``, ``products``, ``gcd``, ...) and ``task_config=`` passes
  that task's settings. **How a seed names a problem:** each reset draws one integer
  ``item_seed`` in ``[0, 2**31)`` from ``self.np_random`` and takes item 0 of
  ``reasoning_gym.create_dataset(task, seed=item_seed, size=1, **task_config)``; reasoning-gym
  builds that item from its own ``random.Random(item_seed)``, so ``(task, task_config, seed)``
  gives the same problem in any process (``info["item_seed"]`` records the draw).
* :class:`MathFileEnv` (``MathFile-v0``): problems from a local JSONL file the user names
  (``dataset_file=``), one ``{"question": ..., "answer": ...}`` object per line, e.g. GSM8K or MATH
  brought by the user. A reset draws a line uniformly from ``self.np_random``. ``answer`` may be
  a number, a final answer (``3/4``, ``\\frac{5}{6}``), or a worked solution ending in GSM8K's
  ``#### 72`` (the text after the last ``####`` is the answer) or holding MATH's ``\\boxed{...}``.
  Every line is checked on load; an error names the file, the line and the fix. Without
  ``dataset_file`` the 20 problems of ``agentgym/data/math_sample.jsonl`` (written for this
  package) are used.

The episode (RAGEN's MetaMathQA environment):

* Observation: the question; after a wrong answer, the question and ``Attempt k: your answer '...'
  is incorrect, try again (n attempts left).``; after a correct one, ``Attempt k: your answer
  '...' is correct.``
* Action: the final answer inside ``<answer>`` (default format ``think_answer``): a number with
  or without thousands separators, units or currency signs, a fraction, a decimal, ``\\boxed{}``
  or LaTeX (see :mod:`agentgym.answers` for what is read and how it is compared), or a whole
  worked reply of up to 16,000 characters (``MAX_REPLY_CHARS``), of which only the final region
  is read, as Math-Verify reads a reply: its ``\\boxed{}`` answers, else ``#### X``, else what
  follows ``final answer is``, else its last 1000 characters (``MAX_ANSWER_CHARS``).
* Plain-text notation is judged as Math-Verify judges it, never more leniently: functions and
  constants written as words (``exp(2)``, ``pi``, ``sqrt(2)``, ``ln(2)``, ``e^2`` outside ``$``)
  are no expression Math-Verify reads, so such an answer is an invalid turn (below), and next to
  a number their letters are variables (``2pi`` and ``2*pi`` are 2·p·i: not 2π, nor the 2
  Math-Verify reads in ``2pi``). Write LaTeX (``\\pi``, ``$e^2$``, ``\\sqrt{2}``). The choice keeps
  the reward in agreement with the Math-Verify graders that evaluate trained models; words are
  ambiguous (``e`` is often a variable, ``log`` has no fixed base).
* Reward: a correct answer on attempt ``k`` (turn ``k``, invalid turns included) scores
  ``reward_decay ** (k - 1)``: 1, 0.5, 0.25 with the default 0.5 (``reward_decay=1`` removes the
  discount); it terminates the episode with ``success``. A wrong answer scores 0 and the episode
  goes on while attempts are left.
* Which turns are *invalid* (the shared policy of :class:`~agentgym.text_env.TextEnv` applies,
  default reward -0.1, the observation unchanged, the turn used): a malformed turn (no
  ``<answer>`` tags, ...), and an answer in which :func:`agentgym.answers.parse_answer` reads no
  value at all (words only, such as ``twelve``, ``I don't know`` or ``pi``), over 16,000
  characters, or a longer reply whose final region is over 1000. Such an answer is never
  *correct*: the checker marks it wrong and never raises. A
  well-formed answer that is read but differs from the reference, or that is
  too large to compare (``9^9^9^9``), is a valid wrong answer: reward 0 and feedback.
* Time: each step reads and checks the answer in one call of
  :func:`agentgym.answers.grade_answer`, limited to :data:`~agentgym.answers.CHECK_TIMEOUT_S`
  (5 s) of wall time in a worker process that is killed at the limit. An answer that needs longer,
  or that is over the structural bounds checked before any evaluation (nesting, LaTeX commands,
  sums and products, matrix cells, digits, towers of powers: :mod:`agentgym.answers`), is a valid
  wrong answer: reward 0, never an exception. So ``step`` spends at most 5 s on the answer, plus
  the start of a worker (about a second: once per process, and after an answer that reached the
  limit). The workers serve every math environment of the process and end with it.
* Limits: ``max_turns`` attempts (default 3), one answer per turn. The attempts are the task's
  rule, so the episode *terminates* after the last (:attr:`~MathEnv.turn_limit_terminates`).
* Options: ``reset(options={"question": ..., "answer": ...})`` poses a given problem instead
  (``"unordered": True`` when the parts of a several-part answer may come in any order).
* Several-part answers: every part is required (``12 and 20``; a pair ``(0, 1)`` stays a pair);
  see :mod:`agentgym.answers` for the reading and comparison rules.

``reasoning-gym`` and ``math-verify`` are the optional extra ``pip install 'agentgym[math]'``,
imported when an environment is made (not when ``agentgym`` is imported).

Sources: RAGEN (MetaMathQA environment, reward 1/2^(k-1) for a correct answer at attempt k);
reasoning-gym (https://github.com/open-thought/reasoning-gym); GSM8K (Cobbe et al. 2021, the
``####`` answer convention); math-verify (https://github.com/huggingface/Math-Verify).

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Math-v0")
    >>> obs, info = env.reset(seed=0)
    >>> env.step("<think>...</think><answer>-1</answer>")[1:4]
    (0.0, False, False)
    >>> env.step(env.unwrapped.oracle_answer())[1:4]
    (0.5, True, False)
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.answers import (
    CHECK_TIMEOUT_S,
    ParsedAnswer,
    check_answer,
    final_answer_text,
    final_span,
    grade_answer,
    parse_reference,
    require_math_verify,
)
from agentgym.text_env import ActionOutcome, TextEnv

__all__ = [
    "MathEnv",
    "MathFileEnv",
    "MathProblem",
    "generate_problem",
    "load_problems",
    "SAMPLE_FILE",
]

#: The bundled example data set of :class:`MathFileEnv` (20 problems written for this package).
SAMPLE_FILE = Path(__file__).resolve().parent.parent / "data" / "math_sample.jsonl"
_INSTALL_HINT = "pip install 'agentgym[math]'"
_ITEM_SEED_BOUND = 2**31
#: Room left in the observation for the feedback line after the question.
_FEEDBACK_ROOM = 400
_SHOWN_ANSWER_CHARS = 100


@dataclass(frozen=True)
class MathProblem:
    """One problem.

    Attributes:
        question: the problem text shown to the agent.
        answer: the reference final answer (after GSM8K's ``####`` where present).
        oracle_text: what the oracle answers: the reference's final span (e.g. ``1024`` from
            ``... \\boxed{1024}``, :func:`agentgym.answers.final_span`), or ``answer`` itself.
        source: where it came from (``reasoning_gym:gsm_symbolic item_seed=...`` or
            ``file.jsonl:17``).
        unordered: the parts of a several-part answer may come in any order (``"unordered":
            true`` on a JSONL line, or in ``reset`` options); parts joined by "or" and sets are
            order-free anyway.
    """

    question: str
    answer: str
    oracle_text: str
    source: str
    unordered: bool = False


def _require_reasoning_gym() -> Any:
    try:
        import reasoning_gym
    except ImportError as err:
        raise ImportError(
            f"Math-v0 generates problems with reasoning-gym, which is not installed: run "
            f"`{_INSTALL_HINT}` (or use agentgym/MathFile-v0 with your own JSONL file)"
        ) from err
    return reasoning_gym


@functools.lru_cache(maxsize=4096)
def _parse_reference(answer: str) -> ParsedAnswer | None:
    return parse_reference(answer)


@dataclass(frozen=True)
class _GradedAnswer:
    """An answer as read and its verdict, from one bounded call of
    :func:`agentgym.answers.grade_answer`."""

    answer: ParsedAnswer
    correct: bool


def _make_problem(
    question: str, raw_answer: str, source: str, unordered: bool = False
) -> MathProblem | str:
    """A :class:`MathProblem`, or the reason the answer cannot be used."""
    answer = final_answer_text(raw_answer)
    parsed = _parse_reference(answer)
    if parsed is None or parsed.too_large:
        return (
            f"the checker cannot read the answer {answer[:80]!r} (or it is too large to compare): "
            "write a "
            "number, a fraction or a LaTeX expression (e.g. 18, 3/4, \\frac{5}{6}, $x+1$), or "
            "several joined by commas or 'and' (12 and 20), a pair as (0, 1)"
        )
    oracle = answer
    span = final_span(answer)
    if span and span != answer and check_answer(parsed, span):
        oracle = span
    return MathProblem(
        question=question, answer=answer, oracle_text=oracle, source=source, unordered=unordered
    )


def generate_problem(
    task: str, item_seed: int, task_config: Mapping[str, Any] | None = None
) -> MathProblem:
    """Item 0 of ``reasoning_gym.create_dataset(task, seed=item_seed, size=1, **task_config)``.

    Args:
        task: a reasoning-gym task name with numeric answers, e.g. ``"gsm_symbolic"``.
        item_seed: the item's seed (reasoning-gym builds it from ``random.Random(item_seed)``).
        task_config: the task's configuration fields (not ``seed`` or ``size``).

    Returns:
        The problem; its ``source`` names the task and seed.

    Raises:
        ImportError: reasoning-gym is not installed.
        ValueError: unknown task, bad ``task_config``, or an answer math-verify cannot read.
    """
    reasoning_gym = _require_reasoning_gym()
    config = dict(task_config or {})
    try:
        dataset = reasoning_gym.create_dataset(task, seed=item_seed, size=1, **config)
    except (ValueError, TypeError, AssertionError) as err:
        raise ValueError(
            f"reasoning-gym cannot make task={task!r} with task_config={config!r}: {err}"
        ) from err
    item = dataset[0]
    source = f"reasoning_gym:{task} item_seed={item_seed}"
    problem = _make_problem(str(item["question"]), str(item["answer"]), source)
    if isinstance(problem, str):
        raise ValueError(
            f"task={task!r} gave an answer that is not a mathematical value ({source}): {problem}. "
            "Choose a reasoning-gym task whose answers are numbers (e.g. gsm_symbolic, "
            "basic_arithmetic, chain_sum)"
        )
    return problem


# ----------------------------------------------------------------------------- JSONL data sets


def _file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=8)
def _load_cached(key: tuple[str, int, int], max_question_chars: int) -> tuple[MathProblem, ...]:
    path = Path(key[0])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err}); save the file as UTF-8 JSONL") from err
    problems = []
    hint = 'each line must be one JSON object like {"question": "...", "answer": "18"}'
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{where}: not valid JSON ({err.msg}, column {err.colno}); {hint}"
            ) from err
        if not isinstance(record, dict):
            raise ValueError(f"{where}: a JSON {type(record).__name__}, not an object; {hint}")
        missing = [name for name in ("question", "answer") if name not in record]
        if missing:
            raise ValueError(f"{where}: missing field(s) {', '.join(map(repr, missing))}; {hint}")
        question, answer = record["question"], record["answer"]
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{where}: 'question' must be a non-empty string, got {question!r}")
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise ValueError(
                f"{where}: 'answer' must be a string or a number, got {type(answer).__name__}"
            )
        if len(question) > max_question_chars:
            raise ValueError(
                f"{where}: the question has {len(question)} characters, over the "
                f"{max_question_chars} the observation allows; raise max_observation_length"
            )
        unordered = record.get("unordered", False)
        if not isinstance(unordered, bool):
            raise ValueError(f"{where}: 'unordered' must be true or false, got {unordered!r}")
        problem = _make_problem(question, str(answer), where, unordered)
        if isinstance(problem, str):
            raise ValueError(f"{where}: {problem}")
        problems.append(problem)
    if not problems:
        raise ValueError(f"{path}: no problems (the file is empty); {hint}")
    return tuple(problems)


def load_problems(
    dataset_file: str | os.PathLike[str], max_question_chars: int = 8192 - _FEEDBACK_ROOM
) -> tuple[MathProblem, ...]:
    """Read and check a JSONL file of problems (cached while the file is unchanged).

    Args:
        dataset_file: path of a UTF-8 file with one ``{"question": str, "answer": str | number}``
            object per line (blank lines are skipped; other fields are ignored).
        max_question_chars: longest question allowed.

    Returns:
        The problems in file order; each ``source`` is ``path:line``.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a line is not a JSON object, lacks a field, has a field of the wrong type or
            an answer math-verify cannot read, or the file holds no problem; the message names
            the line.
        ImportError: math-verify is not installed.
    """
    require_math_verify()
    path = Path(dataset_file).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset_file {str(dataset_file)!r} does not exist (or is not a file): give the path "
            'of a JSONL file with one {"question": ..., "answer": ...} object per line'
        )
    return _load_cached(_file_key(path.resolve()), max_question_chars)


# ----------------------------------------------------------------------------- environments


class MathEnv(TextEnv):
    """Math word problems from reasoning-gym, several attempts with feedback (module docstring).

    Args:
        task: reasoning-gym task with numeric answers (default ``"gsm_symbolic"``).
        task_config: that task's configuration fields, e.g. ``{"max_terms": 3}`` for
            ``basic_arithmetic`` (default: reasoning-gym's defaults).
        reward_decay: reward of a correct answer at attempt ``k`` is ``reward_decay ** (k - 1)``,
            in (0, 1] (default 0.5, RAGEN's MetaMathQA rule).
        max_turns: attempts per episode (default 3).
        max_actions_per_turn: must be 1 (one answer per turn).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range, an unknown task, or a task whose answers are not
            mathematical values.
        ImportError: reasoning-gym or math-verify is not installed (names the extra to install).
    """

    turn_limit_terminates = True  # the attempts are the task's rule: no bootstrap past the last

    def __init__(
        self,
        *,
        task: str = "gsm_symbolic",
        task_config: Mapping[str, Any] | None = None,
        reward_decay: float = 0.5,
        max_turns: int = 3,
        max_actions_per_turn: int = 1,
        **kwargs: Any,
    ):
        self._check_common(reward_decay, max_actions_per_turn)
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        require_math_verify()
        reasoning_gym = _require_reasoning_gym()
        if not isinstance(task, str) or task not in reasoning_gym.factory.DATASETS:
            raise ValueError(
                f"task must be a reasoning-gym task name such as 'gsm_symbolic', "
                f"'basic_arithmetic' or 'chain_sum', got {task!r} (all names: "
                "reasoning_gym.factory.DATASETS)"
            )
        if task_config is not None and not isinstance(task_config, Mapping):
            raise ValueError(f"task_config must be a mapping or None, got {task_config!r}")
        if task_config and ({"seed", "size"} & set(task_config)):
            raise ValueError("task_config must not set 'seed' or 'size': the environment sets them")
        self.task = task
        self.task_config = dict(task_config) if task_config else None
        self.reward_decay = float(reward_decay)
        generate_problem(task, 0, self.task_config)  # fail now on a bad task or config
        self._init_episode_state()

    def _check_common(self, reward_decay: float, max_actions_per_turn: int) -> None:
        if isinstance(reward_decay, bool) or not isinstance(reward_decay, (int, float)):
            raise ValueError(f"reward_decay must be a number in (0, 1], got {reward_decay!r}")
        if not 0.0 < reward_decay <= 1.0:
            raise ValueError(f"reward_decay must lie in (0, 1], got {reward_decay!r}")
        if max_actions_per_turn != 1:
            raise ValueError("Math takes one answer per turn: max_actions_per_turn must be 1")

    def _init_episode_state(self) -> None:
        self.problem = MathProblem("", "", "", "")
        self._reference: ParsedAnswer | None = None
        self._solved = False
        self._feedback: str | None = None

    # ------------------------------------------------------------------ problem source

    def _draw_problem(self) -> tuple[MathProblem, dict[str, Any]]:
        item_seed = int(self.np_random.integers(_ITEM_SEED_BOUND))
        problem = generate_problem(self.task, item_seed, self.task_config)
        return problem, {"task": self.task, "item_seed": item_seed}

    # ------------------------------------------------------------------ TextEnv hooks

    @property
    def instructions_text(self) -> str:
        decay = self.reward_decay
        scores = ", ".join(f"{decay**k:g}" for k in range(min(self.max_turns, 3)))
        return (
            "Solve the math problem. Write only the final answer inside <answer></answer>: a "
            "number, a fraction or a LaTeX expression (units, currency signs and thousands "
            f"separators are allowed), e.g. <answer>18</answer>. You have {self.max_turns} "
            "attempt(s); after a wrong answer you are told it is incorrect and may try again. "
            f"A correct answer scores {scores}"
            + (", ..." if self.max_turns > 3 else "")
            + " at attempt 1, 2, 3; a wrong answer scores 0."
        )

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        self._init_episode_state()
        if "question" in options or "answer" in options:
            self.problem = _problem_from_options(options)
            extra: dict[str, Any] = {}
        else:
            self.problem, extra = self._draw_problem()
        self._reference = _parse_reference(self.problem.answer)
        if self._reference is None:  # pragma: no cover - every source checks this already
            raise RuntimeError(f"unreadable reference answer of {self.problem.source}")
        return {"source": self.problem.source, **extra}

    def _parse_action(self, token: str) -> _GradedAnswer | None:
        # No side effects: an invalid turn leaves the state (and observation) unchanged. Reading
        # and checking are one call under one deadline (CHECK_TIMEOUT_S).
        assert self._reference is not None
        parsed, correct = grade_answer(
            self._reference, token, unordered=self.problem.unordered, timeout_s=CHECK_TIMEOUT_S
        )
        return None if parsed is None else _GradedAnswer(parsed, correct)

    def _action_name(self, action: _GradedAnswer) -> str:
        return action.answer.text

    def _apply_action(self, action: _GradedAnswer) -> ActionOutcome:
        attempt = self.turn  # TextEnv counts this turn before executing it
        correct = action.correct
        shown = action.answer.text.strip()
        if len(shown) > _SHOWN_ANSWER_CHARS:
            shown = shown[:_SHOWN_ANSWER_CHARS] + "..."
        if correct:
            reward = self.reward_decay ** (attempt - 1)
            self._solved = True
            self._feedback = f"Attempt {attempt}: your answer {shown!r} is correct."
        else:
            reward = 0.0
            left = self.max_turns - attempt
            self._feedback = (
                f"Attempt {attempt}: your answer {shown!r} is incorrect, try again "
                f"({left} attempt{'s' if left != 1 else ''} left)."
                if left > 0
                else f"Attempt {attempt}: your answer {shown!r} is incorrect (no attempts left)."
            )
        return ActionOutcome(
            reward=reward,
            effective=True,
            terminated=correct,
            info={"answer_correct": correct, "attempt": attempt},
        )

    def _success(self) -> bool:
        return self._solved

    def _render_state(self) -> str:
        if self._feedback and self.turn > 0:
            return f"{self.problem.question}\n\n{self._feedback}"
        return self.problem.question

    def oracle_actions(self) -> list[str]:
        """The reference answer (its final span, e.g. ``1024`` from ``... \\boxed{1024}``)."""
        return [self.problem.oracle_text]


class MathFileEnv(MathEnv):
    """Math problems from a local JSONL file, several attempts with feedback (module docstring).

    Args:
        dataset_file: path of the JSONL file (``question`` and ``answer`` fields); default: the
            bundled :data:`SAMPLE_FILE`.
        reward_decay, max_turns, max_actions_per_turn: as in :class:`MathEnv`.
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        FileNotFoundError: ``dataset_file`` does not exist.
        ValueError: a bad line (the message names it) or an argument out of range.
        ImportError: math-verify is not installed.
    """

    def __init__(
        self,
        *,
        dataset_file: str | os.PathLike[str] | None = None,
        reward_decay: float = 0.5,
        max_turns: int = 3,
        max_actions_per_turn: int = 1,
        **kwargs: Any,
    ):
        self._check_common(reward_decay, max_actions_per_turn)
        TextEnv.__init__(self, max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        self.dataset_file = dataset_file
        self.task = "file"
        self.task_config = None
        self.reward_decay = float(reward_decay)
        limit = self.observation_space.max_length - _FEEDBACK_ROOM
        self.problems = load_problems(SAMPLE_FILE if dataset_file is None else dataset_file, limit)
        self._init_episode_state()

    def _draw_problem(self) -> tuple[MathProblem, dict[str, Any]]:
        index = int(self.np_random.integers(len(self.problems)))
        return self.problems[index], {"problem_index": index}


def _problem_from_options(options: dict[str, Any]) -> MathProblem:
    question, answer = options.get("question"), options.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"options['question'] must be a non-empty string, got {question!r}")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise ValueError(f"options['answer'] must be a string or a number, got {answer!r}")
    unordered = options.get("unordered", False)
    if not isinstance(unordered, bool):
        raise ValueError(f"options['unordered'] must be a bool, got {unordered!r}")
    problem = _make_problem(question, str(answer), "reset options", unordered)
    if isinstance(problem, str):
        raise ValueError(f"options['answer']: {problem}")
    return problem
