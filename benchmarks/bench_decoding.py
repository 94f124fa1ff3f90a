"""The HF engine's decoding loop, side by side: transformers' ``DynamicCache`` (a ``torch.cat`` of
every layer's keys and values at each step, the engine before) against the in-place reserved
buffer (:func:`baselines.llm.engines.hf._decoding_cache`), both prefilling each prompt whole, and the
reserved buffer with chunked prefill (``--prefill-chunk`` tokens a forward, the engine's default).

Usage::

    python benchmarks/bench_decoding.py [--rows 16] [--prompt 600] [--new 64] [--threads 1]
        [--prefill-chunk 2048]

Each variant runs in its own child process (so peak RSS is its own: ``ru_maxrss``) on the
embedded SmolLM2 under bf16 autocast where the CPU has it: ``--rows`` prompts of ``--prompt``
random token ids, greedy, ``--new`` tokens each (no stop). Printed: seconds, tokens/s, peak RSS
and its rise over the loaded model, and whether both variants sampled the same ids. Never run
by tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from decode_workload import add_workload_options, load_workload

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from baselines.llm.engines import PREFILL_CHUNK_TOKENS  # noqa: E402


def child(variant: str, rows: int, prompt: int, new: int, threads: int, chunk: int) -> None:
    """One variant in this process: print its seconds, tokens, peak RSS and sampled ids as JSON."""
    import resource
    import time

    from agentgym.threads import set_omp_wait_policy

    set_omp_wait_policy()
    import torch

    from baselines.llm.engines import SamplingSettings, generate_cached
    from baselines.llm.engines import hf as engines
    from baselines.llm.scoring import autocast, resolve_autocast

    torch.set_num_threads(threads)
    if variant == "concatenating":
        from transformers import DynamicCache

        engines._decoding_cache = lambda model, capacity: DynamicCache(config=model.config)
    model, tok, prompts = load_workload(rows, prompt)
    sampling = SamplingSettings(max_new_tokens=new, temperature=0.0, stop_strings=())
    amp = resolve_autocast("auto", "cpu")
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with autocast("cpu", amp):
        out = generate_cached(
            model, tok, prompts, sampling, prefill_chunk_tokens=chunk if variant == "chunked" else 0
        )
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {
        "seconds": seconds,
        "tokens": sum(len(o.sampled_ids) for o in out),
        "peak_gb": peak * 1024 / 1e9,
        "rise_gb": (peak - loaded) * 1024 / 1e9,
        "ids": [o.sampled_ids for o in out],
    }
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_options(parser, rows=16, prompt=600, new=64)
    parser.add_argument(
        "--prefill-chunk",
        type=int,
        default=PREFILL_CHUNK_TOKENS,
        help="tokens per prefill forward of the chunked variant (default: the engine's)",
    )
    variants = ("concatenating", "reserved", "chunked")
    parser.add_argument("--child", choices=variants, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows, args.prompt, args.new, args.threads, args.prefill_chunk)
        return
    results = {}
    for variant in variants:
        cmd = [sys.executable, __file__, "--child", variant, "--rows", str(args.rows)]
        cmd += [
            "--prompt",
            str(args.prompt),
            "--new",
            str(args.new),
            "--threads",
            str(args.threads),
            "--prefill-chunk",
            str(args.prefill_chunk),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"{args.rows} rows x {args.prompt} prompt tokens, {args.new} new, {args.threads} thread(s); "
        f"chunked: {args.prefill_chunk} tokens a prefill forward"
    )
    print(f"{'variant':<14} {'seconds':>8} {'tokens/s':>9} {'peak GB':>8} {'rise GB':>8}")
    for variant, r in results.items():
        print(
            f"{variant:<14} {r['seconds']:>8.1f} {r['tokens'] / r['seconds']:>9.1f} "
            f"{r['peak_gb']:>8.2f} {r['rise_gb']:>8.2f}"
        )
    for variant in variants[1:]:
        same = results["concatenating"]["ids"] == results[variant]["ids"]
        print(f"same sampled ids as concatenating, {variant}: {same}")


if __name__ == "__main__":
    main()
