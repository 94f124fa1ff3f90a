"""The eval harness: play an agent on environments and write a replayable result bundle.

``agentgym eval --env Sokoban-v0 --env Bandit-v0 --agent random --episodes 32 --seed 0
--out run.json`` plays episodes with reset seeds ``seed .. seed + episodes - 1`` on each
environment and writes one JSON *result bundle*: its format (records, summary, reading, writing,
replay, digests) is :mod:`agentgym.bundle`, whose names this module re-exports as it always has.

An episode whose agent or environment raised is kept with ``error`` set and the steps played so
far; it counts as a failure in the summary, so errors cannot raise a success rate.

An action holding a lone surrogate code point (text no UTF-8 file holds) has each one replaced
with U+FFFD before the environment steps it (:func:`agentgym.bundle.valid_unicode`): the bundle
records exactly what the environment was given, and a replay of it matches.

Output is resumable: every finished episode is appended to ``<out>.partial.jsonl`` at once, and the
same command run again skips the episodes found there (a different command with the same ``--out``
is refused; ``--overwrite`` starts afresh). The bundle is written atomically at the end and the
partial file removed.

Trajectories export as JSONL in chat form (:func:`write_chat_jsonl`: one line per episode with the
:class:`~agentgym.chat.ChatEpisode` messages, rebuilt by replaying the recorded actions), usable as
SFT data.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym
from agentgym import provenance
from agentgym.agents import Agent, AgentError, AgentRequest, make_agent
from agentgym.bundle import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    MAX_SEED,
    dumps_bundle,
    env_version,
    episode_record,
    file_digests,
    make_bundle,
    make_env,
    replay_episode,
    run_record,
    step_record,
    summarize,
    valid_unicode,
    wilson_interval,
    write_bundle,
    write_chat_jsonl,
)
from agentgym.bundle import FILE_KWARGS as FILE_KWARGS  # re-exported: part of this module's API
from agentgym.lockstep import LiveEpisode, LocalEnvs, play_lockstep
from agentgym.registration import UnknownEnvIdError, resolve_env_id, split_env_kwargs

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


class EvalError(Exception):
    """A user error in an eval run (bad arguments, an ``--out`` from another run)."""


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


def _check_utf8(config: Mapping[str, Any]) -> None:
    """Refuse, before anything is played, an argument the UTF-8 bundle could not hold: text with
    a lone surrogate, as Python gives for a file name's or a command's bytes that are not UTF-8
    (``--kw dataset_file=$'data\\xff.jsonl'``). Found only when the bundle was written, it ended
    the run after its last episode, and every rerun resumed into the same error.

    Raises:
        EvalError: naming the argument.
    """
    for key, value in config.items():
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            what = {
                "envs": "--env",
                "agent_spec": "--agent",
                "env_kwargs": "--kw",
                "agent_kwargs": "--agent-kw",
            }.get(key, key)
            raise EvalError(
                f"{what} holds text that is not valid UTF-8 (e.g. a file name with bytes that "
                "are not UTF-8); a result bundle is UTF-8 JSON and cannot record it: rename the "
                "file or folder, or use a path without such bytes"
            ) from None


def _episode_record(episode: LiveEpisode, wall_s: float) -> dict[str, Any]:
    """The bundle record of one episode :func:`agentgym.lockstep.play_lockstep` played."""
    return episode_record(
        episode.seed,
        [step_record(step) for step in episode.steps],
        terminated=episode.terminated,
        truncated=episode.truncated,
        error=valid_unicode(episode.error) if episode.error else episode.error,
        wall_s=wall_s,
    )


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
        # Replaced before the env sees them: the bundle (UTF-8) then holds what the env was given.
        actions = [valid_unicode(a) if isinstance(a, str) else a for a in agent.act(requests)]
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
            # an episode an older version logged with a lone surrogate in an action was played
            # with it, and a bundle cannot hold it: that episode runs again
            json.dumps(item, ensure_ascii=False).encode("utf-8")
        except (json.JSONDecodeError, UnicodeEncodeError):
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
        env_ids: registered ids (``agentgym/<Name>-v<N>``, or ``<Name>-v<N>``: see
            :func:`agentgym.registration.resolve_env_id`).
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
    try:
        env_ids = [resolve_env_id(env_id) for env_id in env_ids]
    except UnknownEnvIdError as err:
        raise EvalError(str(err)) from None
    if len(set(env_ids)) != len(env_ids):
        raise EvalError(f"an --env is given twice: {list(env_ids)}")
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
    _check_utf8(config)
    out = Path(out)
    if out.is_dir():
        raise EvalError(f"--out {out} is a folder; give the path of the bundle file to write")
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

    code = provenance.describe()  # the code that plays (the bundle records it)
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
                    run_record(
                        env_id,
                        env_kwargs=split[env_id][0],
                        env_settings=split[env_id][1],
                        env_files=files,
                        constructor_kwargs=constructor,
                        seed=seed,
                        episodes=ordered,
                    )
                )
    finally:
        if bar is not None:
            bar.close()
        the_agent.close()
    bundle = make_bundle(
        {
            "spec": spec,
            "name": valid_unicode(agent_name or the_agent.name),
            "description": valid_unicode(
                agent_description if agent_description is not None else the_agent.description
            ),
            "seed": agent_seed,
            "settings": to_json_kwargs(the_agent.settings),
        },
        config,
        runs,
        provenance=code,
    )
    write_bundle(out, bundle)
    partial.unlink(missing_ok=True)
    if chat_out is not None:
        write_chat_jsonl(bundle, chat_out)
    return bundle


def _constructor_kwargs(env: gym.Env | None, env_id: str) -> dict[str, Any]:
    """Everything the env class received: the spec's defaults, overrides and fixed arguments."""
    if env is not None and env.spec is not None:
        kwargs = dict(env.spec.kwargs)
    else:
        kwargs = dict(gym.spec(env_id).kwargs)
    kwargs.update(agentgym.registered_envs()[env_id].task_kwargs)
    return to_json_kwargs(kwargs)
