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
import sys
import warnings

__all__ = [
    "OMP_WAIT_POLICY",
    "OmpWaitPolicyWarning",
    "set_omp_wait_policy",
    "usable_cpus",
    "resolve_threads",
    "set_torch_threads",
]

OMP_WAIT_POLICY = "PASSIVE"
"""The OpenMP wait policy set before torch loads, unless the user set one (see the module doc)."""

_warned = False


class OmpWaitPolicyWarning(RuntimeWarning):
    """torch was loaded before the wait policy could be set; its OpenMP threads spin."""


def set_omp_wait_policy() -> str | None:
    """``OMP_WAIT_POLICY=PASSIVE`` in ``os.environ`` unless set, while torch is not yet loaded.

    OpenMP reads the variable once, when torch loads its runtime, so this must run before the
    first ``import torch`` of the process: ``baselines/__init__.py``, :func:`set_torch_threads`
    and the ``hf:`` agent call it. A value the user set is kept, whatever it is. When torch is
    already loaded and the variable is unset, nothing can change the policy any more: one
    :class:`OmpWaitPolicyWarning` per process says so and how to fix it.

    Returns:
        the variable's value now (``None``: unset, torch loaded first).
    """
    global _warned
    if "torch" not in sys.modules:
        return os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
    value = os.environ.get("OMP_WAIT_POLICY")
    if value is None and not _warned:
        _warned = True
        warnings.warn(
            "torch was imported before agentgym/baselines could set OMP_WAIT_POLICY=PASSIVE, so "
            "its OpenMP threads spin while they wait: many times slower when another process "
            "shares the cores. Set OMP_WAIT_POLICY=PASSIVE in the environment, or import "
            "baselines before torch.",
            OmpWaitPolicyWarning,
            stacklevel=2,
        )
    return value


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
    """``torch.set_num_threads(resolve_threads(requested))``; returns the count set.

    Sets the OpenMP wait policy first (:func:`set_omp_wait_policy`), for callers that load
    torch here.
    """
    set_omp_wait_policy()
    import torch

    n = resolve_threads(requested)
    torch.set_num_threads(n)
    return n
