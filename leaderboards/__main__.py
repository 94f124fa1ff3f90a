"""``python -m leaderboards``: submit results checked by replay, show and render the leaderboard.

The replay checks the episodes (seeds, actions, rewards); who or what chose the actions, the
entry's name and its agent, are self-reported.

Examples::

    python -m leaderboards submit run.json --name "my agent"
    python -m leaderboards show --env Sokoban-v0
    python -m leaderboards render --html leaderboard.html --markdown leaderboard.md
    python -m leaderboards rebuild            # baselines replayed again, every entry kept
                                              # (its id and date); one stderr line per bundle

Every subcommand takes ``--db PATH``, before or after it (default ``$AGENTGYM_LEADERBOARD`` or
``./leaderboard.sqlite``). Exit status: 0 accepted/ok; 1 a bundle refused by its checks (replay
mismatch, budget, duplicate, arguments); 2 a malformed bundle (size, encoding, JSON, nesting,
schema: one ``refused:`` line) or a usage error (no database to show, an unknown ``--env``, a
``--db`` that is not a leaderboard database or whose folder is missing, an output path that
cannot be written, jsonschema not installed, a rebuild that would drop entries without
``--drop-unverified``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sqlite3
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.fileio import write_text_atomic
from leaderboards.render import html_page, inert, invisible, markdown_tables, text_tables
from leaderboards.store import (
    Store,
    _duplicate_message,
    default_db_path,
    write_lock,
)
from leaderboards.verify import (
    MAX_BUNDLE_BYTES,
    MalformedBundle,
    ReplayBudget,
    SubmissionError,
    VerifierConfig,
    bundle_digest,
    load_bundle,
    verify_bundle,
)

__all__ = ["main", "submit", "rebuild", "RebuildReport", "BASELINES_DIR", "MIN_MAX_MB"]

BASELINES_DIR = Path(__file__).with_name("baselines")
#: The smallest ``--max-mb`` (MiB): below it even a one-episode bundle may not fit.
MIN_MAX_MB = 1.0


def submit(
    path: str | os.PathLike[str],
    name: str,
    db: str | os.PathLike[str],
    max_bytes: int,
    config: VerifierConfig | None = None,
) -> tuple[int, Store, float, int]:
    """Check, replay and store one bundle; return ``(id, store, replay seconds, episodes)``.

    Raises:
        MalformedBundle: not a well-formed bundle (the database is unchanged).
        SubmissionError: any other refusal, a bad ``name`` included (the database is unchanged).
    """
    problem = name_problem(name)
    if problem:
        raise SubmissionError(problem)
    name = normalise_name(name)
    bundle = load_bundle(path, max_bytes)
    store = Store(db)
    t0 = time.perf_counter()
    verified = _verify(bundle, config)
    replay_s = time.perf_counter() - t0
    existing = store.find_digest(verified.digest)
    if existing is not None:
        raise SubmissionError(_duplicate_message(*existing))
    sid = store.add(verified, name)
    return sid, store, replay_s, verified.episodes_replayed


#: The longest entry name (characters, after NFKC normalisation).
MAX_NAME_CHARS = 200

#: Scripts whose letters look alike ("а" is Cyrillic, "a" Latin): a name mixes none of them.
LOOKALIKE_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC", "ARMENIAN", "CHEROKEE", "COPTIC")

# Categories a name never holds: controls, format characters (zero-width, bidi marks, soft
# hyphen), surrogates, private use, unassigned, line and paragraph separators.
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def normalise_name(name: str) -> str:
    """An entry name as stored: NFKC-normalised (full-width and other compatibility forms
    become their plain letters: "ｏｒａｃｌｅ" is "oracle") and stripped. Check it with
    :func:`name_problem`."""
    return unicodedata.normalize("NFKC", name).strip()


def name_problem(name: object) -> str | None:
    """What is wrong with an entry name, or None. After :func:`normalise_name` it must be 1 to
    :data:`MAX_NAME_CHARS` characters of valid Unicode, none of them a control or format
    character (invisible ones such as U+200B ZERO WIDTH SPACE or U+202E RIGHT-TO-LEFT OVERRIDE
    make a name look like another's) nor a default-ignorable one (drawn as nothing whatever its
    category: U+3164 HANGUL FILLER, U+034F COMBINING GRAPHEME JOINER, variation selectors;
    :func:`leaderboards.render.invisible`), and its letters from at most one of
    :data:`LOOKALIKE_SCRIPTS`.

    Example:
        >>> name_problem("my agent"), name_problem("ｍｙ agent")
        (None, None)
        >>> print(name_problem("or\u0430cle"))  # doctest: +ELLIPSIS
        --name mixes letters of look-alike scripts (CYRILLIC, LATIN), which can make a name ...
    """
    if not isinstance(name, str):
        return f"--name must be 1 to {MAX_NAME_CHARS} characters"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "--name is not valid Unicode text (it holds bytes that are not UTF-8)"
    name = normalise_name(name)
    if not 0 < len(name) <= MAX_NAME_CHARS:
        return f"--name must be 1 to {MAX_NAME_CHARS} characters"
    for ch in name:
        # a default-ignorable code point (U+3164 HANGUL FILLER is a letter, U+034F a mark) is
        # drawn as nothing, whatever its category: refused as a zero-width space is
        if unicodedata.category(ch) in _REFUSED_CATEGORIES or invisible(ch):
            label = unicodedata.name(ch, "")
            return (
                f"--name holds U+{ord(ch):04X}{' ' + label if label else ''}, a control or "
                "invisible character (it can make a name look like another's, or act on a "
                "terminal); use visible characters only"
            )
    scripts = {
        unicodedata.name(ch, "").split(" ")[0] for ch in name if unicodedata.category(ch)[0] == "L"
    } & set(LOOKALIKE_SCRIPTS)
    if len(scripts) > 1:
        return (
            f"--name mixes letters of look-alike scripts ({', '.join(sorted(scripts))}), which "
            "can make a name look like another's; write it in one of them"
        )
    return None


def _verify(bundle: dict, config: VerifierConfig | None):
    """:func:`verify_bundle`; a bundle whose structure breaks a check in a way the schema did
    not foresee is refused as malformed, naming only the error's type."""
    try:
        return verify_bundle(bundle, config)
    except SubmissionError:
        raise
    except (
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        RecursionError,
        ArithmeticError,
    ) as err:
        raise MalformedBundle(
            f"the bundle's structure cannot be checked ({type(err).__name__}); submit the file "
            "`agentgym eval --out` wrote, unedited"
        ) from None


@dataclass
class RebuildReport:
    """What :func:`rebuild` did.

    Attributes:
        baselines: the number of baseline bundles stored.
        kept: ``(old id, name)`` of every earlier entry re-verified and kept.
        dropped: ``(old id, name, reason)`` of every earlier entry that no longer verifies (only
            dropped with ``drop_unverified=True``).
    """

    baselines: int
    kept: list[tuple[int, str]] = field(default_factory=list)
    dropped: list[tuple[int, str, str]] = field(default_factory=list)


def rebuild(
    db: str | os.PathLike[str],
    folder: str | os.PathLike[str] = BASELINES_DIR,
    *,
    drop_unverified: bool = False,
    config: VerifierConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> RebuildReport:
    """Rebuild the database at ``db``: every ``*.json`` baseline bundle in ``folder`` replayed
    and stored under its agent's name, and **every entry already in** ``db`` replayed again and
    kept (under its name, id and original submission time).

    Ids and dates are stable, so a rebuild of unchanged inputs yields the same leaderboard: an
    entry keeps its id (a baseline already stored keeps its entry's); a new baseline gets the
    next id, in file-name order, and its bundle's ``created`` time as its date.

    An entry that no longer verifies (e.g. an env changed), or that repeats the episodes of a
    baseline or of an earlier entry, is reported; the rebuild then refuses and changes nothing,
    unless ``drop_unverified`` is set, which drops exactly the entries the refusal named. The
    new database replaces ``db`` in one rename. The rebuild holds ``db``'s write lock
    (:func:`leaderboards.store.write_lock`) throughout: a submission meanwhile waits for it and
    is refused if it waited too long, never stored in the file about to be replaced.

    One bundle at a time: each baseline and each stored entry is read, replayed and written to
    the new database before the next is read, and only ids, names and digests are kept between
    them, so a rebuild costs the memory of its largest bundle, not of all of them.

    ``progress``, if given, is called with one line before each bundle is replayed
    (``[3/21] baseline oracle.json ('oracle', 1,000 episodes)``).

    Raises:
        SubmissionError: a baseline is refused, entries would be dropped without
            ``drop_unverified``, or another writer held the lock too long (``db`` is left as it
            was).
        MalformedDatabase: a stored row is not what the leaderboard writes (a stored bundle that
            cannot be read, or is not a JSON object).
    """
    paths = sorted(Path(folder).glob("*.json"))
    if not paths:
        raise SubmissionError(f"no *.json bundles in {folder}")
    db = Path(db)
    # Each baseline is read here (a malformed one is refused before the lock is taken) and
    # again when it is replayed: only its digest is kept in between.
    baselines = [(path, _digest_or_none(load_bundle(path, MAX_BUNDLE_BYTES))) for path in paths]
    # Held from before the stored entries are read until the new database replaces the old:
    # an entry submitted meanwhile would be lost with the old file (issue 25).
    with write_lock(db):
        return _rebuild(db, baselines, drop_unverified, config, progress)


def _rebuild(
    db: Path,
    baselines: list[tuple[Path, str | None]],
    drop_unverified: bool,
    config: VerifierConfig | None,
    progress: Callable[[str], None] | None,
) -> RebuildReport:
    """:func:`rebuild`'s work, under the database's write lock: baselines first (in file
    order), then the stored entries (in id order), each verified and added to the new database
    before the next is read. :meth:`Store.add` refuses one that repeats the episodes of one
    added before (:func:`leaderboards.store.find_overlap`; entries accepted before that check
    existed): a baseline that repeats another is refused, an entry goes to ``report.dropped``."""
    report = RebuildReport(baselines=len(baselines))
    baseline_digests = {digest for _, digest in baselines} - {None}
    store = Store(db)
    index = store.index()
    # Each stored entry's digest, one bundle decoded at a time.
    digests = {sid: _digest_or_none(store.bundle(sid)) for sid, _, _ in index}
    # (id, name, submitted) of each stored entry by digest: a baseline already stored keeps them.
    earlier = {digests[sid]: (sid, name, t) for sid, name, t in index if digests[sid]}
    others = [row for row in index if digests[row[0]] not in baseline_digests]
    total = len(baselines) + len(others)
    # New baselines after every id ever stored (a dropped entry's id is not reused).
    next_id = max((sid for sid, _, _ in index), default=0) + 1
    fd, tmp = tempfile.mkstemp(prefix=f".{db.name}.", suffix=".tmp", dir=db.parent or ".")
    os.close(fd)
    os.unlink(tmp)  # SQLite creates it
    fresh = Store(tmp, lock=False)
    try:
        for i, (path, _) in enumerate(baselines, 1):
            bundle = load_bundle(path, MAX_BUNDLE_BYTES)
            if progress is not None:
                progress(
                    f"[{i}/{total}] baseline {path.name} ('{inert(_agent_name(bundle))}', "
                    f"{_episodes(bundle)})"
                )
            try:
                item = _verify(bundle, config)
            except SubmissionError as err:
                raise SubmissionError(f"{path.name}: {err}") from err
            del bundle
            own = (None, item.bundle["agent"]["name"], item.bundle["created"])
            sid, name, submitted = earlier.get(item.digest, own)
            if sid is None:
                sid, next_id = next_id, next_id + 1
            try:
                fresh.add(item, name, submitted, submission_id=sid)
            except SubmissionError as err:
                raise SubmissionError(f"baseline '{inert(name)}': {err}") from None
            del item
        for i, (sid, name, submitted) in enumerate(others, len(baselines) + 1):
            bundle = store.bundle(sid)
            if progress is not None:
                progress(f"[{i}/{total}] entry #{sid} '{inert(name)}' ({_episodes(bundle)})")
            try:
                fresh.add(_verify(bundle, config), name, submitted, submission_id=sid)
            except SubmissionError as err:
                report.dropped.append((sid, name, str(err)))
            else:
                report.kept.append((sid, name))
            del bundle
        if report.dropped and not drop_unverified:
            count = len(report.dropped)
            listed = "; ".join(
                f"#{sid} '{inert(name)}': {why}" for sid, name, why in report.dropped
            )
            raise SubmissionError(
                f"{count} entr{'y' if count == 1 else 'ies'} of {db} no longer "
                f"verif{'ies' if count == 1 else 'y'} ({listed}); nothing was changed. Rerun "
                "with --drop-unverified to rebuild without "
                + ", ".join(f"#{sid}" for sid, _, _ in report.dropped)
            )
        os.replace(tmp, db)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return report


def _digest_or_none(bundle: dict) -> str | None:
    """:func:`bundle_digest`, or None for a bundle it cannot read (its replay says why)."""
    try:
        return bundle_digest(bundle)
    except (SubmissionError, KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return None


def _agent_name(bundle: dict) -> str:
    """The bundle's agent name for a progress line, read before the bundle is verified."""
    agent = bundle.get("agent")
    name = agent.get("name") if isinstance(agent, dict) else None
    return name if isinstance(name, str) else "?"


def _episodes(bundle: dict) -> str:
    """``"1,000 episodes"`` for a progress line (``"? episodes"`` where the bundle's shape is
    not a bundle's: it is verified after)."""
    try:
        count = sum(len(run.get("episodes") or ()) for run in bundle.get("runs") or ())
    except (AttributeError, TypeError):
        return "? episodes"
    return f"{count:,} episode{'' if count == 1 else 's'}"


def missing_baselines(
    db: str | os.PathLike[str], folder: str | os.PathLike[str] = BASELINES_DIR
) -> int:
    """How many of the baseline bundles in ``folder`` are not stored in ``db``."""
    stored = Store(db).digests()
    missing = 0
    for path in sorted(Path(folder).glob("*.json")):
        try:
            digest = _digest_or_none(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        missing += digest is not None and digest not in stored
    return missing


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
        help=f"refuse bundles larger than this many MiB (default {MAX_BUNDLE_BYTES // 2**20}, "
        f"at least {MIN_MAX_MB:g})",
    )
    _add_budget(p)
    p = sub.add_parser("show", parents=[common], help="print the ranked tables")
    p.add_argument("--env", default=None, metavar="ID", help="only this environment")
    p = sub.add_parser("render", parents=[common], help="write static HTML and/or Markdown")
    p.add_argument("--html", default=None, metavar="PATH", help="write a sortable HTML page")
    p.add_argument("--markdown", default=None, metavar="PATH", help="write Markdown ('-': stdout)")
    p.add_argument("--env", default=None, metavar="ID", help="only this environment")
    p = sub.add_parser(
        "rebuild",
        parents=[common],
        help="replay the baseline bundles and every stored entry into a fresh database",
        description="Build a fresh database from the committed baseline bundles and every entry "
        "already in --db, each replayed again (one stderr line per bundle). Every entry keeps "
        "its id and date; a new baseline is dated by its bundle. Entries that no longer verify "
        "are listed and nothing changes, unless --drop-unverified is given.",
    )
    p.add_argument(
        "--drop-unverified",
        action="store_true",
        help="drop the stored entries that no longer verify (a plain rebuild lists them and "
        "refuses)",
    )
    _add_budget(p)
    p.add_argument(
        "--from",
        dest="folder",
        default=str(BASELINES_DIR),
        metavar="DIR",
        help="folder of bundles (default leaderboards/baselines)",
    )
    return parser


def _add_budget(p: argparse.ArgumentParser) -> None:
    b = ReplayBudget()
    p.add_argument(
        "--replay-seconds",
        type=float,
        default=b.max_seconds,
        help=f"wall-time limit of one bundle's replay (default {b.max_seconds:g})",
    )
    p.add_argument(
        "--replay-steps",
        type=int,
        default=b.max_steps,
        help=f"most env steps and resets one bundle's replay may take (default {b.max_steps})",
    )
    p.add_argument(
        "--replay-mb",
        type=int,
        default=b.max_memory_mb,
        help="most resident memory (MiB) of the replay and what it starts (default "
        f"{b.max_memory_mb})",
    )
    p.add_argument(
        "--replay-step-seconds",
        type=float,
        default=b.max_step_seconds,
        help="wall-time limit of building one env, one reset or one step in a replay (default "
        f"{b.max_step_seconds:g})",
    )


def _jsonschema_missing() -> bool:
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return True
    return False


def _note_missing_baselines(command: str, db: Path, rebuild_line: str) -> None:
    """One stderr line when shipped baselines are not in ``db`` (submitted before a rebuild)."""
    missing = missing_baselines(db)
    if missing:
        total = len(list(BASELINES_DIR.glob("*.json")))
        print(
            f"leaderboards {command}: note: {missing} of the {total} baseline bundles shipped in "
            f"leaderboards/baselines are not in {db}; `{rebuild_line}` replays them into it "
            "(keeping every entry; a few minutes)",
            file=sys.stderr,
        )


def _usage(command: str, message: str) -> int:
    print(f"leaderboards {command}: {inert(message)}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    if _jsonschema_missing():
        return _usage(
            args.command,
            "needs jsonschema, which is not installed: pip install 'agentgym[leaderboard]' "
            "(from a clone: pip install -e '.[leaderboard]')",
        )
    db = Path(args.db) if args.db else default_db_path()
    rebuild_line = "python -m leaderboards rebuild" + (
        f" --db {shlex.quote(args.db)}" if args.db else ""
    )
    if args.command in ("show", "render") and not db.is_file():
        print(
            f"leaderboards {args.command}: no leaderboard database at {db} yet. The shipped "
            f"baselines (random, oracle and SmolLM2 on every env) go into it with "
            f"`{rebuild_line}` (it replays leaderboards/baselines/*.json: a few minutes); your "
            "own results with `python -m leaderboards submit run.json --name NAME`; or pass the "
            "right --db",
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
    if args.command == "submit" and not (math.isfinite(args.max_mb) and args.max_mb >= MIN_MAX_MB):
        return _usage(
            "submit",
            f"--max-mb must be a number >= {MIN_MAX_MB:g} (MiB), got {args.max_mb:g}; "
            f"the default is {MAX_BUNDLE_BYTES // 2**20}",
        )
    env_filter = getattr(args, "env", None)
    if env_filter is not None:
        from agentgym.registration import UnknownEnvIdError, resolve_env_id

        try:
            env_filter = resolve_env_id(env_filter)
        except UnknownEnvIdError as err:
            return _usage(args.command, f"unknown environment id '{inert(args.env)}'{err.hint}")
    bad_name = name_problem(args.name) if args.command == "submit" else None
    if bad_name:
        return _usage("submit", bad_name)
    config = None
    if args.command in ("submit", "rebuild"):
        try:
            budget = ReplayBudget(
                args.replay_seconds, args.replay_steps, args.replay_mb, args.replay_step_seconds
            )
        except ValueError as err:
            return _usage(args.command, f"bad replay budget: {err}")
        config = VerifierConfig(budget=budget)
    try:
        if args.command == "submit":
            sid, store, replay_s, count = submit(
                args.bundle, args.name, db, int(args.max_mb * 2**20), config
            )
            print(
                f"accepted {args.bundle} as entry #{sid} ('{inert(normalise_name(args.name))}') "
                f"in {db}: {count} episodes replayed in {replay_s:.2f} s"
            )
            return 0
        if args.command in ("show", "render"):
            _note_missing_baselines(args.command, db, rebuild_line)
        if args.command == "show":
            boards = Store(db).entries(env_filter)
            if env_filter is not None and not boards:
                print(f"no entries on {env_filter} yet")
                return 0
            print(text_tables(boards), end="")
            return 0
        if args.command == "render":
            if not args.html and not args.markdown:
                print(
                    "leaderboards render: give --html PATH and/or --markdown PATH", file=sys.stderr
                )
                return 2
            boards = Store(db).entries(env_filter)
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
            try:
                report = rebuild(
                    db,
                    args.folder,
                    drop_unverified=args.drop_unverified,
                    config=config,
                    progress=lambda line: print(f"rebuild {line}", file=sys.stderr, flush=True),
                )
            except MalformedBundle as err:
                print(f"refused: {inert(str(err))}", file=sys.stderr)
                return 2
            except SubmissionError as err:
                return _usage("rebuild", f"refused: {err}")
            print(
                f"rebuilt {db} in {time.perf_counter() - t0:.1f} s: {report.baselines} baseline "
                f"bundles from {args.folder}, {len(report.kept)} earlier entries kept"
                + (
                    f", {len(report.dropped)} dropped (no longer verify): "
                    + ", ".join(f"#{sid} '{inert(n)}'" for sid, n, _ in report.dropped)
                    if report.dropped
                    else ""
                )
            )
            for sid, name, why in report.dropped:
                print(f"  dropped #{sid} '{inert(name)}': {inert(why)}")
            return 0
    except MalformedBundle as err:
        print(f"refused: {inert(str(err))}", file=sys.stderr)
        return 2
    except SubmissionError as err:
        print(f"refused: {inert(str(err))}", file=sys.stderr)
        return 1
    except OSError as err:
        print(
            f"leaderboards {args.command}: cannot write {err.filename}: {err.strerror}",
            file=sys.stderr,
        )
        return 2
    except sqlite3.DatabaseError as err:
        print(
            f"leaderboards {args.command}: {db} is not a usable leaderboard database "
            f"({inert(str(err))}); "
            "pass another --db, or `python -m leaderboards rebuild --db NEW.sqlite`",
            file=sys.stderr,
        )
        return 2
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
