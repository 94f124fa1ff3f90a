"""The ``docker`` back end: a pool of warm, locked-down containers; one ``docker exec`` per run.

Every container is created from the sandbox image (:mod:`sandboxes.code.image`) with

* ``--network none``; ``--memory`` = ``--memory-swap`` (no swap); ``--pids-limit`` (64);
  ``--cpus`` (1); ``--ulimit fsize`` (16 MiB) and ``nofile`` (256);
* ``--read-only`` root file system, with tmpfs ``/work`` and ``/tmp`` (64 MiB each, ``nosuid``,
  ``nodev``) and Docker's own 64 MiB ``/dev/shm``;
* ``--init`` (docker-init as PID 1: it reaps orphans and forwards signals; Python as PID 1 would
  ignore SIGTERM), ``--cap-drop ALL``, ``--security-opt no-new-privileges``;
* Docker's default seccomp profile, and on top of it, installed by each run's bootstrap before the
  code starts, the filter of :mod:`sandboxes.code.seccomp` (key rings, io_uring, ptrace and
  ``prlimit64`` on another process refused: Docker's profile refuses the first, not always the
  others); the bootstrap also makes
  itself undumpable, so the code (same user) cannot read its memory, which holds the report's
  nonce, or write its /proc files;
* the idle process (the keeper: ``cat`` reading its standard input) running as user ``keeper``
  (uid 1001), and every run as user ``sandbox`` (uid 1000): neither is root, and the code cannot
  signal the keeper;
* ``--attach stdin`` with ``StdinOnce`` and ``--rm``: the owner holds the container's standard
  input open through an attached socket. When the owner process goes (exit, crash, SIGKILL), the
  kernel closes the socket, the daemon closes the keeper's input, the keeper exits, docker-init
  kills every process left and the daemon removes the container: running code dies with its
  owner, as under the process back end. A child the owner forks without ``exec`` lets go of its
  copies of these sockets at once (``os.register_at_fork``), so it never keeps them open.

A run execs a small bootstrap (``python3 -I -c``) that receives the files and stdin as one
length-prefixed JSON message on its standard input, writes them to ``/work``, runs
``python3 -I main.py`` with the output going straight to the exec's streams, and afterwards kills
every other process of uid 1000 (``kill(-1, SIGKILL)`` until none is left), empties ``/work``,
``/tmp`` and ``/dev/shm``, and removes the IPC state of the run: System V shared memory segments,
semaphore sets and message queues (``/proc/sysvipc``, ``IPC_RMID``; the container has its own IPC
namespace) and POSIX message queues (``/dev/mqueue``); a socket left in the network namespace
(``/proc/net``: TCP's TIME_WAIT holds a port for 60 s after its process died) counts as not
clean. So the next run in the same container starts clean. Its last bytes on stderr are a
report (a per-run nonce, then whether the container's OOM-kill and refused-fork counters rose,
whether a writable mount filled and whether the clean-up removed everything), which the host
strips from ``stderr`` and turns into ``ExecResult.limit``; a container whose clean-up left
anything is discarded, and the run keeps the code's own exit status. A run that ends without
its report (the bootstrap did not finish its clean-up) is never reused: its container is
discarded.

The host enforces the timeout: at ``timeout_s`` (or once the output passes ``output_kill_mb``)
it stops reading, closes the exec's connection and returns the result at once; the container is
killed and removed in the background (``docker rm -f``: SIGKILL to every process in it, which no
code can ignore), so a run that floods its output still returns within ``timeout_s`` + 1 s, and
:meth:`DockerSandbox.close` waits for those removals. A run that timed out, was OOM-killed or died
of a signal ("misbehaved") never leaves its container in the pool: the container is removed and a
new one started on demand. :meth:`DockerSandbox.lease` hands out one container for an episode,
which is removed when the lease ends (a fresh container for every episode).

Containers are named ``agentgym-sbx-<pid>-<random>``, so that one whose creation failed half-way
(the daemon made it, its answer was lost) is still found and removed: nothing that failed after
the create request is left behind. One thread at a time creates a container and takes its attach
connection out of the client's connection pool (sized for many threads at once).

Containers carry the label ``agentgym.sandbox.owner=<hostname>:<pid>``; a new
:class:`DockerSandbox` removes containers whose owner process on this host is gone (belt and
braces: one whose owner died between creating it and attaching), and
:meth:`DockerSandbox.close` removes its own.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandboxes.code import seccomp
from sandboxes.code.base import (
    DEFAULT_MEMORY_MB,
    OUTPUT_LIMIT,
    CappedBuffer,
    CodeSandbox,
    ExecResult,
    Runner,
    SandboxError,
    first_limit,
    program_text,
)
from sandboxes.code.cgroups import _alive
from sandboxes.code.image import DEFAULT_IMAGE, KEEPER_UID, SANDBOX_UID

__all__ = ["DockerSandbox", "DockerLease", "docker_available", "OWNER_LABEL"]

OWNER_LABEL = "agentgym.sandbox.owner"
#: Connections the Docker client keeps for reuse: one per thread that talks to the daemon at once.
_MAX_POOL_SIZE = 64

#: The program each run starts in its container (``programs/docker_bootstrap.py``): writes the
#: files, runs main.py, then cleans the container for the next run and reports.
_BOOTSTRAP = program_text("docker_bootstrap.py")
#: The seccomp filter the bootstrap installs before it runs the code (:mod:`sandboxes.code.seccomp`).
_SECCOMP = base64.b64encode(seccomp.filter_bytes()).decode() if seccomp.supported() else ""


def docker_available(base_url: str | None = None, image: str = DEFAULT_IMAGE) -> bool:
    """Whether a Docker daemon answers (at ``base_url`` or ``$DOCKER_HOST``) and has ``image``."""
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
    except Exception:  # noqa: BLE001 - the SDK raises several types for "no daemon"
        return False
    try:
        client.ping()
        client.images.get(image)
        return True
    except Exception:  # noqa: BLE001
        return False
    finally:
        client.close()


#: Descriptors of the open lifelines (attach sockets) of every sandbox of this process.
_LIFELINES: set[int] = set()


def _drop_lifelines_in_child() -> None:
    """After ``fork``: the child lets go of its copies of the lifelines, so that a child living on
    (without ``exec``, which closes them: they are close-on-exec) never keeps a container alive
    after its owner dies. Each copy is replaced by ``/dev/null`` rather than closed, so that the
    number stays taken: the child's socket objects may still close it later."""
    if not _LIFELINES:
        return
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    for fd in _LIFELINES:
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
    _LIFELINES.clear()


os.register_at_fork(after_in_child=_drop_lifelines_in_child)


def _hold_lifeline(lifeline: Any) -> None:
    with contextlib.suppress(Exception):
        _LIFELINES.add(lifeline.fileno())


def _close_lifeline(lifeline: Any) -> None:
    if lifeline is None:
        return
    with contextlib.suppress(Exception):
        _LIFELINES.discard(lifeline.fileno())  # first: its number may be reused once closed
    with contextlib.suppress(Exception):
        lifeline.close()


@dataclass
class _Box:
    id: str
    memory_mb: int
    runs: int = 0
    dead: bool = False  # killed mid-run: never reused
    oom_seen: int = 0  # the container's OOM-kill and refused-fork counts after its last run
    pids_seen: int = 0
    lifeline: Any = None  # the attached stdin socket: the container lives while it is open


class DockerSandbox(CodeSandbox):
    """Code execution in pooled Docker containers (module docstring).

    Containers start lazily (on the first run) or with :meth:`warm`. :meth:`run` uses at most
    ``pool_size`` containers at once (a run waits for a free one); each open :meth:`lease` holds one
    more of its own.

    Args:
        image: the sandbox image (default ``agentgym-sandbox:py3``).
        pool_size: most containers used by :meth:`run` at once (>= 1); runs beyond it wait.
        cpus: CPU quota per container, in cores.
        pids_limit: most processes per container.
        tmpfs_mb: size of the ``/work`` and ``/tmp`` tmpfs mounts, MiB.
        max_file_mb: largest file the code may write, MiB.
        output_limit: bytes kept per output stream.
        output_kill_mb: a run whose output (both streams) passes this many MiB is killed
            (``limit="output"``); below it, output past ``output_limit`` is read and dropped.
        base_url: daemon address (default ``$DOCKER_HOST``, else the default socket).
        allow_missing_limits: start even when the daemon reports that the kernel cannot enforce
            a memory, swap or process limit (``docker info``), instead of refusing.
        labels: extra labels for every container (besides :data:`OWNER_LABEL`).

    Raises:
        SandboxError: no daemon answers, or the image is missing (the message says how to build it).

    Example:
        >>> with DockerSandbox(pool_size=2) as box:  # doctest: +SKIP
        ...     box.run("print(6 * 7)").stdout
        '42\\n'
    """

    backend = "docker"

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        pool_size: int = 1,
        cpus: float = 1.0,
        pids_limit: int = 64,
        tmpfs_mb: int = 64,
        max_file_mb: int = 16,
        output_limit: int = OUTPUT_LIMIT,
        output_kill_mb: int = 32,
        base_url: str | None = None,
        allow_missing_limits: bool = False,
        labels: Mapping[str, str] | None = None,
    ):
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {pool_size!r}")
        try:
            import docker
        except ImportError as err:
            raise SandboxError(
                "the docker back end needs the Docker SDK: pip install 'agentgym[code]'"
            ) from err
        try:
            # One client for every thread: its connection pool holds a connection per thread
            # that talks to the daemon at once (the default 10 made busy threads discard theirs).
            pool = {"max_pool_size": _MAX_POOL_SIZE}
            self._client = (
                docker.DockerClient(base_url=base_url, **pool)
                if base_url
                else docker.from_env(**pool)
            )
            self._client.ping()
        except Exception as err:  # noqa: BLE001
            raise SandboxError(
                f"cannot reach a Docker daemon ({err}): start one and set DOCKER_HOST "
                "(`source .ci/setup_docker.sh` starts a private one), or use backend='process'"
            ) from err
        try:
            self._client.images.get(image)
        except docker.errors.ImageNotFound as err:
            self._client.close()
            raise SandboxError(
                f"the sandbox image {image!r} is missing: build it offline with "
                "`python -m sandboxes.code.image build` (root, debootstrap), or "
                "`docker build -t agentgym-sandbox:py3 sandboxes/docker` with a registry"
            ) from err
        missing = [] if allow_missing_limits else _missing_limits(self._client)
        if missing:
            self._client.close()
            raise SandboxError(
                f"the Docker daemon says this kernel cannot enforce {', '.join(missing)} "
                "(docker info), so a run could take more than its limits: enable the missing "
                "cgroup controllers (e.g. swapaccount=1, a kernel with the pids controller), use "
                "the process back end, or pass allow_missing_limits=True"
            )
        self.image = image
        self.pool_size = pool_size
        self.cpus = cpus
        self.pids_limit = pids_limit
        self.tmpfs_mb = tmpfs_mb
        self.max_file_mb = max_file_mb
        self.max_file_bytes = max_file_mb * 2**20
        self.work_bytes = tmpfs_mb * 2**20
        self.output_limit = output_limit
        self.output_kill_bytes = output_kill_mb * 2**20
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._labels = dict(labels or {})
        self._create_lock = threading.Lock()
        self._cond = threading.Condition()
        self._idle: list[_Box] = []
        self._all: dict[str, _Box] = {}
        self._starting = 0
        self._removing: list[threading.Thread] = []
        self._closed = False
        self.containers_started = 0
        reap_orphans(self._client)

    # ------------------------------------------------------------------ containers

    def _create(self, memory_mb: int) -> _Box:
        from docker.types import Ulimit

        fsize = self.max_file_mb * 2**20
        tmpfs = f"rw,nosuid,nodev,size={self.tmpfs_mb}m,mode=1777"
        api = self._client.api
        host_config = api.create_host_config(
            network_mode="none",
            mem_limit=f"{memory_mb}m",
            memswap_limit=f"{memory_mb}m",
            pids_limit=self.pids_limit,
            nano_cpus=int(self.cpus * 1e9),
            read_only=True,
            tmpfs={"/work": tmpfs, "/tmp": tmpfs},
            init=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            ulimits=[
                Ulimit(name="fsize", soft=fsize, hard=fsize),
                Ulimit(name="nofile", soft=256, hard=256),
            ],
            auto_remove=True,  # once the keeper exits, the daemon removes the container
        )
        # A name of our own: when the daemon created the container but its answer was lost (a
        # broken connection), the name still finds it, and it is removed like any other failure.
        name = f"agentgym-sbx-{os.getpid()}-{secrets.token_hex(8)}"
        container_id, lifeline = name, None
        try:
            # One thread at a time creates a container and takes its attach connection out of
            # the client's connection pool (the pool is shared by every thread of the sandbox).
            with self._create_lock:
                container_id = api.create_container(
                    self.image,
                    # The keeper: reads its standard input until end of file. The daemon closes
                    # it when the one attached client (the owner's socket below) goes, so the
                    # container stops (docker-init kills every process in it) when the owner
                    # dies, however it dies.
                    command=["sh", "-c", "exec cat > /dev/null"],
                    user=f"{KEEPER_UID}:{KEEPER_UID}",
                    stdin_open=True,
                    detach=False,  # with stdin_open: StdinOnce, closed when the client detaches
                    labels={**self._labels, OWNER_LABEL: self._owner},
                    name=name,
                    hostname="sandbox",
                    working_dir="/work",
                    environment={},
                    host_config=host_config,
                )["Id"]
                lifeline = api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
                _hold_lifeline(lifeline)
            api.start(container_id)
        except BaseException:
            # Created, maybe started: never left behind (``--rm`` only removes a stopped one).
            _close_lifeline(lifeline)
            _remove_container(api, container_id)
            raise
        self.containers_started += 1
        return _Box(container_id, memory_mb, lifeline=lifeline)

    def _remove(self, box: _Box) -> None:
        """Remove ``box``'s container: at once, or in the background for one killed mid-run
        (whose removal may wait on the daemon; ``close`` waits for those)."""

        def remove() -> None:
            _remove_container(self._client.api, box.id)
            _close_lifeline(box.lifeline)

        if not box.dead:
            remove()
            return
        thread = threading.Thread(target=remove, daemon=True)
        with self._cond:
            self._removing = [t for t in self._removing if t.is_alive()] + [thread]
        thread.start()

    def wait_removed(self, timeout_s: float = 60.0) -> None:
        """Wait until the containers being removed are gone."""
        with self._cond:
            threads = list(self._removing)
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def warm(self, count: int | None = None, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        """Start containers (in parallel) until ``count`` (default ``pool_size``) are idle."""
        want = min(self.pool_size, count or self.pool_size)
        with self._cond:
            missing = max(0, want - len(self._idle))
            missing = min(missing, self.pool_size - len(self._all) - self._starting)
            self._starting += missing
        boxes: list[_Box] = []
        errors: list[BaseException] = []

        def start() -> None:
            try:
                boxes.append(self._create(memory_mb))
            except BaseException as err:  # noqa: BLE001 - reported below
                errors.append(err)

        threads = [threading.Thread(target=start) for _ in range(missing)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._cond:
            self._starting -= missing
            for box in boxes:
                self._all[box.id] = box
                self._idle.append(box)
            self._cond.notify_all()
        if errors:
            raise SandboxError(f"cannot start a sandbox container: {errors[0]}") from errors[0]

    def _acquire(self, memory_mb: int, *, bounded: bool = True) -> _Box:
        """An idle container, else a new one; ``bounded``: wait while ``pool_size`` exist.

        Leases are unbounded: each environment holds one for its episode, and a cap shared by all
        environments of a process would let one env's open episode block another's forever.
        """
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("this sandbox is closed")
                if self._idle:
                    box = self._idle.pop()
                    break
                if not bounded or len(self._all) + self._starting < self.pool_size:
                    self._starting += 1
                    box = None
                    break
                self._cond.wait()
        if box is None:
            try:
                box = self._create(memory_mb)
            except Exception as err:
                with self._cond:
                    self._starting -= 1
                    self._cond.notify_all()
                raise SandboxError(f"cannot start a sandbox container: {err}") from err
            with self._cond:
                self._starting -= 1
                self._all[box.id] = box
        if box.memory_mb != memory_mb:
            self._client.api.update_container(
                box.id, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m"
            )
            box.memory_mb = memory_mb
        return box

    def _release(self, box: _Box, *, discard: bool) -> None:
        with self._cond:
            keep = not discard and not self._closed and box.id in self._all
            if keep:
                self._idle.append(box)
            else:
                self._all.pop(box.id, None)
            self._cond.notify_all()
        if not keep:
            self._remove(box)

    # ------------------------------------------------------------------ runs

    def _run(
        self, all_files: dict[str, bytes], stdin: str, timeout_s: float, memory_mb: int
    ) -> ExecResult:
        box = self._acquire(memory_mb)
        result: ExecResult | None = None
        try:
            result = self._exec(box, all_files, stdin, timeout_s)
        finally:
            self._release(box, discard=result is None or result.misbehaved or box.dead)
        return result

    def lease(self) -> DockerLease:
        """One container for a sequence of runs (an episode); removed when the lease closes."""
        return DockerLease(self)

    def _exec(self, box: _Box, files: dict[str, bytes], stdin: str, timeout_s: float) -> ExecResult:
        api = self._client.api
        nonce = secrets.token_hex(8)
        message = json.dumps(
            {
                "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
                "stdin": base64.b64encode(stdin.encode()).decode(),
                "nonce": nonce,
                "seccomp": _SECCOMP,
            }
        ).encode()
        start = time.monotonic()
        try:
            exec_id = api.exec_create(
                box.id,
                ["python3", "-I", "-c", _BOOTSTRAP],
                stdin=True,
                user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                workdir="/work",
                environment={"HOME": "/work", "LANG": "C.UTF-8"},
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
        except Exception as err:  # noqa: BLE001
            raise SandboxError(f"docker exec failed: {err}") from err
        raw: socket.socket = getattr(sock, "_sock", sock)
        out, err_buf = CappedBuffer(self.output_limit), CappedBuffer(self.output_limit)
        tail = bytearray()
        ended = "eof"
        try:
            raw.sendall(str(len(message)).encode() + b"\n" + message)
            ended = _read_frames(raw, out, err_buf, tail, start + timeout_s, self.output_kill_bytes)
        except OSError:
            pass  # the exec's connection broke: judged by exec_inspect below
        with contextlib.suppress(OSError):
            raw.close()
        with contextlib.suppress(Exception):
            sock.close()
        box.runs += 1
        hit: set[str] = set()
        if ended != "eof":
            # Timed out or flooding: the container is killed and removed in the background (the
            # run never returns to the pool), so the result comes back at once, whatever the
            # daemon is still doing with the output.
            box.dead = True
            hit.add("timeout" if ended == "deadline" else "output")
            hit |= _host_limits(box)[0]
            return ExecResult(
                stdout=out.text(),
                stderr=err_buf.text(),
                exit_code=137,
                timed_out=ended == "deadline",
                oom_killed=False,
                duration_s=time.monotonic() - start,
                truncated=out.truncated or err_buf.truncated,
                limit=first_limit(hit),
            )
        duration = time.monotonic() - start
        report = _REPORT.search(bytes(tail))
        counted = False  # whether the host's own OOM-kill count was read for this run
        if report is not None and report.group(1).decode() == nonce:
            err_buf.cut_tail(len(tail) - report.start())
            for kind, flag in zip(
                ("memory", "processes", "disk"), report.groups()[1:4], strict=True
            ):
                if flag == b"1":
                    hit.add(kind)
            if report.group(5) == b"0":  # the clean-up left something: never reused
                box.dead = True
            box.oom_seen, box.pids_seen = int(report.group(6)), int(report.group(7))
        else:
            # No report: the bootstrap ended before its clean-up finished, so processes or files
            # of this run may be left in the container. It is discarded, never reused, and the
            # limits it hit are read from the host's cgroup files, as after a timeout.
            box.dead = True
            found, counted = _host_limits(box)
            hit |= found
        # The exit status comes from the daemon, never from the report: the code could write a
        # report of its own and kill the bootstrap (then the container must not be reused).
        info = _exec_inspect(api, exec_id)
        exit_code = info.get("ExitCode")
        if exit_code is None or info.get("Running"):
            exit_code = 137
        oom = "memory" in hit
        if not oom and exit_code == 137 and not counted:
            # (no second look when the host's own counters were just read: a docker exec takes
            # seconds on a busy daemon, and the run must return within timeout_s + 1 s)
            oom = self._oom_killed(box)
        if oom:
            hit.add("memory")
        if out.truncated or err_buf.truncated:
            hit.add("output")
        return ExecResult(
            stdout=out.text(),
            stderr=err_buf.text(),
            exit_code=int(exit_code),
            timed_out=False,
            oom_killed=oom,
            duration_s=duration,
            truncated=out.truncated or err_buf.truncated,
            limit=first_limit(hit),
        )

    def _oom_killed(self, box: _Box) -> bool:
        """Whether the kernel OOM killer struck in this container (its memory cgroup's count)."""
        try:
            if self._client.api.inspect_container(box.id)["State"].get("OOMKilled"):
                return True
            exec_id = self._client.api.exec_create(
                box.id,
                [
                    "cat",
                    "/sys/fs/cgroup/memory/memory.oom_control",
                    "/sys/fs/cgroup/memory.events",
                ],
                user=f"{KEEPER_UID}:{KEEPER_UID}",
            )["Id"]
            text = self._client.api.exec_start(exec_id).decode(errors="replace")
        except Exception:  # noqa: BLE001 - no evidence of an OOM kill
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return True
        return False

    # ------------------------------------------------------------------ life cycle

    def close(self) -> None:
        with self._cond:
            self._closed = True
            boxes = list(self._all.values())
            self._all.clear()
            self._idle.clear()
            self._cond.notify_all()
        for box in boxes:
            self._remove(box)
        self.wait_removed()
        with contextlib.suppress(Exception):
            self._client.close()

    def container_ids(self) -> list[str]:
        """Ids of the containers this sandbox holds now."""
        with self._cond:
            return list(self._all)

    def __repr__(self) -> str:
        return f"DockerSandbox(image={self.image!r}, pool_size={self.pool_size})"


class DockerLease(Runner):
    """One container of a :class:`DockerSandbox`, held for several runs (an episode).

    A run that misbehaves replaces the container (the next run of the lease gets a new one).
    :meth:`close` removes the container, so the next episode starts in a fresh one.
    """

    def __init__(self, sandbox: DockerSandbox):
        self.sandbox = sandbox
        self._box: _Box | None = None

    def _run(
        self, all_files: dict[str, bytes], stdin: str, timeout_s: float, memory_mb: int
    ) -> ExecResult:
        """As :meth:`DockerSandbox.run`, in this lease's container."""
        if self._box is None:
            self._box = self.sandbox._acquire(memory_mb, bounded=False)
        elif self._box.memory_mb != memory_mb:
            self.sandbox._client.api.update_container(
                self._box.id, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m"
            )
            self._box.memory_mb = memory_mb
        result: ExecResult | None = None
        try:
            result = self.sandbox._exec(self._box, all_files, stdin, timeout_s)
        finally:
            if result is None or result.misbehaved or self._box.dead:
                box, self._box = self._box, None
                self.sandbox._release(box, discard=True)
        return result

    def files_too_large(
        self, code: str, files: Mapping[str, str | bytes] | None = None
    ) -> str | None:
        """As :meth:`DockerSandbox.files_too_large`."""
        return self.sandbox.files_too_large(code, files)

    def close(self) -> None:
        """Remove the lease's container (if one was started); may be called twice."""
        box, self._box = self._box, None
        if box is not None:
            self.sandbox._release(box, discard=True)


#: The bootstrap's last bytes on stderr: nonce, then 0/1 for memory, processes, disk and "clean",
#: then the container's OOM-kill and refused-fork counts.
_REPORT = re.compile(rb"\x1eagentgym:([0-9a-f]+):([01]):([01]):([01]):([01]):(\d+):(\d+)\x1e$")
_TAIL = 256


def _read_frames(
    raw: socket.socket,
    out: CappedBuffer,
    err: CappedBuffer,
    tail: bytearray,
    deadline: float,
    kill_bytes: int,
) -> str:
    """Read Docker's multiplexed stream (8-byte headers) until EOF.

    Returns ``"eof"``; ``"deadline"`` when ``deadline`` passed first; ``"flood"`` when more than
    ``kill_bytes`` of output came. ``tail`` keeps the last bytes of stderr (the report).
    """
    buffer = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "deadline"
        raw.settimeout(min(remaining, 1.0))
        try:
            chunk = raw.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return "eof"
        if not chunk:
            return "eof"
        buffer += chunk
        while len(buffer) >= 8:
            stream, size = buffer[0], struct.unpack(">I", buffer[4:8])[0]
            if len(buffer) < 8 + size:
                break
            payload, buffer = buffer[8 : 8 + size], buffer[8 + size :]
            if stream == 2:
                err.write(payload)
                tail += payload
                del tail[:-_TAIL]
            else:
                out.write(payload)
        if out.total + err.total > kill_bytes:
            return "flood"


def _missing_limits(client: Any) -> list[str]:
    """The limits ``docker info`` says the kernel cannot enforce (memory, swap, pids)."""
    try:
        info = client.info()
    except Exception:  # noqa: BLE001 - no answer: the calls after this one report the daemon
        return []
    names = {"MemoryLimit": "memory limits", "SwapLimit": "swap limits", "PidsLimit": "pids limits"}
    return [text for key, text in names.items() if info.get(key) is False]


def _host_limits(box: _Box) -> tuple[set[str], bool]:
    """The limits (``"memory"``, ``"processes"``) whose host-side counts rose since ``box``'s last
    report: for a run that left no report of its own (timed out, flooded, or its bootstrap died);
    and whether the OOM-kill count could be read on this host at all."""
    oom_now, pids_now = _host_counters(box.id)
    return {
        kind
        for kind, rose in (
            ("memory", oom_now > box.oom_seen),
            ("processes", pids_now > box.pids_seen),
        )
        if rose
    }, oom_now >= 0


def _host_counters(container_id: str) -> tuple[int, int]:
    """The container's OOM-kill and refused-fork counts from this host's cgroup files (cgroupfs
    or systemd driver, v1 or v2); ``(-1, -1)`` when the daemon is not local or they are elsewhere.
    """
    found = [-1, -1]
    roots = {
        "memory": (f"/sys/fs/cgroup/memory/docker/{container_id}", "memory.oom_control"),
        "pids": (f"/sys/fs/cgroup/pids/docker/{container_id}", "pids.events"),
    }
    v2 = [
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope",
        f"/sys/fs/cgroup/docker/{container_id}",
    ]
    for index, (key, (v1_dir, v1_file)) in enumerate(roots.items()):
        candidates = [os.path.join(v1_dir, v1_file)]
        candidates += [
            os.path.join(d, "memory.events" if key == "memory" else "pids.events") for d in v2
        ]
        name = "oom_kill" if key == "memory" else "max"
        for path in candidates:
            with contextlib.suppress(OSError, ValueError), open(path) as f:
                for line in f:
                    field, _, value = line.partition(" ")
                    if field == name:
                        found[index] = int(value)
                break
    return found[0], found[1]


def _exec_inspect(api: Any, exec_id: str) -> dict[str, Any]:
    for _ in range(50):
        try:
            info = api.exec_inspect(exec_id)
        except Exception:  # noqa: BLE001 - the container may be gone after a kill
            return {}
        if not info.get("Running"):
            return info
        time.sleep(0.02)
    return info


def reap_orphans(client: Any) -> list[str]:
    """Remove sandbox containers whose owner process (on this host) no longer exists."""
    host = socket.gethostname()
    removed = []
    try:
        containers = client.api.containers(all=True, filters={"label": OWNER_LABEL})
    except Exception:  # noqa: BLE001
        return removed
    for c in containers:
        owner = c.get("Labels", {}).get(OWNER_LABEL, "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host != host or not pid.isdigit() or _alive(int(pid)):
            continue
        _remove_container(client.api, c["Id"])
        removed.append(c["Id"])
    return removed


def _remove_container(api: Any, container_id: str, wait_s: float = 60.0) -> None:
    """``docker rm -f``, then wait until the container is gone: one that stopped on its own is
    already being removed by the daemon (``--rm``), and ``rm -f`` then returns at once."""
    with contextlib.suppress(Exception):
        api.remove_container(container_id, force=True, v=True)
    with contextlib.suppress(Exception):  # 404: already gone
        api.wait(container_id, timeout=wait_s, condition="removed")
