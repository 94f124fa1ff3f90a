"""One process against ``torchrun --nproc_per_node 2`` (gloo) on the same training run: step time
and peak RSS per rank.

Usage::

    python benchmarks/bench_ddp.py [--config baselines/configs/quick.yaml] [--steps 2]
        [--threads 1] [--nproc 2] [key=value ...]

Runs ``python -m baselines.train --config CONFIG train.steps=STEPS train.threads=THREADS
rollout.val_episodes=0`` once in one process and once under ``torchrun --standalone
--nproc_per_node NPROC`` (each rank ``THREADS`` threads, so NPROC times the cores), each in a
fresh run folder under a temporary directory. Prints per layout the median over steps of
``timing/step_s`` and of its generation and backward parts (rank 0's, from ``metrics.jsonl``)
and each rank's peak RSS (the ``rank r/N: peak RSS`` lines ``baselines.train`` prints). Never run
by tests.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(nproc: int, out: Path, args: argparse.Namespace) -> dict:
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
        *args.overrides,
    ]
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    command = [sys.executable, *(launcher if nproc > 1 else []), *train]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
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
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_ddp_") as tmp:
        for nproc in (1, args.nproc):
            results[nproc] = _run(nproc, Path(tmp) / f"run{nproc}", args)
    print(f"{args.config}, {args.steps} steps, {args.threads} thread(s) per process")
    print(f"{'processes':>9} {'step s':>8} {'gen s':>8} {'update s':>8}  peak RSS per rank (GB)")
    for nproc, r in results.items():
        ranks = ", ".join(f"{x:.2f}" for x in r["rss_gb"])
        print(
            f"{nproc:>9} {r['step_s']:>8.1f} {r['generation_s']:>8.1f} {r['backward_s']:>8.1f}"
            f"  {ranks}"
        )
    same = results[1]["reward"] == results[args.nproc]["reward"]
    print(f"same rollout rewards each step: {same}")


if __name__ == "__main__":
    main()
