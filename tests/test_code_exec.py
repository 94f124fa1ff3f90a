"""CodeExec-v0 and CodeExecGenerated-v0: problems, check planning, grading and the episode rules.

Runs on the process back end (bubblewrap); tests/test_sandbox_docker.py repeats the HumanEval
oracle on Docker. Hand-worked values are explained where they are asserted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium
import numpy as np
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs import code_exec_channel as channel
from agentgym.envs.code_exec import (
    CodeProblem,
    extract_code,
    generate_problem,
    grade,
    grade_batch,
    humaneval_problems,
)
from agentgym.envs.code_exec_grading import UnsupportedCheck, judge, plan_checks
from sandboxes.code import ExecResult, SandboxError, make_sandbox


def run_oracle_on_humaneval(box: Any, workers: int = 2) -> tuple[list[tuple[str, Any]], int]:
    """Grade every canonical solution in ``box``: batches of 20 problems per sandbox run,
    ``workers`` runs at once. Returns (failures, total tests)."""
    problems = humaneval_problems()
    batches = [problems[i : i + 20] for i in range(0, len(problems), 20)]
    with ThreadPoolExecutor(workers) as pool:
        graded = pool.map(
            lambda b: grade_batch(box, [(p, p.solution) for p in b], timeout_s=120), batches
        )
        results = [r for batch in graded for r in batch]
    failures = [
        (p.task_id, r) for p, r in zip(problems, results, strict=True) if r.passed != r.total
    ]
    return failures, sum(r.total for r in results)


def _answer(code: str) -> str:
    return f"<think>t</think><answer>{code}</answer>"


@pytest.fixture(scope="module")
def box() -> Any:
    sandbox = make_sandbox("process")
    yield sandbox
    sandbox.close()


# ----------------------------------------------------------------------------- problems


def test_humaneval_has_164_problems_in_order() -> None:
    problems = humaneval_problems()
    assert len(problems) == 164
    assert [p.task_id for p in problems[:3]] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert problems[0].entry_point == "has_close_elements"
    assert all("||" not in p.solution for p in problems)  # '||' would split the oracle's answer


def test_plan_of_humaneval_0_by_hand() -> None:
    """HumanEval/0's check() is seven `assert candidate(...) == True/False` lines: seven tests,
    seven calls, all of the equality form; the arguments travel as wire JSON."""
    plan = plan_checks(humaneval_problems()[0])
    assert plan.tests[0] == "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    assert (len(plan.tests), len(plan.calls), plan.forms) == (7, 7, ("equality",) * 7)
    assert plan.calls[0] == '[[[1.0,2.0,3.9,4.0,5.0,2.2],0.3],{"d":[]}]'
    assert plan.test_of_call == tuple(range(7))


def test_every_check_of_the_164_problems_is_covered() -> None:
    """Every assert of every HumanEval check has a form the host evaluates (none refused).

    Counts pinned from a full parse: 1181 tests (top-level statements holding an assert, as before
    the change), 1537 calls (the loops of HumanEval/32, 38, 44, 50, 53 call many times), and the
    forms: 1091 equality, 48 `assert True`, 36 boolean (HumanEval/52, 56, 61, 72), 6 approximate
    (HumanEval/2, 4, 32).
    """
    plans = [plan_checks(p) for p in humaneval_problems()]
    assert min(len(p.tests) for p in plans) >= 1
    assert sum(len(p.tests) for p in plans) == 1181
    assert sum(len(p.calls) for p in plans) == 1537
    forms = Counter(f for p in plans for f in p.forms)
    assert forms == {"equality": 1091, "constant": 48, "boolean": 36, "approximate": 6}
    # every test makes at least one call, except the 48 tests that are a bare `assert True`
    tested = [set(p.test_of_call) for p in plans]
    uncalled = sum(len(p.tests) - len(t) for p, t in zip(plans, tested, strict=True))
    assert uncalled == 48


def test_random_inputs_are_seeded() -> None:
    """HumanEval/38, 50 and 53 draw inputs with `random`: the host's stand-in is seeded, so the
    plan is the same in another process (here: a fresh interpreter)."""
    problem = humaneval_problems()[53]
    here = plan_checks(problem).calls
    code = (
        "from agentgym.envs.code_exec_tasks import humaneval_problems\n"
        "from agentgym.envs.code_exec_grading import plan_checks\n"
        "print(repr(plan_checks(humaneval_problems()[53]).calls))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == repr(here)
    assert len(here) == 105  # 5 fixed calls, then 100 drawn pairs
    assert here[5] == '[[864,394],{"d":[]}]'  # random.Random(0): randint(0, 1000) twice


@pytest.mark.parametrize(
    ("test", "why"),
    [
        ("assert candidate(1) > 0", "assert form not evaluated"),
        ("assert candidate(1) == open('x')", "call of 'open'"),
        ("assert candidate(1) == 2 ** candidate(3)", "power"),
        ("assert [x for x in candidate(1)] == []", "ListComp in an assert"),
        ("assert candidate(candidate(1)) == 1", "inside another's arguments"),
        ("f = candidate\n    assert f(1) == 1", "other than by calling"),
        ("if candidate(1):\n        assert True", "result of the candidate outside an assert"),
    ],
)
def test_unsupported_check_forms_are_refused(test: str, why: str) -> None:
    problem = CodeProblem(
        "t", "def f(x):\n    pass\n", "f", "", f"def check(candidate):\n    {test}\n"
    )
    with pytest.raises(UnsupportedCheck, match=why):
        plan_checks(problem)


def test_judge_by_hand() -> None:
    """HumanEval/2 (truncate_number): `candidate(3.5) == 0.5`, then two approximate asserts
    `abs(candidate(1.33) - 0.33) < 1e-6` and `abs(candidate(123.456) - 0.456) < 1e-6`."""
    plan = plan_checks(humaneval_problems()[2])
    assert judge(plan, [(True, 0.5), (True, 0.33 + 5e-7), (True, 0.456)]) == (3, ())
    passed, failures = judge(plan, [(True, 0.5), (True, 0.3301), (False, "timed out after 5 s")])
    assert passed == 1
    assert failures == (
        ("assert abs(candidate(1.33) - 0.33) < 1e-06", "got 0.3301"),
        ("assert abs(candidate(123.456) - 0.456) < 1e-06", "timed out after 5 s"),
    )
    # a result of the wrong shape fails its test (str - float raises on the host), nothing else
    passed, failures = judge(plan, [(True, "0.5"), (True, 0.33), (True, "x")])
    assert passed == 1 and failures[1][1].startswith("raised TypeError")


def test_channel_round_trips_plain_data_only() -> None:
    value = (1, -2.5, None, True, "x\n", [1, (2, 3)], {"a": 1, 5: [None], (1, "b"): 2.0})
    assert channel.loads(channel.dumps(value)) == value
    assert type(channel.loads(channel.dumps((1,)))) is tuple  # tuples stay tuples
    nan = channel.loads(channel.dumps(float("nan")))
    assert nan != nan and channel.loads(channel.dumps(float("-inf"))) == float("-inf")

    class Str(str):
        def __eq__(self, other: object) -> bool:
            return True

    loop: list[Any] = []
    loop.append(loop)
    deep: list[Any] = []
    for _ in range(channel.MAX_DEPTH + 1):
        deep = [deep]
    for bad in [Str("a"), {1, 2}, iter([1]), loop, deep, 10**5000, len]:
        with pytest.raises(channel.NotPlainData):
            channel.dumps(bad)
    for wire in ['{"x": 1}', '{"d": [[[1], 2]]}', "NaN", '{"t": 1}', "[" * 100 + "]" * 100, "1 2"]:
        with pytest.raises(channel.NotPlainData):
            channel.loads(wire)


def test_generated_problems_are_seeded_and_varied() -> None:
    a = [generate_problem(np.random.default_rng(5)) for _ in range(2)]
    assert a[0] == a[1]
    rng = np.random.default_rng(0)
    names = {generate_problem(rng).entry_point for _ in range(60)}
    assert names == {
        "sum_of_multiples",
        "rotate_right",
        "shift_letters",
        "count_chosen",
        "poly_value",
        "digit_power_sum",
        "fizz_words",
    }


def test_extract_code() -> None:
    assert extract_code("```python\ndef f():\n    return 1\n```") == "def f():\n    return 1\n"
    assert extract_code("def f(): pass") == "def f(): pass"


# ----------------------------------------------------------------------------- grading


def test_humaneval_oracle_scores_all_164_with_process_backend(box: Any) -> None:
    start = time.monotonic()
    failures, total = run_oracle_on_humaneval(box, workers=2)
    print(f"process: 164 HumanEval problems in {time.monotonic() - start:.1f} s")
    assert failures == []
    assert total == 1181


def test_generated_oracle_passes(box: Any) -> None:
    rng = np.random.default_rng(1)
    problems = [generate_problem(rng) for _ in range(14)]
    for p in problems:
        result = grade(box, p, p.solution)
        assert (result.passed, result.error) == (result.total, None), p.task_id


def test_partial_credit_by_hand(box: Any) -> None:
    """`return True` passes HumanEval/0's asserts whose expected value is True: 4 of 7."""
    problem = humaneval_problems()[0]
    result = grade(box, problem, "def has_close_elements(numbers, threshold):\n    return True\n")
    assert (result.passed, result.total, result.error) == (4, 7, None)
    assert [why for _, why in result.failures] == ["got True"] * 3


def test_a_hanging_test_fails_alone(box: Any) -> None:
    """Loops when threshold < 0.1: the asserts with 0.05 hang (False expected anyway); the ones
    expecting False at 0.8 and 0.5 fail; 0.3, 0.95, 0.1 and 1.0 expect True and pass: 4 of 7."""
    code = (
        "def has_close_elements(numbers, threshold):\n"
        "    while threshold < 0.1:\n"
        "        pass\n"
        "    return True\n"
    )
    result = grade(box, humaneval_problems()[0], code, per_test_timeout_s=0.5)
    assert (result.passed, result.total) == (4, 7)
    assert [why for _, why in result.failures] == ["timed out after 0.5 s", "got True", "got True"]


def test_a_run_past_its_limit_says_timed_out(box: Any) -> None:
    """The answer blocks the per-call alarm and loops: the whole run is killed at timeout_s, and
    each test says it timed out (issue 16: not "not run")."""
    code = (
        "import signal\n"
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "def has_close_elements(numbers, threshold):\n"
        "    while True:\n"
        "        pass\n"
    )
    result = grade(box, humaneval_problems()[0], code, timeout_s=2, per_test_timeout_s=0.5)
    assert (result.passed, result.total) == (0, 7)
    assert all(why.startswith("timed out") for _, why in result.failures)


def test_answer_that_raises_scores_zero(box: Any) -> None:
    result = grade(box, humaneval_problems()[0], "def has_close_elements(a, b): pass\n1/0\n")
    assert (result.passed, result.total) == (0, 7)
    assert result.error == "your code raised ZeroDivisionError: division by zero"


def _wrong(problem: CodeProblem) -> str:
    """The canonical solution with its result nudged: ints + 1, floats * 1.5 + 1, strings + "x",
    lists and tuples with an extra item, bools negated, None -> 0."""
    return (
        problem.solution
        + "\n\n_agentgym_right = "
        + problem.entry_point
        + "\n\ndef "
        + problem.entry_point
        + "(*args, **kwargs):\n"
        + "    r = _agentgym_right(*args, **kwargs)\n"
        + "    if isinstance(r, bool):\n        return not r\n"
        + "    if isinstance(r, int):\n        return r + 1\n"
        + "    if isinstance(r, float):\n        return r * 1.5 + 1\n"
        + "    if isinstance(r, str):\n        return r + 'x'\n"
        + "    if isinstance(r, list):\n        return r + [0]\n"
        + "    if isinstance(r, tuple):\n        return r + (0,)\n"
        + "    return 0\n"
    )


#: 20 problems spread over the set (HumanEval/0, 8, ..., 152).
WRONG_PROBLEMS = tuple(range(0, 160, 8))


def wrong_scores(box: Any) -> list[tuple[int, int]]:
    """``(passed, total)`` of the nudged answer for each of :data:`WRONG_PROBLEMS`."""
    problems = [humaneval_problems()[i] for i in WRONG_PROBLEMS]
    results = grade_batch(box, [(p, _wrong(p)) for p in problems], timeout_s=120)
    return [(r.passed, r.total) for r in results]


def check_wrong_scores(scores: list[tuple[int, int]]) -> None:
    """Every nudged answer fails every test that calls it: it keeps exactly the bare
    `assert True` tests (one in HumanEval/64, 104, 136, 152; two in 88 and 128)."""
    plans = [plan_checks(humaneval_problems()[i]) for i in WRONG_PROBLEMS]
    bare = [len(p.tests) - len(set(p.test_of_call)) for p in plans]
    assert bare == [0] * 8 + [1, 0, 0, 2, 0, 1, 0, 0, 2, 1, 0, 1]
    assert scores == [(b, len(p.tests)) for b, p in zip(bare, plans, strict=True)]
    assert all(passed < total for passed, total in scores)


class _FailsToStart:
    """A runner whose first ``failures`` runs fail the way a sandbox does when the kernel has no
    free namespace (seen under load here); later runs go to the real sandbox."""

    def __init__(self, box: Any, failures: int):
        self.box, self.failures, self.calls = box, failures, 0

    def run(self, code: str, **kwargs: Any) -> ExecResult:
        self.calls += 1
        if self.calls <= self.failures:
            why = "bwrap: Creating new namespace failed: Resource temporarily unavailable\n"
            return ExecResult("", why, 1, False, False, 0.01, False)
        return self.box.run(code, **kwargs)


def test_a_sandbox_that_never_started_is_retried_then_reported(box: Any) -> None:
    """The harness's first line comes before the answer runs, so its absence is the sandbox's
    failure, never the answer's: retried, then SandboxError rather than a reward of 0."""
    problem = humaneval_problems()[0]
    runner = _FailsToStart(box, failures=3)
    result = grade(runner, problem, problem.solution)
    assert (result.passed, result.total, runner.calls) == (7, 7, 4)
    with pytest.raises(SandboxError, match="did not start the grader .4 tries.: bwrap"):
        grade(_FailsToStart(box, failures=4), problem, problem.solution)


# ----------------------------------------------------------------------------- the environment


def _make(env_id: str = "agentgym/CodeExec-v0", **kwargs: Any) -> gymnasium.Env:
    return gymnasium.make(env_id, backend="process", **kwargs)


def test_episode_partial_then_oracle() -> None:
    env = _make()
    obs, info = env.reset(options={"task_id": "HumanEval/0"})
    assert info["task_id"] == "HumanEval/0" and info["num_tests"] == 7
    assert obs.startswith("```python\nfrom typing import List")
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    obs, reward, terminated, truncated, info = env.step(_answer(wrong))
    assert reward == pytest.approx(4 / 7)
    assert (terminated, truncated, info["success"]) == (False, False, False)
    assert "Attempt 1: 4/7 tests passed." in obs and "Failed: assert candidate(" in obs
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_answer())
    assert reward == pytest.approx(3 / 7)  # improvement over the best so far: 7/7 - 4/7
    assert (terminated, info["success"]) == (True, True)
    assert "Attempt 2: 7/7 tests passed." in obs
    env.close()


def test_attempts_run_out_and_terminate() -> None:
    env = _make(max_turns=2)
    env.reset(options={"index": 0})
    wrong = _answer("def has_close_elements(numbers, threshold):\n    return True\n")
    first = env.step(wrong)
    second = env.step(wrong)
    assert first[1] == pytest.approx(4 / 7) and second[1] == 0.0  # no pay for the same score
    assert second[2:4] == (True, False) and second[4]["success"] is False
    env.close()


def test_code_without_the_function_is_invalid_and_not_run() -> None:
    env = _make()
    obs0, _ = env.reset(options={"index": 0})
    for text in ["print('hi')", "def other(): pass", "def has_close_elements(:"]:
        obs, reward, terminated, truncated, info = env.step(_answer(text))
        assert info["action_is_valid"] is False and reward == -0.1 and obs == obs0
        assert info["invalid_reason"].startswith("unrecognised action")
    assert env.unwrapped._sandbox is None  # nothing was run, so no sandbox was started
    env.close()


def test_generated_env_oracle_over_seeds() -> None:
    env = _make("agentgym/CodeExecGenerated-v0")
    for seed in range(5):
        env.reset(seed=seed)
        *_, info = env.step(env.unwrapped.oracle_answer())
        assert info["success"] and info["pass_fraction"] == 1.0
    env.close()


def test_bad_options_and_arguments() -> None:
    env = _make()
    with pytest.raises(ValueError, match="HumanEval id"):
        env.reset(options={"task_id": "HumanEval/999"})
    with pytest.raises(ValueError, match=r"index.*\[0, 164\)"):
        env.reset(options={"index": 164})
    env.close()
    with pytest.raises(ValueError, match="backend must be one of"):
        gymnasium.make("agentgym/CodeExec-v0", backend="vm")
    with pytest.raises(ValueError, match="source=.humaneval. is fixed"):
        gymnasium.make("agentgym/CodeExec-v0", source="generated")


def test_problem_dataclass_is_frozen() -> None:
    p = CodeProblem("t", "p", "f", "s", "def check(candidate):\n    assert True\n")
    with pytest.raises(AttributeError):
        p.task_id = "x"  # type: ignore[misc]
