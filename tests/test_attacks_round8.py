"""Round 8 of attacks by a fresh tester: a hostile agent against CodeExec-v2's two-run split
(``grade_split``: a public run whose texts are shown, a hidden run of which one bit per hidden test
is kept) and a hostile submitter against ``python -m leaderboards``' new rules.

Each test is one finding and FAILS on the code it was written against because of the fault; its
docstring says what the attack is, which promise it breaks and the fix suggested. Most serious
first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs import code_exec
from agentgym.envs.code_exec_tasks import humaneval_problems
from leaderboards.__main__ import main
from sandboxes.code import docker_available
from tests.helpers import quiet_eval

# ----------------------------------------------------------------------------- CodeExec-v2

HE = {p.task_id: p for p in humaneval_problems()}
#: HumanEval/31 (is_prime): 3 public tests (6, 101, 11), 10 hidden ones.
BASE = HE["HumanEval/31"]
#: BASE with one hidden test's INPUT changed (5 * 17 -> 5 * 19; both composite, neither shown).
INPUT_TWIN = dataclasses.replace(
    BASE, test=BASE.test.replace("candidate(5 * 17) == False", "candidate(5 * 19) == False")
)
assert INPUT_TWIN.test != BASE.test


@pytest.fixture
def twins(monkeypatch: pytest.MonkeyPatch) -> None:
    real = code_exec.problem_from_options
    by_id = {"base": BASE, "input_twin": INPUT_TWIN}
    monkeypatch.setattr(
        code_exec,
        "problem_from_options",
        lambda options: by_id.get(options.get("task_id"), None) or real(options),
    )


def _play(env: Any, task_id: str, code: str, steps: int) -> list[Any]:
    obs, info = env.reset(options={"task_id": task_id})
    seen: list[Any] = []
    for _ in range(steps):
        seen.append(env.step(f"<think>t</think><answer>{code}</answer>"))
    return seen


#: The answer: in the hidden run, when its spec holds the call ``is_prime(85)`` (only the base's
#: hidden tests make it), it touches 200 MiB and frees it (well under the 512 MiB limit: the run
#: ends normally). In the public run, its first public call reads the container's memory
#: high-water mark (cgroup v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``), which the
#: bootstrap's clean-up between runs does not reset, and raises with one bit of it. Every call
#: raises, so it solves neither twin.
_PEAK_PROBE = """
import os
import re
SPEC = open("spec.json").read()
HIDDEN = "[[" + str(5 * 17) + "]," in SPEC
if HIDDEN:
    block = bytearray(200 * 2 ** 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    del block


def peak():
    for path in ("/sys/fs/cgroup/memory/memory.max_usage_in_bytes", "/sys/fs/cgroup/memory.peak"):
        try:
            with open(path) as f:
                return int(f.read())
        except (OSError, ValueError):
            pass
    return -1


def is_prime(n):
    raise ValueError("high-water-mark-over-150MiB=" + str(peak() > 150 * 2 ** 20))
"""


#: This machine's Docker daemon (used when ``$DOCKER_HOST`` is not set).
_LOCAL_DOCKER = "/run/agentgym-docker/docker.sock"


@pytest.fixture
def docker_env(twins: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    if "DOCKER_HOST" not in os.environ and os.path.exists(_LOCAL_DOCKER):
        monkeypatch.setenv("DOCKER_HOST", f"unix://{_LOCAL_DOCKER}")
    if not docker_available():
        if os.environ.get("CI"):
            pytest.fail("CI must provide Docker")
        pytest.skip("no Docker here")
    env = gymnasium.make(
        "agentgym/CodeExec-v3", backend="docker", timeout_s=20.0, feedback_chars=4000
    )
    try:
        yield env
    finally:
        env.close()


def test_the_hidden_run_cannot_signal_the_next_public_run_through_the_container(
    docker_env: Any,
) -> None:
    """ATTACK (docker back end, the default ``backend="auto"`` wherever Docker answers; run on
    CodeExec-v3, where the fix lives: v2 keeps this channel, documented as why v3 supersedes it): an
    episode's attempts all run in ONE container, which the bootstrap "empties" between runs
    (processes, /work, /tmp, /dev/shm, IPC). But the container's own cgroup counters survive:
    ``memory.max_usage_in_bytes`` (v2: ``memory.peak``) is a high-water mark that no run can
    lower, and ``cpuacct.usage`` / ``cpu.stat`` add up every run's CPU time; ``/sys/fs/cgroup`` is
    readable in the container. So the hidden run, which reads its spec (the hidden tests' calls),
    writes a bit of it as an allocation size, and the NEXT attempt's public run reads it back and
    puts it in a text the feedback quotes (a public call's exception message). Measured: the
    mark goes from ~10 MB to ~220 MB after one 200 MiB run and stays there; the attempt-2
    observations of two problems that differ only in one hidden test's input differ
    (``...=True`` vs ``...=False``). With more sizes (or CPU time) per attempt it carries
    several bits of the hidden inputs per attempt, the very channel ``grade_split`` was added to
    close.

    PROMISE BROKEN (agentgym/envs/code_exec.py, module docstring): the hidden run is one "of which
    the host keeps one bit per hidden test, passed or not ... So no feedback carries more than
    the public tests reveal"; ``grade_split``: "Nothing in its sandbox holds a hidden call, so no
    text of it can quote one" and "the answer's state does not carry from one to the other".

    FIX: never let a run whose texts are shown share a container (cgroup) with an earlier hidden
    run: give each hidden run a throwaway container that is discarded afterwards (or run the
    public run of each attempt in a fresh container), as the process back end does with its per-
    run control group. Unmounting ``/sys/fs/cgroup`` alone would not do: cgroup counters also
    show through ``/proc`` and timing.
    """
    seen: dict[str, str] = {}
    for task_id in ("base", "input_twin"):
        steps = _play(docker_env, task_id, _PEAK_PROBE, 2)
        for _, _, terminated, truncated, info in steps:
            assert info["action_is_valid"] and not (terminated or truncated), info
        seen[task_id] = steps[1][0]  # the second attempt's observation
    assert "high-water-mark-over-150MiB=" in seen["base"], seen["base"][-800:]
    assert seen["base"] == seen["input_twin"], (
        "the second observation tells the twins apart by a hidden test's input:\n"
        + seen["base"][-400:]
        + "\n---\n"
        + seen["input_twin"][-400:]
    )


#: The answer: in the hidden run, when its spec holds ``is_prime(85)`` (the base's hidden tests
#: only), it opens and closes 250,000 pipes. In the public run, it opens 2,100 pipes (more than
#: one CPU's batch of 1,024 inode numbers, so the last comes from the kernel's shared counter)
#: and raises with the last one's inode number. Every call raises: it solves neither twin.
_PIPE_PROBE = """
import os
SPEC = open("spec.json").read()
HIDDEN = "[[" + str(5 * 17) + "]," in SPEC


def inode():
    for _ in range(2100):
        r, w = os.pipe()
        number = os.fstat(r).st_ino
        os.close(r)
        os.close(w)
    return number


if HIDDEN:
    for _ in range(250000):
        r, w = os.pipe()
        os.close(r)
        os.close(w)
INODE = 0 if HIDDEN else inode()


def is_prime(n):
    raise ValueError("inode=" + str(INODE))
"""


def _inode(observation: str) -> int:
    found = re.search(r"inode=(\d+)", observation)
    assert found, observation[-800:]
    return int(found[1])


def test_the_hidden_run_cannot_signal_the_next_public_run_through_kernel_counters(
    twins: None,
) -> None:
    """ATTACK (process back end; the docker one alike; run on CodeExec-v3, where the fix lives:
    v2 keeps this channel, documented as why v3 supersedes it): the pipe file system numbers its
    inodes from ONE counter for the whole kernel, across every namespace, container and control
    group.
    The hidden run (which reads its spec: the hidden tests' calls) advances it by 250,000 or
    not, as a hidden input says; each public run reports the inode number of a pipe it opens in
    its exception message, which the feedback quotes. The agent sees attempt 1's number and
    attempt 2's: between them the counter moved by ~4,000 (everything else the machine did) or
    by ~250,000 (measured: 4,196-5,536 vs 252,578-253,158). Two problems that
    differ only in one hidden test's input give observations that tell them apart; with more
    counts (or a counter per bit: sockets, memfd and SysV shared memory number their inodes from
    kernel-wide counters too) it carries several bits of the hidden inputs per attempt.

    PROMISE BROKEN (agentgym/envs/code_exec.py, module docstring): "Nothing else of a hidden test
    reaches the observation ... a hidden run whose spec holds the hidden tests' calls, of which
    the host keeps one bit per hidden test"; ``grade_split``: "the answer's state does not carry
    from one to the other".

    FIX: refuse, in the sandbox's seccomp filter (:mod:`sandboxes.code.seccomp`), the calls that
    take a number from a kernel-wide counter and that a function of plain data never needs
    (``pipe``/``pipe2``, ``socket``/``socketpair``, ``memfd_create``, ``shmget``, ``eventfd``...),
    at least in the hidden run; and say in the docstring what stays (the hidden run's duration,
    which an agent with a clock reads).
    """
    env = gymnasium.make(
        "agentgym/CodeExec-v3", backend="process", timeout_s=30.0, feedback_chars=4000
    )
    moved: dict[str, int] = {}
    try:
        for task_id in ("base", "input_twin"):
            steps = _play(env, task_id, _PIPE_PROBE, 2)
            for _, _, terminated, truncated, info in steps:
                assert info["action_is_valid"] and not (terminated or truncated), info
            moved[task_id] = _inode(steps[1][0]) - _inode(steps[0][0])
    finally:
        env.close()
    # the bit an agent reads off its two observations: did the counter jump between them?
    jumped = {task_id: count > 100_000 for task_id, count in moved.items()}
    assert jumped["base"] == jumped["input_twin"], (
        f"the pipe inode counter moved by {moved} between the two attempts' public runs: a "
        "hidden test's input decides it"
    )


# ----------------------------------------------------------------------------- the leaderboard


def _answer_fenced(action: str) -> str:
    """The same answer with its code inside a ```python fence (which ``extract_code`` strips:
    the same code runs)."""
    start = action.index("<answer>") + len("<answer>")
    end = action.rindex("</answer>")
    return action[:start] + "```python\n" + action[start:end] + "\n```" + action[end:]


def _entries(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])


def test_a_code_exec_copy_in_a_fence_is_not_a_second_entry(tmp_path: Path) -> None:
    """ATTACK: take a stored CodeExec-v2 entry's bundle and wrap each answer's code in a
    ```python fence (``<answer>```python\\n<the same code>\\n```</answer>``), then submit it under
    another name. The env strips the fence (``extract_code``), so every step runs the very same
    code with the same rewards: it is the stored run. It is accepted as a second entry on the same
    board (``accepted ... as entry #2``), ranked beside the original.

    PROMISE BROKEN (leaderboards/README.md, check 7): "Episodes are compared by what the replay
    executed, not by the action text: ... on CodeExec, whose names are ``code (N chars)``, also
    the answer's action pieces), so a copy whose ``<think>`` text differs, or that spells the same
    moves otherwise ..., is the stored entry". ``executed_record`` keys CodeExec on
    ``info["actions"]``, the raw pieces BEFORE the fence is stripped, not on the code that ran.

    FIX: record what ran: on an opaque-name env, the parsed action (``_parse_action``'s result:
    the extracted code) rather than the piece, e.g. an ``info["executed_payloads"]`` the env fills
    from ``recognised`` (and, for CodeExec, normalise further: the code's AST dump, without
    comments and docstring layout).
    """
    out = tmp_path / "orig.json"
    bundle = quiet_eval("agentgym/CodeExec-v2", "oracle", episodes=1, seed=0, out=out)
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--name", "orig", "--db", str(db)]) == 0
    bundle = json.loads(out.read_text(encoding="utf-8"))
    for episode in bundle["runs"][0]["episodes"]:
        for step in episode["steps"]:
            step["action"] = _answer_fenced(step["action"])
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(bundle), encoding="utf-8")
    code = main(["submit", str(copy), "--name", "fenced copy", "--db", str(db)])
    assert (code, _entries(db)) == (1, 1), "the fenced copy was stored as a second entry"


def _boards(db: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT DISTINCT env_id, env_kwargs FROM results ORDER BY env_kwargs")
        return [(str(a), str(b)) for a, b in rows.fetchall()]


def test_a_countdown_copy_with_other_spacing_is_not_a_second_entry(tmp_path: Path) -> None:
    """ATTACK: take a stored Countdown-v0 entry's bundle and re-space each answer's expression
    (``52 - (86 + 27 - 64)`` -> ``52  -   ( 86  +  27  -  64 )``), then submit it under another
    name. The env parses both to the same expression (same numbers, same value, same reward and
    feedback): the same moves spelt otherwise. It is accepted as a second entry on the same board.

    PROMISE BROKEN (leaderboards/README.md, check 7): "Episodes are compared by what the replay
    executed, not by the action text: ... the canonical names of the actions that ran
    (``info["executed_actions"]``) ..., so a copy whose ``<think>`` text differs, or that spells
    the same moves otherwise (``Right||Down`` for ``Right || Down``), is the stored entry".
    Countdown's ``_action_name`` is ``ExpressionResult.expression``, the raw text of the piece,
    not a canonical name.

    FIX: make Countdown's executed name canonical: the parsed expression re-printed (e.g. the AST
    unparsed with one spelling of each operator and no redundant spaces), and check every env's
    ``_action_name`` the same way (Math's answer text likewise).
    """
    out = tmp_path / "orig.json"
    quiet_eval("agentgym/Countdown-v0", "oracle", episodes=2, seed=0, out=out)
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--name", "orig", "--db", str(db)]) == 0
    bundle = json.loads(out.read_text(encoding="utf-8"))
    for episode in bundle["runs"][0]["episodes"]:
        for step in episode["steps"]:
            action = step["action"]
            start = action.index("<answer>") + len("<answer>")
            end = action.rindex("</answer>")
            spaced = re.sub(r"([-+*/()])", r" \1 ", action[start:end])
            assert spaced != action[start:end]
            step["action"] = action[:start] + spaced + action[end:]
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(bundle), encoding="utf-8")
    code = main(["submit", str(copy), "--name", "spaced copy", "--db", str(db)])
    assert (code, _entries(db)) == (1, 1), "the re-spaced copy was stored as a second entry"


def test_a_task_config_spelling_out_reasoning_gyms_defaults_opens_no_second_board(
    tmp_path: Path,
) -> None:
    """ATTACK: take a stored MathArithmetic-v0 entry (``task_config`` left at its ``None``:
    reasoning-gym's defaults) and set ``task_config`` to values that ARE reasoning-gym's defaults
    (``{"min_terms": 2, "max_digits": 4}``: ``BasicArithmeticDatasetConfig()``'s own). The env
    draws the same problems, the replay plays the same episodes, and the copy is accepted on a NEW
    board (``task_config={"max_digits": 4, "min_terms": 2}``): one run on two boards, and any
    entry's copy gets in (first on a board of its own).

    PROMISE BROKEN (leaderboards/README.md): "Arguments equal to their defaults are dropped before
    they key a board ..., and so is a value equal to what a ``None`` default stands for
    (``TaskParam.none_means``) ...; ``task_config={}`` on the Math ids is their ``None``." The
    ``None`` stands for reasoning-gym's default configuration, but ``none_means`` is ``{}``, so only
    the empty spelling of it is recognised.

    FIX: normalise ``task_config`` key by key: drop each entry equal to the task's reasoning-gym
    default (its config dataclass's field default; bounded by ``MATH_TASK_CONFIG_BOUNDS``
    anyway), so that every spelling of the defaults is ``{}``.
    """
    out = tmp_path / "orig.json"
    quiet_eval("agentgym/MathArithmetic-v0", "oracle", episodes=2, seed=0, out=out)
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--name", "orig", "--db", str(db)]) == 0
    bundle = json.loads(out.read_text(encoding="utf-8"))
    assert bundle["runs"][0]["env_kwargs"].get("task_config") in (None, {})
    bundle["runs"][0]["env_kwargs"]["task_config"] = {"min_terms": 2, "max_digits": 4}
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(bundle), encoding="utf-8")
    code = main(["submit", str(copy), "--name", "defaults spelt out", "--db", str(db)])
    assert (code, _entries(db), len(_boards(db))) == (1, 1, 1), _boards(db)


def test_an_integral_float_spelt_as_an_int_opens_no_second_board(tmp_path: Path) -> None:
    """ATTACK: take a stored entry on a board with a float task parameter at an integral value
    (FrozenLake-v0 ``p=1.0``; likewise Bandit's ``low_arm_reward``/``high_arm_prob``, Countdown's
    ``format_score=0.0`` vs ``-0.0``), change nothing but its spelling in ``env_kwargs`` (``1``
    for ``1.0``), and submit. The env builds the same task (``p=1 == 1.0``), the replay plays the
    same episodes, and the run is accepted as a second entry on a NEW board,
    ``FrozenLake-v0 (p=1)`` beside ``(p=1.0)``: one run split into two boards, and a copy of any
    such entry gets in (and ranks first on a board of its own).

    PROMISE BROKEN (leaderboards/README.md): "Arguments equal to their defaults are dropped before
    they key a board ..., and so is a value equal to what a ``None`` default stands for" (one
    board per task, whatever the spelling), and check 7, "not a duplicate: neither the same bundle
    (envs, normalised arguments, ...)". ``normalise_task_kwargs`` compares with ``==`` but keeps
    the value as spelt, and ``board_key`` keys on its JSON text (``1`` vs ``1.0``).

    FIX: canonicalise each kept value by its TaskParam kind in ``normalise_task_kwargs``: ``float``
    params as ``float(value)`` (with ``-0.0`` as ``0.0``), ``int`` as ``int``; or refuse an int for
    a float parameter in a bundle.
    """
    out = tmp_path / "orig.json"
    quiet_eval(
        "agentgym/FrozenLake-v0", "oracle", episodes=2, seed=0, out=out, env_kwargs={"p": 1.0}
    )
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--name", "orig", "--db", str(db)]) == 0
    bundle = json.loads(out.read_text(encoding="utf-8"))
    assert bundle["runs"][0]["env_kwargs"]["p"] == 1.0
    bundle["runs"][0]["env_kwargs"]["p"] = 1
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(bundle), encoding="utf-8")
    code = main(["submit", str(copy), "--name", "int spelling", "--db", str(db)])
    assert (code, _entries(db), len(_boards(db))) == (1, 1, 1), _boards(db)
