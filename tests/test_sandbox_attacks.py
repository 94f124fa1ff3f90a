"""Attacks on the code sandboxes, run for real (bubblewrap and Docker), one test per kind.

Each test checks that the attack is contained, that the run reports the limit it hit
(``ExecResult.limit``) within ``timeout_s`` plus :data:`SLACK_S` (a hang guard for a loaded
machine, never a speed claim), and that the host is unchanged afterwards: no process,
container, control group or temporary directory of this test process is left. Sizes are small
for a shared 2-core machine (memory_mb=128); a run meant to hit a limit other than the timeout
gets a timeout long enough that it hits that limit first however busy the machine.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

from sandboxes.code import IsolationUnavailable, LimitExceeded, SandboxError, cgroups
from sandboxes.code import process_backend as pb
from sandboxes.code.base import CodeSandbox, ExecResult
from sandboxes.code.docker_backend import OWNER_LABEL, DockerSandbox
from tests.test_sandbox_docker import _docker_or_fail

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORK_BOMB = (
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)
#: Slack over a run's timeout for the kill, the teardown and a loaded machine, seconds.
SLACK_S = 30.0
#: A fork bomb's timeout: it reaches its process limit long before, however busy the machine
#: (it runs to this timeout, and is then reported as the process limit it hit).
BOMB_TIMEOUT_S = 10


# The Docker tests' probe: fails in CI without a daemon and image (skips only outside CI).
_docker = _docker_or_fail


def _run_groups(owner: int | None = None) -> list[str]:
    """Run control groups of ``owner`` (default: this process) on this machine."""
    layout, _ = cgroups.detect()
    assert layout is not None
    owner = os.getpid() if owner is None else owner
    out = []
    for parent in set(layout.parents.values()):
        out += glob.glob(os.path.join(parent, f"{cgroups.GROUP_PREFIX}{owner}-*"))
    return sorted(out)


def _temp_dirs(owner: int | None = None) -> list[str]:
    owner = os.getpid() if owner is None else owner
    return sorted(glob.glob(os.path.join(tempfile.gettempdir(), f"{pb.TEMP_PREFIX}{owner}-*")))


def _descendants() -> list[int]:
    """Live (non-zombie) descendants of this process: a sandbox leaves none after a run."""
    import psutil

    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _containers(box: DockerSandbox) -> list[dict]:
    label = f"{OWNER_LABEL}={box._owner}"  # type: ignore[attr-defined]
    return box._client.api.containers(all=True, filters={"label": label})  # type: ignore[attr-defined]


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _processes_before() -> None:
    """Descendants this process already had (other tests' helpers): not this test's leftovers."""
    _BEFORE.clear()
    _BEFORE.update(_descendants())


def _assert_host_clean(box: CodeSandbox) -> None:
    assert [pid for pid in _descendants() if pid not in _BEFORE] == []
    assert _run_groups() == []
    assert _temp_dirs() == []
    if isinstance(box, DockerSandbox):
        assert len(_containers(box)) <= box.pool_size  # only the warm pool, idle


@pytest.fixture(params=["process", "docker"])
def box(request: pytest.FixtureRequest) -> Iterator[CodeSandbox]:
    sandbox: CodeSandbox
    if request.param == "process":
        sandbox = pb.ProcessSandbox(isolation="bwrap")
    else:
        sandbox = _docker(pool_size=4)
        sandbox.warm(4, memory_mb=128)
    yield sandbox
    sandbox.close()
    if isinstance(sandbox, DockerSandbox):
        assert _containers(sandbox) == []
    _assert_host_clean(sandbox)


def _timed(box: CodeSandbox, code: str, **kwargs: object) -> tuple[ExecResult, float]:
    start = time.monotonic()
    result = box.run(code, **kwargs)  # type: ignore[arg-type]
    return result, time.monotonic() - start


def test_fork_bomb_beside_concurrent_honest_runs(box: CodeSandbox) -> None:
    """One run's fork bomb takes neither the processes nor the CPU of the runs beside it."""
    results: dict[str, ExecResult] = {}
    elapsed: dict[str, float] = {}

    def bomb() -> None:
        results["bomb"], elapsed["bomb"] = _timed(
            box, FORK_BOMB, timeout_s=BOMB_TIMEOUT_S, memory_mb=128
        )

    def honest(i: int) -> None:
        code = f"import subprocess\nprint(subprocess.run(['echo', '{i}'], capture_output=True).stdout.decode().strip(), sum(range(1000)))"
        results[f"honest{i}"] = box.run(code, timeout_s=60, memory_mb=128)

    bomber = threading.Thread(target=bomb)
    bomber.start()
    time.sleep(1.0)  # the bomb is at its process limit, where it stays for BOMB_TIMEOUT_S
    honest_threads = [threading.Thread(target=honest, args=(i,)) for i in range(3)]
    for thread in honest_threads:
        thread.start()
    for thread in [bomber, *honest_threads]:
        thread.join(timeout=120)
    for i in range(3):
        result = results[f"honest{i}"]
        assert result.ok and result.stdout == f"{i} 499500\n" and result.limit is None, result
    bombed = results["bomb"]
    assert bombed.timed_out and bombed.exit_code == 137
    assert bombed.limit == "processes"  # reported before "timeout": the cause
    assert isinstance(bombed.error, LimitExceeded) and bombed.error.kind == "processes"
    assert elapsed["bomb"] <= BOMB_TIMEOUT_S + SLACK_S
    if isinstance(box, DockerSandbox):
        box.wait_removed()


def test_memory_across_forked_children_is_one_budget(box: CodeSandbox) -> None:
    """Four children of 48 MiB each (192 MiB) under memory_mb=128: the run as a whole is limited.

    Each child holds its memory until it is killed (600 s), so all four are resident together
    however late each is scheduled: the first child to end was killed for memory, and the
    parent then ends the others (SIGTERM, so any SIGKILL is the memory limit's)."""
    code = textwrap.dedent(
        """
        import os, signal, time
        kids = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                block = bytearray(48 * 2**20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                time.sleep(600)
                os._exit(0)
            kids.append(pid)
        first, status = os.wait()  # none ends on its own: this one was killed
        rest = [pid for pid in kids if pid != first]
        for pid in rest:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        codes = [status] + [os.waitpid(pid, 0)[1] for pid in rest]
        print(sorted(os.waitstatus_to_exitcode(c) for c in codes))
        """
    )
    timeout_s = 60
    result, elapsed = _timed(box, code, timeout_s=timeout_s, memory_mb=128)
    assert result.limit == "memory" and result.oom_killed, result
    assert "-9" in result.stdout  # at least one child was OOM-killed (SIGKILL)
    assert elapsed <= timeout_s + SLACK_S
    after = box.run("print('alive')", timeout_s=20, memory_mb=128)
    assert after.stdout == "alive\n" and after.limit is None


@pytest.mark.parametrize("target", ["/work", "/tmp"])
def test_filling_a_writable_mount_is_a_disk_limit(box: CodeSandbox, target: str) -> None:
    """/work and /tmp are sized tmpfs mounts (64 MiB): filling one stops there, on no host disk."""
    code = textwrap.dedent(
        f"""
        import os
        written = 0
        try:
            for i in range(10_000):
                with open(os.path.join({target!r}, f"f{{i}}"), "wb") as f:
                    f.write(b"x" * 2**20)
                written += 1
        except OSError as error:
            print(written, error.errno)
        """
    )
    result, elapsed = _timed(box, code, timeout_s=20, memory_mb=256)
    written, errno = result.stdout.split()
    assert errno == "28" and int(written) <= 64  # ENOSPC at 64 MiB
    assert result.limit == "disk", result
    assert elapsed <= 20 + SLACK_S
    clean = box.run(f"import os\nprint(sorted(os.listdir({target!r})))", timeout_s=20)
    expected = "['main.py']" if target == "/work" else "[]"
    assert clean.stdout == expected + "\n"  # the next run starts with an empty mount


def test_process_root_and_dev_are_read_only_and_shm_is_sized() -> None:
    """Under bubblewrap every writable mount is a sized tmpfs; / and /dev take no writes."""
    with pb.ProcessSandbox(isolation="bwrap") as box:
        code = textwrap.dedent(
            """
            import os
            for path in ("/x", "/dev/x", "/usr/x"):
                try:
                    open(path, "w")
                    print(path, "written")
                except OSError as error:
                    print(path, error.errno)
            sizes = {p: os.statvfs(p).f_blocks * os.statvfs(p).f_frsize // 2**20
                     for p in ("/work", "/tmp", "/dev/shm")}
            print(sizes)
            """
        )
        result = box.run(code, timeout_s=20)
        assert result.stdout.splitlines() == [
            "/x 30",  # EROFS
            "/dev/x 30",
            "/usr/x 30",
            "{'/work': 64, '/tmp': 64, '/dev/shm': 16}",
        ], result
        full = box.run("open('/dev/shm/x', 'wb').write(b'x' * 2**25)", timeout_s=20)
        assert full.limit == "disk"
    _assert_host_clean(box)


def test_files_that_do_not_fit_are_a_disk_limit() -> None:
    with pb.ProcessSandbox(isolation="bwrap", work_mb=1) as box:
        result = box.run("print('never')", files={"big.bin": b"x" * 2**21}, timeout_s=20)
        assert result.limit == "disk" and result.exit_code != 0 and "do not fit" in result.stderr
    _assert_host_clean(box)


def test_files_too_large_agrees_with_a_run_at_the_limits() -> None:
    """``files_too_large`` says no exactly where a run would fail before main.py: a 1 MiB /work
    is 256 pages of 4096 bytes, main.py takes one, so a file of 255 pages fits and one of 256
    does not; a 1 MiB file-size limit takes a file of 1,048,576 bytes and not one byte more."""
    code = "print('ran')"
    with pb.ProcessSandbox(isolation="bwrap", work_mb=1) as box:
        assert (box.max_file_bytes, box.work_bytes) == (16 * 2**20, 2**20)
        fits = {"big.bin": b"x" * (255 * 4096)}
        assert box.files_too_large(code, fits) is None
        assert box.lease().files_too_large(code, fits) is None
        assert box.run(code, files=fits, timeout_s=20).stdout == "ran\n"
        over = {"big.bin": b"x" * (256 * 4096)}
        assert box.files_too_large(code, over) == (
            "the files take 1,052,672 bytes, over the 1,048,576-byte work directory"
        )
        assert box.run(code, files=over, timeout_s=20).stdout == ""
    with pb.ProcessSandbox(isolation="bwrap", max_file_mb=1) as box:
        fits = {"big.bin": b"x" * 2**20}
        assert box.files_too_large(code, fits) is None
        assert box.run(code, files=fits, timeout_s=20).stdout == "ran\n"
        over = {"big.bin": b"x" * (2**20 + 1)}
        assert box.files_too_large(code, over) == (
            "big.bin is 1,048,577 bytes, over the 1,048,576-byte file-size limit"
        )
        assert box.run(code, files=over, timeout_s=20).stdout == ""
    _assert_host_clean(box)


@pytest.mark.parametrize("isolation", ["bwrap", "unshare", "docker"])
def test_no_nested_user_namespaces(isolation: str) -> None:
    """bwrap: --disable-userns; unshare: the code runs chrooted, where unshare(2) gives EPERM;
    docker: no capabilities and the daemon's seccomp profile refuse it."""
    code = textwrap.dedent(
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.unshare(0x10000000), ctypes.get_errno() != 0)  # CLONE_NEWUSER
        """
    )
    box = _docker(pool_size=1) if isolation == "docker" else pb.ProcessSandbox(isolation=isolation)
    with box:
        assert box.run(code, timeout_s=20).stdout == "-1 True\n"


def test_ipc_state_does_not_cross_pooled_runs(box: CodeSandbox) -> None:
    """SysV shared memory, semaphores, message queues and POSIX queues die with their run."""
    create = textwrap.dedent(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        shm = libc.shmget(0x5EED, 4096, 0o1666)
        sem = libc.semget(0x5EED, 1, 0o1666)
        msg = libc.msgget(0x5EED, 0o1666)
        mq = libc.mq_open(b"/agentgym-attack", os.O_CREAT | os.O_RDWR, 0o600, None)
        print(shm >= 0, sem >= 0, msg >= 0, mq >= 0)
        """
    )
    look = textwrap.dedent(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        found = [libc.shmget(0x5EED, 0, 0), libc.semget(0x5EED, 0, 0), libc.msgget(0x5EED, 0)]
        mq = libc.mq_open(b"/agentgym-attack", os.O_RDWR, 0, None)
        print(found, mq)
        """
    )
    if isinstance(box, DockerSandbox):
        box.close()
        box = _docker(pool_size=1)  # one container: the second run is in the same one
    try:
        assert box.run(create, timeout_s=20).stdout == "True True True True\n"
        if isinstance(box, DockerSandbox):
            (container,) = box.container_ids()
        assert box.run(look, timeout_s=20).stdout == "[-1, -1, -1] -1\n"
        if isinstance(box, DockerSandbox):
            assert box.container_ids() == [container]  # the same pooled container, clean
    finally:
        box.close()


@pytest.mark.parametrize(
    ("kind", "code", "limits"),
    [
        ("timeout", "while True:\n    pass\n", {"timeout_s": 2}),  # runs for ever
        ("memory", "x = bytearray(400 * 2**20)\nfor i in range(0, len(x), 4096): x[i] = 1\n", {}),
        ("processes", FORK_BOMB, {"timeout_s": BOMB_TIMEOUT_S}),
        ("disk", "f = open('/work/f', 'wb')\nwhile True:\n    f.write(b'x' * 2**20)\n", {}),
        ("output", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", {}),
    ],
)
def test_each_limit_is_named_and_the_run_ends(
    box: CodeSandbox, kind: str, code: str, limits: dict[str, float]
) -> None:
    """Each attack's run reports the limit it hit, by name, and returns (within its timeout plus
    SLACK_S: a hang guard). The fork bomb runs to its timeout, long enough that it is always at
    its process limit first; the loop runs for ever, so only the timeout ends it."""
    timeout_s = limits.get("timeout_s", 30)  # the others end at their limit, long before
    result, elapsed = _timed(box, code, timeout_s=timeout_s, memory_mb=128)
    assert result.limit == kind, result
    assert result.error is not None and result.error.kind == kind
    assert elapsed <= timeout_s + SLACK_S, elapsed
    if isinstance(box, DockerSandbox):
        box.wait_removed()


def test_docker_output_flood_is_killed_at_the_timeout() -> None:
    """A flood below the kill cap runs to the timeout; then the result comes back."""
    box = _docker(pool_size=1, output_kill_mb=100_000)
    try:
        box.warm(1, memory_mb=128)
        code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n    sys.stderr.write('e')\n"
        result, elapsed = _timed(box, code, timeout_s=3, memory_mb=128)
        assert result.timed_out and result.limit == "timeout" and result.truncated
        assert len(result.stdout) == box.output_limit
        assert elapsed <= 3 + SLACK_S, elapsed
        box.wait_removed()
        assert _containers(box) == []  # the flooded container is gone, not back in the pool
        assert box.run("print(1)", timeout_s=20).stdout == "1\n"
    finally:
        box.close()
    assert _containers(box) == []


_OWNER_SCRIPT = """
import os, socket, sys, threading, time
sys.path.insert(0, {root!r})
# A host name of its own in the containers' owner label: another process's DockerSandbox (other
# tests on this daemon) never reaps them once this owner is gone, only the owner's end does.
socket.gethostname = lambda: {host!r}
from sandboxes.code import make_sandbox
box = make_sandbox({backend!r}, **{options!r})
getattr(box, "warm", lambda: None)()  # docker: the container exists before the run starts
threading.Thread(target=box.run, args=("import time\\ntime.sleep(600)",),
                 kwargs=dict(timeout_s=600, memory_mb=128)).start()
print("started", flush=True)
for line in sys.stdin:  # "fork": a child of the owner that outlives it, sleeping (no exec)
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    print(pid, flush=True)
threading.Event().wait()
"""


#: The host name the owners above put in their containers' owner label.
OWNER_HOST = f"agentgym-test-{os.getpid()}"


def _owner(backend: str, options: dict[str, object]) -> subprocess.Popen[str]:
    script = _OWNER_SCRIPT.format(root=ROOT, backend=backend, options=options, host=OWNER_HOST)
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def _fork_owner(owner: subprocess.Popen[str]) -> int:
    """Have ``owner`` fork a child that sleeps (it holds copies of the owner's descriptors)."""
    assert owner.stdin is not None and owner.stdout is not None
    owner.stdin.write("fork\n")
    owner.stdin.flush()
    return int(owner.stdout.readline())


def _end(owner: subprocess.Popen[str], forked: int | None) -> None:
    if owner.poll() is None:
        owner.kill()
        owner.wait()
    if forked is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(forked, signal.SIGKILL)


def _wait_for(predicate: object, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("isolation", "fork"), [("bwrap", False), ("unshare", False), ("bwrap", True)]
)
def test_owner_sigkill_leaves_nothing_running(isolation: str, fork: bool) -> None:
    """The sandboxed code dies with its owner (that had forked a child, which lives on); the next
    sandbox removes its group and dirs."""
    owner = _owner("process", {"isolation": isolation})
    forked = None
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "started\n"
        groups: list[str] = []

        def running() -> bool:
            groups[:] = _run_groups(owner.pid)
            return any(len(_procs(g)) >= 3 for g in groups)  # launcher + code are in

        _wait_for(running, "the run to start")
        victims = sorted({pid for g in groups for pid in _procs(g)})
        if fork:
            forked = _fork_owner(owner)
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        _wait_for(
            lambda: not [p for p in victims if _alive(p)], "the run to die with its owner", 60
        )
        assert forked is None or _alive(forked)  # the fork lives on: not what ended the run
    finally:
        _end(owner, forked)
    pb.ProcessSandbox(isolation=isolation).close()  # the next start reaps what is left
    assert _run_groups(owner.pid) == []
    assert _temp_dirs(owner.pid) == []


@pytest.mark.parametrize("fork", [False, True])
def test_owner_sigkill_under_docker_leaves_no_container(fork: bool) -> None:
    """The container goes with its owner, also when the owner had forked a child (which lives on
    with copies of the owner's descriptors, the attach socket among them unless closed)."""
    probe = _docker()
    owner = _owner("docker", {})
    forked = None
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "started\n"
        label = f"{OWNER_LABEL}={OWNER_HOST}:{owner.pid}"

        def left() -> list[dict]:
            return probe._client.api.containers(all=True, filters={"label": label})  # type: ignore[attr-defined]

        _wait_for(lambda: len(left()) == 1, "the owner's container")
        container = left()[0]["Id"]
        _wait_for(
            lambda: any("main.py" in c for c in _docker_top(probe, container).values()),
            "the run's code to start",
        )
        if fork:
            forked = _fork_owner(owner)
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        # The owner's socket on the keeper's stdin closed: the container stops and is removed
        # without any other sandbox starting (nothing outlives its owner).
        _wait_for(lambda: left() == [], "the container to go with its owner", 60)
        assert forked is None or _alive(forked)
    finally:
        _end(owner, forked)
        for container in left():  # after a failure: this test's container only
            probe._client.api.remove_container(container["Id"], force=True)  # type: ignore[attr-defined]
        probe.close()


def _docker_top(probe: object, container_id: str) -> dict[str, str]:
    """The processes in a container: {pid: command line}, from the daemon (``docker top``); none
    while it is created but not yet started (the daemon answers 409, "not running")."""
    import docker.errors

    try:
        top = probe._client.api.top(container_id)  # type: ignore[attr-defined]
    except docker.errors.APIError as err:
        if err.status_code == 409:
            return {}
        raise
    cmd = top["Titles"].index("CMD")
    return {row[1]: row[cmd] for row in top["Processes"]}


def _procs(group: str) -> list[int]:
    try:
        with open(os.path.join(group, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_without_control_groups_the_back_end_refuses_and_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = "no pids controller is mounted (cgroup v1 or v2)"
    monkeypatch.setitem(pb._cgroup_cache, os.getpid(), (None, missing))
    with pytest.raises(IsolationUnavailable, match="control groups") as err:
        pb.ProcessSandbox(isolation="bwrap")
    assert missing in str(err.value) and "allow_per_process_limits=True" in str(err.value)
    # The opt-out's RLIMIT_NPROC counts every process of the code's user, other runs' too (a
    # fork-bomb test beside this one): a wide one, so that this run starts on a busy machine.
    with pb.ProcessSandbox(
        isolation="bwrap", allow_per_process_limits=True, max_processes=4096
    ) as box:  # opt-out
        assert box.cgroup_layout is None
        assert box.run("print(6 * 7)", timeout_s=20).stdout == "42\n"


def test_swap_that_cannot_be_limited_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where swap is on and the kernel has no swap accounting, memory_mb would not hold: the run
    is refused with what is missing, unless the user accepts it. (This machine has no swap, so
    the kernel's two answers are stood in for: swap listed, the swap limit file absent.)"""
    real_write = cgroups._write

    def no_swap_files(path: str, value: str) -> None:
        if os.path.basename(path) in ("memory.swap.max", "memory.memsw.limit_in_bytes"):
            raise FileNotFoundError(path)
        real_write(path, value)

    monkeypatch.setattr(cgroups, "swap_active", lambda: True)
    monkeypatch.setattr(cgroups, "_write", no_swap_files)
    with pb.ProcessSandbox(isolation="bwrap") as box:
        with pytest.raises(SandboxError, match=r"swap is on \(/proc/swaps\)") as err:
            box.run("print(1)", timeout_s=20)
        assert "allow_per_process_limits=True" in str(err.value)
    with pb.ProcessSandbox(isolation="bwrap", allow_per_process_limits=True) as box:  # opt-out
        assert box.run("print(6 * 7)", timeout_s=20).stdout == "42\n"
    assert _run_groups(os.getpid()) == []  # the refused run's group was removed


def test_docker_forged_report_and_killed_bootstrap_discard_the_container() -> None:
    """Code that writes a report of its own and kills the bootstrap gets no say: the exit status
    comes from the daemon, and the container (not cleaned up) leaves the pool."""
    box = _docker(pool_size=1)
    try:
        code = (
            "import os, signal, sys\n"
            "sys.stderr.write('\\x1eagentgym:0123456789abcdef:0:0:0:0:0\\x1e')\n"
            "sys.stderr.flush()\n"
            "os.kill(os.getppid(), signal.SIGKILL)\n"
        )
        result = box.run(code, timeout_s=20)
        assert result.exit_code == 137 and result.misbehaved
        assert "agentgym:0123456789abcdef" in result.stderr  # not taken for the real report
        assert box.container_ids() == []  # discarded, not back in the pool
        assert box.run("print(1)", timeout_s=20).stdout == "1\n"
    finally:
        box.close()
    assert _containers(box) == []


def test_docker_refuses_a_daemon_that_cannot_enforce_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel without swap or pids accounting (as ``docker info`` reports it) is refused."""
    import docker

    _docker().close()
    real_info = docker.APIClient.info

    def info_without_pids(self: object) -> dict:
        return {**real_info(self), "PidsLimit": False, "SwapLimit": False}

    monkeypatch.setattr(docker.APIClient, "info", info_without_pids)
    with pytest.raises(SandboxError, match="cannot enforce swap limits, pids limits") as err:
        DockerSandbox()
    assert "allow_missing_limits=True" in str(err.value)
    box = DockerSandbox(allow_missing_limits=True)  # the explicit opt-out
    try:
        assert box.run("print(1)", timeout_s=20).stdout == "1\n"
    finally:
        box.close()
