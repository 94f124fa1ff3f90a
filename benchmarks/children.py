"""Child processes of the benchmarks: a benchmark runs each measurement in a fresh interpreter
(its own peak RSS, its own imports, optionally another source tree) by re-running its own script
with ``--child NAME --payload JSON``, which calls ``CHILDREN[NAME](payload)``. Not a library;
imported by the benchmark scripts beside it (``python benchmarks/<script>.py`` puts this folder
on ``sys.path``).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def add_child_options(parser: argparse.ArgumentParser, children: dict[str, Callable]) -> None:
    """The hidden ``--child`` and ``--payload`` options."""
    parser.add_argument("--child", choices=sorted(children), help=argparse.SUPPRESS)
    parser.add_argument("--payload", default="{}", help=argparse.SUPPRESS)


def run_if_child(args: argparse.Namespace, children: dict[str, Callable]) -> bool:
    """In a child: run ``children[args.child]`` on the payload and say so (the caller returns)."""
    if not args.child:
        return False
    children[args.child](json.loads(args.payload))
    return True


def spawn(script: str, name: str, payload: dict, tree: Path) -> str:
    """Run ``script --child name`` with ``payload``, importing from ``tree``; its stdout.

    Raises:
        RuntimeError: the child failed (the end of its stderr is in the message).
    """
    command = [sys.executable, str(Path(script).resolve()), "--child", name]
    out = subprocess.run(
        [*command, "--payload", json.dumps(payload)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        cwd=tree,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {name} failed ({tree}):\n{out.stderr[-4000:]}")
    return out.stdout


def run_module_reporting_peak_rss(module: str, argv: list[str]) -> None:
    """``python -m module argv`` in this process; at exit (however it ends) prints
    ``PEAK_RSS_KIB <n>`` to stderr: the process's own peak RSS (``getrusage(RUSAGE_SELF)``;
    Linux reports KiB)."""

    def report() -> None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("PEAK_RSS_KIB", peak, file=sys.stderr)

    atexit.register(report)
    sys.argv = [module, *argv]
    runpy.run_module(module, run_name="__main__")


def archived_tree(repo: Path, commit: str) -> Path:
    """``commit`` of the git checkout ``repo`` as a source tree in the temporary folder (``git
    archive``, extracted once and reused), for a child to import the code as it was there."""
    import tempfile

    tree = Path(tempfile.gettempdir()) / f"agentgym-before-{commit}"
    if not (tree / "baselines").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", commit], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree
