"""Flag rates and latency of the collapse detector on the simulated controls of issue 44.

    nice -n 19 python scripts/collapse_controls.py [--runs 100] [--seed 0]

Prints the markdown table of ``docs/ragen2.md`` (section "The detector's controls"); each
scenario's run r is seeded ``seed + r``, so the table reproduces exactly.
"""

from __future__ import annotations

import argparse
import time

from baselines.collapse.controls import SCENARIOS, run_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per scenario")
    parser.add_argument("--seed", type=int, default=0, help="seed of run 0 of each scenario")
    args = parser.parse_args(argv)
    print(
        "| scenario (after 5 evaluations at I = 1.61 nats) | expected | runs flagged `collapsed` "
        "| within one window | latency, evaluations: median (range) | runs `degenerate` |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    start = time.perf_counter()
    for scenario in SCENARIOS:
        r = run_scenario(scenario, runs=args.runs, seed=args.seed)
        print(
            f"| {scenario.name} | {scenario.expect or 'no flag'} | {r.flagged}/{r.runs} "
            f"| {r.within_window}/{r.runs} | {r.latency()} | {r.degenerate}/{r.runs} |",
            flush=True,
        )
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
