"""PPO's critic: a value head on the policy's trunk, or a separate critic model (``algorithm.critic``).

``head`` (the default): :class:`ValueHead`, one linear layer on the policy's last hidden state,
trained with the policy in one AdamW (its own learning rate ``algorithm.critic_lr``); the value
loss, weighted by ``algorithm.value_coef``, reaches the shared trunk.

``model`` (RAGEN-2 / verl): :class:`CriticModel`, a second causal LM initialised from the same
checkpoint as the policy (RAGEN ``config/base.yaml:76-87``: ``critic.model.path: ${model_path}``,
``optim.lr: 1e-5``) with a zero-initialised :class:`ValueHead` on *its* last hidden state. It has
its own AdamW and gradient clipping and learns from the value loss alone; the policy's loss has
no value term (verl's critic worker updates it apart from the actor:
``ragen/workers/critic/dp_critic.py:191-271`` in mll-lab-nu/RAGEN, whose loss is ``vf_loss``
with no coefficient, lines 244-257). verl builds it as ``AutoModelForTokenClassification`` with
one label (``ragen/workers/fsdp_workers.py:231``), i.e. a linear layer on the last hidden state,
as here; the LM head of the copy is kept but never read, so it gets no gradient and no AdamW
state. With ``model.lora_rank > 0`` the critic gets its own LoRA adapter (and a full, trained
value head) on its own frozen copy of the base weights, as RAGEN's critic reads
``lora_rank: ${lora.rank}`` (``config/base.yaml:81``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from baselines.llm.scoring import hidden_states

__all__ = ["ValueHead", "CriticModel", "save_trainable", "load_trainable"]


class ValueHead(torch.nn.Module):
    """A linear value head on the last hidden state: ``[B, T, H] -> [B, T]``, float32 weights.

    Under bf16 autocast the linear layer itself runs in bf16 (as verl's value head does); callers
    cast the values to float32 (:class:`CriticModel`, the trainer's scoring pass)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.float()).squeeze(-1)


class CriticModel(torch.nn.Module):
    """A causal LM's trunk and a :class:`ValueHead`: the value of every predicting position.

    Args:
        model: a Hugging Face causal LM (or a peft model around one); its head is not used.
        hidden_size: the width of its last hidden state.

    ``forward(input_ids [B, T], attention_mask [B, T])`` returns float32 ``[B, T-1]``: column t
    is the value at position t, the one that predicts ``input_ids[:, t + 1]`` (the columns of a
    loss mask, as :func:`baselines.llm.scoring.score_targets` reads them).
    """

    def __init__(self, model: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.model = model
        self.value_head = ValueHead(hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        values = self.value_head(hidden_states(self.model, input_ids, attention_mask)[:, :-1])
        # Under bf16 autocast the head's linear layer computes in bf16. A fresh tensor, never a
        # view: FSDP2 hooks the root's output for its backward (an in-place op on a view would
        # drop the hook, and torch warns of it whenever the output is one).
        return values.to(torch.float32, copy=True)


def save_trainable(
    module: torch.nn.Module, path: Path, whole: dict[str, torch.Tensor] | None = None
) -> None:
    """The trainable parameters of ``module`` (by name; a tied weight once) as safetensors;
    their values taken from ``whole`` when given (``module``'s state dict gathered from
    shards, :meth:`baselines.distributed.Ranks.full_state`), else from ``module``."""
    from safetensors.torch import save_file

    state = {
        name: (p if whole is None else whole[name]).detach().cpu().contiguous()
        for name, p in module.named_parameters()
        if p.requires_grad
    }
    save_file(state, str(path))


def load_trainable(module: torch.nn.Module, path: Path) -> None:
    """Load :func:`save_trainable`'s file into ``module`` built the same way, in place.

    Raises:
        ValueError: the file lacks one of ``module``'s trainable parameters or holds a name
            ``module`` does not have (another critic layout, e.g. LoRA against full weights).
    """
    from safetensors.torch import load_file

    state = load_file(str(path))
    wanted = {name for name, p in module.named_parameters() if p.requires_grad}
    missing, unexpected = sorted(wanted - state.keys()), sorted(state.keys() - wanted)
    if missing or unexpected:
        raise ValueError(
            f"{path}: not this critic's parameters (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]}); was it saved with other model.* settings?"
        )
    module.load_state_dict(state, strict=False)
