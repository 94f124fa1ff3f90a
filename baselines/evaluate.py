"""``python -m baselines.evaluate --checkpoint runs/quick/checkpoint --out runs/quick/eval.json``.

Scores a training checkpoint: an alias of ``agentgym eval --agent hf:CHECKPOINT`` (the same
episode prompts and generation path as training, :class:`baselines.hf_agent.HFAgent`) that writes a
result bundle the leaderboard accepts (``python -m leaderboards submit OUT``) and prints each
environment's summary as JSON.

When the checkpoint sits in a run folder (``RUN/checkpoint`` next to ``RUN/config.yaml``), the
defaults come from that run's config: the environment and its constructor arguments,
``max_new_tokens``, ``think_prefix``, ``max_context_tokens`` and the validation temperature, so the
checkpoint is scored on the prompts it was trained on. Flags override them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["main", "run_defaults"]


def run_defaults(checkpoint: str) -> dict[str, Any]:
    """Evaluation settings from ``<checkpoint>/../config.yaml`` (empty when there is none)."""
    path = Path(checkpoint).expanduser().parent / "config.yaml"
    if checkpoint == "embedded" or not path.is_file():
        return {}
    rollout = (yaml.safe_load(path.read_text()) or {}).get("rollout", {})
    return {
        "env": rollout.get("env_id"),
        "env_kwargs": rollout.get("env_kwargs") or {},
        "max_new_tokens": rollout.get("max_new_tokens"),
        "think_prefix": rollout.get("think_prefix"),
        "max_context_tokens": rollout.get("max_context_tokens"),
        "temperature": rollout.get("val_temperature"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.evaluate", description=__doc__)
    parser.add_argument("--checkpoint", default="embedded", help="checkpoint folder or 'embedded'")
    parser.add_argument("--env", default=None, help="registered id (default: the run's env)")
    parser.add_argument("--episodes", type=int, default=32, help="held-out episodes")
    parser.add_argument("--seed", type=int, default=1_000_000, help="first held-out seed")
    parser.add_argument("--out", default=None, help="bundle path (default: RUN/eval.json)")
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--temperature", type=float, default=None, help="0: greedy (default)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing bundle")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (default 0: half the CPUs)"
    )
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    from agentgym.cli import CLIError, resolve_env_id
    from agentgym.eval import EvalError, evaluate
    from baselines.llm.threads import set_torch_threads

    defaults = run_defaults(args.checkpoint)
    env_id = args.env or defaults.get("env") or "agentgym/Bandit-v0"
    try:
        env_id = resolve_env_id(env_id)  # the short form (Sokoban-v0) too
        set_torch_threads(args.threads)
    except (CLIError, ValueError) as err:
        parser.error(str(err))
    agent_kwargs: dict[str, Any] = {
        "max_new_tokens": args.max_new_tokens or defaults.get("max_new_tokens") or 128,
        "temperature": (
            args.temperature if args.temperature is not None else defaults.get("temperature") or 0.0
        ),
    }
    for key in ("think_prefix", "max_context_tokens"):
        if defaults.get(key) is not None:
            agent_kwargs[key] = defaults[key]
    env_kwargs = defaults.get("env_kwargs") if env_id == defaults.get("env") else {}
    out = args.out
    if out is None:
        base = Path(args.checkpoint).parent if args.checkpoint != "embedded" else Path(".")
        out = str(base / "eval.json")
    try:
        bundle = evaluate(
            [env_id],
            f"hf:{args.checkpoint}",
            episodes=args.episodes,
            seed=args.seed,
            out=out,
            env_kwargs=env_kwargs or None,
            agent_kwargs=agent_kwargs,
            overwrite=args.overwrite,
            progress=False,
        )
    except EvalError as err:
        parser.error(str(err))
    summary = {run["env_id"]: run["summary"] for run in bundle["runs"]}
    print(json.dumps({"bundle": out, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
