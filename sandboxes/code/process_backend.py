"""The ``process`` back end: a local child process, isolated by bubblewrap or ``unshare``.

One run is one isolation unit:

* **Limits for the run as a whole** (:mod:`sandboxes.code.cgroups`): each run gets its own control
  group (cgroup v2 where the machine has usable memory and pids controllers, else cgroup v1)
  with ``memory_mb`` for all its processes together (tmpfs pages included, no swap),
  ``max_processes`` processes at once, and a CPU quota of ``cpus`` cores. One run's fork bomb
  or memory bomb cannot take another run's processes or memory: each run has its own budget.
  Without usable control groups the back end refuses to start and says what the kernel lacks,
  unless built with ``allow_per_process_limits=True``.
* **Sized file systems**: ``/work`` (the files and ``main.py``, ``work_mb``), ``/tmp``
  (``tmp_mb``) and, under bubblewrap, ``/dev/shm`` (``shm_mb``) are tmpfs mounts of fixed size
  that live only as long as the run; ``/`` and ``/dev`` are read-only. Nothing is written on a
  host disk (bubblewrap needs no host directory at all).
* **Per-process rlimits** besides (``resource.setrlimit`` before ``exec``): address space
  ``memory_mb``, CPU time ``ceil(timeout_s) + 1`` s, file size ``max_file_mb``, 256 open files,
  no core dumps. When the caller is root, the child first drops to user ``nobody`` (uid/gid
  65534, no supplementary groups) so that no root file is writable.
* **A seccomp filter** (:mod:`sandboxes.code.seccomp`): the kernel key ring calls (one user's key
  rings would be a channel between runs), io_uring, ``ptrace``, ``process_vm_readv/writev`` and
  ``prlimit64`` on another process are refused with ``EPERM``; bwrap loads it
  (``--seccomp``), else it is installed before ``exec`` (``PR_SET_NO_NEW_PRIVS`` first).
* **Nothing outlives its owner**: the sandbox gets the parent-death signal
  (:func:`sandboxes.limits.die_with_parent`: SIGKILL when the owner dies; bwrap's
  ``--die-with-parent``, unshare's ``--kill-child``), the PID namespace's processes
  die with its first process, and a new :class:`ProcessSandbox` kills the processes of, and
  removes, the control groups and temporary directories of owners that are gone.
* **A clear result**: a run that hits a limit returns within ``timeout_s`` + 1 s with
  ``ExecResult.limit`` set (``memory``: the group's OOM kills or a ``MemoryError``;
  ``processes``: forks refused by ``pids.max``; ``disk``: a full mount or a file at the size
  limit; ``output``: output dropped past ``output_limit``, or the run killed once its output
  passed ``output_kill_mb``; ``timeout``).

Under bubblewrap, bwrap itself copies the files into ``/work`` (from memory files, ``--file``) and
a bash launcher runs ``python3 -I main.py`` and reports on a pipe whether a writable mount filled
up; under ``unshare`` (and ``none``) a small Python launcher (``python3 -I -S``) receives the files
on a pipe, writes them, runs the code as its child and reports the same.

Isolation, the first that works (``isolation="auto"``):

* ``bwrap`` (``apt-get install bubblewrap``, 0.8 or newer; and ``bash``): ``--unshare-all --unshare-user
  --disable-userns`` (network, PID, IPC, UTS, cgroup and user namespaces, and no nested user
  namespaces), a new read-only root holding only a read-only ``/usr`` (plus the ``/bin``,
  ``/lib*`` links, ``/etc/ld.so.cache`` and the Python prefix when it lies outside ``/usr``), a
  fresh ``/proc``, a read-only ``/dev``, the sized tmpfs mounts above; ``--die-with-parent`` and
  ``--new-session``.
* ``unshare`` (util-linux): new network, PID, mount, IPC and UTS namespaces (plus a user namespace
  when not root); inside, a shell builds a read-only tmpfs root with the same read-only ``/usr``
  bind, sized ``/work`` and ``/tmp`` (16,384 inodes each), ``/proc`` and four device nodes, then
  ``chroot``\\ s into it and ``setpriv`` drops every capability (and, as root, the uid) and keeps
  the parent-death signal before running the launcher. Nested user namespaces: ``unshare(2)``
  refuses them to a chrooted process.

With neither, :class:`ProcessSandbox` raises :class:`~sandboxes.code.base.IsolationUnavailable`
saying what to install, unless built with ``allow_unisolated=True`` (rlimits, a control group where
there is one, and a temporary directory only: the code can read your files and use your network).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

from sandboxes.code import cgroups, seccomp
from sandboxes.code.base import (
    OUTPUT_LIMIT,
    CappedBuffer,
    CodeSandbox,
    ExecResult,
    IsolationUnavailable,
    SandboxError,
    drain_in_thread,
    first_limit,
    program_text,
)
from sandboxes.limits import die_with_parent

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
_probe_why: dict[str, str] = {}
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


def _bwrap_command(
    python: str,
    sizes: _Sizes,
    file_fds: dict[str, int],
    report_fd: int,
    fsize: int,
    seccomp_fd: int,
) -> list[str]:
    cmd = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    cmd += ["--seccomp", str(seccomp_fd)]  # the filter (sandboxes.code.seccomp), from memory
    cmd += ["--new-session", "--hostname", "sandbox"]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for d in _extra_ro_dirs(python):
        cmd += ["--ro-bind", d, d]
    for path, target in _root_links():
        cmd += ["--symlink", target, path]
    cmd += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    # /dev: bwrap's device nodes on a tmpfs made read-only, a sized tmpfs for POSIX shm beside it.
    cmd += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    cmd += ["--size", str(sizes.shm_mb * 2**20), "--tmpfs", "/dev/shm"]
    cmd += ["--size", str(sizes.tmp_mb * 2**20), "--tmpfs", "/tmp"]
    cmd += ["--size", str(sizes.work_mb * 2**20), "--tmpfs", "/work"]
    # The files, copied by bwrap from memory files into /work (its parents made first).
    dirs = {str(parent) for name in file_fds for parent in PurePosixPath(name).parents}
    for d in sorted(dirs - {"."}, key=lambda d: d.count("/")):
        cmd += ["--dir", f"/work/{d}"]
    for name, fd in file_fds.items():
        cmd += ["--perms", "0644", "--file", str(fd), f"/work/{name}"]
    cmd += ["--remount-ro", "/"]  # not recursive: the sized tmpfs mounts above stay writable
    cmd += ["--chdir", "/work", "--clearenv"]
    for key, value in _child_env().items():
        cmd += ["--setenv", key, value]
    launcher = [_BASH, "--noprofile", "--norc", "-c", _SH_LAUNCHER, "sh"]
    return [*cmd, *launcher, str(report_fd), str(fsize), python]


_BASH = os.path.realpath(shutil.which("bash") or "/bin/bash")

#: The first process inside a bubblewrap sandbox (``programs/bwrap_launcher.sh``, run by bash):
#: runs main.py, then reports its exit status and whether a writable file system filled.
_SH_LAUNCHER = program_text("bwrap_launcher.sh")

#: Runs as root inside the new namespaces (``programs/unshare_root.sh``, run by sh): builds a
#: root, chroots into it, drops privileges and starts :data:`_LAUNCHER`.
_UNSHARE_SCRIPT = program_text("unshare_root.sh")

_WATCHED = "/work:/tmp:/dev/shm"

#: The first process inside an unshare (or unisolated) sandbox (``programs/launcher.py``, run by
#: ``python3 -I -S -c``): writes the files, runs main.py, reports its exit status and whether a
#: watched file system filled.
_LAUNCHER = program_text("launcher.py")


def _unshare_command(
    python: str, root_dir: str, sizes: _Sizes, pipe_fds: tuple[int, int]
) -> list[str]:
    cmd = ["unshare", "--fork", "--pid", "--kill-child", "--net", "--ipc", "--uts", "--mount"]
    cmd += ["--propagation", "private"]
    if os.geteuid() != 0:
        cmd += ["--user", "--map-root-user"]
    reuid = str(NOBODY) if os.geteuid() == 0 else "-"
    extras = [f"link:{p}={t}" for p, t in _root_links()] + _extra_ro_dirs(python)
    fds = f"{pipe_fds[0]} {pipe_fds[1]}"
    args = [root_dir, python, reuid, str(sizes.work_mb), str(sizes.tmp_mb), fds, _LAUNCHER]
    return [*cmd, "/bin/sh", "-c", _UNSHARE_SCRIPT, "sh", *args, *extras]


def _payload(files: dict[str, bytes]) -> bytes:
    """The files as the launcher reads them: ``<u32 name length><u32 size><name><content>``..."""
    parts = []
    for name, content in files.items():
        raw = name.encode("utf-8")
        parts += [struct.pack("<II", len(raw), len(content)), raw, content]
    return b"".join(parts)


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
        if isolation in _probe_cache:
            return _probe_cache[isolation]
    ok = False
    why = f"{'bwrap' if isolation == 'bwrap' else 'unshare'} is not installed"
    if shutil.which("bwrap" if isolation == "bwrap" else "unshare"):
        try:
            box = ProcessSandbox(isolation=isolation, _probing=True)
            result = box.run("print(1)", timeout_s=20, memory_mb=256)
            ok = result.exit_code == 0 and result.stdout.strip() == "1"
            why = f"exit {result.exit_code}: {result.stderr.strip()[-300:]}"
            box.close()
        except (OSError, SandboxError, ValueError) as err:
            why = str(err)
    with _probe_lock:
        _probe_cache[isolation] = ok
        if not ok:
            _probe_why[isolation] = why
    return ok


def _probe_detail() -> str:
    """What the failed probes said, for error messages."""
    if not _probe_why:
        return ""
    return " (" + "; ".join(f"{k}: {v}" for k, v in sorted(_probe_why.items())) + ")"


def detect_isolation() -> str | None:
    """The first working mechanism, ``"bwrap"`` or ``"unshare"``; ``None`` if neither works."""
    for isolation in ("bwrap", "unshare"):
        if _probe(isolation):
            return isolation
    return None


@dataclass(frozen=True)
class _Sizes:
    work_mb: int
    tmp_mb: int
    shm_mb: int


_cgroup_cache: dict[int, tuple[cgroups.CgroupLayout | None, str]] = {}


def _cgroup_layout() -> tuple[cgroups.CgroupLayout | None, str]:
    """:func:`sandboxes.code.cgroups.detect`, once per process."""
    with _probe_lock:
        if os.getpid() not in _cgroup_cache:
            _cgroup_cache[os.getpid()] = cgroups.detect()
        return _cgroup_cache[os.getpid()]


#: Seconds a run waits for its output readers to end once it has finished: they end as soon as
#: they are scheduled (see :meth:`~sandboxes.code.base.CappedBuffer.drain`); a bound, not a delay.
_READER_END_S = 60.0

TEMP_PREFIX = "agentgym-sbx-"
_TEMP_OWNER = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-")


def _remove_tree(path: str) -> None:
    """Remove ``path`` and everything below it, errors ignored. Python 3.11's ``shutil.rmtree``
    recurses once per directory level, so a tree deeper than the interpreter's recursion limit
    (an unisolated run's ``mkdir d; cd d`` loop) raised ``RecursionError`` through ``run``, and
    through every later sandbox's :func:`reap_stale_dirs`; such a tree goes to ``rm -rf``
    (coreutils walks it without recursion and never follows a link)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )


def reap_stale_dirs() -> list[str]:
    """Remove the temporary directories of sandboxes whose owner process is gone."""
    removed = []
    tmp = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            match = _TEMP_OWNER.match(name)
            if match and not cgroups._alive(int(match.group(1))):
                _remove_tree(os.path.join(tmp, name))
                removed.append(name)
    return removed


class ProcessSandbox(CodeSandbox):
    """Code execution in an isolated local process (module docstring).

    Args:
        isolation: ``"auto"`` (bwrap, else unshare), ``"bwrap"``, ``"unshare"``, or ``"none"``
            (needs ``allow_unisolated=True``).
        allow_unisolated: run with rlimits only when no isolation works, instead of refusing.
        max_processes: processes (and threads) of one run at once, all together (the run's
            ``pids.max``; without control groups, RLIMIT_NPROC of the code's user, shared by
            every run of that user).
        max_file_mb: RLIMIT_FSIZE, largest file the code may write, MiB.
        output_limit: bytes kept per output stream.
        work_mb, tmp_mb, shm_mb: sizes of the tmpfs mounts ``/work``, ``/tmp`` and (bwrap)
            ``/dev/shm``, MiB; their pages also count in the run's ``memory_mb``.
        cpus: CPU quota of one run, in cores (``None``: no quota), where the cpu controller is.
        output_kill_mb: a run whose output (both streams) passes this many MiB is killed
            (``limit="output"``); below it, output past ``output_limit`` is read and dropped.
        allow_per_process_limits: run without control groups (each process limited alone: forked
            children together can take ``max_processes`` x ``memory_mb``, and runs share the
            process limit) where the machine has none usable, and let runs swap where swap is on
            and the kernel cannot limit a group's swap, instead of refusing.

    Raises:
        IsolationUnavailable: the requested (or, for ``auto``, any) isolation does not work
            here, or control groups are missing (unless ``allow_per_process_limits``); the
            message says what is missing and what to install or pass.
        ValueError: an unknown ``isolation``, a size out of range.

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
        work_mb: int = 64,
        tmp_mb: int = 64,
        shm_mb: int = 16,
        cpus: float | None = 1.0,
        output_kill_mb: int = 32,
        allow_per_process_limits: bool = False,
        _probing: bool = False,
    ):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        for name, value in (
            ("max_processes", max_processes),
            ("max_file_mb", max_file_mb),
            ("work_mb", work_mb),
            ("tmp_mb", tmp_mb),
            ("shm_mb", shm_mb),
            ("output_kill_mb", output_kill_mb),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if cpus is not None and not (isinstance(cpus, (int, float)) and 0.01 <= cpus <= 1024):
            raise ValueError(
                f"cpus must be None or a number of cores in [0.01, 1024], got {cpus!r}"
            )
        layout, missing = _cgroup_layout()
        if not _probing:
            if isolation == "auto":
                found = detect_isolation()
                if found is None and not allow_unisolated:
                    raise IsolationUnavailable(_HOW_TO_ISOLATE + _probe_detail())
                isolation = found or "none"
            elif isolation == "none":
                if not allow_unisolated:
                    raise IsolationUnavailable(
                        "isolation='none' runs code with your user's rights and network: "
                        "pass allow_unisolated=True to accept that"
                    )
            elif not _probe(isolation):
                raise IsolationUnavailable(
                    f"isolation {isolation!r} does not work here. "
                    + _HOW_TO_ISOLATE
                    + _probe_detail()
                )
            if layout is None and not (allow_per_process_limits or isolation == "none"):
                raise IsolationUnavailable(
                    "the process sandbox limits memory and processes per run with control "
                    f"groups, and this machine lacks them: {missing}. Run as root (or in a "
                    "delegated cgroup v2 subtree with the memory and pids controllers), use the "
                    "docker back end, or pass allow_per_process_limits=True to limit each process "
                    "alone (forked children can then take max_processes x memory_mb, and one "
                    "run's fork bomb can starve the others)"
                )
            if layout is not None:
                cgroups.reap_stale(layout)
            reap_stale_dirs()
        self.isolation = isolation
        self.max_processes = max_processes
        self.max_file_mb = max_file_mb
        self.output_limit = output_limit
        self.output_kill_bytes = output_kill_mb * 2**20
        self.cpus = cpus
        self.sizes = _Sizes(work_mb, tmp_mb, shm_mb)
        self.max_file_bytes = max_file_mb * 2**20
        # without isolation /work is a temporary directory on the host's disk: no size of its own
        self.work_bytes = None if isolation == "none" else work_mb * 2**20
        self.cgroup_layout = layout
        self.allow_per_process_limits = allow_per_process_limits
        self.python = _sandbox_python()
        self._closed = False
        self._lock = threading.Lock()
        self._live: dict[int, subprocess.Popen[bytes]] = {}
        self._groups: dict[int, cgroups.RunCgroup] = {}
        self._destroying: list[threading.Thread] = []
        self._dirs: set[str] = set()

    def _run(
        self, all_files: dict[str, bytes], stdin: str, timeout_s: float, memory_mb: int
    ) -> ExecResult:
        called = time.monotonic()  # the deadline counts from the call: set-up is part of the run
        if self._closed:
            raise RuntimeError("this sandbox is closed")
        parent = None
        if self.isolation != "bwrap":  # bwrap needs no host directory: /work is its own tmpfs
            parent = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
            with self._lock:
                self._dirs.add(parent)
        group = None
        if self.cgroup_layout is not None:
            try:
                group = cgroups.RunCgroup.create(
                    self.cgroup_layout,
                    memory_mb * 2**20,
                    self.max_processes + _LAUNCH_PROCESSES,
                    self.cpus,
                    allow_swap=self.allow_per_process_limits,
                )
            except OSError as err:
                if parent:
                    _remove_tree(parent)
                raise SandboxError(f"cannot create the run's control group: {err}") from err
        result: ExecResult | None = None
        try:
            deadline = called + float(timeout_s)
            result = self._run_in(parent, group, all_files, stdin, (called, deadline), memory_mb)
            return result
        finally:
            if group is not None:
                if result is not None and result.misbehaved:
                    self._destroy_later(group)  # killed processes may take a while to go
                else:
                    group.destroy()
            if parent:
                _remove_tree(parent)
                with self._lock:
                    self._dirs.discard(parent)

    def _run_in(
        self,
        parent: str | None,
        group: cgroups.RunCgroup | None,
        files: dict[str, bytes],
        stdin: str,
        span: tuple[float, float],
        memory_mb: int,
    ) -> ExecResult:
        called, deadline = span  # monotonic times of the call and of its deadline
        timeout_s = max(0.01, deadline - time.monotonic())
        drop_to = NOBODY if os.geteuid() == 0 else None
        report_r, report_w = os.pipe()
        payload_r, payload_w = os.pipe()
        payload = _payload(files)
        fds: tuple[int, ...] = (payload_r, report_w)
        env: dict[str, str] = _child_env()
        cwd = None
        nproc = None if group is not None else self.max_processes
        memfds: list[int] = []
        if self.isolation == "bwrap":
            file_fds = {}
            for name, content in files.items():
                fd = os.memfd_create("sandbox-file")
                memfds.append(fd)
                _feed_fd(fd, content, close=False)
                os.lseek(fd, 0, os.SEEK_SET)
                file_fds[name] = fd
            fsize = self.max_file_mb * 2**20
            filter_fd = os.memfd_create("sandbox-seccomp")
            memfds.append(filter_fd)
            _feed_fd(filter_fd, seccomp.filter_bytes(), close=False)
            os.lseek(filter_fd, 0, os.SEEK_SET)
            cmd = _bwrap_command(self.python, self.sizes, file_fds, report_w, fsize, filter_fd)
            fds = (*memfds, report_w)
            payload = b""
        elif self.isolation == "unshare":
            assert parent is not None
            root_dir = os.path.join(parent, "root")
            os.mkdir(root_dir)
            cmd = _unshare_command(self.python, root_dir, self.sizes, fds)
            drop_to = None  # setpriv drops the uid inside
        else:
            assert parent is not None
            cwd = os.path.join(parent, "work")
            os.mkdir(cwd)
            if drop_to is not None:
                os.chmod(parent, 0o755)
                os.chown(cwd, NOBODY, NOBODY)
            cmd = [self.python, "-I", "-S", "-c", _LAUNCHER, str(fds[0]), str(fds[1])]
            cmd += [self.python, "."]
        # bwrap installs the filter itself (--seccomp) just before the launcher; elsewhere it is
        # installed before exec, on unshare (and everything it starts) or the unisolated launcher.
        install = seccomp.installer() if self.isolation != "bwrap" else None
        preexec = self._preexec(memory_mb, timeout_s, drop_to, nproc, group, install)
        out, err = CappedBuffer(self.output_limit), CappedBuffer(self.output_limit)
        flooded = threading.Event()
        start = called
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=preexec,
                close_fds=True,
                pass_fds=fds,
            )
        except (OSError, subprocess.SubprocessError) as error:
            for fd in (payload_r, payload_w, report_r, report_w, *memfds):
                os.close(fd)
            raise SandboxError(f"cannot start {cmd[0]}: {error}") from error
        for fd in (payload_r, report_w, *memfds):
            os.close(fd)

        def stop() -> None:  # one pass: the PID namespace's end takes the rest down
            _kill_group(proc)
            if group is not None:
                group.kill_all(timeout_s=0)

        # Set once the launcher is reaped: a process that escaped the kill (unisolated, no
        # cgroup) and floods the pipes afterwards is no longer the run's flood to stop (its
        # process group id may be another's by then), and stdin is no longer fed.
        ended = threading.Event()

        def on_write() -> None:
            if (
                out.total + err.total > self.output_kill_bytes
                and not flooded.is_set()
                and not ended.is_set()
            ):
                flooded.set()
                stop()

        out.on_write = err.on_write = on_write
        with self._lock:
            self._live[proc.pid] = proc
            if group is not None:
                self._groups[proc.pid] = group
            closing = self._closed
        if closing:  # close() ran while this run was starting
            stop()
        finish = threading.Event()
        readers = [
            drain_in_thread(proc.stdout, out, finish),  # type: ignore[arg-type]
            drain_in_thread(proc.stderr, err, finish),  # type: ignore[arg-type]
        ]
        writers = [
            threading.Thread(target=_feed, args=(proc.stdin, stdin.encode(), ended), daemon=True),
            threading.Thread(target=_feed_fd, args=(payload_w, payload), daemon=True),
        ]
        for thread in writers:
            thread.start()
        timed_out = False
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = not flooded.is_set()
        finally:
            stop()
            proc.wait()
            ended.set()
            with self._lock:
                self._live.pop(proc.pid, None)
                self._groups.pop(proc.pid, None)
        duration = time.monotonic() - start
        wait_until = time.monotonic() + (0.25 if timed_out or flooded.is_set() else 1.0)
        for thread in readers:  # killed: what came before the kill is the output
            thread.join(timeout=max(0.0, wait_until - time.monotonic()))
        # A process that escaped the kill (unisolated, no cgroup) may hold a pipe open: the
        # readers then take what is waiting in it (all the run wrote, however late they are
        # scheduled on a busy machine) and end.
        finish.set()
        for thread in readers:
            thread.join(timeout=_READER_END_S)
        for thread in writers:
            thread.join(timeout=0.2)
        for stream, reader in zip((proc.stdout, proc.stderr), readers, strict=True):
            if stream is not None and not reader.is_alive():
                stream.close()
        report = _read_report(report_r)
        # The exit status is the launcher's (bwrap and unshare pass it on), never the report's:
        # the code runs as the launcher's user and could write a report of its own first.
        code = proc.returncode
        exit_code = 128 - code if code < 0 else code
        stderr = err.text()
        hit: set[str] = set()
        oom = False
        if group is not None and group.oom_kills() > 0:
            oom = True
        elif not timed_out and exit_code != 0 and _memory_error(stderr):
            oom = True
        if oom:
            hit.add("memory")
        if group is not None and group.pids_refused() > 0:
            hit.add("processes")
        if report is None and stderr.startswith("bwrap: Can't write data to file"):
            stderr = "sandbox: the files do not fit in /work: " + stderr
            hit.add("disk")
        if report or exit_code == 128 + signal.SIGXFSZ:
            hit.add("disk")
        if flooded.is_set() or out.truncated or err.truncated:
            hit.add("output")
        if timed_out:
            hit.add("timeout")
        killed = timed_out or flooded.is_set()
        return ExecResult(
            stdout=out.text(),
            stderr=stderr,
            exit_code=137 if killed else exit_code,
            timed_out=timed_out,
            oom_killed=oom and not killed,
            duration_s=duration,
            truncated=out.truncated or err.truncated,
            limit=first_limit(hit),
        )

    def _preexec(
        self,
        memory_mb: int,
        timeout_s: float,
        drop_to: int | None,
        nproc: int | None,
        group: cgroups.RunCgroup | None,
        install_filter: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        memory = memory_mb * 2**20
        cpu = math.ceil(timeout_s) + 1
        fsize = self.max_file_mb * 2**20
        procs_files = group.procs_files() if group is not None else []
        owner = os.getpid()

        def limit() -> None:  # runs in the child between fork and exec: no locks, no threads
            for path in procs_files:  # join the run's control groups (children inherit them)
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if drop_to is not None:
                os.setgroups([])
                os.setgid(drop_to)
                os.setuid(drop_to)
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            # Die with the owner (set after the uid change, which clears it; exits at once if the
            # owner is already gone); bwrap and unshare's --kill-child pass it on inside.
            die_with_parent(owner)
            if install_filter is not None:
                install_filter()

        return limit

    def _destroy_later(self, group: cgroups.RunCgroup) -> None:
        """Remove a killed run's group in the background (:meth:`close` waits for it)."""
        thread = threading.Thread(target=group.destroy, daemon=True)
        with self._lock:
            self._destroying = [t for t in self._destroying if t.is_alive()] + [thread]
        thread.start()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            live = list(self._live.values())
            groups = list(self._groups.values())
            dirs = list(self._dirs)
            destroying = list(self._destroying)
        for proc in live:
            _kill_group(proc)
        for group in groups:
            group.kill_all()
        for thread in destroying:
            thread.join(timeout=10)
        for d in dirs:
            _remove_tree(d)

    def __repr__(self) -> str:
        return f"ProcessSandbox(isolation={self.isolation!r})"


#: Processes of a run besides the code's: bwrap (or unshare), its PID-namespace init, the launcher.
_LAUNCH_PROCESSES = 4


def _feed(stream: IO[bytes], data: bytes, ended: threading.Event) -> None:
    """Write ``data`` to the run's stdin and close it; stop at ``ended`` (the run is over), also
    where a process that escaped the kill holds stdin open and never reads it (a blocking write
    would hold this thread, and ``data``, for ever: one more per run)."""
    with contextlib.suppress(OSError, ValueError):
        fd = stream.fileno()
        os.set_blocking(fd, False)
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        view = memoryview(data)
        while view and not ended.is_set():
            if not poller.poll(50):
                continue
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def _feed_fd(fd: int, data: bytes, *, close: bool = True) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        if close:
            os.close(fd)


def _read_report(fd: int) -> bool | None:
    """Whether the launcher's report (``<exit status> <file system full>``) says full; ``None``
    when it did not report. The exit status in it is never used (the process's own is)."""
    try:
        os.set_blocking(fd, False)
        raw = os.read(fd, 64)
    except OSError:
        raw = b""
    finally:
        os.close(fd)
    parts = raw.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return parts[1] == b"1"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _memory_error(stderr: str) -> bool:
    tail = stderr[-2000:]
    return "MemoryError" in tail or "Cannot allocate memory" in tail
