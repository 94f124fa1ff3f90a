"""Train on any agentgym environment with Hugging Face TRL's ``GRPOTrainer`` (TRL 1.x).

TRL's multi-turn interface for environments that are not tools is ``rollout_func``: the trainer
hands it the prompts of a batch (each already repeated ``num_generations`` times) and takes back,
per prompt, the prompt token ids, the completion token ids and an ``env_mask`` (1 on tokens the
model sampled, 0 on tokens the environment wrote), plus any extra fields, which it passes to the
reward functions. :class:`AgentgymRollout` plays one agentgym episode per prompt:

* the prompt is the episode's first chat (:class:`agentgym.chat.ChatEpisode`, the same rendering
  the agentgym trainer and ``agentgym eval`` use) through the tokenizer's chat template;
* each turn the policy samples a reply (token ids kept exactly: token in, token out), the
  environment steps on it with its own invalid-action policy (``invalid_action`` env kwarg), and
  the next user message (reward, observation, turns left) is appended as environment tokens;
* the reward is the episode return (:func:`episode_return`, a TRL reward function).

Why ``rollout_func`` and not TRL's other multi-turn interface, ``environment_factory`` (TRL 1.x,
transformers >= 5.2): there the environment's public methods become *tools*; the model must call
them through its chat template's tool-calling syntax (``GRPOTrainer`` refuses a template that
cannot render tool calls), each call's result is appended as a tool message, and a reply without a
tool call ends the episode. agentgym environments take free-text turns (``action_format``: Sokoban
moves in ``<answer>Up || Left</answer>``, a Countdown expression, a bandit arm), score malformed
turns with their own invalid-action policy and send the next observation as a user message, so
``rollout_func`` keeps their interface and rendering unchanged (the same chats as ``agentgym
eval``) and works with any chat template. Both interfaces are marked experimental by TRL.

Example (the ten lines a TRL user writes)::

    from trl import GRPOConfig, GRPOTrainer
    from baselines.integrations.trl import AgentgymRollout, episode_return

    rollout = AgentgymRollout("Sokoban-v0", tokenizer, max_new_tokens=64)
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=episode_return,
        train_dataset=rollout.dataset(num_prompts=64), rollout_func=rollout,
        args=GRPOConfig(output_dir="runs/trl", num_generations=4, max_steps=100),
    )
    trainer.train()

Needs ``pip install 'agentgym[trl]'`` (TRL, datasets) and torch; this module imports them only
when used, so importing this module stays light. It lives in ``baselines`` (the LLM layer), not
in ``agentgym``, which imports no torch (the import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from agentgym.chat import ChatEpisode
from baselines.chat_template import render_chat_template

__all__ = ["AgentgymRollout", "episode_return"]


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            f"baselines.integrations.trl needs {err.name!r}: pip install 'agentgym[trl]' "
            "(and torch: pip install torch==2.13.0 on CPU)"
        ) from err


def episode_return(completions: list[Any], episode_return: list[float], **kwargs: Any) -> list:
    """TRL reward function: the return of each episode (the sum of its rewards).

    Args:
        completions: the trainer's decoded completions (one per episode; unused).
        episode_return: filled in by :class:`AgentgymRollout` (one float per episode).
    """
    return [float(r) for r in episode_return]


def _common_prefix_length(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class AgentgymRollout:
    """A TRL ``rollout_func`` that plays agentgym episodes (see the module docstring).

    Args:
        env_id: a registered id; the short form (``Sokoban-v0``) is accepted.
        tokenizer: the policy's tokenizer (with a chat template).
        env_kwargs: constructor arguments (e.g. ``{"max_turns": 3, "invalid_action": "penalize"}``).
        max_new_tokens: most tokens the policy samples per turn.
        max_turns: most turns per episode (``None``: the environment's own limit).
        seed: the reset seed of the dataset's first prompt (prompt i resets with ``seed + i``).

    Raises:
        ValueError: an unknown ``env_id``.
    """

    def __init__(
        self,
        env_id: str,
        tokenizer: Any,
        *,
        env_kwargs: dict[str, Any] | None = None,
        max_new_tokens: int = 64,
        max_turns: int | None = None,
        seed: int = 0,
    ):
        import agentgym

        registered = agentgym.registered_envs()
        if env_id not in registered and f"agentgym/{env_id}" in registered:
            env_id = f"agentgym/{env_id}"
        if env_id not in registered:
            raise ValueError(f"unknown environment id {env_id!r} (`agentgym list` shows them all)")
        self.env_id = env_id
        self.tokenizer = tokenizer
        self.env_kwargs = dict(env_kwargs or {})
        self.max_new_tokens = max_new_tokens
        self.max_turns = max_turns
        self.seed = seed
        self._seed_of: dict[str, int] = {}
        self.__name__ = "agentgym_rollout"  # TRL logs functions by name

    # ------------------------------------------------------------------ the dataset

    @staticmethod
    def _key(prompt: Any) -> str:
        return json.dumps(prompt, sort_keys=True, ensure_ascii=False)

    def dataset(self, num_prompts: int) -> Any:
        """A ``datasets.Dataset`` of ``num_prompts`` conversational prompts (column ``prompt``):
        the first chat of the episodes with seeds ``seed .. seed + num_prompts - 1``."""
        datasets = _require("datasets")
        prompts = []
        env = gym.make(self.env_id, **self.env_kwargs)
        try:
            for i in range(num_prompts):
                observation, info = env.reset(seed=self.seed + i)
                messages = ChatEpisode.from_reset(observation, info).messages()
                # Seeds with the same first chat play the same episode start; the first wins.
                self._seed_of.setdefault(self._key(messages), self.seed + i)
                prompts.append(messages)
        finally:
            env.close()
        return datasets.Dataset.from_dict({"prompt": prompts})

    # ------------------------------------------------------------------ the rollout

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return render_chat_template(
            self.tokenizer, messages, add_generation_prompt=generation_prompt
        )

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        """Play one episode per prompt with ``trainer``'s model; TRL's ``rollout_func`` contract.

        Returns:
            ``prompt_ids``, ``completion_ids``, ``env_mask`` (lists of int lists), ``logprobs``
            (None: TRL recomputes them), and per episode ``episode_return`` (float),
            ``success`` (bool), ``turns`` (int).
        """
        torch = _require("torch")
        model = trainer.accelerator.unwrap_model(trainer.model)
        device = next(model.parameters()).device
        episodes = []
        for prompt in prompts:
            key = self._key(prompt)
            if key not in self._seed_of:
                raise ValueError(
                    "a prompt that AgentgymRollout.dataset() did not make: build train_dataset "
                    "with rollout.dataset(num_prompts)"
                )
            env = gym.make(self.env_id, **self.env_kwargs)
            observation, info = env.reset(seed=self._seed_of[key])
            chat = ChatEpisode.from_reset(observation, info)
            text = self._render(chat.messages(), True)
            episodes.append(
                {
                    "env": env,
                    "chat": chat,
                    "text": text,  # the whole sequence so far, rendered
                    "prompt_ids": self._ids(text),
                    "completion": [],
                    "mask": [],
                    "return": 0.0,
                    "success": False,
                    "turns": 0,
                    "done": False,
                }
            )
        pad = self.tokenizer.pad_token_id
        temperature = getattr(trainer, "temperature", 1.0) or 1.0
        try:
            turn = 0
            while True:
                live = [e for e in episodes if not e["done"]]
                if not live or (self.max_turns is not None and turn >= self.max_turns):
                    break
                turn += 1
                rows = [e["prompt_ids"] + e["completion"] for e in live]
                width = max(len(r) for r in rows)
                ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)
                attn = torch.tensor(
                    [[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device
                )
                with torch.no_grad():
                    out = model.generate(
                        input_ids=ids,
                        attention_mask=attn,
                        max_new_tokens=self.max_new_tokens,
                        do_sample=True,
                        temperature=temperature,
                        pad_token_id=pad,
                    )
                eos = set(trainer.eos_token_ids) if hasattr(trainer, "eos_token_ids") else set()
                eos.add(self.tokenizer.eos_token_id)
                for e, row in zip(live, out[:, width:].tolist(), strict=True):
                    generated = []
                    for token in row:
                        generated.append(token)
                        if token in eos:
                            break
                    while generated and generated[-1] == pad and pad not in eos:
                        generated.pop()
                    self._step(e, generated)
        finally:
            for e in episodes:
                e["env"].close()
        return {
            "prompt_ids": [e["prompt_ids"] for e in episodes],
            "completion_ids": [e["completion"] for e in episodes],
            "env_mask": [e["mask"] for e in episodes],
            "logprobs": None,
            "episode_return": [e["return"] for e in episodes],
            "success": [e["success"] for e in episodes],
            "turns": [e["turns"] for e in episodes],
        }

    def _step(self, e: dict[str, Any], generated: list[int]) -> None:
        """Append the sampled ids (mask 1), step the env, append its next message (mask 0)."""
        reply = self.tokenizer.decode(generated, skip_special_tokens=True)
        e["completion"] += generated
        e["mask"] += [1] * len(generated)
        e["text"] += self.tokenizer.decode(generated, skip_special_tokens=False)
        observation, reward, terminated, truncated, info = e["env"].step(reply)
        e["chat"].record(reply, observation, reward, terminated, truncated, info)
        e["return"] += float(reward)
        e["turns"] += 1
        e["success"] = bool(info.get("success", False))
        if terminated or truncated:
            e["done"] = True
            return
        # The environment's part: everything the template writes after the reply (end of turn,
        # the next user message, the next assistant header), tokenized on its own.
        following = self._render(e["chat"].messages(), True)
        feedback = following[_common_prefix_length(e["text"], following) :]
        feedback_ids = self._ids(feedback)
        e["completion"] += feedback_ids
        e["mask"] += [0] * len(feedback_ids)
        e["text"] = following
