"""PNG plots of a training run, drawn from its ``metrics.jsonl`` with matplotlib.

The x axis is the number of policy updates done (integer ticks): training rollouts of step s were
sampled after s updates (x = s), validation logged on step s ran after its update (x = s + 1), and
the validation before training (``val_initial/*``, on the line of step 0) sits at x = 0, so a
curve shows whether training helped. Rates (success, valid actions, kept fraction, retrieval) use a
fixed 0-1 axis. Steps that made no update (``actor/skipped`` = 1) are marked on every plot with a
grey dotted line. MI and token entropy have separate axes; the MI ceiling H(w) (log K for balanced
prompts) is drawn as a band.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from baselines.checkpoint import read_metrics_lines

__all__ = ["write_plots", "read_metrics", "PLOTS"]


def _train_and_val(metric: str) -> list[tuple[str, str]]:
    """A rollout metric's two series: on the training rollouts and on validation."""
    return [(f"rollout/{metric}", "train rollouts"), (f"val/{metric}", "validation")]


# file name -> (title, [(metric, label), ...], y label, rate axis 0-1)
PLOTS: dict[str, tuple[str, list[tuple[str, str]], str, bool]] = {
    "success.png": ("Success rate", _train_and_val("success_rate"), "success rate", True),
    "reward.png": ("Episode reward", _train_and_val("reward_mean"), "reward", False),
    "valid_actions.png": (
        "Valid action rate",
        _train_and_val("valid_action_rate"),
        "share of valid turns",
        True,
    ),
    "retrieval.png": (
        "Retrieval accuracy vs chance",
        [
            ("collapse/retrieval_accuracy", "retrieval accuracy"),
            ("collapse/retrieval_chance", "chance"),
        ],
        "accuracy",
        True,
    ),
    "kept_fraction.png": (
        "SNR-Aware Filtering: kept fraction of groups",
        [("filter/kept_fraction", "kept fraction")],
        "fraction",
        True,
    ),
    "loss.png": (
        "Losses",
        [("actor/pg_loss", "policy loss"), ("critic/vf_loss", "value loss (PPO)")],
        "loss",
        False,
    ),
    "kl.png": (
        "KL",
        [("actor/kl_ref", "KL to the reference"), ("actor/ppo_kl", "KL(old || new), PPO epochs")],
        "nats",
        False,
    ),
    "grad_norm.png": (
        "Gradient norm (before clipping)",
        [("actor/grad_norm", "global gradient norm")],
        "norm",
        False,
    ),
    "response_length.png": (
        "Response length",
        _train_and_val("response_tokens_mean"),
        "generated tokens per turn",
        False,
    ),
}


#: Series that are exactly 0 when the run has no term to measure: drawn as a note, not a flat line.
ZERO_BY_CONSTRUCTION = {
    "actor/kl_ref": "no KL term (algorithm.kl_coef = 0)",
    "actor/ppo_kl": "KL(old || new) = 0: one optimizer step per batch\n(ratio = 1; ppo_epochs > 1 or "
    "ppo_mini_batch_size > 0 moves it)",
}


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The JSON lines of ``metrics.jsonl`` as dicts (a line cut by a crash is skipped)."""
    return read_metrics_lines(Path(path))


def _value(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _series(rows: list[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    """(updates done, value) points of ``key``; ``val/`` after the step's update, plus x=0."""
    points = []
    if key.startswith("val/") and rows:
        first = _value(rows[0], key.replace("val/", "val_initial/", 1))
        if first is not None and rows[0]["step"] == 0:
            points.append((0, first))
    shift = 1 if key.startswith("val/") else 0
    for row in rows:
        value = _value(row, key)
        if value is not None:
            points.append((int(row["step"]) + shift, value))
    return points


def _decorate(ax: Any, rows: list[dict[str, Any]], rate: bool) -> None:
    from matplotlib.ticker import MaxNLocator

    skipped = [int(r["step"]) for r in rows if r.get("actor/skipped") == 1]
    for n, step in enumerate(skipped):
        ax.axvline(
            step, color="0.6", linestyle=":", linewidth=1, label="no update" if n == 0 else None
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("policy updates done")
    if rate:
        ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)


def _entropy_vs_mi(plt: Any, rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    mi = _series(rows, "collapse/mi_estimate")
    ceiling = _series(rows, "collapse/mi_upper_bound")
    if ceiling:
        xs, ys = zip(*ceiling, strict=True)
        ax.fill_between(xs, 0, ys, color="tab:blue", alpha=0.12, label="MI range [0, H(w)]")
        ax.plot(xs, ys, color="tab:blue", linestyle="--", linewidth=1, label="MI ceiling H(w)")
    if mi:
        xs, ys = zip(*mi, strict=True)
        ax.plot(xs, ys, color="tab:blue", marker="o", markersize=3, label="MI estimate")
    ax.set_ylabel("mutual information (nats)", color="tab:blue")
    right = ax.twinx()
    entropy = _series(rows, "actor/entropy")
    if entropy:
        xs, ys = zip(*entropy, strict=True)
        right.plot(xs, ys, color="tab:red", marker="s", markersize=3, label="token entropy")
    right.set_ylabel("policy token entropy (nats)", color="tab:red")
    _decorate(ax, rows, rate=False)
    ax.set_title("Mutual information vs token entropy")
    handles = ax.get_legend_handles_labels()
    extra = right.get_legend_handles_labels()
    if handles[0] or extra[0]:
        ax.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(metrics_path: str | Path, out_dir: str | Path) -> list[Path]:
    """Draw :data:`PLOTS` and ``entropy_vs_mi.png`` into ``out_dir``.

    A metric never logged is left out of its plot (the file is still written).

    Returns:
        The PNG paths written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, series, ylabel, rate) in PLOTS.items():
        fig, ax = plt.subplots(figsize=(7.5, 3.5))
        notes = []
        for key, label in series:
            points = _series(rows, key)
            if key in ZERO_BY_CONSTRUCTION and points and all(y == 0 for _, y in points):
                notes.append(ZERO_BY_CONSTRUCTION[key])
                continue
            if points:
                xs, ys = zip(*points, strict=True)
                # Validation runs every rollout.val_every steps: its points are not a trajectory
                # sampled at every update, so they are marked, and joined by a dashed line only.
                style = "--" if key.startswith("val/") else "-"
                ax.plot(xs, ys, marker="o", markersize=4, linestyle=style, label=label)
        if notes:
            ax.text(0.02, 0.5, "\n".join(notes), transform=ax.transAxes, fontsize=8, color="0.3")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        _decorate(ax, rows, rate)
        if ax.get_legend_handles_labels()[0]:
            # Outside the axes: inside, it hid curves that sit at a rate axis's 0 or 1.
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    path = out / "entropy_vs_mi.png"
    _entropy_vs_mi(plt, rows, path)
    written.append(path)
    return written
