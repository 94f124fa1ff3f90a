"""Decode-step time of SmolLM2-135M per torch thread count (why the default is half the CPUs).

``python benchmarks/bench_threads.py [--threads 1 2] [--model embedded] [--hog]``

Each count runs in its own process (torch's thread pool is set once per process). ``--hog`` starts
one busy-looping process beside it, the contention seen on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CHILD = """
import sys, time, torch
from baselines.policy import load_policy
torch.set_num_threads(int(sys.argv[1]))
model, tok = load_policy(sys.argv[2], device="cpu", dtype="float32")
ids = tok("Hello, how are you? " * 20, return_tensors="pt").input_ids.repeat(4, 1)
with torch.no_grad():
    model.generate(ids, max_new_tokens=4, do_sample=False)
    t0 = time.perf_counter()
    model.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False)
print((time.perf_counter() - t0) / 32)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--hog", action="store_true", help="one busy process beside the runs")
    args = parser.parse_args()
    hog = None
    if args.hog:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)
    try:
        for n in args.threads:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(n), args.model],
                capture_output=True,
                text=True,
                check=True,
            )
            step = float(out.stdout.strip().splitlines()[-1])
            print(f"threads={n}: {step * 1000:.0f} ms per decode step (batch 4, 32 tokens)")
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    main()
