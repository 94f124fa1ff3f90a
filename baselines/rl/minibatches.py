"""PPO mini-batches: several optimizer steps per rollout batch, as RAGEN takes them.

With one optimizer step per rollout batch the PPO ratio ``pi / pi_old`` is exactly 1 at the only
step, so clipping never acts. RAGEN (through verl) splits each filtered batch into mini-batches of
``ppo_mini_batch_size`` sequences (``config/base.yaml:14,31``: 32 of 8 x 16 = 128, so 4 steps) and
takes one optimizer step per mini-batch; the later steps see a ratio away from 1. Because the size
is fixed, filtering also cuts the number of updates (``ragen/trainer/agent_trainer.py:1190-1203``:
``num_mini_batches = batch_size // ppo_mini_batch_size``). RAGEN first makes the batch size a
multiple of the mini-batch size by copying random samples (``adjust_batch``, ``:62-110``, mode
``"copy"``); here the last mini-batch is simply smaller, so no sequence counts twice.

Each mini-batch is then cut into micro-batches (one forward/backward each, gradients accumulated)
by :func:`pack_by_tokens`: rows sorted by length, packed while ``rows x longest row`` stays within a
token budget, so peak memory follows the budget, not the batch (verl's
``use_dynamic_bsz``/``ppo_max_token_len_per_gpu`` bounds micro-batches the same way).
"""

from __future__ import annotations

import torch

__all__ = ["minibatch_indices", "pack_by_tokens"]


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


def pack_by_tokens(lengths: list[int], max_tokens: int, max_rows: int = 0) -> list[list[int]]:
    """Micro-batches of row indices whose padded size ``rows x longest row`` fits ``max_tokens``.

    Rows are taken longest first (ties by index, so the packing is deterministic) and added to
    the current micro-batch while ``(rows + 1) * its longest row <= max_tokens`` and
    ``rows < max_rows``; a row longer than the budget forms a micro-batch of its own. Sorting by
    length keeps padding low: a micro-batch's rows differ in length only as much as neighbours
    in the sorted order do.

    Args:
        lengths: the real (unpadded) token count of each row, >= 0.
        max_tokens: padded tokens per micro-batch, >= 1.
        max_rows: most rows per micro-batch; 0 means no limit beyond the token budget.

    Returns:
        index lists covering ``range(len(lengths))`` once each, in packing order.

    Raises:
        ValueError: ``max_tokens < 1``, ``max_rows < 0`` or a negative length.

    Example:
        >>> pack_by_tokens([10, 300, 40, 290, 50], max_tokens=600)
        [[1, 3], [4, 2, 0]]
    """
    if max_tokens < 1 or max_rows < 0:
        raise ValueError(f"max_tokens must be >= 1 and max_rows >= 0; got {max_tokens}, {max_rows}")
    if any(n < 0 for n in lengths):
        raise ValueError("row lengths must be >= 0")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    packs: list[list[int]] = []
    longest = 0
    for i in order:
        if packs:
            current = packs[-1]
            fits_rows = not max_rows or len(current) < max_rows
            if fits_rows and (len(current) + 1) * longest <= max_tokens:
                current.append(i)
                continue
        packs.append([i])
        longest = max(1, lengths[i])
    return packs
