"""What per-episode generators cost the HF engine: one batched ``torch.multinomial`` on torch's
global generator (the engine before) against one draw per row from its own generator
(:func:`baselines.llm.engines.sample_rows`, what the trainer uses so an episode's ids do not depend
on its batch).

Usage::

    python benchmarks/bench_sampling.py [--rows 64] [--vocab 49152] [--prompt 100] [--new 16]
        [--threads 1] [--repeats 50] [--no-decode]

Prints (1) the sampling step alone: softmax of ``[rows, vocab]`` float32 logits and the draws,
median of ``--repeats`` after 3 warm-ups, both ways; (2) unless ``--no-decode``, a whole decode
with :func:`baselines.llm.engines.generate_cached` on the embedded SmolLM2 (vocabulary 49,152),
``--rows`` prompts of ``--prompt`` random ids, ``--new`` tokens at temperature 1 without stop,
global generator vs per-row generators (each the median of 3), and the per-row overhead as a
share of the decode. Never run by tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import baselines  # noqa: E402,F401  (before torch: OMP_WAIT_POLICY)

# isort: split
import torch  # noqa: E402
from decode_workload import add_workload_options, load_workload  # noqa: E402
from timing import median_seconds  # noqa: E402

from baselines.llm.engines import SamplingSettings, generate_cached, sample_rows  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_options(parser, rows=64, prompt=100, new=16)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--no-decode", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logits = torch.randn(args.rows, args.vocab, generator=torch.Generator().manual_seed(0))
    rows = list(range(args.rows))
    gens = [torch.Generator().manual_seed(r) for r in rows]
    batched = median_seconds(
        lambda: sample_rows(torch.softmax(logits, -1), rows), args.repeats, warmups=3
    )
    per_row = median_seconds(
        lambda: sample_rows(torch.softmax(logits, -1), rows, gens), args.repeats, warmups=3
    )
    print(f"sampling step, {args.rows} rows x {args.vocab} ids, {args.threads} thread(s):")
    print(f"  global generator, one batched draw: {batched * 1e3:8.2f} ms")
    print(f"  per-row generators:                 {per_row * 1e3:8.2f} ms")
    print(f"  overhead per decoding step:         {(per_row - batched) * 1e3:8.2f} ms")
    if args.no_decode:
        return
    from baselines.llm.scoring import autocast, resolve_autocast

    model, tok, prompts = load_workload(args.rows, args.prompt)
    sampling = SamplingSettings(max_new_tokens=args.new, temperature=1.0, stop_strings=())
    amp = resolve_autocast("auto", "cpu")

    def decode(per_episode: bool) -> float:
        generators = [torch.Generator().manual_seed(r) for r in rows] if per_episode else None
        t0 = time.perf_counter()
        with autocast("cpu", amp), torch.no_grad():
            generate_cached(model, tok, prompts, sampling, generators=generators)
        return time.perf_counter() - t0

    decode(False)  # warm-up
    plain = statistics.median(decode(False) for _ in range(3))
    own = statistics.median(decode(True) for _ in range(3))
    print(
        f"decode, SmolLM2, {args.rows} rows x {args.prompt} prompt ids, {args.new} new (median of 3):"
    )
    print(f"  global generator:   {plain:7.2f} s")
    print(f"  per-row generators: {own:7.2f} s  ({(own - plain) / plain * 100:+.1f} %)")


if __name__ == "__main__":
    main()
