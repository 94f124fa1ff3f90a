"""Process limits: a Python callable in a child process under a wall-time and a memory bound, and
the one parent-death helper that every child process of this package uses.

* :func:`die_with_parent`: Linux ``PR_SET_PDEATHSIG``: the kernel signals this process when its
  parent dies, so that nothing outlives its owner. Safe between ``fork`` and ``exec`` (the libc
  function is looked up at import), which is where :mod:`sandboxes.code.process_backend` calls it.
* :func:`run_bounded`: ``fn()`` in a forked child that leads its own process group, under
  ``max_seconds`` of wall time and ``max_memory_mb`` of resident memory for the child and every
  process it starts (sampled every :data:`POLL_S` seconds with psutil). Over a bound, the group
  gets SIGTERM (the child turns it into ``KeyboardInterrupt``, so its ``finally`` blocks close
  what it opened), and :data:`GRACE_S` seconds later the group and every descendant seen, in
  other sessions too, get SIGKILL. The caller gets a :class:`BoundedRun` saying what happened and
  words it for its users (the leaderboard's replay budget:
  :func:`leaderboards.verify.run_within_budget`).
* :func:`run_command`: a program in its own session under a wall-time bound, its whole process
  group killed when it runs over or fails, so no process it started in that group (a
  ``torchrun`` rank, a busy neighbour) outlives the call: what the tests and benchmarks that
  start programs use.

The other process limit of this package, :mod:`sandboxes.deadline` (a pool of long-lived workers
for many short calls under a wall-clock deadline), says why the two are apart.

Example:
    >>> run_bounded(lambda: sum(range(10)), max_seconds=60, max_memory_mb=1024)  # doctest: +SKIP
    BoundedRun(status='ok', value=45, exitcode=0)
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

__all__ = [
    "GRACE_S",
    "POLL_S",
    "STATUSES",
    "BoundedRun",
    "die_with_parent",
    "process_tree",
    "tree_rss_bytes",
    "run_bounded",
    "CommandRun",
    "run_command",
]

#: Seconds between two samples of the child's memory (and checks of its time).
POLL_S = 0.1
#: Seconds a stopped child has between SIGTERM and SIGKILL (and to exit after its result).
GRACE_S = 5.0
#: The outcomes of :func:`run_bounded`, see :class:`BoundedRun`.
STATUSES = ("ok", "raised", "error", "stopped", "time", "memory", "died")

_PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _libc_prctl()


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (``PR_SET_PDEATHSIG``).

    The signal comes when the parent *thread* that forked this process ends. A change of user or
    group id clears the setting: call this after one.

    Args:
        parent: the pid this process was forked from. If the parent is already gone (it died
            before the request, so the kernel will never send the signal), the process exits at
            once with status 137, as if killed.
        sig: the signal (default SIGKILL).

    Returns:
        Whether the request was made (False where there is no ``prctl``: not Linux).
    """
    made = _PRCTL is not None
    if made:
        _PRCTL(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(137)
    return made


def process_tree(pid: int) -> list[psutil.Process]:
    """``pid`` and every process descended from it (empty when ``pid`` is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants, bytes (processes that end while they are
    read count 0)."""
    total = 0
    for proc in process_tree(pid):
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


@dataclass(frozen=True)
class BoundedRun:
    """What became of one :func:`run_bounded` call.

    Attributes:
        status: one of :data:`STATUSES`: ``ok`` (``fn`` returned), ``raised`` (``fn`` raised one
            of the ``passthrough`` exceptions), ``error`` (``fn`` raised another exception),
            ``stopped`` (the child got SIGTERM from elsewhere), ``time`` or ``memory`` (over that
            bound: the child was stopped), ``died`` (the child ended without a result).
        value: what ``fn`` returned (``ok``), the passed exception's message (``raised``), the
            other exception's type name only, as its text may quote what the caller must not
            show (``error``); None otherwise.
        exitcode: the child's exit code (negative: the signal that ended it; None if it could not
            be reaped).
    """

    status: str
    value: Any = None
    exitcode: int | None = None


def _child_main(
    fn: Callable[[], Any], conn: Any, owner: int, passthrough: tuple[type[BaseException], ...]
) -> None:
    os.setpgid(0, 0)  # its own process group: the whole tree can be stopped at once
    die_with_parent(owner)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through the caller's finally blocks (env.close())

    signal.signal(signal.SIGTERM, stop)
    try:
        result: tuple[str, Any] = ("ok", fn())
    except passthrough as err:
        result = ("raised", str(err))
    except KeyboardInterrupt:
        result = ("stopped", None)
    except Exception as err:
        result = ("error", type(err).__name__)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # done: a late stop just ends the process
    conn.send(result)
    conn.close()


def run_bounded(
    fn: Callable[[], Any],
    *,
    max_seconds: float,
    max_memory_mb: int,
    passthrough: tuple[type[BaseException], ...] = (),
) -> BoundedRun:
    """Run ``fn()`` in a forked child under a wall-time and a resident-memory bound.

    Args:
        fn: what to run; its return value must pickle.
        max_seconds: wall-clock seconds from the fork, > 0.
        max_memory_mb: MiB resident, the child and all its descendants together.
        passthrough: exception types whose message comes back (``raised``); any other
            exception comes back by type name only (``error``).

    Returns:
        The :class:`BoundedRun`. Once it returns, the child has been reaped; over a bound, its
        process group and every descendant seen before the stop were killed.
    """
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_main, args=(fn, send, os.getpid(), passthrough))
    t0 = time.monotonic()
    child.start()
    send.close()
    limit = max_memory_mb * 2**20
    over: str | None = None
    result: tuple[str, Any] | None = None
    try:
        while True:
            if receive.poll(POLL_S):
                try:
                    result = receive.recv()
                except EOFError:
                    result = None
                break
            if not child.is_alive():
                break
            if time.monotonic() - t0 > max_seconds:
                over = "time"
                break
            if tree_rss_bytes(child.pid) > limit:
                over = "memory"
                break
    finally:
        if result is not None:
            child.join(timeout=GRACE_S)  # it has sent its result and is exiting
        if child.is_alive():
            _stop_tree(child)
        child.join(timeout=GRACE_S)
        receive.close()
    if over is not None:
        return BoundedRun(over, None, child.exitcode)
    if result is None:
        return BoundedRun("died", None, child.exitcode)
    return BoundedRun(result[0], result[1], child.exitcode)


def _stop_tree(child: Any) -> None:
    """SIGTERM to the child's process group (the child itself if it has none yet), :data:`GRACE_S`
    to close what it opened, then SIGKILL to the group and to every descendant seen before or
    after the SIGTERM (those in other sessions or groups too)."""
    tree = process_tree(child.pid)[1:]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            if child.is_alive():
                os.kill(child.pid, sig)
        if sig == signal.SIGTERM:
            child.join(timeout=GRACE_S)
            if child.is_alive():  # not reaped, so its pid is still its own
                tree += [p for p in process_tree(child.pid)[1:] if p not in tree]
    for proc in tree:  # psutil checks that the pid is still the same process
        with contextlib.suppress(psutil.Error):
            proc.kill()


@dataclass(frozen=True)
class CommandRun:
    """What became of one :func:`run_command` call.

    Attributes:
        returncode: the program's exit status (negative: the signal that ended it).
        stdout: its standard output (with ``merge_stderr``, both streams interleaved).
        stderr: its standard error (``""`` with ``merge_stderr``).
        timed_out: it ran past ``timeout`` and was killed.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def run_command(
    argv: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    merge_stderr: bool = False,
) -> CommandRun:
    """Run ``argv`` in its own session (``start_new_session``) and wait at most ``timeout`` s.

    When it runs over, or ends with a non-zero status, its process group gets SIGKILL, so the
    processes it started in that group end with it. A process it started in a session of its own
    (``setsid``) is out of reach; if it holds the output pipes, the call stops reading them
    :data:`GRACE_S` seconds after the timeout and returns what it had.

    Args:
        argv: the program and its arguments.
        timeout: wall-clock seconds, > 0.
        env: its environment (``None``: this process's).
        cwd: its working directory (``None``: this process's).
        merge_stderr: send its standard error into ``stdout``.

    Returns:
        The :class:`CommandRun`: output decoded as UTF-8 whatever the locale (undecodable bytes
        replaced); ``timed_out`` when the program, or a process holding its output, ran past
        ``timeout`` (``returncode`` is the program's own: 0 when it had exited by then).

    Raises:
        ValueError: ``timeout`` is not > 0.
        OSError: the program could not be started.
    """
    if not timeout > 0:
        raise ValueError(f"run_command: timeout must be > 0 seconds, got {timeout!r}")
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    out = err = ""
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if timed_out or proc.poll() is None or proc.returncode != 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    if timed_out:
        try:
            out, err = proc.communicate(timeout=GRACE_S)
        except subprocess.TimeoutExpired:  # a process outside its group holds the pipes
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
    return CommandRun(proc.returncode, out or "", err or "", timed_out)
