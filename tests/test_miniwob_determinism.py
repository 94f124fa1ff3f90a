"""MiniWoB++ episodes are the same in two fresh processes: all 125 tasks reset, take 5 random
actions and reset again without raising, load nothing but local files, and only the tasks of the committed table
(:data:`agentgym.envs.miniwob_tasks.NONDETERMINISTIC_TASKS`, and where boxes are shown
:data:`~agentgym.envs.miniwob_tasks.BOX_NONDETERMINISTIC_TASKS`) differ.

The two processes run side by side (one per core), so each sees a busy neighbour.
"""

from __future__ import annotations

import json
import subprocess
import sys

from agentgym.envs.miniwob_tasks import (
    ALL_TASKS,
    BOX_NONDETERMINISTIC_TASKS,
    NONDETERMINISTIC_TASKS,
)
from tests.helpers import ROOT


def test_two_fresh_processes_play_every_task_alike() -> None:
    command = [sys.executable, "-m", "tests.miniwob_determinism"]
    runs = [
        subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=1800)
        assert run.returncode == 0, stderr[-4000:]
        outputs.append(json.loads(stdout))
    first, second = outputs
    assert first.pop("_not_local", {}) == second.pop("_not_local", {}) == {}  # nothing fetched
    # the tasks that differ only by their boxes replay exactly without them
    assert first.pop("_no_boxes") == second.pop("_no_boxes")
    assert sorted(first) == sorted(second) == sorted(ALL_TASKS)  # every task played in both
    differ = {task for task in ALL_TASKS if first[task] != second[task]}
    # The table's tasks may agree by chance (a blinking cursor caught in the same phase); any
    # other task that differs is a regression.
    allowed = set(NONDETERMINISTIC_TASKS) | set(BOX_NONDETERMINISTIC_TASKS)
    assert differ <= allowed, sorted(differ - allowed)
    assert len(ALL_TASKS) - len(differ) >= 115
    # The records can tell episodes apart: the reset with ``seed + 1`` (each record's last entry)
    # shows another page than the reset with ``seed`` on 119 of the 125 tasks (measured; the six
    # alike show the same first page for every seed, e.g. guess-number). Which table tasks
    # differ in a given pair is wall-clock timing, so it is not asserted.
    seeded = [task for task in ALL_TASKS if first[task][0][0] != first[task][-1]]
    assert len(seeded) >= 115, sorted(set(ALL_TASKS) - set(seeded))
