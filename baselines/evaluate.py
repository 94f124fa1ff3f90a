"""``python -m baselines.evaluate --checkpoint runs/quick/checkpoint --env agentgym/Bandit-v0``.

Scores a policy checkpoint (or ``embedded``) on M held-out seeds with the same chat layer and
rollout code as training, and prints success rate (with a 95% Wilson interval), mean reward,
valid-action rate and mean turns as JSON.
"""

from __future__ import annotations

import argparse
import json

from agentgym.eval import wilson_interval

__all__ = ["evaluate", "main"]


def evaluate(
    model_path: str,
    env_id: str,
    episodes: int,
    seed: int,
    *,
    env_kwargs: dict | None = None,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    think_prefix: bool = True,
    batch: int = 16,
) -> dict[str, float]:
    """Play ``episodes`` episodes with seeds ``seed .. seed+episodes-1``; return the summary."""
    import torch

    from baselines.policy import load_policy
    from baselines.rollout import SamplingSettings, collect_rollouts
    from baselines.trainer import Trainer

    model, tokenizer = load_policy(model_path)
    sampling = SamplingSettings(
        max_new_tokens=max_new_tokens, temperature=temperature, think_prefix=think_prefix
    )
    torch.manual_seed(seed)
    played = []
    seeds = list(range(seed, seed + episodes))
    for start in range(0, len(seeds), batch):
        played += collect_rollouts(
            model,
            tokenizer,
            env_id,
            seeds[start : start + batch],
            1,
            sampling,
            env_kwargs=env_kwargs,
        )
    summary = Trainer.rollout_metrics(played, "eval/")
    wins = sum(e.success for e in played)
    low, high = wilson_interval(wins, len(played))
    summary.update(
        {
            "eval/episodes": float(len(played)),
            "eval/success_ci_low": low,
            "eval/success_ci_high": high,
        }
    )
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.evaluate", description=__doc__)
    parser.add_argument(
        "--checkpoint",
        default="embedded",
        help="checkpoint folder, 'embedded' or 'tiny' (default: embedded)",
    )
    parser.add_argument(
        "--env", default="agentgym/Bandit-v0", help="registered agentgym id (Bandit-v0 works too)"
    )
    parser.add_argument("--episodes", type=int, default=32, help="M held-out episodes")
    parser.add_argument("--seed", type=int, default=1_000_000, help="first held-out seed")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (default 0: half the CPUs)"
    )
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    from agentgym.cli import CLIError, resolve_env_id
    from agentgym.threads import set_torch_threads

    try:
        args.env = resolve_env_id(args.env)  # the short form (Sokoban-v0) too
        set_torch_threads(args.threads)
    except (CLIError, ValueError) as err:
        parser.error(str(err))
    summary = evaluate(
        args.checkpoint,
        args.env,
        args.episodes,
        args.seed,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
    )
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
