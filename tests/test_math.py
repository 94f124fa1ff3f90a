"""Math-v0, MathArithmetic-v0, MathChainSum-v0 and MathFile-v0 (agentgym/envs/math_word.py).

The contract (check_env, vector envs, bad actions, golden seeds) is covered for these ids by
tests/test_contract.py and tests/test_golden.py; here: the attempt/feedback loop and its rewards
(1/2^(k-1), RAGEN's MetaMathQA rule), the seed -> reasoning-gym item mapping, the oracle over 200
seeds, JSONL data sets and their errors, and the arguments. Expected values are worked by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import pytest
import reasoning_gym
from gymnasium.utils import seeding

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.math_word import SAMPLE_FILE, MathFileEnv, generate_problem, load_problems
from tests.helpers import ROOT, run_python

MATH_IDS = [
    "agentgym/Math-v0",
    "agentgym/MathArithmetic-v0",
    "agentgym/MathChainSum-v0",
    "agentgym/MathFile-v0",
]
WRONG = "<think>guess</think><answer>-123456789</answer>"


def _answer(text: str) -> str:
    return f"<think>t</think><answer>{text}</answer>"


def test_every_math_id_is_registered() -> None:
    registered = [i for i in agentgym.registered_envs() if i.startswith("agentgym/Math")]
    assert registered == MATH_IDS


# ----------------------------------------------------------------------------- problems by hand


def test_seed_zero_problems_worked_by_hand() -> None:
    """Seed 0 of each generated id, the reference worked out by hand from the question."""
    env = gymnasium.make("agentgym/Math-v0")
    obs, info = env.reset(seed=0)
    # Purple spools 38 + 78 = 116 of 38 + 78 + 38 + 136 = 290: 116 / 290 = 40%.
    assert obs.startswith("Emma has 38 light purple spools of thread, 78 dark purple spools")
    assert "136 dark green spools" in obs and "What percent of her spools are purple?" in obs
    assert env.unwrapped.problem.answer == "40"
    assert info["task"] == "gsm_symbolic" and info["success"] is False

    env = gymnasium.make("agentgym/MathArithmetic-v0")
    obs, _ = env.reset(seed=0)
    assert obs == "Calculate -( -354 / 59 + -68 )."  # -(-6 - 68) = 74
    assert env.unwrapped.problem.answer == "74"

    env = gymnasium.make("agentgym/MathChainSum-v0")
    obs, _ = env.reset(seed=0)
    assert obs.endswith("860 - 639 + 390 =")  # 221 + 390 = 611
    assert env.unwrapped.problem.answer == "611"


@pytest.mark.parametrize("task", ["gsm_symbolic", "basic_arithmetic", "chain_sum"])
def test_seed_maps_to_reasoning_gym_item(task: str) -> None:
    """reset(seed) draws item_seed = np_random.integers(2**31) and poses item 0 of reasoning-gym's
    dataset(task, seed=item_seed, size=1): rebuilt here from gymnasium's and reasoning-gym's APIs."""
    env = gymnasium.make("agentgym/Math-v0", task=task)
    for seed in (0, 7, 12345):
        obs, info = env.reset(seed=seed)
        rng, _ = seeding.np_random(seed)
        item_seed = int(rng.integers(2**31))
        assert info["item_seed"] == item_seed
        item = reasoning_gym.create_dataset(task, seed=item_seed, size=1)[0]
        assert obs == item["question"]
        assert env.unwrapped.problem.answer == item["answer"]
        assert info["source"] == f"reasoning_gym:{task} item_seed={item_seed}"


def test_same_seed_same_problem_in_a_fresh_process() -> None:
    seeds = list(range(8))
    code = (
        "import json, gymnasium, agentgym\n"
        f"out = {{}}\nfor env_id in {MATH_IDS!r}:\n"
        "    env = gymnasium.make(env_id)\n"
        f"    out[env_id] = [env.reset(seed=s)[0] for s in {seeds!r}]\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4321"}
    result = run_python("-c", code, cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    fresh = json.loads(result.stdout)
    for env_id in MATH_IDS:
        local = gymnasium.make(env_id)
        here = [local.reset(seed=s)[0] for s in seeds]
        assert fresh[env_id] == here, env_id
        assert len(set(here)) >= 4, "different seeds give different problems"


# ----------------------------------------------------------------------------- the attempt loop


def test_wrong_twice_then_right_scores_a_quarter() -> None:
    env = gymnasium.make("agentgym/Math-v0")
    question, _ = env.reset(seed=0)  # reference 40
    obs, reward, terminated, truncated, info = env.step(_answer("39"))
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, False, False)
    assert info["action_is_valid"] and info["answer_correct"] is False and info["attempt"] == 1
    assert (
        obs
        == question + "\n\nAttempt 1: your answer '39' is incorrect, try again (2 attempts left)."
    )
    obs, reward, terminated, truncated, info = env.step(_answer("$41"))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert obs.endswith("Attempt 2: your answer '$41' is incorrect, try again (1 attempt left).")
    obs, reward, terminated, truncated, info = env.step(_answer("40%"))
    assert (reward, terminated, truncated, info["success"]) == (0.25, True, False, True)
    assert info["answer_correct"] is True and info["attempt"] == 3
    assert obs.endswith("Attempt 3: your answer '40%' is correct.")


@pytest.mark.parametrize(("attempt", "expected"), [(1, 1.0), (2, 0.5), (3, 0.25)])
def test_reward_halves_with_each_attempt(attempt: int, expected: float) -> None:
    env = gymnasium.make("agentgym/MathChainSum-v0")
    env.reset(seed=0)  # reference 611
    for _ in range(attempt - 1):
        env.step(WRONG)
    _, reward, terminated, _, info = env.step(_answer("611"))
    assert reward == expected and terminated and info["success"]


def test_reward_decay_is_configurable() -> None:
    env = gymnasium.make("agentgym/MathChainSum-v0", reward_decay=1.0, max_turns=4)
    env.reset(seed=0)
    for _ in range(3):
        env.step(WRONG)
    assert env.step(_answer("611"))[1] == 1.0
    env = gymnasium.make("agentgym/MathChainSum-v0", reward_decay=0.1)
    env.reset(seed=0)
    env.step(WRONG)
    assert env.step(_answer("611"))[1] == pytest.approx(0.1)


def test_all_wrong_terminates_without_success() -> None:
    env = gymnasium.make("agentgym/MathChainSum-v0")
    env.reset(seed=0)
    steps = [env.step(WRONG) for _ in range(3)]
    assert [s[1] for s in steps] == [0.0, 0.0, 0.0]
    assert [s[2] for s in steps] == [False, False, True]  # the attempts are the task's rule
    assert not any(s[3] for s in steps)
    assert steps[-1][4]["success"] is False
    assert steps[-1][0].endswith("is incorrect (no attempts left).")


def test_unreadable_answer_is_an_invalid_turn_that_uses_an_attempt() -> None:
    """No mathematical expression: the shared invalid-action policy; the observation is unchanged."""
    env = gymnasium.make("agentgym/MathChainSum-v0")
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(_answer("six hundred eleven"))
    assert (obs, reward, terminated, info["action_is_valid"]) == (obs0, -0.1, False, False)
    _, reward, terminated, _, info = env.step(_answer("611"))
    assert (reward, terminated, info["success"], info["attempt"]) == (0.5, True, True, 2)


def test_plain_text_notation_is_an_invalid_turn() -> None:
    """The answer rules: words for functions and constants (``exp(2)``, ``pi``) are judged as
    Math-Verify judges them, no expression read; LaTeX is read."""
    env = gymnasium.make("agentgym/MathFile-v0")
    problem = {"question": "What is e squared?", "answer": "e^{2}"}
    for text in ("exp(2)", "e^2", "pi"):
        obs0, _ = env.reset(seed=0, options=problem)
        obs, reward, terminated, _, info = env.step(_answer(text))
        assert (obs, reward, terminated, info["action_is_valid"]) == (obs0, -0.1, False, False)
    env.reset(seed=0, options=problem)
    _, reward, terminated, _, info = env.step(_answer("$e^2$"))
    assert (reward, terminated, info["answer_correct"]) == (1.0, True, True)


def test_a_whole_worked_reply_is_read_by_its_final_region() -> None:
    """An ``<answer>`` over 1000 characters (up to 16,000) is read as Math-Verify reads a reply:
    here by its last ``\\boxed{}``; its feedback shows the region read."""
    env = gymnasium.make("agentgym/MathChainSum-v0")
    env.reset(seed=0)
    work = "".join(f"Adding term {k}, the running total is {k * 7}.\n" for k in range(60))
    assert len(work) > 1000
    obs, reward, _, _, info = env.step(_answer(work + "So the sum is $\\boxed{610}$."))
    assert (reward, info["action_is_valid"], info["answer_correct"]) == (0.0, True, False)
    assert "your answer '\\\\boxed{610}' is incorrect" in obs
    _, reward, terminated, _, info = env.step(_answer(work + "So the sum is $\\boxed{611}$."))
    assert (reward, terminated, info["success"]) == (0.5, True, True)


def test_huge_power_is_a_valid_wrong_answer() -> None:
    env = gymnasium.make("agentgym/MathChainSum-v0")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(_answer("9^9^9^9"))
    assert (reward, terminated, info["action_is_valid"], info["answer_correct"]) == (
        0.0,
        False,
        True,
        False,
    )


def test_long_answers_are_shortened_in_the_feedback() -> None:
    env = gymnasium.make("agentgym/MathChainSum-v0")
    env.reset(seed=0)
    obs = env.step(_answer("1" * 300))[0]
    assert f"your answer '{'1' * 100}...' is incorrect" in obs


@pytest.mark.parametrize("env_id", MATH_IDS)
def test_oracle_solves_200_seeds_on_the_first_attempt(env_id: str) -> None:
    env = gymnasium.make(env_id)
    for seed in range(200):
        env.reset(seed=seed)
        _, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_answer())
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True), seed


def test_reset_options_pose_a_given_problem() -> None:
    env = gymnasium.make("agentgym/Math-v0")
    obs, info = env.reset(options={"question": "What is 6 times 7?", "answer": 42})
    assert obs == "What is 6 times 7?" and info["source"] == "reset options"
    assert env.step(_answer("\\boxed{42}"))[1] == 1.0
    with pytest.raises(ValueError, match="options\\['answer'\\].*cannot read"):
        env.reset(options={"question": "Name a colour.", "answer": "blue"})
    with pytest.raises(ValueError, match="options\\['question'\\]"):
        env.reset(options={"answer": "1"})


# ----------------------------------------------------------------------------- arguments


def test_task_argument_selects_another_reasoning_gym_task() -> None:
    env = gymnasium.make("agentgym/Math-v0", task="products", task_config={"min_terms": 2})
    obs, info = env.reset(seed=3)
    assert info["task"] == "products" and obs.startswith("Solve the following multiplication")
    assert env.step(env.unwrapped.oracle_answer())[1] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"task": "no_such_task"}, "reasoning-gym task name"),
        ({"task": "spell_backward"}, "not a mathematical value"),
        ({"task_config": {"no_such_field": 1}}, "cannot make task='gsm_symbolic'"),
        ({"task_config": {"seed": 1}}, "must not set 'seed'"),
        ({"reward_decay": 0.0}, "reward_decay"),
        ({"reward_decay": 1.5}, "reward_decay"),
        ({"max_actions_per_turn": 2}, "one answer per turn"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
def test_bad_arguments_name_the_fix(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gymnasium.make("agentgym/Math-v0", **kwargs)


def test_task_is_fixed_by_the_arithmetic_ids() -> None:
    with pytest.raises(ValueError, match="fixed by agentgym/MathArithmetic-v0"):
        gymnasium.make("agentgym/MathArithmetic-v0", task="chain_sum")


def test_package_import_does_not_load_the_math_extra() -> None:
    code = (
        "import sys, agentgym\n"
        "print(any(m in sys.modules for m in ('reasoning_gym', 'math_verify', 'sympy')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("blocked", "env_id"), [("reasoning_gym", "Math-v0"), ("math_verify", "MathFile-v0")]
)
def test_missing_extra_names_the_install_command(blocked: str, env_id: str) -> None:
    """With the package made unimportable (sys.modules[name] = None), making the env says what
    to install."""
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "import gymnasium, agentgym\n"
        "try:\n"
        f"    gymnasium.make('agentgym/{env_id}')\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'agentgym[math]'" in result.stdout


# ----------------------------------------------------------------------------- JSONL files


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_user_file_references_read_as_check_answer_reads_them(tmp_path: Path) -> None:
    """Issue 25: a half-open interval without a space ([-2,7)) is a reference MathFile accepts at
    reset, as check_answer does; several boxed answers are all required; an equation is an
    equation. Each reward worked out by hand (1 at the first attempt, 0 when wrong)."""
    rows = [
        ("For which x is -2 <= x < 7?", "[-2,7)", ["[-2, 7)", "[-2,7)"], ["(-2,7)", "7"]),
        ("Roots of x^2 - 5x + 6?", "$\\boxed{2}$ and $\\boxed{3}$", ["2, 3"], ["3", "2"]),
        ("The line through (0, 1) and (1, 3)?", "y = 2x+1", ["2x - y + 1 = 0"], ["2x+1"]),
    ]
    path = _write(tmp_path, [json.dumps({"question": q, "answer": a}) for q, a, *_ in rows])
    env = gymnasium.make("agentgym/MathFile-v0", dataset_file=str(path))
    for index, (question, _, rights, wrongs) in enumerate(rows):
        for text, reward in [*((r, 1.0) for r in rights), *((w, 0.0) for w in wrongs)]:
            seed = next(s for s in range(100) if env.reset(seed=s)[1]["problem_index"] == index)
            assert env.reset(seed=seed)[0] == question
            _, got, _, _, info = env.step(_answer(text))
            assert (got, info["action_is_valid"]) == (reward, True), (question, text)
    env.reset(options={"question": "x?", "answer": "[-2,7)"})
    assert env.step(env.unwrapped.oracle_answer())[1] == 1.0


def test_sample_file_loads_with_hand_checked_references() -> None:
    problems = load_problems(SAMPLE_FILE)
    assert len(problems) == 20
    # Line 6 is a GSM8K-style solution (15 + 9 - 6 = 18), line 7 a MATH-style \boxed{} one.
    assert problems[5].answer == "18" and problems[5].oracle_text == "18"
    assert problems[6].oracle_text == "1024"
    assert problems[5].source.endswith("math_sample.jsonl:6")


def test_user_file_problems_and_seeds(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            json.dumps(
                {
                    "question": "Natalia sold 48 clips in April and half as many in May. "
                    "How many in all?",
                    "answer": "48/2 = 24 in May.\n48+24 = 72\n#### 72",
                }
            ),
            "",  # blank lines are skipped
            json.dumps({"question": "What is 1/2 + 1/4?", "answer": "$\\frac{3}{4}$", "id": 7}),
            json.dumps({"question": "What is 10 - 15?", "answer": -5}),
        ],
    )
    env = gymnasium.make("agentgym/MathFile-v0", dataset_file=str(path))
    assert isinstance(env.unwrapped, MathFileEnv)
    seen = {}
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        rng, _ = seeding.np_random(seed)
        assert info["problem_index"] == int(rng.integers(3))  # a line drawn from np_random
        seen[info["problem_index"]] = (obs, info["source"], env.unwrapped.oracle_actions())
        assert env.step(env.unwrapped.oracle_answer())[1] == 1.0
    assert seen[0][1] == f"{path.resolve()}:1" and seen[0][2] == ["72"]
    assert seen[1][1] == f"{path.resolve()}:3" and seen[1][0] == "What is 1/2 + 1/4?"
    assert seen[2][2] == ["-5"]
    first = next(s for s in range(30) if env.reset(seed=s)[1]["problem_index"] == 0)
    assert env.reset(seed=first)[0].startswith("Natalia sold 48 clips")
    assert env.step(_answer("72 clips."))[1] == 1.0


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (['{"question": "q", "answer": "1"}', "{not json"], r"problems\.jsonl:2: not valid JSON"),
        (['{"question": "q", "answer": "1"}', "[1, 2]"], r":2: a JSON list, not an object"),
        (['{"question": "q"}'], r":1: missing field\(s\) 'answer'"),
        (
            ['{"answer": "1"}', '{"question": "q", "answer": "1"}'],
            r":1: missing field\(s\) 'question'",
        ),
        (['{"q": 1}'], r":1: missing field\(s\) 'question', 'answer'"),
        (['{"question": "", "answer": "1"}'], r":1: 'question' must be a non-empty string"),
        (['{"question": "q", "answer": null}'], r":1: 'answer' must be a string or a number"),
        (['{"question": "q", "answer": true}'], r":1: 'answer' must be a string or a number"),
        (
            ['{"question": "q", "answer": "1"}', '{"question": "q", "answer": "blue"}'],
            r":2: the checker cannot read the answer 'blue'",
        ),
        (["", "  "], r"no problems \(the file is empty\)"),
    ],
)
def test_bad_files_name_the_line(tmp_path: Path, lines: list[str], match: str) -> None:
    path = _write(tmp_path, lines)
    with pytest.raises(ValueError, match=match):
        gymnasium.make("agentgym/MathFile-v0", dataset_file=str(path))


def test_question_too_long_for_the_observation(tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps({"question": "x" * 9000, "answer": "1"})])
    with pytest.raises(
        ValueError, match=":1: the question has 9000 characters.*max_observation_length"
    ):
        gymnasium.make("agentgym/MathFile-v0", dataset_file=path)
    env = gymnasium.make("agentgym/MathFile-v0", dataset_file=path, max_observation_length=10_000)
    assert len(env.reset(seed=0)[0]) == 9000


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist.*JSONL file"):
        gymnasium.make("agentgym/MathFile-v0", dataset_file=str(tmp_path / "nope.jsonl"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gymnasium.make("agentgym/MathFile-v0", dataset_file=str(tmp_path))  # a folder
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes('{"question": "caf\xe9", "answer": "1"}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        gymnasium.make("agentgym/MathFile-v0", dataset_file=str(bad))


def test_edited_file_is_read_again(tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps({"question": "What is 2 + 2?", "answer": "4"})])
    assert load_problems(path)[0].answer == "4"
    path.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}) + "\n\n", "utf-8")
    assert load_problems(path)[0].answer == "5"


def test_generate_problem_is_reasoning_gym_item_zero() -> None:
    problem = generate_problem("chain_sum", 99)
    item = reasoning_gym.create_dataset("chain_sum", seed=99, size=1)[0]
    assert (problem.question, problem.answer) == (item["question"], item["answer"])


def test_several_part_answers_need_every_part() -> None:
    """Hand-worked: the reference "12 and 20" is not met by its last part; with the default
    reward_decay 0.5, the full answer at attempt 3 scores 0.5 ** 2. Order is free only when the task
    says so ("unordered")."""
    env = gymnasium.make("agentgym/Math-v0")
    env.reset(options={"question": "Which two numbers?", "answer": "12 and 20"})
    assert env.step(_answer("20"))[1] == 0.0
    assert env.step(_answer("20 and 12"))[1] == 0.0
    assert env.step(_answer("12 and 20"))[1] == 0.25
    env.reset(options={"question": "Which two numbers?", "answer": "12 and 20", "unordered": True})
    assert env.step(_answer("\\boxed{20, 12}"))[1] == 1.0
    with pytest.raises(ValueError, match="unordered"):
        env.reset(options={"question": "q", "answer": "1", "unordered": "yes"})
    env.close()


def test_unordered_field_of_a_file_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            '{"question": "Roots of x^2 - 3x + 2?", "answer": "1 and 2", "unordered": true}',
            '{"question": "The point?", "answer": "(0, 1)"}',
        ],
    )
    problems = load_problems(path)
    assert [p.unordered for p in problems] == [True, False]
    assert problems[1].oracle_text == "(0, 1)"
