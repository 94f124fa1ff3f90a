"""The one interface of every code back end: :class:`CodeSandbox` and its :class:`ExecResult`.

A run executes ``code`` as ``python3 main.py`` in a fresh, empty work directory (``/work``) that
also holds ``files``, with ``stdin`` on standard input, no network, a wall-clock ``timeout_s`` and a
memory limit of ``memory_mb``. Each output stream is kept up to ``output_limit`` bytes (default
64 kB); the rest is read and dropped, and ``truncated`` says so. A run never raises for anything the
*code* does (loops, bombs, crashes, huge output): that is all in the :class:`ExecResult`. It raises
only for bad arguments, or when the back end itself cannot work (daemon gone, no isolation).
Files that do not fit the work directory or the file-size limit fail the run before ``main.py``
starts (``limit="disk"``); :meth:`CodeSandbox.files_too_large` tells a caller so beforehand.
"""

from __future__ import annotations

import math
import os
import select
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath
from types import TracebackType
from typing import IO, Any

__all__ = [
    "ExecResult",
    "CodeSandbox",
    "Runner",
    "SandboxError",
    "IsolationUnavailable",
    "LimitExceeded",
    "LIMIT_KINDS",
    "first_limit",
    "OUTPUT_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_MEMORY_MB",
    "MIN_MEMORY_MB",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "MAIN_FILE",
    "check_limits",
    "check_run_args",
    "CappedBuffer",
    "PROGRAMS",
    "program_text",
    "PAGE_BYTES",
    "files_too_large",
]

#: Bytes kept of each output stream (stdout, stderr).
OUTPUT_LIMIT = 64 * 1024
#: A run's limits: the defaults and the bounds :func:`check_limits` holds every caller to (the
#: CodeExec environments take theirs from here).
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 512
MIN_MEMORY_MB, MAX_MEMORY_MB = 64, 65536
MAX_TIMEOUT_S = 600.0
#: The name ``code`` is written under in the work directory.
MAIN_FILE = "main.py"
#: The programs the back ends start inside the sandbox, in ``sandboxes/code/programs/``.
PROGRAMS = ("docker_bootstrap.py", "launcher.py", "bwrap_launcher.sh", "unshare_root.sh")


def program_text(name: str) -> str:
    """The text of ``name`` (one of :data:`PROGRAMS`), which a back end hands to an interpreter
    inside the sandbox (``python3 -c``, ``bash -c``, ``sh -c``); read from the installed package.

    Raises:
        ValueError: ``name`` is not one of :data:`PROGRAMS`.
    """
    if name not in PROGRAMS:
        raise ValueError(f"no sandbox program {name!r}: the programs are {', '.join(PROGRAMS)}")
    return (resources.files("sandboxes.code") / "programs" / name).read_text(encoding="utf-8")


class SandboxError(RuntimeError):
    """The back end itself failed (not the code it ran): e.g. the Docker daemon went away."""


class IsolationUnavailable(SandboxError):
    """No isolation mechanism is available; the message says how to get one."""


#: The limits a run can hit, in the order :attr:`ExecResult.limit` reports them when several were.
LIMIT_KINDS = ("memory", "processes", "disk", "output", "timeout")

_LIMIT_TEXT = {
    "memory": "the run hit its memory limit (all its processes together)",
    "processes": "the run hit its process limit (a fork was refused)",
    "disk": "the run filled its writable space (/work, /tmp or /dev/shm) or its file-size limit",
    "output": "the run's output passed the limit (the rest was dropped, or the run was killed)",
    "timeout": "the run passed its time limit and was killed",
}


class LimitExceeded(SandboxError):
    """A run hit one of its limits; :attr:`kind` is one of :data:`LIMIT_KINDS`.

    Not raised by ``run`` (the code's behaviour is data): :attr:`ExecResult.error` returns one, for
    callers that prefer an exception (``raise result.error``).
    """

    def __init__(self, kind: str, detail: str = ""):
        if kind not in LIMIT_KINDS:
            raise ValueError(f"kind must be one of {LIMIT_KINDS}, got {kind!r}")
        self.kind = kind
        super().__init__(_LIMIT_TEXT[kind] + (f": {detail}" if detail else ""))


@dataclass(frozen=True)
class ExecResult:
    """What one run did.

    Attributes:
        stdout: standard output, UTF-8 decoded (invalid bytes replaced), at most ``output_limit``
            bytes before decoding.
        stderr: standard error, likewise.
        exit_code: the program's exit status; ``128 + N`` when killed by signal ``N`` (137 for
            SIGKILL: timeouts and OOM kills).
        timed_out: the run passed ``timeout_s`` and was killed.
        oom_killed: the run hit its memory limit (Docker: the kernel's OOM killer ended it; process
            back end: an allocation failed under the address-space limit and Python raised
            ``MemoryError``).
        duration_s: wall-clock seconds from start to the end of the run, as seen by the host.
        truncated: some output (either stream) was dropped past the limit.
        limit: the limit the run hit, one of :data:`LIMIT_KINDS` (the first in that order when
            it hit several), or ``None``. A run can hit one and still exit 0 (output dropped past
            ``output_limit``, a fork refused and handled): ``ok`` says nothing about limits.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    oom_killed: bool
    duration_s: float
    truncated: bool
    limit: str | None = None

    @property
    def error(self) -> LimitExceeded | None:
        """A :class:`LimitExceeded` naming :attr:`limit`, or ``None`` when no limit was hit."""
        return None if self.limit is None else LimitExceeded(self.limit)

    @property
    def ok(self) -> bool:
        """Exit status 0, not timed out, not OOM-killed."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @property
    def misbehaved(self) -> bool:
        """Timed out, OOM-killed or killed by a signal: the back end starts clean after it."""
        return self.timed_out or self.oom_killed or self.exit_code >= 128


def first_limit(hit: set[str]) -> str | None:
    """The first of :data:`LIMIT_KINDS` in ``hit`` (``None`` for an empty set)."""
    return next((kind for kind in LIMIT_KINDS if kind in hit), None)


def check_limits(timeout_s: object, memory_mb: object) -> None:
    """Check a run's limits against the sandbox's bounds: ``timeout_s`` a number in
    (0, :data:`MAX_TIMEOUT_S`], ``memory_mb`` an int in [:data:`MIN_MEMORY_MB`,
    :data:`MAX_MEMORY_MB`]. What :meth:`CodeSandbox.run` checks, and what an environment that
    passes its own limits on checks them with when it is built.

    Raises:
        ValueError: either is out of its bounds (or not a number; a bool is not one).
    """
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not math.isfinite(timeout_s)
        or not 0 < timeout_s <= MAX_TIMEOUT_S
    ):
        raise ValueError(f"timeout_s must be a number in (0, {MAX_TIMEOUT_S:g}], got {timeout_s!r}")
    if (
        isinstance(memory_mb, bool)
        or not isinstance(memory_mb, int)
        or not MIN_MEMORY_MB <= memory_mb <= MAX_MEMORY_MB
    ):
        raise ValueError(
            f"memory_mb must be an int in [{MIN_MEMORY_MB}, {MAX_MEMORY_MB}], got {memory_mb!r}"
        )


def check_run_args(
    code: object,
    stdin: object,
    files: Mapping[str, str | bytes] | None,
    timeout_s: object,
    memory_mb: object,
) -> dict[str, bytes]:
    """Validate the arguments of :meth:`CodeSandbox.run`; return every file as bytes by name.

    Raises:
        TypeError: ``code``/``stdin`` not ``str``, a file's content not ``str``/``bytes``.
        ValueError: a file name that is absolute, has ``..``, is empty or is ``main.py``;
            ``timeout_s`` or ``memory_mb`` outside the bounds (:func:`check_limits`).
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    if not isinstance(stdin, str):
        raise TypeError(f"stdin must be a str, got {type(stdin).__name__}")
    check_limits(timeout_s, memory_mb)
    out: dict[str, bytes] = {MAIN_FILE: code.encode("utf-8")}
    for name, content in (files or {}).items():
        path = PurePosixPath(str(name))
        if (
            not isinstance(name, str)
            or not name
            or path.is_absolute()
            or ".." in path.parts
            or "\x00" in name
            or str(path) == MAIN_FILE
        ):
            raise ValueError(
                f"file name {name!r} must be a non-empty relative path without '..', "
                f"other than {MAIN_FILE!r} (the code itself)"
            )
        if isinstance(content, str):
            out[str(path)] = content.encode("utf-8")
        elif isinstance(content, bytes):
            out[str(path)] = content
        else:
            raise TypeError(f"file {name!r} must be str or bytes, got {type(content).__name__}")
    return out


class CappedBuffer:
    """Keeps the first ``limit`` bytes written; counts (and drops) the rest."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self.limit = limit
        self._parts: list[bytes] = []
        self._kept = 0
        self.dropped = 0
        #: Called after every write (e.g. to stop a run whose output floods).
        self.on_write: Any = None

    @property
    def total(self) -> int:
        """Bytes written so far, kept and dropped."""
        return self._kept + self.dropped

    def write(self, data: bytes) -> None:
        room = self.limit - self._kept
        if room > 0:
            piece = data[:room]
            self._parts.append(piece)
            self._kept += len(piece)
        self.dropped += max(0, len(data) - max(room, 0))
        if self.on_write is not None:
            self.on_write()

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        return b"".join(self._parts).decode("utf-8", errors="replace")

    def cut_tail(self, count: int) -> None:
        """Forget the last ``count`` bytes written (a trailer the back end appended), kept or not."""
        total = self.total - count
        kept = min(self._kept, max(0, total))
        data = b"".join(self._parts)[:kept]
        self._parts, self._kept = [data], kept
        self.dropped = max(0, total - kept)

    def drain(self, stream: IO[bytes], finish: threading.Event | None = None) -> None:
        """Read ``stream`` to its end into this buffer (run in a thread).

        With ``finish`` (for a pipe whose writer may outlive the run: a process that escaped the
        kill), the pipe's descriptor is polled instead, and once ``finish`` is set the reading
        ends at the first moment nothing more is waiting in the pipe, or after
        :data:`FINISH_BYTES` more bytes or :data:`FINISH_READS` more reads (a writer that
        dribbles a byte at a time): everything written before ``finish`` is kept, however late
        this thread is scheduled, and the thread ends though the pipe stays open.
        """
        if finish is not None:
            self._drain_until(stream.fileno(), finish)
            return
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            self.write(chunk)

    def _drain_until(self, fd: int, finish: threading.Event) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        late_bytes = late_reads = 0
        while True:
            if not poller.poll(0 if finish.is_set() else 50):
                if finish.is_set():
                    return
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            self.write(chunk)
            if finish.is_set():
                late_bytes += len(chunk)
                late_reads += 1
                if late_bytes > FINISH_BYTES or late_reads > FINISH_READS:
                    return


#: Bytes a drain still reads after its ``finish`` is set (pipe buffers hold at most 1 MiB by
#: default, ``/proc/sys/fs/pipe-max-size``), so a writer that never stops cannot hold it.
FINISH_BYTES = 2**20
#: Reads a drain still makes after its ``finish`` is set: a full pipe takes at most 16 reads of
#: 64 KiB, so this only stops a writer that keeps a byte or two waiting at every read.
FINISH_READS = 64

#: Bytes of one page of a tmpfs mount: each file takes whole pages of the work directory.
PAGE_BYTES = 4096


def files_too_large(
    code: str,
    files: Mapping[str, str | bytes] | None,
    max_file_bytes: int | None,
    work_bytes: int | None,
) -> str | None:
    """Why ``code`` (as ``main.py``) and ``files`` would not fit a work directory of
    ``work_bytes`` (whole pages) under a file-size limit of ``max_file_bytes``, or ``None`` when
    they fit (``None`` limits: no limit of that kind).

    Example:
        >>> files_too_large("", {"a": b"x" * 5000}, 4096, None)
        'a is 5,000 bytes, over the 4,096-byte file-size limit'
        >>> files_too_large("pass", {"a": b"x" * 5000}, None, 8192)
        'the files take 12,288 bytes, over the 8,192-byte work directory'
    """
    sizes = {MAIN_FILE: len(code.encode("utf-8", "surrogatepass"))}
    for name, content in (files or {}).items():
        raw = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
        sizes[name] = len(raw)
    for name, size in sizes.items():
        if max_file_bytes is not None and size > max_file_bytes:
            return f"{name} is {size:,} bytes, over the {max_file_bytes:,}-byte file-size limit"
    taken = sum(-(-size // PAGE_BYTES) * PAGE_BYTES for size in sizes.values())
    if work_bytes is not None and taken > work_bytes:
        return f"the files take {taken:,} bytes, over the {work_bytes:,}-byte work directory"
    return None


class _ForwardingLease:
    def __init__(self, sandbox: CodeSandbox):
        self.sandbox = sandbox

    def run(self, code: str, **kwargs: Any) -> ExecResult:
        return self.sandbox.run(code, **kwargs)

    def files_too_large(
        self, code: str, files: Mapping[str, str | bytes] | None = None
    ) -> str | None:
        return self.sandbox.files_too_large(code, files)

    def close(self) -> None:
        pass


def drain_in_thread(
    stream: IO[bytes], buffer: CappedBuffer, finish: threading.Event | None = None
) -> threading.Thread:
    """A started daemon thread running ``buffer.drain(stream, finish)``."""
    thread = threading.Thread(target=buffer.drain, args=(stream, finish), daemon=True)
    thread.start()
    return thread


class Runner(ABC):
    """What runs code: a sandbox or a lease of one. :meth:`run` checks the arguments (the same
    checks for every back end), then hands them to the back end's :meth:`_run`."""

    def run(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_mb: int = DEFAULT_MEMORY_MB,
    ) -> ExecResult:
        """Run ``code`` as ``python3 main.py`` in a fresh work directory.

        Args:
            code: Python source.
            stdin: text on standard input (UTF-8).
            files: extra files for the work directory, by relative path (``str`` is UTF-8 encoded).
            timeout_s: wall-clock limit in seconds, in (0, :data:`MAX_TIMEOUT_S`].
            memory_mb: memory limit in MiB, in [:data:`MIN_MEMORY_MB`, :data:`MAX_MEMORY_MB`].

        Returns:
            The :class:`ExecResult`.

        Raises:
            TypeError, ValueError: bad arguments (see :func:`check_run_args`).
            SandboxError: the back end failed (not the code); ``RuntimeError`` after ``close()``.
        """
        all_files = check_run_args(code, stdin, files, timeout_s, memory_mb)
        return self._run(all_files, stdin, float(timeout_s), memory_mb)

    @abstractmethod
    def _run(
        self, all_files: dict[str, bytes], stdin: str, timeout_s: float, memory_mb: int
    ) -> ExecResult:
        """Run ``main.py`` among the checked ``all_files`` (contents by relative path)."""


class CodeSandbox(Runner):
    """Runs untrusted Python code in isolation. Use as a context manager, or call :meth:`close`.

    Subclasses: :class:`~sandboxes.code.process_backend.ProcessSandbox` (``backend="process"``),
    :class:`~sandboxes.code.docker_backend.DockerSandbox` (``backend="docker"``).
    """

    #: ``"process"`` or ``"docker"``.
    backend: str = ""
    #: Largest file a run may be given or write, bytes (RLIMIT_FSIZE); ``None``: no limit.
    max_file_bytes: int | None = None
    #: Size of the work directory that holds ``main.py`` and the files, bytes; ``None``: unsized.
    work_bytes: int | None = None

    def files_too_large(
        self, code: str, files: Mapping[str, str | bytes] | None = None
    ) -> str | None:
        """Why a run of ``code`` with ``files`` could not start here, or ``None`` when they fit.

        A run of files that do not fit fails before ``main.py`` starts (``limit="disk"``);
        a caller that would rather not start it asks first. Leases answer the same.
        """
        return files_too_large(code, files, self.max_file_bytes, self.work_bytes)

    @abstractmethod
    def close(self) -> None:
        """Release every container, process and temporary directory; may be called twice."""

    def lease(self) -> Any:
        """An object with the same ``run`` and a ``close()``, for the runs of one episode.

        The docker back end dedicates one container to a lease and removes it at ``close()`` (a
        fresh container per episode). Here (every run already starts from nothing) a lease simply
        forwards to :meth:`run`.
        """
        return _ForwardingLease(self)

    def __enter__(self) -> CodeSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
