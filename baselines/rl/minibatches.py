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

__all__ = ["minibatch_indices", "pack_by_tokens", "split_packs"]


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


def split_packs(packs: list[list[int]], count: int) -> list[list[int] | None]:
    """``packs`` made into exactly ``count`` micro-batches, for ranks that must run as many.

    Under DDP every rank must take part in each gradient all-reduce, and under FSDP in each
    all-gather and reduce-scatter: every rank runs the same number of micro-batches per
    optimizer step, whatever its rows. verl does the same (``same_micro_num_in_dp`` of
    ``verl/utils/seqlen_balancing.py``, ``rearrange_micro_batches``: the micro-batch count is the
    maximum over data-parallel ranks). Here the pack with the most rows (the first such) is cut
    in two (its first ``ceil(n / 2)`` rows, then the rest, order kept) until there are
    ``count``; when every pack holds one row and there are still too few, ``None`` entries pad
    the list to ``count``: a rank runs a zero-weighted pass in their place (a *dummy*
    micro-batch, which adds exactly zero to the gradient).

    Args:
        packs: micro-batches of row indices (:func:`pack_by_tokens`), possibly empty.
        count: micro-batches wanted, ``>= len(packs)``.

    Returns:
        ``count`` entries: the rows of ``packs`` once each, in order, then ``None`` padding.

    Raises:
        ValueError: ``count < len(packs)``.

    Example:
        >>> split_packs([[4, 1, 2], [0]], 3)
        [[4, 1], [2], [0]]
        >>> split_packs([[4, 1, 2], [0]], 4)
        [[4], [1], [2], [0]]
        >>> split_packs([[3], [0]], 3)
        [[3], [0], None]
        >>> split_packs([], 1)
        [None]
    """
    if count < len(packs):
        raise ValueError(f"split_packs: count={count} is below the {len(packs)} packs given")
    out: list[list[int]] = [list(p) for p in packs]
    while len(out) < count:
        widest = max(range(len(out)), key=lambda i: len(out[i]), default=None)
        if widest is None or len(out[widest]) < 2:
            break
        rows = out[widest]
        half = (len(rows) + 1) // 2
        out[widest : widest + 1] = [rows[:half], rows[half:]]
    return [*out, *([None] * (count - len(out)))]
