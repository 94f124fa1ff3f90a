"""CPU thread counts for torch that hold up when other processes share the cores.

torch starts one intra-op thread per core. When another process holds one of two cores, those two
threads wait on each other at every operation: a SmolLM2 decode step took 4 s instead of 0.09 s
(40x slower, measured on a 2-core machine; ``MACHINE_NOTES``). Half the usable CPUs, at least one,
leaves room for the environments, the tokenizer and other jobs, and is the default of the trainer
(``train.threads=0``) and of ``agentgym eval --threads``.

This module does not import torch at import time (``agentgym`` must import without torch).
"""

from __future__ import annotations

import os

__all__ = ["usable_cpus", "resolve_threads", "set_torch_threads"]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_threads(requested: int = 0) -> int:
    """The thread count for ``requested``: itself when > 0, else ``max(1, usable_cpus() // 2)``.

    Raises:
        ValueError: ``requested`` is negative or not an int.
    """
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 0:
        raise ValueError(f"threads must be a whole number >= 0 (0: automatic), got {requested!r}")
    return requested if requested > 0 else max(1, usable_cpus() // 2)


def set_torch_threads(requested: int = 0) -> int:
    """``torch.set_num_threads(resolve_threads(requested))``; returns the count set."""
    import torch

    n = resolve_threads(requested)
    torch.set_num_threads(n)
    return n
