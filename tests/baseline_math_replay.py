"""Replay every math-env episode of the committed leaderboard baselines and compare the steps.

The recorded rewards, success flags and validity of every math answer in
``leaderboards/baselines/*.json`` must replay the same after a change to the answer checker:

    python -m tests.baseline_math_replay          # prints a summary; exit 1 on any difference
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym  # noqa: F401 - registers the environments
from agentgym.eval import replay_episode

BASELINES = Path(__file__).resolve().parent.parent / "leaderboards" / "baselines"


def math_runs() -> list[tuple[str, dict[str, Any]]]:
    """``(bundle name, run)`` of every math-env run in the committed baseline bundles."""
    runs = []
    for path in sorted(BASELINES.glob("*.json")):
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            if run["env_id"].startswith("agentgym/Math"):
                runs.append((path.name, run))
    return runs


def differences() -> tuple[int, list[str]]:
    """The number of steps replayed and a line for every step that replays differently."""
    steps_seen, diffs = 0, []
    for name, run in math_runs():
        env = gym.make(run["env_id"], **run["env_kwargs"])
        try:
            for episode in run["episodes"]:
                actions = [s["action"] for s in episode["steps"]]
                _, steps = replay_episode(env, episode["seed"], actions)
                steps_seen += len(episode["steps"])
                if steps != episode["steps"]:
                    for i, (old, new) in enumerate(zip(episode["steps"], steps, strict=False)):
                        if old != new:
                            diffs.append(
                                f"{name} {run['env_id']} seed {episode['seed']} "
                                f"step {i}: {old} -> {new}"
                            )
                    if len(steps) != len(episode["steps"]):
                        diffs.append(
                            f"{name} {run['env_id']} seed {episode['seed']}: "
                            f"{len(episode['steps'])} steps -> {len(steps)}"
                        )
        finally:
            env.close()
    return steps_seen, diffs


def main() -> int:
    steps, diffs = differences()
    for line in diffs:
        print(line)
    print(f"{steps} math steps replayed, {len(diffs)} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
