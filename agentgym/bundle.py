"""The result bundle: the one file format that ``agentgym eval`` writes and the leaderboard reads.

A bundle (format ``agentgym-eval``, version 1; the JSON Schema is
``leaderboards/schema/bundle-v1.json``) is one JSON object::

    {
      "format": "agentgym-eval", "format_version": 1,
      "agentgym_version": "0.1.0", "created": "2026-01-01T00:00:00Z",
      "agent": {"spec": "random", "name": "random", "description": "...", "seed": 0,
                "settings": {...}},
      "eval_config": {...},            # the arguments of the run (used to resume it)
      "provenance": {"commit": ...},   # the code that made it (agentgym.provenance; optional)
      "runs": [{
        "env_id": "agentgym/Sokoban-v0", "env_version": 0,
        "env_kwargs": {},              # the task parameters given (a replay uses these)
        "env_settings": {},            # execution settings given (back ends...; only if any)
        "env_files": {},               # SHA-256 of each file named by level_file/dataset_file
        "env_constructor_kwargs": {"dim_room": [6, 6], ...},   # everything the class received
        "seed": 0, "seeds": [0, 1, ...],
        "episodes": [{"seed": 0, "steps": [{"action": "...", "reward": -0.1,
                       "terminated": false, "truncated": false, "success": false,
                       "valid": false}, ...],
                      "return": -0.5, "success": false, "turns": 5, "terminated": false,
                      "truncated": true, "error": null, "wall_s": 0.01}, ...],
        "summary": {"episodes": 32, "errors": 0, "successes": 3, "success_rate": 0.09375,
                    "success_ci95": [0.032, 0.242], "mean_return": ..., "mean_turns": ...,
                    "valid_action_rate": ...},
        "wall_s": 1.2}]
    }

Every string is valid Unicode: an agent's action holding a lone surrogate code point (``"\\ud800"``,
which no UTF-8 file can hold) has each one replaced with U+FFFD by the eval harness *before* the
environment steps it (:func:`valid_unicode`), so the bundle holds the very text the environment
was given and a replay of it gives the same steps.

JSON has no tuples: tuple arguments (``dim_room=(8, 8)``) are written as lists, and
:func:`make_env` turns lists back into tuples before ``gymnasium.make``.

An episode whose agent or environment raised is kept with ``error`` set and the steps played so
far; it counts as a failure in the summary, so errors cannot raise a success rate.

This module holds the format and nothing about who plays or who judges:

* records: :func:`step_record`, :func:`episode_record`, :func:`run_record`, :func:`make_bundle`,
  and the summary (:func:`summarize`, with the :func:`wilson_interval`);
* writing: :func:`dumps_bundle` (one line per episode), :func:`write_bundle` (atomic);
* reading: :func:`parse_bundle` (UTF-8, nesting at most :data:`MAX_DEPTH`, integers within
  int64, finite numbers, valid Unicode), :func:`make_env`;
* replay: :func:`replay_episode` (one episode from its seed and actions), and
  :func:`write_chat_jsonl` (every episode in chat form, rebuilt by replay);
* digests: :func:`file_digests` (the files a run names) and :func:`bundle_digest` (what makes a
  result, for telling two submissions apart);
* the registry a bundle is read against (:func:`registered_envs`, :func:`normalise_task_kwargs`,
  :class:`EnvKwargsError`, :func:`worst_return`, :data:`AGENTGYM_VERSION`), re-exported from
  :mod:`agentgym.registration` so that a reader of bundles has this one module to import.

Example:
    >>> episode = episode_record(3, [step_record(Step("up", -0.1, False, False, {}))],
    ...                          terminated=False, truncated=False, error=None, wall_s=0.0)
    >>> episode["return"], episode["turns"], episode["success"]
    (-0.1, 1, False)
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym import __version__ as AGENTGYM_VERSION
from agentgym.chat import ChatEpisode
from agentgym.fileio import write_text_atomic
from agentgym.lockstep import Step
from agentgym.registration import (
    EnvKwargsError,
    board_kwargs,
    normalise_task_kwargs,
    registered_envs,
    worst_return,
)

__all__ = [
    # What a verifier needs beside the bundle itself: the step a record is made from and the
    # key under which the board compares runs (re-exported: leaderboards import only this module).
    "Step",
    "board_kwargs",
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "MAX_SEED",
    "FILE_KWARGS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "AGENTGYM_VERSION",
    "BundleError",
    "EnvKwargsError",
    "wilson_interval",
    "env_version",
    "summarize",
    "file_digests",
    "bundle_digest",
    "valid_unicode",
    "step_record",
    "episode_record",
    "run_record",
    "make_bundle",
    "dumps_bundle",
    "write_bundle",
    "parse_bundle",
    "make_env",
    "replay_episode",
    "write_chat_jsonl",
    "registered_envs",
    "normalise_task_kwargs",
    "worst_return",
]

BUNDLE_FORMAT = "agentgym-eval"
BUNDLE_VERSION = 1

#: The largest reset seed a bundle may hold (a signed 64-bit integer: SQLite, JSON readers).
MAX_SEED = 2**63 - 1

#: Constructor arguments that name a file whose contents are the task (Sokoban levels, math
#: problems): a bundle records each such file's SHA-256 (``env_files``), so that a leaderboard
#: tells two files at one path apart and refuses a replay against a changed file.
FILE_KWARGS = ("level_file", "dataset_file")

#: The deepest nesting of JSON arrays/objects a bundle may have (a real one is 6 deep).
MAX_DEPTH = 32

#: The widest integer a bundle may hold (int64: seeds, counts); wider ones are refused unread.
MAX_INT_DIGITS = 19

_Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal


class BundleError(Exception):
    """Text that is not a well-formed result bundle; the message says what is wrong and what to
    do."""


# ----------------------------------------------------------------------------- the summary


def wilson_interval(successes: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (Wilson, 1927, JASA 22(158):209-212).

    Args:
        successes: successes, 0 <= successes <= n.
        n: trials; ``n == 0`` gives ``(0.0, 1.0)``.
        z: normal quantile (default the two-sided 95% one).

    Returns:
        ``(low, high)``, both in [0, 1].

    Example:
        >>> [round(x, 4) for x in wilson_interval(8, 10)]
        [0.4902, 0.9433]
    """
    if n == 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def env_version(env_id: str) -> int:
    """The version number of an id: ``agentgym/Sokoban-v0`` -> 0.

    Raises:
        ValueError: the id does not end in ``-v<N>``.
    """
    match = re.fullmatch(r".+-v(\d+)", env_id)
    if match is None:
        raise ValueError(f"env id must end in -v<N>, got {env_id!r}")
    return int(match.group(1))


def summarize(
    episodes: Sequence[Mapping[str, Any]], error_return: float | None = None
) -> dict[str, Any]:
    """The summary of a run's episode records (errored episodes count as failures).

    Args:
        episodes: episode records (``return``, ``success``, ``error``, ``steps``).
        error_return: the return an errored episode counts with in ``mean_return``
            (:func:`agentgym.registration.worst_return` of the run's env, as the leaderboard
            scores it, so that an error never scores better than playing); None keeps each
            record's own ``return``.

    Returns:
        ``episodes`` (int), ``errors`` (int), ``successes`` (int), ``success_rate`` (float in
        [0, 1]), ``success_ci95`` ([low, high], Wilson), ``mean_return`` (float, mean over episodes
        of the summed rewards), ``mean_turns`` (float), ``valid_action_rate`` (float: valid turns
        over all turns, 0.0 when no turn was played).
    """
    n = len(episodes)
    successes = sum(1 for e in episodes if e["success"] and not e["error"])
    turns = sum(len(e["steps"]) for e in episodes)
    valid = sum(1 for e in episodes for s in e["steps"] if s["valid"])
    low, high = wilson_interval(successes, n)
    return {
        "episodes": n,
        "errors": sum(1 for e in episodes if e["error"]),
        "successes": successes,
        "success_rate": successes / n if n else 0.0,
        "success_ci95": [low, high],
        "mean_return": (
            sum(
                float(error_return if e["error"] and error_return is not None else e["return"])
                for e in episodes
            )
            / n
            if n
            else 0.0
        ),
        "mean_turns": turns / n if n else 0.0,
        "valid_action_rate": valid / turns if turns else 0.0,
    }


# ----------------------------------------------------------------------------- digests


def file_digests(env_kwargs: Mapping[str, Any]) -> dict[str, str]:
    """``{kwarg: SHA-256 hex of the file's bytes}`` for each of :data:`FILE_KWARGS` given.

    Raises:
        OSError: a named file cannot be read.
    """
    out = {}
    for key in FILE_KWARGS:
        value = env_kwargs.get(key)
        if value is not None:
            data = Path(os.fspath(value)).expanduser().read_bytes()
            out[key] = hashlib.sha256(data).hexdigest()
    return out


def bundle_digest(bundle: Mapping[str, Any]) -> str:
    """SHA-256 of what makes a result: each run's env, normalised task parameters, file
    digests, seeds and actions.

    Two bundles with the same digest are the same submission, whatever their names, times or
    spelled-out defaults.
    """
    core = [
        {
            "env_id": run["env_id"],
            "env_kwargs": normalise_task_kwargs(run["env_id"], run["env_kwargs"]),
            **({"env_files": run["env_files"]} if run.get("env_files") else {}),
            "episodes": [[e["seed"], [s["action"] for s in e["steps"]]] for e in run["episodes"]],
        }
        for run in bundle["runs"]
    ]
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- records

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """``text`` with every surrogate code point (U+D800 to U+DFFF, one a Python ``str`` can hold
    and UTF-8 cannot) replaced with U+FFFD, one for one; other text is returned as it is.

    Example:
        >>> valid_unicode("a\\ud800b\\udc00")
        'a\\ufffdb\\ufffd'
    """
    return _SURROGATE.sub("\ufffd", text)


def step_record(step: Step[Any]) -> dict[str, Any]:
    """The bundle record of one :class:`agentgym.lockstep.Step` (the loop's, or a replay's):
    ``action``, ``reward``, ``terminated``, ``truncated``, ``success`` (``info["success"]``,
    default False) and ``valid`` (``info["action_is_valid"]``, default True). The step's
    ``sample`` is not recorded."""
    return {
        "action": step.action,
        "reward": float(step.reward),
        "terminated": bool(step.terminated),
        "truncated": bool(step.truncated),
        "success": bool(step.info.get("success", False)),
        "valid": bool(step.info.get("action_is_valid", True)),
    }


def episode_record(
    seed: int,
    steps: list[dict[str, Any]],
    *,
    terminated: bool,
    truncated: bool,
    error: str | None,
    wall_s: float,
) -> dict[str, Any]:
    """The record of one episode from its :func:`step_record` s: the return is the sum of the
    rewards, and an errored episode is never a success."""
    return {
        "seed": seed,
        "steps": steps,
        "return": float(sum(s["reward"] for s in steps)),
        "success": bool(steps and steps[-1]["success"]) and error is None,
        "turns": len(steps),
        "terminated": terminated,
        "truncated": truncated,
        "error": error,
        "wall_s": wall_s,
    }


def run_record(
    env_id: str,
    *,
    env_kwargs: Mapping[str, Any],
    env_settings: Mapping[str, Any],
    env_files: Mapping[str, str],
    constructor_kwargs: Mapping[str, Any],
    seed: int,
    episodes: list[dict[str, Any]],
) -> dict[str, Any]:
    """The record of one environment's run: ``episodes`` (in seed order from ``seed``) and their
    summary, errored episodes counted at the env's :func:`worst_return`. ``env_settings`` is
    written only when it holds something."""
    return {
        "env_id": env_id,
        "env_version": env_version(env_id),
        "env_kwargs": env_kwargs,
        **({"env_settings": env_settings} if env_settings else {}),
        "env_files": env_files,
        "env_constructor_kwargs": constructor_kwargs,
        "seed": seed,
        "seeds": [seed + i for i in range(len(episodes))],
        "episodes": episodes,
        "summary": summarize(episodes, worst_return(env_id, env_kwargs)),
        "wall_s": sum(e["wall_s"] for e in episodes),
    }


def make_bundle(
    agent: Mapping[str, Any],
    eval_config: Mapping[str, Any],
    runs: list[dict[str, Any]],
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole bundle: the format header (format, version, the installed agentgym's version, the
    creation time in UTC) before ``agent``, ``eval_config``, ``provenance`` (when given: the code
    that made it, :func:`agentgym.provenance.describe`; never part of :func:`bundle_digest`) and
    ``runs``."""
    return {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_VERSION,
        "agentgym_version": AGENTGYM_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "agent": agent,
        "eval_config": eval_config,
        **({"provenance": dict(provenance)} if provenance is not None else {}),
        "runs": runs,
    }


# ----------------------------------------------------------------------------- writing


def dumps_bundle(bundle: Mapping[str, Any]) -> str:
    """A bundle as JSON text with one line per episode (readable, and small diffs when committed).

    Equivalent to ``json.dumps(bundle)`` once parsed; the text is UTF-8 (``ensure_ascii=False``).
    """

    def c(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    top = [f" {c(k)}: {c(v)}" for k, v in bundle.items() if k != "runs"]
    runs = []
    for run in bundle["runs"]:
        fields = [f"   {c(k)}: {c(v)}" for k, v in run.items() if k != "episodes"]
        episodes = ",\n".join(f"    {c(e)}" for e in run["episodes"])
        fields.append(f'   "episodes": [\n{episodes}\n   ]')
        runs.append("  {\n" + ",\n".join(fields) + "\n  }")
    top.append(' "runs": [\n' + ",\n".join(runs) + "\n ]")
    return "{\n" + ",\n".join(top) + "\n}\n"


def write_bundle(path: str | os.PathLike[str], bundle: Mapping[str, Any]) -> None:
    """Write :func:`dumps_bundle` of ``bundle`` to ``path`` atomically (a reader never sees half
    of it)."""
    write_text_atomic(path, dumps_bundle(bundle))


# ----------------------------------------------------------------------------- reading


def _reject_constant(name: str) -> float:
    """``NaN``/``Infinity`` are not JSON (RFC 8259), and a NaN compares unequal to everything, so
    it would slip through every tolerance check of a replay: refuse it outright."""
    raise BundleError(
        f"{name} is not a JSON number (non-finite values are refused); submit the file "
        "`agentgym eval --out` wrote, unedited"
    )


def _bounded_int(text: str) -> int:
    """A JSON integer within int64; wider ones (``10**400``) are refused before ``int()`` works."""
    digits = len(text.lstrip("-"))
    value = int(text) if digits <= MAX_INT_DIGITS else None
    if value is None or not -(2**63) <= value < 2**63:
        raise BundleError(
            f"an integer of {digits} digits is out of range (a bundle's integers fit in 64 bits); "
            "submit the file `agentgym eval --out` wrote, unedited"
        )
    return value


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when it overflows a float (``1e400``)."""
    value = float(text)
    if not math.isfinite(value):
        raise BundleError(
            f"a number of {len(text)} characters overflows a float; submit the file "
            "`agentgym eval --out` wrote, unedited"
        )
    return value


def _nesting_over(text: str, limit: int) -> int:
    """The 1-based offset where ``[``/``{`` nesting first exceeds ``limit`` (outside strings), or
    0. A linear scan without recursion, run before ``json.loads`` (whose C parser recurses)."""
    depth = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return i + 1
        elif ch in "]}":
            depth -= 1
    return 0


def parse_bundle(data: bytes, name: str = "the bundle") -> dict[str, Any]:
    """The JSON object in ``data``, read with every check that needs no schema.

    Args:
        data: the file's bytes (bound their size before reading them).
        name: what the messages call the file (its path).

    Returns:
        The parsed object (its structure is not checked: that is the schema's job).

    Raises:
        BundleError: not UTF-8; nested deeper than :data:`MAX_DEPTH`; not JSON; ``NaN`` or
            ``Infinity``; an integer outside int64 or a float that overflows; not an object; a
            string that is not valid Unicode (a lone surrogate escape).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BundleError(f"{name} is not UTF-8 text ({err}); write it with agentgym eval") from err
    deep = _nesting_over(text, MAX_DEPTH)
    if deep:
        raise BundleError(
            f"{name} nests JSON arrays/objects more than {MAX_DEPTH} deep (at character "
            f"{deep}); a result bundle is 6 deep: submit the file `agentgym eval --out` wrote"
        )
    try:
        bundle = json.loads(
            text, parse_constant=_reject_constant, parse_int=_bounded_int, parse_float=_finite_float
        )
    except BundleError as err:
        raise BundleError(f"{name}: {err}") from None
    except json.JSONDecodeError as err:
        raise BundleError(
            f"{name} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}; "
            "submit the file `agentgym eval --out` wrote, unedited"
        ) from err
    except (RecursionError, MemoryError) as err:  # belt and braces: the scan above bounds depth
        raise BundleError(f"{name} cannot be parsed ({type(err).__name__})") from None
    if not isinstance(bundle, dict):
        raise BundleError(f"{name} holds a JSON {type(bundle).__name__}, not a result bundle")
    try:  # JSON escapes can spell lone surrogates ("\ud800"): text no database or page can hold
        json.dumps(bundle, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError(
            f"{name} holds a string that is not valid Unicode (a lone surrogate escape such as "
            "\\ud800); submit the file `agentgym eval --out` wrote, unedited"
        ) from None
    return bundle


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    return value


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> gym.Env:
    """``gymnasium.make(env_id, **env_kwargs)`` with JSON lists turned back into tuples."""
    return gym.make(env_id, **{k: _from_json(v) for k, v in (env_kwargs or {}).items()})


# ----------------------------------------------------------------------------- replay


def replay_episode(
    env: gym.Env, seed: int, actions: Iterable[str]
) -> tuple[ChatEpisode, list[dict[str, Any]]]:
    """Reset ``env`` with ``seed`` and step it with ``actions``.

    Stops early if the episode ends before the actions run out (the caller compares lengths).

    Returns:
        The :class:`ChatEpisode` and one :func:`step_record` per executed action, as the harness
        writes them.
    """
    observation, info = env.reset(seed=seed)
    chat = ChatEpisode.from_reset(observation, info)
    steps: list[dict[str, Any]] = []
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        chat.record(action, observation, reward, terminated, truncated, info)
        steps.append(step_record(Step(action, reward, terminated, truncated, info)))
        if terminated or truncated:
            break
    return chat, steps


def write_chat_jsonl(bundle: Mapping[str, Any], path: str | os.PathLike[str]) -> int:
    """Write every episode of ``bundle`` as one JSON line in chat form; return the line count.

    Each line: ``{"env_id", "seed", "messages": [{"role", "content"}, ...], "return", "success",
    "agent"}``, the messages being :meth:`ChatEpisode.messages` rebuilt by replaying the recorded
    actions (system, then user/assistant pairs), ready for SFT (e.g. TRL's ``SFTTrainer`` with a
    ``messages`` column). Errored episodes are left out.
    """
    lines = []
    for run in bundle["runs"]:
        env = make_env(run["env_id"], {**run["env_kwargs"], **run.get("env_settings", {})})
        try:
            for episode in run["episodes"]:
                if episode["error"]:
                    continue
                chat, _ = replay_episode(
                    env, episode["seed"], [s["action"] for s in episode["steps"]]
                )
                lines.append(
                    json.dumps(
                        {
                            "env_id": run["env_id"],
                            "seed": episode["seed"],
                            "messages": chat.messages(),
                            "return": episode["return"],
                            "success": episode["success"],
                            "agent": bundle["agent"]["name"],
                        },
                        ensure_ascii=False,
                    )
                )
        finally:
            env.close()
    write_text_atomic(Path(path), "".join(line + "\n" for line in lines))
    return len(lines)
