"""The eval harness (agentgym/eval.py, agentgym/agents.py) and ``agentgym eval``, run for real."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import jsonschema
import psutil
import pytest

import agentgym
from agentgym import agent_launcher
from agentgym.agents import AgentError, AgentRequest, load_entry_point, make_agent, request_json
from agentgym.eval import (
    EvalError,
    evaluate,
    replay_episode,
    summarize,
    wilson_interval,
    write_chat_jsonl,
)
from agentgym.registration import worst_return
from tests.helpers import ROOT, assert_records_this_code, quiet_eval, run_python

# the recorded process (pid, start time) still runs; the pids of those still alive after a wait
from tests.test_sandbox_limits import _alive, _wait_gone

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "leaderboards" / "schema" / "bundle-v1.json").read_text()
)


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "agentgym.cli", *args, timeout=300, cwd=cwd)


def assert_valid_bundle(bundle: dict[str, Any]) -> None:
    jsonschema.validate(bundle, SCHEMA)


# ----------------------------------------------------------------------------- statistics


def test_wilson_interval_known_values() -> None:
    # 8/10 by hand: z^2/n = 0.38415, centre (0.8 + 0.19207) / 1.38415 = 0.71674, half-width
    # 1.95996 * sqrt(0.016 + 0.00960) / 1.38415 = 0.22658: [0.4902, 0.9433].
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    # 0/10: lower bound 0, upper z^2 / (n + z^2) = 3.8415 / 13.8415 = 0.2775 (by hand).
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    # 10/10 mirrors 0/10.
    low, high = wilson_interval(10, 10)
    assert round(low, 4) == 0.7225 and high == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes must be in"):
        wilson_interval(3, 2)


def _episode(rewards: list[float], valid: list[bool], success: bool, error: str | None = None):
    steps = [
        {
            "action": "a",
            "reward": r,
            "terminated": False,
            "truncated": False,
            "success": False,
            "valid": v,
        }
        for r, v in zip(rewards, valid, strict=True)
    ]
    if steps:
        steps[-1]["success"] = success
    return {"steps": steps, "return": sum(rewards), "success": success, "error": error}


def test_summarize_counts_errors_as_failures() -> None:
    episodes = [
        _episode([1.0], [True], True),
        _episode([-0.1, 0.5], [False, True], False),
        _episode([0.25, 0.75, 1.0], [True, True, True], True, error="agent failed"),
        _episode([], [], False, error="env reset failed"),
    ]
    s = summarize(episodes)
    # By hand: 1 success of 4 (the errored success is a failure); returns 1.0, 0.4, 2.0, 0.0;
    # turns 1 + 2 + 3 + 0 = 6; valid 1 + 1 + 3 = 5 of 6.
    assert s["episodes"] == 4 and s["errors"] == 2 and s["successes"] == 1
    assert s["success_rate"] == 0.25
    assert s["mean_return"] == pytest.approx(3.4 / 4)
    assert s["mean_turns"] == 1.5
    assert s["valid_action_rate"] == pytest.approx(5 / 6)
    assert s["success_ci95"] == list(wilson_interval(1, 4))
    # As the leaderboard scores them: the two errored episodes count with the worst return
    # (-2.5 here), never with what they had collected (2.0 and 0.0): (1.0 + 0.4 - 5.0) / 4.
    assert summarize(episodes, -2.5)["mean_return"] == pytest.approx(-3.6 / 4)


# ----------------------------------------------------------------------------- agents


def test_random_agent_picks_among_valid_actions_reproducibly(tmp_path: Path) -> None:
    bundle = quiet_eval(
        "agentgym/FrozenLake-v0", "random", episodes=5, seed=3, out=tmp_path / "a.json"
    )
    again = quiet_eval(
        "agentgym/FrozenLake-v0", "random", episodes=5, seed=3, out=tmp_path / "b.json"
    )
    assert_valid_bundle(bundle)
    text = (tmp_path / "a.json").read_text(encoding="utf-8")
    # 7 top-level fields (provenance among them), 9 run fields, 5 episode lines and 8 lines of
    # brackets: 29
    assert json.loads(text) == bundle and len(text.splitlines()) == 29
    run = bundle["runs"][0]
    assert run["seeds"] == [3, 4, 5, 6, 7]
    assert [e["seed"] for e in run["episodes"]] == run["seeds"]
    moves = {"Up", "Down", "Left", "Right"}
    for episode in run["episodes"]:
        for step in episode["steps"]:
            assert step["action"].startswith("<think>random</think><answer>")
            move = step["action"].removeprefix("<think>random</think><answer>")
            assert move.removesuffix("</answer>") in moves
            assert step["valid"]
    assert [e["steps"] for e in run["episodes"]] == [
        e["steps"] for e in again["runs"][0]["episodes"]
    ]


def test_random_agent_without_a_finite_action_set_writes_short_random_text() -> None:
    agent = make_agent("random", seed=1)
    env = gym.make("agentgym/Countdown-v0")
    obs, info = env.reset(seed=0)
    assert info["valid_actions"] is None
    req = AgentRequest("agentgym/Countdown-v0", 0, 0, 1, obs, info, None, [], "", "raw", env)
    (action,) = agent.act([req])
    assert isinstance(action, str) and 1 <= len(action) <= 8
    env.close()


def test_oracle_agent_solves_sokoban_and_records_every_step(tmp_path: Path) -> None:
    bundle = quiet_eval(
        "agentgym/Sokoban-v0", "oracle", episodes=4, seed=0, out=tmp_path / "o.json"
    )
    run = bundle["runs"][0]
    assert run["summary"]["success_rate"] == 1.0
    env = gym.make("agentgym/Sokoban-v0")
    for episode in run["episodes"]:
        # An independent replay gives the same rewards, and the episode ends on its last step.
        _, steps = replay_episode(env, episode["seed"], [s["action"] for s in episode["steps"]])
        assert steps == episode["steps"]
        assert steps[-1]["terminated"] and steps[-1]["success"]
        assert episode["return"] == pytest.approx(sum(s["reward"] for s in steps))
    env.close()


def test_unknown_agent_spec_lists_the_forms() -> None:
    with pytest.raises(ValueError, match="give random, oracle, hf:PATH"):
        make_agent("bogus")
    with pytest.raises(ValueError, match="takes no --agent-kw"):
        make_agent("random", kwargs={"x": 1})


# Python agents used by the tests below through the `module:callable` spec.
CALLS: list[int] = []
FAIL_SEEDS: set[int] = set()
INTERRUPT_AFTER: list[int] = []


def scripted_agent(request: AgentRequest) -> str:
    """Pulls arm 2 of the bandit; fails on FAIL_SEEDS; may simulate Ctrl-C."""
    CALLS.append(request.seed)
    if INTERRUPT_AFTER and len(CALLS) > INTERRUPT_AFTER[0]:
        raise KeyboardInterrupt
    if request.seed in FAIL_SEEDS:
        raise ValueError(f"no answer for seed {request.seed}")
    return "<answer>2</answer>"


@pytest.fixture()
def scripted() -> Any:
    CALLS.clear()
    FAIL_SEEDS.clear()
    INTERRUPT_AFTER.clear()
    yield
    CALLS.clear()
    FAIL_SEEDS.clear()
    INTERRUPT_AFTER.clear()


def test_per_episode_errors_are_recorded_not_fatal(tmp_path: Path, scripted: Any) -> None:
    FAIL_SEEDS.add(2)
    bundle = quiet_eval(
        "agentgym/Bandit-v0",
        "tests.test_eval:scripted_agent",
        episodes=4,
        seed=0,
        out=tmp_path / "e.json",
    )
    assert_valid_bundle(bundle)
    episodes = bundle["runs"][0]["episodes"]
    # The first line names the error; the traceback of the agent's function follows.
    assert [(e["error"] or "").split("\n")[0] for e in episodes] == [
        "",
        "",
        "agent failed: ValueError: no answer for seed 2",
        "",
    ]
    assert "in scripted_agent" in episodes[2]["error"]
    assert episodes[2]["steps"] == [] and episodes[2]["success"] is False
    assert bundle["runs"][0]["summary"]["errors"] == 1
    # The errored episode counts with Bandit-v0's worst return, as on the leaderboard:
    # 1 turn x the -0.1 format penalty (no arm pays less than 0 by default): -0.1.
    worst = worst_return("agentgym/Bandit-v0")
    assert worst == pytest.approx(-0.1)
    others = sum(e["return"] for e in episodes if not e["error"])
    assert bundle["runs"][0]["summary"]["mean_return"] == pytest.approx((others + worst) / 4)
    assert worst <= min(e["return"] for e in episodes if not e["error"])
    assert bundle["agent"]["description"] == (
        "Pulls arm 2 of the bandit; fails on FAIL_SEEDS; may simulate Ctrl-C."
    )


def test_interrupted_run_resumes_where_it_stopped(tmp_path: Path, scripted: Any) -> None:
    out = tmp_path / "r.json"
    spec = "tests.test_eval:scripted_agent"
    INTERRUPT_AFTER.append(3)  # episodes 0-2 (one turn each) finish, then "Ctrl-C"
    with pytest.raises(KeyboardInterrupt):
        quiet_eval("agentgym/Bandit-v0", spec, episodes=6, seed=10, out=out)
    partial = tmp_path / "r.json.partial.jsonl"
    assert not out.exists() and len(partial.read_text().splitlines()) == 1 + 3
    INTERRUPT_AFTER.clear()
    CALLS.clear()
    bundle = quiet_eval("agentgym/Bandit-v0", spec, episodes=6, seed=10, out=out)
    assert CALLS == [13, 14, 15]  # only the missing episodes were played
    assert not partial.exists()
    fresh = quiet_eval("agentgym/Bandit-v0", spec, episodes=6, seed=10, out=tmp_path / "f.json")

    def strip(b: dict[str, Any]) -> list[Any]:
        return [{k: v for k, v in e.items() if k != "wall_s"} for e in b["runs"][0]["episodes"]]

    assert strip(bundle) == strip(fresh)
    # The same command once more: already complete, nothing runs.
    CALLS.clear()
    assert quiet_eval("agentgym/Bandit-v0", spec, episodes=6, seed=10, out=out)
    assert CALLS == []
    # Another command with the same --out is refused, unless --overwrite.
    with pytest.raises(EvalError, match="--overwrite"):
        quiet_eval("agentgym/Bandit-v0", spec, episodes=7, seed=10, out=out)
    quiet_eval("agentgym/Bandit-v0", spec, episodes=2, seed=10, out=out, overwrite=True)


#: What surrogate_agent writes: a lone surrogate (no UTF-8 file holds one) in its reasoning.
SURROGATE_ACTION = "<think>\ud800</think><answer>2</answer>"


def surrogate_agent(request: AgentRequest) -> str:
    """Pulls arm 2, thinking a lone surrogate; may simulate Ctrl-C."""
    CALLS.append(request.seed)
    if INTERRUPT_AFTER and len(CALLS) > INTERRUPT_AFTER[0]:
        raise KeyboardInterrupt
    return SURROGATE_ACTION


def test_an_action_with_a_lone_surrogate_is_replaced_and_the_bundle_verifies(
    tmp_path: Path,
) -> None:
    """The bundle write raised UnicodeEncodeError after every episode ran (nothing was saved).
    The harness now steps the env with U+FFFD in the surrogate's place and records that text, so
    the leaderboard reads the file and its replay of the recorded actions matches."""
    from leaderboards.verify import load_bundle, verify_bundle

    out = tmp_path / "s.json"
    result = run_cli(
        "eval",
        "--env",
        "Bandit-v0",
        "--agent",
        "tests.test_eval:surrogate_agent",
        "--episodes",
        "2",
        "--out",
        str(out),
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(out)
    steps = [s for e in bundle["runs"][0]["episodes"] for s in e["steps"]]
    # Bandit-v0: one pull per episode; "2" is a valid arm, so the action counts as valid
    assert [(s["action"], s["valid"]) for s in steps] == [
        ("<think>\ufffd</think><answer>2</answer>", True)
    ] * 2
    assert verify_bundle(bundle).episodes_replayed == 2


def test_a_partial_log_holding_a_lone_surrogate_is_played_again(
    tmp_path: Path, scripted: Any
) -> None:
    """A partial log that an older version wrote with the raw surrogate (its env was stepped with
    it, so it cannot be fixed after the fact): resuming plays that episode again instead of
    failing at the bundle write again."""
    out, spec = tmp_path / "p.json", "tests.test_eval:surrogate_agent"
    INTERRUPT_AFTER.append(1)  # episode 0 finishes, then "Ctrl-C"
    with pytest.raises(KeyboardInterrupt):
        quiet_eval("agentgym/Bandit-v0", spec, episodes=2, out=out)
    partial = tmp_path / "p.json.partial.jsonl"
    text = partial.read_text()
    assert text.count("\\ufffd") == 1  # json.dumps escapes U+FFFD
    partial.write_text(text.replace("\\ufffd", "\\ud800"))  # as the older version logged it
    INTERRUPT_AFTER.clear()
    CALLS.clear()
    bundle = quiet_eval("agentgym/Bandit-v0", spec, episodes=2, out=out)
    assert CALLS == [0, 1]  # both episodes played
    assert [s["action"] for e in bundle["runs"][0]["episodes"] for s in e["steps"]] == [
        "<think>\ufffd</think><answer>2</answer>"
    ] * 2
    assert json.loads(out.read_text(encoding="utf-8")) == bundle


AWK_AGENT = r"""
{
  turn = 0
  if (match($0, /"turn": [0-9]+/)) turn = substr($0, RSTART + 8, RLENGTH - 8) + 0
  if (match($0, /"valid_actions": \[[^]]*\]/)) {
    n = split(substr($0, RSTART + 18, RLENGTH - 19), items, /, /)
    a = items[(turn - 1) % n + 1]
    gsub(/"/, "", a)
  } else a = "?"
  print "<think>awk</think><answer>" a "</answer>"
  fflush()
}
"""


def test_cmd_agent_in_awk_plays_through_json_lines(tmp_path: Path) -> None:
    script = tmp_path / "agent.awk"
    script.write_text(AWK_AGENT)
    # A shell loop runs awk once per line: some awks (mawk) buffer their input otherwise.
    loop = tmp_path / "agent.sh"
    loop.write_text(f'while IFS= read -r line; do printf "%s\\n" "$line" | awk -f {script}; done\n')
    out = tmp_path / "awk.json"
    result = run_cli(
        "eval",
        "--env",
        "FrozenLake-v0",
        "--agent",
        f"cmd:sh {loop}",
        "--episodes",
        "3",
        "--seed",
        "5",
        "--out",
        str(out),
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    bundle = json.loads(out.read_text())
    assert_valid_bundle(bundle)
    # The awk agent plays valid_actions[(turn - 1) % n]: FrozenLake's list is fixed, so the
    # expected actions follow from the turn number alone.
    env = gym.make("agentgym/FrozenLake-v0")
    _, info = env.reset(seed=5)
    moves = info["valid_actions"]
    for episode in bundle["runs"][0]["episodes"]:
        assert episode["error"] is None
        expected = [
            f"<think>awk</think><answer>{moves[t % len(moves)]}</answer>"
            for t in range(len(episode["steps"]))
        ]
        assert [s["action"] for s in episode["steps"]] == expected
    env.close()


def test_cmd_agent_that_dies_gives_per_episode_errors(tmp_path: Path) -> None:
    bundle = quiet_eval(
        "agentgym/Bandit-v0", "cmd:sh -c 'exit 3'", episodes=2, out=tmp_path / "d.json"
    )
    for episode in bundle["runs"][0]["episodes"]:
        # The program exits at once: it either closed its stdout or stopped reading first.
        assert episode["steps"] == []
        assert episode["error"] in (
            "\"sh -c 'exit 3'\" closed its stdout (exit status 3)",
            "\"sh -c 'exit 3'\" stopped reading its stdin: [Errno 32] Broken pipe",
        ), episode["error"]


def test_cmd_agent_that_closes_stdout_and_goes_on_gives_an_error_naming_it(tmp_path: Path) -> None:
    """A program that closes its stdout but keeps running: eval awaits its exit status for the
    rest of the turn (not a fixed 2 s, which a busy machine could outlast), then names what it
    did; the program is ended with the episode."""
    bundle = quiet_eval(
        "agentgym/Bandit-v0",
        "cmd:sh -c 'exec >&-; sleep 600'",
        agent_kwargs={"timeout": 10},
        episodes=1,
        out=tmp_path / "d.json",
    )
    (episode,) = bundle["runs"][0]["episodes"]
    assert episode["steps"] == []
    assert episode["error"] == (
        "\"sh -c 'exec >&-; sleep 600'\" closed its stdout and was still running 10 s into the turn"
    ), episode["error"]


def test_cmd_agent_json_string_lines_may_hold_newlines(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text(
        "while IFS= read -r line; do printf '\"<think>a\\\\nb</think><answer>1</answer>\"\\n'; "
        "done\n"
    )
    bundle = quiet_eval(
        "agentgym/Bandit-v0", f"cmd:sh {script}", episodes=1, out=tmp_path / "s.json"
    )
    step = bundle["runs"][0]["episodes"][0]["steps"][0]
    assert step["action"] == "<think>a\nb</think><answer>1</answer>" and step["valid"]


#: A cmd: agent that starts a grandchild (a sleeping Python) that records its pid and start time
#: in the file named by the agent's first argument (the host's pid, read from /proc/self: the
#: agent may run in a PID namespace, where its own pids are not /proc's), waits for that record,
#: then answers arm 1 to every request.
SPAWNING_AGENT = """
import os, subprocess, sys, time
code = (
    "import os, sys, time, psutil\\n"
    "pid = int(os.readlink('/proc/self'))\\n"
    "started = psutil.Process(pid).create_time()\\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f: f.write(f'{pid} {started}')\\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\\n"
    "time.sleep(600)\\n"
)
subprocess.Popen([sys.executable, "-c", code, sys.argv[1]])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
for line in sys.stdin:
    print("<answer>1</answer>", flush=True)
"""


def test_a_cmd_agents_children_end_with_the_eval(tmp_path: Path) -> None:
    """The agent's own process group is killed when eval closes it: the grandchild it left
    running (which outlived the eval before, sleeping on for ten minutes) goes too."""
    script, record = tmp_path / "agent.py", tmp_path / "grandchild"
    script.write_text(SPAWNING_AGENT)
    pid = started = None
    try:
        options = {"episodes": 2, "out": tmp_path / "c.json", "progress": False}
        bundle = evaluate(
            ["agentgym/Bandit-v0"], f"cmd:{sys.executable} {script} {record}", **options
        )
        assert [e["error"] for e in bundle["runs"][0]["episodes"]] == [None, None]
        pid_text, started_text = record.read_text().split()
        pid, started = int(pid_text), float(started_text)
        deadline = time.monotonic() + 60  # SIGKILL is sent by close(); the kernel ends it soon
        while _alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid, started)
    finally:
        if pid is not None and started is not None and _alive(pid, started):
            psutil.Process(pid).kill()


#: A process of LEAKY_AGENT: records ``<pid> <create time>`` in the file named by its first
#: argument (written whole: a rename), with SIGTERM and SIGHUP ignored if its second is "deaf",
#: then sleeps ten minutes. The pid is the host's, read from /proc/self: in the launcher's PID
#: namespace os.getpid() is the namespace's pid, and /proc (not remounted) shows the host's.
LEAKY_CHILD = """
import os, signal, sys, time, psutil
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
pid = int(os.readlink("/proc/self"))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{pid} {psutil.Process(pid).create_time()}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""

#: A cmd: agent (``agent.py FOLDER``) that, before it answers, starts a LEAKY_CHILD each way a
#: program can detach one: a plain fork, a session of its own (setsid), a double fork (the middle
#: process exits: the grandchild is orphaned) in a session of its own, and nohup with SIGTERM and
#: SIGHUP ignored; it waits until all four have recorded themselves (FOLDER/fork, setsid, double,
#: nohup), records its own pid and start time (FOLDER/agent), then answers arm 1 to every request.
LEAKY_AGENT = """
import os, subprocess, sys, time, psutil
folder = sys.argv[1]
def child(name, deaf="plain"):
    return [sys.executable, os.path.join(folder, "child.py"), os.path.join(folder, name), deaf]
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.Popen(child("fork"), **quiet)
subprocess.Popen(child("setsid"), start_new_session=True, **quiet)
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, child("double"))
    os._exit(0)
os.waitpid(middle, 0)
subprocess.Popen(["nohup", *child("nohup", "deaf")], **quiet)
while not all(os.path.exists(os.path.join(folder, n)) for n in ("fork", "setsid", "double", "nohup")):
    time.sleep(0.01)
pid = int(os.readlink("/proc/self"))  # the host's pid (see LEAKY_CHILD)
with open(os.path.join(folder, "agent"), "w") as f:
    f.write(f"{pid} {psutil.Process(pid).create_time()}")
for line in sys.stdin:
    print("<answer>1</answer>", flush=True)
"""

LEAKED = ("fork", "setsid", "double", "nohup")


def _leaky_agent(folder: Path) -> str:
    """The ``cmd:`` spec of LEAKY_AGENT, its files written to ``folder``."""
    (folder / "child.py").write_text(LEAKY_CHILD)
    (folder / "agent.py").write_text(LEAKY_AGENT)
    return f"cmd:{sys.executable} {folder / 'agent.py'} {folder}"


def _recorded(folder: Path, names: Sequence[str]) -> list[tuple[int, float]]:
    """``(pid, create time)`` of each process that recorded itself in ``folder`` under ``names``."""
    out = []
    for name in names:
        if (folder / name).exists():
            pid, started = (folder / name).read_text().split()
            out.append((int(pid), float(started)))
    return out


def _kill_recorded(procs: list[tuple[int, float]]) -> None:
    """Kill those of ``procs`` (only those: the processes this test made) still running."""
    for pid, started in procs:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.create_time() == started:
                proc.kill()


def test_nothing_a_cmd_agent_starts_outlives_the_eval(tmp_path: Path) -> None:
    """Issue 45: children started with a fork, setsid, a double fork and nohup (SIGTERM and
    SIGHUP ignored) all end with the eval. Before the launcher, only the agent's process group
    was killed: the setsid and double-forked children slept on for ten minutes."""
    procs: list[tuple[int, float]] = []
    try:
        options = {"episodes": 2, "out": tmp_path / "leak.json", "progress": False}
        bundle = evaluate(["agentgym/Bandit-v0"], _leaky_agent(tmp_path), **options)
        assert [e["error"] for e in bundle["runs"][0]["episodes"]] == [None, None]
        procs = _recorded(tmp_path, LEAKED)
        assert len(procs) == 4
        assert _wait_gone(procs) == []  # SIGKILL is sent before eval returns; the kernel ends them
    finally:
        _kill_recorded(procs or _recorded(tmp_path, LEAKED))


def pid_namespaces_work() -> bool:
    """Whether the kernel lets the launcher make a PID namespace here (tried, as the launcher
    tries, in a process of its own that then exits)."""
    folder = Path(agent_launcher.__file__).parent
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import agent_launcher; "
        "sys.exit(0 if agent_launcher._new_pid_namespace() else 1)"
    )
    return subprocess.run([sys.executable, "-I", "-S", "-c", code, str(folder)]).returncode == 0


#: The two ways the launcher runs a program: in a PID namespace (where the kernel allows one;
#: the test is skipped elsewhere) and its fallback, forced with NO_PID_NAMESPACE_ENV (for tests).
LAUNCHER_MODES = pytest.mark.parametrize("namespace", [True, False], ids=["pidns", "fallback"])


def _launcher_mode(namespace: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not namespace:
        monkeypatch.setenv(agent_launcher.NO_PID_NAMESPACE_ENV, "1")
    elif not pid_namespaces_work():
        pytest.skip("the kernel refuses a PID namespace here: the launcher takes its fallback")


def _program_and_init(
    launcher: psutil.Process, program: int, namespace: bool
) -> list[tuple[int, float]]:
    """Check where the program runs: its parent is the launcher (the fallback) or the launcher's
    child, the init of the PID namespace, whose ``(pid, create time)`` is returned."""
    parent = psutil.Process(psutil.Process(program).ppid())
    if not namespace:
        assert parent.pid == launcher.pid  # the program's parent: the launcher itself
        return []
    assert parent.ppid() == launcher.pid  # the init: PID 1 of the namespace, the program's parent
    return [(parent.pid, parent.create_time())]


@LAUNCHER_MODES
def test_a_closed_cmd_agent_leaves_neither_launcher_nor_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespace: bool
) -> None:
    """close() ends the program, everything it started and the launcher between them (and the
    init of its PID namespace); a restart (after an error) goes through the same stop. The
    fallback (no PID namespace, the launcher a child subreaper) behaves as before."""
    _launcher_mode(namespace, monkeypatch)
    req, env = _request()
    agent = make_agent(_leaky_agent(tmp_path))
    procs: list[tuple[int, float]] = []
    try:
        assert agent.act([req]) == ["<answer>1</answer>"]
        launcher = psutil.Process(agent._proc.pid)
        procs = [(launcher.pid, launcher.create_time()), *_recorded(tmp_path, ("agent", *LEAKED))]
        assert len(procs) == 6
        procs += _program_and_init(launcher, procs[1][0], namespace)
        agent.close()
        assert _wait_gone(procs) == []
    finally:
        agent.close()
        env.close()
        _kill_recorded(procs or _recorded(tmp_path, ("agent", *LEAKED)))


#: A process that plays LEAKY_AGENT once through a CommandAgent, writes "ready" to its second
#: argument, then sleeps (it is SIGKILLed: nothing of it can close the agent).
OWNER = """
import sys, time
import gymnasium as gym
import agentgym
from agentgym.agents import AgentRequest, make_agent
env = gym.make("agentgym/Bandit-v0")
obs, info = env.reset(seed=0)
req = AgentRequest("agentgym/Bandit-v0", 0, 0, 1, obs, info, None, [], "", "raw", env)
agent = make_agent(sys.argv[1])
assert agent.act([req]) == ["<answer>1</answer>"]
with open(sys.argv[2], "w") as f:
    f.write(str(agent._proc.pid))
time.sleep(600)
"""


@contextlib.contextmanager
def owned_agent(
    tmp_path: Path, spec: str, names: tuple[str, ...]
) -> Iterator[tuple[subprocess.Popen[bytes], psutil.Process, list[tuple[int, float]]]]:
    """An owner process (:data:`OWNER`, standing for eval) that starts the ``cmd:`` agent
    ``spec`` and sleeps: yields the owner, its agent's launcher and ``procs``, the launcher and
    the processes the agent recorded under ``names`` (pid, start time; a test may add to it).
    Afterwards the owner and every process in ``procs`` (or recorded, when the start failed) is
    killed, whatever the test asserted."""
    ready = tmp_path / "ready"
    owner = subprocess.Popen([sys.executable, "-c", OWNER, spec, str(ready)], cwd=ROOT)
    procs: list[tuple[int, float]] = []
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and owner.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the owner did not start its agent (exit status {owner.poll()})"
        launcher = psutil.Process(int(ready.read_text()))
        procs += [(launcher.pid, launcher.create_time()), *_recorded(tmp_path, names)]
        yield owner, launcher, procs
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        _kill_recorded(procs or _recorded(tmp_path, names))


@LAUNCHER_MODES
def test_a_cmd_agents_tree_ends_when_eval_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespace: bool
) -> None:
    """Eval SIGKILLed (no close(), no atexit): the launcher sees its owner gone and ends the
    program, what it started and itself (and the init of its PID namespace); the fallback too."""
    _launcher_mode(namespace, monkeypatch)  # the owner inherits the environment
    names = ("agent", *LEAKED)
    with owned_agent(tmp_path, _leaky_agent(tmp_path), names) as (owner, launcher, procs):
        assert len(procs) == 6
        procs += _program_and_init(launcher, procs[1][0], namespace)
        owner.kill()
        owner.wait()
        assert _wait_gone(procs) == []


def _request() -> tuple[AgentRequest, gym.Env]:
    env = gym.make("agentgym/Bandit-v0")
    obs, info = env.reset(seed=0)
    return AgentRequest("agentgym/Bandit-v0", 0, 0, 1, obs, info, None, [], "", "raw", env), env


def test_a_long_line_without_newlines_is_searched_once_and_bounded(tmp_path: Path) -> None:
    """3 MiB written with no newline until the end: each byte is searched for the newline once
    (3 MiB of x, then the newline: 3 * 2**20 + 1 bytes; the old reader searched the whole
    buffer again after every chunk it read). Over max_line_bytes, the line is an error for its
    episode as soon as that many bytes arrived."""
    writer = tmp_path / "writer.py"
    writer.write_text(
        "import sys, time\n"
        "sys.stdin.readline()\n"
        "sys.stdout.write('x' * (3 * 2**20) + ('\\n' if sys.argv[1] == 'end' else ''))\n"
        "sys.stdout.flush()\n"
        "time.sleep(600)\n"
    )
    req, env = _request()
    agent = make_agent(f"cmd:{sys.executable} {writer} end")
    try:
        (action,) = agent.act([req])
        assert action == "x" * (3 * 2**20)
        assert agent.bytes_searched == 3 * 2**20 + 1
    finally:
        agent.close()
    agent = make_agent(f"cmd:{sys.executable} {writer} open", kwargs={"max_line_bytes": 2**20})
    try:
        (error,) = agent.act([req])
        assert isinstance(error, AgentError)
        assert str(error) == (
            f"'{sys.executable} {writer} open' wrote over 1,048,576 bytes without a newline "
            "(max_line_bytes)"
        )
        assert agent.bytes_searched <= 2**20 + 65536  # it stopped within one chunk of the bound
    finally:
        agent.close()
        env.close()


def test_request_json_keys() -> None:
    env = gym.make("agentgym/Bandit-v0")
    obs, info = env.reset(seed=0)
    req = AgentRequest("agentgym/Bandit-v0", 0, 0, 1, obs, info, None, [], "rules", "raw", env)
    line = request_json(req)
    assert line["valid_actions"] == ["Nurse", "Stuntman"]  # as `agentgym solve` shows for seed 0
    assert line["last_reward"] is None and line["turn"] == 1 and line["action_format"] == "raw"
    json.dumps(line)  # every value is JSON
    env.close()


# ----------------------------------------------------------------------------- CLI and export


def test_eval_cli_two_envs_bundle_and_chat_export(tmp_path: Path) -> None:
    out, chat = tmp_path / "run.json", tmp_path / "chat.jsonl"
    result = run_cli(
        "eval",
        "--env",
        "Bandit-v0",
        "--env",
        "agentgym/Sokoban-v0",
        "--agent",
        "oracle",
        "--episodes",
        "3",
        "--seed",
        "0",
        "--out",
        str(out),
        "--chat-out",
        str(chat),
        "--kw",
        "max_turns=6",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("agent: oracle")
    assert lines[-1] == f"wrote {out} and {chat}"
    bundle = json.loads(out.read_text())
    assert_valid_bundle(bundle)
    assert bundle["agentgym_version"] == agentgym.__version__
    assert_records_this_code(bundle["provenance"])  # the commit and versions that played
    assert [r["env_id"] for r in bundle["runs"]] == ["agentgym/Bandit-v0", "agentgym/Sokoban-v0"]
    sokoban = bundle["runs"][1]
    assert sokoban["env_kwargs"] == {"max_turns": 6}
    assert sokoban["env_constructor_kwargs"]["dim_room"] == [6, 6]
    assert sokoban["env_version"] == 0
    rows = [json.loads(line) for line in chat.read_text().splitlines()]
    assert len(rows) == 6
    for row, episode in zip(rows, bundle["runs"][0]["episodes"] + sokoban["episodes"], strict=True):
        roles = [m["role"] for m in row["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert replies == [s["action"] for s in episode["steps"]]
    assert write_chat_jsonl(bundle, tmp_path / "again.jsonl") == 6


def test_eval_cli_errors_name_the_fix(tmp_path: Path) -> None:
    def eval_random(env_id: str, episodes: str, *more: str) -> subprocess.CompletedProcess[str]:
        out = str(tmp_path / "x.json")
        return run_cli(
            "eval",
            "--env",
            env_id,
            "--agent",
            "random",
            "--episodes",
            episodes,
            *more,
            "--out",
            out,
        )

    result = eval_random("Sokobn-v0", "1")
    assert result.returncode == 2
    assert "unknown environment id 'Sokobn-v0'; did you mean agentgym/Sokoban-v0" in result.stderr
    result = eval_random("Bandit-v0", "0")
    assert result.returncode == 2 and "--episodes must be an int >= 1" in result.stderr
    result = eval_random("Bandit-v0", "1", "--kw", "nonsense=1")
    assert result.returncode == 2 and "bad --kw for agentgym/Bandit-v0" in result.stderr


_LOADED = "print(json.dumps({m: m in sys.modules for m in ('torch', 'transformers', 'baselines')}))"


def _fresh(code: str, tmp_path: Path) -> list[dict[str, bool]]:
    """Run ``code`` in a fresh interpreter; each ``_LOADED`` line it prints, parsed."""
    result = subprocess.run(
        [sys.executable, "-c", f"import json, sys\n{code}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"},
            "PYTHONPATH": str(ROOT),
        },
    )
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_agentgym_and_eval_of_random_never_load_torch_nor_baselines(tmp_path: Path) -> None:
    """``import agentgym`` and a whole ``agentgym eval --agent random`` run (the CLI in-process)
    load neither torch, transformers nor ``baselines`` (the layers: agentgym below baselines)."""
    out = tmp_path / "r.json"
    code = (
        "import agentgym, agentgym.eval, agentgym.agents, agentgym.cli, agentgym.threads\n"
        f"{_LOADED}\n"
        "rc = agentgym.cli.main(['eval', '--env', 'Bandit-v0', '--agent', 'random',"
        f" '--episodes', '2', '--no-progress', '--out', {str(out)!r}])\n"
        "assert rc == 0, rc\n"
        f"{_LOADED}\n"
    )
    none = {"torch": False, "transformers": False, "baselines": False}
    assert _fresh(code, tmp_path) == [none, none]
    assert json.loads(out.read_text())["agent"]["name"] == "random"


def test_hf_agent_is_resolved_through_a_lazy_string_entry_point(tmp_path: Path) -> None:
    """``hf:`` names ``baselines.hf_agent:HFAgent`` as a string: resolving it imports that module
    (which sets the OpenMP wait policy) but not torch; only building the agent loads torch."""
    code = (
        "import os\n"
        "from agentgym.agents import AGENT_ENTRY_POINTS, load_entry_point\n"
        f"{_LOADED}\n"
        "cls = load_entry_point(AGENT_ENTRY_POINTS['hf'])\n"
        "assert cls.__module__ == 'baselines.hf_agent', cls\n"
        "assert os.environ.get('OMP_WAIT_POLICY'), 'import baselines sets it'\n"
        f"{_LOADED}\n"
    )
    before, after = _fresh(code, tmp_path)
    assert before == {"torch": False, "transformers": False, "baselines": False}
    assert after == {"torch": False, "transformers": False, "baselines": True}
    with pytest.raises(ValueError, match="module:attribute"):
        load_entry_point("baselines.hf_agent")
    with pytest.raises(ValueError, match="has no attribute"):
        load_entry_point("baselines.hf_agent:Nope")


# ----------------------------------------------------------------------------- hf: agent


def test_embedded_path_resolves_from_the_cache(tmp_path: Path, monkeypatch: Any) -> None:
    from baselines.llm import policy as models

    folder = tmp_path / models.EMBEDDED_MODEL_NAME
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path))
    assert models.resolve_model_path("embedded") == folder
    with pytest.raises(FileNotFoundError, match="no config.json"):
        models.resolve_model_path(str(tmp_path / "missing"))


def test_hf_agent_plays_a_tiny_local_checkpoint_batched(tmp_path: Path) -> None:
    from baselines.llm.policy import build_tiny_policy

    env = gym.make("agentgym/Bandit-v0")
    texts = []
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        texts += [obs, info["instructions"]]
    env.close()
    model, tokenizer = build_tiny_policy(texts, seed=0)
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    out = tmp_path / "hf.json"
    bundle = quiet_eval(
        "agentgym/Bandit-v0",
        f"hf:{folder}",
        episodes=5,
        seed=0,
        out=out,
        agent_kwargs={"max_new_tokens": 6, "batch_size": 4},
    )
    assert_valid_bundle(bundle)
    assert bundle["agent"]["name"] == "hf:tiny"
    assert bundle["agent"]["settings"]["batch_size"] == 4
    for episode in bundle["runs"][0]["episodes"]:
        assert episode["error"] is None and len(episode["steps"]) == 1
        assert episode["steps"][0]["action"].startswith("<think>")  # the think prefix
    # Greedy decoding: the same command gives the same actions.
    again = quiet_eval(
        "agentgym/Bandit-v0",
        f"hf:{folder}",
        episodes=5,
        seed=0,
        out=tmp_path / "b.json",
        agent_kwargs={"max_new_tokens": 6, "batch_size": 4},
    )
    assert [e["steps"] for e in again["runs"][0]["episodes"]] == [
        e["steps"] for e in bundle["runs"][0]["episodes"]
    ]


def test_hf_agent_and_the_rollout_refuse_the_same_over_long_prompt(tmp_path: Path) -> None:
    """One context rule (:func:`baselines.llm.prompts.prompt_fits`): a prompt of L ids fits when
    L + max_new_tokens <= max_context_tokens. With max_new_tokens = 4 and a budget of L + 3 (one
    short), the trainer's rollout ends the episode as truncated with no turn played, and the
    ``hf:`` agent fails it with an AgentError naming both numbers (a bundle holds whole
    episodes); with L + 4 both play the turn from the same L prompt ids and write the same
    action."""
    from agentgym.chat import ChatEpisode
    from baselines.episodes import collect_rollouts
    from baselines.hf_agent import HFAgent
    from baselines.llm.engines import SamplingSettings
    from baselines.llm.policy import build_tiny_policy
    from baselines.llm.prompts import render_prompt

    env_id = "agentgym/Bandit-v0"
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    env.close()
    messages = ChatEpisode.from_reset(obs, info).messages()
    model, tokenizer = build_tiny_policy([m["content"] for m in messages], seed=0)
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    # The first prompt, tokenised from its text: the chat template, then "<think>".
    prompt = tokenizer(render_prompt(tokenizer, messages, True), add_special_tokens=False)
    prompt = list(prompt["input_ids"])
    length = len(prompt)
    for budget, fits in ((length + 3, False), (length + 4, True)):
        sampling = SamplingSettings(max_new_tokens=4, temperature=0.0, max_context_tokens=budget)
        (rollout,) = collect_rollouts(model, tokenizer, env_id, [0], 1, sampling)
        agent = HFAgent(str(folder), max_new_tokens=4, max_context_tokens=budget, device="cpu")
        request = AgentRequest(
            env_id=env_id,
            episode=0,
            seed=0,
            turn=1,
            observation=obs,
            info=info,
            last_reward=None,
            messages=messages,
            instructions=info["instructions"],
            action_format="think_answer",
        )
        (reply,) = agent.act([request])
        if fits:
            assert [t.sample.prompt_ids for t in rollout.turns] == agent.prompt_ids[0] == [prompt]
            assert reply == rollout.turns[0].action and reply.startswith("<think>")
        else:
            assert (rollout.turns, rollout.truncated, rollout.terminated) == ([], True, False)
            assert isinstance(reply, AgentError) and agent.prompt_ids[0] == [prompt]
            assert str(reply) == (
                f"prompt of {length} tokens + 4 new tokens exceeds max_context_tokens={budget}"
            )
        agent.close()


def test_file_py_callable_agent(tmp_path: Path) -> None:
    agent_file = tmp_path / "my_agent.py"
    agent_file.write_text(
        textwrap.dedent(
            '''
            class Agent:
                """Always the first listed arm."""

                batch_size = 3

                def act(self, requests):
                    return ["<think>a</think><answer>%s</answer>" % r.info["valid_actions"][0]
                            for r in requests]
            '''
        )
    )
    bundle = quiet_eval(
        "agentgym/BanditHeldOut-v0", f"{agent_file}:Agent", episodes=4, out=tmp_path / "p.json"
    )
    assert all(e["steps"][0]["valid"] for e in bundle["runs"][0]["episodes"])


def test_console_script_imports_an_agent_module_from_the_cwd(tmp_path: Path) -> None:
    """``agentgym eval --agent my_agent:act`` (the console script, whose ``sys.path[0]`` is its
    scripts folder, not the cwd) finds ``my_agent.py`` in the current directory, as
    ``python -m agentgym eval`` does."""
    script = Path(sysconfig.get_path("scripts")) / "agentgym"  # beside this Python's
    if not script.is_file():
        script = Path(shutil.which("agentgym") or script)
    assert script.is_file(), "the agentgym console script is not installed"
    (tmp_path / "my_agent.py").write_text(
        textwrap.dedent(
            """
            def act(request):
                return "<think>a</think><answer>%s</answer>" % request.info["valid_actions"][0]
            """
        )
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    args = ["eval", "--env", "Bandit-v0", "--agent", "my_agent:act", "--episodes", "2"]
    args += ["--out", "run.json", "--no-progress"]
    for command in ([str(script)], [sys.executable, "-m", "agentgym"]):
        result = subprocess.run(
            [*command, *args, "--overwrite"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=tmp_path,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        bundle = json.loads((tmp_path / "run.json").read_text())
        assert bundle["agent"]["name"] == "my_agent:act"
        assert all(e["steps"][0]["valid"] for e in bundle["runs"][0]["episodes"])


def test_seeds_must_fit_a_signed_64_bit_integer(tmp_path: Path) -> None:
    # SQLite stores the leaderboard's seeds as INTEGER (signed 64-bit): the last seed of a run,
    # seed + episodes - 1, must be at most 2**63 - 1.
    out = tmp_path / "run.json"
    with pytest.raises(EvalError, match=r"goes past the largest seed .* 2\*\*63 - 1"):
        evaluate(["agentgym/Bandit-v0"], "random", episodes=2, seed=2**63 - 1, out=out)
    with pytest.raises(EvalError, match="--seed must be an int >= 0"):
        evaluate(["agentgym/Bandit-v0"], "random", episodes=1, seed=-1, out=out)
    assert not out.exists()
    bundle = quiet_eval("agentgym/Bandit-v0", "random", episodes=1, seed=2**63 - 1, out=out)
    assert bundle["runs"][0]["seeds"] == [2**63 - 1]
