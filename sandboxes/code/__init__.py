"""Isolated execution of untrusted Python code: one interface, two back ends.

* :class:`~sandboxes.code.base.CodeSandbox` / :class:`~sandboxes.code.base.ExecResult`: the
  interface, ``run(code, *, stdin="", files=None, timeout_s, memory_mb) -> ExecResult``.
  One run is one isolation unit on both back ends: memory, processes and disk are limited for the
  run as a whole, and a run that hits a limit says which in ``ExecResult.limit`` (one of
  :data:`LIMIT_KINDS`; ``ExecResult.error`` gives it as a :class:`LimitExceeded`), within
  ``timeout_s`` + 1 s.
* ``docker``: :class:`~sandboxes.code.docker_backend.DockerSandbox`, a pool of warm, locked-down
  containers (``--network none``, memory/pids/cpu limits, read-only root, non-root user, no
  capabilities), one ``docker exec`` per run.
* ``process``: :class:`~sandboxes.code.process_backend.ProcessSandbox`, bubblewrap (else
  ``unshare``) plus rlimits; refuses to run without isolation unless ``allow_unisolated=True``.
* :func:`make_sandbox` picks a back end by name (``"auto"``: Docker when a daemon answers and has
  the image, else the process back end); :func:`acquire_shared` / :func:`release_shared` share one
  sandbox per process and back-end configuration among environments, reference-counted.

The image: :mod:`sandboxes.code.image` (offline builder), ``sandboxes/docker/Dockerfile``.

Example:
    >>> from sandboxes.code import make_sandbox
    >>> with make_sandbox("process") as box:  # doctest: +SKIP
    ...     result = box.run("print(input()[::-1])", stdin="abc", timeout_s=5)
    >>> result.stdout, result.exit_code  # doctest: +SKIP
    ('cba\\n', 0)
"""

from __future__ import annotations

import os
import threading
from typing import Any

from sandboxes.code.base import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    LIMIT_KINDS,
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
    MIN_MEMORY_MB,
    OUTPUT_LIMIT,
    CodeSandbox,
    ExecResult,
    IsolationUnavailable,
    LimitExceeded,
    SandboxError,
    check_limits,
)

__all__ = [
    "BACKENDS",
    "CodeSandbox",
    "ExecResult",
    "SandboxError",
    "IsolationUnavailable",
    "LimitExceeded",
    "LIMIT_KINDS",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_MEMORY_MB",
    "MIN_MEMORY_MB",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "OUTPUT_LIMIT",
    "check_limits",
    "make_sandbox",
    "resolve_backend",
    "acquire_shared",
    "release_shared",
    "docker_available",
]

BACKENDS = ("auto", "docker", "process")


def docker_available() -> bool:
    """Whether a Docker daemon answers at ``$DOCKER_HOST`` (or the default socket) with the image."""
    from sandboxes.code.docker_backend import docker_available as _available

    return _available()


def resolve_backend(backend: str) -> str:
    """``"docker"`` or ``"process"`` for ``backend``; ``"auto"`` asks the daemon (cached per process).

    Raises:
        ValueError: ``backend`` not in :data:`BACKENDS`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    key = (os.getpid(), os.environ.get("DOCKER_HOST", ""))
    with _lock:
        if key not in _auto_cache:
            _auto_cache[key] = "docker" if docker_available() else "process"
        return _auto_cache[key]


def make_sandbox(backend: str = "auto", **options: Any) -> CodeSandbox:
    """A new sandbox of ``backend`` (``"auto"``, ``"docker"`` or ``"process"``).

    ``options`` go to :class:`~sandboxes.code.docker_backend.DockerSandbox` or
    :class:`~sandboxes.code.process_backend.ProcessSandbox`.

    Raises:
        ValueError: unknown back end. SandboxError / IsolationUnavailable: it cannot work here.
    """
    resolved = resolve_backend(backend)
    if resolved == "docker":
        from sandboxes.code.docker_backend import DockerSandbox

        return DockerSandbox(**options)
    from sandboxes.code.process_backend import ProcessSandbox

    return ProcessSandbox(**options)


_lock = threading.Lock()
_auto_cache: dict[tuple[int, str], str] = {}
_shared: dict[tuple[Any, ...], list[Any]] = {}  # key -> [sandbox, refcount]


def _forget_after_fork() -> None:
    # A forked child must not use (or close) its parent's containers and processes.
    global _lock
    _lock = threading.Lock()
    _shared.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def acquire_shared(backend: str = "auto", **options: Any) -> CodeSandbox:
    """The process-wide sandbox for ``(backend, options)``, created on first use; count one user.

    Every call must be paired with :func:`release_shared`; the last release closes the sandbox
    (its containers are removed), so nothing outlives the environments that used it.
    """
    resolved = resolve_backend(backend)
    key = (resolved, tuple(sorted(options.items())))
    with _lock:
        entry = _shared.get(key)
        if entry is None:
            entry = [make_sandbox(resolved, **options), 0]
            _shared[key] = entry
        entry[1] += 1
        return entry[0]


def release_shared(sandbox: CodeSandbox) -> None:
    """Drop one user of a sandbox from :func:`acquire_shared`; close it when none is left."""
    to_close = None
    with _lock:
        for key, entry in list(_shared.items()):
            if entry[0] is sandbox:
                entry[1] -= 1
                if entry[1] <= 0:
                    del _shared[key]
                    to_close = sandbox
                break
    if to_close is not None:
        to_close.close()
