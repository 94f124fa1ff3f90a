"""The eval harness: play an agent on environments and write a replayable result bundle.

``agentgym eval --env Sokoban-v0 --env Bandit-v0 --agent random --episodes 32 --seed 0
--out run.json`` plays episodes with reset seeds ``seed .. seed + episodes - 1`` on each
environment and writes one JSON *result bundle* (format ``agentgym-eval``, version 1; the JSON
Schema is ``leaderboards/schema/bundle-v1.json``)::

    {
      "format": "agentgym-eval", "format_version": 1,
      "agentgym_version": "0.1.0", "created": "2026-01-01T00:00:00Z",
      "agent": {"spec": "random", "name": "random", "description": "...", "seed": 0,
                "settings": {...}},
      "eval_config": {...},            # the arguments of the run (used to resume it)
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

JSON has no tuples: tuple arguments (``dim_room=(8, 8)``) are written as lists, and
:func:`make_env` turns lists back into tuples before ``gymnasium.make``.

An episode whose agent or environment raised is kept with ``error`` set and the steps played so
far; it counts as a failure in the summary, so errors cannot raise a success rate.

Output is resumable: every finished episode is appended to ``<out>.partial.jsonl`` at once, and the
same command run again skips the episodes found there (a different command with the same ``--out``
is refused; ``--overwrite`` starts afresh). The bundle is written atomically at the end and the
partial file removed.

Trajectories export as JSONL in chat form (:func:`write_chat_jsonl`: one line per episode with the
:class:`~agentgym.chat.ChatEpisode` messages, rebuilt by replaying the recorded actions), usable as
SFT data.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym
from agentgym.agents import Agent, AgentError, AgentRequest, make_agent
from agentgym.chat import ChatEpisode
from agentgym.fileio import write_text_atomic
from agentgym.lockstep import LiveEpisode, LocalEnvs, play_lockstep
from agentgym.registration import split_env_kwargs, worst_return

#: The largest reset seed a bundle may hold (a signed 64-bit integer: SQLite, JSON readers).
MAX_SEED = 2**63 - 1

#: Constructor arguments that name a file whose contents are the task (Sokoban levels, math
#: problems): a bundle records each such file's SHA-256 (``env_files``), so that a leaderboard
#: tells two files at one path apart and refuses a replay against a changed file.
FILE_KWARGS = ("level_file", "dataset_file")


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


__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "EvalError",
    "wilson_interval",
    "env_version",
    "summarize",
    "to_json_kwargs",
    "make_env",
    "replay_episode",
    "evaluate",
    "dumps_bundle",
    "write_chat_jsonl",
]

BUNDLE_FORMAT = "agentgym-eval"
BUNDLE_VERSION = 1
_Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal


class EvalError(Exception):
    """A user error in an eval run (bad arguments, an ``--out`` from another run)."""


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


def to_json_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor arguments as JSON values (tuples become lists).

    Raises:
        EvalError: a value JSON cannot hold (the message names the argument).
    """

    def convert(key: str, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (tuple, list)):
            return [convert(key, v) for v in value]
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            return {k: convert(key, v) for k, v in value.items()}
        raise EvalError(
            f"constructor argument {key}={value!r} cannot be written to a result bundle "
            "(only numbers, strings, booleans, None, lists/tuples and dicts)"
        )

    return {str(k): convert(str(k), v) for k, v in kwargs.items()}


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    return value


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> gym.Env:
    """``gymnasium.make(env_id, **env_kwargs)`` with JSON lists turned back into tuples."""
    return gym.make(env_id, **{k: _from_json(v) for k, v in (env_kwargs or {}).items()})


def replay_episode(
    env: gym.Env, seed: int, actions: Iterable[str]
) -> tuple[ChatEpisode, list[dict[str, Any]]]:
    """Reset ``env`` with ``seed`` and step it with ``actions``.

    Stops early if the episode ends before the actions run out (the caller compares lengths).

    Returns:
        The :class:`ChatEpisode` and one step record per executed action (``action``, ``reward``,
        ``terminated``, ``truncated``, ``success``, ``valid``), as the harness writes them.
    """
    observation, info = env.reset(seed=seed)
    chat = ChatEpisode.from_reset(observation, info)
    steps: list[dict[str, Any]] = []
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        chat.record(action, observation, reward, terminated, truncated, info)
        steps.append(_step_record(action, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return chat, steps


def _step_record(
    action: str, reward: float, terminated: bool, truncated: bool, info: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "action": action,
        "reward": float(reward),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "success": bool(info.get("success", False)),
        "valid": bool(info.get("action_is_valid", True)),
    }


def _episode_record(episode: LiveEpisode, wall_s: float) -> dict[str, Any]:
    """The bundle record of one episode :func:`agentgym.lockstep.play_lockstep` played."""
    steps = [
        _step_record(s.action, s.reward, s.terminated, s.truncated, s.info) for s in episode.steps
    ]
    return {
        "seed": episode.seed,
        "steps": steps,
        "return": float(sum(s["reward"] for s in steps)),
        "success": bool(steps and steps[-1]["success"]) and episode.error is None,
        "turns": len(steps),
        "terminated": episode.terminated,
        "truncated": episode.truncated,
        "error": episode.error,
        "wall_s": wall_s,
    }


def _play_batch(
    agent: Agent, env_id: str, envs: Sequence[gym.Env], batch: Sequence[tuple[int, int]]
) -> list[dict[str, Any]]:
    """Play the episodes ``batch`` ((index, seed) pairs) in lock step; one record each.

    The loop is the trainer's (:func:`agentgym.lockstep.play_lockstep`); the policy asks ``agent``
    for one action per live episode, and a failure ends only the episodes it concerns.
    """
    start = time.perf_counter()

    def act(live: list[LiveEpisode]) -> list[Any]:
        requests = [
            AgentRequest(
                env_id=env_id,
                episode=batch[e.index][0],
                seed=e.seed,
                turn=e.turn,
                observation=e.observation,
                info=e.info,
                last_reward=e.last_reward,
                messages=e.chat.messages() if e.chat else [],
                instructions=e.reset_info.get("instructions", ""),
                action_format=envs[e.index].unwrapped.action_format,
                env=envs[e.index].unwrapped,
            )
            for e in live
        ]
        actions = list(agent.act(requests))
        if len(actions) != len(requests):
            raise AgentError(f"act() returned {len(actions)} actions for {len(requests)}")
        return actions

    played = play_lockstep(
        LocalEnvs(envs[: len(batch)], catch=True), [seed for _, seed in batch], act,
        catch_errors=True,
    )  # fmt: skip
    share = (time.perf_counter() - start) / max(1, len(played))
    return [_episode_record(e, share) for e in played]


def _read_partial(path: Path, config: Mapping[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Episodes already finished by an interrupted run of the same ``config``."""
    done: dict[str, dict[int, dict[str, Any]]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return done
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("eval_config") != config:
        raise EvalError(
            f"{path} holds a different eval run; run the same command to resume it, or pass "
            "--overwrite (or another --out) to start afresh"
        )
    for line in lines[1:]:
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by an interruption: that episode runs again
        done.setdefault(item["env_id"], {})[int(item["index"])] = item["episode"]
    return done


def _say_reused(count: int, path: Path) -> None:
    """Reusing earlier results is never silent: a rerun after fixing an agent must not look new."""
    print(
        f"agentgym eval: reusing {count} finished episode(s) from {path} (the same command ran "
        "before with the same settings); to run them again, pass --overwrite or delete that file",
        file=sys.stderr,
    )


def evaluate(
    env_ids: Sequence[str],
    agent: str | Agent,
    *,
    episodes: int,
    seed: int = 0,
    out: str | os.PathLike[str],
    env_kwargs: Mapping[str, Any] | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    agent_seed: int = 0,
    agent_name: str | None = None,
    agent_description: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
    chat_out: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` episodes per environment and write the result bundle to ``out``.

    Args:
        env_ids: registered ids (full, ``agentgym/<Name>-v<N>``).
        agent: an agent spec (see :mod:`agentgym.agents`) or an :class:`Agent`.
        episodes: episodes per environment, >= 1; seeds ``seed .. seed + episodes - 1``.
        seed: the first reset seed.
        out: the bundle path (JSON); ``<out>.partial.jsonl`` holds progress while it runs.
        env_kwargs: constructor overrides for every environment (JSON-serialisable).
        agent_kwargs: agent settings (see :func:`agentgym.agents.make_agent`).
        agent_seed: the agent's own seed.
        agent_name, agent_description: override the agent's own.
        overwrite: discard an existing bundle or partial file at ``out``.
        progress: show a tqdm progress bar on stderr (if tqdm is installed).
        chat_out: also write the trajectories in chat form (JSONL) here.

    Returns:
        The bundle (as written).

    Raises:
        EvalError: bad arguments, or ``out`` holds another run (without ``overwrite``).
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise EvalError(f"--episodes must be an int >= 1, got {episodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise EvalError(f"--seed must be an int >= 0, got {seed!r}")
    if seed + episodes - 1 > MAX_SEED:
        raise EvalError(
            f"--seed {seed} with --episodes {episodes} goes past the largest seed a result bundle "
            f"stores, 2**63 - 1 (SQLite's integer): use a smaller --seed"
        )
    if not env_ids:
        raise EvalError("give at least one --env")
    if len(set(env_ids)) != len(env_ids):
        raise EvalError(f"an --env is given twice: {list(env_ids)}")
    registered = agentgym.registered_envs()
    for env_id in env_ids:
        if env_id not in registered:
            raise EvalError(f"unknown environment id {env_id!r} (`agentgym list` shows them all)")
    json_env_kwargs = to_json_kwargs(env_kwargs or {})
    try:
        files = file_digests(json_env_kwargs)
    except OSError as err:
        raise EvalError(f"cannot read {err.filename}: {err.strerror}") from err
    spec = agent if isinstance(agent, str) else f"python:{type(agent).__name__}"
    config = {
        "envs": list(env_ids),
        "episodes": episodes,
        "seed": seed,
        "env_kwargs": json_env_kwargs,
        "agent_spec": spec,
        "agent_kwargs": to_json_kwargs(agent_kwargs or {}),
        "agent_seed": agent_seed,
    }
    out = Path(out)
    partial = out.with_name(out.name + ".partial.jsonl")
    if overwrite:
        out.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
    if out.exists() and not partial.exists():
        try:
            existing = json.loads(out.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            existing = None
        if isinstance(existing, dict) and existing.get("eval_config") == config:
            _say_reused(sum(len(r.get("episodes", [])) for r in existing.get("runs", [])), out)
            if chat_out is not None:
                write_chat_jsonl(existing, chat_out)
            return existing
        raise EvalError(
            f"{out} already holds a different result; pass --overwrite or choose another --out"
        )
    done = _read_partial(partial, config) if partial.exists() else {}
    if done:
        _say_reused(sum(len(v) for v in done.values()), partial)

    # The kwargs gate, then one build of every env, before the agent loads (a model load can
    # take a while). A bundle records the task parameters (env_kwargs; what a replay uses) apart
    # from the execution settings (env_settings; documentation: a verifier chooses its own).
    split = {}
    for env_id in env_ids:
        try:
            split[env_id] = split_env_kwargs(env_id, json_env_kwargs)
            make_env(env_id, json_env_kwargs).close()
        except (TypeError, ValueError) as err:
            raise EvalError(f"bad --kw for {env_id}: {err}") from err

    the_agent = (
        make_agent(agent, seed=agent_seed, kwargs=dict(agent_kwargs or {}))
        if isinstance(agent, str)
        else agent
    )
    bar = None
    total = episodes * len(env_ids)
    finished = sum(len(v) for v in done.values())
    if progress:
        try:
            from tqdm import tqdm

            # Into a log file or pipe, one frame a minute (not one per episode, which made a
            # 200-episode eval one 30 KB line); on a terminal, tqdm's own refresh.
            tty = sys.stderr.isatty()
            bar = tqdm(
                total=total,
                initial=finished,
                unit="ep",
                file=sys.stderr,
                leave=False,
                mininterval=0.1 if tty else 60.0,
                maxinterval=10.0 if tty else 600.0,
            )
        except ModuleNotFoundError:
            bar = None
    runs = []
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        new_file = not partial.exists()
        with open(partial, "a", encoding="utf-8") as log:
            if new_file:
                log.write(json.dumps({"eval_config": config}) + "\n")
                log.flush()
            for env_id in env_ids:
                records = done.setdefault(env_id, {})
                todo = [(i, seed + i) for i in range(episodes) if i not in records]
                size = max(1, int(the_agent.batch_size))
                envs = [make_env(env_id, json_env_kwargs) for _ in range(min(size, len(todo)))]
                if bar is not None:  # drawn with the next update, at the bar's own rate
                    bar.set_description(env_id.partition("/")[2], refresh=False)
                try:
                    for start in range(0, len(todo), size):
                        batch = todo[start : start + size]
                        for (index, _), record in zip(
                            batch, _play_batch(the_agent, env_id, envs, batch), strict=True
                        ):
                            records[index] = record
                            item = {"env_id": env_id, "index": index, "episode": record}
                            log.write(json.dumps(item) + "\n")
                        log.flush()
                        if bar is not None:
                            bar.update(len(batch))
                    constructor = _constructor_kwargs(envs[0] if envs else None, env_id)
                finally:
                    for env in envs:
                        env.close()
                ordered = [records[i] for i in range(episodes)]
                runs.append(
                    {
                        "env_id": env_id,
                        "env_version": env_version(env_id),
                        "env_kwargs": split[env_id][0],
                        **({"env_settings": split[env_id][1]} if split[env_id][1] else {}),
                        "env_files": files,
                        "env_constructor_kwargs": constructor,
                        "seed": seed,
                        "seeds": [seed + i for i in range(episodes)],
                        "episodes": ordered,
                        "summary": summarize(ordered, worst_return(env_id, split[env_id][0])),
                        "wall_s": sum(e["wall_s"] for e in ordered),
                    }
                )
    finally:
        if bar is not None:
            bar.close()
        the_agent.close()
    bundle = {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_VERSION,
        "agentgym_version": agentgym.__version__,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "agent": {
            "spec": spec,
            "name": agent_name or the_agent.name,
            "description": agent_description
            if agent_description is not None
            else the_agent.description,
            "seed": agent_seed,
            "settings": to_json_kwargs(the_agent.settings),
        },
        "eval_config": config,
        "runs": runs,
    }
    write_text_atomic(out, dumps_bundle(bundle))
    partial.unlink(missing_ok=True)
    if chat_out is not None:
        write_chat_jsonl(bundle, chat_out)
    return bundle


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


def _constructor_kwargs(env: gym.Env | None, env_id: str) -> dict[str, Any]:
    """Everything the env class received: the spec's defaults, overrides and fixed arguments."""
    if env is not None and env.spec is not None:
        kwargs = dict(env.spec.kwargs)
    else:
        kwargs = dict(gym.spec(env_id).kwargs)
    kwargs.update(agentgym.registered_envs()[env_id].task_kwargs)
    return to_json_kwargs(kwargs)


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
