"""CodeExec and CodeExecGenerated (v1; v0 shows pass counts): problems, check planning, grading and the episode rules.

Runs on the process back end (bubblewrap); tests/test_sandbox_docker.py repeats the HumanEval
oracle on Docker. Hand-worked values are explained where they are asserted.
"""

from __future__ import annotations

import ast
import inspect
import re
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
    MAX_ANSWER_CHARS,
    CodeProblem,
    extract_code,
    generate_problem,
    grade,
    grade_batch,
    humaneval_problems,
)
from agentgym.envs.code_exec_grading import (
    WRONG_VALUE,
    CheckPlan,
    GradeResult,
    MalformedReport,
    UnsupportedCheck,
    grade_split,
    judge,
    plan_checks,
    read_report,
)
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

    Counts pinned from a full parse: 1130 tests (top-level statements holding an assert of the
    candidate: the 1181 statements holding an assert, less the 48 bare `assert True` lines of 36
    problems, each a statement of its own, and the 3 asserts of HumanEval/33 that compare the
    candidate with itself), 1531 calls (the loops of HumanEval/32, 38, 44, 50, 53 call many times;
    6 fewer without HumanEval/33's three), and the forms: 1088 equality, 36 boolean (HumanEval/52,
    56, 61, 72), 6 approximate (HumanEval/2, 4, 32).
    """
    problems = humaneval_problems()
    plans = [plan_checks(p) for p in problems]
    assert min(len(p.tests) for p in plans) >= 1
    assert sum(len(p.tests) for p in plans) == 1130
    assert sum(len(p.calls) for p in plans) == 1531
    forms = Counter(f for p in plans for f in p.forms)
    assert forms == {"equality": 1088, "boolean": 36, "approximate": 6}
    # every test makes at least one call: no test passes whatever the answer does
    assert all(set(p.test_of_call) == set(range(len(p.tests))) for p in plans)
    # the dropped lines, counted in the sources: 48 in 36 problems
    bare = [len(re.findall(r"^\s*assert True\b", p.test, re.M)) for p in problems]
    assert (sum(bare), sum(1 for b in bare if b)) == (48, 36)
    assert not any("assert True" in t for p in plans for t in p.tests)


def test_bare_constant_asserts_are_not_tests() -> None:
    """`assert True` (with or without a message, alone or beside real asserts in a block) tests
    nothing of the answer: dropped. A check with nothing else is refused."""
    check = (
        "def check(candidate):\n"
        "    assert True\n"
        "    assert candidate(1) == 2\n"
        "    assert True, 'This prints if this assert fails'\n"
        "    for x in [1, 2]:\n"
        "        assert True\n"
        "        assert candidate(x) == x + 1\n"
        "    if 1:\n"
        "        assert 1\n"
    )
    plan = plan_checks(CodeProblem("t", "def f(x):\n    pass\n", "f", "", check))
    assert plan.tests == (
        "assert candidate(1) == 2",
        "for x in [1, 2]:\n    assert True\n    assert candidate(x) == x + 1",
    )
    assert (plan.forms, plan.test_of_call) == (("equality", "equality"), (0, 1, 1))
    assert judge(plan, [(False, "raised ValueError")] * 3)[0] == 0  # nothing left to pass
    only = "def check(candidate):\n    assert True, 'x'\n    assert True\n"
    with pytest.raises(UnsupportedCheck, match="no assert of the candidate"):
        plan_checks(CodeProblem("t", "def f(x):\n    pass\n", "f", "", only))


def test_an_assert_comparing_the_candidate_with_itself_is_not_a_test() -> None:
    """HumanEval/33 (sort_third) asserts `tuple(candidate(x)) == tuple(sort_third(x))` three times;
    `sort_third` is the candidate, so any deterministic answer passed those 3 of 7 tests. They
    are dropped; its four asserts against literal lists remain."""
    plan = plan_checks(humaneval_problems()[33])
    assert len(plan.tests) == 4 and all("sort_third" not in t for t in plan.tests)
    assert all(t.startswith("assert tuple(candidate([5, ") for t in plan.tests)
    # an answer that returns its input unchanged passes none of the four
    assert judge(plan, [(True, list(channel.loads(c)[0][0])) for c in plan.calls])[0] == 0


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
        ("if candidate(1):\n        assert candidate(2) == 1", "result of the candidate outside"),
        ("if candidate(1):\n        assert True", "no assert of the candidate"),
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
    `abs(candidate(1.33) - 0.33) < 1e-6` and `abs(candidate(123.456) - 0.456) < 1e-6`. A value the
    assert rejects is a wrong value (no call, no value); a call that timed out is named."""
    plan = plan_checks(humaneval_problems()[2])
    assert judge(plan, [(True, 0.5), (True, 0.33 + 5e-7), (True, 0.456)]) == (3, ())
    passed, failures = judge(plan, [(True, 0.5), (True, 0.3301), (False, "timed out after 5 s")])
    assert passed == 1
    assert failures == (
        ("assert abs(candidate(1.33) - 0.33) < 1e-06", WRONG_VALUE),
        (
            "assert abs(candidate(123.456) - 0.456) < 1e-06",
            "truncate_number(123.456) timed out after 5 s",
        ),
    )
    # a result of the wrong shape fails its test (str - float raises on the host), nothing else
    passed, failures = judge(plan, [(True, "0.5"), (True, 0.33), (True, "x")])
    assert passed == 1 and failures[1][1] == WRONG_VALUE
    # HumanEval/32 calls before it asserts (`solution = candidate(...)`): a call there that
    # times out is named
    plan = plan_checks(humaneval_problems()[32])
    passed, failures = judge(plan, [(True, 0.0)] * len(plan.calls))
    assert (passed, failures[0][1]) == (0, WRONG_VALUE)
    passed, failures = judge(plan, [(False, "timed out after 5 s")] * len(plan.calls))
    assert (passed, failures[0][1]) == (
        0,
        f"find_zero({channel.loads(plan.calls[0])[0][0]}) timed out after 5 s",
    )


#: A made-up problem with every assert form the host evaluates (membership is in no HumanEval
#: check), and a bare ``assert True`` that is not a test.
FORMS_PROBLEM = CodeProblem(
    "Custom/forms",
    'def pair(x):\n    """(x, x / 2), or None for a negative x."""\n',
    "pair",
    "def pair(x):\n    return None if x < 0 else (x, x / 2)\n",
    "import math\n\n"
    "def check(candidate):\n"
    "    assert candidate(4) == (4, 2.0)\n"
    "    assert candidate(6)[1] != 2.0\n"
    "    assert candidate(2) in [(2, 1.0), (2, 1)]\n"
    "    assert candidate(3)[0] not in [0, 1, 2]\n"
    "    assert abs(candidate(5)[1] - 2.5) < 1e-9\n"
    "    assert math.fabs(candidate(7)[1] - 3.5) <= 1e-9\n"
    "    assert candidate(1)\n"
    "    assert not candidate(-1)\n"
    "    assert candidate(-2) is None\n"
    "    assert candidate(8) is not None\n"
    "    assert True, 'not a test'\n",
)


def _inputs(plan: CheckPlan, k: int) -> str:
    """Call ``k``'s arguments as written in Python, worked out here from the wire form."""
    args, kwargs = channel.loads(plan.calls[k])
    return ", ".join([repr(a) for a in args] + [f"{n}={v!r}" for n, v in kwargs.items()])


def _expected_side(source: str, names: set[str]) -> set[str]:
    """The reprs of the constants of ``source``'s asserts outside the candidate's calls: the
    expected values, comparison constants and tolerances."""
    reprs = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert):
            calls = [
                n
                for n in ast.walk(node.test)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
            ]
            inside = {id(n) for c in calls for n in ast.walk(c)}
            reprs |= {
                repr(n.value)
                for n in ast.walk(node.test)
                if isinstance(n, ast.Constant) and id(n) not in inside
            }
    return reprs


def _not_the_calls(plan: CheckPlan, test: int, reason: str, gave: str) -> str | None:
    """Why ``reason`` does not read ``name(<inputs of a call of test>) <gave>``, several joined by
    ``"; "`` (the inputs possibly cut, ending in ``...``); None when it does."""
    inputs = [_inputs(plan, k) for k, t in enumerate(plan.test_of_call) if t == test]
    head, tail, rest = f"{plan.entry_point}(", f") {gave}", reason
    while rest:
        if not rest.startswith(head):
            return f"not a call of {plan.entry_point}: {rest[:80]!r}"
        ends = [
            e
            for e in (m.start() for m in re.finditer(re.escape(tail), rest))
            if rest[e + len(tail) :] == "" or rest[e + len(tail) :].startswith("; ")
            if any(
                a == rest[len(head) : e]
                or (rest[e - 3 : e] == "..." and a.startswith(rest[len(head) : e - 3]))
                for a in inputs
            )
        ]
        if not ends:
            return f"not `{plan.entry_point}(<inputs of the test>) {gave}`: {rest[:120]!r}"
        rest = rest[ends[0] + len(tail) + 2 :]
    return None


def _expected_shown(plan: CheckPlan, test: int, reason: str, gave: str, names: set[str]) -> str:
    """The constants of test ``test``'s expected side that ``reason`` shows although neither the
    test's inputs nor ``gave`` hold them (empty when none)."""
    inputs = [_inputs(plan, k) for k, t in enumerate(plan.test_of_call) if t == test]
    shown = " ".join(inputs) + " " + gave
    text = reason.replace(f"{plan.entry_point}(", "(")  # not the 4 of fib4
    return ", ".join(
        sorted(r for r in _expected_side(plan.tests[test], names) if r in text and r not in shown)
    )


def feedback_leak(
    plan: CheckPlan, test: int, reason: str, gave: str, names: set[str]
) -> str | None:
    """Why the failure ``reason`` of test ``test`` shows more than its calls' inputs and what the
    answer ``gave`` (e.g. ``"returned None"``), or None when it shows no more: it must be made of
    the test's calls only (:func:`_not_the_calls`), and no constant of the assert's expected side
    (``== 'hELLO!'``, ``- 0.33``, ``< 1e-06``...) may appear in it (:func:`_expected_shown`)."""
    constants = _expected_shown(plan, test, reason, gave, names)
    return _not_the_calls(plan, test, reason, gave) or (
        f"shows {constants} of the expected side" if constants else None
    )


def test_feedback_never_shows_an_expected_value() -> None:
    """Every test of the 164 problems (and of a made-up problem with every form, and of generated
    problems), failed four ways (the answer returned None, returned a string, raised, timed out):
    a returned value the assert rejects is :data:`WRONG_VALUE` (no input, no value: the env's
    feedback only says that there were some); a failed call shows its inputs and what happened, nothing of the
    assert. The checker is checked too: it flags the feedback of before (`assert
    candidate('Hello!') == 'hELLO!' -> got None`) on every test, and its constant check alone
    flags an expected value shown after the call."""
    env = _make()  # no sandbox is started: the feedback is rendered from judged outcomes
    ways = [
        ((True, None), "returned None"),
        ((True, "zz-not-it"), "returned 'zz-not-it'"),
        ((False, "raised ValueError: no"), "raised ValueError: no"),
        ((False, "timed out after 5 s"), "timed out after 5 s"),
    ]
    generated = [generate_problem(np.random.default_rng(seed)) for seed in range(10)]
    for problem in [*humaneval_problems(), FORMS_PROBLEM, *generated]:
        plan = plan_checks(problem)
        names = {"candidate", problem.entry_point}
        failed = set()
        for outcome, gave in ways:
            passed, failures = judge(plan, [outcome] * len(plan.calls))
            test = -1
            for src, why in failures:  # in test order; two tests may have the same source
                test = plan.tests.index(src, test + 1)
                failed.add((test, outcome[0]))
                if outcome[0]:
                    assert why == WRONG_VALUE, (problem.task_id, why)
                else:
                    assert feedback_leak(plan, test, why, gave, names) is None, (
                        problem.task_id,
                        why,
                    )
            text = env.unwrapped._describe(GradeResult(passed, len(plan.tests), failures, None))
            lines = text.splitlines()[1:]
            if outcome[0]:
                assert lines == [
                    "Some test(s) returned a wrong value (how many and which is not shown)."
                ]
            else:
                shown = [line.removeprefix("Failed: ") for line in lines[:5]]
                assert shown[: len(failures)] == [why[:300] for _, why in failures[:5]]
        # every test failed at least once by what the answer returned, and by raising
        assert failed == {(t, ok) for t in range(len(plan.tests)) for ok in (True, False)}
        for test, src in enumerate(plan.tests):
            old = f"{src.splitlines()[0][:200]} -> got None"
            assert feedback_leak(plan, test, old, "returned None", names) is not None
    plan, names = plan_checks(humaneval_problems()[27]), {"candidate", "flip_case"}
    leak = "flip_case('Hello!') returned None, not 'hELLO!'"
    assert _expected_shown(plan, 1, leak, "returned None", names) == "'hELLO!'"
    leak = "truncate_number(1.33) returned None (within 1e-06 of 0.33)"
    plan, names = plan_checks(humaneval_problems()[2]), {"candidate", "truncate_number"}
    assert _expected_shown(plan, 1, leak, "returned None", names) == "0.33, 1e-06"
    env.close()


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


def test_counters_and_namedtuples_travel_as_the_dict_or_tuple_they_hold() -> None:
    """HumanEval compares with ==, which takes a Counter for the dict and a namedtuple for the
    tuple it holds; the channel sends their contents, so the host compares plain values."""
    from collections import Counter, OrderedDict, defaultdict, namedtuple
    from typing import NamedTuple

    Pair = namedtuple("Pair", "total product")

    class Typed(NamedTuple):
        total: int
        product: int

    assert channel.dumps(Counter({"a": 2})) == '{"d":[["a",2]]}'
    assert channel.dumps(Pair(3, 1)) == '{"t":[3,1]}'
    for value, plain in [
        (Counter("abb"), {"a": 1, "b": 2}),
        (OrderedDict([("x", 1)]), {"x": 1}),
        (defaultdict(int, {"y": 0}), {"y": 0}),
        (Pair(3, 1), (3, 1)),
        (Typed(3, 1), (3, 1)),
        ([Pair(0, 1)], [(0, 1)]),
    ]:
        back = channel.loads(channel.dumps(value))
        assert back == plain and type(back) is type(plain)

    class LoudCounter(Counter):  # a subclass of theirs is the answer's own class
        def __eq__(self, other: object) -> bool:
            return True

    class Fieldless(tuple):
        pass

    for bad in [LoudCounter("a"), Fieldless((1,))]:
        with pytest.raises(channel.NotPlainData):
            channel.dumps(bad)


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


#: The fence regex extract_code replaced (it backtracks: quadratic on ``` and a run of spaces).
_OLD_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S)


def test_extract_code_accepts_the_old_regexs_forms_exactly() -> None:
    """Round 7: the linear scan finds the block the old regex found (first match), on 200,000
    random strings over the pieces that matter (backticks, blanks, newlines, the words)."""
    pieces = ["`", "```", " ", "\t", "\n", "py", "python", "python3", "3", "x", "\r", "thon"]
    rng = np.random.default_rng(0)
    for _ in range(200_000):
        text = "".join(rng.choice(pieces, size=int(rng.integers(0, 14))))
        match = _OLD_FENCE.search(text)
        assert extract_code(text) == (match.group(1) if match else text), repr(text)


def test_extract_code_is_linear() -> None:
    """Round 7: shapes that made the old regex backtrack (4 MiB: hours) take milliseconds, and
    1 MiB of openings that never open (one Python step per line) a fraction of a second; the
    env reads at most MAX_ANSWER_CHARS (64 KiB) anyway."""
    size = 4 * 2**20
    for text in (
        "```" + " " * size + "x",
        "```" + " \t" * (size // 2) + "\n",
        "`" * size,
        "``` x `\n" * (2**20 // 8),
        "```x\n" * (2**20 // 5),
    ):
        start = time.perf_counter()
        extract_code(text)
        assert time.perf_counter() - start < 2.0, repr(text[:20])


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("def f(:\n    pass\n", "does not parse"),
        ("x = " + "-" * 60_000 + "1\ndef is_prime(n):\n    return 1\n", "does not parse"),
        ("x = " + "not " * 15_000 + "1\ndef is_prime(n):\n    return 1\n", "does not parse"),
        ("x = a" + ".b" * 30_000 + "\ndef is_prime(n):\n    return 1\n", "does not parse"),
        ("x = f" + "()" * 30_000 + "\ndef is_prime(n):\n    return 1\n", "does not parse"),
        ("def prime(n):\n    return 1\n", "does not define 'is_prime' at top level"),
        ("x = 1 # " + "y" * MAX_ANSWER_CHARS, "over the 65,536-character limit"),
    ],
    ids=["syntax", "unary", "not", "attributes", "calls", "no-def", "too-long"],
)
def test_an_answer_that_cannot_be_read_is_an_invalid_action_with_its_reason(
    code: str, reason: str
) -> None:
    """Round 7: an answer over MAX_ANSWER_CHARS is refused before any parse; one nested too
    deeply for CPython's parser (MemoryError, RecursionError) is an invalid action, as is one
    that does not parse or define the entry point; ``invalid_reason`` says which. Nothing runs."""
    env = _make("agentgym/CodeExec-v2")
    try:
        env.reset(options={"task_id": "HumanEval/31"})
        obs, reward, terminated, truncated, info = env.step(_answer(code))
        assert not info["action_is_valid"] and "grade_error" not in info
        assert reason in info["invalid_reason"], info["invalid_reason"]
        assert env.unwrapped._lease is None  # no sandbox was started
    finally:
        env.close()


def test_an_answer_of_max_answer_chars_is_parsed() -> None:
    """The cap is inclusive: an answer of exactly MAX_ANSWER_CHARS characters is read."""
    env = _make("agentgym/CodeExec-v2")
    try:
        env.reset(options={"task_id": "HumanEval/31"})
        head = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n#"
        code = head + "x" * (MAX_ANSWER_CHARS - len(head))
        assert len(code) == MAX_ANSWER_CHARS
        *_, info = env.step(_answer(code))
        assert info["action_is_valid"] and info["all_tests_passed"]
    finally:
        env.close()


# ----------------------------------------------------------------------------- grading


def test_humaneval_oracle_scores_all_164_with_process_backend(box: Any) -> None:
    start = time.monotonic()
    failures, total = run_oracle_on_humaneval(box, workers=2)
    print(f"process: 164 HumanEval problems in {time.monotonic() - start:.1f} s")
    assert failures == []
    assert total == 1130  # test_every_check_of_the_164_problems_is_covered


def test_generated_oracle_passes(box: Any) -> None:
    rng = np.random.default_rng(1)
    problems = [generate_problem(rng) for _ in range(14)]
    for p in problems:
        result = grade(box, p, p.solution)
        assert (result.passed, result.error) == (result.total, None), p.task_id


def test_partial_credit_by_hand(box: Any) -> None:
    """`return True` passes HumanEval/0's asserts whose expected value is True: 4 of 7. The three
    others are wrong values, unnamed (naming them would tell to answer False there)."""
    problem = humaneval_problems()[0]
    result = grade(box, problem, "def has_close_elements(numbers, threshold):\n    return True\n")
    assert (result.passed, result.total, result.error) == (4, 7, None)
    assert [why for _, why in result.failures] == [WRONG_VALUE] * 3


def test_answers_returning_a_counter_or_a_namedtuple_score_full_marks(box: Any) -> None:
    """HumanEval/111 (histogram: a dict of the most frequent letters, 8 tests) answered with a
    Counter, HumanEval/8 (sum_product: a tuple, 5 tests) with a namedtuple: both right by ==,
    as HumanEval's own harness counts them (they scored 0, as not plain data, before)."""
    histogram = (
        "from collections import Counter\n"
        "def histogram(test):\n"
        "    counts = Counter(test.split())\n"
        "    top = max(counts.values(), default=0)\n"
        "    return Counter({k: v for k, v in counts.items() if v == top})\n"
    )
    sum_product = (
        "from collections import namedtuple\n"
        "SumProduct = namedtuple('SumProduct', 'total product')\n"
        "def sum_product(numbers):\n"
        "    product = 1\n"
        "    for n in numbers:\n"
        "        product *= n\n"
        "    return SumProduct(sum(numbers), product)\n"
    )
    problems = humaneval_problems()
    results = grade_batch(box, [(problems[111], histogram), (problems[8], sum_product)])
    assert [(r.passed, r.total, r.error) for r in results] == [(8, 8, None), (5, 5, None)]


def test_a_hanging_test_fails_alone(box: Any) -> None:
    """Loops when threshold < 0.1: the asserts with 0.05 hang (False expected anyway); the ones
    expecting False at 0.8 and 0.5 fail; 0.3, 0.95, 0.1 and 1.0 expect True and pass: 4 of 7."""
    code = (
        "def has_close_elements(numbers, threshold):\n"
        "    while threshold < 0.1:\n"
        "        pass\n"
        "    return True\n"
    )
    result = grade(box, humaneval_problems()[0], code, timeout_s=60, per_test_timeout_s=5)
    assert (result.passed, result.total) == (4, 7)
    assert [why for _, why in result.failures] == [
        "has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) timed out after 5 s",
        WRONG_VALUE,
        WRONG_VALUE,
    ]


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
    result = grade(box, humaneval_problems()[0], code, timeout_s=6, per_test_timeout_s=0.5)
    assert (result.passed, result.total) == (0, 7)
    assert all(re.fullmatch(r"has_close_elements\(.*\) timed out.*", w) for _, w in result.failures)


def test_answer_that_raises_scores_zero(box: Any) -> None:
    result = grade(box, humaneval_problems()[0], "def has_close_elements(a, b): pass\n1/0\n")
    assert (result.passed, result.total) == (0, 7)
    assert result.error == "your code raised ZeroDivisionError: division by zero"


def test_read_report_by_hand() -> None:
    """Two problems of 2 and 1 calls; the text after the last newline (cut off) is dropped."""
    stdout = "STARTED\n0 0 R[1,2]\n0 1 EValueError: x\n1 M Etimed out\n0 1"
    assert read_report(stdout, [2, 1]) == {
        (0, "0"): ("R", "[1,2]"),
        (0, "1"): ("E", "ValueError: x"),
        (1, "M"): ("E", "timed out"),
    }
    assert read_report("STARTED\n0 0 T\n0 1 Nnot plain\n", [2]) == {
        (0, "0"): ("T", ""),
        (0, "1"): ("N", "not plain"),
    }


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("9" * 5000 + " 0 R1", "not a report line"),  # int() refuses over 4300 digits
        ("1234567 0 R1", "not a report line"),  # seven digits
        ("0 " + "9" * 5000 + " R1", "not a report line"),
        ("\u0660 0 R1", "not a report line"),  # ARABIC-INDIC ZERO: int() reads it as 0
        ("00 0 R1", "not a report line"),
        ("0 0 X1", "not a report line"),
        ("0 0 Tlate", "not a report line"),
        ("0 M R1", "not a report line"),
        ("1 0 R1", "names a call that was not made"),  # one problem only
        ("0 3 R1", "names a call that was not made"),  # calls 0..2
        ("0 0 E" + "x" * 301, "a reason over 300 characters"),
        ("0 0 R" + "1" * (2 << 20), "too long"),
        ("0 0 R2", "line 3 repeats a call"),
    ],
)
def test_read_report_refuses_malformed_lines(line: str, why: str) -> None:
    with pytest.raises(MalformedReport, match=why):
        read_report(f"STARTED\n0 0 R1\n{line}\n", [3])


#: An answer to HumanEval/27 that flips case right but also writes a report line whose problem
#: index has 5000 digits (``int`` of it raised ValueError out of ``env.step`` before).
HUGE_INDEX_ANSWER = (
    "import sys\n"
    "def flip_case(s):\n"
    "    report = sys.modules['__main__'].report\n"
    "    report.write('9' * 5000 + ' 0 R1\\n')\n"
    "    report.flush()\n"
    "    return s.swapcase()\n"
)


def test_a_forged_report_line_scores_zero_and_never_raises() -> None:
    env = _make(per_test_timeout_s=5)
    try:
        env.reset(options={"task_id": "HumanEval/27"})
        obs, reward, terminated, truncated, info = env.step(_answer(HUGE_INDEX_ANSWER))
        assert (reward, info["all_tests_passed"], terminated) == (0.0, False, False)
        assert info["grade_error"] == (
            "the grader's report was malformed (line 2 is not a report line): your code wrote to it"
        )
        assert "Error: the grader's report was malformed" in obs
        # the canonical answer, next attempt, still scores 3 of 3
        *_, info = env.step(env.unwrapped.oracle_answer())
        assert (info["tests_passed"], info["grade_error"]) == (3, None)
    finally:
        env.close()


@pytest.mark.parametrize("split", [False, True], ids=["one-run", "public-hidden"])
def test_an_answer_over_the_file_size_limit_scores_zero_with_a_message(split: bool) -> None:
    """With 1 MiB files, a 1 MiB comment makes spec.json too large: grading scores 0 and says
    why (it raised SandboxError before). The answer is 42 characters of code (18 for the def
    line, 24 for the return line), 1 for "#" and 2**20 for the comment. The env no longer gets
    that far: such an answer is over ``MAX_ANSWER_CHARS`` (64 KiB), an invalid action that is
    never run (the step's reason names the limit); the grader's own path is tested directly,
    for one run (v0, v1) and for the public and hidden runs of :func:`grade_split` (v2)."""
    env = _make(sandbox_options={"max_file_mb": 1})
    try:
        env.reset(options={"task_id": "HumanEval/27"})
        code = "def flip_case(s):\n    return s.swapcase()\n#" + "x" * 2**20
        obs, reward, terminated, truncated, info = env.step(_answer(code))
        assert not info["action_is_valid"] and "grade_error" not in info
        assert "over the 65,536-character limit of a CodeExec answer" in info["invalid_reason"]
        problem = env.unwrapped.problem
        runner = env.unwrapped._runner()
        if split:
            result = grade_split(runner, problem, code, [], range(3))
        else:
            result = grade(runner, problem, code)
        assert (result.passed, result.total) == (0, 3)
        assert result.error.startswith(
            "your answer is too long to run (1,048,619 characters): spec.json is "
        )
        assert result.error.endswith("bytes, over the 1,048,576-byte file-size limit")
        *_, info = env.step(env.unwrapped.oracle_answer())
        assert (info["tests_passed"], info["grade_error"]) == (3, None)
    finally:
        env.close()


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
    """Every nudged answer fails every test: 0 of each problem's tests. (Before the bare `assert
    True` lines were dropped, it kept those: one in HumanEval/64, 104, 136, 152, two in 88, 128.)"""
    totals = [7, 5, 5, 5, 1, 9, 7, 12, 7, 6, 8, 7, 10, 4, 9, 11, 8, 11, 13, 4]
    plans = [plan_checks(humaneval_problems()[i]) for i in WRONG_PROBLEMS]
    assert [len(p.tests) for p in plans] == totals
    assert scores == [(0, t) for t in totals]


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


def _make(env_id: str = "agentgym/CodeExec-v1", **kwargs: Any) -> gymnasium.Env:
    return gymnasium.make(env_id, backend="process", **kwargs)


def test_episode_partial_then_oracle_with_counts() -> None:
    env = _make("agentgym/CodeExec-v0")  # v0's feedback: the pass count of every attempt
    obs, info = env.reset(options={"task_id": "HumanEval/0"})
    assert info["task_id"] == "HumanEval/0" and info["num_tests"] == 7
    assert obs.startswith("```python\nfrom typing import List")
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    obs, reward, terminated, truncated, info = env.step(_answer(wrong))
    assert reward == pytest.approx(4 / 7)
    assert (terminated, truncated, info["success"]) == (False, False, False)
    assert "Attempt 1: 4/7 tests passed." in obs
    assert obs.endswith(
        "\nAttempt 1: 4/7 tests passed.\n3 test(s) returned a wrong value (which ones is not shown)."
    )
    assert "has_close_elements(" not in obs.split("```")[-1]  # no failing input is named
    feedback = obs.split("```")[-1]
    assert "assert" not in feedback and "==" not in feedback
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_answer())
    assert reward == pytest.approx(3 / 7)  # improvement over the best so far: 7/7 - 4/7
    assert (terminated, info["success"]) == (True, True)
    assert "Attempt 2: 7/7 tests passed." in obs
    env.close()


def test_attempts_run_out_and_terminate_with_counts() -> None:
    env = _make(max_turns=2, feedback="counts")
    env.reset(options={"index": 0})
    wrong = _answer("def has_close_elements(numbers, threshold):\n    return True\n")
    first = env.step(wrong)
    second = env.step(wrong)
    assert first[1] == pytest.approx(4 / 7) and second[1] == 0.0  # no pay for the same score
    assert second[2:4] == (True, False) and second[4]["success"] is False
    env.close()


def test_pass_fail_feedback_tells_neither_count_nor_reward_until_the_end() -> None:
    """The default feedback: HumanEval/0's 7 tests expect True 4 times, so ``return True``
    passes 4/7 and ``return False`` 3/7. Both attempts read the same ("not every test passed",
    some wrong value) and earn 0; the last attempt pays the best fraction, 4/7, the same return
    as with counts. A full pass after a partial one pays the whole 1.0 (nothing was paid before).
    An invalid last turn still ends the episode with the best fraction (4/7 - 0.1)."""
    wrong_true = _answer("def has_close_elements(numbers, threshold):\n    return True\n")
    wrong_false = _answer("def has_close_elements(numbers, threshold):\n    return False\n")
    said = (
        "not every test passed.\n"
        "Some test(s) returned a wrong value (how many and which is not shown)."
    )
    env = _make()
    try:
        env.reset(options={"task_id": "HumanEval/0"})
        obs, reward, terminated, _, info = env.step(wrong_true)
        assert (reward, terminated, info["all_tests_passed"]) == (0.0, False, False)
        assert obs.endswith(f"\nAttempt 1: {said}") and "4/7" not in obs
        assert "tests_passed" not in info and "pass_fraction" not in info
        obs, reward, terminated, _, info = env.step(wrong_false)
        assert (reward, terminated) == (0.0, False) and obs.endswith(f"\nAttempt 2: {said}")
        obs, reward, terminated, truncated, info = env.step(wrong_false)
        assert (terminated, truncated, info["success"]) == (True, False, False)
        assert reward == pytest.approx(4 / 7)
        assert (info["tests_passed"], info["tests_total"]) == (4, 7)
        assert info["pass_fraction"] == pytest.approx(4 / 7)
        env.reset(options={"task_id": "HumanEval/0"})
        assert env.step(wrong_true)[1] == 0.0
        _, reward, terminated, _, info = env.step(env.unwrapped.oracle_answer())
        assert (reward, terminated, info["success"]) == (1.0, True, True)  # the whole return
        assert (info["tests_passed"], info["pass_fraction"]) == (7, 1.0)
        env.reset(options={"task_id": "HumanEval/0"})
        assert env.step(wrong_true)[1] == 0.0
        assert env.step("no code")[1] == -0.1
        _, reward, terminated, _, info = env.step("no code")
        assert terminated and info["action_is_valid"] is False
        assert reward == pytest.approx(4 / 7 - 0.1)
    finally:
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
    env = _make("agentgym/CodeExecGenerated-v1")
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


def test_code_exec_accepts_exactly_the_sandbox_bounds() -> None:
    """CodeExec's limits are the sandbox's (issue 40): at each bound, read from the sandbox's
    constants, CodeExec and the sandbox's own check accept it; just past it, both refuse it. A
    literal restated in CodeExec would fail here once the sandbox's bound moves."""
    from agentgym.envs.code_exec import CodeExecEnv
    from sandboxes.code import base

    def refuses(check: Any, *args: Any, **kwargs: Any) -> bool:
        try:
            made = check(*args, **kwargs)
        except ValueError:
            return True
        if isinstance(made, CodeExecEnv):
            made.close()  # built only: no sandbox started
        return False

    def verdicts(timeout_s: Any, memory_mb: Any) -> tuple[bool, bool]:
        env = refuses(
            CodeExecEnv,
            source="generated",
            backend="process",
            timeout_s=timeout_s,
            memory_mb=memory_mb,
        )
        return env, refuses(base.check_run_args, "", "", None, timeout_s, memory_mb)

    default_t, default_m = 20.0, base.DEFAULT_MEMORY_MB
    for timeout_s, memory_mb, refused in [
        (base.MAX_TIMEOUT_S, default_m, False),
        (base.MAX_TIMEOUT_S + 0.5, default_m, True),
        (0.001, default_m, False),
        (0, default_m, True),
        (True, default_m, True),  # a bool is not a number of seconds
        (default_t, base.MIN_MEMORY_MB, False),
        (default_t, base.MIN_MEMORY_MB - 1, True),
        (default_t, base.MAX_MEMORY_MB, False),
        (default_t, base.MAX_MEMORY_MB + 1, True),
    ]:
        assert verdicts(timeout_s, memory_mb) == (refused, refused), (timeout_s, memory_mb)
    signature = inspect.signature(CodeExecEnv)
    assert signature.parameters["memory_mb"].default == base.DEFAULT_MEMORY_MB


def test_problem_dataclass_is_frozen() -> None:
    p = CodeProblem("t", "p", "f", "s", "def check(candidate):\n    assert True\n")
    with pytest.raises(AttributeError):
        p.task_id = "x"  # type: ignore[misc]
