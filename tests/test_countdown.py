"""Countdown-v0, its safe expression parser and its brute-force solver (agentgym/envs/countdown.py,
agentgym/solvers/countdown_expr.py, agentgym/solvers/countdown.py). Values worked out by hand."""

from __future__ import annotations

from fractions import Fraction

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.countdown import CountdownEnv, generate_problem
from agentgym.solvers.countdown import solve
from agentgym.solvers.countdown_expr import parse_expression, uses_given_numbers


def _answer(text: str) -> str:
    return f"<think>t</think><answer>{text}</answer>"


# ---------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    ("text", "value", "numbers"),
    [
        ("(100 - 4) / 8 * 2", Fraction(24), (100, 4, 8, 2)),  # 96 / 8 = 12, * 2 = 24
        ("100 - 4 / 8 * 2", Fraction(99), (100, 4, 8, 2)),  # 4 / 8 * 2 = 1
        ("2 + 3 * 4", Fraction(14), (2, 3, 4)),
        ("(2 + 3) * 4", Fraction(20), (2, 3, 4)),
        ("10 - 4 - 3", Fraction(3), (10, 4, 3)),  # left associative, not 10 - 1
        ("100 / 10 / 5", Fraction(2), (100, 10, 5)),  # left associative, not 100 / 2
        ("7 / 2", Fraction(7, 2), (7, 2)),  # exact, not 3.5 or 3
        ("1 / 3 + 1 / 6", Fraction(1, 2), (1, 3, 1, 6)),  # exact: no float rounding
        ("-3 + 5", Fraction(2), (3, 5)),
        ("8 / (3 - 1)", Fraction(4), (8, 3, 1)),
        ("((((1))))", Fraction(1), (1,)),
        ("  6*7  ", Fraction(42), (6, 7)),
    ],
)
def test_parser_values(text, value, numbers):
    result = parse_expression(text)
    assert result.error is None
    assert result.value == value and result.numbers == numbers and result.claimed is None


def test_parser_reads_the_claimed_target():
    result = parse_expression("(100 - 4) / 8 * 2 = 24")
    assert result.ok and result.value == 24 and result.claimed == 24
    assert result.expression == "(100 - 4) / 8 * 2"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("__import__('os')", "unexpected character"),
        ("9**9**9", "'**'"),
        ("9^9", "'^'"),
        ("1 / 0", "division by zero"),
        ("5 / (3 - 3)", "division by zero"),
        ("x + 1", "unexpected character"),
        ("2.5 + 1", "unexpected character"),
        ("", "empty"),
        ("   ", "empty"),
        ("(1 + 2", "parentheses"),
        ("1 + 2)", "unexpected ')'"),
        ("1 +", "ends too early"),
        ("()", "operand"),
        ("1 2", "unexpected '2'"),
        ("= 5", "empty"),
        ("1 + 2 = abc", "after '='"),
        ("1 = 2 = 3", "after '='"),
        ("1 + 2 = -3", "after '='"),
        ("٣ + 1", "unexpected character"),  # an Arabic-Indic digit is not an ASCII digit
        ("(" * 17 + "1" + ")" * 17, "nested deeper than 16"),
        ("1 + " * 2500 + "1", "longer than 200"),  # 10 kB
        ("9" * 10_000, "longer than 200"),
    ],
)
def test_parser_rejects_without_raising(text, reason):
    # Work is bounded by the length and depth limits (speed: benchmarks/bench_envs.py).
    result = parse_expression(text)
    assert not result.ok and result.value is None and reason in result.error


def test_parser_depth_limit_is_inclusive():
    assert parse_expression("(" * 16 + "1" + ")" * 16).value == 1


def test_parser_rejects_non_strings():
    assert not parse_expression(None).ok  # type: ignore[arg-type]
    assert not parse_expression(b"1 + 1").ok  # type: ignore[arg-type]


def test_uses_given_numbers_is_a_multiset_check():
    assert uses_given_numbers([4, 8], [100, 4, 8, 2])  # a subset is fine
    assert not uses_given_numbers([4, 4], [100, 4, 8, 2])  # 4 given once, used twice
    assert uses_given_numbers([4, 4], [4, 4, 8])  # 4 given twice
    assert not uses_given_numbers([1], [100, 4, 8, 2])  # 1 not given


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_parser_never_raises_on_any_text(text):
    result = parse_expression(text)
    assert result.ok == (result.error is None)
    if result.ok:
        assert isinstance(result.value, Fraction)


@settings(max_examples=300)
@given(st.text(alphabet="0123456789+-*/()= ^x.", max_size=250))
def test_parser_never_raises_on_near_arithmetic(text):
    result = parse_expression(text)
    if result.ok:
        assert isinstance(result.value, Fraction)
        assert all(isinstance(n, int) and n >= 0 for n in result.numbers)


_trees = st.recursive(
    st.integers(0, 50),
    lambda children: st.tuples(st.sampled_from("+-*/"), children, children),
    max_leaves=12,
)


def _write(tree) -> str:
    if isinstance(tree, int):
        return str(tree)
    op, left, right = tree
    return f"({_write(left)} {op} {_write(right)})"


def _value(tree) -> Fraction | None:
    if isinstance(tree, int):
        return Fraction(tree)
    op, left, right = tree
    a, b = _value(left), _value(right)
    if a is None or b is None or (op == "/" and b == 0):
        return None
    return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[op]


@settings(max_examples=200)
@given(_trees)
def test_parser_agrees_with_direct_evaluation_of_random_trees(tree):
    text = _write(tree)
    result = parse_expression(text, max_length=10_000, max_depth=100)
    expected = _value(tree)
    if expected is None:
        assert result.error == "division by zero"
    else:
        assert result.value == expected


# ---------------------------------------------------------------- the solver


def test_solver_hand_cases():
    found = solve([100, 4, 8, 2], 24)
    assert found is not None
    result = parse_expression(found)
    assert result.value == 24 and uses_given_numbers(result.numbers, [100, 4, 8, 2])
    assert solve([1, 1], 3) is None  # 1 + 1 = 2 is the most two ones can make
    assert solve([2, 3], 6) == "2 * 3"
    assert solve([5, 7, 9], 7) == "7"  # a subset (here one number) may suffice
    every = solve([5, 7, 9], 7, use_all=True)  # RAGEN's rule: all three, e.g. 9 - 7 + 5
    assert every is not None and sorted(parse_expression(every).numbers) == [5, 7, 9]
    assert parse_expression(every).value == 7
    assert solve([1, 1], 1) == "1" and solve([1, 1], 1, use_all=True) == "1 * 1"


def test_solver_uses_fractions_when_needed():
    # 24 from 1, 3, 4, 6 needs a fraction: 6 / (1 - 3 / 4) = 6 / (1/4) = 24.
    found = solve([1, 3, 4, 6], 24)
    assert found is not None and parse_expression(found).value == 24


def test_solver_five_numbers_unsolvable():
    assert solve([1, 1, 1, 1, 1], 1000) is None  # (1 + 1) * ... at most 6 = (1+1)*(1+1+1)


# ---------------------------------------------------------------- the generator


def test_generated_problems_are_solvable_and_references_correct():
    for seed in range(200):
        problem = generate_problem(np.random.default_rng(seed), 4)
        assert len(problem.numbers) == 4 and all(1 <= n <= 100 for n in problem.numbers)
        assert 1 <= problem.target <= 1000 and problem.target not in problem.numbers
        reference = parse_expression(problem.solution)
        assert reference.value == problem.target, seed
        assert sorted(reference.numbers) == sorted(problem.numbers), seed  # each used once
        assert solve(problem.numbers, problem.target) is not None, seed


@pytest.mark.parametrize("num_numbers", [3, 5, 6])
def test_generated_problems_of_other_sizes(num_numbers):
    for seed in range(20):
        problem = generate_problem(np.random.default_rng(seed), num_numbers)
        reference = parse_expression(problem.solution)
        assert reference.value == problem.target
        assert sorted(reference.numbers) == sorted(problem.numbers)
        if num_numbers <= 5:
            assert solve(problem.numbers, problem.target) is not None


def test_generation_is_reproducible():
    a = generate_problem(np.random.default_rng(3), 4)
    b = generate_problem(np.random.default_rng(3), 4)
    assert a == b
    env = gymnasium.make("agentgym/Countdown-v0")
    assert env.reset(seed=11)[0] == env.reset(seed=11)[0]


# ---------------------------------------------------------------- the environment


@pytest.fixture
def env24() -> CountdownEnv:
    env = CountdownEnv()
    env.reset(seed=0, options={"numbers": [100, 4, 8, 2], "target": 24})
    return env


def test_observation(env24):
    assert env24.render() == "Numbers: [100, 4, 8, 2]\nTarget: 24"


@pytest.mark.parametrize(
    ("answer", "reward", "valid", "success"),
    [
        ("(100 - 4) / 8 * 2", 1.0, True, True),
        ("(100 - 4) / 8 * 2 = 24", 1.0, True, True),
        ("8 * (4 - 2) + 8 / 8", 0.0, True, False),  # 17, and 8 used three times
        ("100 - 4 - 8 * 2", 0.1, True, False),  # 80: every given number once, wrong value
        ("100", 0.0, True, False),  # a lone given number leaves three out (RAGEN: 0)
        ("(8 - 2) * 4", 0.0, True, False),  # = 24 but 100 is left out (RAGEN/TinyZero: 0)
        ("100 / 4 - 1", 0.0, True, False),  # = 24, but 1 is not given
        ("4 * 4 + 8", 0.0, True, False),  # = 24, but 4 is given once and used twice
        ("hello", -0.1, False, False),
        ("9**9", -0.1, False, False),
        ("8 / (4 - 4)", -0.1, False, False),  # division by zero: no value
    ],
)
def test_rewards(env24, answer, reward, valid, success):
    obs, r, terminated, truncated, info = env24.step(_answer(answer))
    assert r == pytest.approx(reward)
    assert info["action_is_valid"] is valid and info["success"] is success
    assert terminated and not truncated  # a single attempt: the budget is the task's rule
    # A scored answer adds a third line saying how it was scored; an invalid one changes nothing.
    assert len(obs.splitlines()) == (3 if valid else 2)


@pytest.mark.parametrize(
    ("answer", "reward"),
    [
        ("(100 - 4) / 8 * 2", 1.0),
        ("(8 - 2) * 4", 1.0),  # a subset is enough under the old rule
        ("100", 0.1),  # a lone given number is a (wrong) expression
        ("100 - 4 - 8", 0.1),  # 88
        ("4 * 4 + 8", 0.0),  # 4 used twice
    ],
)
def test_subset_rule_is_a_named_option(answer, reward):
    env = CountdownEnv(number_rule="subset")
    env.reset(seed=0, options={"numbers": [100, 4, 8, 2], "target": 24})
    assert env.step(_answer(answer))[1] == pytest.approx(reward)
    assert "need not use them all" in env.instructions_text


def test_exact_rule_is_the_default_and_says_so(env24):
    assert env24.number_rule == "exact"
    assert "every given number exactly once" in env24.instructions_text
    obs, reward, *_ = env24.step(_answer("(8 - 2) * 4"))
    assert reward == 0.0 and obs.splitlines()[-1].startswith("Your expression must use every")
    with pytest.raises(ValueError, match="number_rule"):
        CountdownEnv(number_rule="any")


def test_missing_answer_tags_is_invalid(env24):
    _, reward, terminated, _, info = env24.step("(100 - 4) / 8 * 2")
    assert reward == pytest.approx(-0.1) and not info["action_is_valid"] and terminated


def test_several_attempts_with_feedback():
    env = CountdownEnv(max_turns=3)
    env.reset(seed=0, options={"numbers": [100, 4, 8, 2], "target": 24})
    obs, reward, terminated, _, info = env.step(_answer("100 - 4 - 8 * 2"))
    assert reward == pytest.approx(0.1) and not terminated
    assert obs.splitlines()[-1] == "Your expression equals 80, not 24."
    assert info["expression_value"] == "80" and info["numbers_ok"] and not info["correct"]
    obs, reward, terminated, _, info = env.step(_answer("(100 - 4) / 8 * 2"))
    # the improvement over the best attempt (0.1): the episode returns its best score, 1.0
    assert reward == pytest.approx(0.9) and terminated and info["success"] and info["turn"] == 2
    assert info["score"] == 1.0


def test_oracle_scores_one_on_200_seeds():
    env = gymnasium.make("agentgym/Countdown-v0")
    for seed in range(200):
        env.reset(seed=seed)
        _, reward, terminated, _, info = env.step(env.unwrapped.oracle_answer())
        assert reward == 1.0 and terminated and info["success"], seed


def test_oracle_solves_a_given_problem(env24):
    _, reward, _, _, _ = env24.step(env24.oracle_answer())
    assert reward == 1.0


def test_bad_options_and_arguments_raise():
    env = CountdownEnv()
    with pytest.raises(ValueError, match="numbers"):
        env.reset(options={"numbers": [0, 3], "target": 3})
    with pytest.raises(ValueError, match="target"):
        env.reset(options={"numbers": [1, 3], "target": 2.5})
    with pytest.raises(ValueError, match="num_numbers"):
        CountdownEnv(num_numbers=7)
    with pytest.raises(ValueError, match="num_numbers"):
        CountdownEnv(num_numbers=2)
    with pytest.raises(ValueError, match="max_actions_per_turn"):
        CountdownEnv(max_actions_per_turn=2)


def test_unsolvable_given_problem_has_no_oracle():
    env = CountdownEnv()
    env.reset(options={"numbers": [1, 1], "target": 3})
    with pytest.raises(RuntimeError, match="no solution"):
        env.oracle_actions()


def test_gymnasium_check_env():
    check_env(gymnasium.make("agentgym/Countdown-v0").unwrapped)
