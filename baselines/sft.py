"""Supervised warm start: fine-tune the policy on oracle chats before RL.

``python -m baselines.sft --config baselines/configs/sft/bandit.yaml [section.key=value ...]``

Data: the JSONL written by ``agentgym export-sft`` (:mod:`agentgym.sft`): oracle episodes as chat
messages whose assistant turns are ``<think>reasoning naming what the oracle saw</think>
<answer>actions</answer>``. Why: a policy whose reasonings do not depend on its input has MI 0
from the start and cannot show template collapse; a warm-started one starts near the MI ceiling.

Each assistant turn becomes one example, built with the trainer's own episode-loop prompt
builder (:class:`baselines.episodes.TokenContext`, see :func:`build_examples`):

- prompt: exactly the ids :func:`baselines.episodes.collect_rollouts` gives the engine on that
  turn of the same seed when the policy had written the oracle's earlier replies (the chat
  template with the assistant header, then ``<think>``; earlier replies as the engine returns
  them, cut at the stop string ``</answer>``);
- target: the reply after its leading ``<think>`` (what the policy samples after the prompt),
  tokenized with ``add_special_tokens=False``, then the end-of-turn token.

The loss is the token-mean cross-entropy over target tokens only (labels -100 on the prompt and
padding): the model never learns to write the user's or the system's text. The loop is our own
(AdamW, seeded shuffling, gradient clipping), short enough to read top to bottom.

Outputs in ``sft.out_dir``: ``checkpoint/`` (``save_pretrained`` weights and tokenizer: give it to
the RL trainer as ``model.path``), ``metrics.jsonl`` (one line per optimizer step: ``sft/loss``,
``sft/tokens``, ``sft/epoch``), ``config.yaml``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from agentgym.threads import set_torch_threads
from baselines.config import ModelConfig, _apply_override, _at_least, _from_dict, _positive
from baselines.engines import Generation, SamplingSettings, _cut
from baselines.episodes import THINK_PREFIX, TokenContext

__all__ = [
    "SFTSettings",
    "SFTConfig",
    "SFTExample",
    "load_sft_config",
    "read_chats",
    "build_examples",
    "collate",
    "train_sft",
    "main",
]

IGNORE = -100  # label of positions without loss (torch cross_entropy's ignore_index)


@dataclass
class SFTSettings:
    """The fine-tuning run.

    Attributes:
        data: JSONL file(s) from ``agentgym export-sft`` (a path, or a list of paths).
        out_dir: where ``checkpoint/``, ``metrics.jsonl`` and ``config.yaml`` go.
        epochs: passes over the examples.
        lr: AdamW learning rate.
        batch_size: examples per optimizer step.
        max_length: examples with more tokens (prompt + target) are dropped, and counted.
        think_prefix: prompts end with ``<think>`` and targets start after it (must match the RL
            config's ``rollout.think_prefix``).
        weight_decay: AdamW weight decay.
        grad_clip: max global gradient norm.
        seed: seed of the example order and of the ``tiny`` model's init.
        threads: torch CPU threads (0: half the usable CPUs, at least one, as the trainer;
            :mod:`agentgym.threads`).
    """

    data: Any = ""
    out_dir: str = "runs/sft"
    epochs: int = 3
    lr: float = 1e-5
    batch_size: int = 8
    max_length: int = 2048
    think_prefix: bool = True
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    threads: int = 0

    def validate(self) -> None:
        paths = self.data if isinstance(self.data, list) else [self.data]
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise ValueError("sft.data: give the JSONL file from `agentgym export-sft`")
        _at_least("sft.epochs", self.epochs, 1)
        _positive("sft.lr", self.lr)
        _at_least("sft.batch_size", self.batch_size, 1)
        _at_least("sft.max_length", self.max_length, 8)
        _at_least("sft.weight_decay", self.weight_decay, 0.0)
        _positive("sft.grad_clip", self.grad_clip)
        _at_least("sft.threads", self.threads, 0)
        if not self.out_dir:
            raise ValueError("sft.out_dir: must be a folder path")


@dataclass
class SFTConfig:
    """``model`` (as in the RL config; LoRA is not supported here) and ``sft``."""

    model: ModelConfig = field(default_factory=ModelConfig)
    sft: SFTSettings = field(default_factory=SFTSettings)

    def validate(self) -> None:
        self.model.validate()
        self.sft.validate()
        if self.model.lora_rank:
            raise ValueError("model.lora_rank: SFT trains every weight; set 0")


def load_sft_config(
    path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
) -> SFTConfig:
    """Read a YAML file with sections ``model`` and ``sft``, apply ``section.key=value`` overrides.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: unknown key or bad value (the message names the key).
    """
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            raise ValueError(f"{path}: the top level must be a mapping of sections")
        data = loaded or {}
    for override in overrides:
        _apply_override(data, override)
    config = _from_dict(SFTConfig, data, "")
    config.validate()
    return config


def read_chats(paths: str | list[str]) -> list[list[dict[str, str]]]:
    """The ``messages`` of every record of the JSONL file(s).

    Raises:
        FileNotFoundError: a file is missing. ValueError: a line is not a record with messages.
    """
    chats = []
    for path in [paths] if isinstance(paths, str) else paths:
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"sft.data: {path} not found; write it with `agentgym export-sft --env ID "
                f"--episodes N --out {path}`"
            )
        with Path(path).open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    messages = json.loads(line)["messages"]
                except (json.JSONDecodeError, KeyError, TypeError) as err:
                    raise ValueError(f"{path}:{number}: not an export-sft record ({err})") from None
                chats.append(messages)
    if not chats:
        raise ValueError(f"{paths}: no records")
    return chats


@dataclass
class SFTExample:
    """One assistant turn: ``input_ids`` = prompt + target; ``labels`` = -100 on the prompt."""

    input_ids: list[int]
    labels: list[int]


def build_examples(
    tokenizer: Any,
    messages: list[dict[str, str]],
    end_of_turn_id: int,
    think_prefix: bool = True,
    stop_strings: tuple[str, ...] = SamplingSettings.stop_strings,
) -> list[SFTExample]:
    """One example per assistant message of a chat, token-exactly as the RL episode loop sees it.

    The chat is replayed through :class:`baselines.episodes.TokenContext`, the trainer's own
    prompt builder: each turn's prompt ids are what :func:`baselines.episodes.collect_rollouts`
    gives the engine when the policy had sampled the oracle's earlier replies. A reply's target
    is ``tokenizer(reply after <think>, add_special_tokens=False)`` then the end-of-turn token
    (so the model also learns to end its turn where no stop string cuts it). The context of the
    later turns holds the reply as the engine returns it: cut right after a stop string such as
    ``</answer>`` (without the end token; :func:`baselines.engines._cut`), as ids, and in the chat
    as their decoding, exactly as a sampled reply enters it.

    Args:
        tokenizer: the policy's tokenizer (with a chat template).
        messages: ``[{"role", "content"}, ...]`` from :meth:`agentgym.chat.ChatEpisode.messages`.
        end_of_turn_id: the token that ends a reply (the model's generation EOS).
        think_prefix: the prompt ends with ``<think>``; each reply must then start with it.
        stop_strings: the rollout's stop strings (:class:`baselines.engines.SamplingSettings`).

    Returns:
        the examples, in turn order: ``input_ids`` = prompt ids + target ids, ``labels`` -100 on
        the prompt ids and the target ids after them.

    Raises:
        ValueError: with ``think_prefix``, a reply that does not start with ``<think>``; a chat
            template without a generation prompt.
    """
    prefix = THINK_PREFIX if think_prefix else ""
    context = TokenContext(tokenizer, prefix)
    chat = [dict(m) for m in messages]
    examples = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        reply = message["content"]
        if not reply.startswith(prefix):
            raise ValueError(
                f"assistant turn {index} does not start with {THINK_PREFIX!r}; export the data "
                "with the think_answer format or set sft.think_prefix=false"
            )
        prompt_ids = context.prompt(chat[:index])
        ids = tokenizer(reply[len(prefix) :], add_special_tokens=False)["input_ids"]
        target = list(ids) + [end_of_turn_id]
        n, why = _cut(tokenizer, target, {end_of_turn_id}, tuple(stop_strings))
        sampled, ended = target[:n], why == "end"
        text = tokenizer.decode(sampled[:-1] if ended else sampled, skip_special_tokens=False)
        context.add(Generation(sampled, text, [0.0] * n, ended))
        chat[index] = {"role": "assistant", "content": prefix + text}
        examples.append(
            SFTExample(
                input_ids=list(prompt_ids) + target,
                labels=[IGNORE] * len(prompt_ids) + target,
            )
        )
    return examples


def collate(examples: list[SFTExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch: int64 ``input_ids``, ``attention_mask`` and ``labels``, all ``[B, L]``."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, e in enumerate(examples):
        n = len(e.input_ids)
        ids[row, :n] = torch.tensor(e.input_ids)
        mask[row, :n] = 1
        labels[row, :n] = torch.tensor(e.labels)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def target_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Token-mean cross-entropy of next-token predictions on labelled positions.

    Args:
        logits: float ``[B, L, V]``; position t predicts token t + 1.
        labels: int64 ``[B, L]``, -100 where there is no loss.

    Returns:
        ``(loss, number of target tokens)``; the loss is 0 (with a graph) when there are none.
    """
    shifted = labels[:, 1:]
    count = int((shifted != IGNORE).sum())
    flat = logits[:, :-1].reshape(-1, logits.shape[-1]).float()
    total = torch.nn.functional.cross_entropy(
        flat, shifted.reshape(-1), ignore_index=IGNORE, reduction="sum"
    )
    return total / max(count, 1), count


def _vocabulary(chats: list[list[dict[str, str]]]) -> list[str]:
    texts = [m["content"] for chat in chats for m in chat]
    # The chat layer's fixed words (user messages after an invalid or a later turn).
    texts.append(
        "Turn State You have actions left up to this turn Reward Your last reply was "
        "invalid nothing happened system user assistant"
    )
    return texts


def train_sft(config: SFTConfig, progress: bool = True) -> dict[str, float]:
    """Fine-tune, write the checkpoint and metrics; returns the final metrics.

    Raises:
        ValueError: no example fits ``sft.max_length``, or bad data (see :func:`read_chats`).
    """
    from baselines.policy import load_policy

    config.validate()
    sc, mc = config.sft, config.model
    set_torch_threads(sc.threads)
    chats = read_chats(sc.data)
    texts = _vocabulary(chats) if mc.path == "tiny" else None
    model, tokenizer = load_policy(
        mc.path, device=mc.device, dtype=mc.dtype, texts=texts, seed=sc.seed
    )
    device = next(model.parameters()).device
    end_of_turn = model.generation_config.eos_token_id
    if isinstance(end_of_turn, list):
        end_of_turn = end_of_turn[0]
    examples = [
        e for chat in chats for e in build_examples(tokenizer, chat, end_of_turn, sc.think_prefix)
    ]
    kept = [e for e in examples if len(e.input_ids) <= sc.max_length]
    if not kept:
        raise ValueError(
            f"no example fits sft.max_length={sc.max_length} (shortest: "
            f"{min(len(e.input_ids) for e in examples)} tokens)"
        )
    out_dir = Path(sc.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.yaml").write_text(
        yaml.safe_dump(dataclasses.asdict(config), sort_keys=False), encoding="utf-8"
    )
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=sc.lr, weight_decay=sc.weight_decay
    )
    generator = torch.Generator().manual_seed(sc.seed)
    steps_per_epoch = math.ceil(len(kept) / sc.batch_size)
    metrics: dict[str, float] = {}
    step = 0
    model.train()
    with (out_dir / "metrics.jsonl").open("w", encoding="utf-8") as log:
        for epoch in range(sc.epochs):
            order = torch.randperm(len(kept), generator=generator).tolist()
            for start in range(0, len(order), sc.batch_size):
                t0 = time.perf_counter()
                batch = collate(
                    [kept[i] for i in order[start : start + sc.batch_size]], tokenizer.pad_token_id
                )
                batch = {k: v.to(device) for k, v in batch.items()}
                logits = model(
                    input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                ).logits
                loss, count = target_loss(logits, batch["labels"])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), sc.grad_clip)
                optimizer.step()
                step += 1
                metrics = {
                    "step": float(step),
                    "sft/epoch": epoch + (start + sc.batch_size) / len(order),
                    "sft/loss": float(loss.detach()),
                    "sft/tokens": float(count),
                    "sft/grad_norm": float(grad_norm),
                    "timing/step_s": time.perf_counter() - t0,
                }
                finite = {k: v if math.isfinite(v) else None for k, v in metrics.items()}
                log.write(json.dumps(finite, allow_nan=False) + "\n")  # NaN as null
                if progress:
                    print(
                        f"step {step}/{steps_per_epoch * sc.epochs}  epoch {epoch + 1}  "
                        f"loss {metrics['sft/loss']:.4f}",
                        file=sys.stderr,
                    )
    model.eval()
    staging = out_dir / ".checkpoint.tmp"
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    final = out_dir / "checkpoint"
    if final.exists():
        import shutil

        shutil.rmtree(final)
    staging.rename(final)
    metrics["sft/examples"] = float(len(kept))
    metrics["sft/examples_too_long"] = float(len(examples) - len(kept))
    return metrics


def main(argv: list[str] | None = None) -> int:
    """``python -m baselines.sft --config FILE [section.key=value ...]``."""
    parser = argparse.ArgumentParser(
        prog="python -m baselines.sft",
        description="Fine-tune the policy on oracle chats from `agentgym export-sft` (loss on "
        "assistant tokens only); writes OUT_DIR/checkpoint for the RL trainer's model.path.",
    )
    parser.add_argument("--config", default=None, help="YAML file with sections model and sft")
    parser.add_argument("--quiet", action="store_true", help="no per-step lines")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value")
    args = parser.parse_args(argv)
    try:
        config = load_sft_config(args.config, args.overrides)
        metrics = train_sft(config, progress=not args.quiet)
    except (ValueError, FileNotFoundError) as err:
        print(f"baselines.sft: error: {err}", file=sys.stderr)
        return 2
    print(
        f"final loss {metrics['sft/loss']:.4f} over {int(metrics['sft/examples'])} examples; "
        f"checkpoint: {Path(config.sft.out_dir) / 'checkpoint'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
