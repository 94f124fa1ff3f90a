"""sandboxes/limits.py: a callable under a time and memory bound, and the parent-death helper.

Every process these tests inspect is one they started, recorded by pid and start time (so a pid
reused by an unrelated process never counts); nothing machine-wide is looked at. Bounds are in
seconds and worked out by hand from the module's constants, with wide slack for a busy machine.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from sandboxes.limits import GRACE_S, POLL_S, CommandRun, run_bounded, run_command

ROOT = Path(__file__).parents[1]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]
DEAF = [  # ignores SIGTERM: only SIGKILL ends it
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)",
]
HOG = [sys.executable, "-c", "import time; block = b'x' * (300 * 2**20); time.sleep(3600)"]


def _start(record: Path, *commands: tuple[list[str], bool]) -> None:
    """In the bounded child: start ``commands`` (each with whether it gets a session of its own),
    write ``pid start_time`` of each to ``record`` (renamed into place, so the test never reads
    half of it), then sleep for an hour."""
    lines = []
    for command, new_session in commands:
        proc = subprocess.Popen(command, start_new_session=new_session)
        lines.append(f"{proc.pid} {psutil.Process(proc.pid).create_time()}\n")
    record.with_suffix(".tmp").write_text("".join(lines))
    record.with_suffix(".tmp").rename(record)
    time.sleep(3600)


def _recorded(record: Path) -> list[tuple[int, float]]:
    assert record.exists(), "the child never started its processes"
    return [
        (int(p), float(t))
        for p, t in (line.split() for line in record.read_text().split("\n") if line)
    ]


def _env() -> dict[str, str]:
    """This environment with the checkout first on the import path (for ``python -c``)."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _alive(pid: int, started: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(procs: list[tuple[int, float]], within_s: float = 30.0) -> list[int]:
    """The pids of ``procs`` still alive after waiting up to ``within_s`` for them to go."""
    deadline = time.monotonic() + within_s
    while True:
        left = [pid for pid, started in procs if _alive(pid, started)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def test_a_child_over_its_time_is_killed_with_its_grandchildren(tmp_path: Path) -> None:
    """Three grandchildren: one in the child's process group, one that ignores SIGTERM, one in a
    session of its own (out of reach of the group's signals). All die with the child."""
    record = tmp_path / "pids"
    start = time.monotonic()
    run = run_bounded(
        lambda: _start(record, (SLEEPER, False), (DEAF, False), (SLEEPER, True)),
        max_seconds=5,
        max_memory_mb=4096,
    )
    elapsed = time.monotonic() - start
    assert run.status == "time" and run.value is None
    # By hand: 5 s of time, one POLL_S sample, GRACE_S after SIGTERM, GRACE_S more to reap the
    # child: 15.1 s; 30 s more for a busy machine.
    assert elapsed < 5 + POLL_S + 2 * GRACE_S + 30
    grandchildren = _recorded(record)
    assert len(grandchildren) == 3
    assert _wait_gone(grandchildren) == []
    assert multiprocessing.active_children() == []


def test_the_memory_of_grandchildren_counts(tmp_path: Path) -> None:
    """A grandchild holding 300 MiB puts the tree over a 128 MiB bound (the child itself holds
    far less); the grandchild is killed with it."""
    record = tmp_path / "pids"
    run = run_bounded(lambda: _start(record, (HOG, False)), max_seconds=300, max_memory_mb=128)
    assert run.status == "memory"
    assert _wait_gone(_recorded(record)) == []
    assert multiprocessing.active_children() == []


class _Refusal(Exception):
    pass


def _raise(err: BaseException) -> None:
    raise err


@pytest.mark.parametrize(
    ("fn", "status", "value"),
    [
        (lambda: {"ok": [1, 2]}, "ok", {"ok": [1, 2]}),
        (lambda: _raise(_Refusal("said in full")), "raised", "said in full"),
        (lambda: _raise(OSError("/secret/path")), "error", "OSError"),  # the type, not the text
        (lambda: os._exit(3), "died", None),
    ],
    ids=["ok", "raised", "error", "died"],
)
def test_outcomes_within_the_bounds(fn, status: str, value: object) -> None:
    run = run_bounded(fn, max_seconds=300, max_memory_mb=4096, passthrough=(_Refusal,))
    assert (run.status, run.value) == (status, value)
    assert run.exitcode == (3 if status == "died" else 0)


def test_a_process_dies_with_its_parent(tmp_path: Path) -> None:
    """A parent forks a child that calls die_with_parent, waits until it has, then exits: the
    kernel kills the orphan."""
    program = textwrap.dedent(
        """
        import os, sys, time
        from sandboxes.limits import die_with_parent

        parent = os.getpid()
        ready, told = os.pipe()
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)
            os.write(told, b"1")
            time.sleep(3600)
            os._exit(0)
        os.read(ready, 1)
        import psutil
        print(pid, psutil.Process(pid).create_time(), flush=True)
        os._exit(0)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert out.returncode == 0, out.stderr
    pid, started = out.stdout.split()
    assert _wait_gone([(int(pid), float(started))]) == []


def test_a_process_whose_parent_is_already_gone_exits_at_once() -> None:
    """``parent`` names a process that is not the parent (as when the parent died before the
    request): the process exits with 137 instead of living on unwatched."""
    program = "from sandboxes.limits import die_with_parent; die_with_parent(-1); print('lived')"
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert out.returncode == 137 and out.stdout == ""


def test_run_command_returns_what_the_program_wrote_and_its_status() -> None:
    code = "import sys; print('out'); sys.stderr.write('err'); sys.exit(3)"
    assert run_command([sys.executable, "-c", code], timeout=120) == CommandRun(
        3, "out\n", "err", False
    )
    merged = run_command([sys.executable, "-c", code], timeout=120, merge_stderr=True)
    assert sorted(merged.stdout.split()) == ["err", "out"] and merged.stderr == ""


def test_run_command_over_its_time_kills_its_process_group(tmp_path: Path) -> None:
    """The program starts a grandchild in its own group (no new session) and sleeps; at the
    timeout the whole group is killed: the grandchild it recorded is gone too."""
    record = tmp_path / "grandchild"
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        import psutil
        proc = subprocess.Popen({SLEEPER!r})
        with open({str(record) + ".tmp"!r}, "w") as fh:
            fh.write(f"{{proc.pid}} {{psutil.Process(proc.pid).create_time()}}")
        os.replace({str(record) + ".tmp"!r}, {str(record)!r})
        time.sleep(3600)
        """
    )
    deadline = 20.0
    while True:  # a busy machine may need long to start Python: a longer bound, same check
        run = run_command([sys.executable, "-c", code], timeout=deadline)
        if record.exists():
            break
        assert deadline < 300, "the program never started its grandchild"
        deadline *= 4
    assert run.timed_out and run.returncode == -9
    pid, started = record.read_text().split()
    assert _wait_gone([(int(pid), float(started))]) == []


def test_a_grandchild_in_its_own_session_holding_stdout_does_not_outlast_the_timeout() -> None:
    """A grandchild that leaves the group (``setsid``) keeps the stdout pipe open and is out of
    ``killpg``'s reach: the call still returns about GRACE_S after the bound (it once waited for
    the grandchild: 6 s here, forever for a daemon)."""
    t0 = time.monotonic()
    run = run_command(["sh", "-c", f"setsid sleep {GRACE_S + 60} & echo started"], timeout=0.5)
    elapsed = time.monotonic() - t0
    assert run.timed_out and elapsed < GRACE_S + 30, f"{elapsed:.1f} s with timeout=0.5 ({run})"


@pytest.mark.parametrize("timeout", [0, -1])
def test_a_timeout_that_is_not_positive_is_refused(timeout: float) -> None:
    """0 or a negative bound is refused, not read as "kill at once"."""
    with pytest.raises(ValueError, match="timeout"):
        run_command([sys.executable, "-c", "print('hi')"], timeout=timeout)
