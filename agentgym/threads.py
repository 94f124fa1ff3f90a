"""The OpenMP wait policy torch's CPU threads run with, set before torch loads (torch-free).

``OMP_WAIT_POLICY=PASSIVE`` makes a waiting OpenMP thread sleep at once instead of spinning, which
is many times faster when other processes share the cores (the measurements, and the thread count
that goes with them, are in :mod:`baselines.llm.threads`). OpenMP reads the variable once, when torch
loads it, so it must be set before the first ``import torch`` of the process.

It lives in ``agentgym``, not beside the rest of the LLM layer in ``baselines``, because
``agentgym eval`` must set it before it loads any agent that may load torch (``hf:``, whose
code is in ``baselines``, or a Python agent of the user's), and ``agentgym`` imports neither
torch nor ``baselines``. :func:`set_omp_wait_policy` only sets an environment variable:
``baselines/__init__.py`` calls it (every ``baselines`` entry point, the ``hf:`` agent) and
:mod:`baselines.llm.threads` re-exports it.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["OMP_WAIT_POLICY", "OmpWaitPolicyWarning", "set_omp_wait_policy"]

OMP_WAIT_POLICY = "PASSIVE"
"""The OpenMP wait policy set before torch loads, unless the user set one (see the module doc)."""

_warned = False


class OmpWaitPolicyWarning(RuntimeWarning):
    """torch was loaded before the wait policy could be set; its OpenMP threads spin."""


def set_omp_wait_policy() -> str | None:
    """``OMP_WAIT_POLICY=PASSIVE`` in ``os.environ`` unless set, while torch is not yet loaded.

    OpenMP reads the variable once, when torch loads its runtime, so this must run before the
    first ``import torch`` of the process: ``baselines/__init__.py`` (every ``baselines`` entry
    point and the ``hf:`` agent) and ``agentgym eval`` call it. A value the user set is kept,
    whatever it is. When torch is already loaded and the variable is unset, nothing can change
    the policy any more: one :class:`OmpWaitPolicyWarning` per process says so and how to fix it.

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
