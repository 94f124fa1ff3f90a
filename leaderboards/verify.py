"""Checks on a submitted result bundle, in order, each refusing with a message that names the fix.

1. Size: the file's size is read with ``os.stat`` before a byte of it is read; a bundle over
   ``max_bytes`` (default :data:`MAX_BUNDLE_BYTES`, 64 MiB) is refused.
2. JSON: UTF-8 text holding one JSON object.
3. Schema: ``leaderboards/schema/bundle-v1.json`` (JSON Schema draft 2020-12, via ``jsonschema``).
4. Consistency: each env id is registered in the installed agentgym at the bundle's version; the
   seeds are ``seed, seed + 1, ...`` and each episode carries its seed, in order; each episode's
   ``return``, ``turns`` and ``success`` agree with its steps; no env appears twice.
5. Replay: every episode is played again from its seed with its recorded actions, and every
   step's reward (to 1e-9), ``terminated``, ``truncated``, ``success`` and ``valid`` must equal
   the bundle's; an episode without ``error`` must end exactly at its last step.
6. Summary: the bundle's summary must equal the one recomputed from the verified episodes.

What the leaderboard stores comes from the replayed episodes, never from the bundle's own claims.

Example:
    >>> verified = verify_file("run.json")  # doctest: +SKIP
    >>> verified.runs[0].summary["success_rate"]  # doctest: +SKIP
    0.25
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import agentgym
from agentgym.eval import env_version, file_digests, make_env, replay_episode, summarize

__all__ = [
    "MAX_BUNDLE_BYTES",
    "SCHEMA_PATH",
    "SubmissionError",
    "VerifiedRun",
    "VerifiedBundle",
    "load_bundle",
    "validate_schema",
    "check_consistency",
    "replay_run",
    "verify_bundle",
    "verify_file",
    "bundle_digest",
    "board_key",
]

MAX_BUNDLE_BYTES = 64 * 1024 * 1024
SCHEMA_PATH = Path(__file__).with_name("schema") / "bundle-v1.json"
_REWARD_TOL = 1e-9
_STEP_FLAGS = ("terminated", "truncated", "success", "valid")


class SubmissionError(Exception):
    """A refused submission; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class VerifiedRun:
    """One environment's results after replay.

    Attributes:
        env_id: the registered id.
        env_version: its version number.
        env_kwargs: the constructor overrides (JSON form).
        seed: the first seed.
        summary: :func:`agentgym.eval.summarize` of the replayed episodes.
        env_files: SHA-256 of each file the overrides name (checked against the files).
    """

    env_id: str
    env_version: int
    env_kwargs: dict[str, Any]
    seed: int
    summary: dict[str, Any]
    env_files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle that passed every check, with its replayed runs and its digest."""

    bundle: dict[str, Any]
    runs: tuple[VerifiedRun, ...]
    digest: str
    episodes_replayed: int


def _reject_constant(name: str) -> float:
    """``NaN``/``Infinity`` are not JSON (RFC 8259), and a NaN compares unequal to everything, so
    it would slip through every tolerance check of the replay: refuse it outright."""
    raise SubmissionError(
        f"{name} is not a JSON number (non-finite values are refused); submit the file "
        "`agentgym eval --out` wrote, unedited"
    )


def load_bundle(path: str | os.PathLike[str], max_bytes: int = MAX_BUNDLE_BYTES) -> dict[str, Any]:
    """Read a bundle file after checking its size.

    Raises:
        SubmissionError: missing file, over ``max_bytes``, not UTF-8, not JSON, not an object.
    """
    path = Path(path)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError as err:
        raise SubmissionError(f"{path}: no such file") from err
    if not path.is_file():
        raise SubmissionError(f"{path}: not a regular file")
    if size > max_bytes:
        raise SubmissionError(
            f"{path} is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.1f} MiB limit; "
            "submit fewer episodes per bundle (or raise --max-mb)"
        )
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # the file grew after the stat
        raise SubmissionError(f"{path} grew past the {max_bytes / 2**20:.1f} MiB limit while read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SubmissionError(
            f"{path} is not UTF-8 text ({err}); write it with agentgym eval"
        ) from err
    try:
        bundle = json.loads(text, parse_constant=_reject_constant)
    except SubmissionError as err:
        raise SubmissionError(f"{path}: {err}") from None
    except json.JSONDecodeError as err:
        raise SubmissionError(
            f"{path} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}; "
            "submit the file `agentgym eval --out` wrote, unedited"
        ) from err
    if not isinstance(bundle, dict):
        raise SubmissionError(f"{path} holds a JSON {type(bundle).__name__}, not a result bundle")
    return bundle


@cache
def _validator() -> Any:
    try:
        import jsonschema
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "the leaderboard needs jsonschema: pip install 'agentgym[leaderboard]'"
        ) from err
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_schema(bundle: Any) -> None:
    """Check ``bundle`` against the published schema.

    Raises:
        SubmissionError: the first violation (by ``jsonschema.exceptions.best_match``), with the
            path to the offending value.
    """
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(bundle))
    if error is None:
        return
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    raise SubmissionError(
        f"schema violation at {where}: {error.message} "
        f"(schema: leaderboards/schema/{SCHEMA_PATH.name})"
    )


def check_consistency(bundle: Mapping[str, Any]) -> None:
    """The checks that need no replay (see the module docstring, step 4).

    Raises:
        SubmissionError: the first inconsistency found.
    """
    registered = agentgym.registered_envs()
    seen: set[tuple[str, str]] = set()
    for r, run in enumerate(bundle["runs"]):
        env_id = run["env_id"]
        if env_id not in registered:
            base = env_id.rsplit("-v", 1)[0]
            versions = [i.rsplit("-v", 1)[1] for i in registered if i.rsplit("-v", 1)[0] == base]
            hint = (
                f"; the installed agentgym {agentgym.__version__} has "
                + ", ".join(f"{base}-v{v}" for v in versions)
                + " (rerun the eval on it)"
                if versions
                else f"; `agentgym list` shows the ids of agentgym {agentgym.__version__}"
            )
            raise SubmissionError(f"runs/{r}: unknown environment id {env_id!r}{hint}")
        if run["env_version"] != env_version(env_id):
            raise SubmissionError(
                f"runs/{r}: env_version {run['env_version']} does not match the id {env_id!r}"
            )
        key = board_key(env_id, run["env_kwargs"], check_files(run))
        if key in seen:
            raise SubmissionError(f"runs/{r}: {env_id} appears twice with the same arguments")
        seen.add(key)
        seeds = run["seeds"]
        expected = [run["seed"] + i for i in range(len(seeds))]
        if seeds != expected:
            raise SubmissionError(
                f"runs/{r} ({env_id}): seeds must be consecutive from seed={run['seed']} "
                f"({expected[:3]}...), as agentgym eval writes them; got {seeds[:5]}..."
            )
        if len(run["episodes"]) != len(seeds):
            raise SubmissionError(
                f"runs/{r} ({env_id}): {len(run['episodes'])} episodes for {len(seeds)} seeds"
            )
        for e, (episode, seed) in enumerate(zip(run["episodes"], seeds, strict=True)):
            where = f"runs/{r}/episodes/{e} ({env_id})"
            if episode["seed"] != seed:
                raise SubmissionError(
                    f"{where}: the episode has seed {episode['seed']} but seeds[{e}] is {seed}; "
                    "episodes must be in seed order"
                )
            steps = episode["steps"]
            if episode["turns"] != len(steps):
                raise SubmissionError(f"{where}: turns={episode['turns']} but {len(steps)} steps")
            total = math.fsum(s["reward"] for s in steps)
            if abs(total - episode["return"]) > 1e-6:
                raise SubmissionError(
                    f"{where}: return {episode['return']} is not the sum of its rewards ({total})"
                )
            success = bool(steps and steps[-1]["success"]) and not episode["error"]
            if episode["success"] != success:
                raise SubmissionError(
                    f"{where}: success={episode['success']} but its last step says {success}"
                )


def board_key(
    env_id: str, env_kwargs: Mapping[str, Any], env_files: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """The leaderboard a run belongs to: its env id and its canonical constructor overrides,
    with ``"<kwarg>#sha256": <first 16 hex digits>`` added for each file named in them (two
    level files at one path are two leaderboards)."""
    key = dict(env_kwargs)
    for name, digest in sorted((env_files or {}).items()):
        key[f"{name}#sha256"] = digest[:16]
    return env_id, json.dumps(key, sort_keys=True, separators=(",", ":"))


def check_files(run: Mapping[str, Any]) -> dict[str, str]:
    """The run's recorded file digests, checked against the files as they are now.

    Raises:
        SubmissionError: a file the run names is not recorded, cannot be read, or changed.
    """
    recorded = dict(run.get("env_files") or {})
    try:
        current = file_digests(run["env_kwargs"])
    except OSError as err:
        raise SubmissionError(
            f"{run['env_id']}: cannot read {err.filename} ({err.strerror}), which the run's "
            "env_kwargs name: replay needs the same file at the same path"
        ) from err
    for name, digest in current.items():
        if name not in recorded:
            raise SubmissionError(
                f"{run['env_id']}: the run names {name}={run['env_kwargs'][name]!r} but does "
                "not record its SHA-256 (env_files): rerun agentgym eval to write it"
            )
        if recorded[name] != digest:
            raise SubmissionError(
                f"{run['env_id']}: {name}={run['env_kwargs'][name]!r} changed since the run "
                f"(SHA-256 {recorded[name][:16]}... recorded, {digest[:16]}... now): the "
                "episodes were played on another task; submit with the file the run used"
            )
    extra = sorted(set(recorded) - set(current))
    if extra:
        raise SubmissionError(f"{run['env_id']}: env_files names {extra}, which env_kwargs do not")
    return current


def replay_run(run: Mapping[str, Any], *, bundle_version: str = "?") -> VerifiedRun:
    """Replay every episode of one run and compare it step by step.

    Raises:
        SubmissionError: the first mismatch, naming the episode, seed, step and values.
    """
    env_id = run["env_id"]
    cause = (
        f"the bundle was altered, or made with another agentgym (bundle {bundle_version}, "
        f"installed {agentgym.__version__})"
    )
    try:
        env = make_env(env_id, run["env_kwargs"])
    except (TypeError, ValueError) as err:
        raise SubmissionError(f"{env_id}: the environment refuses env_kwargs: {err}") from err
    try:
        for e, episode in enumerate(run["episodes"]):
            recorded = episode["steps"]
            where = f"{env_id}, episode {e} (seed {episode['seed']})"
            try:
                _, replayed = replay_episode(env, episode["seed"], [s["action"] for s in recorded])
            except Exception as err:
                raise SubmissionError(
                    f"{where}: replay raised {type(err).__name__}: {err}"
                ) from err
            for t, (want, got) in enumerate(zip(recorded, replayed, strict=False)):
                if abs(float(want["reward"]) - got["reward"]) > _REWARD_TOL:
                    raise SubmissionError(
                        f"replay mismatch in {where}, step {t}: the bundle says reward "
                        f"{want['reward']!r}, the replay gives {got['reward']!r}; {cause}"
                    )
                for flag in _STEP_FLAGS:
                    if bool(want[flag]) != got[flag]:
                        raise SubmissionError(
                            f"replay mismatch in {where}, step {t}: the bundle says {flag}="
                            f"{want[flag]}, the replay gives {got[flag]}; {cause}"
                        )
            if len(replayed) < len(recorded):
                raise SubmissionError(
                    f"replay mismatch in {where}: the environment ended the episode after "
                    f"{len(replayed)} steps but the bundle has {len(recorded)}; {cause}"
                )
            ended = bool(replayed) and (replayed[-1]["terminated"] or replayed[-1]["truncated"])
            if not episode["error"] and not ended:
                raise SubmissionError(
                    f"{where}: the episode stops after {len(recorded)} steps without ending and "
                    "without an error; submit whole episodes"
                )
            if bool(episode["terminated"]) != bool(recorded and recorded[-1]["terminated"]) or bool(
                episode["truncated"]
            ) != bool(recorded and recorded[-1]["truncated"]):
                raise SubmissionError(f"{where}: terminated/truncated disagree with its last step")
    finally:
        env.close()
    summary = summarize(run["episodes"])
    claimed = run["summary"]
    for key, value in summary.items():
        other = claimed[key]
        same = (
            all(abs(a - b) <= 1e-9 for a, b in zip(value, other, strict=True))
            if isinstance(value, list)
            else abs(value - other) <= 1e-9
        )
        if not same:
            raise SubmissionError(
                f"{env_id}: summary {key} is {other!r} but the episodes give {value!r}; "
                "submit the summary agentgym eval wrote"
            )
    return VerifiedRun(
        env_id,
        env_version(env_id),
        dict(run["env_kwargs"]),
        run["seed"],
        summary,
        dict(run.get("env_files") or {}),
    )


def bundle_digest(bundle: Mapping[str, Any]) -> str:
    """SHA-256 of what makes a result: each run's env, arguments, seeds and actions.

    Two bundles with the same digest are the same submission, whatever their names or times.
    """
    core = [
        {
            "env_id": run["env_id"],
            "env_kwargs": run["env_kwargs"],
            **({"env_files": run["env_files"]} if run.get("env_files") else {}),
            "episodes": [[e["seed"], [s["action"] for s in e["steps"]]] for e in run["episodes"]],
        }
        for run in bundle["runs"]
    ]
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verify_bundle(bundle: dict[str, Any]) -> VerifiedBundle:
    """Schema, consistency and replay checks of a parsed bundle (steps 3-6).

    Raises:
        SubmissionError: the first failed check.
    """
    validate_schema(bundle)
    check_consistency(bundle)
    version = bundle["agentgym_version"]
    runs = tuple(replay_run(run, bundle_version=version) for run in bundle["runs"])
    count = sum(len(run["episodes"]) for run in bundle["runs"])
    return VerifiedBundle(bundle, runs, bundle_digest(bundle), count)


def verify_file(path: str | os.PathLike[str], max_bytes: int = MAX_BUNDLE_BYTES) -> VerifiedBundle:
    """:func:`load_bundle` then :func:`verify_bundle`."""
    return verify_bundle(load_bundle(path, max_bytes))
