"""Supervised warm start: fine-tune the policy on oracle chats before RL.

``python -m baselines.sft --config baselines/configs/sft/bandit.yaml [--resume] [section.key=value ...]``

Data: the JSONL written by ``agentgym export-sft`` (:mod:`agentgym.sft`): oracle episodes as chat
messages whose assistant turns are ``<think>reasoning naming what the oracle saw</think>
<answer>actions</answer>``. Why: a policy whose reasonings do not depend on its input has MI 0
from the start and cannot show template collapse; a warm-started one starts near the MI ceiling.

Each assistant turn becomes one example, built with the trainer's own episode-loop prompt
builder (:class:`baselines.llm.prompts.TokenContext`, see :func:`build_examples`):

- prompt: exactly the ids :func:`baselines.episodes.collect_rollouts` gives the engine on that
  turn of the same seed when the policy had written the oracle's earlier replies (the chat
  template with the assistant header, then ``<think>``; earlier replies as the engine returns
  them, cut at the stop string ``</answer>``);
- target: the reply after its leading ``<think>`` (what the policy samples after the prompt),
  tokenized with ``add_special_tokens=False``, then the end-of-turn token.

The loss of an optimizer step is the token-mean of ``-log p(target token)`` over the target tokens
of its ``sft.batch_size`` examples (temperature 1; prompt and padding carry no loss): the model
never learns to write the user's or the system's text. The loop is our own (AdamW, seeded
shuffling, gradient clipping), short enough to read top to bottom (:func:`train_sft`).

Memory follows the tokens, not the vocabulary (DESIGN.md, "Training fits the machine"):

- log-probs come from :func:`baselines.llm.scoring.score_targets`: the trunk runs once and the LM head
  only at target positions, in checkpointed chunks; no ``[B, L, V]`` logits tensor exists;
- a step's examples are sorted by length and packed greedily into micro-batches of at most
  ``sft.micro_batch_tokens`` padded tokens (rows x longest row; a longer row goes alone), with
  gradient accumulation: each micro-batch's summed loss is divided by the target tokens of the
  whole step, so the step's gradient is the one-big-batch gradient (:func:`accumulate_gradients`);
- parameters and AdamW state are float32; the forward runs under bf16 autocast where
  ``model.dtype`` asks for it (:func:`baselines.llm.scoring.resolve_autocast`: ``"auto"`` = bf16 where
  the hardware computes it natively, ``"float32"`` = none, ``"bfloat16"`` = bf16).

Outputs in ``sft.out_dir`` (the crash-safe layout of :mod:`baselines.checkpoint`):

- ``checkpoint/``: ``save_pretrained`` weights and tokenizer (give it to the RL trainer as
  ``model.path``), ``optimizer.pt`` (AdamW state) and ``state.json`` (the step, the data position
  and ``finished``); rewritten every ``sft.save_every`` optimizer steps and at the end;
- ``metrics.jsonl``: one line per optimizer step, appended and flushed when the step ends:
  ``step`` (1-based), ``sft/epoch`` (fractional), ``sft/loss`` (nats per target token),
  ``sft/tokens`` (target tokens), ``sft/micro_batches``, ``sft/grad_norm`` (before clipping),
  ``timing/step_s``;
- ``config.yaml``;
- ``provenance.json``: the code's commit, dirty state and library versions
  (:mod:`agentgym.provenance`; a resumed run appends its own).

``--resume`` (``train_sft(config, resume=True)``) continues a stopped or killed run from its last
checkpoint exactly as if it had not stopped: the example order of epoch ``e`` is a
``torch.randperm`` from a generator seeded with ``sft.seed * 100_003 + e``, rebuilt from the saved
(epoch, index). A folder that already holds a run is refused without ``--resume``, and a folder
holding a symbolic link anywhere is refused either way (:func:`baselines.checkpoint.refuse_symlinks`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from agentgym import provenance
from baselines.checkpoint import (
    add_run_options,
    append_metrics_line,
    begin_resume,
    check_same_run,
    read_metrics_lines,
    refuse_symlinks,
    resumed_config,
    save_checkpoint,
    truncate_metrics_after,
    write_text_durable,
)
from baselines.config import (
    ModelConfig,
    _at_least,
    _positive,
    keys_help,
    load_sections,
)
from baselines.llm.engines import Generation, SamplingSettings
from baselines.llm.engines.base import _cut
from baselines.llm.prompts import THINK_PREFIX, TokenContext, encode_content
from baselines.llm.scoring import (
    autocast,
    checkpointed_if,
    describe_precision,
    resolve_autocast,
    score_targets,
    set_checkpointing,
)
from baselines.llm.threads import set_torch_threads
from baselines.rl.minibatches import pack_by_tokens

__all__ = [
    "SFTSettings",
    "SFTConfig",
    "SFTExample",
    "load_sft_config",
    "read_chats",
    "build_examples",
    "collate",
    "target_nll",
    "accumulate_gradients",
    "epoch_order",
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
        batch_size: examples per optimizer step (the last step of an epoch may have fewer).
        micro_batch_tokens: padded tokens per forward/backward pass (rows x longest row of the
            micro-batch): bounds activation memory. A step's examples are packed into as few
            micro-batches as fit (:func:`baselines.rl.minibatches.pack_by_tokens`, as the RL
            trainer packs); an example longer than this goes alone, under gradient
            checkpointing (:func:`baselines.llm.scoring.checkpointed_if`). The step's gradient does
            not depend on it (gradient accumulation).
        max_length: examples with more tokens (prompt + target) are dropped, and counted.
        think_prefix: prompts end with ``<think>`` and targets start after it (must match the RL
            config's ``rollout.think_prefix``).
        weight_decay: AdamW weight decay.
        grad_clip: max global gradient norm.
        seed: seed of the example order and of the ``tiny`` model's init.
        threads: torch CPU threads (0: half the usable CPUs, at least one, as the trainer;
            :mod:`baselines.llm.threads`).
        save_every: write ``checkpoint/`` (weights, tokenizer, optimizer state, data position)
            every this many optimizer steps, so that ``--resume`` loses at most that many;
            0: only at the end. The end of the run always saves.
        max_steps: stop after this many optimizer steps in all (0: run every epoch), saving a
            checkpoint there; ``--resume`` with a larger value (or 0) continues the run.
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
    micro_batch_tokens: int = 2048
    save_every: int = 50
    max_steps: int = 0

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
        _at_least("sft.micro_batch_tokens", self.micro_batch_tokens, 1)
        _at_least("sft.save_every", self.save_every, 0)
        _at_least("sft.max_steps", self.max_steps, 0)
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
        ValueError: not valid YAML, a key given twice, unknown key or bad value (the message
            names the key; :func:`baselines.config.load_sections`).
    """
    return load_sections(SFTConfig, path, overrides)


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

    The chat is replayed through :class:`baselines.llm.prompts.TokenContext`, the trainer's own
    prompt builder: each turn's prompt ids are what :func:`baselines.episodes.collect_rollouts`
    gives the engine when the policy had sampled the oracle's earlier replies. A reply's target
    is ``tokenizer(reply after <think>, add_special_tokens=False)``, any control string in it
    kept as text (:func:`baselines.llm.prompts.encode_content`), then the end-of-turn token (so
    the model also learns to end its turn where no stop string cuts it). The context of the
    later turns holds the reply as the engine returns it: cut right after a stop string such as
    ``</answer>`` (without the end token; :func:`baselines.llm.engines.base._cut`), as ids, and in the chat
    as their decoding, exactly as a sampled reply enters it.

    Args:
        tokenizer: the policy's tokenizer (with a chat template).
        messages: ``[{"role", "content"}, ...]`` from :meth:`agentgym.chat.ChatEpisode.messages`.
        end_of_turn_id: the token that ends a reply (the model's generation EOS).
        think_prefix: the prompt ends with ``<think>``; each reply must then start with it.
        stop_strings: the rollout's stop strings (:class:`baselines.llm.engines.SamplingSettings`).

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
        # The env's text (the oracle's reasoning may quote an observation) is data: no control
        # id from it, as in the prompt (baselines.llm.prompts).
        ids = encode_content(tokenizer, reply[len(prefix) :])
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


def target_nll(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Summed negative log-likelihood of the labelled tokens of a collated batch.

    Log-probs come from :func:`baselines.llm.scoring.score_targets` at the labelled positions only
    (temperature 1): no ``[B, L, V]`` logits tensor is made. The target of a labelled position is
    its ``input_ids`` token (as :func:`build_examples` makes them: ``labels`` equal ``input_ids``
    wherever they are not -100).

    Args:
        model: a Hugging Face causal LM.
        batch: from :func:`collate` (on the model's device): int64 ``input_ids``,
            ``attention_mask``, ``labels``, all ``[B, L]``.

    Returns:
        ``(nll, count)``: float32 scalar ``-sum log p`` in nats (with a graph), and the number of
        target tokens (``nll`` is 0 when there are none).
    """
    mask = batch["labels"][:, 1:] != IGNORE
    scored = score_targets(model, batch["input_ids"], batch["attention_mask"], mask)
    return -scored["logprobs"].sum(), int(mask.sum())


def accumulate_gradients(
    model: torch.nn.Module,
    examples: list[SFTExample],
    pad_id: int,
    micro_batch_tokens: int,
    autocast_dtype: torch.dtype | None = None,
) -> tuple[float, int, int]:
    """Backpropagate one optimizer step's loss, micro-batch by micro-batch, into ``.grad``.

    The step's loss is ``sum of -log p over every target token / T``, with ``T`` the target tokens
    of all ``examples``. Each micro-batch (:func:`baselines.rl.minibatches.pack_by_tokens`, as the RL trainer packs) backpropagates its summed
    NLL divided by ``T``, so the accumulated gradient is the gradient of the step's token-mean
    loss whatever ``micro_batch_tokens`` is (to float rounding). The caller zeroes the gradients
    before and steps the optimizer after.

    Args:
        model: a Hugging Face causal LM (parameters float32).
        examples: the step's examples.
        pad_id: the padding token id (masked out by the attention mask).
        micro_batch_tokens: padded tokens per forward/backward pass, >= 1.
        autocast_dtype: forward under ``torch.autocast`` with this dtype (None: plain float32);
            see :func:`baselines.llm.scoring.resolve_autocast`.

    Returns:
        ``(loss, target tokens, micro-batches)``: the step's token-mean loss in nats per token.

    Raises:
        ValueError: no example has a target token.
    """
    device = next(model.parameters()).device
    total = sum(sum(label != IGNORE for label in e.labels[1:]) for e in examples)
    if total == 0:
        raise ValueError("the step's examples hold no target token")
    groups = pack_by_tokens([len(e.input_ids) for e in examples], micro_batch_tokens)
    nll_sum = 0.0
    for group in groups:
        batch = {k: v.to(device) for k, v in collate([examples[i] for i in group], pad_id).items()}
        # A row over the token budget goes alone, checkpointed (scoring.checkpointed_if).
        long = max(len(examples[i].input_ids) for i in group) > micro_batch_tokens
        with checkpointed_if(model, long):
            with autocast(device, autocast_dtype):
                nll, _ = target_nll(model, batch)
            (nll / total).backward()  # outside autocast, as torch recommends
        nll_sum += float(nll.detach())
    return nll_sum / total, total, len(groups)


def epoch_order(num_examples: int, seed: int, epoch: int) -> list[int]:
    """The example order of ``epoch``: ``torch.randperm`` from a generator seeded with
    ``seed * 100_003 + epoch`` (rebuilt from (epoch, index) on ``--resume``; distinct for every
    (seed, epoch) with epoch < 100,003)."""
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(num_examples, generator=generator).tolist()


def _vocabulary(chats: list[list[dict[str, str]]]) -> list[str]:
    texts = [m["content"] for chat in chats for m in chat]
    # The chat layer's fixed words (user messages after an invalid or a later turn).
    texts.append(
        "Turn State You have actions left up to this turn Reward Your last reply was "
        "invalid nothing happened system user assistant"
    )
    return texts


#: Settings a resumed run may change: how long it runs and what it writes, not what a step computes.
RESUMABLE_SFT_KEYS = frozenset({"epochs", "max_steps", "save_every", "threads"})


def _check_same_run(saved: dict[str, Any], now: dict[str, Any]) -> None:
    """:func:`baselines.checkpoint.check_same_run` with :data:`RESUMABLE_SFT_KEYS`."""
    check_same_run(saved, now, "sft", RESUMABLE_SFT_KEYS, dataclasses.asdict(SFTConfig()))


def _examples_digest(examples: list[SFTExample]) -> str:
    """SHA-256 of every example's ids and labels (a resumed run must train on the same data)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.input_ids, e.labels]).encode())
    return digest.hexdigest()


def _open_run(out_dir: Path, resume: bool) -> dict[str, Any] | None:
    """Check ``out_dir`` against ``resume`` (after crash recovery); the checkpoint's state or None.

    Raises:
        FileExistsError: a run is there and ``resume`` is False.
        FileNotFoundError: ``resume`` is True and there is no run to continue.
        ValueError: ``resume`` on a checkpoint of an earlier version (no ``state.json``).
        SymlinkInRunFolder: ``out_dir`` holds a symbolic link (a ``ValueError``).
    """
    refuse_symlinks(out_dir)  # fresh or resumed: nothing is written through a link
    checkpoint = out_dir / "checkpoint"
    metrics = out_dir / "metrics.jsonl"
    if not resume:
        if metrics.exists() or checkpoint.exists():
            raise FileExistsError(
                f"{out_dir} already holds a run; pass --resume to continue it or choose another "
                "sft.out_dir"
            )
        return None
    if (checkpoint / "config.json").is_file() and not (checkpoint / "state.json").is_file():
        raise ValueError(
            f"--resume: {checkpoint} was written by an earlier version of baselines.sft (no "
            "state.json): it is that run's final model, use it as model.path as it is; to train "
            "again choose another sft.out_dir"
        )
    if begin_resume(out_dir):  # started, but killed before its first checkpoint
        print(
            f"--resume: {out_dir} has no complete checkpoint yet; starting again from step 0",
            file=sys.stderr,
        )
        truncate_metrics_after(metrics, 0)
        return None
    if not (checkpoint / "state.json").is_file():
        raise FileNotFoundError(
            f"--resume: no run to continue in {out_dir} (no checkpoint); run without --resume"
        )
    return json.loads((checkpoint / "state.json").read_text(encoding="utf-8"))


def train_sft(
    config: SFTConfig, progress: bool = True, *, resume: bool = False
) -> dict[str, float]:
    """Fine-tune, writing metrics every step and checkpoints every ``sft.save_every`` steps.

    Args:
        config: the run.
        progress: show a tqdm bar on stderr (refreshed at most every 0.5 s on a terminal, every
            60 s when stderr is a file or pipe).
        resume: continue the run in ``sft.out_dir`` from its checkpoint (exactly: the same
            weights, optimizer state and example order as without the stop).

    Returns:
        the metrics of the last step, with ``sft/examples`` (examples trained on) and
        ``sft/examples_too_long`` (dropped by ``sft.max_length``).

    Raises:
        ValueError: no example fits ``sft.max_length``, bad data (see :func:`read_chats`), or a
            resumed run whose settings or examples differ from the saved ones.
        FileExistsError: ``sft.out_dir`` holds a run and ``resume`` is False.
        FileNotFoundError: ``resume`` and no run in ``sft.out_dir``; a missing data file.
    """
    from tqdm import tqdm

    from baselines.llm.policy import load_policy

    config.validate()
    sc, mc = config.sft, config.model
    set_torch_threads(sc.threads)
    out_dir = Path(sc.out_dir)
    metrics_path = out_dir / "metrics.jsonl"
    state = _open_run(out_dir, resume)
    saved_config = out_dir / "config.yaml"
    if state is not None and saved_config.is_file():
        _check_same_run(yaml.safe_load(saved_config.read_text()), dataclasses.asdict(config))
    chats = read_chats(sc.data)
    texts = _vocabulary(chats) if mc.path == "tiny" else None
    # Parameters and AdamW state stay float32; model.dtype only picks the autocast dtype.
    source = str(out_dir / "checkpoint") if state is not None else mc.path
    model, tokenizer = load_policy(
        source, device=mc.device, dtype="float32", texts=texts, seed=sc.seed
    )
    device = next(model.parameters()).device
    amp = resolve_autocast(mc.dtype, device)
    if progress:
        print(describe_precision(mc.dtype, device, amp), file=sys.stderr)
    if mc.gradient_checkpointing:
        set_checkpointing(model, True)
        model.config.use_cache = False
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
    digest = _examples_digest(kept)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=sc.lr, weight_decay=sc.weight_decay
    )
    done, epoch, index = 0, 0, 0  # optimizer steps finished; the next example's position
    if state is not None:
        if state.get("examples_sha256") != digest:
            raise ValueError(
                "--resume: the examples differ from the ones this run trained on (sft.data's "
                "file changed?); start a new run in another sft.out_dir"
            )
        optimizer.load_state_dict(
            torch.load(out_dir / "checkpoint" / "optimizer.pt", map_location=device)
        )
        done, epoch, index = int(state["step"]) + 1, int(state["epoch"]), int(state["index"])
        truncate_metrics_after(metrics_path, done + 1)  # lines of later steps run again
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_durable(saved_config, yaml.safe_dump(dataclasses.asdict(config), sort_keys=False))
    provenance.record(out_dir, resumed=state is not None, write=write_text_durable)

    per_epoch = math.ceil(len(kept) / sc.batch_size)
    total = sc.epochs * per_epoch
    stop = min(total, sc.max_steps) if sc.max_steps else total

    def write(folder: Path) -> dict[str, Any]:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        return {
            "epoch": epoch,
            "index": index,
            "finished": done >= total,
            "examples_sha256": digest,
        }

    tty = sys.stderr.isatty()
    bar = tqdm(
        total=stop,
        initial=min(done, stop),
        desc="sft",
        unit="step",
        file=sys.stderr,
        disable=not progress,
        mininterval=0.5 if tty else 60.0,  # a log file gets a frame a minute, not one a step
        dynamic_ncols=tty,
    )
    metrics: dict[str, float] = {}
    order, order_epoch = None, None
    model.train()
    try:
        while done < stop:
            if order_epoch != epoch:
                order, order_epoch = epoch_order(len(kept), sc.seed, epoch), epoch
            t0 = time.perf_counter()
            batch = [kept[i] for i in order[index : index + sc.batch_size]]
            optimizer.zero_grad(set_to_none=True)
            loss, tokens, micro = accumulate_gradients(
                model, batch, tokenizer.pad_token_id, sc.micro_batch_tokens, amp
            )
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), sc.grad_clip)
            optimizer.step()
            done += 1
            index += len(batch)
            metrics = {
                "step": float(done),
                "sft/epoch": epoch + index / len(kept),
                "sft/loss": loss,
                "sft/tokens": float(tokens),
                "sft/micro_batches": float(micro),
                "sft/grad_norm": float(grad_norm),
                "timing/step_s": time.perf_counter() - t0,
            }
            if index >= len(kept):
                epoch, index = epoch + 1, 0
            finite = {k: v if math.isfinite(v) else None for k, v in metrics.items()}
            append_metrics_line(metrics_path, json.dumps(finite, allow_nan=False))  # NaN as null
            bar.set_postfix(loss=f"{loss:.4f}", epoch=f"{metrics['sft/epoch']:.2f}", refresh=False)
            bar.update(1)
            if done == stop or (sc.save_every and done % sc.save_every == 0):
                save_checkpoint(out_dir, write, done - 1)
    finally:
        bar.close()
    model.eval()
    if not metrics:  # nothing left to run (a finished run resumed): its last line
        rows = read_metrics_lines(metrics_path)
        metrics = {k: v for k, v in rows[-1].items() if v is not None} if rows else {}
    metrics["sft/examples"] = float(len(kept))
    metrics["sft/examples_too_long"] = float(len(examples) - len(kept))
    return metrics


def main(argv: list[str] | None = None) -> int:
    """``python -m baselines.sft --config FILE [--resume] [--quiet] [section.key=value ...]``."""
    parser = argparse.ArgumentParser(
        prog="python -m baselines.sft",
        description="Fine-tune the policy on oracle chats from `agentgym export-sft` (loss on "
        "assistant tokens only); writes OUT_DIR/checkpoint for the RL trainer's model.path.",
        epilog=keys_help(SFTConfig(), "baselines/sft.py, SFTSettings; model: baselines/config.py"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(
        parser, "sft.out_dir", "YAML file with sections model and sft", " (sft.save_every)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_intermixed_args(argv)  # flags may sit between overrides
    try:
        config = load_sft_config(*resumed_config(args, "sft.out_dir", SFTConfig().sft.out_dir))
        metrics = train_sft(config, progress=not args.quiet, resume=args.resume)
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"baselines.sft: error: {err}", file=sys.stderr)
        return 2
    print(
        f"final loss {metrics.get('sft/loss', float('nan')):.4f} over "
        f"{int(metrics['sft/examples'])} examples; "
        f"checkpoint: {Path(config.sft.out_dir) / 'checkpoint'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
