"""Speed of the KV-cache-reusing MI scorer against plain teacher forcing (never part of the tests).

Usage: python benchmarks/mi_scorer.py [--prompts 8] [--prompt-len 200] [--reasonings 32]
       [--reasoning-len 64] [--batch-size 16] [--repeats 3] [--threads 1] [--hidden 64]
"""

from __future__ import annotations

import argparse
import time

import baselines  # noqa: F401  (before torch: sets OMP_WAIT_POLICY, agentgym.threads)

# isort: split
import torch
import transformers

from baselines.collapse import score_matrix, score_matrix_naive


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=200)
    parser.add_argument("--reasonings", type=int, default=32)
    parser.add_argument("--reasoning-len", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: stable)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size of the random model")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=512,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = transformers.LlamaForCausalLM(config).float().eval()
    gen = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(0, 512, (args.prompt_len,), generator=gen).tolist()
        for _ in range(args.prompts)
    ]
    reasonings = [
        torch.randint(0, 512, (args.reasoning_len,), generator=gen).tolist()
        for _ in range(args.reasonings)
    ]
    fast = score_matrix(model, prompts, reasonings, batch_size=args.batch_size)
    naive = score_matrix_naive(model, prompts, reasonings, batch_size=args.batch_size)
    t_fast = best_time(
        lambda: score_matrix(model, prompts, reasonings, args.batch_size), args.repeats
    )
    t_naive = best_time(
        lambda: score_matrix_naive(model, prompts, reasonings, args.batch_size), args.repeats
    )
    print(
        f"K={args.prompts} prompts x {args.prompt_len} tokens, M={args.reasonings} reasonings x "
        f"{args.reasoning_len} tokens, hidden {args.hidden}, batch {args.batch_size}, threads "
        f"{torch.get_num_threads()}"
    )
    print(f"max |kv - naive| = {(fast - naive).abs().max().item():.2e}")
    print(f"naive {t_naive:.3f} s, kv-cache {t_fast:.3f} s, speed-up {t_naive / t_fast:.2f}x")


if __name__ == "__main__":
    main()
