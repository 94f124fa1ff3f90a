"""Scoring log p(z | x) with a causal LM: the matrix ``loglik[m, j] = log p(z_m | x_j)`` that the
MI estimate (:mod:`baselines.collapse.mi`) reads (RAGEN-2's teacher-forced cross-scoring).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor

from baselines.collapse.mi import mi_metrics
from baselines.collapse.reasoning import reasoning_span
from baselines.llm.scoring import head_logprobs, logprobs_from_logits, trunk

__all__ = [
    "score_matrix",
    "score_matrix_naive",
    "episode_mi_diagnostics",
]


@contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) for the duration, then the model's previous mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the KV-cache argument: ``cache`` (transformers >= 5.x) or ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _output_cache(output: object) -> object:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _check_ids(
    prompts_ids: Sequence[Sequence[int]], reasonings_ids: Sequence[Sequence[int]]
) -> None:
    if len(prompts_ids) == 0 or len(reasonings_ids) == 0:
        raise ValueError("need at least one prompt and one reasoning")
    for j, x in enumerate(prompts_ids):
        if len(x) == 0:
            raise ValueError(f"prompt {j} is empty; a prompt needs at least one token (e.g. BOS)")


def _pad_right(seqs: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad with token 0 (never attended to, never scored); returns (ids, mask) [b, L]."""
    width = max(1, max(len(s) for s in seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[r, : len(s)] = 1
    return ids.to(device), mask.to(device)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def score_matrix(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    reasonings_ids: Sequence[Sequence[int]],
    batch_size: int = 16,
    temperature: float = 1.0,
) -> Tensor:
    """``log p(z_m | x_j)`` for every reasoning and prompt, reusing each prompt's KV cache.

    For each prompt x_j: one forward pass over x_j with ``use_cache=True`` gives its key/value
    cache and the next-token distribution for the first token of z. Then the reasonings are scored
    in batches of ``batch_size`` continuing from that cache, copied and repeated along the batch
    dimension (``Cache.batch_repeat_interleave``): the prompt is encoded K times in all, instead of
    M * K times as in :func:`score_matrix_naive`. The trunk runs without the LM head, which then
    reads only the scored positions (:func:`baselines.llm.scoring.head_logprobs`): memory follows
    the number of z tokens, never ``[batch, width, V]``. Reasonings are sorted by length before batching
    (less padding), right-padded, given position ids ``len(x_j) + t`` and an attention mask of ones
    over the prompt and the real z tokens; padded positions are never scored. Log-probabilities are
    taken in float32.

    ``prompts_ids[j]`` is every token that precedes the reasoning in the policy's context (chat
    template and the opening ``<think>`` included); ``reasonings_ids[m]`` the reasoning tokens.

    Args:
        model: a Hugging Face causal LM (``AutoModelForCausalLM``-compatible, with a cache that
            supports ``copy.deepcopy`` and ``batch_repeat_interleave``, e.g. ``DynamicCache``).
            Run in eval mode for the call; its previous mode is restored.
        prompts_ids: K token-id lists, each non-empty.
        reasonings_ids: M token-id lists; an empty one scores 0 (log 1).
        batch_size: reasonings per forward pass, >= 1.
        temperature: logits are divided by it (the sampling temperature: z is scored under the
            distribution it was sampled from), > 0.

    Returns:
        float32 CPU tensor ``[M, K]``.

    Raises:
        ValueError: no prompts or reasonings, an empty prompt, ``batch_size < 1`` or
            ``temperature <= 0``.
    """
    _check_ids(prompts_ids, reasonings_ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")
    device = _model_device(model)
    body = trunk(model)
    cache_kw = _cache_kwarg(body)
    num_z = len(reasonings_ids)
    order = sorted(range(num_z), key=lambda m: -len(reasonings_ids[m]))
    batches = []
    for start in range(0, num_z, batch_size):
        members = order[start : start + batch_size]
        ids, mask = _pad_right([reasonings_ids[m] for m in members], device)
        batches.append((torch.tensor(members), ids, mask))

    out = torch.zeros(num_z, len(prompts_ids), dtype=torch.float32)
    with _eval_mode(model):
        for j, prompt in enumerate(prompts_ids):
            prompt_len = len(prompt)
            x = torch.as_tensor([list(prompt)], dtype=torch.long, device=device)
            encoded = body(input_ids=x, use_cache=True)
            prompt_cache = _output_cache(encoded)
            # The prompt's last position predicts the first reasoning token: its hidden state
            # alone goes through the head.
            last = encoded.last_hidden_state[0, -1:]
            for members, ids, mask in batches:
                b, width = ids.shape
                first, _ = head_logprobs(
                    model, last.expand(b, -1), ids[:, 0], temperature=temperature
                )
                total = first * mask[:, 0]
                if width > 1:
                    cache = copy.deepcopy(prompt_cache)
                    cache.batch_repeat_interleave(b)
                    inputs = ids[:, :-1]
                    attention = torch.cat(
                        [torch.ones(b, prompt_len, dtype=mask.dtype, device=device), mask[:, :-1]],
                        dim=1,
                    )
                    positions = torch.arange(prompt_len, prompt_len + width - 1, device=device)
                    hidden = body(
                        input_ids=inputs,
                        attention_mask=attention,
                        position_ids=positions.unsqueeze(0).expand(b, -1),
                        use_cache=True,
                        **{cache_kw: cache},
                    ).last_hidden_state
                    # The head reads only the real z positions (never a [b, width, V] tensor).
                    rows, cols = mask[:, 1:].bool().nonzero(as_tuple=True)
                    lp, _ = head_logprobs(
                        model, hidden[rows, cols], ids[rows, cols + 1], temperature=temperature
                    )
                    total = total.float().index_add(0, rows, lp)
                out[members, j] = total.float().cpu()
    return out


@torch.no_grad()
def score_matrix_naive(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    reasonings_ids: Sequence[Sequence[int]],
    batch_size: int = 16,
) -> Tensor:
    """Reference for :func:`score_matrix`: teacher-force ``x_j + z_m`` afresh for every pair.

    All M * K concatenations are right-padded and run in batches of ``batch_size`` without a
    cache; the log-probabilities of the z tokens (positions ``len(x_j) .. len(x_j) + len(z_m) - 1``,
    predicted by the logits one position earlier) are summed. Same arguments, result and errors
    as :func:`score_matrix`; K times more prompt tokens go through the model.
    """
    _check_ids(prompts_ids, reasonings_ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    device = _model_device(model)
    pairs = [(m, j) for j in range(len(prompts_ids)) for m in range(len(reasonings_ids))]
    out = torch.zeros(len(reasonings_ids), len(prompts_ids), dtype=torch.float32)
    with _eval_mode(model):
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            seqs = [list(prompts_ids[j]) + list(reasonings_ids[m]) for m, j in chunk]
            ids, mask = _pad_right(seqs, device)
            logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
            token_logprobs = logprobs_from_logits(logits[:, :-1], ids[:, 1:])
            score_mask = torch.zeros_like(token_logprobs)
            for r, (m, j) in enumerate(chunk):
                first = len(prompts_ids[j]) - 1
                score_mask[r, first : first + len(reasonings_ids[m])] = 1.0
            totals = (token_logprobs * score_mask).sum(dim=1).float().cpu()
            for r, (m, j) in enumerate(chunk):
                out[m, j] = totals[r]
    return out


def episode_mi_diagnostics(
    model: torch.nn.Module,
    tokenizer: object,
    episodes: Sequence[object],
    config: object,
    *,
    seed: int,
    step: int,
    temperature: float,
) -> dict[str, float]:
    """MI diagnostics of a batch of played episodes, scored at the sampling temperature.

    One function for the agentgym trainer (``Trainer._diagnostics``) and the TRL integration
    (:class:`baselines.integrations.trl.AgentgymGRPOTrainer`). z is RAGEN-2's reasoning taken
    token-exact (:func:`baselines.collapse.reasoning.reasoning_span`: the sampled ids between the
    think tags of a block that opens the reply; empty, unclosed and special-id spans dropped). Up to
    ``config.max_pairs`` pairs are drawn among the valid z (``numpy`` generator seeded
    ``seed * 7919 + step``), scored by :func:`score_matrix` against every distinct prompt.

    Args:
        model: the policy (put in eval mode by the caller; scored under ``torch.no_grad``).
        tokenizer: its tokenizer.
        episodes: :class:`baselines.episodes.EpisodeRecord` of the batch, before filtering.
        config: a :class:`baselines.config.DiagnosticsConfig` (``turn``, ``max_pairs``,
            ``permutations``).
        seed: the run's seed; step: the step (seeds the pair draw and the permutations).
        temperature: the divisor of the logits (the sampling temperature, 1 for greedy).

    Returns:
        :func:`mi_metrics`' values and ``num_pairs_total`` (candidate turns),
        ``num_pairs_valid`` (valid z among them), ``valid_thinking_rate``, ``z_special_rate``
        (share dropped for a special id), ``num_reasonings`` and ``num_prompts`` (the scored pairs
        and their distinct prompts), as floats; only these when fewer than 2 distinct prompts
        keep a z.
    """
    import numpy as np

    turns = []
    for episode in episodes:
        turns.extend(episode.turns[:1] if config.turn == "first" else episode.turns)
    # One rule for z (reasoning_span): the exact sampled ids of a think block that opens
    # the reply; a block holding a special id is dropped, never spliced. Pairs are drawn
    # among the valid z, as RAGEN samples among valid reasonings.
    spans = [reasoning_span(tokenizer, t) for t in turns]
    valid = [(tuple(t.sample.prompt_ids), z) for t, (z, ok) in zip(turns, spans, strict=True) if z]
    stats = {
        "num_pairs_total": float(len(turns)),
        "num_pairs_valid": float(len(valid)),
        "valid_thinking_rate": len(valid) / len(turns) if turns else 0.0,
        "z_special_rate": (sum(ok == "special" for _, ok in spans) / len(turns) if turns else 0.0),
    }
    rng = np.random.default_rng(seed * 7919 + step)
    pairs = valid
    if len(pairs) > config.max_pairs:
        pick = np.sort(rng.choice(len(pairs), size=config.max_pairs, replace=False))
        pairs = [pairs[i] for i in pick]
    prompts = sorted({p for p, _ in pairs})
    stats["num_reasonings"], stats["num_prompts"] = float(len(pairs)), float(len(prompts))
    if len(prompts) < 2:
        return stats
    index = {p: j for j, p in enumerate(prompts)}
    z_ids = [z for _, z in pairs]
    with torch.no_grad():
        loglik = score_matrix(
            model, [list(p) for p in prompts], z_ids, batch_size=8, temperature=temperature
        )
    prompt_index = torch.tensor([index[p] for p, _ in pairs])
    lengths = torch.tensor([len(z) for z in z_ids])
    out = mi_metrics(
        loglik, prompt_index, lengths=lengths, num_permutations=config.permutations, seed=step
    )
    out.update(stats)
    return out
