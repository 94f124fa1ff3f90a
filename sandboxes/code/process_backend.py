"""The ``process`` back end: a local child process, isolated by bubblewrap or ``unshare``.

Each run gets a fresh temporary directory (mounted as ``/work``), a cleared environment, and these
limits (``resource.setrlimit`` in the child before ``exec``): address space ``memory_mb`` MiB, CPU
time ``ceil(timeout_s) + 1`` s, file size ``max_file_mb`` (16 MiB), ``max_processes`` (64) processes
of its user, 256 open files, no core dumps. When the caller is root, the child first drops to user
``nobody`` (uid/gid 65534, no supplementary groups) so that the process limit binds and no root
file is writable.

Isolation, the first that works (``isolation="auto"``):

* ``bwrap`` (``apt-get install bubblewrap``): ``--unshare-all`` (network, PID, IPC, UTS, cgroup and
  user namespaces), a new root holding only a read-only ``/usr`` (plus the ``/bin``, ``/lib*``
  links, ``/etc/ld.so.cache`` and the Python prefix when it lies outside ``/usr``), a fresh
  ``/proc`` and ``/dev``, a 64 MiB tmpfs ``/tmp``, and the work directory; ``--die-with-parent``
  and ``--new-session``.
* ``unshare`` (util-linux): new network, PID, mount, IPC and UTS namespaces (plus a user namespace
  when not root); inside, a shell builds a tmpfs root with the same read-only ``/usr`` bind, the
  work directory, ``/tmp``, ``/proc`` and four device nodes, then ``chroot``\\ s into it and
  ``setpriv`` drops every capability (and, as root, the uid) before running Python.

With neither, :class:`ProcessSandbox` raises :class:`~sandboxes.code.base.IsolationUnavailable`
saying what to install, unless built with ``allow_unisolated=True`` (rlimits and a temporary
directory only: the code can read your files and use your network).

The PID namespace means every process of a run dies with it: on timeout the whole process group is
SIGKILLed, and the namespace's init takes the rest down.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from sandboxes.code.base import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    MAIN_FILE,
    OUTPUT_LIMIT,
    CappedBuffer,
    CodeSandbox,
    ExecResult,
    IsolationUnavailable,
    SandboxError,
    check_run_args,
    drain_in_thread,
)

__all__ = ["ProcessSandbox", "ISOLATIONS", "detect_isolation"]

ISOLATIONS = ("auto", "bwrap", "unshare", "none")
NOBODY = 65534
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
_HOW_TO_ISOLATE = (
    "no isolation is available for the process sandbox: install bubblewrap "
    "(`apt-get install bubblewrap`) or util-linux's `unshare` with user namespaces enabled, or use "
    "the docker back end; pass allow_unisolated=True only for code you trust"
)
_probe_cache: dict[str, bool] = {}
_probe_lock = threading.Lock()


def _sandbox_python() -> str:
    """The system Python that runs the code (not a virtual environment's, whose packages differ)."""
    for candidate in ("/usr/bin/python3", os.path.join(sys.base_prefix, "bin", "python3")):
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    return os.path.realpath(sys.executable)


def _root_links() -> list[tuple[str, str]]:
    """``(name, target)`` of the top-level links /bin, /lib... (merged /usr), as on this host."""
    links = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
    return links


def _extra_ro_dirs(python: str) -> list[str]:
    """Directories to bind read-only besides /usr: real /lib* dirs, and a Python outside /usr."""
    dirs = [
        f"/{n}"
        for n in ("bin", "lib", "lib64")
        if os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}")
    ]
    prefix = os.path.dirname(os.path.dirname(python))
    if not prefix.startswith("/usr"):
        dirs.append(prefix)
    return dirs


def _bwrap_command(python: str, work: str) -> list[str]:
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for d in _extra_ro_dirs(python):
        cmd += ["--ro-bind", d, d]
    for path, target in _root_links():
        cmd += ["--symlink", target, path]
    cmd += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--size", str(64 * 2**20), "--tmpfs", "/tmp"]
    cmd += ["--bind", work, "/work", "--chdir", "/work", "--clearenv"]
    for key, value in _child_env().items():
        cmd += ["--setenv", key, value]
    return [*cmd, python, "-I", MAIN_FILE]


# Runs as root inside the new namespaces: build a root, chroot into it, drop privileges.
_UNSHARE_SCRIPT = r"""
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin
R="$1"; W="$2"; PY="$3"; REUID="$4"; shift 4
mount -t tmpfs -o size=16m,mode=755 tmpfs "$R"
mkdir -p "$R/usr" "$R/work" "$R/tmp" "$R/proc" "$R/dev" "$R/etc"
mount --bind /usr "$R/usr"; mount -o remount,bind,ro,nosuid,nodev "$R/usr"
for d in "$@"; do
  case "$d" in
    link:*) l="${d#link:}"; ln -s "${l#*=}" "$R${l%%=*}" ;;
    *) mkdir -p "$R$d"; mount --bind "$d" "$R$d"; mount -o remount,bind,ro,nosuid,nodev "$R$d" ;;
  esac
done
[ -f /etc/ld.so.cache ] && cp /etc/ld.so.cache "$R/etc/"
mount --bind "$W" "$R/work"
mount -t tmpfs -o size=64m,nosuid,nodev tmpfs "$R/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
for n in null zero random urandom; do
  touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"
done
mount -o remount,ro,bind "$R"
if [ "$REUID" = "-" ]; then ids=""; else ids="--reuid=$REUID --regid=$REUID --clear-groups"; fi
exec chroot "$R" /usr/bin/setpriv $ids --inh-caps=-all --bounding-set=-all --no-new-privs \
  /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/work LANG=C.UTF-8 \
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/env -C /work "$PY" -I main.py
"""


def _unshare_command(python: str, work: str, root_dir: str) -> list[str]:
    cmd = ["unshare", "--fork", "--pid", "--kill-child", "--net", "--ipc", "--uts", "--mount"]
    cmd += ["--propagation", "private"]
    if os.geteuid() != 0:
        cmd += ["--user", "--map-root-user"]
    reuid = str(NOBODY) if os.geteuid() == 0 else "-"
    extras = [f"link:{p}={t}" for p, t in _root_links()] + _extra_ro_dirs(python)
    return [*cmd, "/bin/sh", "-c", _UNSHARE_SCRIPT, "sh", root_dir, work, python, reuid, *extras]


def _child_env() -> dict[str, str]:
    return {
        "PATH": SANDBOX_PATH,
        "HOME": "/work",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _probe(isolation: str) -> bool:
    """Whether ``isolation`` works here: run ``print(1)`` through it once (cached per process)."""
    with _probe_lock:
        if isolation not in _probe_cache:
            ok = False
            if shutil.which("bwrap" if isolation == "bwrap" else "unshare"):
                try:
                    box = ProcessSandbox(isolation=isolation, _probing=True)
                    result = box.run("print(1)", timeout_s=20, memory_mb=256)
                    ok = result.exit_code == 0 and result.stdout.strip() == "1"
                    box.close()
                except (OSError, SandboxError):
                    ok = False
            _probe_cache[isolation] = ok
        return _probe_cache[isolation]


def detect_isolation() -> str | None:
    """The first working mechanism, ``"bwrap"`` or ``"unshare"``; ``None`` if neither works."""
    for isolation in ("bwrap", "unshare"):
        if _probe(isolation):
            return isolation
    return None


class ProcessSandbox(CodeSandbox):
    """Code execution in an isolated local process (module docstring).

    Args:
        isolation: ``"auto"`` (bwrap, else unshare), ``"bwrap"``, ``"unshare"``, or ``"none"``
            (needs ``allow_unisolated=True``).
        allow_unisolated: run with rlimits only when no isolation works, instead of refusing.
        max_processes: RLIMIT_NPROC of the code's user (fork bombs stop there).
        max_file_mb: RLIMIT_FSIZE, largest file the code may write, MiB.
        output_limit: bytes kept per output stream.

    Raises:
        IsolationUnavailable: the requested (or, for ``auto``, any) isolation does not work here;
            the message says what to install.
        ValueError: an unknown ``isolation``.

    Example:
        >>> with ProcessSandbox() as box:  # doctest: +SKIP
        ...     box.run("print(6 * 7)").stdout
        '42\\n'
    """

    backend = "process"

    def __init__(
        self,
        *,
        isolation: str = "auto",
        allow_unisolated: bool = False,
        max_processes: int = 64,
        max_file_mb: int = 16,
        output_limit: int = OUTPUT_LIMIT,
        _probing: bool = False,
    ):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        if not _probing:
            if isolation == "auto":
                found = detect_isolation()
                if found is None and not allow_unisolated:
                    raise IsolationUnavailable(_HOW_TO_ISOLATE)
                isolation = found or "none"
            elif isolation == "none":
                if not allow_unisolated:
                    raise IsolationUnavailable(
                        "isolation='none' runs code with your user's rights and network: "
                        "pass allow_unisolated=True to accept that"
                    )
            elif not _probe(isolation):
                raise IsolationUnavailable(
                    f"isolation {isolation!r} does not work here. " + _HOW_TO_ISOLATE
                )
        self.isolation = isolation
        self.max_processes = max_processes
        self.max_file_mb = max_file_mb
        self.output_limit = output_limit
        self.python = _sandbox_python()
        self._closed = False
        self._lock = threading.Lock()
        self._live: dict[int, subprocess.Popen[bytes]] = {}
        self._dirs: set[str] = set()

    def run(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_mb: int = DEFAULT_MEMORY_MB,
    ) -> ExecResult:
        all_files = check_run_args(code, stdin, files, timeout_s, memory_mb)
        if self._closed:
            raise RuntimeError("this sandbox is closed")
        parent = tempfile.mkdtemp(prefix="agentgym-sbx-")
        with self._lock:
            self._dirs.add(parent)
        try:
            return self._run_in(parent, all_files, stdin, float(timeout_s), memory_mb)
        finally:
            shutil.rmtree(parent, ignore_errors=True)
            with self._lock:
                self._dirs.discard(parent)

    def _run_in(
        self, parent: str, files: dict[str, bytes], stdin: str, timeout_s: float, memory_mb: int
    ) -> ExecResult:
        work = os.path.join(parent, "work")
        os.mkdir(work)
        for name, content in files.items():
            path = Path(work, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        drop_to = NOBODY if os.geteuid() == 0 else None
        if drop_to is not None:
            os.chmod(parent, 0o755)
            for dirpath, _, names in os.walk(work):
                os.chown(dirpath, NOBODY, NOBODY)
                for n in names:
                    os.chown(os.path.join(dirpath, n), NOBODY, NOBODY)
        env: dict[str, str] = _child_env()
        if self.isolation == "bwrap":
            cmd = _bwrap_command(self.python, work)
            preexec = self._preexec(memory_mb, timeout_s, drop_to)
        elif self.isolation == "unshare":
            root_dir = os.path.join(parent, "root")
            os.mkdir(root_dir)
            cmd = _unshare_command(self.python, work, root_dir)
            preexec = self._preexec(memory_mb, timeout_s, None)  # setpriv drops the uid inside
        else:
            cmd = [self.python, "-I", MAIN_FILE]
            preexec = self._preexec(memory_mb, timeout_s, drop_to)
        out, err = CappedBuffer(self.output_limit), CappedBuffer(self.output_limit)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=preexec,
                close_fds=True,
            )
        except OSError as error:
            raise SandboxError(f"cannot start {cmd[0]}: {error}") from error
        with self._lock:
            self._live[proc.pid] = proc
            closing = self._closed
        if closing:  # close() ran while this run was starting
            _kill_group(proc)
        readers = [drain_in_thread(proc.stdout, out), drain_in_thread(proc.stderr, err)]  # type: ignore[arg-type]
        writer = threading.Thread(target=_feed, args=(proc.stdin, stdin.encode()), daemon=True)
        writer.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc)
            proc.wait()
            with self._lock:
                self._live.pop(proc.pid, None)
        duration = time.monotonic() - start
        for thread in readers:
            thread.join(timeout=5)
        writer.join(timeout=1)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        code = proc.returncode
        exit_code = 128 - code if code < 0 else code
        stderr = err.text()
        oom = not timed_out and exit_code != 0 and _memory_error(stderr)
        return ExecResult(
            stdout=out.text(),
            stderr=stderr,
            exit_code=137 if timed_out else exit_code,
            timed_out=timed_out,
            oom_killed=oom,
            duration_s=duration,
            truncated=out.truncated or err.truncated,
        )

    def _preexec(self, memory_mb: int, timeout_s: float, drop_to: int | None) -> Callable[[], None]:
        memory = memory_mb * 2**20
        cpu = math.ceil(timeout_s) + 1
        fsize = self.max_file_mb * 2**20
        nproc = self.max_processes

        def limit() -> None:  # runs in the child between fork and exec: no locks, no allocation
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if drop_to is not None:
                os.setgroups([])
                os.setgid(drop_to)
                os.setuid(drop_to)
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

        return limit

    def close(self) -> None:
        self._closed = True
        with self._lock:
            live = list(self._live.values())
            dirs = list(self._dirs)
        for proc in live:
            _kill_group(proc)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)

    def __repr__(self) -> str:
        return f"ProcessSandbox(isolation={self.isolation!r})"


def _feed(stream: object, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        if data:
            stream.write(data)  # type: ignore[attr-defined]
        stream.close()  # type: ignore[attr-defined]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _memory_error(stderr: str) -> bool:
    tail = stderr[-2000:]
    return "MemoryError" in tail or "Cannot allocate memory" in tail
