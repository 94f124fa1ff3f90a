"""What continuous batching across turns could save on a real rollout: decoding steps.

Usage::

    python benchmarks/bench_lockstep.py baselines/configs/sokoban.yaml rollout.num_groups=2
    python benchmarks/bench_lockstep.py baselines/configs/frozen_lake_cpu.yaml \\
        model.path=runs/recipe-frozen_lake/sft/checkpoint

One rollout of CONFIG's batch (``Trainer._rollout``, the config's engine unless overridden, no
validation), then from the episodes' sampled ids: the decoding steps a lock-step rollout runs (each
turn lasts as many steps as its longest reply among the episodes still playing: the sum over turns)
against the fewest any schedule needs (the longest episode's reply tokens in all: an episode's
replies are sequential, whichever batch they share). On a CPU a decoding step streams the weights
once whatever its rows (docs/performance.md, the roofline), so the gap is what continuous batching
(an episode joining the next decoding batch as soon as its observation is ready) could save.
Prints the counts; asserts nothing. Issue 41; figures in docs/performance.md.
"""

from __future__ import annotations

import argparse
import tempfile


def lockstep_steps(reply_tokens: list[list[int]]) -> tuple[int, int]:
    """``(lock-step decoding steps, the longest episode's reply tokens)`` for the reply lengths of
    each episode's turns, in order (``reply_tokens[e][t]``: tokens of episode e's turn t)."""
    turns = max((len(x) for x in reply_tokens), default=0)
    lock = sum(max(x[t] for x in reply_tokens if len(x) > t) for t in range(turns))
    return lock, max((sum(x) for x in reply_tokens), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("overrides", nargs="*", help="key=value, as baselines.train takes them")
    args = parser.parse_args()

    from baselines.config import load_config
    from baselines.trainer import Trainer

    with tempfile.TemporaryDirectory() as out:
        cfg = load_config(
            args.config,
            [f"train.out_dir={out}", "rollout.val_episodes=0", "diagnostics.every=0"]
            + args.overrides,
        )
        trainer = Trainer(cfg, progress=False)
        try:
            episodes, timings = trainer._rollout(0)
        finally:
            trainer.close()
    lengths = [
        [len(t.sample.sampled_ids) for t in e.turns if t.sample is not None] for e in episodes
    ]
    lock, fewest = lockstep_steps(lengths)
    total = sum(map(sum, lengths))
    print(
        f"{args.config}: {len(lengths)} episodes, {total} reply tokens, turns "
        f"{sorted(len(x) for x in lengths)}"
    )
    print(
        f"lock-step decoding steps {lock}; the longest episode's reply tokens {fewest} "
        f"({fewest / max(lock, 1):.2f} of lock step); {total / max(lock, 1):.1f} rows a step on "
        f"average; generation {timings.get('timing/generation_s', float('nan')):.1f} s, "
        f"environment {timings.get('timing/env_s', float('nan')):.2f} s"
    )


if __name__ == "__main__":
    main()
