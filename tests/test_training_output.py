"""Training that says what is happening (issue 16): no-update warnings and the early stop, live
phases, sample episodes, every metric on every line, TensorBoard event files, plots."""

from __future__ import annotations

import fnmatch
import json
import math
import re
from pathlib import Path

import pytest

from baselines.config import load_config
from baselines.progress import RewardVarianceStop, StallMonitor, no_update_cause
from baselines.tracking import METRIC_NAMES
from baselines.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent
TINY = ["model.path=tiny", "train.threads=1", "rollout.think_prefix=false"]


def test_no_update_cause_names_the_reason() -> None:
    updated = {
        "actor/skipped": 0.0,
        "rollout/valid_action_rate": 0.5,
        "filter/num_groups": 4.0,
        "filter/num_zero_spread": 1.0,
    }
    assert no_update_cause(updated) is None
    # Stepped on the entropy bonus alone (every reward equal): the task taught nothing.
    bonus_only = {"actor/skipped": 0.0, "rollout/valid_action_rate": 0.0}
    assert no_update_cause(bonus_only).endswith(
        "(a step was still taken, on the entropy/KL terms alone)"
    )
    # PPO: its critic's baseline is not the group's, so spread across the batch is a signal; a
    # batch of one-episode groups (each without spread) with differing rewards is not stalled.
    singles = {
        "actor/skipped": 0.0,
        "rollout/valid_action_rate": 1.0,
        "filter/num_groups": 8.0,
        "filter/num_zero_spread": 8.0,
        "rollout/reward_std": 0.43,
    }
    assert no_update_cause(singles, critic=True) is None
    assert no_update_cause(singles).startswith("no reward spread: in all 8 groups")  # GRPO
    flat_batch = {**singles, "rollout/reward_std": 0.0}
    assert no_update_cause(flat_batch, critic=True) == (
        "no reward spread: every episode of the batch got the same reward (rollout/reward_std=0), "
        "so the task gave no signal (a step was still taken, on the critic's errors and the "
        "regularisers alone)"
    )
    counting = StallMonitor(limit=2, count=1, signal_limit=3, silent=1)
    warning = counting.observe(7, bonus_only)
    assert warning.startswith("warning: step 7 had no reward signal (2 of ")
    assert "train.max_steps_without_signal=3 in a row" in warning
    assert counting.count == 0  # an update all the same: RAGEN stops on empty steps only
    assert counting.silent == 2 and not counting.should_stop
    counting.observe(8, bonus_only)  # the third step in a row without a reward signal
    assert counting.should_stop and "3 steps in a row without a reward signal" in (
        counting.stop_message()
    )
    assert not StallMonitor(limit=2, signal_limit=0, silent=99).should_stop  # 0: never
    no_valid = {"actor/skipped": 1.0, "rollout/valid_action_rate": 0.0, "filter/num_groups": 4.0}
    assert no_update_cause(no_valid).startswith("no valid actions")
    flat = {
        "actor/skipped": 1.0,
        "rollout/valid_action_rate": 0.5,
        "filter/num_groups": 4.0,
        "filter/num_zero_spread": 4.0,
    }
    assert no_update_cause(flat).startswith("no reward spread: in all 4 groups")
    monitor = StallMonitor(limit=2)
    assert "1 of train.max_steps_without_update=2" in monitor.observe(0, flat)
    assert not monitor.should_stop
    assert monitor.observe(1, updated) is None  # an update from the reward resets both counts
    assert monitor.count == 0 and monitor.silent == 0
    monitor.observe(2, flat)
    assert "warm start" in monitor.observe(3, flat)
    assert monitor.should_stop
    assert not StallMonitor(limit=0, count=100).should_stop  # 0: never stop


#: Bandit with one-token replies: no reply can hold "<answer>...</answer>", every turn is invalid
#: and every group's rewards are equal.
INVALID_BANDIT = (
    *TINY,
    "rollout.env_id=Bandit-v0",
    "rollout.max_new_tokens=1",
    "rollout.num_groups=2",
    "rollout.group_size=2",
    "rollout.val_episodes=0",
)


def test_reward_variance_stop_follows_ragen_by_hand() -> None:
    """RAGEN's rule (agent_trainer.py:1211-1235): base = mean std of the first 10 steps that kept
    a group; stop once the last 10 such steps are all below base / 10."""
    kept = {"filter/num_kept": 3.0}
    stop = RewardVarianceStop()
    stop.observe({"filter/num_kept": 0.0, "rollout/in_group_reward_std": 9.0})  # empty: ignored
    for std in [0.2, 0.4] * 5:  # base (0.2 + 0.4) / 2 = 0.3, threshold 0.03
        stop.observe({**kept, "rollout/in_group_reward_std": std})
    assert stop.base == pytest.approx(0.3) and stop.recent == []
    for std in [0.04] + [0.01] * 8:  # 0.04 is not below 0.03
        stop.observe({**kept, "rollout/in_group_reward_std": std})
    stop.observe({**kept, "rollout/in_group_reward_std": 0.029})
    assert len(stop.recent) == 10 and not stop.should_stop  # the window still holds 0.04
    resumed = RewardVarianceStop(json.loads(json.dumps(stop.state())))  # through state.json
    resumed.observe({**kept, "rollout/in_group_reward_std": 0.0})  # 0.04 leaves the window
    assert resumed.should_stop and "0.3000" in resumed.stop_message()
    zero = RewardVarianceStop({"first": [0.0] * 10, "recent": [0.0] * 10})
    assert not zero.should_stop  # a base of 0: nothing is below 0


def test_run_stops_on_reward_variance_as_ragen(tmp_path: Path, capsys) -> None:
    """A run resumed with 10 base steps of std 1 and 9 of std 0 behind it: one more kept step
    of std 0 (one-token replies are all invalid, so every group's rewards are equal) stops it
    after step 0, with the checkpoint's state holding the full window."""
    config = load_config(
        None,
        [
            *INVALID_BANDIT,
            "filter.strategy=none",  # keep the zero-spread groups
            "diagnostics.every=0",
            "train.steps=4",
            "train.max_steps_without_update=0",
            "train.max_steps_without_signal=0",
            "train.reward_variance_stop=true",
            f"train.out_dir={tmp_path / 'run'}",
        ],
    )
    trainer = Trainer(config, progress=False)
    trainer.variance_stop_state = {"first": [1.0] * 10, "recent": [0.0] * 9}
    history = trainer.run()
    assert [m["step"] for m in history] == [0.0]
    assert history[0]["rollout/in_group_reward_std"] == 0.0 and history[0]["filter/num_kept"]
    assert trainer.stopped_early
    assert "stopping: the in-group reward std of the last 10 steps" in capsys.readouterr().err
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["reward_variance_stop"] == {"first": [1.0] * 10, "recent": [0.0] * 10}


def test_run_without_valid_actions_warns_and_stops(tmp_path: Path, capsys) -> None:
    # One token can never hold "<answer>...</answer>": every turn is invalid.
    config = load_config(
        None,
        [
            *INVALID_BANDIT,
            "diagnostics.every=0",
            "train.steps=6",
            "train.max_steps_without_update=2",
            "algorithm.entropy_coef=0",  # no entropy step either: every step is empty
            f"train.out_dir={tmp_path / 'run'}",
        ],
    )
    trainer = Trainer(config, progress=False)
    history = trainer.run()
    err = capsys.readouterr().err
    assert [m["step"] for m in history] == [0.0, 1.0]
    assert trainer.stopped_early
    assert "warning: step 0 made no policy update (1 of train.max_steps_without_update=2" in err
    assert "no valid actions" in err and "warm start" in err and "larger model" in err
    assert "stopping: 2 steps in a row without a policy update" in err
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["step"] == 1 and state["steps_without_update"] == 2


def test_shipped_multi_turn_settings_without_valid_actions_stop(tmp_path: Path, capsys) -> None:
    """The issue's case: sokoban.yaml (PPO, entropy bonus on) with a policy that never acts
    validly. PPO steps on its critic's errors and the bonus, so no step is empty (RAGEN's count
    never grows); the run stops on the steps without a reward signal."""
    shipped = REPO / "baselines" / "configs" / "sokoban.yaml"
    config_args = [
        *TINY,
        "rollout.max_new_tokens=1",  # one token never holds an action: every turn invalid
        "rollout.env_kwargs={max_turns: 2}",
        "rollout.num_groups=2",
        "rollout.group_size=2",
        "rollout.val_episodes=0",
        "algorithm.ppo_mini_batch_size=4",
        "diagnostics.every=0",
        "train.max_steps_without_signal=3",
        f"train.out_dir={tmp_path / 'run'}",
    ]
    config = load_config(shipped, [*config_args, "train.steps=8"])
    assert config.algorithm.name == "ppo" and config.algorithm.entropy_coef > 0
    trainer = Trainer(config, progress=False)
    history = trainer.run()
    err = capsys.readouterr().err
    assert [m["step"] for m in history] == [0.0, 1.0, 2.0]
    assert all(m["rollout/valid_action_rate"] == 0 for m in history)
    assert not any(m.get("actor/skipped") for m in history)  # each step updated all the same
    assert trainer.stopped_early and trainer.steps_without_update == 0
    assert "warning: step 0 had no reward signal (1 of train.max_steps_without_signal=3" in err
    assert "stopping: 3 steps in a row without a reward signal" in err
    assert "the critic's errors and the regularisers alone" in err  # PPO's wording
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["step"] == 2 and state["steps_without_signal"] == 3
    # Resumed at the limit: it stops before rolling out another step.
    again = load_config(shipped, [*config_args, "train.steps=8"])
    resumed = Trainer(again, resume=True, progress=False)
    assert resumed.run() == [] and resumed.stopped_early
    assert "stopping: 3 steps in a row without a reward signal" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tb_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trainer]:
    out = tmp_path_factory.mktemp("tb") / "run"
    config = load_config(
        None,
        [
            *TINY,
            "rollout.env_id=Sokoban-v0",  # multi-turn, the short id
            "rollout.env_kwargs={action_format: raw, max_turns: 2}",
            "rollout.max_new_tokens=3",
            "rollout.num_groups=2",
            "rollout.group_size=2",
            "rollout.val_episodes=2",
            "rollout.val_every=1",
            "filter.strategy=none",
            "diagnostics.max_pairs=4",
            "diagnostics.permutations=4",
            "train.steps=2",
            "train.report_to=[tensorboard]",
            "train.samples_per_step=2",
            f"train.out_dir={out}",
        ],
    )
    trainer = Trainer(config, progress=False)
    trainer.run()
    return out, trainer


def test_every_metric_on_every_line_and_never_nan(tb_run) -> None:
    out, _ = tb_run
    text = (out / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert set(METRIC_NAMES) <= set(line), set(METRIC_NAMES) - set(line)
        assert set(line) <= set(METRIC_NAMES), set(line) - set(METRIC_NAMES)  # all documented
    # Defined on these steps: validation before training (step 0 only) and after each step.
    assert lines[0]["val_initial/success_rate"] is not None
    assert lines[1]["val_initial/success_rate"] is None
    assert lines[1]["val/success_rate"] is not None
    assert lines[0]["critic/vf_loss"] is None  # GRPO has no critic: null, not missing


def test_readme_documents_every_metric() -> None:
    readme = (REPO / "docs" / "metrics.md").read_text()
    names = set(re.findall(r"`([a-z_]+/[a-z_@0-9*]+)`", readme))
    patterns = {n for n in names if "*" in n}
    missing = [
        m
        for m in METRIC_NAMES
        if m != "step" and m not in names and not any(fnmatch.fnmatch(m, p) for p in patterns)
    ]
    assert missing == []


def test_tensorboard_events_hold_the_same_scalars(tb_run) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, _ = tb_run
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for line in lines:
        for key, value in line.items():
            if key == "step" or value is None:
                continue
            assert key in tags, key
            logged = {e.step: e.value for e in events.Scalars(key)}
            assert logged[line["step"]] == pytest.approx(value, rel=1e-6, abs=1e-6), key
    # Undefined values are gaps, not zeros.
    assert "critic/vf_loss" not in tags
    assert [e.step for e in events.Scalars("val_initial/success_rate")] == [0]


def test_phases_and_samples(tb_run) -> None:
    out, trainer = tb_run
    phases = trainer.phases.history
    assert "validation before training" in phases
    assert "generation turn 1/2 (4 episodes)" in phases
    # Validation counts its own turns (it read "generation turn 3/2" after a 2-turn rollout).
    validation = [p for p in phases if p.startswith("validation")]
    assert validation and all(
        re.fullmatch(r"validation[a-z ]*(: (generation|env step after) turn [12]/2 .*)?", p)
        for p in validation
    ), validation
    assert any(p.startswith("validation before training: generation turn 1/2") for p in phases)
    rates = [p for p in phases if p.startswith("env step after turn 1/2")]
    assert rates and re.search(r"\(\d+ tokens at \d+ tokens/s\)", rates[0])
    assert "scoring (MI diagnostics)" in phases and "update (forward/backward)" in phases
    assert phases.index("scoring (MI diagnostics)") < phases.index("update (forward/backward)")
    sample = (out / "samples" / "step_000000.txt").read_text()
    assert sample.count("=== step 0 · episode") == 2
    assert "--- instructions (system prompt)" in sample
    assert "--- turn 1: observation" in sample and "--- turn 1: policy (" in sample
    assert re.search(r"--- turn 1: reward -?\d+\.\d{3}, valid action (True|False)", sample)


def test_plots_mark_no_update_steps_and_start_at_the_initial_validation(tb_run) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from baselines.plots import _series

    out, _ = tb_run
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # Validation: x = 0 before training, then after each update.
    assert [x for x, _ in _series(rows, "val/success_rate")] == [0, 1, 2]
    assert [x for x, _ in _series(rows, "rollout/success_rate")] == [0, 1]
    for name in (
        "success",
        "reward",
        "valid_actions",
        "entropy_vs_mi",
        "retrieval",
        "kept_fraction",
        "loss",
        "kl",
        "grad_norm",
        "response_length",
    ):
        assert (out / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(math.isfinite(v) for _, v in _series(rows, "rollout/reward_mean"))


def test_plot_axes_worked_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three hand-written metric lines (step 1 made no update): rates on fixed 0-1 axes, integer
    step ticks, one no-update marker at x = 1, MI and entropy on separate axes with the ceiling
    drawn as a band, and the step-0 validation point before the first update."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.ticker import MaxNLocator

    from baselines.plots import PLOTS, write_plots

    rows = [
        {"step": 0, "actor/skipped": 0.0, "rollout/success_rate": 0.25, "actor/entropy": 1.5,
         "actor/ppo_kl": 0.0, "val_initial/success_rate": 0.125, "val/success_rate": 0.5,
         "collapse/mi_estimate": 0.4, "collapse/mi_upper_bound": 1.0},
        {"step": 1, "actor/skipped": 1.0, "rollout/success_rate": 0.5, "actor/entropy": 1.25},
        {"step": 2, "actor/skipped": 0.0, "rollout/success_rate": 0.75, "actor/entropy": 1.0,
         "actor/ppo_kl": 0.0, "val/success_rate": 0.75, "collapse/mi_estimate": 0.2, "collapse/mi_upper_bound": 1.0},
    ]  # fmt: skip
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    figures: dict[str, object] = {}
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: figures.setdefault(str(len(figures)), fig))
    written = write_plots(path, tmp_path / "plots")
    monkeypatch.setattr(plt, "close", real_close)
    by_name = {p.name: figures[str(i)] for i, p in enumerate(written)}
    assert set(by_name) == {*PLOTS, "entropy_vs_mi.png"}
    success = by_name["success.png"].axes[0]
    assert success.get_ylim() == (-0.02, 1.02)
    assert isinstance(success.xaxis.get_major_locator(), MaxNLocator)
    assert all(float(t).is_integer() for t in success.get_xticks())
    (train,) = (line for line in success.get_lines() if line.get_linestyle() == "-")
    (val,) = (line for line in success.get_lines() if line.get_linestyle() == "--")
    assert list(train.get_xdata()) == [0, 1, 2] and list(train.get_ydata()) == [0.25, 0.5, 0.75]
    # Validation: the initial point at x = 0, then after updates 1 and 3 (x = step + 1).
    assert list(val.get_xdata()) == [0, 1, 3] and list(val.get_ydata()) == [0.125, 0.5, 0.75]
    markers = [line for line in success.get_lines() if line.get_linestyle() == ":"]
    assert [list(m.get_xdata()) for m in markers] == [[1, 1]]
    # KL(old || new) is 0 by construction with one step per batch: a note, not a flat line.
    kl = by_name["kl.png"].axes[0]
    assert not [line for line in kl.get_lines() if line.get_linestyle() == "-"]
    assert any("one optimizer step per batch" in t.get_text() for t in kl.texts)
    mi_axes, entropy_axes = by_name["entropy_vs_mi.png"].axes
    assert entropy_axes.bbox.bounds == mi_axes.bbox.bounds  # a twin: separate y axes
    assert [list(line.get_ydata()) for line in entropy_axes.get_lines()] == [[1.5, 1.25, 1.0]]
    assert any(isinstance(c, PolyCollection) for c in mi_axes.collections)  # the ceiling band
    assert mi_axes.get_ylim() != entropy_axes.get_ylim()
    for fig in figures.values():
        real_close(fig)


def test_report_to_names_its_install_line_when_missing(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(ValueError, match="train.report_to: wandb needs the package 'wandb': pip"):
        load_config(None, ["train.report_to=[wandb]"])
    with pytest.raises(ValueError, match="must be one of"):
        load_config(None, ["train.report_to=[mlflow]"])
