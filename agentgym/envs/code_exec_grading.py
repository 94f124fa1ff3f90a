"""CodeExec grading: every verdict is decided in the environment's own process, out of the answer's reach.

The answer runs in a sandbox (:mod:`sandboxes.code`), but the sandbox decides nothing. Grading is
three steps:

1. **Plan** (host, once per problem, cached): the problem's ``check(candidate)`` is parsed (AST)
   into the calls it makes of the candidate and the assertions it makes of their results. Each
   assertion must have one of the forms this module can evaluate safely, else the problem is
   refused with :class:`UnsupportedCheck`:

   * ``equality``: ``candidate(...) == expected`` (or ``!=``), either side possibly wrapped in
     ``tuple``/``str``/``sorted``/``len``... (the call names in :data:`SAFE_CALLS`);
   * ``approximate``: ``abs(candidate(...) - x) < tol`` or ``math.fabs(...) < tol``;
   * ``membership``: ``candidate(...) in (...)`` (or ``not in``);
   * ``boolean``: ``candidate(...)``, ``not candidate(...)``, ``candidate(...) is True/False/None``.

   An assert that tests nothing of the answer is dropped: a bare constant (``assert True``,
   ``assert True, "message"``: 48 in HumanEval) and an equality of the candidate with itself
   (HumanEval/33's ``tuple(candidate(x)) == tuple(sort_third(x))``, ``sort_third`` being the
   candidate: 3 asserts). It is no test, and a statement holding nothing else is no test either
   (such asserts passed for any answer, even one that raised or exited).

   The check's other statements (imports, loops, helper values) are the dataset's own trusted code
   and run here, with imports limited to a few standard modules and ``random`` replaced by a
   generator seeded with :data:`CHECK_SEED` (so the drawn inputs are the same at every grading;
   the judge restores the state each test started with at planning, so a test that stops early
   cannot shift a later test's draws).
   Running the check with a *recording* candidate gives the list of calls: their arguments, as
   plain data (:mod:`agentgym.envs.code_exec_channel`).
2. **Compute** (sandbox, one run; for tests split into public and hidden ones, two: a public
   run given the public tests' calls only, whose texts may be shown, :func:`grade_public`, and a
   hidden run given the hidden tests' calls, of which only pass or fail per test is kept,
   :func:`grade_hidden`; CodeExec-v3 makes every hidden run after the episode's last public
   run, :func:`grade_split`, which CodeExec-v2 calls per attempt, makes both at once): a
   small harness executes the prompt and the answer, then calls the answer's function on each
   recorded argument list (``SIGALRM`` limits each call to ``per_test_timeout_s``) and writes
   each result back over the typed channel, one line per call. Neither the expected values nor
   the comparisons ever enter the sandbox; the calls' arguments do (the answer can read them).
3. **Judge** (host): the check runs again, its candidate now returning the sandbox's results in
   order; each assertion is evaluated here on those plain values. A call that raised, timed out
   or returned something other than plain data fails the test it belongs to.

So nothing the answer does in its interpreter (printing, exit codes, ``sys.exit``/``os._exit``,
patched builtins, objects with odd ``__eq__``, rewriting the harness, reading files or the
environment) can reach a verdict: the most it can do is choose the plain values its function
returns, which is what the task asks of it. It can also write on the harness's report channel (it
runs in the harness's process, so nothing that process can write is out of its reach; a separate
process would still share the sandbox user's ``/proc`` access to the run's output pipe). So the
host reads the report strictly (:func:`read_report`): a line outside the grammar, with an index out
of range or too long a field, or repeating a call, fails the run's answers (score 0, with
``GradeResult.error`` saying so); it never raises out of the grader.

A *test* is a top-level statement of ``check``'s body that holds an ``assert`` of the candidate (a
loop of asserts is one test); it passes when all its asserts hold. The pass fraction is the reward.

The reason given for a failed test (what the env shows the agent) is :data:`WRONG_VALUE` when
the answer's calls returned plain data that the assert rejects: neither the inputs nor the value,
since "``f(x)`` returned True" on a failed test says that ``f(x)`` should not be True, which
answers any yes/no task by flipping the named inputs, and quoted asserts would let an agent answer
from a table of the expected values instead of solving the task. A call that raised, timed out or
returned something other than plain data is named with what happened, which tells nothing of the
expected value: ``flip_case('Hello!') raised ValueError: x``, ``... timed out after 5 s``.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import json
import random as _random
import re
import threading
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agentgym.envs import code_exec_channel as channel
from agentgym.envs.code_exec_tasks import CodeProblem
from sandboxes.code import DEFAULT_MEMORY_MB, OUTPUT_LIMIT, SandboxError

__all__ = [
    "CHECK_SEED",
    "SAFE_CALLS",
    "FORMS",
    "WRONG_VALUE",
    "CheckPlan",
    "GradeResult",
    "UnsupportedCheck",
    "plan_checks",
    "judge",
    "grade",
    "grade_batch",
    "grade_split",
    "grade_public",
    "grade_hidden",
    "HIDDEN_FAILED",
    "HIDDEN_CALL",
    "MalformedReport",
    "read_report",
]

#: Seed of the ``random`` module that a problem's check sees (HumanEval/38, 50 and 53 draw inputs).
CHECK_SEED = 0
#: Functions an assertion may apply to the candidate's results (besides the problem's own helper
#: functions, e.g. HumanEval/32's ``poly``), all pure functions of plain data.
SAFE_CALLS = frozenset(
    {
        "abs",
        "all",
        "any",
        "bool",
        "float",
        "int",
        "len",
        "list",
        "max",
        "min",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "math.fabs",
        "math.isclose",
        "copy.deepcopy",
    }
)
#: The assertion forms evaluated on the host.
FORMS = ("equality", "approximate", "membership", "boolean")

#: The reason of a test whose calls all returned plain data but whose assert does not hold: it
#: names neither the calls nor the values (see :func:`judge`).
WRONG_VALUE = "returned a wrong value"
#: Modules the check code may import on the host (``random`` is a seeded stand-in).
HOST_MODULES = frozenset(
    {"math", "copy", "string", "random", "typing", "collections", "itertools", "functools"}
)
_CALL, _ASSERT, _TEST = "__agentgym_call__", "__agentgym_assert__", "__agentgym_test__"
_EXPR_NODES = (
    ast.Compare,
    ast.UnaryOp,
    ast.BinOp,
    ast.Call,
    ast.Name,
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Dict,
    ast.Subscript,
    ast.Slice,
    ast.Attribute,
    ast.keyword,
    ast.Starred,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
)
_CHANNEL_SOURCE = Path(__file__).with_name("code_exec_channel.py")


class UnsupportedCheck(ValueError):
    """A problem's ``check`` holds an assertion (or a use of ``candidate``) outside :data:`FORMS`."""


@dataclass(frozen=True)
class GradeResult:
    """The outcome of grading one answer.

    Attributes:
        passed: tests passed.
        total: tests in the problem (>= 1).
        failures: ``(test source, reason)`` of each failing test, in order. The source is for the
            host's eyes only (it holds the expected values); the reason is what an agent may see:
            :data:`WRONG_VALUE` for values the assert rejects, else the failing call as
            ``name(arguments)`` and what happened (``raised ...``, ``timed out after ...``),
            never an expected value.
        error: why the answer could not be called at all (its module code raised, the run ended
            early), else ``None``.
        failed_tests: the index (in :attr:`CheckPlan.tests`) of each failing test, in order, one
            per entry of ``failures``.
        outcomes: what each planned call gave (:data:`Outcome`, in :attr:`CheckPlan.calls`
            order); empty when no call was judged. For the host's eyes only, as ``failures``.
    """

    passed: int
    total: int
    failures: tuple[tuple[str, str], ...]
    error: str | None
    failed_tests: tuple[int, ...] = ()
    outcomes: tuple[tuple[bool, Any], ...] = ()

    @property
    def fraction(self) -> float:
        return self.passed / self.total


@dataclass(frozen=True)
class CheckPlan:
    """A problem's check, parsed and run once with a recording candidate.

    Attributes:
        entry_point: the candidate's name, as the feedback shows its calls.
        tests: source of each test (a top-level statement of ``check`` holding an assert of the
            candidate; bare ``assert True`` lines are dropped).
        forms: the form (one of :data:`FORMS`) of every assert, in source order.
        calls: each call of the candidate as wire JSON of ``[args, kwargs]``, in call order.
        test_of_call: index of the test each call belongs to.
    """

    entry_point: str
    tests: tuple[str, ...]
    forms: tuple[str, ...]
    calls: tuple[str, ...]
    test_of_call: tuple[int, ...]
    _helpers: Any
    _check: Any
    _first_call: tuple[int, ...]
    _rng_states: tuple[Any, ...]

    def call_text(self, k: int, limit: int = 200) -> str:
        """Call ``k`` as the answer's author would write it: ``name(arg, ..., key=value)``."""
        args, kwargs = channel.loads(self.calls[k])
        parts = [repr(a) for a in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
        text = ", ".join(parts)
        if len(text) > limit:
            text = text[:limit] + "..."
        return f"{self.entry_point}({text})"


# ----------------------------------------------------------------------------- parsing


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _is_candidate_call(node: ast.AST, names: frozenset[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _vacuous(test: ast.expr, names: frozenset[str]) -> bool:
    """Whether an assert's test tests nothing: a truthy constant (``assert True``), or an equality
    whose two sides are the same once the candidate's names are one (HumanEval/33:
    ``tuple(candidate(x)) == tuple(sort_third(x))``, where ``sort_third`` is the candidate
    itself, so any deterministic answer passes)."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False

    def same_names(node: ast.expr) -> str:
        tree = copy.deepcopy(node)
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and n.id in names:
                n.id = "candidate"
        return ast.dump(tree)

    return same_names(test.left) == same_names(test.comparators[0])


def _form(test: ast.expr, names: frozenset[str]) -> str:
    """The form of an assert's test expression, or :class:`UnsupportedCheck`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if _is_candidate_call(test, names):
        return "boolean"
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq)):
            return "equality"
        if isinstance(op, (ast.In, ast.NotIn)):
            return "membership"
        if isinstance(op, (ast.Is, ast.IsNot)) and (
            isinstance(right, ast.Constant) and right.value in (True, False, None)
        ):
            return "boolean"
        if isinstance(op, (ast.Lt, ast.LtE)) and (
            isinstance(test.left, ast.Call) and _dotted(test.left.func) in ("abs", "math.fabs")
        ):
            return "approximate"
    raise UnsupportedCheck(f"assert form not evaluated on the host: {ast.unparse(test)[:200]}")


def _check_expression(test: ast.expr, names: frozenset[str], helpers: frozenset[str]) -> None:
    """Every node of an assert's expression is one the host evaluates safely on plain data."""
    for node in ast.walk(test):
        if not isinstance(node, _EXPR_NODES):
            raise UnsupportedCheck(f"{type(node).__name__} in an assert: {ast.unparse(test)[:200]}")
        if isinstance(node, ast.Attribute) and _dotted(node) not in SAFE_CALLS:
            raise UnsupportedCheck(f"attribute {ast.unparse(node)!r} in an assert")
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name is None or not (name in SAFE_CALLS or name in names or name in helpers):
                raise UnsupportedCheck(f"call of {ast.unparse(node.func)!r} in an assert")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exp = node.right
            if not (
                isinstance(exp, ast.Constant) and type(exp.value) is int and abs(exp.value) <= 64
            ):
                raise UnsupportedCheck(
                    f"a power without a small constant exponent: {ast.unparse(node)}"
                )


class _Rewriter(ast.NodeTransformer):
    """Turns ``check``'s body into host code: candidate calls go through the recorder/replayer,
    each assert becomes ``_ASSERT(lambda: <test>, source, results)``, an assert that tests nothing
    (:func:`_vacuous`) becomes ``pass``."""

    def __init__(self, names: frozenset[str], helpers: frozenset[str]):
        self.names = names
        self.helpers = helpers
        self.forms: list[str] = []
        self._temps = 0

    def _recording_call(self, node: ast.Call) -> ast.Call:
        for arg in ast.walk(ast.Module(body=[ast.Expr(a) for a in node.args], type_ignores=[])):
            if _is_candidate_call(arg, self.names):
                raise UnsupportedCheck("a candidate call inside another's arguments")
        call = ast.Call(ast.Name(_CALL, ast.Load()), node.args, node.keywords)
        return ast.copy_location(call, node)

    def visit_Assert(self, node: ast.Assert) -> ast.stmt | list[ast.stmt]:
        if _vacuous(node.test, self.names):
            return ast.copy_location(ast.Pass(), node)
        source = ast.unparse(node)
        form = _form(node.test, self.names)
        _check_expression(node.test, self.names, self.helpers)
        self.forms.append(form)
        hoisted: list[ast.stmt] = []
        temps: list[str] = []
        rewriter = self

        class _Hoist(ast.NodeTransformer):
            def visit_Call(self, call: ast.Call) -> ast.AST:
                if _is_candidate_call(call, rewriter.names):
                    rewriter._temps += 1
                    temp = f"__agentgym_r{rewriter._temps}"
                    temps.append(temp)
                    hoisted.append(
                        ast.Assign([ast.Name(temp, ast.Store())], rewriter._recording_call(call))
                    )
                    return ast.Name(temp, ast.Load())
                self.generic_visit(call)
                return call

        test = _Hoist().visit(node.test)
        check = ast.Expr(
            ast.Call(
                ast.Name(_ASSERT, ast.Load()),
                [
                    ast.Lambda(
                        ast.arguments([], [], None, [], [], None, []),
                        test,
                    ),
                    ast.Constant(source),
                    ast.Tuple([ast.Name(t, ast.Load()) for t in temps], ast.Load()),
                ],
                [],
            )
        )
        return [*hoisted, check]

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _is_candidate_call(node, self.names):
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return self._recording_call(node)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            raise UnsupportedCheck(f"`{node.id}` used other than by calling it")
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        raise UnsupportedCheck("a lambda in check()")


def _holds_assert(stmt: ast.stmt, names: frozenset[str]) -> bool:
    """Whether ``stmt`` holds an assert that tests something (:func:`_vacuous`): a test."""
    return any(isinstance(n, ast.Assert) and not _vacuous(n.test, names) for n in ast.walk(stmt))


#: Held around every AST parse and compile of the CodeExec code (here and the env's action
#: parser). CPython 3.11 keeps the AST converter's recursion depth in state shared by threads, so
#: two threads parsing at once (envs stepped in threads, graders in a pool) can fail with
#: "SystemError: AST constructor recursion depth mismatch" (seen under load in CI).
AST_LOCK = threading.Lock()


def _compile_check(problem: CodeProblem) -> tuple[Any, Any, tuple[str, ...], tuple[str, ...]]:
    """``(helpers code, check code, test sources, forms)`` of ``problem``; one thread at a time
    (:data:`AST_LOCK`)."""
    with AST_LOCK:
        return _compile_check_locked(problem)


def _compile_check_locked(
    problem: CodeProblem,
) -> tuple[Any, Any, tuple[str, ...], tuple[str, ...]]:
    try:
        test_tree = ast.parse(problem.test)
        prompt_tree = ast.parse(problem.prompt)
    except SyntaxError as err:
        raise UnsupportedCheck(
            f"{problem.task_id}: the prompt or test does not parse: {err}"
        ) from err
    check: ast.FunctionDef | None = None
    helper_nodes: list[ast.stmt] = []
    for node in prompt_tree.body:  # the prompt's imports and helper functions, not the stub
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
            isinstance(node, ast.FunctionDef) and node.name != problem.entry_point
        ):
            helper_nodes.append(node)
    for node in test_tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef)):
            helper_nodes.append(node)
        else:
            raise UnsupportedCheck(f"{problem.task_id}: module-level {type(node).__name__} in test")
    if check is None or len(check.args.args) != 1:
        raise UnsupportedCheck(f"{problem.task_id}: test source has no `def check(candidate)`")
    names = frozenset({check.args.args[0].arg, problem.entry_point})
    helpers = frozenset(n.name for n in helper_nodes if isinstance(n, ast.FunctionDef))
    rewriter = _Rewriter(names, helpers)
    body: list[ast.stmt] = []
    tests: list[str] = []
    for stmt in check.body:
        source, is_test = ast.unparse(stmt), _holds_assert(stmt, names)
        new = rewriter.visit(stmt)
        new = new if isinstance(new, list) else [new]
        if is_test:
            wrapper = ast.With(
                [
                    ast.withitem(
                        ast.Call(ast.Name(_TEST, ast.Load()), [ast.Constant(len(tests))], [])
                    )
                ],
                new,
            )
            tests.append(source)
            body.append(wrapper)
        else:
            body.extend(new)
    if not tests:
        raise UnsupportedCheck(f"{problem.task_id}: check() has no assert of the candidate")
    func = ast.FunctionDef(
        "__agentgym_check__", ast.arguments([], [], None, [], [], None, []), body, [], None, None
    )
    module = ast.fix_missing_locations(ast.Module(body=[func], type_ignores=[]))
    helper_module = ast.fix_missing_locations(ast.Module(body=helper_nodes, type_ignores=[]))
    filename = f"<check of {problem.task_id}>"
    return (
        compile(helper_module, filename, "exec"),
        compile(module, filename, "exec"),
        tuple(tests),
        tuple(rewriter.forms),
    )


# ----------------------------------------------------------------------------- host execution


def _seeded_random(rng: _random.Random) -> types.ModuleType:
    module = types.ModuleType("random")
    for name in ("random", "randint", "randrange", "choice", "choices", "shuffle", "sample"):
        setattr(module, name, getattr(rng, name))
    module.uniform = rng.uniform
    module.Random = _random.Random
    return module


def _host_globals(hooks: dict[str, Any], rng: _random.Random) -> dict[str, Any]:
    """A fresh namespace for the check: restricted imports, no printing, ``random`` drawing from
    ``rng``."""
    seeded = _seeded_random(rng)

    def guarded_import(name: str, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002, ANN001, ANN202
        if level or name.split(".")[0] not in HOST_MODULES:
            raise ImportError(f"the grader's check may import only {sorted(HOST_MODULES)}")
        if name == "random":
            return seeded
        return builtins.__import__(name, globals, locals, fromlist, level)

    safe = dict(vars(builtins))
    for name in ("open", "exec", "eval", "compile", "input", "breakpoint", "exit", "quit"):
        safe.pop(name, None)
    safe["__import__"] = guarded_import
    safe["print"] = lambda *a, **k: None
    return {"__builtins__": safe, "__name__": "agentgym_check", **hooks}


class _Pending:
    """What the recording candidate returns: any use of it outside an assert is refused."""

    def _refuse(self, *args: Any) -> Any:
        raise UnsupportedCheck("check() uses a result of the candidate outside an assert")

    __bool__ = __iter__ = __len__ = __index__ = __getitem__ = __eq__ = __lt__ = _refuse
    __add__ = __sub__ = __mul__ = __str__ = __float__ = __int__ = __contains__ = _refuse
    __hash__ = None  # type: ignore[assignment]


class _CallFailed(Exception):
    pass


class _TestFailed(Exception):
    pass


def _run_check(
    plan_or_code: tuple[Any, Any], hooks: dict[str, Any], rng: _random.Random | None = None
) -> None:
    """Run the check with ``hooks``; its ``random`` draws from ``rng`` (default: a generator
    seeded with :data:`CHECK_SEED`)."""
    helpers, check = plan_or_code
    namespace = _host_globals(hooks, rng if rng is not None else _random.Random(CHECK_SEED))
    exec(helpers, namespace)  # the dataset's own imports and helper functions
    exec(check, namespace)
    namespace["__agentgym_check__"]()


@functools.lru_cache(maxsize=1024)
def plan_checks(problem: CodeProblem) -> CheckPlan:
    """Parse ``problem``'s check and record the calls it makes of the candidate.

    Raises:
        UnsupportedCheck: an assertion outside :data:`FORMS`, a check whose control flow needs the
            candidate's results, or call arguments that are not plain data.
    """
    helpers, check, tests, forms = _compile_check(problem)
    calls: list[str] = []
    test_of_call: list[int] = []
    first_call = [0] * len(tests)
    rng = _random.Random(CHECK_SEED)
    # The random state at each test's entry: the judge restores it, so a test that stops early
    # (a failing assert in a loop skips its later draws) cannot shift a later test's drawn inputs
    # away from the plan (which would make the verdict depend on where a hidden test failed).
    rng_states: list[Any] = [None] * len(tests)
    current = [-1]
    pending = _Pending()

    def record(*args: Any, **kwargs: Any) -> Any:
        try:
            calls.append(channel.dumps([list(args), kwargs]))
        except channel.NotPlainData as err:
            raise UnsupportedCheck(
                f"{problem.task_id}: call arguments are not plain data: {err}"
            ) from err
        test_of_call.append(current[0])
        return pending

    class _Test:
        def __init__(self, index: int):
            self.index = index

        def __enter__(self) -> None:
            current[0] = self.index
            first_call[self.index] = len(calls)
            rng_states[self.index] = rng.getstate()

        def __exit__(self, *exc: Any) -> None:
            current[0] = -1

    hooks = {_CALL: record, _ASSERT: lambda fn, src, results: None, _TEST: _Test}
    try:
        _run_check((helpers, check), hooks, rng)
    except UnsupportedCheck:
        raise
    except Exception as err:  # noqa: BLE001 - the recorded run must not need real results
        raise UnsupportedCheck(
            f"{problem.task_id}: check() cannot run without the candidate's results: "
            f"{type(err).__name__}: {err}"
        ) from err
    if any(t < 0 for t in test_of_call):
        raise UnsupportedCheck(f"{problem.task_id}: a candidate call outside every test")
    return CheckPlan(
        entry_point=problem.entry_point,
        tests=tests,
        forms=forms,
        calls=tuple(calls),
        test_of_call=tuple(test_of_call),
        _helpers=helpers,
        _check=check,
        _first_call=tuple(first_call),
        _rng_states=tuple(rng_states),
    )


#: What one call of the candidate gave: ``(True, value)`` or ``(False, reason)``.
Outcome = tuple[bool, Any]


def judge(
    plan: CheckPlan, outcomes: Sequence[Outcome], indices: list[int] | None = None
) -> tuple[int, tuple[tuple[str, str], ...]]:
    """Evaluate every test of ``plan`` on the candidate's ``outcomes`` (one per planned call).

    Returns:
        ``(passed, failures)``: tests passed, and ``(test source, reason)`` of each failure. The
        reason is :data:`WRONG_VALUE`, or a failing call and what happened to it
        (:class:`GradeResult`), never the assert or an expected value.

    ``indices``, when given, is filled with the index of each failing test (as
    :attr:`GradeResult.failed_tests`).

    Raises:
        ValueError: ``outcomes`` does not have one entry per call.
        RuntimeError: the check made other calls than when it was planned (a grader bug).
    """
    if indices is None:
        indices = []
    if len(outcomes) != len(plan.calls):
        raise ValueError(f"{len(outcomes)} outcomes for {len(plan.calls)} planned calls")
    cursor = [0]
    verdicts: dict[int, str | None] = {}

    def replay(*args: Any, **kwargs: Any) -> Any:
        k = cursor[0]
        if k >= len(plan.calls) or channel.dumps([list(args), kwargs]) != plan.calls[k]:
            raise RuntimeError("check() made other calls than when it was planned")
        cursor[0] += 1
        ok, value = outcomes[k]
        if not ok:
            raise _CallFailed(f"{plan.call_text(k)} {value}")
        return value

    def check_assert(fn: Callable[[], Any], source: str, results: tuple[Any, ...]) -> None:
        try:
            holds = bool(fn())
        except Exception:  # noqa: BLE001 - a result of the wrong shape fails the test
            holds = False
        if not holds:
            # Neither the inputs nor the value: "f(x) returned True" and a failed test tell that
            # f(x) should not be True, which answers every yes/no task (flip the named inputs).
            raise _TestFailed(source, WRONG_VALUE)

    class _Test:
        def __init__(self, index: int):
            self.index = index

        def __enter__(self) -> None:
            cursor[0] = plan._first_call[self.index]
            if plan._rng_states[self.index] is not None:
                rng.setstate(plan._rng_states[self.index])

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
            if exc is None:
                verdicts[self.index] = None
                return False
            if isinstance(exc, (_TestFailed, _CallFailed)):
                verdicts[self.index] = exc.args[-1]
                return True
            if isinstance(exc, RuntimeError):
                return False
            # the check's own code raised: its message may quote expected values, so not shown
            verdicts[self.index] = f"the test raised {type(exc).__name__}"
            return True

    hooks = {_CALL: replay, _ASSERT: check_assert, _TEST: _Test}
    rng = _random.Random(CHECK_SEED)
    _run_check((plan._helpers, plan._check), hooks, rng)
    failures = []
    failed = []
    for i, src in enumerate(plan.tests):
        if i not in verdicts:
            failures.append((src, "not run"))
        elif verdicts[i] is not None:
            failures.append((src, str(verdicts[i])))
        else:
            continue
        failed.append(i)
    indices[:] = failed
    return len(plan.tests) - len(failures), tuple(failures)


# ----------------------------------------------------------------------------- the sandbox side

#: The program that runs inside the sandbox as main.py, beside spec.json and channel.py
#: (``programs/code_exec_harness.py``): it calls the answer's function and writes what each call
#: returned, one line per call; the host judges the values.
_HARNESS_FILE = resources.files("agentgym.envs") / "programs" / "code_exec_harness.py"
_HARNESS = _HARNESS_FILE.read_text("utf-8")

#: One line of the harness's report (see :func:`read_report`): ASCII indices without leading
#: zeros, at most six digits (so ``int`` is cheap and never refuses them), then the kind.
_LINE = re.compile(r"(0|[1-9][0-9]{0,5}) (0|[1-9][0-9]{0,5}|M) ([RTNE])(.*)", re.S)
#: Longest reason the harness writes after ``E`` or ``N`` (its ``_reason`` keeps 300 characters).
_MAX_REASON_CHARS = 300
#: Longest wire JSON accepted after ``R``: more than a sandbox's output limit lets through (1 MiB).
_MAX_RESULT_CHARS = 16 * OUTPUT_LIMIT
#: The first line of every report, written before the answer runs.
_STARTED = "STARTED\n"
#: Runs tried when the sandbox fails before the harness starts (not the answer's doing).
_START_ATTEMPTS = 4
#: First pause between those tries, seconds (doubling). Only the wait changes, never a verdict.
_START_BACKOFF_S = 0.25


def grade(
    runner: Any,
    problem: CodeProblem,
    code: str,
    *,
    timeout_s: float = 20.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    per_test_timeout_s: float = 5.0,
) -> GradeResult:
    """Grade ``code`` against ``problem``'s tests: one sandbox run, verdicts on the host.

    Args:
        runner: a :class:`~sandboxes.code.CodeSandbox` or one of its leases (anything with ``run``).
        problem: the problem.
        code: the answer's Python source.
        timeout_s: limit of the whole run (answer plus every call), seconds.
        memory_mb: memory limit, MiB.
        per_test_timeout_s: limit of each call of the function (and of the answer's module code).

    Returns:
        The :class:`GradeResult`; a test whose calls never ran counts as failed.

    Raises:
        UnsupportedCheck: the problem's check has a form the host cannot evaluate.
        SandboxError: the sandbox failed before the grader's harness started, four times (the
            answer never ran; no verdict is given rather than a wrong one). An answer too long
            for the sandbox's files (``runner.files_too_large``) is no such failure: it is not
            run, and scores 0 with ``error`` saying so.
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
    memory_mb: int = DEFAULT_MEMORY_MB,
    per_test_timeout_s: float = 5.0,
) -> list[GradeResult]:
    """Grade several ``(problem, answer)`` pairs in ONE sandbox run (each in its own namespace).

    For trusted answers (reference solutions, evaluation sweeps) this saves a process start per
    problem; the env grades one answer per run so that answers never share an interpreter.
    ``timeout_s`` limits the whole batch. Arguments otherwise as :func:`grade`.
    """
    plans = [plan_checks(problem) for problem, _ in items]
    batch = [
        {
            "entry_point": problem.entry_point,
            "prelude": problem.prompt,
            "solution": code,
            "calls": list(plan.calls),
            "per_test_timeout_s": per_test_timeout_s,
        }
        for (problem, code), plan in zip(items, plans, strict=True)
    ]
    files = _files(batch)
    why = _too_large(runner, files)
    if why is not None:
        # A run would fail before the harness starts, which reads as the sandbox's failure
        # (SandboxError after four tries). The answer's length is the cause: it scores 0.
        return [
            GradeResult(
                0,
                len(plan.tests),
                tuple((t, "not run") for t in plan.tests),
                f"your answer is too long to run ({len(code):,} characters): {why}",
                tuple(range(len(plan.tests))),
            )
            for (_, code), plan in zip(items, plans, strict=True)
        ]
    result = _start_run(runner, files, timeout_s=timeout_s, memory_mb=memory_mb)
    try:
        lines = read_report(result.stdout, [len(plan.calls) for plan in plans])
    except MalformedReport as err:
        # Only the answer can have written it (the harness writes each line once, in this
        # grammar): the run's answers score 0, and the grader goes on.
        error = f"the grader's report was malformed ({err}): your code wrote to it"
        return [
            GradeResult(
                0,
                len(plan.tests),
                tuple((t, "not graded") for t in plan.tests),
                error,
                tuple(range(len(plan.tests))),
            )
            for plan in plans
        ]
    missing = _missing(result, timeout_s, memory_mb)
    out = []
    for p, plan in enumerate(plans):
        module = lines.get((p, "M"))
        if module is not None:
            why = (
                module[1]
                if module[1] != "timed out"
                else f"timed out after {per_test_timeout_s:g} s"
            )
            error = f"your code raised {why}"
            out.append(
                GradeResult(
                    0,
                    len(plan.tests),
                    tuple((t, "not run") for t in plan.tests),
                    error,
                    tuple(range(len(plan.tests))),
                )
            )
            continue
        outcomes: list[Outcome] = []
        for k in range(len(plan.calls)):
            kind, payload = lines.get((p, str(k)), ("", ""))
            outcomes.append(_outcome(kind, payload, missing, per_test_timeout_s))
        failed: list[int] = []
        passed, failures = judge(plan, outcomes, failed)
        error = None
        if len(lines) == 0 or (p, str(len(plan.calls) - 1)) not in lines:
            error = missing if plan.calls else None
        out.append(
            GradeResult(passed, len(plan.tests), failures, error, tuple(failed), tuple(outcomes))
        )
    return out


def _files(batch: list[dict[str, Any]]) -> dict[str, str]:
    """The files of a harness run beside ``main.py``: ``spec.json`` (the batch) and the channel."""
    return {"spec.json": json.dumps(batch), "channel.py": _CHANNEL_SOURCE.read_text("utf-8")}


def _too_large(runner: Any, files: dict[str, str]) -> str | None:
    """Why the harness and ``files`` would not fit ``runner``'s work directory, or ``None``."""
    too_large = getattr(runner, "files_too_large", None)
    return too_large(_HARNESS, files) if too_large is not None else None


def _start_run(
    runner: Any,
    files: dict[str, str],
    *,
    timeout_s: float,
    memory_mb: int,
    quote: bool = True,
) -> Any:
    """One run of the harness that got as far as its ``STARTED`` line (the sandbox's
    :class:`~sandboxes.code.ExecResult`), tried up to :data:`_START_ATTEMPTS` times.

    Raises:
        SandboxError: the harness never started (the answer never ran); the message quotes the
            last line of the last try's stderr when ``quote``, else says only that.
    """
    for attempt in range(_START_ATTEMPTS):
        result = runner.run(_HARNESS, files=files, timeout_s=timeout_s, memory_mb=memory_mb)
        if result.stdout.startswith(_STARTED):
            return result
        # The harness never started, so the answer never ran: the sandbox failed (e.g. no free
        # namespace under load). That is not the answer's fault: try again, then say so.
        if attempt == _START_ATTEMPTS - 1:
            tail = (result.stderr.strip().splitlines() or [f"exit status {result.exit_code}"])[-1]
            detail = f": {tail[:300]}" if quote else ""
            raise SandboxError(
                f"the sandbox did not start the grader ({_START_ATTEMPTS} tries){detail}"
            )
        time.sleep(_START_BACKOFF_S * 2**attempt)  # a busy kernel frees namespaces soon
    raise AssertionError("unreachable")  # pragma: no cover


def _missing(result: Any, timeout_s: float, memory_mb: int) -> str:
    """What a call the run never reported on gave (the run timed out, ran out of memory, or
    ended early: the last line of its stderr, which the answer controls)."""
    if result.timed_out:
        return f"timed out (the whole run passed its {timeout_s:g} s limit)"
    if result.oom_killed:
        return f"not run: the run ran out of memory ({memory_mb} MiB)"
    tail = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.exit_code}"]
    return f"not run: the run ended early ({tail[0][:200]})"


@dataclass(frozen=True)
class _Limits:
    """The limits of one harness run: seconds for the run, MiB, seconds for each call."""

    timeout_s: float
    memory_mb: int
    per_test_timeout_s: float


#: The reason of every failing hidden test in a :func:`grade_split` result, whatever happened:
#: the hidden run's texts (messages, stderr, values) never leave :func:`_hidden_verdicts`.
HIDDEN_FAILED = "failed (a hidden test: how is not shown)"
#: The :attr:`GradeResult.outcomes` entry of every hidden test's call in a :func:`grade_split`
#: result: not what the call gave.
HIDDEN_CALL: tuple[bool, Any] = (False, "a hidden test's call: not shown")


def _split_calls(
    problem: CodeProblem, public: Sequence[int], hidden: Sequence[int]
) -> tuple[Any, set[int], set[int]]:
    """``(plan, public set, hidden set)``, checked to split the problem's tests.

    Raises:
        ValueError: ``public`` and ``hidden`` do not split the tests.
    """
    plan = plan_checks(problem)
    public_set, hidden_set = set(public), set(hidden)
    everything = set(range(len(plan.tests)))
    if public_set & hidden_set or public_set | hidden_set != everything:
        raise ValueError(
            f"public {sorted(public_set)} and hidden {sorted(hidden_set)} do not split "
            f"the {len(plan.tests)} tests"
        )
    return plan, public_set, hidden_set


def grade_public(
    runner: Any,
    problem: CodeProblem,
    code: str,
    public: Sequence[int],
    hidden: Sequence[int],
    *,
    timeout_s: float = 20.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    per_test_timeout_s: float = 5.0,
) -> GradeResult:
    """The *public run* of ``code`` (one sandbox run): its spec holds the public tests' calls
    only, so nothing in its sandbox holds a hidden call and its texts, which the answer controls,
    may be shown: what each call returned or raised, its module code's error, the last line of
    its stderr when it ended early.

    Args:
        runner, problem, code, timeout_s, memory_mb, per_test_timeout_s: as :func:`grade`.
        public: indices (in :attr:`CheckPlan.tests`) of the public tests; may be empty.
        hidden: indices of the hidden tests (not run); together with ``public`` every test, once.

    Returns:
        A :class:`GradeResult` of the public tests: ``passed`` of ``total = len(public)`` (which
        may be 0), ``failures`` and ``failed_tests`` the failing public tests', ``error`` the
        run's (``None`` when it ran every public call), ``outcomes`` over every planned call
        with :data:`HIDDEN_CALL` for each hidden test's call.

    Raises:
        ValueError: ``public`` and ``hidden`` do not split the tests.
        UnsupportedCheck, SandboxError: as :func:`grade`.
    """
    plan, public_set, _ = _split_calls(problem, public, hidden)
    public_calls = [k for k, t in enumerate(plan.test_of_call) if t in public_set]
    limits = _Limits(timeout_s, memory_mb, per_test_timeout_s)
    outcomes, error, public_failed = _public_outcomes(runner, problem, code, public_calls, limits)
    reasons = {i: why for i, why in public_failed if i in public_set}
    failed = sorted(reasons)
    public_call = set(public_calls)
    shown = tuple(
        outcomes.get(k, (False, "not run")) if k in public_call else HIDDEN_CALL
        for k in range(len(plan.calls))
    )
    failures = tuple((plan.tests[i], reasons[i]) for i in failed)
    return GradeResult(
        len(public_set) - len(failed), len(public_set), failures, error, tuple(failed), shown
    )


def grade_hidden(
    runner: Any,
    problem: CodeProblem,
    code: str,
    public: Sequence[int],
    hidden: Sequence[int],
    *,
    timeout_s: float = 20.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    per_test_timeout_s: float = 5.0,
) -> tuple[int, ...]:
    """The *hidden run* of ``code`` (one sandbox run): its spec holds the hidden tests' calls
    only, and from it the host keeps one bit per hidden test, passed or not
    (:func:`_hidden_verdicts`): no message, no stderr, no returned value, no exit status, no
    report error. A hidden run that raised, timed out, ran out of memory, exited or corrupted
    its report fails the hidden tests it did not answer, silently.

    Args: as :func:`grade_public`.

    Returns:
        The hidden tests that passed (indices, ascending).

    Raises:
        ValueError: ``public`` and ``hidden`` do not split the tests.
        UnsupportedCheck, SandboxError: as :func:`grade` (a SandboxError quotes nothing of the
            run's stderr).
    """
    plan, _, hidden_set = _split_calls(problem, public, hidden)
    hidden_calls = [k for k, t in enumerate(plan.test_of_call) if t in hidden_set]
    limits = _Limits(timeout_s, memory_mb, per_test_timeout_s)
    bits = _hidden_verdicts(runner, problem, code, hidden_calls, sorted(hidden_set), limits)
    return tuple(i for i in sorted(hidden_set) if bits.get(i, False))


def grade_split(
    runner: Any,
    problem: CodeProblem,
    code: str,
    public: Sequence[int],
    hidden: Sequence[int],
    *,
    timeout_s: float = 20.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    per_test_timeout_s: float = 5.0,
) -> GradeResult:
    """Grade ``code`` on a problem whose tests are split into public and hidden ones: TWO sandbox
    runs, :func:`grade_public` then :func:`grade_hidden`, so that no text of a run that had the
    hidden tests' calls can reach the agent.

    CodeExec-v2 (``feedback="public"``) calls this per attempt. CodeExec-v3
    (``"public_final"``) does not: an episode makes its public runs as it goes and every hidden
    run only after the episode's last public run (a hidden run can leave state in the shared
    kernel or container, e.g. a cgroup's memory high-water mark or a kernel-wide inode counter,
    that a LATER run in the same sandbox could read and quote: v2 keeps that channel).

    The two runs are separate processes (under Docker: separate execs in the episode's
    container, which the sandbox empties between runs), so the answer's state in the
    interpreter does not carry from one to the other: a call counter restarts at the hidden run.

    Args:
        runner, problem, code, timeout_s, memory_mb, per_test_timeout_s: as :func:`grade`;
            ``timeout_s`` limits each run, so an attempt may take twice as long.
        public: indices (in :attr:`CheckPlan.tests`) of the public tests; may be empty.
        hidden: indices of the hidden tests; together with ``public`` every test, once.

    Returns:
        A :class:`GradeResult` over every test. ``error`` is the public run's (``None`` when it
        ran every public call); ``failures`` and ``outcomes`` are the public run's for the
        public tests, and for the hidden tests only :data:`HIDDEN_FAILED` and
        :data:`HIDDEN_CALL` (the same whatever happened).

    Raises:
        ValueError: ``public`` and ``hidden`` do not split the tests.
        UnsupportedCheck, SandboxError: as :func:`grade` (the hidden run's SandboxError quotes
            nothing of its stderr).
    """
    limits = {
        "timeout_s": timeout_s,
        "memory_mb": memory_mb,
        "per_test_timeout_s": per_test_timeout_s,
    }
    plan, _, hidden_set = _split_calls(problem, public, hidden)
    # the public run first: nothing of the hidden run has run in the sandbox before it
    shown = grade_public(runner, problem, code, public, hidden, **limits)
    passed = set(grade_hidden(runner, problem, code, public, hidden, **limits))
    failed = sorted(set(shown.failed_tests) | (hidden_set - passed))
    reasons = dict(zip(shown.failed_tests, (why for _, why in shown.failures), strict=True))
    failures = tuple((plan.tests[i], reasons.get(i, HIDDEN_FAILED)) for i in failed)
    return GradeResult(
        len(plan.tests) - len(failed),
        len(plan.tests),
        failures,
        shown.error,
        tuple(failed),
        shown.outcomes,
    )


def _run_calls(
    runner: Any,
    problem: CodeProblem,
    code: str,
    calls: Sequence[int],
    limits: _Limits,
    *,
    quote: bool,
) -> tuple[str, Any, dict[tuple[int, str], tuple[str, str]] | None]:
    """Run the planned calls ``calls`` (indices in :attr:`CheckPlan.calls`) of ``code``, alone in
    one harness run: its spec holds those calls and no other.

    Returns:
        ``(status, result, lines)``: ``status`` is ``"too large"`` (not run; ``result`` is the
        reason), ``"malformed"`` (``result`` is the :class:`MalformedReport`) or ``"ran"``
        (``result`` is the run's ExecResult); ``lines`` the report (:func:`read_report`, its
        call indices being positions in ``calls``) when it ran.
    """
    plan = plan_checks(problem)
    spec = {
        "entry_point": problem.entry_point,
        "prelude": problem.prompt,
        "solution": code,
        "calls": [plan.calls[k] for k in calls],
        "per_test_timeout_s": limits.per_test_timeout_s,
    }
    files = _files([spec])
    why = _too_large(runner, files)
    if why is not None:
        return "too large", why, None
    result = _start_run(
        runner, files, timeout_s=limits.timeout_s, memory_mb=limits.memory_mb, quote=quote
    )
    try:
        lines = read_report(result.stdout, [len(calls)])
    except MalformedReport as err:
        return "malformed", err, None
    return "ran", result, lines


def _public_outcomes(
    runner: Any,
    problem: CodeProblem,
    code: str,
    calls: Sequence[int],
    limits: _Limits,
) -> tuple[dict[int, Outcome], str | None, list[tuple[int, str]]]:
    """The public run of :func:`grade_split`: ``(outcome of each of calls by planned index,
    error, (test index, reason) of each failing test)``; the failing tests are read among the
    public ones only by the caller (every hidden call counts as :data:`HIDDEN_CALL` here)."""
    plan = plan_checks(problem)
    status, result, lines = _run_calls(
        runner,
        problem,
        code,
        calls,
        limits,
        quote=True,
    )
    every = [(i, "not run") for i in range(len(plan.tests))]
    if status == "too large":
        return {}, f"your answer is too long to run ({len(code):,} characters): {result}", every
    if status == "malformed":
        every = [(i, "not graded") for i in range(len(plan.tests))]
        return {}, f"the grader's report was malformed ({result}): your code wrote to it", every
    assert lines is not None
    per_call_s = limits.per_test_timeout_s
    module = lines.get((0, "M"))
    if module is not None:
        why = module[1] if module[1] != "timed out" else f"timed out after {per_call_s:g} s"
        return {}, f"your code raised {why}", every
    missing = _missing(result, limits.timeout_s, limits.memory_mb)
    outcomes = {
        k: _outcome(*lines.get((0, str(j)), ("", "")), missing, per_call_s)
        for j, k in enumerate(calls)
    }
    error = None
    if (calls and (0, str(len(calls) - 1)) not in lines) or (not calls and not result.ok):
        error = missing
    failed: list[int] = []
    _, failures = judge(
        plan, [outcomes.get(k, HIDDEN_CALL) for k in range(len(plan.calls))], failed
    )
    return outcomes, error, [(i, why) for i, (_, why) in zip(failed, failures, strict=True)]


def _hidden_verdicts(
    runner: Any,
    problem: CodeProblem,
    code: str,
    calls: Sequence[int],
    tests: Sequence[int],
    limits: _Limits,
) -> dict[int, bool]:
    """The hidden run of :func:`grade_split`, which runs the planned calls ``calls`` (those of
    the hidden ``tests``): whether each of ``tests`` passed, ``{test index: passed}``, and
    nothing else.

    Every text of the run stays here: a call's value is judged on the host and dropped, any other
    outcome (raised, timed out, not plain data, never reported: the run timed out, ran out of
    memory or exited, whatever its stderr says) is a failed call, a module error or a malformed
    or too-large report fails every call, and a failed start raises :class:`SandboxError`
    without quoting the run.
    """
    plan = plan_checks(problem)
    status, _, lines = _run_calls(
        runner,
        problem,
        code,
        calls,
        limits,
        quote=False,
    )
    if status != "ran" or lines is None or (0, "M") in lines:
        return {i: False for i in tests}
    outcomes: list[Outcome] = [HIDDEN_CALL] * len(plan.calls)
    for j, k in enumerate(calls):
        kind, payload = lines.get((0, str(j)), ("", ""))
        if kind == "R":
            try:
                outcomes[k] = (True, channel.loads(payload))
            except channel.NotPlainData:
                pass
    failed: list[int] = []
    judge(plan, outcomes, failed)
    return {i: i not in failed for i in tests}


class MalformedReport(ValueError):
    """A report line outside the harness's grammar, or one written twice (:func:`read_report`)."""


def read_report(stdout: str, calls: Sequence[int]) -> dict[tuple[int, str], tuple[str, str]]:
    """The harness's report lines in ``stdout``, by ``(problem, call index or "M")``.

    The answer runs in the harness's own process, so it can write on the report channel too: no
    channel of that process is out of its reach. So the host believes a report only as far as the
    answer's own results go (whatever a forged line says of a call, the function could have
    returned), and reads it strictly: after the first line ``STARTED``, every line must be
    ``<problem> <call> R<wire json>``, ``... T``, ``... N<reason>``, ``... E<reason>`` or
    ``<problem> M E<reason>``, with indices in range (ASCII digits, no leading zero, at most six),
    a reason of at most 300 characters, a result of at most 1 MiB, and each ``(problem, call)``
    once. The text after the last newline (a line cut off when the run ended or its output passed
    the sandbox's limit) is dropped: its call counts as not run.

    Args:
        stdout: the run's standard output (starting with ``STARTED``).
        calls: the number of planned calls of each problem of the run.

    Raises:
        MalformedReport: any other line; the message says what is wrong, never the line itself.

    Example:
        >>> read_report("STARTED\\n0 0 R5\\n0 1 T\\n0 2 R[", [3])
        {(0, '0'): ('R', '5'), (0, '1'): ('T', '')}
    """
    lines: dict[tuple[int, str], tuple[str, str]] = {}
    body = stdout[len(_STARTED) :] if stdout.startswith(_STARTED) else stdout
    for number, line in enumerate(body.split("\n")[:-1], start=2):
        if len(line) > _MAX_RESULT_CHARS + 16:
            raise MalformedReport(f"line {number} is too long")
        match = _LINE.fullmatch(line)
        if match is None:
            raise MalformedReport(f"line {number} is not a report line")
        p, k, kind, payload = int(match[1]), match[2], match[3], match[4]
        if p >= len(calls) or (k != "M" and int(k) >= calls[p]):
            raise MalformedReport(f"line {number} names a call that was not made")
        if (k == "M" and kind != "E") or (kind == "T" and payload):
            raise MalformedReport(f"line {number} is not a report line")
        if kind in "EN" and len(payload) > _MAX_REASON_CHARS:
            raise MalformedReport(f"line {number} has a reason over {_MAX_REASON_CHARS} characters")
        if (p, k) in lines:
            raise MalformedReport(f"line {number} repeats a call")
        lines[(p, k)] = (kind, payload)
    return lines


def _outcome(kind: str, payload: str, missing: str, per_call_s: float) -> Outcome:
    if kind == "R":
        try:
            return True, channel.loads(payload)
        except channel.NotPlainData as err:
            return False, f"returned something the grader cannot read: {err}"
    if kind == "T":
        return False, f"timed out after {per_call_s:g} s"
    if kind == "N":
        return False, f"returned a value that is not plain data ({payload})"
    if kind == "E":
        return False, f"raised {payload}"
    return False, missing
