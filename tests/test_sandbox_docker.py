"""The docker back end of sandboxes.code, against a real dockerd (``$DOCKER_HOST``).

In CI (``CI=true``) a missing daemon or image FAILS these tests (``.ci/setup_docker.sh`` starts
them); elsewhere they are skipped with the reason. The attacks are the shared
:class:`~tests.test_sandbox_process.SecuritySuite`.
"""

from __future__ import annotations

import errno
import os
import secrets
import threading
import time
from collections.abc import Iterator

import gymnasium
import pytest

import agentgym  # noqa: F401 - registers the ids
from sandboxes.code import SandboxError, resolve_backend
from sandboxes.code.base import CodeSandbox
from sandboxes.code.docker_backend import OWNER_LABEL, DockerSandbox, reap_orphans
from tests.test_sandbox_process import SecuritySuite

#: A label the tests put on the containers they make (beside the owner label), to find only theirs.
TEST_LABEL = "agentgym.test"


def _docker_or_fail(**kwargs: object) -> DockerSandbox:
    try:
        return DockerSandbox(**kwargs)  # type: ignore[arg-type]
    except SandboxError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide Docker (.ci/setup_docker.sh): {err}")
        pytest.skip(f"no Docker here: {err}")
        raise


def _containers(box: DockerSandbox, *, owner: str | None = None) -> list[dict]:
    label = f"{OWNER_LABEL}={owner or box._owner}"  # type: ignore[attr-defined]
    return box._client.api.containers(all=True, filters={"label": label})  # type: ignore[attr-defined]


class TestDockerSandbox(SecuritySuite):
    @pytest.fixture
    def box(self) -> Iterator[CodeSandbox]:
        sandbox = _docker_or_fail(pool_size=1)
        yield sandbox
        sandbox.close()


def test_container_is_locked_down() -> None:
    """Hand-read from the container's own view: user, capabilities, read-only root, no network."""
    box = _docker_or_fail()
    try:
        code = (
            "import os\n"
            "status = open('/proc/self/status').read()\n"
            "cap = [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]\n"
            "try:\n"
            "    open('/usr/x', 'w')\n"
            "    ro = False\n"
            "except OSError:\n"
            "    ro = True\n"
            "print(os.getuid(), os.getgid(), cap, ro, sorted(os.listdir('/sys/class/net')))\n"
        )
        result = box.run(code, timeout_s=20)
        assert result.stdout == "1000 1000 0000000000000000 True ['lo']\n", result
        (container,) = _containers(box)
        info = box._client.api.inspect_container(container["Id"])  # type: ignore[attr-defined]
        host = info["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["Init"] is True
        assert host["CapDrop"] == ["ALL"]
        assert host["PidsLimit"] == 64
        assert host["Memory"] == host["MemorySwap"] == 512 * 2**20
        assert host["NanoCpus"] == 10**9
        assert info["Config"]["User"] == "1001:1001"
    finally:
        box.close()


def test_close_leaves_no_container_even_mid_run() -> None:
    box = _docker_or_fail(pool_size=2)
    box.warm()
    assert len(_containers(box)) == 2
    lease = box.lease()
    lease.run("print(1)", timeout_s=20)
    box.close()
    box.close()
    assert _containers(box) == []
    with pytest.raises(RuntimeError, match="closed"):
        box.run("pass")


def test_misbehaving_run_gets_a_fresh_container_and_lease_ends_with_removal() -> None:
    box = _docker_or_fail(pool_size=1)
    try:
        box.run("pass", timeout_s=20)
        (first,) = box.container_ids()
        box.run("pass", timeout_s=20)
        assert box.container_ids() == [first]  # a clean run keeps the warm container
        box.run("while True: pass", timeout_s=1)
        assert box.container_ids() == []  # the timed-out one is gone
        lease = box.lease()
        lease.run("pass", timeout_s=20)
        (leased,) = box.container_ids()
        assert leased != first
        lease.close()
        lease.close()
        assert box.container_ids() == []  # a fresh container for the next episode
    finally:
        box.close()


#: A stand-in for the bootstrap that dies before its clean-up and report, as the real one did when a
#: fork bomb took the container's last process slot before the bootstrap's stdin thread started:
#: it fills the process limit with sleeping children of its own, then exits 1 with no report.
_DYING_BOOTSTRAP = """
import os, sys, time
sys.stdin.buffer.read(int(sys.stdin.buffer.readline()))
print("ran", flush=True)
try:
    while True:
        if os.fork() == 0:
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            time.sleep(600)
            os._exit(0)
except OSError:
    pass
sys.exit(1)
"""


def test_a_run_that_ends_without_its_report_discards_its_container(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No report from the bootstrap: its leftovers may be in the container, so it is never reused,
    and the process limit it hit is still reported (read from the host's cgroup files)."""
    from sandboxes.code import docker_backend

    box = _docker_or_fail(pool_size=1)
    try:
        box.run("pass", timeout_s=20)
        (first,) = box.container_ids()
        with monkeypatch.context() as patch:
            patch.setattr(docker_backend, "_BOOTSTRAP", _DYING_BOOTSTRAP)
            dying = box.run("pass", timeout_s=20)
        assert (dying.stdout, dying.exit_code, dying.timed_out) == ("ran\n", 1, False), dying
        assert dying.limit == "processes", dying
        assert first not in box.container_ids()  # discarded with its 63 sleeping children
        again = box.run("print(2)", timeout_s=20)
        assert again.ok and again.stdout == "2\n" and again.limit is None, again
        box.wait_removed()
        assert [c["Id"] for c in _containers(box)] == box.container_ids()
    finally:
        box.close()
    assert _containers(box) == []


def test_a_killed_bootstrap_is_judged_from_the_host_counters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The code kills the bootstrap while a grandchild holds the exec's streams: the run ends
    (the daemon closes them) without a report, exits 137 with no limit, and its container goes.
    Where this host's cgroup counters can be read, no second ``docker exec`` asks the container
    about OOM kills (it takes seconds on a busy daemon; the counters already answered)."""
    from sandboxes.code import docker_backend

    box = _docker_or_fail(pool_size=1)
    asked: list[str] = []
    looked = docker_backend.DockerSandbox._oom_killed
    monkeypatch.setattr(
        docker_backend.DockerSandbox,
        "_oom_killed",
        lambda self, b: asked.append(b.id) or looked(self, b),
    )
    try:
        box.run("pass", timeout_s=20)
        (first,) = box.container_ids()
        readable = docker_backend._host_counters(first)[0] >= 0
        code = (
            "import os, time\nif os.fork() == 0:\n    time.sleep(1000)\nos.kill(os.getppid(), 9)\n"
        )
        killed = box.run(code, timeout_s=60)
        assert (killed.exit_code, killed.timed_out, killed.limit) == (137, False, None), killed
        assert asked == ([] if readable else [first])
        box.wait_removed()
        assert first not in box.container_ids()
    finally:
        box.close()
    assert _containers(box) == []


#: Leaves a process behind whose main thread ended alone (the raw ``exit`` system call, not
#: ``exit_group``): its /proc status reads "Z" while its other thread writes /tmp/survivor.
_HALF_DEAD_SURVIVOR = """
import ctypes, os, platform, threading, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        def survive():
            while True:
                try:
                    open('/tmp/survivor', 'w').close()
                except OSError:
                    pass
                time.sleep(0.005)
        threading.Thread(target=survive).start()
        time.sleep(0.2)
        ctypes.CDLL(None).syscall({'x86_64': 60, 'aarch64': 93}[platform.machine()], 0)
    os._exit(0)
os.wait()
time.sleep(1.0)
print('left')
"""


def test_a_process_whose_main_thread_ended_is_killed_before_reuse() -> None:
    """A thread-group leader that is a zombie with live threads is still a process: the clean-up
    kills it, so the next run in the same container neither meets it nor its files."""
    box = _docker_or_fail(pool_size=1)
    try:
        box.run("pass", timeout_s=20)
        (first,) = box.container_ids()
        left = box.run(_HALF_DEAD_SURVIVOR, timeout_s=20)
        assert (left.stdout, left.exit_code) == ("left\n", 0), left
        probe = (
            "import os, time\n"
            "time.sleep(0.3)\n"
            "half_dead = []\n"
            "for pid in os.listdir('/proc'):\n"
            "    try:\n"
            "        st = open(f'/proc/{pid}/status').read()\n"
            "    except OSError:\n"
            "        continue\n"
            "    if 'State:\\tZ' in st and 'Threads:\\t1\\n' not in st:\n"
            "        half_dead.append(pid)\n"
            "print(os.path.exists('/tmp/survivor'), half_dead)\n"
        )
        for _ in range(2):
            after = box.run(probe, timeout_s=20)
            assert after.stdout == "False []\n", after
        assert box.container_ids() == [first]  # the clean-up succeeded: the container was kept
    finally:
        box.close()
    assert _containers(box) == []


def test_the_code_cannot_read_or_trace_the_bootstrap() -> None:
    """The code runs as the bootstrap's user: the bootstrap is undumpable (its memory, which holds
    the report's nonce, cannot be read through /proc) and ptrace is refused (EPERM), so the code
    cannot stop it before its clean-up and forge its report."""
    code = (
        "import ctypes, os\n"
        "try:\n"
        "    with open(f'/proc/{os.getppid()}/mem', 'rb', 0) as f:\n"
        "        print('mem opened')\n"
        "except OSError as e:\n"
        "    print('mem', type(e).__name__)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.ptrace.restype = ctypes.c_long\n"
        "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
        "r = libc.ptrace(16, os.getppid(), None, None)\n"  # PTRACE_ATTACH
        "print('ptrace', r, ctypes.get_errno())\n"
    )
    box = _docker_or_fail(pool_size=1)
    try:
        result = box.run(code, timeout_s=20)
    finally:
        box.close()
    assert result.stdout == f"mem PermissionError\nptrace -1 {errno.EPERM}\n", result


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        # a directory the code made unreadable and unsearchable, with a file in it
        (
            "import os\nos.makedirs('/tmp/locked')\nopen('/tmp/locked/f', 'w').close()\n"
            "os.chmod('/tmp/locked', 0)\nprint('left')\n",
            True,
        ),
        # a tree deeper than the bootstrap's Python can walk (its recursion limit is 1,000)
        (
            "import os\nos.chdir('/tmp')\nfor _ in range(3000):\n    os.mkdir('d')\n"
            "    os.chdir('d')\nprint('left')\n",
            None,
        ),
    ],
    ids=["chmod-0", "3000-deep"],
)
def test_what_the_code_leaves_in_tmp_never_reaches_the_next_run(
    code: str, kept: bool | None
) -> None:
    """The run keeps the code's own exit status whatever the clean-up meets; a directory made
    unreadable is opened and removed (the container is kept), a tree too deep to walk discards
    the container; either way the next run finds /tmp empty."""
    box = _docker_or_fail(pool_size=1)
    try:
        box.run("pass", timeout_s=20)
        (first,) = box.container_ids()
        left = box.run(code, timeout_s=20)
        assert (left.stdout, left.stderr, left.exit_code, left.limit) == ("left\n", "", 0, None)
        after = box.run("import os\nprint(os.listdir('/tmp'))\n", timeout_s=20)
        assert after.stdout == "[]\n", after
        if kept is not None:
            assert (box.container_ids() == [first]) is kept
    finally:
        box.close()
    assert _containers(box) == []


def test_a_port_left_in_time_wait_never_reaches_the_next_run() -> None:
    """Sockets outlive their processes: a TCP connection the code closed first holds its port in
    TIME_WAIT for 60 s. The container is not reused, so the next run can bind that port and sees
    no socket of the earlier run in /proc/net/tcp."""
    left = (
        "import socket\n"
        "server = socket.socket()\n"
        "server.bind(('127.0.0.1', 8000))\n"
        "server.listen()\n"
        "client = socket.create_connection(('127.0.0.1', 8000))\n"
        "accepted, _ = server.accept()\n"
        "accepted.close()\n"  # the server's end closes first: it waits in TIME_WAIT
        "client.close()\n"
        "server.close()\n"
        "print(len(open('/proc/net/tcp').read().splitlines()) > 1)\n"
    )
    after = (
        "import socket\n"
        "print(open('/proc/net/tcp').read().splitlines()[1:])\n"
        "socket.socket().bind(('127.0.0.1', 8000))\n"
        "print('bound')\n"
    )
    box = _docker_or_fail(pool_size=1)
    try:
        first = box.run(left, timeout_s=20)
        assert (first.stdout, first.exit_code) == ("True\n", 0), first
        second = box.run(after, timeout_s=20)
        assert (second.stdout, second.exit_code) == ("[]\nbound\n", 0), second
    finally:
        box.close()
    assert _containers(box) == []


def test_orphans_of_dead_processes_are_reaped() -> None:
    box = _docker_or_fail()
    try:
        dead_pid = 2**22 + 17  # above pid_max's default: no such process
        owner = f"{box._owner.rpartition(':')[0]}:{dead_pid}"  # type: ignore[attr-defined]
        box._client.containers.create(box.image, ["true"], labels={OWNER_LABEL: owner})  # type: ignore[attr-defined]
        assert len(_containers(box, owner=owner)) == 1
        reap_orphans(box._client)  # type: ignore[attr-defined]
        assert _containers(box, owner=owner) == []
    finally:
        box.close()


def _tagged() -> tuple[dict[str, str], str]:
    """A label of this test's own (extra labels on its sandbox's containers) and its filter."""
    tag = f"t{os.getpid()}-{secrets.token_hex(6)}"
    return {TEST_LABEL: tag}, f"{TEST_LABEL}={tag}"


def test_a_failure_after_create_leaves_no_container(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container is removed whatever fails after the daemon created it: the answer to the
    create request lost (no id came back), or the start refused."""
    labels, selector = _tagged()
    box = _docker_or_fail(labels=labels)
    api = box._client.api  # type: ignore[attr-defined]
    create = api.create_container

    def create_then_lose_the_answer(*args: object, **kwargs: object) -> dict:
        create(*args, **kwargs)
        raise ConnectionError("the answer was lost")

    def refuse(*args: object, **kwargs: object) -> None:
        raise ConnectionError("start refused")

    try:
        for name, broken in (("create_container", create_then_lose_the_answer), ("start", refuse)):
            with monkeypatch.context() as patch:
                patch.setattr(api, name, broken)
                with pytest.raises(SandboxError, match="cannot start a sandbox container"):
                    box.run("pass", timeout_s=20)
                lease = box.lease()
                with pytest.raises(SandboxError, match="cannot start a sandbox container"):
                    lease.run("pass", timeout_s=20)
                lease.close()
            assert api.containers(all=True, filters={"label": selector}) == [], name
        assert box.run("print(1)", timeout_s=60).stdout == "1\n"  # the sandbox still works
    finally:
        box.close()
    assert api.containers(all=True, filters={"label": selector}) == []


def test_concurrent_episode_starts_all_succeed_and_leave_nothing() -> None:
    labels, selector = _tagged()
    box = _docker_or_fail(labels=labels)
    outcomes: list[object] = []

    def episode(i: int) -> None:
        lease = box.lease()
        try:
            outcomes.append(lease.run(f"print({i})", timeout_s=120, memory_mb=128).stdout)
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            outcomes.append(err)
        finally:
            lease.close()

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(map(str, outcomes)) == sorted(f"{i}\n" for i in range(8))
        assert box._client.api.containers(all=True, filters={"label": selector}) == []  # type: ignore[attr-defined]
    finally:
        box.close()


def test_missing_image_error_says_how_to_build() -> None:
    _docker_or_fail().close()
    with pytest.raises(SandboxError, match="python -m sandboxes.code.image build"):
        DockerSandbox(image="agentgym-sandbox:does-not-exist")


def test_auto_backend_picks_docker_when_the_daemon_answers() -> None:
    _docker_or_fail().close()
    assert resolve_backend("auto") == "docker"


def test_env_close_leaves_no_container() -> None:
    _docker_or_fail().close()
    env = gymnasium.make("agentgym/CodeExecGenerated-v0", backend="docker")
    env.reset(seed=0)
    assert env.step(env.unwrapped.oracle_answer())[1] == 1.0
    sandbox = env.unwrapped._sandbox
    assert isinstance(sandbox, DockerSandbox) and len(_containers(sandbox)) == 1
    env.reset(seed=1)  # the episode's container is removed at reset
    assert _containers(sandbox) == []
    assert env.step(env.unwrapped.oracle_answer())[1] == 1.0
    env.close()
    env.close()
    assert _containers(sandbox) == []


def test_humaneval_oracle_scores_all_164_with_docker() -> None:
    """The canonical solution of every HumanEval problem passes every one of its tests."""
    from tests.test_code_exec import run_oracle_on_humaneval

    box = _docker_or_fail(pool_size=2)
    try:
        box.warm()
        start = time.monotonic()
        failures, total_tests = run_oracle_on_humaneval(box, workers=2)
        print(f"docker: 164 HumanEval problems in {time.monotonic() - start:.1f} s")
    finally:
        box.close()
    assert failures == []
    assert total_tests == 1130  # sum of per-problem test counts (tests/test_code_exec.py)
