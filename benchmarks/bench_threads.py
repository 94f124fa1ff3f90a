"""Generation and update time of SmolLM2-135M per OpenMP wait policy, thread count and neighbour.

Usage::

    python benchmarks/bench_threads.py                      # the full table (13 min on a loaded 2-core machine)
    python benchmarks/bench_threads.py --quick              # 16 tokens, 2 x 128 update, 2 runs (7 min)
    python benchmarks/bench_threads.py --policies default PASSIVE --threads 2 --neighbours busy

Each cell runs in its own process, with the policy's variables set in its environment before torch
loads (OpenMP reads them once, at load; the child imports torch before ``baselines`` so that
``baselines`` leaves the variables as given). Policies:

- ``default``: ``OMP_WAIT_POLICY`` unset (the torch wheel's libgomp spins a while, then sleeps);
- ``PASSIVE``: ``OMP_WAIT_POLICY=PASSIVE`` (waiting threads sleep at once; agentgym's default);
- ``ACTIVE``: ``OMP_WAIT_POLICY=ACTIVE`` (waiting threads spin until work comes);
- ``spin10k``: ``GOMP_SPINCOUNT=10000`` (libgomp spins 10,000 rounds, then sleeps);
- ``blocktime0``: ``KMP_BLOCKTIME=0`` (Intel's libiomp knob; libgomp ignores it: a control).

Neighbours: ``idle`` (nothing of ours beside the run) or ``busy`` (one ``while True: pass``
process beside it, as when another job holds a core). Per cell it prints the seconds to generate
``--new-tokens`` tokens for a batch of 4 (``model.generate``, KV cache, greedy, a fixed count) and
the seconds of one update (forward + backward of ``--update-rows`` x ``--update-tokens`` tokens,
log-probs at the last 64 positions by ``baselines.llm.scoring.score_targets``, bf16 autocast where the
CPU has it, one AdamW step), each the median and range of ``--repeat`` runs in the cell's process
after a warm-up, and the busy/idle ratio per policy and thread count. A cell whose process runs
past ``--timeout`` seconds is killed; its missing runs print as ``>T`` and count as the timeout in
the ratio (``>``: a rough lower estimate). First it prints the machine's matmul rate (GFLOP/s,
2048 x 2048, fp32 and bf16, 1 and 2 threads) as the reference, and before each cell the load
average: other people's jobs on a shared machine show there. Never run by tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sandboxes.limits import run_command

ROOT = Path(__file__).resolve().parent.parent

POLICIES = {
    "default": {},
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
    "spin10k": {"GOMP_SPINCOUNT": "10000"},
    "blocktime0": {"KMP_BLOCKTIME": "0"},
}
POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def matmul_child(threads: int) -> None:
    """The matmul rate in this process: ``dtype GFLOP/s`` lines, 2048 x 2048, fp32 and bf16."""
    import torch

    torch.set_num_threads(threads)
    n = 2048
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        a @ b
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            a @ b
            reps += 1
        rate = 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9
        print(str(dtype).removeprefix("torch."), rate)


def cell_child(threads: int, new_tokens: int, rows: int, tokens: int, repeat: int) -> None:
    """One cell in this process: ``generate s`` and ``update s`` lines, ``repeat`` of each."""
    import warnings

    # torch first, then baselines: baselines leaves an already-loaded torch's policy alone (it
    # would set PASSIVE for the "default" cell otherwise); its warning about that is silenced.
    import torch

    warnings.simplefilter("ignore")
    from baselines.llm.policy import load_policy
    from baselines.llm.scoring import autocast, resolve_autocast, score_targets

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, tok = load_policy("embedded", device="cpu", dtype="float32")
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Push the box onto the target. " * 8}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    ).input_ids.repeat(4, 1)
    model.eval()
    with torch.no_grad():
        model.generate(prompt, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        for _ in range(repeat):
            t0 = time.perf_counter()
            model.generate(
                prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False
            )
            print("generate", time.perf_counter() - t0, flush=True)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    cast = resolve_autocast("auto", "cpu")

    def update(b: int, t: int) -> None:
        ids = torch.randint(0, model.config.vocab_size, (b, t))
        mask = torch.zeros(b, t - 1, dtype=torch.bool)
        mask[:, -min(64, t - 1) :] = True
        with autocast("cpu", cast):
            lp = score_targets(model, ids, torch.ones_like(ids), mask)["logprobs"]
        loss = -(lp.sum() / mask.sum())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    update(1, 64)  # warm-up: AdamW state, kernels
    for _ in range(repeat):
        t0 = time.perf_counter()
        update(rows, tokens)
        print("update", time.perf_counter() - t0, flush=True)


def _env(policy: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in POLICY_VARS}
    env.update(POLICIES[policy])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run(
    args: list[str], env: dict[str, str], timeout: float
) -> tuple[dict[str, list[float]], bool]:
    """Run a child; its ``name value`` lines by name, and whether it ran past ``timeout``."""
    run = run_command([sys.executable, __file__, "--child", *args], timeout=timeout, env=env)
    if run.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"child failed ({run.returncode}):\n{run.stderr[-3000:]}")
    out, timed_out = run.stdout, run.timed_out
    values: dict[str, list[float]] = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        values.setdefault(name, []).append(float(value))
    return values, timed_out


class Neighbour:
    """One busy-looping process for the ``busy`` condition (nothing for ``idle``)."""

    def __init__(self, kind: str):
        self.kind, self.proc = kind, None

    def __enter__(self) -> Neighbour:
        if self.kind == "busy":
            self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def _fmt(values: list[float], repeat: int, timed_out: bool) -> str:
    """``median [min-max]``, with ``+k>T`` for the runs a timeout cut off."""
    short = repeat - len(values) if timed_out else 0
    if not values:
        return ">T" if timed_out else "-"
    text = f"{statistics.median(values):.2f}"
    if len(values) > 1:
        text += f" [{min(values):.2f}-{max(values):.2f}]"
    return text + (f" +{short}>T" if short else "")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--policies", nargs="+", default=["default", "PASSIVE", "spin10k"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--neighbours", nargs="+", default=["idle", "busy"])
    parser.add_argument("--new-tokens", type=int, default=32, help="generated per row (batch 4)")
    parser.add_argument("--update-rows", type=int, default=4)
    parser.add_argument("--update-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per cell process")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per cell process")
    parser.add_argument("--no-matmul", action="store_true", help="skip the GFLOP/s reference")
    parser.add_argument("--quick", action="store_true", help="16 tokens, 2 x 128 update, 2 runs")
    parser.add_argument("--child", choices=["matmul", "cell"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "matmul":
        matmul_child(args.threads[0])
        return
    if args.child == "cell":
        sizes = (args.new_tokens, args.update_rows, args.update_tokens, args.repeat)
        cell_child(args.threads[0], *sizes)
        return
    for p in args.policies:
        if p not in POLICIES:
            parser.error(f"unknown policy {p!r}; choose from {', '.join(POLICIES)}")
    if args.quick:
        args.new_tokens, args.update_rows, args.update_tokens, args.repeat = 16, 2, 128, 2

    print(f"CPUs usable: {len(os.sched_getaffinity(0))}; load average {os.getloadavg()}")
    if not args.no_matmul:
        for n in args.threads:
            got, _ = _run(["matmul", "--threads", str(n)], _env("PASSIVE"), args.timeout)
            rates = ", ".join(f"{k} {v[0]:.0f}" for k, v in got.items())
            print(f"matmul 2048^3, {n} thread(s), idle: GFLOP/s {rates}", flush=True)

    cells = [(p, n, nb) for nb in args.neighbours for p in args.policies for n in args.threads]
    results: dict[tuple, dict[str, list[float]]] = {}
    late: dict[tuple, bool] = {}
    sizes = ["--new-tokens", str(args.new_tokens), "--update-rows", str(args.update_rows)]
    sizes += ["--update-tokens", str(args.update_tokens), "--repeat", str(args.repeat)]
    for nb in args.neighbours:
        with Neighbour(nb):
            for p in args.policies:
                for n in args.threads:
                    c, load, t0 = (p, n, nb), os.getloadavg()[0], time.perf_counter()
                    child = ["cell", "--threads", str(n), *sizes]
                    results[c], late[c] = _run(child, _env(p), args.timeout)
                    print(
                        f"{p:>10} threads={n} {nb:>4} (load {load:.2f} before): "
                        + "; ".join(
                            f"{k} " + " ".join(f"{x:.2f}" for x in v) for k, v in results[c].items()
                        )
                        + (f" TIMED OUT at {args.timeout:.0f} s" if late[c] else "")
                        + f" [{time.perf_counter() - t0:.0f} s wall]",
                        flush=True,
                    )

    print(
        f"\nseconds, median [range] of {args.repeat} run(s) in one process: generate = 4 rows x "
        f"{args.new_tokens} new tokens; update = fwd+bwd+AdamW on {args.update_rows} x "
        f"{args.update_tokens} tokens (64 scored per row); >T: timed out at {args.timeout:.0f} s"
    )
    print(f"{'policy':>10} {'threads':>7} {'neighbour':>9} {'generate s':>22} {'update s':>22}")
    for c in cells:
        row = [_fmt(results[c].get(k, []), args.repeat, late[c]) for k in ("generate", "update")]
        print(f"{c[0]:>10} {c[1]:>7} {c[2]:>9} {row[0]:>22} {row[1]:>22}")
    if {"idle", "busy"} <= set(args.neighbours):
        print("\nbusy/idle ratio of the medians (>: busy runs cut off, counted as the timeout):")
        for p in args.policies:
            for n in args.threads:
                parts = []
                for k in ("generate", "update"):
                    idle = results[(p, n, "idle")].get(k, [])
                    busy = results[(p, n, "busy")].get(k, [])
                    short = args.repeat - len(busy)
                    if not idle:
                        parts.append(f"{k} n/a (the idle run timed out)")
                        continue
                    ratio = statistics.median(busy + [args.timeout] * short) / (
                        statistics.median(idle)
                    )
                    parts.append(f"{k} {'>' if short else ''}{ratio:.1f}x")
                print(f"{p:>10} threads={n}: " + ", ".join(parts))


if __name__ == "__main__":
    main()
