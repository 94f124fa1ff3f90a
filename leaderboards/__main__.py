"""``python -m leaderboards``: submit replay-verified results, show and render the leaderboard.

Examples::

    python -m leaderboards submit run.json --name "my agent"
    python -m leaderboards show --env Sokoban-v0
    python -m leaderboards render --html leaderboard.html --markdown leaderboard.md
    python -m leaderboards rebuild            # a fresh database from leaderboards/baselines/

Every subcommand takes ``--db PATH``, before or after it (default ``$AGENTGYM_LEADERBOARD`` or
``./leaderboard.sqlite``). Exit status: 0 accepted/ok, 1 refused submission, 2 usage error (no
database to show, a ``--db`` that is not a leaderboard database or whose folder is missing, an
output path that cannot be written).
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from agentgym.fileio import write_text_atomic
from leaderboards.render import html_page, markdown_tables, text_tables
from leaderboards.store import Store, _duplicate_message, default_db_path
from leaderboards.verify import MAX_BUNDLE_BYTES, SubmissionError, load_bundle, verify_bundle

__all__ = ["main", "submit", "rebuild", "BASELINES_DIR"]

BASELINES_DIR = Path(__file__).with_name("baselines")


def submit(
    path: str | os.PathLike[str], name: str, db: str | os.PathLike[str], max_bytes: int
) -> tuple[int, Store, float, int]:
    """Check, replay and store one bundle; return ``(id, store, replay seconds, episodes)``.

    Raises:
        SubmissionError: any refusal (the database is unchanged).
    """
    bundle = load_bundle(path, max_bytes)
    store = Store(db)
    t0 = time.perf_counter()
    verified = verify_bundle(bundle)
    replay_s = time.perf_counter() - t0
    existing = store.find_digest(verified.digest)
    if existing is not None:
        raise SubmissionError(_duplicate_message(*existing))
    sid = store.add(verified, name)
    return sid, store, replay_s, verified.episodes_replayed


def rebuild(db: str | os.PathLike[str], folder: str | os.PathLike[str] = BASELINES_DIR) -> int:
    """Build a fresh database at ``db`` from every ``*.json`` bundle in ``folder``.

    Each bundle is verified and stored under its agent's name; the new database replaces ``db``
    only when all are accepted. Returns the number of bundles.

    Raises:
        SubmissionError: a bundle is refused (``db`` is left as it was).
    """
    paths = sorted(Path(folder).glob("*.json"))
    if not paths:
        raise SubmissionError(f"no *.json bundles in {folder}")
    db = Path(db)
    fd, tmp = tempfile.mkstemp(prefix=f".{db.name}.", suffix=".tmp", dir=db.parent or ".")
    os.close(fd)
    os.unlink(tmp)  # SQLite creates it
    try:
        for path in paths:
            bundle = load_bundle(path, MAX_BUNDLE_BYTES)
            try:
                verified = verify_bundle(bundle)
            except SubmissionError as err:
                raise SubmissionError(f"{path.name}: {err}") from err
            Store(tmp).add(verified, bundle["agent"]["name"])
        os.replace(tmp, db)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return len(paths)


def _env_filter(name: str | None) -> str | None:
    if name is None or "/" in name:
        return name
    return f"agentgym/{name}"


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m leaderboards`` argument parser."""
    db_help = "SQLite database (default $AGENTGYM_LEADERBOARD or ./leaderboard.sqlite)"
    # --db goes before or after the subcommand; SUPPRESS keeps a subcommand without it from
    # overwriting the value given before.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS, metavar="PATH", help=db_help)
    parser = argparse.ArgumentParser(
        prog="python -m leaderboards",
        description="The local agentgym leaderboard: every submission is replayed before it is "
        "accepted.",
    )
    parser.add_argument("--db", default=None, metavar="PATH", help=db_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser(
        "submit",
        parents=[common],
        help="verify a result bundle by replay and store it",
        description="Check the bundle's size, JSON and schema, replay every episode from its seed "
        "and actions, and store it if everything matches. A refused bundle leaves the database "
        "unchanged.",
    )
    p.add_argument("bundle", help="result bundle written by `agentgym eval --out`")
    p.add_argument("--name", required=True, help="the entry's name on the leaderboard")
    p.add_argument(
        "--max-mb",
        type=float,
        default=MAX_BUNDLE_BYTES / 2**20,
        help=f"refuse bundles larger than this many MiB (default {MAX_BUNDLE_BYTES // 2**20})",
    )
    p = sub.add_parser("show", parents=[common], help="print the ranked tables")
    p.add_argument("--env", default=None, metavar="ID", help="only this environment")
    p = sub.add_parser("render", parents=[common], help="write static HTML and/or Markdown")
    p.add_argument("--html", default=None, metavar="PATH", help="write a sortable HTML page")
    p.add_argument("--markdown", default=None, metavar="PATH", help="write Markdown ('-': stdout)")
    p.add_argument("--env", default=None, metavar="ID", help="only this environment")
    p = sub.add_parser(
        "rebuild",
        parents=[common],
        help="rebuild the database from the committed baseline bundles",
    )
    p.add_argument(
        "--from",
        dest="folder",
        default=str(BASELINES_DIR),
        metavar="DIR",
        help="folder of bundles (default leaderboards/baselines)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    db = Path(args.db) if args.db else default_db_path()
    if args.command in ("show", "render") and not db.is_file():
        print(
            f"leaderboards {args.command}: no leaderboard database at {db}: submit a bundle "
            "(`python -m leaderboards submit run.json --name NAME --db PATH`), `rebuild` one "
            "from the baselines, or pass the right --db",
            file=sys.stderr,
        )
        return 2
    if args.command in ("submit", "rebuild") and not db.resolve().parent.is_dir():
        print(
            f"leaderboards {args.command}: the folder of --db {db} does not exist; create it or "
            "choose another path",
            file=sys.stderr,
        )
        return 2
    if args.command == "submit" and not (math.isfinite(args.max_mb) and args.max_mb > 0):
        print(
            f"leaderboards submit: --max-mb must be a number > 0, got {args.max_mb}",
            file=sys.stderr,
        )
        return 2
    try:
        if args.command == "submit":
            sid, store, replay_s, count = submit(
                args.bundle, args.name, db, int(args.max_mb * 2**20)
            )
            print(
                f"accepted {args.bundle} as entry #{sid} ({args.name!r}) in {db}: "
                f"{count} episodes replayed in {replay_s:.2f} s"
            )
            return 0
        if args.command == "show":
            print(text_tables(Store(db).entries(_env_filter(args.env))), end="")
            return 0
        if args.command == "render":
            if not args.html and not args.markdown:
                print(
                    "leaderboards render: give --html PATH and/or --markdown PATH", file=sys.stderr
                )
                return 2
            boards = Store(db).entries(_env_filter(args.env))
            if args.html:
                write_text_atomic(Path(args.html), html_page(boards))
                print(f"wrote {args.html}")
            if args.markdown == "-":
                print(markdown_tables(boards), end="")
            elif args.markdown:
                write_text_atomic(Path(args.markdown), markdown_tables(boards))
                print(f"wrote {args.markdown}")
            return 0
        if args.command == "rebuild":
            t0 = time.perf_counter()
            n = rebuild(db, args.folder)
            print(
                f"rebuilt {db} from {n} bundles in {args.folder} ({time.perf_counter() - t0:.1f} s)"
            )
            return 0
    except SubmissionError as err:
        print(f"refused: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(
            f"leaderboards {args.command}: cannot write {err.filename}: {err.strerror}",
            file=sys.stderr,
        )
        return 2
    except sqlite3.DatabaseError as err:
        print(
            f"leaderboards {args.command}: {db} is not a usable leaderboard database ({err}); "
            "pass another --db, or `python -m leaderboards rebuild --db NEW.sqlite`",
            file=sys.stderr,
        )
        return 2
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
