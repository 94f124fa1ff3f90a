"""Golden seeds: record, regenerate and replay the pinned oracle episodes of every registered id.

``tests/golden/<namespace>_<Name>-v<N>.json`` pins, for seeds 0-4, the first observation and the
oracle's trajectory (the exact action text of each turn, from ``env.unwrapped.oracle_answer()``,
with the observation, reward, terminated/truncated and success after it). ``tests/test_golden.py``
checks that the current code reproduces every file byte for byte, and that replaying the pinned
actions in a fresh Python process gives the same episodes.

A change that alters an episode must bump the environment's version (DESIGN.md); only then
regenerate, from the repository root::

    python -m tests.golden_update            # rewrite every file whose env can be built
    python -m tests.golden_update --check    # exit 1 if a file differs (writes nothing)
    python -m tests.golden_update --replay   # replay the pinned actions, print JSON (used by tests)

File format (``format_version`` 1), one JSON object per id::

    {
      "format_version": 1,
      "env_id": "agentgym/Bandit-v0",
      "make_kwargs": {},                 # arguments given to gymnasium.make (none: the id's defaults)
      "policy": "oracle",                # "oracle", or "first_valid_action" for envs without one
      "episodes": [
        {
          "seed": 0,
          "observation": "...",          # from reset(seed=seed)
          "turns": [
            {"action": "<think>oracle</think><answer>Stuntman</answer>",
             "observation": "...", "reward": 1.0, "terminated": true, "truncated": false,
             "success": true, "action_is_valid": true, "executed_actions": ["Stuntman"]}
          ],
          "return": 1.0,                 # sum of the turn rewards
          "success": true                # info["success"] after the last turn
        }
      ]
    }
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium

import agentgym
from agentgym.parsing import format_answer

__all__ = [
    "FORMAT_VERSION",
    "GOLDEN_DIR",
    "SEEDS",
    "golden_path",
    "policy_answer",
    "record",
    "replay",
    "dumps",
    "main",
]

FORMAT_VERSION = 1
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: An oracle that has not finished after this many turns is a bug; stop rather than loop forever.
MAX_RECORDED_TURNS = 500


def golden_path(env_id: str) -> Path:
    """``tests/golden/agentgym_Bandit-v0.json`` for ``agentgym/Bandit-v0``."""
    return GOLDEN_DIR / (env_id.replace("/", "_") + ".json")


def policy_answer(env: gymnasium.Env) -> tuple[str, str]:
    """The next turn of the recording policy: ``(policy name, answer text)``.

    The oracle where the environment has one; else the first valid action (or ``"?"``), written in
    the environment's action format.
    """
    inner = env.unwrapped
    try:
        return "oracle", inner.oracle_answer()
    except NotImplementedError:
        actions = inner.valid_actions() or ["?"]
        return "first_valid_action", format_answer(actions[:1], inner.action_format)


def record_episode(env: gymnasium.Env, seed: int) -> tuple[str, dict[str, Any]]:
    """Play one episode of the recording policy from ``reset(seed=seed)``."""
    first_observation, info = env.reset(seed=seed)
    turns: list[dict[str, Any]] = []
    policy = "oracle"
    total = 0.0
    success = bool(info["success"])
    for _ in range(MAX_RECORDED_TURNS):
        policy, action = policy_answer(env)
        observation, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        success = bool(info["success"])
        turns.append(
            {
                "action": action,
                "observation": observation,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "success": success,
                "action_is_valid": bool(info["action_is_valid"]),
                "executed_actions": list(info["executed_actions"]),
            }
        )
        if terminated or truncated:
            break
    else:
        raise RuntimeError(
            f"{env.spec.id if env.spec else env}: episode of seed {seed} never ended"
        )
    return policy, {
        "seed": seed,
        "observation": first_observation,
        "turns": turns,
        "return": total,
        "success": success,
    }


def record(env_id: str, seeds: Sequence[int] = SEEDS) -> dict[str, Any]:
    """The golden data of ``env_id`` as the current code produces it."""
    env = gymnasium.make(env_id)
    try:
        episodes = []
        policies = set()
        for seed in seeds:
            policy, episode = record_episode(env, seed)
            policies.add(policy)
            episodes.append(episode)
    finally:
        env.close()
    return {
        "format_version": FORMAT_VERSION,
        "env_id": env_id,
        "make_kwargs": {},
        "policy": "oracle" if policies == {"oracle"} else "first_valid_action",
        "episodes": episodes,
    }


def dumps(data: dict[str, Any]) -> str:
    """The exact text of a golden file (stable key order, real Unicode, trailing newline)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def replay(golden: dict[str, Any]) -> list[dict[str, Any]]:
    """Replay the pinned actions of ``golden``; return per episode what the env gave back.

    Each item: ``{"seed", "observation", "observations", "rewards", "terminated", "truncated",
    "success"}``, the last four lists holding one value per turn.
    """
    env = gymnasium.make(golden["env_id"], **golden["make_kwargs"])
    out = []
    try:
        for episode in golden["episodes"]:
            observation, _ = env.reset(seed=episode["seed"])
            got: dict[str, Any] = {
                "seed": episode["seed"],
                "observation": observation,
                "observations": [],
                "rewards": [],
                "terminated": [],
                "truncated": [],
                "success": [],
            }
            for turn in episode["turns"]:
                observation, reward, terminated, truncated, info = env.step(turn["action"])
                got["observations"].append(observation)
                got["rewards"].append(float(reward))
                got["terminated"].append(bool(terminated))
                got["truncated"].append(bool(truncated))
                got["success"].append(bool(info["success"]))
            out.append(got)
    finally:
        env.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m tests.golden_update``."""
    parser = argparse.ArgumentParser(prog="python -m tests.golden_update", description=__doc__)
    parser.add_argument("ids", nargs="*", help="env ids to process (default: every registered id)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report differences, write nothing")
    mode.add_argument(
        "--replay", action="store_true", help="replay the golden files, print JSON to stdout"
    )
    args = parser.parse_args(argv)
    ids = args.ids or list(agentgym.registered_envs())
    unknown = [i for i in ids if i not in agentgym.registered_envs()]
    if unknown:
        parser.error(f"unknown env id(s): {', '.join(unknown)}")

    if args.replay:
        results = {}
        for env_id in ids:
            path = golden_path(env_id)
            if path.exists():
                results[env_id] = replay(json.loads(path.read_text(encoding="utf-8")))
        json.dump(results, sys.stdout, ensure_ascii=False)
        return 0

    status = 0
    for env_id in ids:
        path = golden_path(env_id)
        text = dumps(record(env_id))
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            print(f"same     {env_id}", file=sys.stderr)
        elif args.check:
            print(f"DIFFERS  {env_id}: {path}", file=sys.stderr)
            status = 1
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"written  {env_id}: {path}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
