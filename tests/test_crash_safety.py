"""Crash-safe trainer files: a SIGKILL at each file operation of save and resume (issue 14), and
no write through a symbolic link planted in a run folder (issue 25).

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
from types import SimpleNamespace

import pytest

from baselines.checkpoint import (
    CRASH_POINTS,
    SymlinkInRunFolder,
    append_metrics_line,
    recover,
    refuse_symlinks,
    save_checkpoint,
    truncate_metrics_after,
    write_text_durable,
)
from baselines.config import load_config
from baselines.episodes import write_rollouts
from baselines.samples import write_samples
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


# ----------------------------------------------------------------------------- symbolic links


def _victim(tmp_path: Path, name: str = "victim.txt") -> Path:
    """A file outside the run folder that a planted link points at; it must stay as it is."""
    victim = tmp_path / name
    victim.write_text("the victim's own text\n")
    return victim


def test_temp_files_never_write_through_a_planted_link(tmp_path: Path) -> None:
    """A link at each temp path (config, metrics rewrite, rollouts) and at a samples file: the
    victim keeps its text, and the real file is written in the run folder instead."""
    out = tmp_path / "run"
    out.mkdir()
    victim = _victim(tmp_path)
    (out / ".config.yaml.tmp").symlink_to(victim)
    write_text_durable(out / "config.yaml", "a: 1\n")
    assert (out / "config.yaml").read_text() == "a: 1\n"
    (out / "metrics.jsonl").write_text('{"step": 0}\n{"step": 1}\n')
    (out / ".metrics.jsonl.tmp").symlink_to(victim)
    assert truncate_metrics_after(out / "metrics.jsonl", 1) == 1
    assert (out / "metrics.jsonl").read_text() == '{"step": 0}\n'
    (out / "rollouts").mkdir()
    (out / "rollouts" / "step_000001.jsonl.tmp").symlink_to(victim)
    write_rollouts(out / "rollouts" / "step_000001.jsonl", [], 1)
    assert (out / "rollouts" / "step_000001.jsonl").read_text() == ""
    (out / "samples").mkdir()
    (out / "samples" / "step_000001.txt").symlink_to(victim)
    episode = SimpleNamespace(
        total_reward=1.0,
        success=True,
        group=0,
        seed=3,
        turns=[],
        chat=SimpleNamespace(messages=lambda: []),
    )
    path = write_samples(out, 1, [episode], 1)
    assert path is not None and not path.is_symlink()
    assert path.read_text().startswith("=== step 1 · episode 0 (group 0, seed 3)")
    assert victim.read_text() == "the victim's own text\n"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_metrics_are_never_appended_through_a_link(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    (tmp_path / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(SymlinkInRunFolder, match=r"metrics\.jsonl is a symbolic link \(to '"):
        append_metrics_line(tmp_path / "metrics.jsonl", '{"step": 0}')
    assert victim.read_text() == "the victim's own text\n"


def test_refuse_symlinks_names_the_first_link(tmp_path: Path) -> None:
    out = tmp_path / "run"
    (out / "checkpoint").mkdir(parents=True)
    refuse_symlinks(out)  # real files and folders only: fine
    refuse_symlinks(tmp_path / "missing")  # no folder yet: nothing to refuse
    # wandb's own link inside the real folder wandb/ is allowed
    (out / "wandb" / "offline-run-1").mkdir(parents=True)
    (out / "wandb" / "latest-run").symlink_to("offline-run-1")
    refuse_symlinks(out)
    (out / "checkpoint" / "model.safetensors").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SymlinkInRunFolder) as caught:
        refuse_symlinks(out)
    assert str(caught.value) == (
        f"{out}/checkpoint/model.safetensors is a symbolic link (to "
        f"'{tmp_path}/elsewhere'): the run would write through it; a run folder holds only real "
        "files and folders, so that nothing is written outside it. Remove the link, or run in "
        "another out_dir"
    )
    (out / "checkpoint" / "model.safetensors").unlink()
    (out / "wandb" / "offline-run-1" / "files").symlink_to(tmp_path)  # out of wandb/: refused
    with pytest.raises(SymlinkInRunFolder, match="offline-run-1/files is a symbolic link"):
        refuse_symlinks(out)


def test_resume_into_a_folder_with_planted_links_is_refused(tmp_path: Path) -> None:
    """``python -m baselines.train --resume`` on a prepared folder: links at its temp paths
    and at the next samples file. Before, the resumed run wrote the config and the rewritten
    metrics into the victims; now it stops before writing anything, naming the first link."""
    out = tmp_path / "run"
    Trainer(load_config(None, _overrides(out, 1)), progress=False).run()
    victims = {
        out / ".config.yaml.tmp": _victim(tmp_path, "v1.txt"),
        out / ".metrics.jsonl.tmp": _victim(tmp_path, "v2.txt"),
        out / "samples" / "step_000001.txt": _victim(tmp_path, "v3.txt"),
    }
    (out / "samples").mkdir()
    for link, victim in victims.items():
        link.symlink_to(victim)
    metrics = (out / "metrics.jsonl").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "baselines.train", "--no-progress", "--resume"]
        + [*_overrides(out, 2), "train.samples_per_step=1"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        f"error: {out}/.config.yaml.tmp is a symbolic link (to '{tmp_path}/v1.txt'): the run "
        "would write through it;" in done.stderr
    ), done.stderr[-2000:]
    for victim in victims.values():
        assert victim.read_text() == "the victim's own text\n"
    assert (out / "metrics.jsonl").read_text() == metrics
