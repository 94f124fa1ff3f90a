"""CodeExec-v2 (``feedback="public"``) and v3 (``"public_final"``): attacks on the promise that
nothing of a HIDDEN test (its expected value, how many passed, which, how their calls went)
reaches the agent before the episode ends, other than whether every hidden test passed on v2
(on v3, nothing at all: the hidden runs are made on the episode's last step, after its last
public run).

A fresh attacker's findings (issue 45, item 5), each a test that failed on the code it was written
against and passes now:

* ``test_the_prompt_examples_that_answer_hidden_tests_are_counted``: the prompt (the observation)
  shows HumanEval's docstring examples, ``>>> f(x)`` followed by the value; some hidden tests make
  such a call. The prompt is the task's statement and stays whole (a choice: the env's docstring
  and docs/environments.md now count a guesser that reads the examples, 1.87 of the 28 yes/no
  problems, beside 1.07 for one that does not); the test pins the yes/no problems concerned.
* ``test_no_hidden_test_repeats_a_public_test``: HumanEval/31 and /144 held a hidden test identical
  to a public test (whose expected value the observation shows); so did the generated
  ``poly_value`` family whenever a drawn input was 0 (15 of 57 poly_value problems over seeds
  0-399). Fixed: such a test is public (:func:`agentgym.envs.code_exec.split_plan`).
* ``test_an_early_failure_in_a_random_drawing_test_does_not_crash_grading`` (latent: no shipped
  problem has two tests that draw from ``random``): the host's check shared one seeded ``random``
  across its tests, so a test that stopped at a failing assert skipped its remaining draws and a
  later drawing test's calls no longer matched the plan; :func:`judge` then raised out of ``grade``
  and out of ``env.step``, depending on a hidden test's expected value. Fixed: the judge restores,
  at each test's entry, the random state the plan recorded there.

What held (these pass): a fixed answer gives the same observation, per-step reward, termination,
truncation and whole info dict on two problems that differ only in hidden expected values, for
answers that raise, time out, run past the whole run's limit, exit, forge or corrupt the report,
fill memory, return huge values, or overflow ``feedback_chars`` (with its ``[truncated]`` marker);
the sandbox receives byte-identical files for the two problems (no expected value enters it), in
each of an attempt's two runs (the public run's spec holding the public calls only); every
public call precedes every hidden call in the harness's order; reset's info is the same.

Since round 7 (tests/test_attacks_round7.py) an attempt is two sandbox runs, a public one (whose
texts are shown) and a hidden one (of which only pass or fail per test is kept), so the twins'
answers tell a hidden call by its input (not one of the public tests' inputs, which the
observation shows), no longer by a call counter, which now restarts at the hidden run. Since
round 8 (tests/test_attacks_round8.py) v3 makes every hidden run on the episode's last step, so
on v3 the twins are played up to 3 attempts or the episode's end (an answer that passes the
public tests ends it at once), and the last step may differ only in what its hidden runs
decide; v2 is checked as before (2 attempts, neither the last).
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import json
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs import code_exec
from agentgym.envs.code_exec import split_plan, split_tests
from agentgym.envs.code_exec_channel import loads
from agentgym.envs.code_exec_grading import grade, grade_batch, grade_split, plan_checks
from agentgym.envs.code_exec_tasks import CodeProblem, generate_problem, humaneval_problems

HE = {p.task_id: p for p in humaneval_problems()}


def _calls_of(plan: Any, tests: Any) -> set[str]:
    wanted = set(tests)
    return {plan.calls[k] for k, t in enumerate(plan.test_of_call) if t in wanted}


# ----------------------------------------------------------------------------- the split


def _prompt_examples(problem: CodeProblem) -> dict[str, Any]:
    """Wire-like key of each ``>>> entry(literals)`` example in the prompt -> its shown value."""
    out: dict[str, Any] = {}
    for ex in doctest.DocTestParser().get_examples(problem.prompt):
        try:
            node = ast.parse(ex.source.strip(), mode="eval").body
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == problem.entry_point
            ):
                continue
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            out[repr((args, kwargs))] = ast.literal_eval(ex.want.strip())
        except (SyntaxError, ValueError, TypeError):
            continue
    return out


def test_the_prompt_examples_that_answer_hidden_tests_are_counted() -> None:
    """The channel is the observation's prompt, the task's statement: a hidden test that is one
    call whose arguments are a docstring example's has its expected value printed there. The
    prompt stays whole (the env's docstring: a guesser that reads the examples expects 1.87 of
    the 28 yes/no problems, one that does not 1.07); these are the yes/no problems concerned,
    with (hidden tests shown, hidden tests) each, read with doctest's parser."""
    shown: dict[str, tuple[int, int]] = {}
    for task_id in YES_NO_IDS:
        problem = HE[task_id]
        plan = plan_checks(problem)
        _, hidden = split_plan(plan)
        examples = _prompt_examples(problem)
        count = 0
        for i in hidden:
            calls = [k for k, t in enumerate(plan.test_of_call) if t == i]
            if len(calls) != 1:
                continue
            args, kwargs = loads(plan.calls[calls[0]])
            if repr((list(args), kwargs)) in examples:
                count += 1
        if count:
            shown[task_id] = (count, len(hidden))
    assert shown == {
        "HumanEval/31": (3, 9),
        "HumanEval/40": (3, 7),
        "HumanEval/43": (2, 7),
        "HumanEval/48": (2, 6),
        "HumanEval/54": (3, 6),
        "HumanEval/56": (1, 9),
        "HumanEval/57": (1, 6),
        "HumanEval/61": (1, 9),
    }


#: HumanEval's 28 yes/no problems (tests/blind_code_agent.py measures them).
YES_NO_IDS = tuple(
    f"HumanEval/{n}"
    for n in (0, 3, 31, 40, 43, 48, 52, 54, 56, 57, 61, 72, 75, 76, 77, 80, 82, 92, 95, 109, 124)
    + (126, 132, 134, 138, 144, 154, 157)
)


def test_no_hidden_test_repeats_a_public_test() -> None:
    """A hidden test making the same calls as a public test: the observation shows its expected
    value (the public assert), so it is not hidden. The env's split makes it public."""
    repeats = []
    for task_id, problem in HE.items():
        plan = plan_checks(problem)
        public, hidden = split_plan(plan)
        public_calls = _calls_of(plan, public)
        if any(c in public_calls for c in _calls_of(plan, hidden)):
            repeats.append(task_id)
    for seed in range(100):
        problem = generate_problem(np.random.default_rng(seed))
        plan = plan_checks(problem)
        public, hidden = split_plan(plan)
        public_calls = _calls_of(plan, public)
        if any(c in public_calls for c in _calls_of(plan, hidden)):
            repeats.append(f"{problem.task_id} (seed {seed})")
    # before split_plan: HumanEval/31 (candidate(11)), /144 ('1/5', '5/1'), poly_value with x = 0
    assert repeats == []


def test_every_public_call_runs_before_every_hidden_call() -> None:
    """HELD. The harness calls in plan order: a public call's returned value (shown) cannot come
    after, and so cannot depend on, a hidden call (which, anyway, never sees an expected value)."""
    problems = list(HE.values()) + [generate_problem(np.random.default_rng(s)) for s in range(30)]
    for problem in problems:
        plan = plan_checks(problem)
        public, _ = split_tests(len(plan.tests))
        order = list(plan.test_of_call)
        assert order == sorted(order), problem.task_id
        last_public = max((k for k, t in enumerate(order) if t in public), default=-1)
        first_hidden = min((k for k, t in enumerate(order) if t not in public), default=len(order))
        assert last_public < first_hidden, problem.task_id


# ----------------------------------------------------------------------------- twins

#: HumanEval/31 (is_prime): 13 tests, 3 public, 10 hidden, one call each, bools.
BASE = HE["HumanEval/31"]
#: Hidden asserts whose expected value the twin flips (not shown in the prompt: 17, 5*17, 11*7).
FLIPS = (
    ("assert candidate(17) == True", "assert candidate(17) == False"),
    ("assert candidate(5 * 17) == False", "assert candidate(5 * 17) == True"),
    ("assert candidate(11 * 7) == False", "assert candidate(11 * 7) == True"),
)


def _twin() -> CodeProblem:
    test = BASE.test
    for old, new in FLIPS:
        assert old in test
        test = test.replace(old, new)
    return dataclasses.replace(BASE, test=test)


TWIN = _twin()

_COUNTER = "N = [0]\nPUBLIC = (6, 101, 11)\n"  # the public tests' inputs (shown)
_HEAD = "def is_prime(n):\n    N[0] += 1\n    if n == 13441 * 19:\n        return True\n"
_PRIME = "    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n"

#: Answers that solve neither twin: each gets the last hidden test (13441 * 19, False on both)
#: wrong, or more. Each is judged on both twins; only the hidden expected values differ. A
#: hidden call is told by its input (not in PUBLIC): the public and hidden calls run in two
#: runs (:func:`agentgym.envs.code_exec_grading.grade_split`), so a call counter restarts.
ANSWERS: dict[str, str] = {
    "truth": _COUNTER + _HEAD + _PRIME,
    "all_true": "def is_prime(n):\n    return True\n",
    "hidden_raise": _COUNTER
    + _HEAD
    + "    if n not in PUBLIC:\n        raise ValueError(n)\n"
    + _PRIME,
    "hidden_timeout": _COUNTER
    + _HEAD
    + "    if n == 61:\n        while True:\n            pass\n"
    + _PRIME,
    # each hidden call (9 of them sleep) within TWIN_PER_TEST_S, all of them past TWIN_RUN_S
    "whole_run_timeout": "import time\n"
    + _COUNTER
    + _HEAD
    + "    if n not in PUBLIC:\n        time.sleep(3.0)\n"
    + _PRIME,
    "hidden_exit": "import os\n"
    + _COUNTER
    + _HEAD
    + "    if n == 4:\n        os._exit(0)\n"
    + _PRIME,
    # writes the hidden run's line of its last call (13441 * 19, the 9th hidden call) early
    "forge_report": "import os\n"
    + _COUNTER
    + _HEAD
    + "    if n == 1:\n"
    + "        for fd in range(3, 10):\n"
    + "            try:\n"
    + "                os.write(fd, b'0 8 RTrue\\n')\n"
    + "            except OSError:\n"
    + "                pass\n"
    + _PRIME,
    "memory": _COUNTER + _HEAD + "    if n == 5:\n        x = bytearray(2 ** 34)\n" + _PRIME,
    "huge_hidden_value": _COUNTER
    + _HEAD
    + "    if n not in PUBLIC:\n        return 'x' * 100000\n"
    + _PRIME,
    # public calls answer wrongly with long values: feedback runs past feedback_chars
    "truncation": _COUNTER + _HEAD + "    if n in PUBLIC:\n        return [n] * 500\n" + _PRIME,
    # exfiltrates the spec.json of its run through a public call's shown value (the public
    # run's spec holds the public calls only)
    "read_spec": _COUNTER
    + _HEAD
    + "    if N[0] == 1:\n        return open('spec.json').read()[-190:]\n"
    + _PRIME,
}


#: The twins' limits: a call's (no call but hidden_timeout's loop reaches it) and the whole run's
#: (sandbox start-up included; only whole_run_timeout's 9 x 3 s of sleeps pass it).
TWIN_PER_TEST_S = 5.0
TWIN_RUN_S = 20.0


@pytest.fixture
def make_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    real = code_exec.problem_from_options
    twins = {"base": BASE, "twin": TWIN, "input_twin": INPUT_TWIN}
    monkeypatch.setattr(
        code_exec,
        "problem_from_options",
        lambda options: twins.get(options.get("task_id"), None) or real(options),
    )
    made: list[Any] = []

    def make(version: str = "v2", **kwargs: Any) -> Any:
        env = gymnasium.make(f"agentgym/CodeExec-{version}", backend="process", **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def _play(env: Any, task_id: str, code: str, steps: int) -> list[Any]:
    """Reset's ``(observation, info)``, then up to ``steps`` steps of ``code``, up to the
    episode's end (on v3 an attempt that passes every public test ends it)."""
    obs, info = env.reset(options={"task_id": task_id})
    info = {k: v for k, v in info.items() if k != "task_id"}
    seen: list[Any] = [(obs, info)]
    for _ in range(steps):
        seen.append(env.step(f"<think>t</think><answer>{code}</answer>"))
        if seen[-1][2] or seen[-1][3]:
            break
    return seen


#: The info keys of the episode's last step that its hidden runs decide (with its reward).
JUDGED = frozenset({"success", "all_tests_passed", "tests_passed", "pass_fraction"})


def _same_until_judged(base: list[Any], twin: list[Any], name: str) -> None:
    """The twins' episodes: as many steps, ending together; every observation equal (the last
    one too: it is rendered before the hidden runs), with nothing of the hidden tests in its
    feedback; every reward and info equal, the last step's but for what its hidden runs decide
    (:data:`JUDGED`); every earlier step paying 0, telling no count and no success."""
    assert base[0] == twin[0]
    assert len(base) == len(twin), name
    for k, (first, second) in enumerate(zip(base[1:], twin[1:], strict=True)):
        (o1, r1, te1, tr1, i1), (o2, r2, te2, tr2, i2) = first, second
        last = k == len(base) - 2
        assert bool(te1 or tr1) == bool(te2 or tr2) == last, name
        assert i1["action_is_valid"], (name, i1)
        assert o1 == o2, name
        assert "hidden test" not in o1[o1.rindex("\nAttempt ") :], name
        unjudged = [{key: v for key, v in i.items() if key not in JUDGED} for i in (i1, i2)]
        assert unjudged[0] == unjudged[1], name
        if not (te1 or tr1):
            assert (r1, i1) == (r2, i2) and r1 == 0.0, name
            assert set(i1) & JUDGED == {"success"} and not i1["success"], name


def _twins(env: Any, version: str, twin_id: str, code: str, name: str) -> list[Any]:
    """``code`` played on the base problem and on ``twin_id``, checked to give the same episode
    up to its end; the steps of both. v2: 2 attempts, neither the last, each told only that not
    every hidden test passed, equal in observation, reward (0) and info. v3: up to 3 attempts or
    the episode's end, :func:`_same_until_judged`."""
    if version == "v3":
        base, twin = _play(env, "base", code, 3), _play(env, twin_id, code, 3)
        _same_until_judged(base, twin, name)
        return base + twin
    base, twin = _play(env, "base", code, 2), _play(env, twin_id, code, 2)
    assert base[0] == twin[0]
    for (o1, r1, te1, tr1, i1), (o2, r2, te2, tr2, i2) in zip(base[1:], twin[1:], strict=True):
        assert i1["action_is_valid"] and not (te1 or tr1 or te2 or tr2), (name, i1)
        assert (o1, r1, i1) == (o2, r2, i2), name
        assert "not every hidden test passed" in o1
        assert r1 == 0.0
        assert set(i1) & {"tests_passed", "pass_fraction"} == set()
    return base + twin


@pytest.mark.parametrize("version", ["v2", "v3"])
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_hidden_expected_values_change_nothing_before_the_end(
    make_env: Any, name: str, version: str
) -> None:
    """HELD. Same answer, two problems that differ only in three hidden expected values. v2:
    the observation, the reward, terminated/truncated and every info key of the first two
    (non-final) steps are equal. v3: up to 3 attempts (an answer that passes the public tests
    ends the episode at the first), the observation, terminated/truncated and every info key of
    every step are equal, and the reward of every non-final step (0). (The last step pays the
    best hidden fraction, with ``success``, ``all_tests_passed``, ``tests_passed`` and
    ``pass_fraction``, which is allowed: on v3 the hidden runs are made then.)"""
    env = make_env(
        version, per_test_timeout_s=TWIN_PER_TEST_S, timeout_s=TWIN_RUN_S, feedback_chars=600
    )
    _twins(env, version, "twin", ANSWERS[name], name)


#: BASE with one hidden test's INPUT changed (5 * 17 -> 5 * 19, neither prime; neither in the
#: prompt's examples).
INPUT_TWIN = dataclasses.replace(
    BASE, test=BASE.test.replace("candidate(5 * 17) == False", "candidate(5 * 19) == False")
)
assert INPUT_TWIN.test != BASE.test
_SPEC = (
    "import json, os, sys, time\n"
    + _COUNTER
    + "SPEC = open('spec.json').read()\n"
    + "HIDDEN = '[[' + str(5 * 17) + '],' in SPEC\n"
    + "TAIL = ' '.join(json.loads(SPEC)[0]['calls'][-3:])\n"  # the base's last: 85, 77, 255379
)

#: Answers that read their run's spec.json (in the hidden run: the hidden calls' inputs) and try
#: to carry it to the observation by every path of a run's text (round 7's finding, generalised):
#: each behaves differently on the two input twins only where its spec holds a hidden call.
SPEC_READERS: dict[str, str] = {
    "module_raise": _SPEC + "raise ValueError(TAIL)\n" + _HEAD + _PRIME,
    "call_raise": _SPEC + _HEAD + "    raise ValueError(TAIL)\n",
    "stderr_exit": _SPEC
    + _HEAD
    + "    sys.stderr.write(TAIL + '\\n')\n    sys.stderr.flush()\n    os._exit(1)\n",
    "exit_status": _SPEC + _HEAD + "    if HIDDEN:\n        os._exit(3)\n" + _PRIME,
    "call_timeout": _SPEC
    + _HEAD
    + "    if HIDDEN:\n        while True:\n            pass\n"
    + _PRIME,
    "whole_run_timeout": _SPEC + _HEAD + "    if HIDDEN:\n        time.sleep(1.5)\n" + _PRIME,
    "memory": _SPEC + _HEAD + "    if HIDDEN:\n        x = bytearray(2 ** 34)\n" + _PRIME,
    # report lines whose count (quoted as a line number by a malformed report's message) and
    # content depend on the spec
    "report": _SPEC
    + "for fd in range(3, 10):\n"
    + "    try:\n"
    + "        os.write(fd, b'0 0 T\\n' * HIDDEN + b'junk ' + TAIL.encode() + b'\\n')\n"
    + "    except OSError:\n"
    + "        pass\n"
    + _HEAD
    + _PRIME,
    "value": _SPEC + _HEAD + "    return TAIL\n",
}


@pytest.mark.parametrize("version", ["v2", "v3"])
@pytest.mark.parametrize("name", sorted(SPEC_READERS))
def test_no_text_of_the_hidden_run_reaches_the_agent(
    make_env: Any, name: str, version: str
) -> None:
    """HELD (round 7's fix): two problems that differ in one hidden test's INPUT, an answer that
    reads spec.json and puts it (or a bit of it) in its exception messages, stderr, exit status,
    timing, memory, report lines or values: the observation, reward and info of every
    non-final step are the same on both, and hold no hidden call's input. The public run's
    spec holds no hidden call, and of the hidden run the host keeps only pass or fail."""
    env = make_env(version, per_test_timeout_s=2.0, timeout_s=4.0, feedback_chars=4000)
    steps = _twins(env, version, "input_twin", SPEC_READERS[name], name)
    half = len(steps) // 2
    for (o1, _, _, _, i1), (o2, _, _, _, i2) in zip(steps[1:half], steps[half + 1 :], strict=True):
        assert "[[85]," not in o1 + str(i1) and "[[95]," not in o2 + str(i2), name
        assert "85" not in o1 and "95" not in o2, name


def test_the_sandbox_gets_the_same_files_for_both_twins() -> None:
    """HELD. No expected value enters the sandbox: the files of a run are byte-identical for two
    problems that differ only in expected values."""

    class Capture:
        def __init__(self) -> None:
            self.files: list[dict[str, str]] = []

        def run(self, program: str, *, files: dict[str, str], **_: Any) -> Any:
            self.files.append({"main.py": program, **files})
            return type(
                "R",
                (),
                {
                    "stdout": "STARTED\n",
                    "stderr": "",
                    "exit_code": 0,
                    "timed_out": False,
                    "oom_killed": False,
                },
            )()

    capture = Capture()
    for problem in (BASE, TWIN):
        grade_batch(capture, [(problem, ANSWERS["truth"])])
    assert capture.files[0] == capture.files[1]
    assert "candidate(17) == True" not in str(capture.files[0])
    # The env's grading (grade_split): two runs per attempt, the same files for both twins, and
    # the public run's spec (the run whose texts are shown) holds the public calls only.
    plan = plan_checks(BASE)
    public, hidden = split_plan(plan)
    split = Capture()
    for problem in (BASE, TWIN):
        grade_split(split, problem, ANSWERS["truth"], public, hidden)
    assert len(split.files) == 4 and split.files[:2] == split.files[2:]
    runs = [json.loads(files["spec.json"])[0]["calls"] for files in split.files[:2]]
    assert runs == [
        [c for c, t in zip(plan.calls, plan.test_of_call, strict=True) if t in public],
        [c for c, t in zip(plan.calls, plan.test_of_call, strict=True) if t in hidden],
    ]


# ----------------------------------------------------------------------------- random state

RANDOM_CHECK = """
def check(candidate):
    import random
    assert candidate(0) == 0
    for _ in range(3):
        x = random.randint(0, 1000)
        assert candidate(x) == x
    for _ in range(3):
        y = random.randint(0, 1000)
        assert candidate(y) == y
    assert candidate(1) == 1
"""
RANDOM_PROBLEM = CodeProblem(
    "Custom/random",
    "def ident(x):\n    pass\n",
    "ident",
    "def ident(x):\n    return x\n",
    RANDOM_CHECK,
)


def test_an_early_failure_in_a_random_drawing_test_does_not_crash_grading(make_env: Any) -> None:
    """Latent finding, fixed. The first loop's test fails at its first iteration (a hidden expected
    value disagrees), so the host skips two ``random`` draws and the next loop's calls differ from
    the plan: ``judge`` raises RuntimeError("check() made other calls than when it was planned")
    out of ``grade`` (and of ``env.step``). Whether grading raises depends on hidden expected
    values. Fixed: the judge restores the random state the plan recorded at each test's entry."""
    env = make_env()
    env.reset(options={"task_id": "HumanEval/0"})
    runner = env.unwrapped._runner()
    wrong_once = "N = [0]\ndef ident(x):\n    N[0] += 1\n    return -1 if N[0] == 2 else x\n"
    right = grade(runner, RANDOM_PROBLEM, RANDOM_PROBLEM.solution)
    assert right.passed == right.total == 4
    result = grade(runner, RANDOM_PROBLEM, wrong_once)  # raised RuntimeError before
    assert result.passed == 3 and result.failed_tests == (1,)
