"""Checks on a submitted result bundle, in order, each refusing with a message that names the fix.

1. Size: the file's size is read with ``os.stat`` before a byte of it is read; a bundle over
   ``max_bytes`` (default :data:`MAX_BUNDLE_BYTES`, 64 MiB) is refused.
2. JSON: UTF-8 text holding one JSON object nested at most :data:`MAX_DEPTH` deep.
3. Schema: ``leaderboards/schema/bundle-v1.json`` (JSON Schema draft 2020-12, via ``jsonschema``),
   whose free-form objects (``agent.settings``, ``eval_config``, ``provenance``, each run's
   ``env_settings`` and ``env_constructor_kwargs``: documentation, which no replay reads) hold at
   most 256 keys each and, together, at most :data:`MAX_FREE_FORM_BYTES` (4 MiB) of compact
   JSON. A bundle refused at steps 1-3 (or whose structure cannot be read) is *malformed*
   (:class:`MalformedBundle`: ``python -m leaderboards`` exits 2).
4. Consistency: each env id is registered in the installed agentgym at the bundle's version, and
   is deterministic (an id registered ``nondeterministic`` cannot be verified by replay); its
   ``env_kwargs`` pass the kwargs gate as a bundle (:func:`agentgym.registration.check_env_kwargs`
   with ``source="bundle"``: task parameters within their bounds only, never an execution
   setting such as a sandbox back end or a daemon address); the seeds are the board's official
   seeds' first ``n`` (:data:`OFFICIAL_FIRST_SEED`, ``+ 1``, ...: the verifier chooses them, so a
   submitter cannot pick a lucky window) and each episode carries its seed, in order; each
   episode's ``return``, ``turns`` and ``success`` agree with its steps; not every episode
   errored; no board appears twice.
5. Budget: the replay's steps are counted before it starts, and the replay runs in a child
   process under the verifier's :class:`ReplayBudget` (wall time, steps, resident memory of the
   child and everything it starts; :func:`sandboxes.limits.run_bounded`); a bundle over a limit
   is refused with the limit named.
6. Replay: every episode is played again from its seed with its recorded actions, with the task
   parameters normalised (:func:`agentgym.registration.normalise_task_kwargs`) and the
   verifier's own execution settings (:class:`VerifierConfig`), and every step's reward (to
   1e-9), ``terminated``, ``truncated``, ``success`` and ``valid`` must equal the bundle's; an
   episode without ``error`` must end exactly at its last step.
7. Summary: the bundle's summary must equal the one recomputed from its episodes.

What the leaderboard stores comes from the replay, never from the bundle's claims: each
episode's return is the sum of the replayed rewards, and an errored episode counts as a failure
with the env's worst return (:func:`agentgym.registration.worst_return`), so an error never
scores better than playing; each episode's digest for the duplicate check
(:func:`actions_digest`) is of what its steps executed in the replay, not of the action text.
No refusal quotes a file the bundle names, nor its digest.

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
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from agentgym.bundle import (
    AGENTGYM_VERSION,
    FILE_KWARGS,
    MAX_DEPTH,
    BundleError,
    EnvKwargsError,
    Step,
    board_kwargs,
    bundle_digest,
    env_version,
    file_digests,
    make_env,
    normalise_task_kwargs,
    parse_bundle,
    registered_envs,
    step_record,
    summarize,
    worst_return,
)
from sandboxes.limits import run_bounded

__all__ = [
    "MAX_BUNDLE_BYTES",
    "SCHEMA_PATH",
    "MAX_DEPTH",
    "OFFICIAL_FIRST_SEED",
    "SubmissionError",
    "MalformedBundle",
    "ReplayBudget",
    "VerifierConfig",
    "VerifiedRun",
    "VerifiedBundle",
    "load_bundle",
    "validate_schema",
    "check_consistency",
    "replay_run",
    "verify_bundle",
    "verify_file",
    "bundle_digest",
    "actions_digest",
    "ran_nothing",
    "executed_record",
    "board_key",
    "MAX_FREE_FORM_BYTES",
    "check_free_form",
]

MAX_BUNDLE_BYTES = 64 * 1024 * 1024
#: The most compact-JSON bytes (UTF-8) a bundle's free-form fields may hold together
#: (:func:`check_free_form`): they are documentation no replay reads, and every later read of
#: a stored entry (a rebuild) pays for them again.
MAX_FREE_FORM_BYTES = 4 * 1024 * 1024
SCHEMA_PATH = Path(__file__).with_name("schema") / "bundle-v1.json"
_REWARD_TOL = 1e-9
_MAX_SCHEMA_MESSAGE = 300  # characters of a jsonschema message quoted in a refusal

#: The first of every board's official seeds: a run covers the official seeds' first ``n``
#: (``0, 1, ..., n - 1``), never a window its submitter chose (issue 25: an agent was ranked on
#: its luckiest window). ``agentgym eval`` starts there by default (``--seed 0``).
OFFICIAL_FIRST_SEED = 0
_STEP_FLAGS = ("terminated", "truncated", "success", "valid")


class SubmissionError(Exception):
    """A refused submission; the message says what is wrong and what to do."""


class MalformedBundle(SubmissionError):
    """A bundle that is not a well-formed result bundle at all (size, encoding, JSON, nesting,
    schema, structure): ``python -m leaderboards`` exits 2 on it."""


@dataclass(frozen=True)
class ReplayBudget:
    """What one bundle's replay may cost the verifier; over any limit it is refused, naming it.

    Attributes:
        max_seconds: wall-clock seconds for the whole replay (all runs), > 0.
        max_steps: env steps plus resets over all episodes, counted before the replay, >= 1.
        max_memory_mb: resident memory (MiB) of the replay process and every process it
            starts (browsers, sandboxes), sampled every 0.1 s, >= 64.
        max_step_seconds: wall-clock seconds for building one env, one reset or one step, > 0:
            a bundle whose task makes one of them slow (a reasoning-gym configuration that takes
            minutes per problem) is refused then, not after the whole budget.
    """

    max_seconds: float = 1800.0
    max_steps: int = 200_000
    max_memory_mb: int = 4096
    max_step_seconds: float = 120.0

    def __post_init__(self) -> None:
        if not (isinstance(self.max_seconds, (int, float)) and 0 < self.max_seconds < math.inf):
            raise ValueError(f"max_seconds must be a number > 0, got {self.max_seconds!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int):
            raise ValueError(f"max_steps must be an int >= 1, got {self.max_steps!r}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {self.max_steps!r}")
        if not isinstance(self.max_memory_mb, int) or self.max_memory_mb < 64:
            raise ValueError(f"max_memory_mb must be an int >= 64, got {self.max_memory_mb!r}")
        step = self.max_step_seconds
        if not (isinstance(step, (int, float)) and 0 < step < math.inf):
            raise ValueError(f"max_step_seconds must be a number > 0, got {step!r}")


@dataclass(frozen=True)
class VerifierConfig:
    """The verifier's own choices for a replay; a bundle never sets any of them.

    Attributes:
        budget: the :class:`ReplayBudget`.
        env_settings: execution settings per env id (e.g. ``{"agentgym/CodeExec-v0":
            {"backend": "docker"}}``), passed to ``gymnasium.make`` beside the bundle's task
            parameters; an id not named runs with its registered defaults (CodeExec's ``auto``
            back end refuses to run without isolation).
    """

    budget: ReplayBudget = field(default_factory=ReplayBudget)
    env_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifiedRun:
    """One environment's results after replay.

    Attributes:
        env_id: the registered id.
        env_version: its version number.
        env_kwargs: the constructor overrides (JSON form).
        seed: the first seed.
        summary: :func:`agentgym.bundle.summarize` of the replayed episodes.
        env_files: SHA-256 of each file the overrides name (checked against the files).
        episodes: ``(seed, SHA-256 of what its steps executed)`` per episode
            (:func:`actions_digest` of the replay's :func:`executed_record` s): what tells one
            run's episodes from another's on a board.
    """

    env_id: str
    env_version: int
    env_kwargs: dict[str, Any]
    seed: int
    summary: dict[str, Any]
    env_files: dict[str, str] = field(default_factory=dict)
    episodes: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle that passed every check, with its replayed runs and its digest."""

    bundle: dict[str, Any]
    runs: tuple[VerifiedRun, ...]
    digest: str
    episodes_replayed: int


def load_bundle(path: str | os.PathLike[str], max_bytes: int = MAX_BUNDLE_BYTES) -> dict[str, Any]:
    """Read a bundle file after checking its size (the text: :func:`agentgym.bundle.parse_bundle`).

    Raises:
        SubmissionError: missing file, over ``max_bytes``, not UTF-8, not JSON, not an object.
    """
    path = Path(path)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError as err:
        raise MalformedBundle(f"{path}: no such file") from err
    if not path.is_file():
        raise MalformedBundle(f"{path}: not a regular file")
    if size > max_bytes:
        raise MalformedBundle(
            f"{path} is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.1f} MiB limit; "
            "submit fewer episodes per bundle (or raise --max-mb)"
        )
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # the file grew after the stat
        raise MalformedBundle(f"{path} grew past the {max_bytes / 2**20:.1f} MiB limit while read")
    try:
        return parse_bundle(data, str(path))
    except BundleError as err:
        raise MalformedBundle(str(err)) from None


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
    validator = _validator()
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(bundle))
    except RecursionError:
        raise MalformedBundle(f"the bundle nests deeper than {MAX_DEPTH} levels") from None
    if error is None:
        check_free_form(bundle)
        return
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    message = error.message
    if error.validator == "maxProperties" and isinstance(error.instance, dict):
        # jsonschema's message quotes the whole object
        message = (
            f"it has {len(error.instance)} keys, over the limit of {error.validator_value} "
            "(maxProperties)"
        )
    elif len(message) > _MAX_SCHEMA_MESSAGE:
        message = f"{message[:_MAX_SCHEMA_MESSAGE]}... ({error.validator})"
    raise MalformedBundle(
        f"schema violation at {where}: {message} (schema: leaderboards/schema/{SCHEMA_PATH.name})"
    )


def _free_form_fields(bundle: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(path, value)`` of each free-form field a schema-valid bundle holds."""
    agent = bundle.get("agent") or {}
    if "settings" in agent:
        yield "agent/settings", agent["settings"]
    for key in ("eval_config", "provenance"):
        if key in bundle:
            yield key, bundle[key]
    for r, run in enumerate(bundle.get("runs") or ()):
        for key in ("env_settings", "env_constructor_kwargs"):
            if key in run:
                yield f"runs/{r}/{key}", run[key]


def check_free_form(bundle: Mapping[str, Any], limit: int = MAX_FREE_FORM_BYTES) -> None:
    """Refuse a (schema-valid) bundle whose free-form fields hold more than ``limit`` bytes
    of compact JSON together (the schema bounds their keys; JSON Schema cannot count bytes).

    Raises:
        MalformedBundle: over the limit; the message names it and the largest field.
    """
    sizes = []
    for where, value in _free_form_fields(bundle):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        sizes.append((len(text.encode("utf-8", "surrogatepass")), where))
    total = sum(size for size, _ in sizes)
    if total > limit:
        largest, where = max(sizes)
        raise MalformedBundle(
            f"the free-form fields (agent/settings, eval_config, provenance, each run's "
            f"env_settings and env_constructor_kwargs) hold {total:,} bytes of JSON, over the "
            f"limit of {limit:,} bytes ({limit / 2**20:g} MiB) they may hold together; the "
            f"largest is {where} ({largest:,} bytes): they are documentation that no replay "
            "reads, so submit the bundle `agentgym eval --out` wrote, without what was added "
            "to them"
        )


def _gate(run: Mapping[str, Any], r: int) -> dict[str, Any]:
    """The run's task parameters through the kwargs gate (as a bundle), normalised.

    A refusal about a file a kwarg names says the same thing whether the path is missing,
    unreadable, not a regular file or too large, and never quotes the file.
    """
    env_id = run["env_id"]
    try:
        return normalise_task_kwargs(env_id, run["env_kwargs"])
    except EnvKwargsError as err:
        if err.key in FILE_KWARGS:
            raise SubmissionError(_file_refusal(env_id, err.key)) from None
        raise SubmissionError(f"runs/{r} ({env_id}): env_kwargs refused: {err}") from None


def _file_refusal(env_id: str, key: str) -> str:
    return (
        f"{env_id}: the file named by {key} is not the one the run recorded (missing, "
        "unreadable, not a regular file, too large, changed since the run, or not a file the env "
        "can read): replay needs the same file at the same path"
    )


def check_consistency(bundle: Mapping[str, Any]) -> None:
    """The checks that need no replay (see the module docstring, step 4).

    Raises:
        SubmissionError: the first inconsistency found.
    """
    registered = registered_envs()
    seen: set[tuple[str, str]] = set()
    for r, run in enumerate(bundle["runs"]):
        env_id = run["env_id"]
        if env_id not in registered:
            base = env_id.rsplit("-v", 1)[0]
            versions = [i.rsplit("-v", 1)[1] for i in registered if i.rsplit("-v", 1)[0] == base]
            hint = (
                f"; the installed agentgym {AGENTGYM_VERSION} has "
                + ", ".join(f"{base}-v{v}" for v in versions)
                + " (rerun the eval on it)"
                if versions
                else f"; `agentgym list` shows the ids of agentgym {AGENTGYM_VERSION}"
            )
            raise SubmissionError(f"runs/{r}: unknown environment id {env_id!r}{hint}")
        if registered[env_id].nondeterministic:
            raise SubmissionError(
                f"runs/{r}: {env_id} is nondeterministic (the same seed and actions may give "
                "another episode), so its runs cannot be verified by replay and it has no "
                "leaderboard (`agentgym list` marks such ids): evaluate it locally"
            )
        if run["env_version"] != env_version(env_id):
            raise SubmissionError(
                f"runs/{r}: env_version {run['env_version']} does not match the id {env_id!r}"
            )
        key = board_key(env_id, _gate(run, r), check_files(run))
        if key in seen:
            raise SubmissionError(f"runs/{r}: {env_id} appears twice with the same arguments")
        seen.add(key)
        if run["seed"] != OFFICIAL_FIRST_SEED:
            raise SubmissionError(
                f"runs/{r} ({env_id}): the run starts at seed {run['seed']}, but a leaderboard's "
                f"official seeds are {OFFICIAL_FIRST_SEED}, {OFFICIAL_FIRST_SEED + 1}, ... and a "
                "run covers their first n (the verifier chooses the seeds, so that no run is a "
                f"lucky window): rerun agentgym eval with --seed {OFFICIAL_FIRST_SEED}"
            )
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
        if all(episode["error"] for episode in run["episodes"]):
            raise SubmissionError(
                f"runs/{r} ({env_id}): every one of its {len(seeds)} episodes ended in an error, "
                "so no episode was played to score: fix what raised (each episode's `error` says "
                "it) and rerun agentgym eval, or leave this env out of the bundle"
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
    """The leaderboard a run belongs to: its env id and its canonical constructor overrides
    (pass them normalised: :func:`agentgym.registration.normalise_task_kwargs`) without those
    that change no episode (:func:`agentgym.registration.board_kwargs`: the observation and
    action space sizes), with ``"<kwarg>#sha256": <first 16 hex digits>`` added for each file
    named in them (two level files at one path are two leaderboards)."""
    key = board_kwargs(env_id, env_kwargs)
    for name, digest in sorted((env_files or {}).items()):
        key[f"{name}#sha256"] = digest[:16]
    return env_id, json.dumps(key, sort_keys=True, separators=(",", ":"))


def executed_record(
    action: str,
    info: Mapping[str, Any],
    opaque_names: bool = False,
    action_key: Callable[[str], str] | None = None,
) -> Any:
    """What one replayed step executed: ``[action_is_valid, keys]``, the key of each action the
    env ran (``action_key`` of its canonical name in ``info["executed_actions"]``,
    :data:`agentgym.text_env.STEP_INFO_KEYS`; without ``action_key`` the name itself). Where the
    names do not tell actions apart (``opaque_names``:
    :attr:`agentgym.registration.EnvEntry.opaque_action_names`, CodeExec's ``"code (N chars)"``)
    it is ``[action_is_valid, how many ran, keys]``, the keys those of the action pieces parsed
    from the answer (``info["actions"]``) when any ran (:attr:`EnvEntry.action_key
    <agentgym.registration.EnvEntry.action_key>`: CodeExec's is the code's syntax tree). The
    ``<think>`` text, white space around the pieces and the spelling of a name the env reads as
    the same action are not part of it: two steps with the same record make the same step. An
    env whose info has no ``executed_actions`` gives the action text itself.

    Example:
        >>> info = {"action_is_valid": True, "executed_actions": ("Right", "Down")}
        >>> executed_record("<think>a</think><answer>Right||Down</answer>", info)
        [True, ['Right', 'Down']]
    """
    executed = info.get("executed_actions")
    if not isinstance(executed, (list, tuple)):
        return ["text", action]
    key = action_key or str
    valid = bool(info.get("action_is_valid", True))
    if opaque_names:
        pieces = [key(str(a)) for a in info.get("actions") or ()] if executed else []
        return [valid, len(executed), pieces]
    return [valid, [key(str(a)) for a in executed]]


def ran_nothing(record: Any) -> bool:
    """Whether a step's :func:`executed_record` says no action ran (an invalid answer)."""
    if not isinstance(record, list) or not record or record[0] == "text":
        return False
    return not record[-1]


def actions_digest(executed: Sequence[Any]) -> str:
    """SHA-256 (hex) of what an episode's steps executed, in order (their
    :func:`executed_record` s): with the board and the seed, what makes the episode (its rewards
    follow from them). Two episodes whose actions differ only in their ``<think>`` text, or in
    how the same actions are spelt (``Right||Down``, ``Right || Down``), have one digest. An
    episode in which no action ran (every step invalid) has the empty digest ``""``: it shows
    nothing of who played it, so two agents that both ran nothing are no copy of each other
    (:func:`leaderboards.store.same_episodes`)."""
    if all(ran_nothing(record) for record in executed):
        return ""
    text = json.dumps(list(executed), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_files(run: Mapping[str, Any]) -> dict[str, str]:
    """The run's recorded file digests, checked against the files as they are now.

    Raises:
        SubmissionError: a file the run names is not recorded, cannot be read, or changed (one
            message for all of these; it quotes neither the file nor a digest).
    """
    recorded = dict(run.get("env_files") or {})
    kwargs = run["env_kwargs"]
    for name in FILE_KWARGS:
        value = kwargs.get(name)
        if value is not None and not isinstance(value, str):
            raise SubmissionError(f"{run['env_id']}: {name} must be a path string")
    named = [k for k in FILE_KWARGS if kwargs.get(k) is not None]
    for name in named:
        if name not in recorded:
            raise SubmissionError(
                f"{run['env_id']}: the run names a file in {name} but does not record its "
                "SHA-256 (env_files): rerun agentgym eval to write it"
            )
    extra = sorted(set(recorded) - set(named))
    if extra:
        raise SubmissionError(f"{run['env_id']}: env_files names {extra}, which env_kwargs do not")
    try:
        # The gate first: a path that is not a small regular file is never opened.
        normalise_task_kwargs(run["env_id"], {k: kwargs[k] for k in named})
        current = file_digests(kwargs)
    except (EnvKwargsError, OSError) as err:
        key = getattr(err, "key", None) or named[0]
        raise SubmissionError(_file_refusal(run["env_id"], key)) from None
    for name, digest in current.items():
        if recorded[name] != digest:
            raise SubmissionError(_file_refusal(run["env_id"], name))
    return current


def _scored_episode(env_id: str, kwargs: Mapping[str, Any], episode: Mapping[str, Any], steps):
    """The episode record the leaderboard scores: the replayed steps, the replayed return, and
    for an errored episode a failure with the env's worst return."""
    error = episode["error"]
    total = math.fsum(s["reward"] for s in steps)
    return {
        "seed": episode["seed"],
        "steps": steps,
        "return": worst_return(env_id, kwargs) if error else total,
        "success": bool(steps and steps[-1]["success"]) and not error,
        "error": error,
    }


class _StepTimeout(BaseException):
    """Raised by ``SIGALRM`` in a replay call that ran past the per-step limit (a
    ``BaseException``, so that no environment's ``except Exception`` swallows it)."""


@contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`_StepTimeout` if the block runs longer than ``seconds`` (``SIGALRM``).

    Signals reach only the main thread: elsewhere (and with ``seconds=None``) the block is not
    bounded here, and the replay's whole budget (:func:`run_within_budget`) is the bound. The
    replay's child process runs it in its main thread.
    """
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise _StepTimeout

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _compare_step(want: Mapping[str, Any], got: Mapping[str, Any], where: str, cause: str) -> None:
    """Refuse unless a replayed step (``got``) has the recorded reward and flags."""
    if abs(float(want["reward"]) - got["reward"]) > _REWARD_TOL:
        raise SubmissionError(
            f"replay mismatch in {where}: the bundle says reward {want['reward']!r}, the replay "
            f"gives {got['reward']!r}; {cause}"
        )
    for flag in _STEP_FLAGS:
        if bool(want[flag]) != got[flag]:
            raise SubmissionError(
                f"replay mismatch in {where}: the bundle says {flag}={want[flag]}, the replay "
                f"gives {got[flag]}; {cause}"
            )


def replay_run(
    run: Mapping[str, Any],
    *,
    bundle_version: str = "?",
    settings: Mapping[str, Any] | None = None,
    step_seconds: float | None = None,
) -> VerifiedRun:
    """Replay every episode of one run, comparing each step as it is replayed: the first step
    that differs from the bundle ends the replay.

    Args:
        run: a run of a bundle that passed :func:`check_consistency`.
        bundle_version: the bundle's agentgym version (for messages).
        settings: the verifier's execution settings for this env (never the bundle's).
        step_seconds: the most wall time building the env, one reset or one step may take
            (:attr:`ReplayBudget.max_step_seconds`; None: no limit per step).

    Returns:
        The :class:`VerifiedRun`; its summary comes from the replayed episodes (errored ones
        scored with :func:`agentgym.registration.worst_return`).

    Raises:
        SubmissionError: the first mismatch, naming the episode, seed, step and values; or a
            call over ``step_seconds``.
    """
    env_id = run["env_id"]
    cause = (
        f"the bundle was altered, or made with another agentgym (bundle {bundle_version}, "
        f"installed {AGENTGYM_VERSION})"
    )
    kwargs = normalise_task_kwargs(env_id, run["env_kwargs"])
    named = [k for k in FILE_KWARGS if k in kwargs]
    entry = registered_envs()[env_id]
    opaque, action_key = entry.opaque_action_names, entry.action_key

    def detail(err: BaseException) -> str:
        if named:
            # An error raised while reading a file the bundle names may quote that file, and any
            # message other than the file check's would tell that the recorded digest was right
            # (a digest oracle for files on this machine): the file check's refusal, word for word.
            raise SubmissionError(_file_refusal(env_id, named[0])) from None
        return f"{type(err).__name__}: {err}"

    def bounded(what: str, raised: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)`` (``what``, for the refusal) within the per-step limit; an error
        it raises is refused as ``raised`` and the error."""
        try:
            with _deadline(step_seconds):
                return fn(*args, **kw)
        except _StepTimeout:
            raise SubmissionError(
                f"over the replay budget (limit: step: {step_seconds:g} s for building the env, "
                f"one reset or one step): {what} took longer; the replay was stopped and nothing "
                "was stored"
            ) from None
        except Exception as err:
            raise SubmissionError(f"{raised} {detail(err)}") from None

    env = bounded(
        f"building {env_id}",
        f"{env_id}: the environment cannot be built with these env_kwargs:",
        make_env,
        env_id,
        {**kwargs, **dict(settings or {})},
    )
    scored = []
    digests: list[tuple[int, str]] = []
    try:
        for e, episode in enumerate(run["episodes"]):
            recorded = episode["steps"]
            where = f"{env_id}, episode {e} (seed {episode['seed']})"
            raised = f"{where}: replay raised"
            bounded(f"the reset of {where}", raised, env.reset, seed=episode["seed"])
            # Each step is compared as it is replayed: the first wrong one ends the replay.
            replayed: list[dict[str, Any]] = []
            executed: list[Any] = []
            for t, want in enumerate(recorded):
                action = want["action"]
                _, reward, terminated, truncated, info = bounded(
                    f"step {t} of {where}", raised, env.step, action
                )
                got = step_record(Step(action, reward, terminated, truncated, info))
                _compare_step(want, got, f"{where}, step {t}", cause)
                replayed.append(got)
                executed.append(executed_record(action, info, opaque, action_key))
                if (terminated or truncated) and t + 1 < len(recorded):
                    raise SubmissionError(
                        f"replay mismatch in {where}: the environment ended the episode after "
                        f"{t + 1} steps but the bundle has {len(recorded)}; {cause}"
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
            scored.append(_scored_episode(env_id, kwargs, episode, replayed))
            digests.append((episode["seed"], actions_digest(executed)))
    finally:
        env.close()
    claimed = run["summary"]
    for key, value in summarize(run["episodes"], worst_return(env_id, kwargs)).items():
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
        kwargs,
        run["seed"],
        summarize(scored),
        dict(run.get("env_files") or {}),
        tuple(digests),
    )


def replay_cost(bundle: Mapping[str, Any]) -> int:
    """Env steps plus resets the replay of ``bundle`` takes (counted from the bundle)."""
    return sum(len(e["steps"]) + 1 for run in bundle["runs"] for e in run["episodes"])


def verify_bundle(bundle: dict[str, Any], config: VerifierConfig | None = None) -> VerifiedBundle:
    """Schema, consistency, budget and replay checks of a parsed bundle (steps 3-7).

    Args:
        bundle: the parsed bundle.
        config: the verifier's budget and execution settings (default :class:`VerifierConfig`).

    Raises:
        MalformedBundle: the schema or the structure is wrong.
        SubmissionError: the first failed check (a budget refusal names the limit).
    """
    config = config or VerifierConfig()
    validate_schema(bundle)
    check_consistency(bundle)
    budget = config.budget
    cost = replay_cost(bundle)
    if cost > budget.max_steps:
        raise SubmissionError(
            f"over the replay budget (limit: steps): the bundle needs {cost} env steps and "
            f"resets, the verifier allows {budget.max_steps}; submit fewer episodes per bundle"
        )
    version = bundle["agentgym_version"]

    def replay_all() -> tuple[VerifiedRun, ...]:
        return tuple(
            replay_run(
                run,
                bundle_version=version,
                settings=config.env_settings.get(run["env_id"], {}),
                step_seconds=budget.max_step_seconds,
            )
            for run in bundle["runs"]
        )

    runs = run_within_budget(replay_all, budget)
    count = sum(len(run["episodes"]) for run in bundle["runs"])
    return VerifiedBundle(bundle, runs, bundle_digest(bundle), count)


def verify_file(
    path: str | os.PathLike[str],
    max_bytes: int = MAX_BUNDLE_BYTES,
    config: VerifierConfig | None = None,
) -> VerifiedBundle:
    """:func:`load_bundle` then :func:`verify_bundle`."""
    return verify_bundle(load_bundle(path, max_bytes), config)


# ----------------------------------------------------------------------------- the budget


def run_within_budget(fn: Callable[[], Any], budget: ReplayBudget) -> Any:
    """Run ``fn()`` in a forked child process under ``budget``'s time and memory limits
    (:func:`sandboxes.limits.run_bounded`).

    The child leads its own process group; over a limit the group gets SIGTERM (the envs close),
    then SIGKILL after 5 s, as does every process the child started.

    Returns:
        What ``fn`` returned (it must pickle).

    Raises:
        SubmissionError: ``fn`` raised one (passed on), a limit was hit (the message names it),
            or the child died.
    """
    run = run_bounded(
        fn,
        max_seconds=budget.max_seconds,
        max_memory_mb=budget.max_memory_mb,
        passthrough=(SubmissionError,),
    )
    if run.status in ("time", "memory"):
        over = (
            f"time: {budget.max_seconds:g} s of wall time"
            if run.status == "time"
            else f"memory: {budget.max_memory_mb} MiB resident"
        )
        raise SubmissionError(
            f"over the replay budget (limit: {over}); the replay was stopped and nothing was "
            "stored: submit fewer or smaller episodes, or ask the verifier for a larger budget"
        )
    if run.status == "died":
        raise SubmissionError(
            f"the replay process died (exit code {run.exitcode}) before it finished; "
            "nothing was stored"
        )
    if run.status == "ok":
        return run.value
    if run.status == "raised":
        raise SubmissionError(run.value)
    # "error" (the exception's type name only: its text may quote a named file) or "stopped"
    raise SubmissionError(f"the replay failed ({run.value or ''}); nothing was stored")
