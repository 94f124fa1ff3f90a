"""The leaderboard's SQLite store.

Two tables (created on first write; ``schema_version`` in ``meta``):

* ``submissions``: one row per accepted bundle: ``id``, ``name`` (the submitter's), the agent's
  ``agent_name``, ``agent_spec`` and ``agent_description``, ``agentgym_version``, ``created``
  (the bundle's time), ``submitted`` (UTC), ``digest`` (UNIQUE: see
  :func:`agentgym.bundle.bundle_digest`) and ``bundle`` (the zlib-compressed JSON, so an entry
  can be verified again later).
* ``results``: one row per (submission, env, normalised task parameters) with the figures
  recomputed by the replay: episodes, errors, successes, success rate and its 95% Wilson
  interval, mean return (errored episodes at the env's worst return), mean turns and
  valid-action rate.
* ``episodes``: one row per (submission, board, seed) with the SHA-256 of what the episode's
  steps executed in the replay (:func:`leaderboards.verify.actions_digest`: each step's validity
  and the canonical key of each action it ran, not the action text).

A board ranks entries by the lower bound of their success rate's 95% Wilson interval, then the
success rate, then the mean return, then submission order: every run covers the first ``n`` of
the board's official seeds (:data:`leaderboards.verify.OFFICIAL_FIRST_SEED`), and the lower bound
weighs a short run's luck against a long run's evidence (8 successes in 8 episodes, 67.6%, rank
below 18 in 20, 69.9%). It ranks only entries with at least the env's ``min_ranked_episodes``
episodes (declared in the registry, :class:`agentgym.registration.EnvEntry`); shorter entries are
listed after the ranked ones, unranked.

A duplicate is refused: the same bundle (:func:`agentgym.bundle.bundle_digest`), or a run
whose episodes on every seed it shares with a stored entry's run on the same board are that
entry's episodes (the same actions executed, step for step): two overlapping windows of one run
are one entry, and so is a copy whose actions differ only in their ``<think>`` text or in how
the same actions are spelt.

A submission is written in one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``): a failure at any
point rolls it back, and the database is left as it was. Reads never create the file. Every
writer holds :func:`write_lock` (an exclusive ``flock`` on ``<db>.lock`` beside the database): a
submission for its transaction, a rebuild from before it reads the stored entries until its new
database has replaced the old one, so that no entry is accepted into a file a rebuild is about to
replace. A writer that cannot take the lock within :data:`LOCK_TIMEOUT_S` is refused, nothing
stored.

The database path: the ``--db`` option, else ``$AGENTGYM_LEADERBOARD``, else
``./leaderboard.sqlite`` (:func:`default_db_path`).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import math
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.registration import registered_envs
from leaderboards.verify import SubmissionError, VerifiedBundle, board_key

__all__ = [
    "default_db_path",
    "Entry",
    "Store",
    "SCHEMA_VERSION",
    "min_ranked_episodes",
    "same_episodes",
    "overlap_message",
    "find_overlap",
    "board_keys",
    "write_lock",
    "LOCK_TIMEOUT_S",
    "MalformedDatabase",
]

#: 2: the ``episodes`` table (issue 25). 3: its digests are of what the replay executed, not of
#: the action text. 4: those digests key each action by its canonical form (CodeExec's code by
#: its syntax tree, Countdown's expression, Math's answer white space), and boards by task
#: parameters in their declared kinds, with a Math ``task_config``'s reasoning-gym defaults
#: dropped. A database of an earlier version is read as it is; a submission to it is refused
#: until ``python -m leaderboards rebuild`` rewrites it.
SCHEMA_VERSION = 4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    agent_spec TEXT NOT NULL,
    agent_description TEXT NOT NULL,
    agentgym_version TEXT NOT NULL,
    created TEXT NOT NULL,
    submitted TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    bundle BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    env_id TEXT NOT NULL,
    env_version INTEGER NOT NULL,
    env_kwargs TEXT NOT NULL,
    seed INTEGER NOT NULL,
    episodes INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    successes INTEGER NOT NULL,
    success_rate REAL NOT NULL,
    ci_low REAL NOT NULL,
    ci_high REAL NOT NULL,
    mean_return REAL NOT NULL,
    mean_turns REAL NOT NULL,
    valid_action_rate REAL NOT NULL,
    PRIMARY KEY (submission_id, env_id, env_kwargs)
);
CREATE TABLE IF NOT EXISTS episodes (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    env_id TEXT NOT NULL,
    env_kwargs TEXT NOT NULL,
    seed INTEGER NOT NULL,
    actions TEXT NOT NULL,
    PRIMARY KEY (submission_id, env_id, env_kwargs, seed)
);
CREATE INDEX IF NOT EXISTS episodes_by_board ON episodes (env_id, env_kwargs, seed);
"""


#: Seconds a writer waits for :func:`write_lock` before it is refused.
LOCK_TIMEOUT_S = 30.0


@contextmanager
def write_lock(db: str | os.PathLike[str], timeout: float | None = None) -> Iterator[None]:
    """Hold the exclusive write lock of the database at ``db``: ``flock`` on ``<db>.lock``, a
    file that stays (removing it would let two writers lock two files). The kernel releases the
    lock when its holder exits, however it exits.

    Args:
        db: the database path.
        timeout: seconds to wait for another writer (default :data:`LOCK_TIMEOUT_S`).

    Raises:
        SubmissionError: another writer held it for ``timeout`` seconds.
    """
    db = Path(db)
    lock = db.with_name(db.name + ".lock")
    wait = LOCK_TIMEOUT_S if timeout is None else timeout
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SubmissionError(
                        f"{db} is being written by another command (a rebuild or a submission "
                        f"holds {lock.name}) and was still busy after {wait:g} s; nothing was "
                        "stored: try again when it has finished"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def default_db_path() -> Path:
    """``$AGENTGYM_LEADERBOARD``, else ``./leaderboard.sqlite``."""
    return Path(os.environ.get("AGENTGYM_LEADERBOARD", "leaderboard.sqlite"))


@dataclass(frozen=True)
class Entry:
    """One row of a leaderboard table (a submission's result on one env).

    ``success_rate``, ``ci_low``, ``ci_high`` and ``valid_action_rate`` are fractions in [0, 1];
    ``mean_return`` is in the env's reward units; ``mean_turns`` in turns per episode.
    ``ranked`` is False when ``episodes`` is below the board's minimum (``min_episodes``).
    """

    submission_id: int
    name: str
    agent_name: str
    agent_description: str
    agentgym_version: str
    submitted: str
    env_id: str
    env_kwargs: str
    seed: int
    episodes: int
    errors: int
    successes: int
    success_rate: float
    ci_low: float
    ci_high: float
    mean_return: float
    mean_turns: float
    valid_action_rate: float
    min_episodes: int = 1
    ranked: bool = True


#: Minimum episodes of a ranked entry for an env id this agentgym does not register.
DEFAULT_MIN_EPISODES = 8


def min_ranked_episodes(env_id: str) -> int:
    """The fewest episodes a ranked entry on ``env_id`` needs (from the registry)."""
    entry = registered_envs().get(env_id)
    return entry.min_ranked_episodes if entry is not None else DEFAULT_MIN_EPISODES


class Store:
    """The leaderboard database at ``path`` (see the module docstring).

    Args:
        path: the SQLite file; its folder must exist.
        lock: whether :meth:`add` takes :func:`write_lock` (False: the caller holds the lock that
            guards this file, as a rebuild does for the new database it fills).
    """

    def __init__(self, path: str | os.PathLike[str], *, lock: bool = True):
        self.path = Path(path)
        self.lock = lock

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        if write:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        else:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def find_digest(self, digest: str) -> tuple[int, str] | None:
        """``(id, name)`` of the submission with this digest, if any (never creates the file)."""
        if not self.path.exists():
            return None
        with closing(self._connect(write=False)) as conn:
            if not _has_tables(conn):
                return None
            row = conn.execute(
                "SELECT id, name FROM submissions WHERE digest = ?", (digest,)
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def add(
        self,
        verified: VerifiedBundle,
        name: str,
        submitted: str | None = None,
        submission_id: int | None = None,
    ) -> int:
        """Store a verified bundle under ``name`` in one transaction; return its id.

        ``submitted`` (UTC, ``YYYY-MM-DDTHH:MM:SSZ``) defaults to now; ``submission_id`` to one
        past the largest stored id. A rebuild passes the entry's original time and id.

        Raises:
            SubmissionError: the same submission (digest) is already stored, a run repeats a
                stored entry's episodes (:func:`same_episodes`), ``name`` is empty, or the
                database predates :data:`SCHEMA_VERSION` and holds entries (rebuild it first).
        """
        name = name.strip()
        if not name:
            raise SubmissionError("--name must not be empty")
        bundle = verified.bundle
        agent = bundle["agent"]
        blob = zlib.compress(json.dumps(bundle, separators=(",", ":")).encode("utf-8"), 6)
        now = submitted or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        # The lock before the connection: a rebuild that replaced the file meanwhile is seen.
        guard = write_lock(self.path) if self.lock else nullcontext()
        with guard, closing(self._connect(write=True)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                others = conn.execute(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
                ).fetchone()[0]
                if others and not _has_tables(conn):
                    raise SubmissionError(
                        f"{self.path} is an SQLite database of something else (it has tables, "
                        "none of them a leaderboard's): pass another --db"
                    )
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                _check_version(conn, self.path)
                row = conn.execute(
                    "SELECT id, name FROM submissions WHERE digest = ?", (verified.digest,)
                ).fetchone()
                if row:
                    raise SubmissionError(_duplicate_message(int(row[0]), str(row[1])))
                overlap = _stored_overlap(conn, verified)
                if overlap:
                    raise SubmissionError(overlap)
                cursor = conn.execute(
                    "INSERT INTO submissions (id, name, agent_name, agent_spec, agent_description, "
                    "agentgym_version, created, submitted, digest, bundle) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        submission_id,
                        name,
                        agent["name"],
                        agent["spec"],
                        agent["description"],
                        bundle["agentgym_version"],
                        bundle["created"],
                        now,
                        verified.digest,
                        blob,
                    ),
                )
                submission_id = int(cursor.lastrowid or 0)
                for values in _result_rows(submission_id, verified):
                    conn.execute(
                        "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        values,
                    )
                conn.executemany(
                    "INSERT INTO episodes VALUES (?, ?, ?, ?, ?)",
                    _episode_rows(submission_id, verified),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return submission_id

    def entries(self, env_id: str | None = None) -> dict[tuple[str, str], list[Entry]]:
        """Ranked entries per leaderboard ``(env_id, env_kwargs JSON)``.

        Within a board: the ranked entries (at least :func:`min_ranked_episodes` episodes) by
        the lower bound of the success rate's 95% Wilson interval, then success rate, then mean
        return (all descending), then submission order; then the unranked ones in the same
        order. Boards are ordered by env id, then arguments (``{}``
        first).
        """
        if not self.path.exists():
            return {}
        with closing(self._connect(write=False)) as conn:
            if not _has_tables(conn):
                return {}
            query = (
                "SELECT s.id, s.name, s.agent_name, s.agent_description, s.agentgym_version, "
                "s.submitted, r.env_id, r.env_kwargs, r.seed, r.episodes, r.errors, r.successes, "
                "r.success_rate, r.ci_low, r.ci_high, r.mean_return, r.mean_turns, "
                "r.valid_action_rate FROM results r JOIN submissions s ON s.id = r.submission_id"
            )
            params: tuple[Any, ...] = ()
            if env_id is not None:
                query += " WHERE r.env_id = ?"
                params = (env_id,)
            query += (
                " ORDER BY r.env_id, r.env_kwargs = '{}' DESC, r.env_kwargs, "
                "r.ci_low DESC, r.success_rate DESC, r.mean_return DESC, s.id"
            )
            rows = conn.execute(query, params).fetchall()
        boards: dict[tuple[str, str], list[Entry]] = {}
        for row in rows:
            _check_row(row)
            least = min_ranked_episodes(row[6])
            entry = Entry(*row, min_episodes=least, ranked=row[9] >= least)
            boards.setdefault((entry.env_id, entry.env_kwargs), []).append(entry)
        for entries in boards.values():
            entries.sort(key=lambda e: not e.ranked)  # stable: keeps the order within each
        return boards

    def count(self) -> int:
        """Number of stored submissions (0 if the file does not exist)."""
        if not self.path.exists():
            return 0
        with closing(self._connect(write=False)) as conn:
            if not _has_tables(conn):
                return 0
            return int(conn.execute("SELECT COUNT(*) FROM submissions").fetchone()[0])

    def digests(self) -> set[str]:
        """The digests of every stored submission (empty if the file does not exist)."""
        if not self.path.exists():
            return set()
        with closing(self._connect(write=False)) as conn:
            if not _has_tables(conn):
                return set()
            return {str(row[0]) for row in conn.execute("SELECT digest FROM submissions")}

    def bundles(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """``(id, name, bundle)`` of every stored submission, in id order."""
        for sid, name, _, bundle in self.submissions():
            yield sid, name, bundle

    def submissions(self) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
        """``(id, name, submitted, bundle)`` of every stored submission, in id order, one bundle
        read at a time (:meth:`index`, then :meth:`bundle`)."""
        for sid, name, submitted in self.index():
            yield sid, name, submitted, self.bundle(sid)

    def index(self) -> list[tuple[int, str, str]]:
        """``(id, name, submitted)`` of every stored submission, in id order, without reading
        a bundle (empty if the file does not exist).

        Raises:
            MalformedDatabase: a row holds a column of another type than this module writes.
        """
        if not self.path.exists():
            return []
        with closing(self._connect(write=False)) as conn:
            if not _has_tables(conn):
                return []
            rows = conn.execute("SELECT id, name, submitted FROM submissions ORDER BY id")
            out = []
            for sid, name, submitted in rows:
                if not (isinstance(sid, int) and isinstance(name, str)):
                    raise MalformedDatabase(
                        f"the id or name of entry #{inert_id(sid)} is not what the leaderboard "
                        "writes"
                    )
                if not isinstance(submitted, str):
                    raise MalformedDatabase(f"the submitted of entry #{sid} is not text")
                out.append((sid, name, submitted))
        return out

    def bundle(self, sid: int) -> dict[str, Any]:
        """The stored bundle of entry ``sid``, decoded.

        Raises:
            MalformedDatabase: no such entry, or its bundle is not zlib-compressed UTF-8 JSON
                holding an object.
        """
        with closing(self._connect(write=False)) as conn:
            row = conn.execute("SELECT bundle FROM submissions WHERE id = ?", (sid,)).fetchone()
        if row is None:
            raise MalformedDatabase(f"entry #{inert_id(sid)} is not in {self.path}")
        try:
            bundle = json.loads(zlib.decompress(row[0]).decode("utf-8"))
        except (zlib.error, TypeError, ValueError, RecursionError):
            raise MalformedDatabase(
                f"the stored bundle of entry #{inert_id(sid)} cannot be read"
            ) from None
        if not isinstance(bundle, dict):
            raise MalformedDatabase(
                f"the stored bundle of entry #{inert_id(sid)} is not a JSON object (found: "
                f"{type(bundle).__name__})"
            )
        return bundle


class MalformedDatabase(sqlite3.DatabaseError):
    """A leaderboard database whose rows are not what this module writes (another program's, or
    edited): ``python -m leaderboards`` says so, exit status 2, instead of a traceback."""


# The columns Store.entries reads, and what each must hold.
_ENTRY_COLUMNS = (
    ("id", "int"),
    ("name", "str"),
    ("agent_name", "str"),
    ("agent_description", "str"),
    ("agentgym_version", "str"),
    ("submitted", "str"),
    ("env_id", "str"),
    ("env_kwargs", "json"),
    ("seed", "int"),
    ("episodes", "int"),
    ("errors", "int"),
    ("successes", "int"),
    *((column, "number") for column in ("success_rate", "ci_low", "ci_high", "mean_return")),
    ("mean_turns", "number"),
    ("valid_action_rate", "number"),
)


def inert_id(value: object) -> str:
    """A stored id for a message: the integer, or ``?`` for anything else."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _check_row(row: tuple[Any, ...]) -> None:
    """Raise :class:`MalformedDatabase` unless every column of a ``results`` row (joined with its
    submission) holds the type this module writes (naming the column, never quoting it)."""
    for value, (column, kind) in zip(row, _ENTRY_COLUMNS, strict=True):
        if kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "number":
            ok = isinstance(value, (int, float)) and math.isfinite(value)
        elif kind == "str":
            ok = isinstance(value, str)
        else:  # a JSON object of task parameters
            try:
                ok = isinstance(value, str) and isinstance(json.loads(value), dict)
            except ValueError:
                ok = False
        if not ok:
            shown = {"json": "a JSON object", "int": "an integer", "number": "a finite number"}
            raise MalformedDatabase(
                f"the {column} of entry #{inert_id(row[0])} is not "
                f"{shown.get(kind, 'text')} (found: {type(value).__name__})"
            )


def _has_tables(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'submissions'"
    ).fetchone()
    return bool(row[0])


def _check_version(conn: sqlite3.Connection, path: Path) -> None:
    """Record :data:`SCHEMA_VERSION` in a new database; refuse to write to an older one that
    holds entries (its entries have no ``episodes`` rows, so duplicates could not be told)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    stored = int(row[0]) if row and str(row[0]).isdigit() else None
    if stored == SCHEMA_VERSION:
        return
    if stored is not None and stored > SCHEMA_VERSION:
        raise SubmissionError(
            f"{path} was written by a newer agentgym (leaderboard schema {stored}, this one "
            f"writes {SCHEMA_VERSION}): upgrade agentgym to submit to it"
        )
    if conn.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]:
        raise SubmissionError(
            f"{path} is a leaderboard of an earlier format (schema {stored}); rewrite it with "
            f"`python -m leaderboards rebuild --db {path}` (it replays every entry and keeps "
            "them), then submit again"
        )
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
        (str(SCHEMA_VERSION),),
    )


def same_episodes(new: Mapping[int, str], old: Mapping[int, str]) -> bool:
    """Whether two runs on one board are one run: on every seed both cover they played the same
    actions (``{seed: actions digest}`` each), and on at least one of them some action ran. An
    episode in which no action ran has the digest ``""``
    (:func:`leaderboards.verify.actions_digest`): two runs that ran nothing on the seeds they
    share (a random agent and a model whose every answer is invalid) tell nothing of each other
    and are both entries.

    Example:
        >>> same_episodes({0: "a", 1: "b"}, {0: "a", 1: "b", 2: "c"})  # a prefix of the other
        True
        >>> same_episodes({0: "a", 1: "b"}, {0: "a", 1: "x"})
        False
        >>> same_episodes({0: "", 1: ""}, {0: "", 1: ""}), same_episodes({0: "", 1: "b"}, {0: "", 1: "b"})
        (False, True)
    """
    common = new.keys() & old.keys()
    ran = any(new[s] or old[s] for s in common)
    return ran and all(new[s] == old[s] for s in common)


def overlap_message(sid: int, name: str, env_id: str, seeds: Iterable[int]) -> str:
    """The refusal of a run that repeats entry ``sid``'s episodes on ``seeds``."""
    shared = sorted(seeds)
    return (
        f"duplicate submission: its {env_id} episodes on seeds {shared[0]}-{shared[-1]} are "
        f"those of entry #{sid} ({name!r}), action for action; overlapping windows of one run "
        "are one entry"
    )


#: ``(board key, lowest seed, highest seed) -> {(id, name): {seed: actions digest}}``: the stored
#: runs' episodes on a board within a seed range.
EpisodeLookup = Callable[[tuple[str, str], int, int], Mapping[tuple[int, str], Mapping[int, str]]]


def find_overlap(verified: VerifiedBundle, lookup: EpisodeLookup) -> str | None:
    """The refusal of ``verified``'s first run that repeats an entry's episodes
    (:func:`same_episodes`) among those ``lookup`` returns, or None."""
    for run, key in zip(verified.runs, board_keys(verified), strict=True):
        new = dict(run.episodes)
        if not new:
            continue
        for (sid, name), old in sorted(lookup(key, min(new), max(new)).items()):
            if same_episodes(new, old):
                return overlap_message(sid, name, run.env_id, new.keys() & old.keys())
    return None


def _stored_overlap(conn: sqlite3.Connection, verified: VerifiedBundle) -> str | None:
    """:func:`find_overlap` against the entries stored in ``conn``."""

    def lookup(key: tuple[str, str], low: int, high: int) -> dict[tuple[int, str], dict[int, str]]:
        rows = conn.execute(
            "SELECT e.submission_id, s.name, e.seed, e.actions FROM episodes e "
            "JOIN submissions s ON s.id = e.submission_id "
            "WHERE e.env_id = ? AND e.env_kwargs = ? AND e.seed BETWEEN ? AND ?",
            (*key, low, high),
        ).fetchall()
        stored: dict[tuple[int, str], dict[int, str]] = {}
        for sid, name, seed, actions in rows:
            stored.setdefault((int(sid), str(name)), {})[int(seed)] = str(actions)
        return stored

    return find_overlap(verified, lookup)


def board_keys(verified: VerifiedBundle) -> list[tuple[str, str]]:
    """The board of each of ``verified``'s runs (:func:`leaderboards.verify.board_key`)."""
    return [board_key(run.env_id, run.env_kwargs, run.env_files) for run in verified.runs]


def _episode_rows(submission_id: int, verified: VerifiedBundle) -> Iterator[tuple[Any, ...]]:
    """The ``episodes`` rows of a verified bundle."""
    for run, (env_id, kwargs_json) in zip(verified.runs, board_keys(verified), strict=True):
        for seed, actions in run.episodes:
            yield (submission_id, env_id, kwargs_json, seed, actions)


def _duplicate_message(sid: int, name: str) -> str:
    return (
        f"duplicate submission: the same episodes (env, arguments, seeds and actions) are "
        f"already on the leaderboard as entry #{sid} ({name!r})"
    )


def _result_rows(submission_id: int, verified: VerifiedBundle) -> Iterator[tuple[Any, ...]]:
    """The ``results`` rows of a verified bundle (from the replayed summaries)."""
    for run in verified.runs:
        s = run.summary
        _, kwargs_json = board_key(run.env_id, run.env_kwargs, run.env_files)
        yield (
            submission_id,
            run.env_id,
            run.env_version,
            kwargs_json,
            run.seed,
            s["episodes"],
            s["errors"],
            s["successes"],
            s["success_rate"],
            s["success_ci95"][0],
            s["success_ci95"][1],
            s["mean_return"],
            s["mean_turns"],
            s["valid_action_rate"],
        )
