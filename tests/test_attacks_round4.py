"""Attacks of round 4 (issue 45, item 5): an outsider's attempts on the eval harness, the
leaderboard, the environments and the prompt builder. Each test names the attack and the promise
it broke; it failed before its fix."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from agentgym.agent_launcher import NO_PID_NAMESPACE_ENV
from agentgym.agents import AgentError, AgentRequest, CommandAgent, make_agent

# ----------------------------------------------------------------------------- cmd: agents


def _request(observation: str) -> AgentRequest:
    return AgentRequest(
        env_id="agentgym/FrozenLake-v0",
        episode=0,
        seed=0,
        turn=1,
        observation=observation,
        info={},
        last_reward=None,
        messages=[],
        instructions="",
        action_format="raw",
        env=None,
    )


def test_a_cmd_agent_that_never_reads_its_stdin_cannot_hang_eval(tmp_path: Path) -> None:
    """Attack: a ``cmd:`` agent that writes its action but never reads its stdin (``cmd:yes
    Up`` is one), given requests larger than a pipe holds (64 KiB; a long observation, or a few
    dozen turns of ordinary ones). Eval wrote each request with a blocking ``write`` before it
    looked at the clock, so the write waited for ever: ``agentgym eval`` hung with no error.

    Promise (agentgym.agents, ``cmd:``): a program that does not answer within ``timeout``
    seconds gives an error for that episode and is started again. Now the request is written
    under the turn's deadline: the episode gets an AgentError naming the full stdin."""
    marker = tmp_path / "started"
    program = (
        f"import time; open({str(marker)!r}, 'w').close(); print('Up', flush=True); time.sleep(600)"
    )
    agent = CommandAgent(f"{sys.executable} -c {program!r}", timeout=10.0)
    out: list[list[str | AgentError]] = []
    worker = threading.Thread(
        target=lambda: out.append(agent.act([_request("x" * 2**20)])), daemon=True
    )
    try:
        worker.start()
        worker.join(120)  # the fix answers after the 10 s timeout; before it, never
        hung = worker.is_alive()
    finally:
        if worker.is_alive() and agent._proc is not None:  # unblock the write: end our launcher
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent._proc.pid, signal.SIGKILL)
            worker.join(30)
        agent.close()
    assert marker.exists()  # the program did run
    assert not hung, "eval blocked writing a request the agent never read"
    assert len(out) == 1 and len(out[0]) == 1
    error = out[0][0]
    assert isinstance(error, AgentError)
    assert "read no request within 10 s" in str(error)


# ----------------------------------------------------------------------------- leaderboard names

#: Names that are drawn as "oracle" (or "orac le" with nothing visible between): each holds a
#: default-ignorable code point that is neither a control nor a format character.
LOOKALIKE_NAMES = {
    "ora\u034fcle": "U+034F COMBINING GRAPHEME JOINER",  # a mark (Mn)
    "oracle\u3164": "U+1160 HANGUL JUNGSEONG FILLER",  # a letter (Lo); NFKC makes it U+1160
    "oracle\uffa0": "U+1160 HANGUL JUNGSEONG FILLER",  # the half-width filler, NFKC the same
    "\u115foracle": "U+115F HANGUL CHOSEONG FILLER",  # a letter (Lo)
    "oracle\ufe0f": "U+FE0F VARIATION SELECTOR-16",  # a mark (Mn)
    "orac\u180ble": "U+180B MONGOLIAN FREE VARIATION SELECTOR ONE",
    "oracle\u17b4": "U+17B4 KHMER VOWEL INHERENT AQ",
    "oracle\U000e0100": "U+E0100 VARIATION SELECTOR-17",
}


def test_a_name_with_an_invisible_letter_or_mark_is_refused(tmp_path: Path) -> None:
    """Attack: submit under "oracle" plus a character that is drawn as nothing but is a letter
    (U+3164 HANGUL FILLER) or a combining mark (U+034F COMBINING GRAPHEME JOINER, variation
    selectors), not a control or format character. Each was accepted and stored, and shown as
    "oracle"; ``inert`` printed them as they were, so an agent name could hide them too.

    Promise (leaderboards.__main__.name_problem, issue 25): a name holds no invisible character
    that makes it look like another's; every text column is printed with invisible characters
    escaped (leaderboards.render.inert). Now every default-ignorable code point is refused in a
    name and escaped in output, as a zero-width space is."""
    from leaderboards.__main__ import SubmissionError, name_problem, submit
    from leaderboards.render import inert

    db = tmp_path / "lb.sqlite"
    for name, label in LOOKALIKE_NAMES.items():
        problem = name_problem(name)
        assert problem is not None and problem.startswith(f"--name holds {label}, a control"), (
            name,
            problem,
        )
        try:
            submit(tmp_path / "missing.json", name, db, 2**20)
        except SubmissionError as err:
            assert str(err) == problem
        else:
            raise AssertionError(f"{name!r} was accepted")
        assert not db.exists()
    assert inert("oracle\u3164") == "oracle\\u3164"
    assert inert("ora\u034fcle") == "ora\\u034fcle"
    assert inert("oracle\U000e0100") == "oracle\\U000e0100"
    # names in one script, accents and other scripts stay names
    for name in ("oracle", "Ünïcödé エージェント", "한국어 에이전트", "my agent 2"):
        assert name_problem(name) is None and inert(name) == name


# ----------------------------------------------------------------------------- result files


def test_writing_a_result_file_never_zeroes_the_umask_of_other_threads(
    tmp_path: Path, monkeypatch
) -> None:
    """Attack: write a result file (a bundle, a leaderboard page, a provenance record; the
    studies write them while other threads work) while another thread creates a file.
    ``write_text_atomic`` read the umask with ``os.umask(0)`` and set it back: for that moment
    the whole process's umask was 0, so a file another thread created then got mode 0o666
    (world-writable) instead of 0o644 under umask 022. The interleaving is made exact here: the
    other thread's file is created at the moment the umask is set.

    Promise (agentgym.fileio): the file gets the usual ``0o666 & ~umask`` permissions; nothing
    is said of changing the process's; a leak of write permission to every user is a leak. Now
    the kernel applies the umask as it creates the temp file; the umask is never changed."""
    from agentgym.fileio import write_text_atomic

    real_umask = os.umask
    others: list[Path] = []

    def umask_and_another_thread(mask: int) -> int:
        old = real_umask(mask)
        other = tmp_path / f"other-{len(others)}"  # "another thread" creates a file just now
        os.close(os.open(other, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        others.append(other)
        return old

    saved = real_umask(0o022)
    try:
        monkeypatch.setattr(os, "umask", umask_and_another_thread)
        write_text_atomic(tmp_path / "run.json", '{"ok": true}\n')
        monkeypatch.setattr(os, "umask", real_umask)
    finally:
        real_umask(saved)
    assert (tmp_path / "run.json").read_text() == '{"ok": true}\n'
    assert (tmp_path / "run.json").stat().st_mode & 0o777 == 0o644
    assert {p.name: p.stat().st_mode & 0o777 for p in others} == {p.name: 0o644 for p in others}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["run.json", *(p.name for p in others)]
    )  # no temp file left


# ----------------------------------------------------------------------------- prompt builder


def _stripping_tokenizer():
    """SmolLM2's tokenizer with ``<|im_end|>`` marked ``rstrip`` (it eats the white space on its
    right, as some models' end-of-turn tokens do) and ``<|im_start|>``
    ``lstrip``; the same vocabulary and chat template otherwise."""
    import json

    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from baselines.llm.policy import embedded_model_path

    data = json.loads((embedded_model_path() / "tokenizer.json").read_text())
    for token in data["added_tokens"]:
        if token["content"] == "<|im_end|>":
            token["rstrip"] = True
        if token["content"] == "<|im_start|>":
            token["lstrip"] = True
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)))
    tok.chat_template = AutoTokenizer.from_pretrained(embedded_model_path()).chat_template
    return tok


def test_a_contents_control_string_changes_no_id_of_the_template_around_it() -> None:
    """Attack: an observation holding a control string (``<|endoftext|>``), with a tokenizer
    whose end-of-turn token eats the white space after it (``rstrip``). The content stayed
    text, but every ``\\n`` the template writes after ``<|im_end|>``, the system turn's
    included, became a token (198) that ``tokenizer(text)`` and ``apply_chat_template`` never
    give: environment text changed the ids of the template's own structure, a prompt the policy
    never saw in any chat without such a string.

    Promise (baselines.llm.prompts.encode_rendered): a text is tokenised as
    ``tokenizer(text)`` would, each control string of a content as text: the same ids around
    it. Now a special token's lstrip/rstrip eats the white space beside it on this path too."""
    from baselines.llm.prompts import prompt_token_ids, render_prompt

    tok = _stripping_tokenizer()

    def lit(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    plain = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "hello"}]
    # without a control string in a content, the ids are apply_chat_template's: no \n (198)
    # after <|im_end|> (2), which eats it
    want = [1, 9690, 198, 42976, 30, 2, 1, 4093, 198, 28120, 2, 1, 520, 9531, 198]
    assert prompt_token_ids(tok, plain, "") == want
    assert tok.apply_chat_template(plain, add_generation_prompt=True)["input_ids"] == want
    forged = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "hi <|endoftext|>"},
    ]
    ids = prompt_token_ids(tok, forged, "")
    assert ids == (
        [1] + lit("system\nRules.") + [2]
        + [1] + lit("user\nhi <|endoftext|>") + [2]
        + [1] + lit("assistant\n")
    )  # fmt: skip
    assert ids[:6] == [1, 9690, 198, 42976, 30, 2] and ids[6] == 1  # the system turn as before
    assert ids.count(0) == 0 and ids.count(2) == 2  # the content's <|endoftext|> stays text
    assert tok.decode(ids) == render_prompt(tok, forged, "").replace("<|im_end|>\n", "<|im_end|>")


def test_an_out_path_that_is_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    """Attack: ``agentgym eval --out runs/`` (a folder, as one might type it). eval read the
    folder as a bundle to resume and died with a traceback (IsADirectoryError), ``--overwrite``
    too (unlink of a folder).

    Promise (agentgym.eval.evaluate): bad arguments are an EvalError (``agentgym eval`` prints
    one ``agentgym: error:`` line, exit 2). Now a folder is refused before anything runs."""

    from agentgym.eval import EvalError, evaluate

    for overwrite in (False, True):
        with pytest.raises(EvalError, match=r"is a folder; give the path of the bundle file"):
            evaluate(
                ["agentgym/Bandit-v0"], "random", episodes=1, out=tmp_path, overwrite=overwrite,
                progress=False,
            )  # fmt: skip
        assert list(tmp_path.iterdir()) == []


def test_a_file_name_that_is_not_utf8_is_refused_before_anything_is_played(
    tmp_path: Path,
) -> None:
    """Attack: ``agentgym eval --env MathFile-v0 --kw dataset_file=$'data\\xff.jsonl'`` (a
    legal Linux file name; Python hands it over as the lone surrogate U+DCFF). eval played every
    episode, then died writing the bundle ("'utf-8' codec can't encode character '\\udcff'"):
    no bundle, and each rerun resumed the finished episodes into the same error.

    Promise (agentgym.eval): bad arguments are an EvalError, and what a run plays ends in a
    bundle (an action's lone surrogate is replaced so that the UTF-8 bundle can hold it). Now
    such an argument is refused before an environment is built or an episode played."""

    from agentgym.eval import EvalError, evaluate

    data = tmp_path / os.fsdecode(b"data\xff.jsonl")
    data.write_text('{"question": "1+1?", "answer": "2"}\n')
    out = tmp_path / "run.json"
    with pytest.raises(EvalError, match=r"^--kw holds text that is not valid UTF-8"):
        evaluate(
            ["agentgym/MathFile-v0"], "oracle", episodes=1, out=out,
            env_kwargs={"dataset_file": str(data)}, progress=False,
        )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == [data.name]  # no partial file
    program = tmp_path / os.fsdecode(b"agent-\xff")
    with pytest.raises(EvalError, match=r"^--agent holds text that is not valid UTF-8"):
        evaluate(["agentgym/Bandit-v0"], f"cmd:{program}", episodes=1, out=out, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [data.name]


#: A cmd: agent that starts a grandchild in a session of its own (which records its pid, the
#: host's, read from /proc/self, in argv[1]), then SIGKILLs its launcher every way it can: its
#: parent as it sees it (os.getppid(): the launcher, or in a PID namespace the namespace's init)
#: and its parent and grandparent as /proc shows them (the host's pids: in a PID namespace the
#: init and the launcher; never argv[2], the test's own pid), and answers every request with "1".
LAUNCHER_KILLER = """
import contextlib, os, signal, subprocess, sys, time
code = (
    "import os, sys, time\\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f: f.write(os.readlink('/proc/self'))\\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\\n"
    "time.sleep(600)\\n"
)
subprocess.Popen(
    [sys.executable, "-c", code, sys.argv[1]], start_new_session=True,
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
def ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])
parent = ppid(os.readlink("/proc/self"))
for pid in {os.getppid(), parent, ppid(parent)} - {int(sys.argv[2])}:  # not the test's process
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
for line in sys.stdin:
    print("1", flush=True)
"""


def test_a_cmd_agent_that_kills_its_launcher_leaves_nothing_behind(tmp_path: Path) -> None:
    """Attack: a ``cmd:`` agent starts a process in a session of its own (``setsid``), then
    kills its launcher with SIGKILL (its parent; any program may do it, a wrapper script's
    ``kill -9 0`` too) and plays on. With the launcher only a child subreaper, the launcher died,
    close() killed its process group, where the agent still was, but the setsid grandchild,
    re-parented to init, slept on.

    Promise (agentgym.agents.CommandAgent): once close() has returned, every process the
    program started, whatever session or group it chose, is killed. Now the program runs in a
    PID namespace of its own: the launcher has no pid there (the agent's kill by /proc's pid
    reaches no process), the kernel ignores the SIGKILL sent to the namespace's init from inside,
    so the launcher lives on, and when close() ends the init the kernel kills every process of
    the namespace. Where the kernel refuses a PID namespace the launcher's fallback keeps this
    documented limit, and the test is skipped."""

    from tests.test_eval import pid_namespaces_work
    from tests.test_sandbox_limits import _alive, _wait_gone

    if not pid_namespaces_work():
        pytest.skip("the kernel refuses a PID namespace here: the launcher's fallback's limit")
    script = tmp_path / "agent.py"
    script.write_text(LAUNCHER_KILLER)
    record = tmp_path / "grandchild"
    agent = CommandAgent(f"{sys.executable} {script} {record} {os.getpid()}", timeout=30.0)
    procs: list[tuple[int, float]] = []
    try:
        assert agent.act([_request("o")]) == ["1"]
        pid = int(record.read_text())
        procs = [(pid, psutil.Process(pid).create_time())]
        assert agent._proc is not None and agent._proc.poll() is None  # the launcher lives
        agent.close()
        assert _wait_gone(procs) == []
    finally:
        agent.close()
        for pid, started in procs:  # only the process this test's agent started
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)


#: A cmd: agent (``agent.py FOLDER MODE``) that starts LEAKY_CHILD (tests.test_eval) in a session
#: of its own (it records itself in FOLDER/setsid), records itself (FOLDER/agent), then answers
#: "<answer>1</answer>" to every request; after its first request (the launcher has reported and
#: let go of the pipes) it SIGSTOPs its launcher, its parent in the fallback. With MODE "again"
#: it stops the launcher again when told to stop (SIGTERM) and then exits 0; with "once" SIGTERM
#: ends it. Its stdin closed, it waits for that signal.
LAUNCHER_STOPPER = """
import os, signal, subprocess, sys, time, psutil
folder, mode = sys.argv[1], sys.argv[2]
launcher = os.getppid()
def stop_again_and_exit(signum, frame):
    os.kill(launcher, signal.SIGSTOP)
    os._exit(0)
if mode == "again":
    signal.signal(signal.SIGTERM, stop_again_and_exit)
subprocess.Popen(
    [sys.executable, os.path.join(folder, "child.py"), os.path.join(folder, "setsid"), "plain"],
    start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
while not os.path.exists(os.path.join(folder, "setsid")):
    time.sleep(0.01)
pid = int(os.readlink("/proc/self"))
with open(os.path.join(folder, "agent"), "w") as f:
    f.write(f"{pid} {psutil.Process(pid).create_time()}")
for turn, line in enumerate(sys.stdin):
    if turn == 0:
        os.kill(launcher, signal.SIGSTOP)
    print("<answer>1</answer>", flush=True)
time.sleep(600)
"""


def _launcher_stopper(folder: Path, mode: str) -> str:
    """The ``cmd:`` spec of LAUNCHER_STOPPER, its files written to ``folder``."""
    from tests.test_eval import LEAKY_CHILD

    (folder / "child.py").write_text(LEAKY_CHILD)
    (folder / "agent.py").write_text(LAUNCHER_STOPPER)
    return f"cmd:{sys.executable} {folder / 'agent.py'} {folder} {mode}"


def _becomes_stopped(pid: int, within_s: float = 60.0) -> bool:
    """Whether process ``pid`` (one this test made) is seen stopped within ``within_s``: a
    SIGSTOP takes effect once the process runs again."""
    deadline = time.monotonic() + within_s
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_cmd_agent_that_stops_its_launcher_is_ended_by_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack (the launcher's fallback, no PID namespace): a ``cmd:`` agent SIGSTOPs its
    launcher (its parent, same user) and stops it again when close() sends SIGTERM. The stopped
    launcher never acted on the SIGTERM: close() waited its full 7 s, SIGKILLed the launcher
    (exit status -9) and then killed the processes it had listed just before, once: a process
    forked between that list and its kill (the launcher dead, re-parented to init) escaped.

    Promise (agentgym.agents.CommandAgent): once close() has returned, every process the program
    started is killed, by the launcher, as for a program that leaves it alone. Now close() sends
    SIGCONT with the SIGTERM and again while it waits: the launcher ends the program's tree
    itself and exits as the program did (status 0); and a launcher still there after the 7 s is
    killed only once every process below it is (again and again: it holds them as subreaper)."""
    from tests.test_eval import _kill_recorded, _recorded
    from tests.test_sandbox_limits import _wait_gone

    monkeypatch.setenv(NO_PID_NAMESPACE_ENV, "1")
    agent = make_agent(_launcher_stopper(tmp_path, "again"))
    procs: list[tuple[int, float]] = []
    try:
        assert agent.act([_request("o")]) == ["<answer>1</answer>"]
        launcher = agent._proc
        assert launcher is not None
        procs = _recorded(tmp_path, ("agent", "setsid"))
        assert len(procs) == 2
        assert _becomes_stopped(launcher.pid)
        agent.close()
        assert launcher.returncode == 0  # the program's own status: the launcher was not killed
        assert _wait_gone(procs) == []
    finally:
        agent.close()
        _kill_recorded(procs or _recorded(tmp_path, ("agent", "setsid")))


def test_a_stopped_launcher_ends_the_tree_when_eval_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack (the launcher's fallback, no PID namespace): a ``cmd:`` agent starts a process in
    a session of its own and SIGSTOPs its launcher, then eval is SIGKILLed. The launcher learns
    that its owner is gone by looking (every 0.2 s): stopped, it never looked, and the agent,
    what it started and the launcher itself ran on.

    Promise (agentgym.agent_launcher): when eval dies, SIGKILL too, the launcher ends the agent's
    tree. Now eval's death sends the launcher SIGCONT (its parent-death signal): it runs again,
    sees its owner gone and ends the tree. (An agent that stops it once more before it has been
    killed keeps the launcher stopped: the fallback's documented limit, with SIGKILL.)"""
    from tests.test_eval import owned_agent
    from tests.test_sandbox_limits import _wait_gone

    monkeypatch.setenv(NO_PID_NAMESPACE_ENV, "1")  # the owner inherits the environment
    spec = _launcher_stopper(tmp_path, "once")
    with owned_agent(tmp_path, spec, ("agent", "setsid")) as (owner, launcher, procs):
        assert len(procs) == 3
        assert _becomes_stopped(launcher.pid)
        owner.kill()
        owner.wait()
        assert _wait_gone(procs) == []


@pytest.mark.parametrize("launcher", [True, False], ids=["launcher", "no-launcher"])
def test_a_subprocess_error_at_start_is_an_agent_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher: bool
) -> None:
    """Attack: make ``subprocess.Popen`` fail with ``SubprocessError`` rather than ``OSError``
    (as it does when the child's exec-error pipe is tampered with, or a ``preexec_fn`` raises).
    CommandAgent caught only OSError: the error went up through ``act`` and eval died with a
    traceback.

    Promise (agentgym.agents, ``cmd:``): a program that cannot be started gives an error for
    that episode ("cannot start ..."). Now SubprocessError is caught as OSError is, and the
    report pipe is closed."""
    from agentgym import agents

    if not launcher:
        monkeypatch.setattr(agents, "_LAUNCHER", None)

    def popen(*args: object, **kwargs: object) -> None:
        raise subprocess.SubprocessError("Exception occurred in preexec_fn.")

    command = f"{sys.executable} -c pass"
    agent = CommandAgent(command, timeout=30.0)
    fds = set(os.listdir("/proc/self/fd"))
    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "Popen", popen)
        out = agent.act([_request("o")])
    assert [str(e) for e in out] == [f"cannot start {command!r}: Exception occurred in preexec_fn."]
    assert isinstance(out[0], AgentError)
    assert set(os.listdir("/proc/self/fd")) <= fds  # the report pipe's ends are closed
    assert agent._proc is None
    agent.close()


#: A launcher (run as ``python -I -S fake_launcher.py <report fd> <owner pid> COMMAND...``) that
#: starts COMMAND in a session of its own, then never writes its report line, never closes the
#: report pipe and never exits (SIGTERM ignored).
SILENT_LAUNCHER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen(
    sys.argv[3:], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
time.sleep(600)
"""


def test_a_launcher_that_never_reports_cannot_hang_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a launcher that holds its report pipe open and writes nothing (stopped by its
    program in the fallback before it wrote, or stuck). CommandAgent read the report line, and
    after a failure waited for the launcher, with no timeout: eval hung for ever.

    Promise (agentgym.agents, ``cmd:``): a program that cannot be started gives an error for
    that episode, and nothing it started outlives close. Now the report is awaited
    START_TIMEOUT_S seconds (10 s here), then the launcher and every process below it are
    killed and the start is an error that says so."""
    from agentgym import agents
    from tests.test_eval import LEAKY_CHILD, _kill_recorded, _recorded
    from tests.test_sandbox_limits import _wait_gone

    (tmp_path / "fake_launcher.py").write_text(SILENT_LAUNCHER)
    (tmp_path / "child.py").write_text(LEAKY_CHILD)
    monkeypatch.setattr(agents, "_LAUNCHER", str(tmp_path / "fake_launcher.py"))
    monkeypatch.setattr(agents, "START_TIMEOUT_S", 10.0)
    command = f"{sys.executable} {tmp_path / 'child.py'} {tmp_path / 'setsid'} plain"
    agent = CommandAgent(command, timeout=30.0)
    out: list[list[str | AgentError]] = []
    worker = threading.Thread(target=lambda: out.append(agent.act([_request("o")])), daemon=True)
    procs: list[tuple[int, float]] = []
    try:
        worker.start()
        worker.join(120)  # the fix answers after about 10 + 7 s; before it, never
        hung = worker.is_alive()
        procs = _recorded(tmp_path, ("setsid",))
        if hung:  # unblock the read: end the fake launcher, this process's only child here
            for child in psutil.Process().children():
                if child.cmdline()[3:4] == [str(tmp_path / "fake_launcher.py")]:
                    child.kill()
            worker.join(30)
        assert not hung, "eval waited for ever for the launcher's report"
        assert len(procs) == 1  # the fake launcher did start the program
        assert [str(e) for e in out[0]] == [
            f"cannot start {command!r}: the launcher did not report within 10 s"
        ]
        assert agent._proc is None
        assert _wait_gone(procs) == []  # in a session of its own, killed below the launcher
    finally:
        agent.close()
        _kill_recorded(procs or _recorded(tmp_path, ("setsid",)))
