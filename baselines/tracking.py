"""Where a run's metrics go: ``metrics.jsonl`` and the trackers of ``train.report_to``.

Every line of ``metrics.jsonl`` holds every name of :data:`METRIC_NAMES` (docs/metrics.md:
its table), ``null`` where a value is not defined for that step (no update, no diagnostics, no
validation, another algorithm), never ``NaN``. Trackers get the same names:

* ``tensorboard``: event files in ``out_dir/tensorboard`` (``torch.utils.tensorboard``; needs the
  ``tensorboard`` package, in the ``train`` extra), read back by TensorBoard's own reader.
* ``trackio``: Hugging Face's local tracker (``pip install trackio``), project ``agentgym``,
  stored locally.
* ``wandb``: Weights & Biases in offline mode (``pip install wandb``), files in ``out_dir/wandb``;
  ``wandb sync`` uploads them later.

Undefined values (``null``) are not sent to trackers: a tracker's curve has a gap there.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["METRIC_NAMES", "complete_metrics", "make_trackers", "Tracker"]

_ROLLOUT = (
    "reward_mean",
    "reward_std",
    "success_rate",
    "valid_action_rate",
    "turns_mean",
    "response_tokens_mean",
)
_MI = (
    "mi_estimate",
    "mi_zscore",
    "mi_null_mean",
    "mi_null_std",
    "mi_pvalue",
    "mi_stderr",
    "conditional_entropy_est",
    "reasoning_entropy_est",
)

#: Every metric of ``metrics.jsonl`` (docs/metrics.md's table, ``docs/engines.md`` included), in order.
METRIC_NAMES: tuple[str, ...] = (
    "step",
    *(f"rollout/{k}" for k in _ROLLOUT),
    "rollout/in_group_reward_std",
    "rollout/signal_groups",
    "rollout/logprob_diff_max",
    "rollout/logprob_diff_mean",
    "filter/num_groups",
    "filter/num_kept",
    "filter/kept_fraction",
    "filter/num_zero_spread",
    "filter/num_zero_score",
    "filter/score_mean_kept",
    "filter/score_mean_dropped",
    "filter/tokens_before",
    "filter/tokens_after",
    "actor/pg_loss",
    "actor/pg_clipfrac_low",
    "actor/pg_clipfrac_high",
    "actor/pg_clipfrac",
    "actor/pg_clipfrac_lower",
    "actor/ppo_kl",
    "actor/ratio_mean",
    "actor/entropy",
    "actor/kl_ref",
    "actor/grad_norm",
    "actor/lr",
    "actor/optimizer_steps",
    "actor/nonfinite_grad_steps",
    "actor/tokens_trained",
    "actor/skipped",
    "critic/vf_loss",
    "critic/vf_clipfrac",
    "critic/vpred_mean",
    *(f"collapse/{k}" for k in _MI),
    "collapse/mi_upper_bound",
    "collapse/retrieval_accuracy",
    "collapse/retrieval_accuracy@2",
    "collapse/retrieval_accuracy@4",
    "collapse/retrieval_chance",
    "collapse/retrieval_chance@2",
    "collapse/retrieval_chance@4",
    "collapse/retrieval_chance_ragen",
    "collapse/retrieval_chance_ragen@2",
    "collapse/retrieval_chance_ragen@4",
    "collapse/retrieval_above_chance",
    *(f"collapse/{k}_per_token" for k in _MI),
    "collapse/mi_zscore_ema",
    "collapse/ragen_mi_zscore",
    "collapse/ragen_mi_zscore_seq",
    "collapse/ragen_marginal_std",
    "collapse/ragen_marginal_std_seq",
    "collapse/ragen_mi_zscore_ema",
    "collapse/ragen_mi_zscore_ema_seq",
    "collapse/ragen_marginal_std_ema",
    "collapse/ragen_marginal_std_ema_seq",
    "collapse/num_prompts",
    "collapse/num_reasonings",
    "collapse/num_pairs_total",
    "collapse/num_pairs_valid",
    "collapse/valid_thinking_rate",
    "collapse/z_special_rate",
    "collapse/entropy",
    "collapse/mi_fraction",
    "collapse/mi_fraction_avg",
    "collapse/entropy_avg",
    "collapse/entropy_reference",
    "collapse/ragen_mi_zscore_avg",
    "collapse/template_collapse",
    "collapse/never_dependent",
    "collapse/state_dependent",
    "collapse/state_collapsed",
    "collapse/state_degenerate",
    "collapse/state_format_collapsed",
    "collapse/state_never_dependent",
    "collapse/state_insufficient_sample",
    "collapse/state_undecided",
    *(f"val/{k}" for k in _ROLLOUT),
    *(f"val_initial/{k}" for k in _ROLLOUT),
    "timing/generation_s",
    "timing/env_s",
    "timing/prompt_s",
    "timing/ref_old_logprob_s",
    "timing/diagnostics_s",
    "timing/backward_s",
    "timing/weight_sync_s",
    "timing/step_s",
    "timing/generated_tokens_per_s",
)


def complete_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with every :data:`METRIC_NAMES` key (None where missing), NaN/inf as None.

    Keys outside :data:`METRIC_NAMES` are kept after them (a test keeps the list complete).
    """
    out: dict[str, Any] = {}
    for key in METRIC_NAMES:
        out[key] = metrics.get(key)
    for key, value in metrics.items():
        if key not in out:
            out[key] = value
    for key, value in out.items():
        if isinstance(value, float) and not math.isfinite(value):
            out[key] = None
    if out["step"] is not None:
        out["step"] = int(out["step"])
    if out["actor/skipped"] is None and out["actor/tokens_trained"] is not None:
        out["actor/skipped"] = 0.0  # an update ran
    return out


class Tracker:
    """One experiment tracker: ``log(metrics, step)`` and ``close()``."""

    name = ""

    def log(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _scalars(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
        if math.isfinite(float(v))
    }


class TensorBoardTracker(Tracker):
    """Scalars into ``out_dir/tensorboard`` with ``torch.utils.tensorboard.SummaryWriter``."""

    name = "tensorboard"

    def __init__(self, out_dir: Path, config: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(out_dir / "tensorboard"))
        self.writer.add_text("config", "```\n" + _yaml(config) + "\n```", 0)

    def log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in _scalars(metrics).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class TrackioTracker(Tracker):
    """Hugging Face trackio (local), project ``agentgym``, run named after ``out_dir``."""

    name = "trackio"

    def __init__(self, out_dir: Path, config: dict[str, Any]):
        import trackio

        self.trackio = trackio
        trackio.init(project="agentgym", name=out_dir.name, config=config)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.trackio.log(_scalars(metrics), step=step)

    def close(self) -> None:
        self.trackio.finish()


class WandbTracker(Tracker):
    """Weights & Biases, offline (nothing is sent; ``wandb sync out_dir/wandb/...`` later)."""

    name = "wandb"

    def __init__(self, out_dir: Path, config: dict[str, Any]):
        import wandb

        self.run = wandb.init(
            project="agentgym", name=out_dir.name, dir=str(out_dir), mode="offline", config=config
        )

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(_scalars(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


_TRACKERS = {"tensorboard": TensorBoardTracker, "trackio": TrackioTracker, "wandb": WandbTracker}
_INSTALL = {
    "tensorboard": "pip install 'agentgym[train]' (or pip install tensorboard)",
    "trackio": "pip install trackio",
    "wandb": "pip install wandb",
}


def _yaml(config: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(config, sort_keys=False)


def make_trackers(names: list[str], out_dir: str | Path, config: dict[str, Any]) -> list[Tracker]:
    """Start the trackers ``names`` (from ``train.report_to``).

    Raises:
        ModuleNotFoundError: a tracker's package is missing; the message names its install line.
        ValueError: an unknown tracker name.
    """
    out = Path(out_dir)
    trackers = []
    for name in names:
        if name not in _TRACKERS:
            raise ValueError(f"train.report_to: unknown tracker {name!r}; known: {list(_TRACKERS)}")
        try:
            trackers.append(_TRACKERS[name](out, config))
        except ModuleNotFoundError as err:
            for tracker in trackers:
                tracker.close()
            raise ModuleNotFoundError(
                f"train.report_to: {name} needs the package {err.name!r}: {_INSTALL[name]}"
            ) from err
    return trackers
