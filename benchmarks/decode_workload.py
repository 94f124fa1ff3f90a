"""The decode workload that ``bench_decoding.py`` and ``bench_sampling.py`` share: the embedded
SmolLM2 on the CPU, ``--rows`` prompts of ``--prompt`` random token ids, ``--new`` tokens each,
on ``--threads`` torch threads (importable as ``decode_workload`` from a script in this folder,
as ``timing`` is)."""

from __future__ import annotations

import argparse
from typing import Any


def add_workload_options(parser: argparse.ArgumentParser, rows: int, prompt: int, new: int) -> None:
    """``--rows``, ``--prompt`` and ``--new`` with these defaults, and ``--threads`` (default 1)."""
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--prompt", type=int, default=prompt)
    parser.add_argument("--new", type=int, default=new)
    parser.add_argument("--threads", type=int, default=1)


def load_workload(rows: int, prompt: int) -> tuple[Any, Any, list[list[int]]]:
    """The embedded SmolLM2 (float32 on the CPU, in eval mode), its tokenizer, and ``rows``
    prompts of ``prompt`` token ids drawn uniformly from [100, 40000) by a generator seeded 0."""
    import torch

    from baselines.llm.policy import load_policy

    model, tok = load_policy("embedded", device="cpu", dtype="float32")
    model.eval()
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 40000, (prompt,), generator=g).tolist() for _ in range(rows)]
    return model, tok, prompts
