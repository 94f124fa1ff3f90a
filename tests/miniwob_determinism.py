"""Play every MiniWoB++ task the same way and print what happened, to compare two processes.

    python -m tests.miniwob_determinism [--tasks a,b] [--seed 0] > run.json

For each task of :data:`agentgym.envs.miniwob_tasks.ALL_TASKS`, one ``agentgym/MiniWoBAll-v0``
env (one browser for all of them): reset with ``seed`` and the task, 5 random actions
(:func:`agentgym.envs.miniwob.random_action`, a generator seeded with ``[seed, task index]``),
then a reset with ``seed + 1``. Everything each step returned (observation, reward, flags, the
reward's reason) is recorded; the output is one JSON object: task -> its record, plus
``"_not_local"``: task -> the URLs of resources its page loaded that are not local files (none
expected), and ``"_no_boxes"``: the tasks of
:data:`~agentgym.envs.miniwob_tasks.BOX_NONDETERMINISTIC_TASKS` played again on
``agentgym/MiniWoB-v0`` without boxes. Two fresh
processes that print the same record for a task played it deterministically;
``tests/test_miniwob_determinism.py`` compares two and checks the tasks that differ against
:data:`agentgym.envs.miniwob_tasks.NONDETERMINISTIC_TASKS`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import gymnasium
import numpy as np

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.miniwob import random_action
from agentgym.envs.miniwob_tasks import ALL_TASKS, BOX_NONDETERMINISTIC_TASKS
from agentgym.parsing import format_answer

RANDOM_ACTIONS = 5
# Every resource the page loaded that is not a local file (nothing may come from a network).
_RESOURCES_JS = """
return [location.href, ...performance.getEntriesByType("resource").map((e) => e.name)]
  .filter((u) => !u.startsWith("file:"));
"""


def play(tasks: tuple[str, ...] = ALL_TASKS, seed: int = 0) -> dict[str, Any]:
    """The record of every task in ``tasks`` (see the module docstring)."""
    env = gymnasium.make("agentgym/MiniWoBAll-v0")
    out: dict[str, Any] = {}
    try:
        for task in tasks:
            rng = np.random.default_rng([seed, ALL_TASKS.index(task)])
            obs, info = env.reset(seed=seed, options={"task": task})
            steps: list[Any] = [[obs, env.unwrapped.page_seed]]
            for _ in range(RANDOM_ACTIONS):
                action = random_action(obs, rng)
                obs, reward, terminated, truncated, step = env.step(
                    format_answer([action], "think_answer", think="t")
                )
                steps.append(
                    [action, obs, reward, terminated, truncated, step.get("reward_reason")]
                )
                if terminated or truncated:
                    break
            obs, _ = env.reset(seed=seed + 1, options={"task": task})
            steps.append(obs)
            out[task] = steps
            fetched = env.unwrapped.browser.driver.execute_script(_RESOURCES_JS)
            if fetched:
                out.setdefault("_not_local", {})[task] = fetched
    finally:
        env.close()
    # the tasks that differ only where boxes are shown, played again without them
    for task in tasks:
        if task in BOX_NONDETERMINISTIC_TASKS:
            plain = gymnasium.make("agentgym/MiniWoB-v0", task=task)
            try:
                rng = np.random.default_rng([seed, ALL_TASKS.index(task)])
                obs, _ = plain.reset(seed=seed)
                steps = [obs]
                for _ in range(RANDOM_ACTIONS):
                    obs, reward, terminated, truncated, _ = plain.step(
                        format_answer([random_action(obs, rng)], "think_answer", think="t")
                    )
                    steps.append([obs, reward, terminated, truncated])
                    if terminated or truncated:
                        break
                out.setdefault("_no_boxes", {})[task] = steps
            finally:
                plain.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="", help="comma-separated tasks (default: all 125)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tasks = tuple(t for t in args.tasks.split(",") if t) or ALL_TASKS
    json.dump(play(tasks, args.seed), sys.stdout, ensure_ascii=False, sort_keys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
