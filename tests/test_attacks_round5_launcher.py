"""Attacks of round 5 on the ``cmd:`` agent launcher (agentgym.agents.CommandAgent,
agentgym/agent_launcher.py). Each test names the attack and the promise it breaks; each fails on
the code it was written against.

Findings:

1. In a PID namespace the agent still reaches its launcher through its process group: the init
   and the agent stay in the launcher's group (the launcher leads it), and ``kill(0, SIG)``
   signals every member of the caller's group, whatever PID namespace it is in (the kernel
   ignores the signal only for the namespace's init). The module says "the launcher, eval and
   every process outside have no pid in it, so the agent cannot signal them"; ``kill(0,
   SIGSTOP)`` stops the launcher, ``kill(0, SIGKILL)`` kills it. A ``cmd:`` agent that keeps its
   group stopped (one process in the group sends ``kill(0, SIGSTOP)`` again and again; another in
   a session of its own continues the agent's processes, never the launcher) leaves the launcher
   stopped for ever once eval is SIGKILLed: eval's death continues it (its parent-death signal),
   it has the init end the namespace, and is stopped again before it can exit. The launcher is
   never reaped by anyone nor exits: a process of eval's outlives eval, which the namespace mode
   promises never happens ("... when eval dies ... and the launcher exits"), and the limit is
   documented for the fallback only.
   (test_an_agent_cannot_keep_its_launcher_stopped_through_its_process_group_in_a_pid_namespace)

   Fixed: the init leads a session and process group of its own (``setsid``); the launcher
   relays eval's signals to it (SIGUSR1).

2. In the fallback (no PID namespace) the agent can signal eval itself: eval is its launcher's
   parent, a process of the same user whose pid ``/proc`` shows, and an agent that SIGKILLs it
   ends the whole evaluation. Nothing short of another user can stop a process signalling its
   own user's processes, so this is now the fallback's documented limit (docs/evaluation.md,
   agentgym.agents, agentgym.agent_launcher); the test here is that in the PID namespace the same
   attack fails: a host pid names nothing the agent can signal.
   (test_an_agent_in_its_pid_namespace_cannot_stop_or_kill_eval)

Two more, fixed without a test of their own: in the fallback a chain of forks that exit at once
sometimes outran eval's last sweep below a stuck launcher (``_kill_below`` stopped after a round
in which every listed process had exited before its kill; now a process gone since the listing
counts as alive, so what it forked is found by the next round; seen in 1 of 6 tries, too rare for
a test that must not flake); and a NUL byte in a ``cmd:`` command made Popen raise ValueError,
which ``_popen`` did not catch (the report pipe leaked; the command line cannot carry a NUL).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from agentgym.agent_launcher import NO_PID_NAMESPACE_ENV
from tests.helpers import ROOT
from tests.test_eval import (
    LEAKY_CHILD,
    _kill_recorded,
    _recorded,
    owned_agent,
    pid_namespaces_work,
)
from tests.test_sandbox_limits import _wait_gone

#: A cmd: agent (``agent.py FOLDER``) that records itself and three processes it starts (each as
#: ``<host pid> <create time>`` in FOLDER/<name>): "setsid", a LEAKY_CHILD in a session of its
#: own; "stopper", which stays in the launcher's process group and, once the agent has answered
#: its first request, sends ``kill(0, SIGSTOP)`` (its whole group: the launcher, the init, which
#: ignores it, the agent and itself) every few milliseconds; "continuer", in a session of its own,
#: which sends SIGCONT to the agent and the stopper (pids of the namespace) every few
#: milliseconds. It answers "<answer>1</answer>" to every request.
GROUP_STOPPER = """
import os, signal, subprocess, sys, time, psutil
folder = sys.argv[1]
def record(name):
    pid = int(os.readlink("/proc/self"))  # the host's pid
    with open(os.path.join(folder, name + ".tmp"), "w") as f:
        f.write(f"{pid} {psutil.Process(pid).create_time()}")
    os.replace(os.path.join(folder, name + ".tmp"), os.path.join(folder, name))
record("agent")
subprocess.Popen(
    [sys.executable, os.path.join(folder, "child.py"), os.path.join(folder, "setsid"), "plain"],
    start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
me = os.getpid()
go_r, go_w = os.pipe()
stopper = os.fork()
if stopper == 0:  # stays in the launcher's process group
    os.close(go_w)
    record("stopper")
    os.read(go_r, 1)
    while True:
        os.kill(0, signal.SIGSTOP)
        time.sleep(0.002)
os.close(go_r)
if os.fork() == 0:
    os.setsid()
    record("continuer")
    while True:
        for pid in (me, stopper):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        time.sleep(0.002)
names = ("setsid", "stopper", "continuer")
while not all(os.path.exists(os.path.join(folder, n)) for n in names):
    time.sleep(0.01)
for turn, line in enumerate(sys.stdin):
    print("<answer>1</answer>", flush=True)
    if turn == 0:
        os.write(go_w, b"x")
"""

GROUP_STOPPER_NAMES = ("agent", "setsid", "stopper", "continuer")


def test_an_agent_cannot_keep_its_launcher_stopped_through_its_process_group_in_a_pid_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack (PID namespace): the agent stays in its launcher's process group and stops the
    group with ``kill(0, SIGSTOP)`` again and again (a process in a session of its own continues
    the agent's own processes), then eval is SIGKILLed. The namespace was said to leave the
    agent no way to signal the launcher; the group is one. The launcher, continued by eval's
    death, ends the namespace but is stopped again before it exits, and stays so for ever: a
    process of eval's that outlives it (unreaped, never exiting; no one is left to continue it).

    Promise (agentgym.agents.CommandAgent, agentgym.agent_launcher): once eval has died,
    SIGKILL too, every process the program started is killed and the launcher exits; in a PID
    namespace the program cannot signal the launcher (a stopped-launcher leak is documented for
    the fallback only)."""
    if not pid_namespaces_work():
        pytest.skip("the kernel refuses a PID namespace here: the fallback documents this limit")
    monkeypatch.delenv(NO_PID_NAMESPACE_ENV, raising=False)  # the owner inherits the environment
    (tmp_path / "child.py").write_text(LEAKY_CHILD)
    (tmp_path / "agent.py").write_text(GROUP_STOPPER)
    spec = f"cmd:{sys.executable} {tmp_path / 'agent.py'} {tmp_path}"
    launcher_entry: list[tuple[int, float]] = []
    try:
        with owned_agent(tmp_path, spec, GROUP_STOPPER_NAMES) as (owner, launcher, procs):
            launcher_entry.append((launcher.pid, launcher.create_time()))
            assert len(procs) == 1 + len(GROUP_STOPPER_NAMES)  # the launcher and the four
            procs += [(p.pid, p.create_time()) for p in launcher.children()]  # the init
            owner.kill()  # eval dies without closing its agent
            owner.wait()
            left = _wait_gone(procs, within_s=30.0)
            status = None
            if launcher.pid in left:
                with contextlib.suppress(psutil.Error):
                    status = launcher.status()
            assert left == [], (
                f"still alive 30 s after eval was killed: {left} (the launcher {launcher.pid} "
                f"is {status})"
            )
    finally:
        # owned_agent killed what it recorded (a SIGKILL ends a stopped process too); the
        # launcher's death ends the namespace: wait for this test's processes to be gone
        _kill_recorded(launcher_entry + _recorded(tmp_path, GROUP_STOPPER_NAMES))
        _wait_gone(launcher_entry + _recorded(tmp_path, GROUP_STOPPER_NAMES), within_s=30.0)


#: A cmd: agent (``agent.py FOLDER``) that records itself (FOLDER/agent: ``<host pid> <create
#: time>``), then, on its first request, finds eval among its ancestors through the host's
#: ``/proc`` (``/proc/self`` names its host pid) and sends it SIGSTOP and SIGKILL by that pid,
#: and answers "1" to every request.
EVAL_KILLER = """
import os, signal, sys, psutil
folder = sys.argv[1]
me = psutil.Process(int(os.readlink("/proc/self")))
with open(os.path.join(folder, "agent.tmp"), "w") as f:
    f.write(f"{me.pid} {me.create_time()}")
os.replace(os.path.join(folder, "agent.tmp"), os.path.join(folder, "agent"))
for turn, line in enumerate(sys.stdin):
    if turn == 0:
        for p in me.parents():
            if "agentgym" in " ".join(p.cmdline()) and "eval" in p.cmdline():
                for sig in (signal.SIGSTOP, signal.SIGKILL):
                    try:
                        os.kill(p.pid, sig)
                    except OSError:
                        pass
    print("1", flush=True)
"""


def test_an_agent_in_its_pid_namespace_cannot_stop_or_kill_eval(tmp_path: Path) -> None:
    """Attack: a ``cmd:`` agent looks eval up among its ancestors in the host's ``/proc`` and
    sends it SIGSTOP and SIGKILL by its host pid. In the fallback (no PID namespace) that ends
    the evaluation: no bundle, every other episode lost (the round-5 finding; the fallback's
    documented limit now, docs/evaluation.md: the agent runs as eval's user beside it). In its
    PID namespace a host pid names no process the agent can signal: eval plays both episodes
    and writes its bundle.

    Promise (docs/evaluation.md, agentgym.agents): where the kernel allows the namespace, a
    hostile agent costs its own episode an error, never eval."""
    if not pid_namespaces_work():
        pytest.skip("the kernel refuses a PID namespace here: the fallback documents this limit")
    (tmp_path / "agent.py").write_text(EVAL_KILLER)
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if k != NO_PID_NAMESPACE_ENV}
    eval_proc = subprocess.Popen(
        [
            sys.executable, "-m", "agentgym", "eval",
            "--agent", f"cmd:{sys.executable} {tmp_path / 'agent.py'} {tmp_path}",
            "--env", "agentgym/Bandit-v0", "--episodes", "2", "--out", str(out),
            "--no-progress",
        ],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        output, _ = eval_proc.communicate(timeout=300)
        assert eval_proc.returncode in (0, 1), (
            f"eval ended with exit status {eval_proc.returncode}: {output[-2000:]}"
        )
        assert len(json.loads(out.read_text())["runs"][0]["episodes"]) == 2
        assert _recorded(tmp_path, ("agent",)), "the agent never ran: the attack was not tried"
    finally:
        if eval_proc.poll() is None:
            eval_proc.kill()
            eval_proc.wait()
        procs = _recorded(tmp_path, ("agent",))
        _wait_gone(procs, within_s=30.0)  # the launcher, its owner gone, ends its agent
        _kill_recorded(procs)
        _wait_gone(procs, within_s=30.0)
