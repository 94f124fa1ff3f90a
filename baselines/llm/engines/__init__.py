"""Rollout engines behind one protocol (:class:`RolloutEngine`): token ids in, token ids out.

:mod:`~baselines.llm.engines.base` holds the protocol, the settings and the shared stopping rule;
:mod:`~baselines.llm.engines.hf` the in-process transformers engine; :mod:`~baselines.llm.engines.vllm`
the vLLM engine. :func:`make_engine` builds the one ``rollout.engine`` names.
"""

from __future__ import annotations

from typing import Any

import torch

from baselines.llm.engines.base import (
    Generation,
    RolloutEngine,
    SamplingSettings,
    end_token_ids,
    logit_temperature,
    logprob_diff,
    recompute_logprobs,
)
from baselines.llm.engines.hf import (
    PREFILL_CHUNK_TOKENS,
    HFEngine,
    PrefixCache,
    generate,
    generate_cached,
    sample_rows,
)
from baselines.llm.engines.vllm import VLLMEngine, vllm_available

__all__ = [
    "SamplingSettings",
    "Generation",
    "RolloutEngine",
    "HFEngine",
    "VLLMEngine",
    "make_engine",
    "vllm_available",
    "vllm_dtype",
    "end_token_ids",
    "logit_temperature",
    "sample_rows",
    "generate",
    "generate_cached",
    "PrefixCache",
    "PREFILL_CHUNK_TOKENS",
    "recompute_logprobs",
    "logprob_diff",
]


def vllm_dtype(autocast_dtype: torch.dtype | None) -> str:
    """vLLM's weight dtype for a trainer whose passes run under ``autocast_dtype`` (None: float32,
    no autocast): ``"bfloat16"`` under bf16 autocast, as the HF engine samples then; otherwise
    ``"auto"``, :class:`VLLMEngine`'s own choice (bfloat16 on CUDA, float32 on CPU). Measured on
    the CPU build (``benchmarks/bench_generation.py --engines vllm``, 16 Sokoban episodes, one
    core): 146.3 s in float32, 65.6 s in bf16, against the HF engine's 113.5 s under bf16.

    Example:
        >>> vllm_dtype(torch.bfloat16), vllm_dtype(None), vllm_dtype(torch.float16)
        ('bfloat16', 'auto', 'auto')
    """
    return "bfloat16" if autocast_dtype == torch.bfloat16 else "auto"


def make_engine(
    name: str,
    model: Any,
    tokenizer: Any,
    *,
    max_model_len: int = 2048,
    seed: int = 0,
    max_batch_tokens: int = 0,
    kv_cache_bytes: int = 0,
    prefill_chunk_tokens: int = 0,
    gpu_memory_utilization: float = 0.3,
    tensor_parallel_size: int = 1,
    dtype: str = "auto",
) -> RolloutEngine:
    """Build the engine ``rollout.engine`` names: ``"auto"``, ``"hf"`` or ``"vllm"``.

    ``"auto"`` is vLLM when it is importable (:func:`vllm_available`) and the model has no LoRA
    adapter, else transformers. ``max_batch_tokens`` bounds the HF engine's decoding batches and
    ``kv_cache_bytes`` its keys and values kept between turns (:class:`HFEngine`, 0: no bound),
    ``prefill_chunk_tokens`` its prefill forwards (0: whole prompts); vLLM manages its own KV cache; ``gpu_memory_utilization`` and ``tensor_parallel_size`` go to
    :class:`VLLMEngine` (``rollout.vllm_*``), and ``dtype``, vLLM's weights (the trainer passes
    :func:`vllm_dtype` of its autocast).

    Raises:
        ValueError: an unknown name.
    """
    if name == "auto":
        name = "vllm" if vllm_available() and not hasattr(model, "peft_config") else "hf"
    if name == "hf":
        return HFEngine(
            model,
            tokenizer,
            max_batch_tokens=max_batch_tokens,
            kv_cache_bytes=kv_cache_bytes,
            prefill_chunk_tokens=prefill_chunk_tokens,
        )
    if name == "vllm":
        return VLLMEngine(
            model,
            tokenizer,
            max_model_len=max_model_len,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
        )
    raise ValueError(f"rollout.engine: must be one of ['auto', 'hf', 'vllm'], got {name!r}")
