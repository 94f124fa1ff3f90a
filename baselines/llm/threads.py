"""CPU threads for torch that hold up when other processes share the cores: wait policy and count.

**Wait policy.** torch 2.13.0+cpu runs its intra-op threads, and those of the MKL and oneDNN
linked into it, on the GNU OpenMP runtime it bundles (``torch/lib/libgomp.so.1``, its only OpenMP
library: no Intel libiomp, so ``KMP_BLOCKTIME`` does nothing). With ``OMP_WAIT_POLICY`` unset, a
libgomp thread that waits for the others spins first (``GOMP_SPINCOUNT``: 300,000 rounds, per the
libgomp manual) and only then sleeps. When another process holds a core, the spinning thread takes
the time slices that the thread it waits for needs, at every operation.
``OMP_WAIT_POLICY=PASSIVE`` makes waiting threads sleep at once. libgomp reads these variables
once, when torch loads it, so :func:`set_omp_wait_policy` sets PASSIVE before the first ``import
torch`` of every entry point (``baselines/__init__.py``: the trainer, SFT, ``baselines.evaluate``,
the benchmarks, the ``hf:`` agent; ``agentgym eval`` before it loads any agent), unless the user
set a value, which is kept. That one function is torch-free and lives in :mod:`agentgym.threads`
(``agentgym eval`` needs it and ``agentgym`` imports nothing of ``baselines``); it is re-exported
here.

Measured by ``benchmarks/bench_threads.py``, two full runs (2026-12-01, 2 cores shared with other
engineers' test runs: load average 4.5-9.4 throughout, so "idle" means no busy process of ours
beside the run). Seconds, the two runs' medians of 3 (run 1 - run 2); generation: 4 rows x 32 new
tokens of SmolLM2-135M; update: forward, backward and AdamW on 4 x 256 tokens, 64 scored per row,
bf16 autocast; ``cut``: the 120 s cell limit ended the run first::

    policy                threads  generate idle / busy   update idle / busy   busy/idle gen, upd
    unset (spins)         1        4.3-4.7 / 4.8-6.0      5.2-5.5 / 7.3-7.4    1.1-1.3, 1.3-1.4
    unset (spins)         2        24-36 / 44, cut        15, cut / cut        >3.3, -
    PASSIVE               1        2.9-4.1 / 5.6-6.8      5.1-6.1 / 7.1-8.5    1.4-2.4, 1.2-1.7
    PASSIVE               2        4.7-5.1 / 6.1-7.8      6.1-6.4 / 8.1-8.3    1.3-1.5, 1.3
    GOMP_SPINCOUNT=10000  2        12 / 24                6.8 / 10.5           2.0, >1.6 (run 1)

Quick runs (4 x 16 tokens, 2 x 128 update) gave, at 2 threads idle, generation 17.5 s with
``OMP_WAIT_POLICY=ACTIVE`` and 16.9 s with ``KMP_BLOCKTIME=0`` (no effect: same as unset, 24.4 s)
against 4.4 s with PASSIVE; both cut at 60 s beside the busy process. With one thread the policy
cannot matter (no thread waits on another): the spread of the one-thread rows is the noise of the
shared machine. On a quiet machine (``MACHINE_NOTES``, 529 tokens of SmolLM2): unset, 2 threads
37-40 s idle and 280-304 s beside one busy process; 1 thread 18-20 s / 33-36 s; PASSIVE, 2 threads
15-24 s / 31-37 s.

**Count.** PASSIVE at two threads did not beat one thread, idle or busy (generation 1.1-1.8x
the one-thread time, updates 0.95-1.2x; on the quiet machine above, equal within noise), so the
count stays half the usable CPUs, at least one: the default of the trainer (``train.threads=0``),
SFT (``sft.threads=0``) and ``agentgym eval --threads``. It leaves room for the environments, the
tokenizer and other jobs; an explicit count is used as given.

This module imports torch only inside :func:`set_torch_threads`. ``agentgym eval --threads``
reaches it through the string entry point :data:`agentgym.cli.TORCH_THREADS_ENTRY_POINT`.
"""

from __future__ import annotations

import os

from agentgym.threads import OMP_WAIT_POLICY, OmpWaitPolicyWarning, set_omp_wait_policy

__all__ = [
    "OMP_WAIT_POLICY",
    "OmpWaitPolicyWarning",
    "set_omp_wait_policy",
    "usable_cpus",
    "resolve_threads",
    "set_torch_threads",
]


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
