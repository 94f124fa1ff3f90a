"""TRL GRPO on an agentgym id, one process or many: the multi-GPU recipe's entry point.

On GPUs, with an accelerate config of ``baselines/configs/trl/`` (DeepSpeed ZeRO-3 or FSDP2) and
TRL's colocated vLLM for generation::

    accelerate launch --config_file baselines/configs/trl/deepspeed_zero3.yaml \\
        -m baselines.integrations.trl_recipe --model /path/to/checkpoint --env Sokoban-v0 \\
        --env-kwargs '{"max_turns": 5}' --use-vllm --bf16

Untested on GPUs (written on a CPU-only machine without vLLM); ``tests/test_trl.py`` runs it for
one step in one process on CPU with ``--model tiny``. It builds what the README's snippet builds
(:class:`~baselines.integrations.trl.AgentgymRollout` and
:class:`~baselines.integrations.trl.AgentgymGRPOTrainer` with RAGEN-2's default filter and the MI
diagnostics); nothing downloads (``--model`` is ``embedded``, ``tiny`` or a local checkpoint).
"""

from __future__ import annotations

import argparse
import json

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The recipe's options (``--help`` lists them with their defaults)."""
    p = argparse.ArgumentParser(
        prog="python -m baselines.integrations.trl_recipe",
        description="GRPO with TRL on an agentgym environment (RAGEN-2's filter and diagnostics).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", default="embedded", help="embedded, tiny or a checkpoint folder")
    p.add_argument("--env", default="Sokoban-v0", help="an agentgym id")
    p.add_argument("--env-kwargs", default="{}", help="environment arguments as JSON")
    p.add_argument("--num-prompts", type=int, default=256, help="distinct reset seeds")
    p.add_argument("--num-generations", type=int, default=8, help="episodes per group")
    p.add_argument("--batch-size", type=int, default=8, help="episodes per device and step")
    p.add_argument("--max-new-tokens", type=int, default=128, help="tokens per turn")
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--use-vllm", action="store_true", help="TRL's vLLM (colocate) generates")
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision (GPUs)")
    p.add_argument("--cpu", action="store_true", help="run on CPU (float32)")
    p.add_argument("--output-dir", default="runs/trl")
    p.add_argument("--report-to", nargs="*", default=["tensorboard"])
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, train, return 0."""
    args = build_parser().parse_args(argv)
    from trl import GRPOConfig

    from agentgym.registration import resolve_env_id
    from baselines.episodes import vocabulary_texts
    from baselines.integrations.trl import AgentgymGRPOTrainer, AgentgymRollout, episode_return
    from baselines.llm.policy import load_policy

    env_kwargs = json.loads(args.env_kwargs)
    texts = None
    if args.model == "tiny":
        texts = vocabulary_texts(resolve_env_id(args.env), env_kwargs, range(32))
    model, tokenizer = load_policy(args.model, device="cpu", dtype="float32", texts=texts)
    rollout = AgentgymRollout(
        args.env, tokenizer, env_kwargs=env_kwargs, max_new_tokens=args.max_new_tokens
    )
    config = GRPOConfig(
        output_dir=args.output_dir,
        use_cpu=args.cpu,
        bf16=args.bf16,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.batch_size,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        logging_steps=1,
        report_to=args.report_to,
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
    )
    trainer = AgentgymGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=episode_return,
        train_dataset=rollout.dataset(num_prompts=args.num_prompts),
        rollout_func=rollout,
        args=config,
    )
    trainer.train()
    trainer.save_model(args.output_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
