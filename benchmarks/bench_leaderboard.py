"""Replay verification cost of the leaderboard, per 1,000 episodes (prints figures, asserts none).

For each puzzle env, the committed random and oracle bundles (leaderboards/baselines/, 100
episodes per env, seeds 0-99) are replayed with :func:`leaderboards.verify.replay_run`; the figure
is seconds per 1,000 episodes (median of ``--repeats`` runs). Also timed: the schema check of a
whole bundle, and a full ``submit`` (read, schema, consistency, replay, SQLite insert) into a
temporary database. Then the cost of the defences (issue 14): the kwargs gate per call, the
budgeted child process per bundle (fork, pipe, memory sampling) against an in-process call, and
the time from ``submit`` to the refusal of each attack bundle.

    python benchmarks/bench_leaderboard.py [--repeats 3] [--skip-replay]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path

from timing import median_seconds

from agentgym.registration import check_env_kwargs, normalise_task_kwargs
from leaderboards.__main__ import BASELINES_DIR, submit
from leaderboards.verify import (
    MAX_BUNDLE_BYTES,
    ReplayBudget,
    SubmissionError,
    VerifierConfig,
    replay_run,
    run_within_budget,
    validate_schema,
)

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
    parser.add_argument("--skip-replay", action="store_true", help="only the defence figures")
    args = parser.parse_args()
    if not args.skip_replay:
        replay_figures(args.repeats)
    defence_figures(args.repeats)


def defence_figures(repeats: int) -> None:
    """The gate, the budgeted child and the refusal latency of each attack bundle."""
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        check_env_kwargs("agentgym/Sokoban-v0", {"max_turns": 3, "dim_room": [7, 7]})
        normalise_task_kwargs("agentgym/Sokoban-v0", {"max_turns": 5})
    gate_us = (time.perf_counter() - t0) / n * 1e6
    print(f"kwargs gate: check + normalise {gate_us:.1f} us per call pair")
    child = median_seconds(lambda: run_within_budget(lambda: 1, ReplayBudget()), max(repeats, 5))
    print(f"budgeted child process (fork, pipe, join) around a no-op: {child * 1000:.1f} ms")
    base = json.loads((BASELINES_DIR / "random.json").read_text())
    sokoban = next(r for r in base["runs"] if r["env_id"] == "agentgym/Sokoban-v0")
    one = {**base, "runs": [copy.deepcopy(sokoban)]}
    attacks = {}
    catalog = copy.deepcopy(one)
    catalog["runs"][0]["env_id"] = "agentgym/WebShopText-v0"
    catalog["runs"][0]["env_kwargs"] = {"num_products": 10**9}
    attacks["catalog of 10^9 products"] = (json.dumps(catalog), None)
    unsandboxed = copy.deepcopy(one)
    unsandboxed["runs"][0]["env_id"] = "agentgym/CodeExecGenerated-v0"
    unsandboxed["runs"][0]["env_kwargs"] = {"sandbox_options": {"allow_unisolated": True}}
    attacks["unsandboxed execution"] = (json.dumps(unsandboxed), None)
    deep = json.dumps(one).replace(
        '"runs": [', '"deep": ' + "[" * 10**5 + "]" * 10**5 + ', "runs": [', 1
    )
    attacks["JSON 100,000 deep"] = (deep, None)
    attacks["steps budget 100"] = (json.dumps(one), VerifierConfig(ReplayBudget(max_steps=100)))
    attacks["time budget 0.2 s (Sokoban, 100 episodes)"] = (
        json.dumps(one),
        VerifierConfig(ReplayBudget(max_seconds=0.2)),
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, (text, config) in attacks.items():
            path = Path(tmp) / "attack.json"
            path.write_text(text)
            t0 = time.perf_counter()
            try:
                submit(path, "attacker", Path(tmp) / "lb.sqlite", MAX_BUNDLE_BYTES, config)
                outcome = "ACCEPTED"
            except SubmissionError as err:
                outcome = f"refused ({str(err)[:60]}...)"
            print(f"attack: {name:<42} {time.perf_counter() - t0:7.3f} s to {outcome}")


def replay_figures(repeats: int) -> None:
    """Replay seconds per 1,000 episodes of the committed bundles, and whole submits."""
    args = argparse.Namespace(repeats=repeats)
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
