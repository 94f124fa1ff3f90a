"""Calls under a hard wall-clock deadline: the function runs in a worker process, killed on expiry.

One of this package's two process limits, beside :func:`sandboxes.limits.run_bounded`. They are
different tools, not two copies of one. This pool keeps fresh-interpreter workers alive between
many short calls (an answer check costs 0.05-0.15 ms over the call itself) and may be called from
threads, so it never forks the caller and cannot use ``PR_SET_PDEATHSIG`` (which fires when the
*thread* that started a worker ends); its memory bound is ``RLIMIT_AS`` on the worker.
``run_bounded`` runs one long call (a leaderboard replay) in a child forked for it, bounds the
resident memory of the child's whole process tree, and stops it so that its ``finally`` blocks run.

Why a process: SymPy can spend hours inside one big-integer operation that holds the GIL, where no
thread and no Python signal handler can stop it, and math-verify's own timeouts use
``signal.alarm`` (main thread only). A process can always be killed.

How: a :class:`WorkerPool` keeps worker processes (fresh interpreters, never forks of the caller,
so they are safe from threaded callers and never re-run the caller's ``__main__``) between calls.
:meth:`WorkerPool.call` sends ``(function, args, kwargs)`` pickled to an idle worker over its stdin
and waits up to ``timeout_s`` seconds of wall time for the pickled result on its stdout. On expiry
the worker gets SIGKILL, :class:`DeadlineExceeded` is raised, and a replacement starts at once in
the background. The deadline counts from the request's sending: starting a worker (imports and
the pool's ``initializer``; about a second) is waited for before it, up to
:data:`START_TIMEOUT_S`.

Per call this adds two pipe messages and the pickling of the arguments and the result: about
0.05 ms for an empty call, 0.07-0.15 ms for an answer check, on a loaded 2-core machine
(``benchmarks/bench_grading.py`` prints it).

Clean-up: a worker leads its own session (Ctrl-C in a terminal reaches only the caller), exits
when its stdin closes (the caller exited or closed the pool), and stops itself with SIGALRM
:data:`ORPHAN_GRACE_S` seconds after a call's deadline should the caller have died meanwhile. A
forked child of the caller never talks to its parent's workers: it starts its own.

Example:
    >>> pool = WorkerPool()
    >>> pool.call(5.0, pow, 2, 10)
    1024
    >>> import time
    >>> pool.call(0.5, time.sleep, 60)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    sandboxes.deadline.DeadlineExceeded: time.sleep ran past its deadline of 0.5 s; the worker ...
    >>> pool.close()
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import resource
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "START_TIMEOUT_S",
    "ORPHAN_GRACE_S",
    "DeadlineExceeded",
    "WorkerCrashed",
    "WorkerPool",
    "WorkerStartError",
]

#: Longest wait, in seconds, for a new worker to finish its imports and initializer.
START_TIMEOUT_S = 120.0
#: Seconds after a call's deadline at which a worker whose caller has gone stops itself.
ORPHAN_GRACE_S = 10.0

_HEADER = struct.Struct(">Q")
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


class DeadlineExceeded(TimeoutError):
    """A call ran past its deadline; its worker was killed."""


class WorkerCrashed(RuntimeError):
    """A worker ended during a call without a result (a crash, a kill from elsewhere)."""


class WorkerStartError(RuntimeError):
    """A new worker did not start (the message says why): a broken installation, not a call's
    fault."""


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class _Worker:
    """One worker process and its two pipes."""

    def __init__(self, initializer: str | None, max_memory_mb: int | None):
        env = dict(os.environ)
        # the same packages as the caller's, even where they are only on the caller's sys.path
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        code = "from sandboxes.deadline import _worker_main; _worker_main()"
        args = [initializer or "", str(max_memory_mb or 0)]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self.owner = os.getpid()
        self.ready = False
        self._buffer = b""

    def wait_ready(self, timeout_s: float) -> None:
        try:
            message = self._receive(time.monotonic() + timeout_s)
        except WorkerCrashed as err:
            raise WorkerStartError(f"a worker process failed to start: {err}") from None
        except DeadlineExceeded:
            self.kill()
            raise WorkerStartError(
                f"a worker process did not start within {timeout_s:g} s (is the machine "
                "overloaded?)"
            ) from None
        if not (isinstance(message, tuple) and message[:1] == ("ready",)):
            self.kill()
            raise WorkerStartError(f"a worker process failed to start: {message!r}")
        self.ready = True

    def call(self, payload: bytes, timeout_s: float) -> Any:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.proc.stdin.flush()
        except OSError as err:  # it died while idle
            raise WorkerCrashed(f"the worker process is gone ({err})") from None
        return self._receive(time.monotonic() + timeout_s)

    def _receive(self, deadline: float) -> Any:
        """One pickled message, read by ``deadline`` (monotonic seconds)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                if len(self._buffer) >= _HEADER.size:
                    (size,) = _HEADER.unpack_from(self._buffer)
                    end = _HEADER.size + size
                    if len(self._buffer) >= end:
                        data, self._buffer = self._buffer[_HEADER.size : end], self._buffer[end:]
                        return pickle.loads(data)  # noqa: S301 - our own worker's answer
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise DeadlineExceeded
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    raise WorkerCrashed(f"the worker process ended (exit status {code})")
                self._buffer += chunk

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close_pipes()

    def close(self) -> None:
        """Close its stdin (it exits on end of input); kill it if it has not exited in 2 s."""
        self._close_pipes()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def forget(self) -> None:
        """In a forked child: drop the inherited pipes without touching the parent's worker."""
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    os.close(stream.fileno())
                except (OSError, ValueError):
                    pass
        self.proc.returncode = 0  # never waited for here: it is not this process's child


class WorkerPool:
    """Worker processes that run calls under a deadline (module docstring).

    Args:
        initializer: ``"module:function"`` each worker calls once at start (imports, warm-up),
            before it counts as ready; ``None`` for none.
        max_workers: most workers alive at once; a call waits for a free one beyond that
            (default: the number of CPUs, at least 2).
        max_memory_mb: address-space limit of each worker, MiB (``RLIMIT_AS``; over it the call
            raises ``MemoryError`` in the worker); ``None`` for no limit.
        start_timeout_s: longest wait for a new worker to be ready, seconds.

    Thread-safe: concurrent calls use different workers.
    """

    def __init__(
        self,
        initializer: str | None = None,
        *,
        max_workers: int | None = None,
        max_memory_mb: int | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ):
        self.initializer = initializer
        self.max_workers = max_workers or max(2, os.cpu_count() or 1)
        self.max_memory_mb = max_memory_mb
        self.start_timeout_s = start_timeout_s
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._live = 0
        _POOLS.add(self)

    def call(self, timeout_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker, with ``timeout_s`` seconds of wall time.

        Args:
            timeout_s: seconds from sending the request to the whole result, > 0.
            fn: a module-level function (pickled by name); its arguments and result must pickle.

        Returns:
            What ``fn`` returned.

        Raises:
            DeadlineExceeded: no result within ``timeout_s``; the worker was killed.
            WorkerCrashed: the worker ended without a result.
            WorkerStartError: no worker could start.
            ValueError: ``timeout_s`` is not a positive number.
            Exception: what ``fn`` raised in the worker (re-raised here when it pickles, else a
                ``RuntimeError`` naming it).
        """
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        payload = pickle.dumps((fn, args, kwargs, float(timeout_s)), pickle.HIGHEST_PROTOCOL)
        worker = self._take()
        try:
            if not worker.ready:
                worker.wait_ready(self.start_timeout_s)
            status, value = worker.call(payload, timeout_s)
        except DeadlineExceeded:
            self._discard(worker)
            raise DeadlineExceeded(
                f"{_name(fn)} ran past its deadline of {timeout_s:g} s; the worker was killed"
            ) from None
        except BaseException:
            self._discard(worker)
            raise
        self._give_back(worker)
        if status == "raised":
            raise value
        return value

    def close(self) -> None:
        """Stop the idle workers (those busy in other threads stop when their call ends)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            if worker.owner != os.getpid():
                continue
            if worker.ready:
                worker.close()
            else:  # still starting: nothing to finish
                worker.kill()

    # ------------------------------------------------------------------ internals

    def _take(self) -> _Worker:
        with self._cond:
            while not self._idle and self._live >= self.max_workers:
                self._cond.wait()
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    return worker
                worker.kill()  # it died while idle (killed from elsewhere): not this call's fault
                self._live -= 1
            self._live += 1
        try:
            return _Worker(self.initializer, self.max_memory_mb)
        except BaseException as err:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            if isinstance(err, OSError):
                raise WorkerStartError(f"cannot start a worker process: {err}") from err
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify()

    def _discard(self, worker: _Worker) -> None:
        """Kill ``worker`` and start its replacement now, so it is ready by the next call."""
        worker.kill()
        replacement = None
        if worker.ready:  # a worker that never started is not retried here
            try:
                replacement = _Worker(self.initializer, self.max_memory_mb)
            except OSError:
                replacement = None
        with self._cond:
            if replacement is None:
                self._live -= 1
            else:
                self._idle.append(replacement)
            self._cond.notify()

    def _after_fork_in_child(self) -> None:
        for worker in self._idle:
            worker.forget()
        self._cond = threading.Condition()
        self._idle = []
        self._live = 0


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()


def _forget_all_in_child() -> None:
    for pool in list(_POOLS):
        pool._after_fork_in_child()


atexit.register(_close_all)
os.register_at_fork(after_in_child=_forget_all_in_child)


# ----------------------------------------------------------------------------- the worker side


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _send(stream: BinaryIO, message: Any) -> None:
    try:
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    except Exception as err:  # noqa: BLE001 - a result or exception that does not pickle
        status, value = message if isinstance(message, tuple) else ("raised", None)
        detail = f"{type(value).__name__}: {value}"[:500] if status == "raised" else ""
        data = pickle.dumps(
            (
                "raised",
                RuntimeError(f"the worker's {status} value does not pickle: {err}; {detail}"),
            )
        )
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _worker_main() -> None:
    """The worker's loop (run as ``python -c``; argv: initializer, memory limit in MiB)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the answers
    inp = sys.stdin.buffer
    initializer, memory_mb = sys.argv[1], int(sys.argv[2])
    try:
        if memory_mb > 0:
            limit = memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if initializer:
            module, _, function = initializer.partition(":")
            getattr(importlib.import_module(module), function)()
    except BaseException as err:  # noqa: BLE001 - reported to the caller, which raises
        with contextlib.suppress(BrokenPipeError):
            _send(out, ("failed", f"{type(err).__name__}: {err}"))
        return
    try:
        _send(out, ("ready", os.getpid()))
        _serve(inp, out)
    except BrokenPipeError:  # the caller closed the pool or exited meanwhile
        return


def _serve(inp: BinaryIO, out: BinaryIO) -> None:
    while True:
        header = _read_exactly(inp, _HEADER.size)
        if header is None:
            return  # the caller closed the pool or exited
        data = _read_exactly(inp, _HEADER.unpack(header)[0])
        if data is None:
            return
        try:
            fn, args, kwargs, timeout_s = pickle.loads(data)  # noqa: S301 - from our caller
            # Should the caller die during this call, nobody kills this process: stop anyway.
            signal.setitimer(signal.ITIMER_REAL, timeout_s + ORPHAN_GRACE_S)
            try:
                result: tuple[str, Any] = ("ok", fn(*args, **kwargs))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller
            result = ("raised", err)
        _send(out, result)
