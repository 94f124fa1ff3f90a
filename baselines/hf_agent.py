"""The ``hf:`` agent of ``agentgym eval``: a local transformers causal LM (:class:`HFAgent`).

``agentgym eval --agent hf:PATH`` finds this class through the string entry point
``"baselines.hf_agent:HFAgent"`` (:data:`agentgym.agents.AGENT_ENTRY_POINTS`), imported when a spec
names ``hf:``, as Gymnasium imports an environment's ``entry_point``: ``agentgym`` imports neither
torch nor ``baselines``. Needs torch and transformers (``pip install 'agentgym[train]'``), imported
when an agent is built, so importing this module stays light.

Example:
    >>> from agentgym.agents import make_agent
    >>> agent = make_agent("hf:tiny", kwargs={"max_new_tokens": 8})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.agents import Agent, AgentError, AgentRequest
from agentgym.parsing import THINK_OPEN

__all__ = ["HFAgent"]


class HFAgent(Agent):
    """A local transformers causal LM, played exactly as the trainer plays it.

    Generation and prompt building are the trainer's own: :class:`baselines.llm.engines.HFEngine`
    generates, and one
    :class:`baselines.llm.prompts.TokenContext` per episode builds each turn's prompt as token ids
    (the chat template's text tokenised once, earlier replies kept as the ids sampled, the
    ``<think>`` prefix in the ``think_answer`` format) under the episode loop's one prompt policy
    (:func:`baselines.llm.prompts.turn_prompt`). A checkpoint is therefore scored on
    exactly the prompts it was trained on (the same stop rules, end tokens and dtype as
    ``python -m baselines.train``). Each turn of every live episode in a batch is one
    ``generate`` call; a reply stops at an end token, at ``</answer>`` or at ``max_new_tokens``.

    Args:
        path: a local checkpoint folder, ``"embedded"`` (SmolLM2-135M-Instruct) or ``"tiny"`` (the
            trainer's random-init word-level test policy, :func:`baselines.llm.policy.load_policy`).
        max_new_tokens: tokens generated per turn.
        temperature: 0 for greedy decoding (default), else sampling with ``top_p``.
        top_p: nucleus mass when sampling.
        batch_size: episodes per ``generate`` call.
        think_prefix: start every reply with ``<think>`` (``think_answer`` format only).
        max_context_tokens: a prompt longer than this minus ``max_new_tokens`` fails its episode
            (:func:`baselines.llm.prompts.prompt_fits`, the trainer's rule, where training ends
            the episode as truncated).
        device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.
        dtype: ``"auto"`` (bfloat16 on CUDA, float32 on CPU, as the trainer), ``"float32"`` or
            ``"bfloat16"``.
        seed: torch seed for sampling.

    Attributes:
        prompt_ids: per episode index, the prompt ids given to the engine on each turn so far
            (the latest run of that index).

    Raises:
        FileNotFoundError: ``path`` is not a checkpoint folder.
        ModuleNotFoundError: torch or transformers missing.
    """

    def __init__(
        self,
        path: str,
        *,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        batch_size: int = 16,
        think_prefix: bool = True,
        max_context_tokens: int = 4096,
        device: str = "auto",
        dtype: str = "auto",
        seed: int = 0,
    ):
        super().__init__()
        # Imported here, not at the top: `import baselines.hf_agent` (make_agent resolves the
        # hf: entry point) stays light, and a missing torch gives this message. The OpenMP wait
        # policy is already set: `import baselines` sets it (baselines/__init__.py).
        try:
            import torch

            from baselines.config import sampling_settings
            from baselines.llm.engines import HFEngine
            from baselines.llm.policy import EMBEDDED_MODEL_NAME, load_policy, resolve_model_path
        except ModuleNotFoundError as err:
            raise ModuleNotFoundError(
                f"the hf: agent needs torch and transformers ({err}); "
                "pip install torch==2.13.0 'agentgym[train]'"
            ) from err

        # "tiny": the trainer's random-init test policy (baselines.llm.policy), no files.
        folder = Path("tiny") if path == "tiny" else resolve_model_path(path)
        source = path if path in ("embedded", "tiny") else str(folder)
        self.model, self.tokenizer = load_policy(source, device=device, dtype=dtype, seed=seed)
        self.model.eval()
        self.device = next(self.model.parameters()).device
        self.engine = HFEngine(self.model, self.tokenizer)
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.batch_size = int(batch_size)
        self.think_prefix = bool(think_prefix)
        self.max_context_tokens = int(max_context_tokens)
        self.sampling = sampling_settings(self)  # the attributes above, by the same names
        self.seed = int(seed)
        self._contexts: dict[int, Any] = {}
        self.prompt_ids: dict[int, list[list[int]]] = {}
        torch.manual_seed(self.seed)
        model_name = EMBEDDED_MODEL_NAME if path == "embedded" else Path(folder).name
        if path != "embedded" and model_name.startswith("checkpoint"):
            # A trainer's run folder holds checkpoint/ (and checkpoint-<step>/): name the run,
            # or every trained model is "hf:checkpoint" on the leaderboard.
            model_name = f"{Path(folder).resolve().parent.name}/{model_name}"
        self.name = f"hf:{model_name}"
        decoding = "greedy" if self.temperature == 0 else f"T={self.temperature:g}, top_p={top_p}"
        self.description = (
            f"{model_name} zero-shot through the chat layer ({decoding}, "
            f"{self.max_new_tokens} new tokens per turn"
            f"{', reply starts with ' + THINK_OPEN if self.think_prefix else ''})"
        )
        self.settings = {
            "path": path,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "batch_size": self.batch_size,
            "think_prefix": self.think_prefix,
            "max_context_tokens": self.max_context_tokens,
            "seed": self.seed,
            "device": self.device.type,
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
        }

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        """One reply per request: its text (the think prefix included), or an
        :class:`~agentgym.agents.AgentError` where the prompt no longer fits the context budget
        (:func:`baselines.llm.prompts.prompt_fits`, the episode loop's rule; evaluation fails
        the episode where training truncates it, as a bundle holds whole episodes)."""
        from baselines.llm.prompts import TokenContext, prompt_fits, think_prefix_for

        out: list[str | AgentError] = [AgentError("not generated")] * len(requests)
        prefixes, prompts, fits = [], [], []
        for i, r in enumerate(requests):
            prefix = think_prefix_for(self.sampling, r.action_format)
            if r.turn == 1 or r.episode not in self._contexts:
                self._contexts[r.episode] = TokenContext(self.tokenizer, prefix)
                self.prompt_ids[r.episode] = []
            ids = self._contexts[r.episode].prompt(r.messages)
            prefixes.append(prefix)
            prompts.append(ids)
            self.prompt_ids[r.episode].append(ids)
            if prompt_fits(ids, self.sampling):
                fits.append(i)
            else:
                out[i] = AgentError(
                    f"prompt of {len(ids)} tokens + {self.sampling.max_new_tokens} new tokens "
                    f"exceeds max_context_tokens={self.sampling.max_context_tokens}"
                )
        if not fits:
            return out
        generations = self.engine.generate([prompts[i] for i in fits], self.sampling)
        for i, gen in zip(fits, generations, strict=True):
            self._contexts[requests[i].episode].add(gen)
            out[i] = prefixes[i] + gen.text
        return out

    def close(self) -> None:
        self.model = None
        self.engine = None
        self._contexts.clear()
