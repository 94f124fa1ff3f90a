"""``python -m baselines.train --config baselines/configs/quick.yaml [key=value ...] [--resume]``.

Trains a policy with :class:`baselines.trainer.Trainer`; see ``baselines/configs/`` for the
embedded configs and docs/metrics.md for every metric it logs.

Data parallel: ``torchrun --nproc_per_node N -m baselines.train --config ...`` on CPUs (gloo), or
``accelerate launch --num_processes N -m baselines.train --config ...`` on GPUs; every rank runs
this same program (:mod:`baselines.distributed`), rank 0 prints the summary. Each rank (one process
too) prints its peak RSS (``rank r/N: peak RSS x GB``) to stderr at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from baselines.checkpoint import add_run_options, resumed_config
from baselines.config import TrainConfig, keys_help, load_config


def config_keys_help() -> str:
    """Every ``section.key`` of :class:`TrainConfig` with its default, for ``--help``."""
    return keys_help(TrainConfig(), "baselines/config.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.train",
        description="Multi-turn RL on agentgym (RAGEN-2).",
        epilog=config_keys_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(
        parser,
        "train.out_dir",
        "YAML config file (default: built-in defaults)",
        " (train.save_every)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_intermixed_args(argv)  # flags may sit between overrides
    try:
        config = load_config(*resumed_config(args, "train.out_dir", TrainConfig().train.out_dir))
    except (ValueError, FileNotFoundError) as err:
        parser.error(str(err))
    from baselines.trainer import Trainer

    try:
        trainer = Trainer(config, resume=args.resume, progress=not args.no_progress)
    except (FileExistsError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        return _train(trainer, config)
    finally:
        ranks = trainer.ranks
        print(f"rank {ranks.rank}/{ranks.world_size}: {peak_rss_text()}", file=sys.stderr)
        ranks.close()


def peak_rss_text() -> str:
    """This process's peak resident set size, ``"peak RSS 1.23 GB"`` (Linux ``ru_maxrss``)."""
    import resource

    return f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"


def _train(trainer: Any, config: TrainConfig) -> int:
    from baselines.llm.scoring import describe_precision
    from baselines.tracking import complete_metrics

    main = trainer.ranks.is_main
    if main:
        print(
            describe_precision(config.model.dtype, trainer.device, trainer.autocast_dtype),
            file=sys.stderr,
        )
    if trainer.start_step >= config.train.steps:
        print(
            f"{trainer.out_dir} is already complete: {trainer.start_step} of "
            f"train.steps={config.train.steps} steps done; nothing to run (to extend it, resume "
            f"with train.steps={trainer.start_step + config.train.steps})"
        )
        return 0
    try:
        history = trainer.run()
    except ModuleNotFoundError as err:  # a train.report_to tracker that is not installed
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not main:
        return 0
    if trainer.stopped_early:
        when = f"after step {history[-1]['step']:.0f}" if history else "on resume, before a step"
        print(f"stopped early {when}: see the warnings and the stop message above")
    if history:
        last = complete_metrics(history[-1])  # undefined values are null, never NaN
        keys = [k for k in last if k.startswith(("rollout/", "val/", "collapse/", "filter/"))]
        shown = {k: round(last[k], 4) for k in keys if isinstance(last[k], (int, float))}
        print(json.dumps(shown, indent=1, allow_nan=False))
    print(f"wrote {trainer.out_dir}/metrics.jsonl, plots/ and checkpoint/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
