"""The process back end of sandboxes.code (bubblewrap and unshare), and the security suite that
every back end passes (:class:`SecuritySuite`, reused by tests/test_sandbox_docker.py).

Each security test runs real attacks in the real sandbox: a TCP server on the host's loopback, a
secret file in a host directory, a planted environment variable, a fork bomb, a memory bomb, an
endless loop, 10 MB of output. Expected values are worked out by hand (e.g. 64 KiB kept of 10 MB).
"""

from __future__ import annotations

import errno
import glob
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sandboxes.code import IsolationUnavailable, make_sandbox
from sandboxes.code import process_backend as pb
from sandboxes.code.base import (
    FINISH_BYTES,
    FINISH_READS,
    OUTPUT_LIMIT,
    CappedBuffer,
    CodeSandbox,
    ExecResult,
)

FAKE_SECRET = "agentgym-fake-secret-7f3a9c"


#: Numbers of the system calls every back end refuses (from the kernel's tables, not the filter's).
SYSCALL_NUMBERS = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250}
    | {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
    | {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311}
    | {"pidfd_getfd": 438, "prlimit64": 302},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219}
    | {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
    | {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271}
    | {"pidfd_getfd": 438, "prlimit64": 261},
}

#: Calls each refused system call with plausible arguments and prints "<name> <result> <errno>",
#: then shows that ordinary calls, the code's own limits and a child process still work.
SYSCALL_PROBE = f"""
import ctypes, os, platform, resource, subprocess
numbers = {SYSCALL_NUMBERS!r}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(256)  # struct io_uring_params, zeroed
args = {{
    "add_key": (ctypes.c_char_p(b"user"), ctypes.c_char_p(b"k"), ctypes.c_char_p(b"v"),
                ctypes.c_long(1), ctypes.c_long(-3)),  # to the user session key ring
    "request_key": (ctypes.c_char_p(b"user"), ctypes.c_char_p(b"k"), None, ctypes.c_long(0)),
    "keyctl": (ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(1)),  # KEYCTL_GET_KEYRING_ID
    "io_uring_setup": (ctypes.c_long(1), params),
    "io_uring_enter": (ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0)),
    "io_uring_register": (ctypes.c_long(0), ctypes.c_long(0), None, ctypes.c_long(0)),
    # PTRACE_ATTACH to the parent; read/write 0 iovecs of the parent's memory
    "ptrace": (ctypes.c_long(16), ctypes.c_long(os.getppid()), None, None),
    "process_vm_readv": (ctypes.c_long(os.getppid()), None, ctypes.c_long(0), None,
                         ctypes.c_long(0), ctypes.c_long(0)),
    "process_vm_writev": (ctypes.c_long(os.getppid()), None, ctypes.c_long(0), None,
                          ctypes.c_long(0), ctypes.c_long(0)),
    # copy the parent's standard input from a pidfd of it (pidfd_open is allowed)
    "pidfd_getfd": (ctypes.c_long(os.pidfd_open(os.getppid())), ctypes.c_long(0), ctypes.c_long(0)),
    # read the parent's file-size limit (RLIMIT_FSIZE = 1) into a struct rlimit64
    "prlimit64": (ctypes.c_long(os.getppid()), ctypes.c_long(1), None, params),
}}
for name, nr in numbers.items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *args[name])
    print(name, result, ctypes.get_errno())
print("getpid", "ok" if os.getpid() > 0 else "no")
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
print("own limits", resource.prlimit(0, resource.RLIMIT_CORE), resource.getrlimit(resource.RLIMIT_CORE))
print("child", subprocess.run(["true"]).returncode)
"""


class SecuritySuite:
    """Attacks every back end must contain. Subclasses provide a ``box`` fixture (a sandbox)."""

    def test_runs_code_with_stdin_and_files(self, box: CodeSandbox) -> None:
        code = "import sys\nprint(sys.stdin.read().upper(), open('data/in.txt').read())"
        result = box.run(code, stdin="abc", files={"data/in.txt": "xyz"}, timeout_s=20)
        assert result == ExecResult("ABC xyz\n", "", 0, False, False, result.duration_s, False)

    def test_exit_code_and_stderr(self, box: CodeSandbox) -> None:
        result = box.run("import sys\nsys.stderr.write('bad')\nsys.exit(3)", timeout_s=20)
        assert (result.exit_code, result.stderr, result.ok) == (3, "bad", False)

    def test_loopback_server_on_host_unreachable(self, box: CodeSandbox) -> None:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(5)
        port = server.getsockname()[1]
        accepted: list[object] = []

        def accept() -> None:
            server.settimeout(15)
            try:
                accepted.append(server.accept())
            except OSError:
                pass

        thread = threading.Thread(target=accept)
        thread.start()
        try:
            # Control: the server does answer on the host.
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            thread.join()
            assert len(accepted) == 1
            code = (
                "import socket\n"
                "try:\n"
                f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                "    print('CONNECTED')\n"
                "except OSError as e:\n"
                "    print('blocked', type(e).__name__)\n"
            )
            result = box.run(code, timeout_s=20)
        finally:
            server.close()
        assert result.stdout.startswith("blocked"), result
        assert len(accepted) == 1  # the sandbox never reached the server

    def test_host_files_cannot_be_read_or_written(self, box: CodeSandbox) -> None:
        host_dir = tempfile.mkdtemp(prefix="agentgym-host-")
        secret = os.path.join(host_dir, "secret.txt")
        with open(secret, "w") as f:
            f.write(FAKE_SECRET)
        os.chmod(host_dir, 0o755)
        os.chmod(secret, 0o644)  # world-readable on the host: only isolation can hide it
        target = os.path.join(host_dir, "written.txt")
        code = (
            f"for path in [{secret!r}, {os.path.abspath(__file__)!r}, '/etc/shadow']:\n"
            "    try:\n"
            "        print(open(path).read())\n"
            "    except OSError as e:\n"
            "        print('denied', type(e).__name__)\n"
            "try:\n"
            f"    open({target!r}, 'w').write('x')\n"
            "    print('WROTE')\n"
            "except OSError as e:\n"
            "    print('denied', type(e).__name__)\n"
        )
        try:
            result = box.run(code, timeout_s=20)
        finally:
            written = os.path.exists(target)
            os.unlink(secret)
            if written:
                os.unlink(target)
            os.rmdir(host_dir)
        assert FAKE_SECRET not in result.stdout
        assert "SecuritySuite" not in result.stdout  # this test file is not visible either
        assert result.stdout.count("denied") == 4, result
        assert not written

    def test_host_environment_not_visible(
        self, box: CodeSandbox, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AGENTGYM_FAKE_SECRET", FAKE_SECRET)
        code = (
            "import os\n"
            "print(sorted(os.environ.items()))\n"
            "for pid in os.listdir('/proc'):\n"
            "    try:\n"
            "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    except OSError:\n"
            "        pass\n"
        )
        result = box.run(code, timeout_s=20)
        assert result.exit_code == 0, result
        assert FAKE_SECRET not in result.stdout and "AGENTGYM_FAKE_SECRET" not in result.stdout

    def test_fork_bomb_is_contained(self, box: CodeSandbox) -> None:
        code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
        result = box.run(code, timeout_s=3)
        assert result.timed_out and result.exit_code == 137
        after = box.run("print('alive')", timeout_s=20)  # the back end still works
        assert after.stdout == "alive\n"

    def test_memory_bomb_is_oom_killed(self, box: CodeSandbox) -> None:
        code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 2**20))\n"
        result = box.run(code, timeout_s=30, memory_mb=128)
        assert result.oom_killed, result
        assert not result.timed_out and result.exit_code != 0

    def test_infinite_loop_ends_at_timeout(self, box: CodeSandbox) -> None:
        result = box.run("while True:\n    pass\n", timeout_s=1.5)
        assert result.timed_out and result.exit_code == 137 and not result.oom_killed
        assert result.duration_s >= 1.5  # it ran to the limit, not less

    def test_ten_megabytes_of_output_truncated(self, box: CodeSandbox) -> None:
        code = "import sys\nsys.stdout.write('x' * 10_000_000)\nsys.stderr.write('e' * 100)"
        result = box.run(code, timeout_s=30)
        assert result.exit_code == 0
        assert result.stdout == "x" * OUTPUT_LIMIT  # 64 KiB = 65,536 bytes kept of 10 MB
        assert result.stderr == "e" * 100
        assert result.truncated

    def test_background_process_does_not_outlive_the_run(self, box: CodeSandbox) -> None:
        code = (
            "import subprocess\n"
            "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
            "open('/tmp/left-behind', 'w').write('x')\n"
            "print('started')\n"
        )
        assert box.run(code, timeout_s=20).stdout == "started\n"
        check = (
            "import os\n"
            "names = []\n"
            "for pid in os.listdir('/proc'):\n"
            "    try:\n"
            "        names.append(open(f'/proc/{pid}/cmdline', 'rb').read().rstrip(b'\\x00'))\n"
            "    except OSError:\n"
            "        pass\n"
            "print(b'sleep\\x001000' in names, os.path.exists('/tmp/left-behind'))\n"
        )
        assert box.run(check, timeout_s=20).stdout == "False False\n"

    def test_keyrings_io_uring_and_ptrace_are_refused(self, box: CodeSandbox) -> None:
        """Key rings (a channel between runs of one user), io_uring and ptrace: EPERM; others work."""
        result = box.run(SYSCALL_PROBE, timeout_s=60)
        assert result.stdout.splitlines() == [
            *(f"{name} -1 {errno.EPERM}" for name in SYSCALL_NUMBERS["x86_64"]),
            "getpid ok",
            "own limits (0, 0) (0, 0)",
            "child 0",
        ], result

    def test_bad_arguments_name_the_fix(self, box: CodeSandbox) -> None:
        with pytest.raises(ValueError, match="timeout_s"):
            box.run("pass", timeout_s=0)
        with pytest.raises(ValueError, match="memory_mb"):
            box.run("pass", memory_mb=1)
        with pytest.raises(ValueError, match="relative path"):
            box.run("pass", files={"../escape": "x"})
        with pytest.raises(TypeError, match="code must be a str"):
            box.run(b"pass")  # type: ignore[arg-type]


def _sandbox_dirs() -> set[str]:
    """This process's sandbox directories only: other sandboxes on the machine (a neighbour's
    test run, another worker) create and remove theirs at any time."""
    pattern = f"{pb.TEMP_PREFIX}{os.getpid()}-*"
    return set(glob.glob(os.path.join(tempfile.gettempdir(), pattern)))


def _descendants() -> list[psutil.Process]:
    """Live (non-zombie) descendants of this test process. Only these are looked at, never every
    process on the machine: another sandbox or a neighbour running bwrap is not this test's."""
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


def _cpu_s(proc: psutil.Process) -> float:
    try:
        return proc.cpu_times().user
    except psutil.Error:
        return 0.0


def _running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (``is_running`` also compares the start time, so a pid
    reused by an unrelated process does not count)."""
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.parametrize("isolation", ["bwrap", "unshare"])
class TestProcessSandbox(SecuritySuite):
    @pytest.fixture
    def box(self, isolation: str) -> Iterator[CodeSandbox]:
        sandbox = make_sandbox("process", isolation=isolation)
        assert sandbox.isolation == isolation
        yield sandbox
        sandbox.close()

    def test_close_leaves_no_process_or_directory(self, isolation: str) -> None:
        before_dirs = _sandbox_dirs()
        before = {p.pid for p in _descendants()}
        box = make_sandbox("process", isolation=isolation)
        done: list[ExecResult] = []
        thread = threading.Thread(
            target=lambda: done.append(box.run("while True: pass", timeout_s=60))
        )
        thread.start()
        # Record the run's whole process tree (bwrap or unshare, the PID namespace's init, the
        # launcher, the code) once the code runs: the busy loop is the one process that burns
        # CPU, and it is the deepest, so its ancestors are all there by then.
        tree: list[psutil.Process] = []
        for _ in range(600):  # bounded: 30 s (start-up is slow on a loaded machine)
            threading.Event().wait(0.05)
            tree = [p for p in _descendants() if p.pid not in before]
            if any(_cpu_s(p) >= 0.3 for p in tree):
                break
        else:
            pytest.fail(f"the code never ran: the run's processes were {tree}")
        assert len(tree) >= 2 and any(p.pid in box._live for p in tree)  # type: ignore[attr-defined]
        box.close()
        thread.join(timeout=30)
        box.close()  # twice is fine
        assert done and done[0].exit_code == 137
        assert _sandbox_dirs() - before_dirs == set()
        # Every process the run had is gone, and this process has no new child left (one that
        # was reparented away is caught by the first check: it was recorded while running).
        assert _running(tree) == []
        assert [p for p in _descendants() if p.pid not in before] == []
        with pytest.raises(RuntimeError, match="closed"):
            box.run("pass")

    def test_the_exit_status_is_never_the_reports(
        self, isolation: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The code runs as its launcher's user: had it written a report of its own first (a
        64-byte "0 0", as a launcher forced to do so here), the run still exits with the code's
        own status."""
        monkeypatch.setattr(
            pb,
            "_SH_LAUNCHER",
            pb._SH_LAUNCHER.replace(
                "rep=$1; fsize=$2; py=$3\n",
                "rep=$1; fsize=$2; py=$3\nprintf '%-64s' '0 0' >&\"$rep\"\n",
            ),
        )
        marker = (
            "pin, rep, py, watched = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]\n"
        )
        monkeypatch.setattr(
            pb,
            "_LAUNCHER",
            pb._LAUNCHER.replace(marker, marker + "os.write(rep, b'0 0'.ljust(64))\n"),
        )
        assert "printf" in pb._SH_LAUNCHER and "ljust(64)" in pb._LAUNCHER  # both forge
        with make_sandbox("process", isolation=isolation) as box:
            result = box.run("import sys\nprint('ran')\nsys.exit(3)\n", timeout_s=30)
        assert (result.stdout, result.exit_code, result.limit) == ("ran\n", 3, None), result


def test_refuses_without_isolation_and_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pb, "_probe_cache", {"bwrap": False, "unshare": False})
    with pytest.raises(IsolationUnavailable, match="apt-get install bubblewrap"):
        pb.ProcessSandbox()
    with pytest.raises(IsolationUnavailable, match="allow_unisolated=True"):
        pb.ProcessSandbox(isolation="none")
    with pb.ProcessSandbox(allow_unisolated=True) as box:
        assert box.isolation == "none"
        assert box.run("print(2 + 2)", timeout_s=20).stdout == "4\n"


def test_auto_prefers_bwrap() -> None:
    with pb.ProcessSandbox() as box:
        assert box.isolation == "bwrap"


def test_unknown_isolation_is_an_error() -> None:
    with pytest.raises(ValueError, match="isolation must be one of"):
        pb.ProcessSandbox(isolation="chroot")


def test_limit_kinds_and_errors() -> None:
    from sandboxes.code import LIMIT_KINDS, LimitExceeded
    from sandboxes.code.base import first_limit

    assert LIMIT_KINDS == ("memory", "processes", "disk", "output", "timeout")
    assert first_limit({"timeout", "processes"}) == "processes"  # the cause before the timeout
    assert first_limit(set()) is None
    result = ExecResult("", "", 137, True, False, 3.0, False, limit="timeout")
    assert isinstance(result.error, LimitExceeded) and result.error.kind == "timeout"
    assert "time limit" in str(result.error)
    assert ExecResult("", "", 0, False, False, 0.1, False).error is None  # old call, same fields
    with pytest.raises(ValueError, match="kind must be one of"):
        LimitExceeded("cpu")


def test_capped_buffer_cut_tail_is_exact() -> None:
    buffer = CappedBuffer(limit=10)
    buffer.write(b"abcdefgh")
    buffer.write(b"TRAILR")  # 14 bytes: 10 kept ("abcdefghTR"), 4 dropped
    assert buffer.text() == "abcdefghTR" and buffer.dropped == 4 and buffer.total == 14
    buffer.cut_tail(6)  # the 6-byte trailer goes, kept or dropped
    assert buffer.text() == "abcdefgh" and buffer.dropped == 0 and not buffer.truncated
    flood = CappedBuffer(limit=4)
    flood.write(b"x" * 20 + b"END")
    flood.cut_tail(3)
    assert flood.text() == "xxxx" and flood.dropped == 16 and flood.truncated


def test_unisolated_runs_refuse_keyrings_and_io_uring_too() -> None:
    with pb.ProcessSandbox(isolation="none", allow_unisolated=True) as box:
        result = box.run(SYSCALL_PROBE, timeout_s=60)
    assert result.stdout.splitlines()[: len(SYSCALL_NUMBERS["x86_64"])] == [
        f"{name} -1 {errno.EPERM}" for name in SYSCALL_NUMBERS["x86_64"]
    ], result
    assert result.stdout.splitlines()[len(SYSCALL_NUMBERS["x86_64"]) :] == [
        "getpid ok",
        "own limits (0, 0) (0, 0)",
        "child 0",
    ]


def _run_bpf(program: bytes, arch: int, nr: int, arg0: int) -> int:
    """An independent reading of classic BPF (linux/filter.h) for the three instructions the filter
    uses, over ``struct seccomp_data`` packed little-endian: the filter's verdict."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            (acc,) = struct.unpack_from("<I", data, k)
        elif code in (0x15, 0x35):  # BPF_JMP | BPF_JEQ / BPF_JGE, | BPF_K
            pc += jt if (acc == k if code == 0x15 else acc >= k) else jf
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected BPF op {code:#x}")
        pc += 1


#: A double-forked setsid process that sleeps 120 s, holding the run's pipes; the run prints its pid.
ESCAPE_AND_PRINT_PID = (
    "import os, time\n"
    "r, w = os.pipe()\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        time.sleep(120)\n"
    "        os._exit(0)\n"
    "    os.write(w, str(pid).encode())\n"
    "    os._exit(0)\n"
    "os.close(w)\n"
    "print(os.read(r, 32).decode())\n"
)


def test_an_unisolated_run_returns_though_an_escaped_process_holds_its_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unisolated and without a control group (a non-root owner's case), a double-forked setsid
    process escapes the kill and keeps the run's stdout open: ``run`` still returns, with all the
    run printed, while the process is alive. The test kills it."""
    monkeypatch.setitem(pb._cgroup_cache, os.getpid(), (None, "none, for this test"))
    code = ESCAPE_AND_PRINT_PID
    with pb.ProcessSandbox(isolation="none", allow_unisolated=True) as box:
        result = box.run(code, timeout_s=30)
    assert result.stdout.strip().isdigit(), result
    escaped = psutil.Process(int(result.stdout))
    try:
        assert escaped.is_running() and escaped.status() != psutil.STATUS_ZOMBIE
        assert result.exit_code == 0 and not result.timed_out, result
    finally:
        escaped.kill()


@pytest.fixture
def open_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory of this test, readable by the unprivileged user a run drops to
    (pytest's own are not), made the temporary directory of the sandboxes."""
    folder = Path(tempfile.mkdtemp(prefix="agentgym-test-"))
    folder.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", "--", str(folder)], check=False)


def test_a_tree_deeper_than_pythons_recursion_limit_is_removed(open_tmp: Path) -> None:
    """A run that nests 1,500 directories (``mkdir d; cd d``) returns its output, and its work
    directory is gone after it (Python 3.11's rmtree raised RecursionError through ``run``); a
    stale one like it, of an owner that is gone, is reaped without an error (it stopped every
    later sandbox from starting)."""
    tmp_path = open_tmp
    code = "import os\nfor _ in range(1500):\n    os.mkdir('d'); os.chdir('d')\nprint('done')\n"
    with pb.ProcessSandbox(isolation="none", allow_unisolated=True) as box:
        result = box.run(code, timeout_s=60)
        assert result.stdout == "done\n" and result.exit_code == 0, result
        assert os.listdir(tmp_path) == []
    gone = _a_dead_pid()
    stale = tmp_path / f"{pb.TEMP_PREFIX}{gone}-x"
    subprocess.run(["mkdir", "-p", os.path.join(stale, *["d"] * 1500)], check=True)
    assert pb.reap_stale_dirs() == [stale.name]
    assert os.listdir(tmp_path) == []


def _a_dead_pid() -> int:
    """The pid of a child of this process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_stdin_held_by_an_escaped_process_leaves_no_feeding_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unisolated without a control group, a double-forked setsid process keeps the run's stdin
    open and never reads it, and stdin (1 MiB) is more than a pipe holds: the thread feeding it
    ends with the run (a blocking write held it, and the 1 MiB, for ever: one more per run)."""
    monkeypatch.setitem(pb._cgroup_cache, os.getpid(), (None, "none, for this test"))
    code = ESCAPE_AND_PRINT_PID
    with pb.ProcessSandbox(isolation="none", allow_unisolated=True) as box:
        result = box.run(code, stdin="x" * 2**20, timeout_s=30)
    assert result.stdout.strip().isdigit(), result
    escaped = psutil.Process(int(result.stdout))
    try:
        assert escaped.is_running() and escaped.status() != psutil.STATUS_ZOMBIE
        deadline = time.monotonic() + 30  # a bound, not a delay: it ends within 50 ms
        while time.monotonic() < deadline and _feeders():
            time.sleep(0.05)
        assert _feeders() == []
    finally:
        escaped.kill()


def _feeders() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith("(_feed)")]


def test_a_late_reader_keeps_what_was_written_though_the_pipe_stays_open() -> None:
    """The race behind a lost output: the run ended and wrote ``abc``, a process still holds the
    pipe's write end, and the reader is scheduled only after ``finish`` is set. It still reads
    ``abc`` and returns."""
    r, w = os.pipe()
    try:
        os.write(w, b"abc")
        finish = threading.Event()
        finish.set()
        buffer = CappedBuffer(limit=8)
        with os.fdopen(r, "rb", closefd=False) as stream:
            buffer.drain(stream, finish)
        assert buffer.text() == "abc" and buffer.total == 3
    finally:
        os.close(r)
        os.close(w)


def test_a_writer_that_never_stops_cannot_hold_a_finished_reader() -> None:
    """Once ``finish`` is set, the reader takes at most FINISH_BYTES more from a source that is
    never empty (``/dev/zero`` stands for a writer that never stops) and returns: reads of 64 KiB,
    the 17th takes it past 2**20, so 17 * 65,536 = 1,114,112 bytes are read."""
    finish = threading.Event()
    finish.set()
    buffer = CappedBuffer(limit=16)
    with open("/dev/zero", "rb") as stream:
        buffer.drain(stream, finish)
    assert FINISH_BYTES == 2**20
    assert buffer.total == 1_114_112
    assert buffer.text() == "\0" * 16 and buffer.dropped == 1_114_112 - 16


def test_a_writer_that_dribbles_cannot_hold_a_finished_reader() -> None:
    """A writer that keeps a little waiting at every read (here 100 one-byte packets, each read
    returns one) holds a finished reader for FINISH_READS + 1 = 65 reads, then the reader returns
    with 65 bytes."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        for _ in range(100):
            theirs.send(b"z")
        finish = threading.Event()
        finish.set()
        buffer = CappedBuffer(limit=1000)
        buffer.drain(ours, finish)  # type: ignore[arg-type]
        assert FINISH_READS == 64
        assert buffer.text() == "z" * 65
    finally:
        ours.close()
        theirs.close()


def test_the_seccomp_filter_is_well_formed() -> None:
    """Verdicts worked out from the syscall tables (x86_64 unistd_64.h, aarch64 unistd.h) and
    seccomp.h's return values: ALLOW 0x7fff0000, ERRNO|EPERM 0x50001, KILL_PROCESS 0x80000000."""
    from sandboxes.code import seccomp

    allow, eperm, kill = 0x7FFF0000, 0x50000 | errno.EPERM, 0x80000000
    x86, arm = 0xC000003E, 0xC00000B7
    cases = {
        # (arch, nr, arg0): verdict
        (x86, 39, 0): allow,  # getpid
        (x86, 101, 1): eperm,  # ptrace
        (x86, 302, 0): allow,  # prlimit64 on itself
        (x86, 302, 17): eperm,  # prlimit64 on another process
        (x86, 302, 1 << 32): allow,  # pid_t is 32 bits: this is pid 0 to the kernel
        (x86, 0x40000000 | 39, 0): eperm,  # the x32 ABI
        (0x40000003, 20, 0): kill,  # AUDIT_ARCH_I386 (int 0x80)
        (arm, 172, 0): allow,  # getpid
        (arm, 117, 1): eperm,  # ptrace
        (arm, 261, 0): allow,  # prlimit64 on itself
        (arm, 261, 17): eperm,
        (arm, 302, 17): allow,  # x86_64's prlimit64 number is another call here
        (arm, 219, 0): eperm,  # keyctl
        (x86, 438, 3): eperm,  # pidfd_getfd
        (arm, 438, 3): eperm,
        (x86, 434, 1): allow,  # pidfd_open
    }
    for (arch, nr, arg0), verdict in cases.items():
        machine = "x86_64" if arch in (x86, 0x40000003) else "aarch64"
        program = seccomp.filter_bytes(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 4096
        assert _run_bpf(program, arch, nr, arg0) == verdict, (machine, nr, arg0)
    with pytest.raises(RuntimeError, match="no seccomp filter for the s390x architecture"):
        seccomp.filter_bytes("s390x")
