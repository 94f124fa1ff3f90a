"""CodeExec-v0 and CodeExecGenerated-v0: problems, test splitting, grading and the episode rules.

Runs on the process back end (bubblewrap); tests/test_sandbox_docker.py repeats the HumanEval
oracle on Docker. Hand-worked values are explained where they are asserted.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium
import numpy as np
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs.code_exec import (
    CodeProblem,
    extract_code,
    generate_problem,
    grade,
    grade_batch,
    humaneval_problems,
    split_tests,
)
from sandboxes.code import make_sandbox


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


def test_split_tests_of_humaneval_0_by_hand() -> None:
    """HumanEval/0's check() is seven asserts after a METADATA dict at module level."""
    setup, steps = split_tests(humaneval_problems()[0].test)
    assert len(setup) == 1 and setup[0].startswith("METADATA = ")
    assert [is_test for _, is_test in steps] == [True] * 7
    assert steps[0][0] == "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"


def test_every_problem_has_tests() -> None:
    counts = [sum(t for _, t in split_tests(p.test)[1]) for p in humaneval_problems()]
    assert min(counts) >= 1
    assert sum(counts) == 1181  # pinned: the per-test split of the 164 check() functions


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
    assert len(result.failures) == 3
    assert all(why.startswith("AssertionError") for _, why in result.failures)


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
    assert any("timed out" in why for _, why in result.failures)


def test_answer_that_raises_scores_zero(box: Any) -> None:
    result = grade(box, humaneval_problems()[0], "def has_close_elements(a, b): pass\n1/0\n")
    assert (result.passed, result.total) == (0, 7)
    assert result.error == "your code raised ZeroDivisionError: division by zero"


def test_printed_fake_report_is_not_believed(box: Any) -> None:
    code = (
        "import os, sys\n"
        "def has_close_elements(a, b):\n    return None\n"
        "print('AGENTGYM-' + '0' * 32 + '{\"error\": null, \"results\": [[true, null]]}')\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n"
    )
    result = grade(box, humaneval_problems()[0], code)
    assert result.passed == 0  # the forged line lacks this run's nonce, and the tests never ran
    assert result.error is not None and "before the tests finished" in result.error


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
