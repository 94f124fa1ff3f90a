"""Where a result came from: the code (git commit and uncommitted changes), the versions of the
libraries whose numerics it depends on, and the time; and whether code changed since.

Every run folder records one (``provenance.json`` of ``python -m baselines.train`` and
``python -m baselines.sft``; ``provenance`` of an ``agentgym eval`` bundle)::

    {"source": "git", "commit": "3f4ff41...", "dirty": true,
     "dirty_paths": ["baselines/trainer.py"], "diff_sha256": "9b1c...",
     "agentgym_version": "0.1.0", "python": "3.11.2",
     "packages": {"torch": "2.13.0+cpu", "transformers": "5.24.0", ...},
     "time": "2026-12-01T21:40:00Z"}

``source`` is ``"git"`` when agentgym was imported from a git checkout (the folder that holds
``agentgym/`` is the top of a work tree), else ``"installed"``, with ``commit``, ``dirty``,
``dirty_paths`` and ``diff_sha256`` null: then ``agentgym_version`` names the code. ``dirty`` and
``dirty_paths`` look only at the package code (:data:`CODE_PATHS`), so results and docs written
into the checkout do not make it dirty. ``packages`` maps each of :data:`PACKAGES` to its installed
version (null when not installed), read from package metadata: nothing here imports torch.

:func:`changed_since` and :func:`stale_reason` say whether files changed since a recorded commit
(a study marks the results of older code stale with them).

Example:
    >>> p = describe(root=None)
    >>> p["source"], p["commit"], p["dirty"], "numpy" in p["packages"]
    ('installed', None, None, True)
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgym import __version__ as AGENTGYM_VERSION
from agentgym.fileio import write_text_atomic

__all__ = [
    "CODE_PATHS",
    "FILE_NAME",
    "PACKAGES",
    "changed_since",
    "describe",
    "record",
    "source_root",
    "stale_reason",
]

#: The package code of the checkout, relative to its top: what ``dirty`` looks at.
CODE_PATHS = ("agentgym", "baselines", "sandboxes", "leaderboards", "pyproject.toml")
#: The distributions whose versions are recorded (they decide a run's numbers).
PACKAGES = ("torch", "transformers", "accelerate", "peft", "numpy", "gymnasium", "vllm", "trl")
#: The file :func:`record` writes in a run folder.
FILE_NAME = "provenance.json"

_UNSET: Any = object()


def _git(root: Path, *args: str) -> bytes:
    """``git -C root args`` (stdout); ``GIT_*`` variables of the caller are not passed on, so a
    hook's ``GIT_DIR`` cannot point the question at another repository.

    Raises:
        subprocess.CalledProcessError: git failed.
        OSError: git could not be started.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        check=True,
        env=env,
        timeout=60,
    ).stdout


def source_root() -> Path | None:
    """The git work tree agentgym was imported from (the folder that holds ``agentgym/``, when it
    is the top of a work tree), or None (an installed package, or no git)."""
    root = Path(__file__).resolve().parents[1]
    return root if _is_top(root) else None


def _is_top(root: Path) -> bool:
    if shutil.which("git") is None:
        return False
    try:
        top = _git(root, "rev-parse", "--show-toplevel").decode().strip()
    except (OSError, subprocess.SubprocessError):
        return False
    # A site-packages inside some other repository (a venv in a checkout) is not a checkout.
    return bool(top) and Path(top).resolve() == root.resolve()


def _packages() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _dirty(root: Path) -> tuple[list[str], str | None]:
    """The code files that differ from HEAD (changed, staged or untracked-and-not-ignored), and
    the SHA-256 of ``git diff --binary HEAD`` over :data:`CODE_PATHS` followed, per untracked
    file, by its path, a NUL and its bytes (None when nothing differs)."""
    diff = _git(root, "diff", "--binary", "HEAD", "--", *CODE_PATHS)
    changed = _git(root, "diff", "--name-only", "-z", "HEAD", "--", *CODE_PATHS).split(b"\0")
    untracked = _git(root, "ls-files", "-z", "--others", "--exclude-standard", "--", *CODE_PATHS)
    new = sorted(p for p in untracked.split(b"\0") if p)
    paths = sorted({p.decode() for p in changed if p} | {p.decode() for p in new})
    if not paths:
        return [], None
    digest = hashlib.sha256(diff)
    for name in new:
        digest.update(name + b"\0")
        digest.update((root / name.decode()).read_bytes())
    return paths, digest.hexdigest()


def describe(root: Path | None = _UNSET) -> dict[str, Any]:
    """The provenance of code run now (the module docstring lists the fields).

    Args:
        root: the git work tree whose code runs; default :func:`source_root` (None: an installed
            package, described by its version alone).

    Raises:
        subprocess.CalledProcessError: ``root`` is given but is not a git work tree with a commit.
    """
    if root is _UNSET:
        root = source_root()
    commit, dirty, paths, digest = None, None, None, None
    if root is not None:
        commit = _git(Path(root), "rev-parse", "HEAD").decode().strip()
        paths, digest = _dirty(Path(root))
        dirty = bool(paths)
    return {
        "source": "installed" if root is None else "git",
        "commit": commit,
        "dirty": dirty,
        "dirty_paths": paths,
        "diff_sha256": digest,
        "agentgym_version": AGENTGYM_VERSION,
        "python": platform.python_version(),
        "packages": _packages(),
        "time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def record(
    folder: str | os.PathLike[str],
    *,
    resumed: bool = False,
    root: Path | None = _UNSET,
    write: Callable[[Path, str], None] = write_text_atomic,
) -> dict[str, Any]:
    """Write :func:`describe` to ``folder/provenance.json`` and return what is there.

    A fresh run replaces the file. A resumed run keeps the first session's fields and appends its
    own description to the list ``resumed``, so a run continued by newer code says so. ``write``
    writes the text whole or not at all (default :func:`agentgym.fileio.write_text_atomic`; the
    trainer passes the crash-safe writer of its run folder); ``root`` is :func:`describe`'s.

    Raises:
        OSError: the folder cannot be written.
        ValueError: ``resumed`` and the file there is not a JSON object.
    """
    path = Path(folder) / FILE_NAME
    now = describe(root)
    if resumed and path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not a JSON object")
        data["resumed"] = [*data.get("resumed", []), now]
    else:
        data = now
    write(path, json.dumps(data, indent=1) + "\n")
    return data


def _under(path: str, prefixes: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def changed_since(commit: str, paths: Sequence[str], root: Path) -> list[str] | None:
    """The files under ``paths`` (relative to ``root``) that differ between ``commit`` and the
    work tree of ``root`` (committed since, or changed and not committed), sorted; None when
    ``root`` does not know ``commit``. New files that git does not track are not seen.

    Raises:
        subprocess.CalledProcessError: ``root`` is not a git work tree.
    """
    try:
        _git(root, "cat-file", "-e", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        return None
    out = _git(root, "diff", "--name-only", "-z", commit, "--", *paths)
    return sorted(p.decode() for p in out.split(b"\0") if p)


def stale_reason(
    provenance: Mapping[str, Any] | None, paths: Sequence[str], root: Path | None
) -> str | None:
    """Why a result recorded with ``provenance`` may not be what the code in ``root`` would give
    now, looking at ``paths`` only; None when it is current.

    Stale: no provenance; not made from a git checkout, or ``root`` is not one; a commit ``root``
    does not know; uncommitted changes under ``paths`` when it ran; files under ``paths``
    changed since its commit. A resumed run is judged by every session (``provenance["resumed"]``).

    Example: ``stale_reason(json.load(open("runs/x/provenance.json")), ["baselines/trainer.py"],
    source_root())``.
    """
    if not provenance:
        return "no provenance recorded (made by code older than the record)"
    if root is None:
        return "this code is not a git checkout: the recorded commit cannot be compared"
    for session in [provenance, *provenance.get("resumed", [])]:
        commit = session.get("commit")
        if not commit:
            return "not made from a git checkout (no commit recorded)"
        dirty = [p for p in session.get("dirty_paths") or [] if _under(p, paths)]
        if dirty:
            return f"made with uncommitted changes to {', '.join(dirty)} (at {commit[:12]})"
        changed = changed_since(commit, paths, root)
        if changed is None:
            return f"commit {commit[:12]} is not in this repository"
        if changed:
            return f"{', '.join(changed)} changed since {commit[:12]}"
    return None
