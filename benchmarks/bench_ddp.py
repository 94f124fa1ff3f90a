"""One process against ``torchrun --nproc_per_node 2`` (gloo), DDP and FSDP2, on the same training
run: step time and peak RSS per rank, beside the machine's matmul rate and, with
``--against REV``, the DDP layout of an earlier commit.

Usage::

    python benchmarks/bench_ddp.py [--config baselines/configs/quick.yaml] [--steps 2]
        [--threads 1] [--nproc 2] [--against REV] [key=value ...]

Runs ``python -m baselines.train --config CONFIG train.steps=STEPS train.threads=THREADS
rollout.val_episodes=0`` in one process, then under ``torchrun --standalone --nproc_per_node
NPROC`` with ``train.strategy=ddp`` and with ``train.strategy=fsdp2`` (each rank ``THREADS``
threads, so NPROC times the cores), each in a fresh run folder under a temporary directory;
with ``--against REV`` also the DDP layout from a ``git worktree`` of REV (e.g. the commit
before DDP, whose ranks all-reduced the gradients by hand). Prints per layout the median over
steps of ``timing/step_s`` and of its generation and backward parts (rank 0's, from
``metrics.jsonl``) and each rank's peak RSS (the ``rank r/N: peak RSS`` lines
``baselines.train`` prints), after the float32 matmul rate of one thread (2048^3, GFLOP/s) as
the machine's reference. Never run by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _matmul_gflops(threads: int) -> float:
    """float32 2048 x 2048 matmul rate with ``threads`` threads (best of 5), GFLOP/s."""
    import time

    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * 2048**3 / best / 1e9


def _run(
    nproc: int, out: Path, args: argparse.Namespace, extra: list[str], cwd: Path = REPO
) -> dict:
    train = [
        "-m",
        "baselines.train",
        "--config",
        args.config,
        "--no-progress",
        f"train.steps={args.steps}",
        f"train.threads={args.threads}",
        "rollout.val_episodes=0",
        f"train.out_dir={out}",
        *extra,
        *args.overrides,
    ]
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    command = [sys.executable, *(launcher if nproc > 1 else []), *train]
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{nproc} process(es) failed:\n{done.stderr[-4000:]}")
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rss = {
        int(m.group(1)): float(m.group(2))
        for m in re.finditer(r"rank (\d+)/\d+: peak RSS ([\d.]+) GB", done.stderr)
    }

    def median(key: str) -> float:
        return statistics.median(line[key] or 0.0 for line in lines)

    return {
        "step_s": median("timing/step_s"),
        "generation_s": median("timing/generation_s"),
        "backward_s": median("timing/backward_s"),
        "rss_gb": [rss[r] for r in sorted(rss)],
        "reward": [line["rollout/reward_mean"] for line in lines],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="baselines/configs/quick.yaml")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--against", help="also the DDP layout at this git revision")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    print(f"matmul float32 2048^3, 1 thread: {_matmul_gflops(1):.1f} GFLOP/s", flush=True)
    n = args.nproc
    layouts = {
        "1 process": (1, []),
        f"{n} ranks, ddp": (n, ["train.strategy=ddp"]),
        f"{n} ranks, fsdp2": (n, ["train.strategy=fsdp2"]),
    }
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_ddp_") as tmp:
        for i, (label, (nproc, extra)) in enumerate(layouts.items()):
            results[label] = _run(nproc, Path(tmp) / f"run{i}", args, extra)
        if args.against:
            tree = Path(tmp) / "against"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(tree), args.against],
                cwd=REPO,
                check=True,
                capture_output=True,
            )
            try:
                label = f"{n} ranks at {args.against}"
                results[label] = _run(n, Path(tmp) / "run_against", args, [], cwd=tree)
            finally:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False
                )
    print(f"{args.config}, {args.steps} steps, {args.threads} thread(s) per process")
    print(f"{'layout':>22} {'step s':>8} {'gen s':>8} {'update s':>8}  peak RSS per rank (GB)")
    for label, r in results.items():
        ranks = ", ".join(f"{x:.2f}" for x in r["rss_gb"])
        print(
            f"{label:>22} {r['step_s']:>8.1f} {r['generation_s']:>8.1f} "
            f"{r['backward_s']:>8.1f}  {ranks}"
        )
    first = results["1 process"]["reward"]
    for label, r in results.items():
        print(f"same rollout rewards each step as 1 process, {label}: {r['reward'] == first}")


if __name__ == "__main__":
    main()
