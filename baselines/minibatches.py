"""PPO mini-batches: several optimizer steps per rollout batch, as RAGEN takes them.

With one optimizer step per rollout batch the PPO ratio ``pi / pi_old`` is exactly 1 at the only
step, so clipping never acts. RAGEN (through verl) splits each filtered batch into mini-batches of
``ppo_mini_batch_size`` sequences (``config/base.yaml:14,31``: 32 of 8 x 16 = 128, so 4 steps) and
takes one optimizer step per mini-batch; the later steps see a ratio away from 1. Because the size
is fixed, filtering also cuts the number of updates (``ragen/trainer/agent_trainer.py:1190-1203``:
``num_mini_batches = batch_size // ppo_mini_batch_size``). RAGEN first makes the batch size a
multiple of the mini-batch size by copying random samples (``adjust_batch``, ``:62-110``, mode
``"copy"``); here the last mini-batch is simply smaller, so no sequence counts twice.
"""

from __future__ import annotations

import torch

__all__ = ["minibatch_indices"]


def minibatch_indices(
    num_sequences: int,
    mini_batch_size: int,
    *,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Split ``range(num_sequences)`` into mini-batches of ``mini_batch_size``, one step each.

    Args:
        num_sequences: sequences in the (filtered) batch, >= 0.
        mini_batch_size: sequences per optimizer step, >= 0; 0 means the whole batch in one step
            (the old behaviour).
        generator: if given, the order is a ``torch.randperm`` from it (verl's ``shuffle``);
            ``None`` keeps the batch order (verl's default, ``shuffle: False``).

    Returns:
        a list of ``ceil(num_sequences / mini_batch_size)`` index lists (``[]`` for an empty
        batch); every index appears exactly once; all but the last have ``mini_batch_size``.

    Raises:
        ValueError: a negative argument.

    Example:
        >>> minibatch_indices(5, 2)
        [[0, 1], [2, 3], [4]]
    """
    if num_sequences < 0 or mini_batch_size < 0:
        raise ValueError(
            f"num_sequences and mini_batch_size must be >= 0; got {num_sequences}, "
            f"{mini_batch_size}"
        )
    if num_sequences == 0:
        return []
    if generator is None:
        order = list(range(num_sequences))
    else:
        order = torch.randperm(num_sequences, generator=generator).tolist()
    size = mini_batch_size or num_sequences
    return [order[start : start + size] for start in range(0, num_sequences, size)]
