"""Crash-safe trainer files: a SIGKILL at each file operation of save and resume (issue 14).

The trainer runs in a subprocess with ``AGENTGYM_CRASH_AT=<point>@<n>``, which makes it SIGKILL
itself at the n-th pass of that point (:func:`baselines.checkpoint.crash_point`). ``--resume``
must then finish the run with every step logged exactly once and the same numbers as a run that
was never killed (steps are seeded per step, so a step run again gives the same line).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from baselines.checkpoint import CRASH_POINTS, recover, save_checkpoint
from baselines.config import load_config
from baselines.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent
STEPS = 3
COMMON = [
    "model.path=tiny",
    "rollout.env_id=Bandit-v0",  # the short id is accepted
    "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0}",
    "rollout.think_prefix=false",
    "rollout.max_new_tokens=1",
    "rollout.num_groups=2",
    "rollout.group_size=2",
    "rollout.val_episodes=0",
    "algorithm.lr=0.01",
    "diagnostics.every=0",
    "filter.strategy=none",
    "train.threads=1",
    "train.samples_per_step=0",
]
COMPARED = ("rollout/reward_mean", "rollout/success_rate", "actor/pg_loss")


def _overrides(out: Path, steps: int = STEPS) -> list[str]:
    return [*COMMON, f"train.out_dir={out}", f"train.steps={steps}"]


def _train_killed(out: Path, point: str, *extra: str, steps: int = STEPS) -> None:
    env = {**os.environ, "AGENTGYM_CRASH_AT": point, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "baselines.train", "--no-progress", *extra, *_overrides(out, steps)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("straight") / "run"
    Trainer(load_config(None, _overrides(out)), progress=False).run()
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _finish_and_check(out: Path, straight: list[dict]) -> None:
    trainer = Trainer(load_config(None, _overrides(out)), resume=True, progress=False)
    trainer.run()
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(STEPS))
    for got, want in zip(lines, straight, strict=True):
        for key in COMPARED:
            assert got[key] == pytest.approx(want[key], abs=1e-9), (got["step"], key)
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == STEPS - 1
    leftovers = sorted(p.name for p in out.iterdir() if p.name.startswith("."))
    assert leftovers == [], leftovers


SAVE_POINTS = [p for p in CRASH_POINTS if p != "resume_metrics_tmp"]


def test_every_crash_point_is_tested() -> None:
    assert set(SAVE_POINTS) | {"resume_metrics_tmp"} == set(CRASH_POINTS)


@pytest.mark.parametrize("point", SAVE_POINTS)
def test_sigkill_during_training_then_resume(tmp_path: Path, point: str, straight) -> None:
    # "@2": the second pass, so that a checkpoint of step 0 is already there (the swap case).
    out = tmp_path / "run"
    _train_killed(out, f"{point}@2")
    _finish_and_check(out, straight)


def test_sigkill_before_the_first_checkpoint_resumes_from_step_0(tmp_path: Path, straight) -> None:
    out = tmp_path / "run"
    _train_killed(out, "save_staging@1")
    assert not (out / "checkpoint").exists()
    _finish_and_check(out, straight)


def test_sigkill_during_the_metrics_rewrite_of_resume(tmp_path: Path, straight) -> None:
    out = tmp_path / "run"
    _train_killed(out, "metrics_appended@3")  # step 2 logged, its checkpoint not written
    metrics = out / "metrics.jsonl"
    before = metrics.read_text()
    assert len(before.splitlines()) == 3
    _train_killed(out, "resume_metrics_tmp@1", "--resume")
    assert metrics.read_text() == before  # the old file stays whole until the rename
    _finish_and_check(out, straight)


def test_recover_puts_the_newest_complete_copy_in_place(tmp_path: Path) -> None:
    def writer(folder: Path) -> dict:
        (folder / "weights.bin").write_bytes(b"w")
        return {}

    save_checkpoint(tmp_path, writer, 0, keep=3)
    save_checkpoint(tmp_path, writer, 1, keep=3)
    save_checkpoint(tmp_path, writer, 2, keep=3)
    save_checkpoint(tmp_path, writer, 3, keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint",
        "checkpoint-000001",
        "checkpoint-000002",
    ]
    # The state after a kill between the two renames of a save of step 4.
    os.replace(tmp_path / "checkpoint", tmp_path / ".checkpoint.old")
    (tmp_path / ".checkpoint.tmp").mkdir()
    (tmp_path / ".checkpoint.tmp" / "state.json").write_text('{"step": 4}')
    assert recover(tmp_path, keep=3) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint",
        "checkpoint-000002",
        "checkpoint-000003",
    ]
    # An incomplete staging folder (no state.json) is never used.
    (tmp_path / ".checkpoint.tmp").mkdir()
    (tmp_path / ".checkpoint.tmp" / "weights.bin").write_bytes(b"half")
    assert recover(tmp_path, keep=3) == 4
    assert not (tmp_path / ".checkpoint.tmp").exists()


def test_final_save_without_optimizer_state(tmp_path: Path) -> None:
    out = tmp_path / "run"
    keep = ["train.final_optimizer_state=false", "train.keep_checkpoints=2"]
    config = load_config(None, [*_overrides(out, 2), *keep])
    Trainer(config, progress=False).run()
    # Saved after steps 0 and 1; two kept: the newest as checkpoint/, the other by its step.
    assert sorted(p.name for p in out.glob("checkpoint*")) == ["checkpoint", "checkpoint-000000"]
    assert not (out / "checkpoint" / "optimizer.pt").exists()
    assert (out / "checkpoint-000000" / "optimizer.pt").exists()  # only the final save skips it
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["optimizer_state"] is False
    extended = load_config(None, [*_overrides(out, 3), *keep])
    trainer = Trainer(extended, resume=True, progress=False)
    assert trainer.start_step == 2
    trainer.run()
    assert sorted(p.name for p in out.glob("checkpoint*")) == ["checkpoint", "checkpoint-000001"]
