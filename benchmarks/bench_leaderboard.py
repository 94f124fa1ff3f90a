"""Replay verification cost of the leaderboard, per 1,000 episodes (prints figures, asserts none).

For each puzzle env, the committed random and oracle bundles (leaderboards/baselines/, 100
episodes per env, seeds 0-99) are replayed with :func:`leaderboards.verify.replay_run`; the figure
is seconds per 1,000 episodes (median of ``--repeats`` runs). Also timed: the schema check of a
whole bundle, and a full ``submit`` (read, schema, consistency, replay, SQLite insert) into a
temporary database.

    python benchmarks/bench_leaderboard.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from leaderboards.__main__ import BASELINES_DIR, submit
from leaderboards.verify import MAX_BUNDLE_BYTES, replay_run, validate_schema

PUZZLES = (
    "agentgym/Sokoban-v0",
    "agentgym/SokobanHard-v0",
    "agentgym/FrozenLake-v0",
    "agentgym/FrozenLakeSlippery-v0",
    "agentgym/Countdown-v0",
    "agentgym/Bandit-v0",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'env':<32} {'agent':<7} {'episodes':>8} {'steps':>6} {'s / 1000 episodes':>18}")
    for agent in ("random", "oracle"):
        bundle = json.loads((BASELINES_DIR / f"{agent}.json").read_text())
        for run in bundle["runs"]:
            if run["env_id"] not in PUZZLES:
                continue
            n = len(run["episodes"])
            steps = sum(len(e["steps"]) for e in run["episodes"])
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                replay_run(run)
                times.append(time.perf_counter() - t0)
            per_1000 = statistics.median(times) / n * 1000
            print(f"{run['env_id']:<32} {agent:<7} {n:>8} {steps:>6} {per_1000:>18.2f}")
    for agent in ("random", "oracle"):
        path = BASELINES_DIR / f"{agent}.json"
        bundle = json.loads(path.read_text())
        t0 = time.perf_counter()
        validate_schema(bundle)
        schema_s = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            _, _, replay_s, count = submit(path, "bench", Path(tmp) / "lb.sqlite", MAX_BUNDLE_BYTES)
            total_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
        print(
            f"{path.name}: {size_mb:.2f} MB, {count} episodes: schema check {schema_s:.2f} s, "
            f"verify {replay_s:.2f} s, whole submit {total_s:.2f} s "
            f"({total_s / count * 1000:.2f} s per 1000 episodes)"
        )


if __name__ == "__main__":
    main()
