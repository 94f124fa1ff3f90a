"""PNG plots of a training run, drawn from its ``metrics.jsonl`` with matplotlib."""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["write_plots", "read_metrics"]

# file name -> (title, [(metric, label), ...], y label)
PLOTS: dict[str, tuple[str, list[tuple[str, str]], str]] = {
    "success.png": (
        "Success rate",
        [("rollout/success_rate", "train rollouts"), ("val/success_rate", "validation")],
        "success rate",
    ),
    "reward.png": (
        "Episode reward",
        [("rollout/reward_mean", "train rollouts"), ("val/reward_mean", "validation")],
        "reward",
    ),
    "entropy_vs_mi.png": (
        "Token entropy vs mutual information",
        [
            ("actor/entropy", "policy token entropy (nats)"),
            ("collapse/mi_estimate", "MI estimate (nats)"),
            ("collapse/mi_upper_bound", "MI upper bound (nats)"),
        ],
        "nats",
    ),
    "retrieval.png": (
        "Retrieval accuracy vs chance",
        [
            ("collapse/retrieval_accuracy", "retrieval accuracy"),
            ("collapse/retrieval_chance", "chance"),
        ],
        "accuracy",
    ),
    "kept_fraction.png": (
        "SNR-Aware Filtering: kept fraction of groups",
        [("filter/kept_fraction", "kept fraction")],
        "fraction",
    ),
}


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """The JSON lines of ``metrics.jsonl`` as dicts."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write_plots(metrics_path: str | Path, out_dir: str | Path) -> list[Path]:
    """Draw :data:`PLOTS` into ``out_dir``; a metric never logged is left out of its plot.

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
    for name, (title, series, ylabel) in PLOTS.items():
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, label in series:
            points = [
                (r["step"], r[key])
                for r in rows
                if key in r and r[key] is not None and math.isfinite(r[key])
            ]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", markersize=3, label=label)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
