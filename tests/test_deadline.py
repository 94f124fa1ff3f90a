"""Calls under a hard deadline (sandboxes/deadline.py): results, raised errors, the kill at the
deadline (also inside one long C call that holds the GIL), crashes, threads, forks, orphans.

Timing assertions are hang guards with seconds of slack (the machine is shared), never speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sandboxes.deadline import DeadlineExceeded, WorkerCrashed, WorkerPool, WorkerStartError

#: Slack over a deadline for the kill and a loaded machine, seconds.
SLACK_S = 30.0


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(max_workers=4)
    yield workers
    workers.close()


def test_results_and_raised_errors_come_back(pool: WorkerPool) -> None:
    assert pool.call(60, pow, 2, 10) == 1024
    assert pool.call(60, sorted, [3, 1, 2], reverse=True) == [3, 2, 1]
    with pytest.raises(ValueError, match="invalid literal"):
        pool.call(60, int, "x")
    with pytest.raises(ValueError, match="positive"):
        pool.call(0, pow, 2, 10)


def test_the_deadline_kills_a_call_and_the_next_call_works(pool: WorkerPool) -> None:
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="time.sleep ran past its deadline of 1 s"):
        pool.call(1.0, time.sleep, 600)
    assert time.monotonic() - start <= 1.0 + SLACK_S
    assert pool.call(60, pow, 3, 2) == 9  # a replacement worker


def test_the_deadline_stops_one_long_call_that_holds_the_gil(pool: WorkerPool) -> None:
    """``sum(range(10**13))`` is one C call (hours): no signal handler or thread could stop it."""
    pool.call(60, abs, -1)  # the worker's start is not timed
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        pool.call(1.0, sum, range(10**13))
    assert time.monotonic() - start <= 1.0 + SLACK_S


def test_a_crashed_worker_is_replaced(pool: WorkerPool) -> None:
    with pytest.raises(WorkerCrashed, match="exit status 3"):
        pool.call(60, os._exit, 3)
    assert pool.call(60, pow, 2, 3) == 8


def test_a_worker_killed_while_idle_is_replaced(pool: WorkerPool) -> None:
    pid = pool.call(60, os.getpid)
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it has exited; the pool reaps it
    assert pool.call(60, os.getpid) != pid


def test_the_memory_limit_raises_memory_error_in_the_worker() -> None:
    small = WorkerPool(max_memory_mb=1024)
    try:
        with pytest.raises(MemoryError):
            small.call(60, bytearray, 2 * 2**30)
        assert small.call(60, pow, 2, 4) == 16  # the same worker: nothing was allocated
    finally:
        small.close()


def test_a_start_failure_is_an_error_not_a_crash() -> None:
    broken = WorkerPool("agentgym.no_such_module:nothing")
    try:
        with pytest.raises(WorkerStartError, match="ModuleNotFoundError"):
            broken.call(60, pow, 2, 2)
    finally:
        broken.close()


def test_threads_use_different_workers(pool: WorkerPool, tmp_path: Path) -> None:
    """Four threads each make a call that returns only once all four calls are in a worker at
    once (however late a thread starts): four distinct worker pids."""
    pids: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        pid = pool.call(120, _pid_once_all_arrived, str(tmp_path), 4)
        with lock:
            pids.append(pid)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(set(pids)) == 4


def _pid_once_all_arrived(folder: str, count: int) -> int:
    """This worker's pid, once ``count`` workers have recorded themselves in ``folder`` (this one
    included), or after 60 s: a worker that served two of the calls counts once, so the calls
    then come back (and the test fails) instead of hanging."""
    open(os.path.join(folder, str(os.getpid())), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.getpid()


def test_a_forked_child_uses_its_own_workers(pool: WorkerPool) -> None:
    parent_worker = pool.call(60, os.getpid)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(read_end)
            pid = pool.call(60, os.getpid)
            os.write(write_end, str(pid).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as stream:
        child_worker = int(stream.read() or 0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child_worker not in (0, parent_worker)
    assert pool.call(60, os.getpid) == parent_worker  # the parent's worker still answers it


def test_a_worker_whose_caller_died_stops_itself() -> None:
    """The caller is killed (0.5 s in) during a 5 s call of a 600 s sleep, well before that
    call's deadline (a timer 4.5 s late would be needed to miss it): the worker stops by SIGALRM
    at the deadline plus ORPHAN_GRACE_S (10 s)."""
    code = (
        "import os, sys, threading, time\n"
        "from sandboxes.deadline import WorkerPool\n"
        "pool = WorkerPool()\n"
        "print(pool.call(60, os.getpid), flush=True)\n"
        "threading.Timer(0.5, os._exit, (0,)).start()\n"
        "pool.call(5.0, time.sleep, 600)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert _wait_until_gone(int(out.stdout.split()[0]), 5.0 + 10.0 + SLACK_S)


def _wait_until_gone(pid: int, seconds: float) -> bool:
    """Whether ``pid`` ended (gone or a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False
