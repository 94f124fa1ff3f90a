"""The launcher between ``agentgym eval`` and a ``cmd:`` agent: nothing the agent starts outlives it.

:class:`agentgym.agents.CommandAgent` runs this file (on Linux) as ``python -I -S agent_launcher.py
<report fd> <owner pid> COMMAND...``, the launcher leading a session of its own. The launcher
makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the agent
starts, however it detaches (a fork, ``setsid``, a double fork, ``nohup``, SIGTERM and SIGHUP
ignored), stays in the launcher's process tree: an orphan is re-parented to the launcher, not to
init. It starts the agent with its own stdin and stdout (the pipes to eval: it relays nothing),
writes one line on ``<report fd>``: why the agent could not be started (empty if it could), then points
its own stdin and stdout at ``/dev/null`` (the agent alone holds the pipes) and waits for one of:

* the agent exits;
* SIGTERM, SIGHUP or SIGINT (the agent is closed or restarted): the agent gets SIGTERM (it already
  has it if it stayed in the launcher's process group), and :data:`GRACE_S` seconds to exit;
* its owner (eval) is gone, whatever killed it, SIGKILL too (its parent pid changed; checked every
  :data:`POLL_S` seconds): the agent gets SIGTERM and :data:`GRACE_S` seconds.

Then it sends SIGKILL to every process descended from it, again and again, reaping them, until it
has no child left (so none is left anywhere below it), and exits as the agent did: the same exit
status, or killed by the same signal. While the agent runs it reaps the orphans that end.

Limits: what the agent has started through a daemon outside this tree (``docker run``, ``systemd-run``,
``at``, an ssh session on another machine) is not a descendant and is not covered; a process that
the launcher could not kill (another user's setuid program) stays; where the kernel refuses
``PR_SET_CHILD_SUBREAPER`` (Linux before 3.4) an orphan goes to init and escapes; and if the launcher itself is
SIGKILLed (eval sends SIGKILL only when the launcher has not exited :data:`GRACE_S` plus 5 seconds
after SIGTERM), eval kills the tree it can still see. Stdlib only: it runs under ``-I -S``, so
neither the agent's working folder nor ``PYTHONPATH`` can replace a module it imports.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

#: Seconds the agent has to exit after SIGTERM before its whole tree gets SIGKILL.
GRACE_S = 2.0
#: Seconds between two checks that the owner still lives.
POLL_S = 0.2

_PR_SET_CHILD_SUBREAPER = 36
_STOP = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
_WAITED = _STOP | {signal.SIGCHLD}


def _descendants(root: int) -> list[int]:
    """The pids below ``root`` (read from ``/proc/<pid>/stat``, zombies included)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            out.append(pid)
            todo.append(pid)
    return out


def _reap(statuses: dict[int, int]) -> bool:
    """Reap every child that has ended (its wait status into ``statuses``); False when this
    process has no child left at all."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def _kill_tree(statuses: dict[int, int]) -> None:
    """SIGKILL to every descendant until none is left. A process forked after a scan has a killed
    parent, so it is re-parented here and found by the next scan."""
    me = os.getpid()
    while True:
        for pid in _descendants(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not _reap(statuses):
            return
        time.sleep(0.01)


def _terminate(agent: int) -> None:
    """SIGTERM to the agent, unless it has it already from its (the launcher's) process group."""
    with contextlib.suppress(OSError):
        if os.getpgid(agent) != os.getpgrp():
            os.kill(agent, signal.SIGTERM)


def main(argv: list[str]) -> None:
    report, owner, command = int(argv[1]), int(argv[2]), argv[3:]
    os.set_inheritable(report, False)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Signals are taken with sigtimedwait: blocked here from the start, so none is missed, and
    # unblocked in the agent before it runs.
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    try:
        proc = subprocess.Popen(
            command, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, ())
        )
    except OSError as err:
        os.write(report, " ".join(str(err).split()).encode("utf-8", "replace") + b"\n")
        os._exit(127)
    os.write(report, b"\n")  # one line, not EOF: a process eval forked may hold the pipe too
    os.close(report)
    agent = proc.pid
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    statuses: dict[int, int] = {}
    deadline = None  # once told to stop (or orphaned): when the agent's grace ends
    while agent not in statuses and (deadline is None or time.monotonic() < deadline):
        if deadline is None and os.getppid() != owner:
            with contextlib.suppress(OSError):
                os.kill(agent, signal.SIGTERM)
            deadline = time.monotonic() + GRACE_S
        got = signal.sigtimedwait(_WAITED, POLL_S)
        if got is not None and got.si_signo in _STOP and deadline is None:
            _terminate(agent)
            deadline = time.monotonic() + GRACE_S
        _reap(statuses)
    _kill_tree(statuses)
    code = os.waitstatus_to_exitcode(statuses[agent])
    if code < 0:  # killed by a signal: end the same way (pending stop signals are discarded)
        for sig in _STOP:
            signal.signal(sig, signal.SIG_IGN)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv)
