"""Supervised warm start: fine-tune a policy on oracle episodes before RL.

``python -m baselines.warmstart --env Sokoban-v0 --episodes 64 --out runs/warm`` then
``python -m baselines.train --config baselines/configs/sokoban.yaml model.path=runs/warm``.

A small model that never writes a valid action gives RL nothing to learn from (every group's
episodes get the same reward; see :mod:`baselines.progress`). Behaviour cloning of the
environment's oracle (``env.oracle_answer()``, in the env's action format) teaches the format and
the moves first. Each turn of each oracle episode is one example: the prompt is rendered exactly as
the trainer renders it (:func:`baselines.rollout.render_prompt`, with the ``<think>`` prefix when
``think_prefix``), the target is the oracle's reply after that prefix plus the end-of-turn token,
and the loss is the token-mean cross-entropy of the target tokens only (prompt tokens masked).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

__all__ = ["oracle_examples", "warm_start", "main"]


def oracle_examples(
    env_id: str, env_kwargs: dict[str, Any], seeds: range, tokenizer: Any, think_prefix: bool
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, target ids) per turn of the oracle's episodes on ``seeds``.

    Raises:
        NotImplementedError: the environment has no oracle.
    """
    import gymnasium as gym

    from agentgym.chat import ChatEpisode
    from baselines.rollout import THINK_PREFIX, render_prompt

    env = gym.make(env_id, **env_kwargs)
    end = tokenizer.eos_token or ""
    examples = []
    try:
        for seed in seeds:
            observation, info = env.reset(seed=seed)
            chat = ChatEpisode.from_reset(observation, info)
            done = False
            while not done:
                reply = env.unwrapped.oracle_answer()
                prompt = render_prompt(tokenizer, chat.messages(), think_prefix)
                target = reply
                if think_prefix and target.startswith(THINK_PREFIX):
                    target = target[len(THINK_PREFIX) :]
                examples.append(
                    (
                        tokenizer(prompt, add_special_tokens=False)["input_ids"],
                        tokenizer(target + end, add_special_tokens=False)["input_ids"],
                    )
                )
                observation, reward, terminated, truncated, info = env.step(reply)
                chat.record(reply, observation, reward, terminated, truncated, info)
                done = terminated or truncated
    finally:
        env.close()
    return examples


def warm_start(
    model: Any,
    examples: list[tuple[list[int], list[int]]],
    *,
    epochs: int = 2,
    lr: float = 1e-5,
    batch_size: int = 8,
    seed: int = 0,
) -> list[float]:
    """Fine-tune ``model`` in place on ``examples``; returns the mean loss of each epoch (nats).

    Loss: mean over target tokens of ``-log p(target_t | prompt, target_<t)`` (AdamW, no decay).
    """
    import torch

    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    rng = random.Random(seed)
    order = list(range(len(examples)))
    losses = []
    model.train()
    for _ in range(epochs):
        rng.shuffle(order)
        total, tokens = 0.0, 0
        for start in range(0, len(order), batch_size):
            rows = [examples[i] for i in order[start : start + batch_size]]
            width = max(len(p) + len(t) for p, t in rows)
            ids = torch.zeros((len(rows), width), dtype=torch.long)
            attn = torch.zeros_like(ids)
            labels = torch.full_like(ids, -100)
            for b, (p, t) in enumerate(rows):
                n = len(p) + len(t)
                ids[b, :n] = torch.tensor(p + t)
                attn[b, :n] = 1
                labels[b, len(p) : n] = torch.tensor(t)
            ids, attn, labels = ids.to(device), attn.to(device), labels.to(device)
            logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1]
            target = labels[:, 1:]
            loss_sum = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]),
                target.reshape(-1),
                ignore_index=-100,
                reduction="sum",
            )
            count = int((target != -100).sum())
            optimizer.zero_grad(set_to_none=True)
            (loss_sum / max(1, count)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            total += loss_sum.item() if not loss_sum.requires_grad else loss_sum.detach().item()
            tokens += count
        losses.append(total / max(1, tokens))
    model.eval()
    return losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.warmstart", description=__doc__)
    parser.add_argument("--env", required=True, help="agentgym id (Sokoban-v0 works too)")
    parser.add_argument("--model", default="embedded", help="embedded, tiny or a checkpoint folder")
    parser.add_argument("--episodes", type=int, default=64, help="oracle episodes (seeds 0..N-1)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--no-think-prefix", action="store_true", help="rollout.think_prefix=false")
    parser.add_argument("--kw", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", required=True, help="folder for the warm-started checkpoint")
    args = parser.parse_args(argv)
    from agentgym.cli import CLIError, parse_kwargs, resolve_env_id
    from agentgym.threads import set_torch_threads

    try:
        env_id = resolve_env_id(args.env)
        env_kwargs = parse_kwargs(args.kw)
        set_torch_threads(args.threads)
    except (CLIError, ValueError) as err:
        parser.error(str(err))
    if Path(args.out).exists() and any(Path(args.out).iterdir()):
        parser.error(f"--out {args.out} is not empty; choose another folder")
    from baselines.policy import load_policy
    from baselines.trainer import vocabulary_texts

    texts = vocabulary_texts(env_id, env_kwargs, range(32)) if args.model == "tiny" else None
    model, tokenizer = load_policy(args.model, texts=texts, seed=args.seed)
    seeds = range(args.seed, args.seed + args.episodes)
    try:
        examples = oracle_examples(env_id, env_kwargs, seeds, tokenizer, not args.no_think_prefix)
    except NotImplementedError:
        print(f"error: {env_id} has no oracle to learn from", file=sys.stderr)
        return 2
    losses = warm_start(
        model, examples, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, seed=args.seed
    )
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    print(json.dumps({"examples": len(examples), "loss_per_epoch": losses}))
    print(f"wrote {args.out}; train from it with model.path={args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
