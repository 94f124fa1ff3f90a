"""Round 7 of attacks by a fresh tester (black box first, then the code): an agent (``cmd:`` or a
policy being trained) and a hostile leaderboard submitter against ``agentgym eval``, the envs'
rewards and observations, and ``python -m leaderboards``.

Each test is one finding and FAILS on the code it was written against because of the fault; its
docstring says what the attack is, which promise it breaks and the fix suggested. Most serious
first.
"""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
import zlib
from contextlib import closing
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs.code_exec import split_plan
from agentgym.envs.code_exec_grading import plan_checks
from agentgym.registration import worst_return
from leaderboards.__main__ import main
from tests.helpers import quiet_eval

# ----------------------------------------------------------------------------- CodeExec-v2


def _hidden_calls(env: Any) -> list[str]:
    """The wire form of every call that only hidden tests make (what the sandbox's spec holds)."""
    plan = plan_checks(env.unwrapped.problem)
    public, hidden = split_plan(plan)
    shown = {plan.calls[k] for k, t in enumerate(plan.test_of_call) if t in public}
    return [
        plan.calls[k]
        for k, t in enumerate(plan.test_of_call)
        if t in hidden and plan.calls[k] not in shown
    ]


# Module code that reads the batch the grader ships into the sandbox (spec.json: every call of
# every test, hidden ones included) and raises with it; or writes it to stderr and exits, so the
# run "ended early" and the last stderr line is quoted.
_RAISE_SPEC = """
import json
calls = json.load(open("spec.json"))[0]["calls"]
raise ValueError(" ".join(calls[-4:]))
def {name}(*args, **kwargs):
    return None
"""
_EXIT_SPEC = """
import json, os, sys
calls = json.load(open("spec.json"))[0]["calls"]
def {name}(*args, **kwargs):
    sys.stderr.write(" ".join(calls[-4:]) + "\\n")
    sys.stderr.flush()
    os._exit(1)
"""


@pytest.mark.parametrize("template", [_RAISE_SPEC, _EXIT_SPEC], ids=["module-error", "stderr"])
def test_an_answer_cannot_print_the_hidden_tests_into_the_observation(template: str) -> None:
    """ATTACK: an answer's code reads ``spec.json``, the batch the grader ships into the sandbox,
    which holds the arguments of every test call, hidden ones included, and puts them in the text
    the env quotes back: the message of an exception its module code raises (``Error: your code
    raised ValueError: [[5],{"d":[]}] ...``), or the last line of its stderr when it exits early
    (``Error: not run: the run ended early (...)``, also repeated after each failed public
    test). The next attempt's observation then lists the hidden tests' inputs, so a policy can
    work out (or look up) their expected values and special-case them.

    PROMISE BROKEN (agentgym/envs/code_exec.py, module docstring): "the rest are *hidden*, decide
    the reward and success alone, and an attempt is told only whether all of them passed ...
    Nothing else of a hidden test reaches the observation: not how many passed, not which, not
    how their calls went"; README: "a quarter of each problem's tests are public (shown, reported
    on), the rest hidden".

    FIX: no text the answer controls may reach the observation from a run that holds hidden
    calls. Run the public calls and the hidden calls in two sandbox runs: quote errors and
    stderr only from the public run, and from the hidden run take verdicts only (or replace
    its texts with fixed ones: "your code raised an exception", "the run ended early (exit
    status N)").
    """
    env = gymnasium.make("agentgym/CodeExec-v2", backend="process")
    try:
        env.reset(seed=0)
        hidden = _hidden_calls(env)
        assert hidden, "seed 0 must have hidden calls"
        code = template.format(name=env.unwrapped.problem.entry_point)
        obs, reward, terminated, truncated, info = env.step(
            f"<think>t</think><answer>{code}</answer>"
        )
        assert info["action_is_valid"]
        leaked = [call for call in hidden if call in obs]
        assert leaked == [], f"hidden test inputs in the observation: {leaked}\n{obs[-600:]}"
    finally:
        env.close()


_FENCE_STEP = """
import gymnasium, agentgym
env = gymnasium.make("agentgym/CodeExec-v2", backend="process")
env.reset(seed=0)
_, _, _, _, info = env.step("<think>t</think><answer>```" + " " * (4 * 2**20) + "x</answer>")
env.close()
print("stepped", info["action_is_valid"])
"""


def test_one_code_answer_cannot_hang_the_env() -> None:
    """ATTACK: a CodeExec answer of three backticks, then 4 MiB of spaces, then one letter (a
    ``cmd:`` agent may write 16 MiB on one line). ``extract_code`` looks for a fenced block with
    ``re.compile(r"```[ \\t]*(?:python3?|py)?[ \\t]*\\n(.*?)```", re.S)``: the two ``[ \\t]*``
    runs around an optional group split a run of spaces that no newline ends in every possible
    way, so the search is quadratic in its length (16,000 spaces: 0.26 s, 32,000: 1.1 s; 4 MiB:
    about 5 hours; 16 MiB: days), all in one ``env.step``. ``agentgym eval`` has no limit on a
    step (the ``cmd:`` timeout bounds only the agent's reply), so it hangs there; a leaderboard
    replay of such a bundle is stopped by its per-step limit, after 120 s of the verifier's CPU.

    PROMISE BROKEN: README: "No action string ever raises" (an action is handled like any other
    text); agentgym/parsing.py sets the bar for action text: "it scans with ``str.find`` (linear
    time), so 100 kB of text costs microseconds"; the brief's "an agent cannot make eval hang".

    FIX: make the fence pattern linear: possessive runs, ``r"```[ \\t]*+(?:python3?|py)?[
    \\t]*+\\n(.*?)```"`` (Python 3.11), or find the opening fence with ``str.find`` and check the
    rest of its line by hand; and bound an answer's length before any regex or parse (see the
    memory test below). The same shape, ``\\s*`` runs around an optional token, is in
    agentgym/envs/miniwob.py's ``_REF`` (``click[`` + 16,000 spaces + ``x]``: 3.4 s in
    ``_REF.fullmatch``, and it grows faster than quadratically).

    A hang guard of 60 s (the linear scan of 4 MiB takes milliseconds) runs the step in a child
    process, killed at the guard.
    """
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", _FENCE_STEP],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("one env.step on a 4 MiB answer was still running after 60 s")
    assert done.returncode == 0 and "stepped False" in done.stdout, done.stderr[-2000:]


def test_the_host_does_not_parse_an_unbounded_answer() -> None:
    """ATTACK: one CodeExec action of ``x = [1,1,1,...]`` (no sandbox needed: it does not even
    define the function). The env checks that an answer defines the entry point with
    ``ast.parse`` in the host process, on the whole answer, whatever its length: the AST costs
    about 480 times the answer's size (256 KiB: 124 MiB traced here). A ``cmd:`` agent may write
    a 16 MiB line (``max_line_bytes``), and that one action costs ``agentgym eval`` 7.6 GB of
    resident memory and 20 s (measured), enough to have the OOM killer end the evaluation on the
    project's 8 GB machines; a leaderboard replay of it is stopped only by the memory budget.

    PROMISE BROKEN: README, the contract every environment shares: "No action string ever
    raises"; agentgym/agents.py: a program that "writes a line over ``max_line_bytes`` (16 MiB)
    ... gives an error for that episode" (the bound that is meant to keep one agent line
    harmless); the brief's "an agent cannot crash eval".

    FIX: bound the answer before parsing it on the host: an answer longer than a stated limit
    (e.g. 64 KiB, or the env's ``max_action_length``) is an invalid action with that reason;
    or run the ``defines the entry point`` check inside the sandbox.
    """
    env = gymnasium.make("agentgym/CodeExec-v2", backend="process")
    try:
        env.reset(seed=0)
        body = "x = [" + "1," * (128 * 1024) + "]\n"
        action = f"<think>t</think><answer>{body}</answer>"
        tracemalloc.start()
        try:
            env.step(action)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 16 * len(action), (
            f"one {len(action) / 2**10:.0f} KiB action cost the host {peak / 2**20:.0f} MiB"
        )
    finally:
        env.close()


# ----------------------------------------------------------------------------- Countdown


def test_countdown_pays_no_more_for_solving_later() -> None:
    """ATTACK (reward farming; a policy trained with RL finds it): on Countdown with several
    attempts (``max_turns=3``, a task parameter, its own board), answer twice with any
    expression over the given numbers that misses the target (``86 + 64 + 52 + 27``), then with
    the solution. Each wrong attempt pays the format score again, so the episode returns
    0.1 + 0.1 + 1.0 = 1.2, while solving at once returns 1.0: stalling pays 20% more. On the
    leaderboard, entries with the same successes are ranked by mean return, so the staller
    ranks above the agent that solves at once; in training, the return teaches the policy to
    hold back a correct answer.

    PROMISE BROKEN: agentgym/envs/countdown.py: "1.0: the expression uses only given numbers
    and equals the target (``success``; terminated); ``format_score`` (0.1): it uses only given
    numbers but has another value" (the score of an answer, not a payment per attempt; README:
    "1 correct, 0.1 wrong value"); the repository's own rule for attempts: Math pays
    "1/2^(k-1) for a correct answer at attempt k" and CodeExec "a failed attempt never pays
    twice".

    FIX: pay the improvement over the best score of the episode so far (``max(0, score -
    best)``, as CodeExec's ``counts``), so an episode's return is its best attempt's score; or
    pay the best score once, on the last step.
    """
    env = gymnasium.make("agentgym/Countdown-v0", max_turns=3)
    try:
        env.reset(seed=0)
        problem = env.unwrapped.problem
        assert sum(problem.numbers) != problem.target
        wrong = "<think>w</think><answer>" + " + ".join(map(str, problem.numbers)) + "</answer>"
        solution = env.unwrapped.oracle_answer()
        stalled = 0.0
        for action in (wrong, wrong, solution):
            _, reward, terminated, _, info = env.step(action)
            stalled += reward
        assert terminated and info["success"]
        env.reset(seed=0)
        _, direct, terminated, _, info = env.step(solution)
        assert terminated and info["success"]
        assert stalled <= direct, f"solving at the 3rd attempt returns {stalled}, at once {direct}"
    finally:
        env.close()


# ----------------------------------------------------------------------------- the leaderboard


@pytest.mark.parametrize("env_id", ["agentgym/MiniWoB-v0", "agentgym/MiniWoBHTML-v0"])
def test_an_error_never_scores_better_than_playing_with_raw_miniwob_rewards(env_id: str) -> None:
    """ATTACK: on a MiniWoB board with ``reward_mode="raw"`` (a task parameter a bundle may set),
    a failed episode pays MiniWoB++'s raw reward, down to -1, plus the format penalties of its
    other turns: as low as 9 x -0.1 - 1 = -1.9 in 10 turns. An errored episode is scored with
    ``worst_return``, which here is -1.0 (format penalties only: the MiniWoB entries declare no
    ``step_worst``). A submitter sets ``"error": "x"`` on its worst episodes (the field is
    self-reported; an errored episode need not even end) and its mean return, the ranking's
    tie-break after the success rate, rises above what it played.

    PROMISE BROKEN: leaderboards/README.md: "an errored episode counts as a failure with the env's
    worst return (`agentgym.registration.worst_return`: every turn a format penalty plus the env's
    own worst ...), so an error never scores better than playing"; agentgym/envs/miniwob.py:
    "``reward_mode="raw"``: MiniWoB++'s raw reward in [-1, 1]".

    FIX: give the MiniWoB entries a ``step_worst`` of ``-1.0`` when ``reward_mode == "raw"``
    (and 0 otherwise), and test every registered env's ``worst_return`` against the lowest
    reward its docstring allows.
    """
    kwargs = {"reward_mode": "raw"}
    lowest_played = 9 * -0.1 + -1.0  # nine invalid turns, then a valid action the page fails
    assert worst_return(env_id, kwargs) <= lowest_played + 1e-9, worst_return(env_id, kwargs)


@pytest.fixture
def frozen_lake_board(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A leaderboard holding the oracle's 8 FrozenLake-v0 episodes, and that bundle."""
    out = tmp_path / "oracle.json"
    bundle = quiet_eval("agentgym/FrozenLake-v0", "oracle", episodes=8, seed=0, out=out)
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--name", "the oracle", "--db", str(db)]) == 0
    return db, json.loads(json.dumps(bundle))


def _submit(bundle: dict[str, Any], db: Path, tmp_path: Path, name: str) -> int:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(bundle), encoding="utf-8")
    return main(["submit", str(path), "--name", name, "--db", str(db)])


def _board_sizes(db: Path) -> list[tuple[str, int]]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT env_kwargs, COUNT(*) FROM results GROUP BY env_kwargs")
        return sorted(rows.fetchall())


def test_a_copy_with_other_think_text_is_not_a_second_entry(
    tmp_path: Path, frozen_lake_board: tuple[Path, dict[str, Any]]
) -> None:
    """ATTACK: take a stored entry's bundle (the committed baselines are public; any entry's
    bundle is in the database), change only the ``<think>`` text of its actions
    (``<think>oracle</think>`` -> ``<think>mine</think>``; a space or ``Right||Down`` for
    ``Right || Down`` would do), and submit it under another name. Every step executes the same
    moves with the same rewards and flags: it is the same run, action for action. It is
    accepted as a second entry on the same board, ranked beside the original (here tied with the
    oracle at the top).

    PROMISE BROKEN: leaderboards/README.md, check 7: "not a duplicate: ... nor a run whose
    episodes on every seed it shares with a stored entry's run on that board are the stored
    ones, action for action"; the actions are the ``<answer>`` pieces (agentgym/parsing.py:
    "The answer holds one or more actions separated by ``||``"), and ``actions_digest`` is "what
    makes the episode (its rewards follow from them)", which the think text does not.

    FIX: digest what the replay executed, not the raw text: per step ``action_is_valid`` and
    ``info["executed_actions"]`` (the canonical names), in ``actions_digest`` and in
    ``bundle_digest``.
    """
    db, bundle = frozen_lake_board
    for episode in bundle["runs"][0]["episodes"]:
        for step in episode["steps"]:
            assert step["action"].startswith("<think>oracle</think>")
            step["action"] = step["action"].replace("<think>oracle</think>", "<think>mine</think>")
    code = _submit(bundle, db, tmp_path, "copycat")
    assert (code, _board_sizes(db)) == (1, [("{}", 1)]), "the copy was stored as a new entry"


def _padded_entries(tmp_path: Path, db: Path, count: int) -> None:
    """``count`` accepted entries, each a distinct random run on Bandit-v0 whose free-form
    ``agent.settings`` carries 2 MiB of ``{}`` padding (about 2 KiB once compressed in the
    database)."""
    for k in range(count):
        out = tmp_path / f"run{k}.json"
        bundle = quiet_eval("agentgym/Bandit-v0", "random", episodes=8, agent_seed=k, out=out)
        bundle = json.loads(json.dumps(bundle))
        bundle["agent"]["settings"] = {"pad": "@PAD@"}
        text = json.dumps(bundle).replace('"@PAD@"', "[" + ",".join(["{}"] * 700_000) + "]")
        out.write_text(text, encoding="utf-8")
        assert main(["submit", str(out), "--name", f"pad {k}", "--db", str(db)]) == 0


def _rebuild_peak(tmp_path: Path, entries: int) -> int:
    folder = tmp_path / f"from{entries}"
    folder.mkdir()
    baseline = tmp_path / f"baseline{entries}.json"
    quiet_eval("agentgym/Bandit-v0", "oracle", episodes=8, out=baseline)
    (folder / "oracle.json").write_bytes(baseline.read_bytes())
    db = tmp_path / f"padded{entries}.sqlite"
    work = tmp_path / f"entries{entries}"
    work.mkdir()
    _padded_entries(work, db, entries)
    tracemalloc.start()
    try:
        assert main(["rebuild", "--db", str(db), "--from", str(folder)]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def test_rebuild_memory_does_not_grow_with_the_stored_padding(tmp_path: Path) -> None:
    """ATTACK (denial of service, a JSON bomb kept in the database): a bundle's free-form
    ``agent.settings`` (also ``eval_config``, ``provenance``: "free form" in the schema) may hold
    up to the 64 MiB size limit of ``{},{},...``; it is accepted (the replay never looks at it)
    and stored zlib-compressed, about 1,000 times smaller. Reading one such bundle costs ~30 times
    its size (a 60 MiB one: 1.8 GB peak resident for ``submit``, measured), and ``rebuild``
    decodes every stored entry at once (``list(Store(db).submissions())``) and keeps them all
    (``verified``), so a handful of such entries, a few MB of database, make the rebuild that
    every schema upgrade requires run out of memory. Measured here at a small scale: three
    padded entries cost the rebuild about three times what one costs.

    PROMISE BROKEN: leaderboards/README.md: step 1 "size (checked before reading; 64 MiB by
    default ...)" and the replay budget's "4,096 MiB resident" are meant to bound what one
    submission costs the verifier; "A rebuild replays the baselines *and every entry already in
    the database*" must not cost the sum of every entry's decoded size.

    FIX: bound the free-form fields in the schema (a byte cap and ``maxProperties`` for
    ``agent.settings``, ``eval_config``, ``provenance``), and make ``rebuild`` stream: read,
    verify and write one stored entry at a time, keeping only digests and episode digests for
    the overlap check.
    """
    one = _rebuild_peak(tmp_path, 1)
    three = _rebuild_peak(tmp_path, 3)
    assert three < 1.5 * one, f"rebuild peak: {one / 2**20:.0f} MiB with one padded entry, " + (
        f"{three / 2**20:.0f} MiB with three"
    )


def test_a_default_spelled_as_its_value_opens_no_board(
    tmp_path: Path, frozen_lake_board: tuple[Path, dict[str, Any]]
) -> None:
    """ATTACK: resubmit a stored run (anyone's) with ``env_kwargs: {"max_steps": 15}``.
    FrozenLake-v0's ``max_steps`` defaults to ``None``, "``max_turns * max_actions_per_turn``",
    i.e. 15: the env built is the same, every episode replays identically. Because ``15 !=
    None`` the run keys a board of its own, ``FrozenLake-v0 (max_steps=15)``, where the copy is
    accepted and ranked first, alone (the same holds for ``max_steps=1`` on Countdown-v0 or
    Bandit-v0).

    PROMISE BROKEN: leaderboards/README.md: "Arguments equal to their defaults are dropped before
    they key a board (`max_turns=5` on Sokoban-v0 is the `{}` board)"; tests/
    test_leaderboard_attacks.py: "the same episodes as a stored entry are a duplicate, however
    the defaults are spelled".

    FIX: normalise a ``None`` default to the value it stands for before comparing
    (``max_steps`` equal to ``max_turns * max_actions_per_turn`` is dropped), or compare the
    built env's resolved task parameters rather than the spelling.
    """
    db, bundle = frozen_lake_board
    bundle["runs"][0]["env_kwargs"] = {"max_steps": 15}
    code = _submit(bundle, db, tmp_path, "respelled")
    assert (code, _board_sizes(db)) == (1, [("{}", 1)]), "a second board for the same task"


def test_an_unaltered_bandit_bundle_with_ragen_names_replays(tmp_path: Path) -> None:
    """ATTACK (on the verifier's honesty, not a cheat): ``agentgym eval --env Bandit-v0 --kw
    name_set=ragen`` (RAGEN's arm names, the setting ``agentgym.envs.bandit.RAGEN_KWARGS``
    documents for RAGEN's Bandit) writes ``name_set`` into ``env_settings``, as if it were an
    execution setting: the registry lists Bandit's task parameters without ``name_set`` and
    ``payout_draws``, which change every episode (other arm names; other payouts). The verifier
    replays with its own settings, the default names, so the unaltered bundle is refused as
    "replay mismatch ... the bundle was altered, or made with another agentgym (bundle 0.1.0,
    installed 0.1.0)"; and the local summary of that eval is filed under the ``{}`` board's
    arguments, though it played another task.

    PROMISE BROKEN: leaderboards/README.md: ``env_kwargs`` hold "only the env's *task parameters*
    (level and dataset files, sizes, turn budgets) ... and never an *execution setting*
    (CodeExec's `backend`, `sandbox_options`, timeouts; WebShop's browser paths and timeouts"; a
    bundle `agentgym eval --out` wrote replays; docs/evaluation.md: "execution settings (sandbox
    back ends, daemon addresses, timeouts) are yours locally but never part of a submission".

    FIX: declare ``name_set`` (a choice: agentgym, ragen) and ``payout_draws`` as Bandit task
    parameters in ``agentgym/envs/__init__.py`` (``payout_draws="per_episode"`` depends on
    process-wide reset counts: refuse it in bundles with a message rather than replay it), so
    they key their own boards.
    """
    out = tmp_path / "ragen.json"
    quiet_eval(
        "agentgym/Bandit-v0",
        "oracle",
        episodes=8,
        seed=0,
        out=out,
        env_kwargs={"name_set": "ragen"},
    )
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--name", "ragen names", "--db", str(db)]) == 0


@pytest.fixture
def bandit_bundle(tmp_path: Path) -> Path:
    out = tmp_path / "bandit.json"
    quiet_eval("agentgym/Bandit-v0", "oracle", episodes=8, seed=0, out=out)
    return out


@pytest.mark.parametrize("where", ["stored-entry", "from-folder"])
def test_rebuild_refuses_a_bundle_of_the_wrong_shape_without_a_traceback(
    tmp_path: Path, bandit_bundle: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """ATTACK: ``rebuild`` meets a bundle that is valid JSON but not a bundle's shape: a stored
    entry whose zlib blob holds ``[]`` (a database written by something else, or edited), or a
    ``*.json`` in the ``--from`` folder holding ``{}`` (no ``agent``). The first crashes in
    ``_episodes`` (``AttributeError: 'list' object has no attribute 'get'``), the second in
    ``_rebuild`` (``KeyError: 'agent'``, read before the bundle is verified): a Python traceback
    instead of one refusal line.

    PROMISE BROKEN: leaderboards/README.md: "A database whose rows are not what the leaderboard
    writes (a column of the wrong type, arguments that are not a JSON object, a stored bundle that
    cannot be read) is one `... is not a usable leaderboard database (...)` line, exit status 2";
    a malformed bundle is "one `refused: ...` line" (exit 2) and a baseline that does not verify
    makes the rebuild refuse with the reason.

    FIX: in ``Store.submissions`` refuse a stored bundle that is not a JSON object
    (``MalformedDatabase``); in ``_rebuild`` read the agent's name and the episode count only
    after ``_verify`` (or through ``.get`` on checked types), so a bad ``--from`` bundle is a
    ``refused:`` line.
    """
    db = tmp_path / "board.sqlite"
    folder = tmp_path / "baselines"
    folder.mkdir()
    if where == "stored-entry":
        assert main(["submit", str(bandit_bundle), "--name", "mine", "--db", str(db)]) == 0
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("UPDATE submissions SET bundle = ?", (zlib.compress(b"[]"),))
            conn.commit()
        (folder / "oracle.json").write_bytes(bandit_bundle.read_bytes())
    else:
        (folder / "bad.json").write_text(json.dumps({}), encoding="utf-8")
    capsys.readouterr()
    try:
        code = main(["rebuild", "--db", str(db), "--from", str(folder)])
    except Exception as err:  # noqa: BLE001 - the fault: a traceback instead of a refusal
        pytest.fail(f"rebuild raised {type(err).__name__}: {err}")
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err
