"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temp file in the same folder, then rename it
    into place (``os.replace``, atomic on POSIX): an interrupted write leaves the old file or
    none, never a partial one. Creates missing parent folders; the file gets the usual
    ``0o666 & ~umask`` permissions, applied by the kernel as it creates the temp file (the
    process's umask is never changed: a umask set to 0 for a moment, as ``os.umask`` must to
    read it, would give files that other threads create meanwhile world-writable modes).

    Raises:
        OSError: the folder cannot be created or written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}"
        try:
            fd = os.open(tmp, flags, 0o666)  # a result file is for sharing, as open() makes it
            break
        except FileExistsError:  # another writer's temp file: draw another name
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
