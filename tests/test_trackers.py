"""train.report_to: trackio and wandb (offline) get the metrics.jsonl names and values."""

from __future__ import annotations

import glob
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_trackio_and_wandb_offline_get_the_same_names(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from baselines.tracking import make_trackers
        trackers = make_trackers(["trackio", "wandb"], Path({str(tmp_path / "run")!r}), {{"a": 1}})
        for step in range(2):
            line = {{"step": step, "rollout/reward_mean": 0.5 + step, "critic/vf_loss": None}}
            for tracker in trackers:
                tracker.log(line, step)
        for tracker in trackers:
            tracker.close()
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TRACKIO_DIR": str(tmp_path / "trackio"),
        "WANDB_SILENT": "true",
        "WANDB_MODE": "offline",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "trackio" / "agentgym.db")
    rows = db.execute("select step, metrics from metrics order by step").fetchall()
    assert [(s, json.loads(m)) for s, m in rows] == [
        (0, {"rollout/reward_mean": 0.5}),
        (1, {"rollout/reward_mean": 1.5}),
    ]  # null values are gaps, not zeros
    runs = glob.glob(str(tmp_path / "run" / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(runs) == 1 and Path(runs[0]).stat().st_size > 0
