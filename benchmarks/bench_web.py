"""Speed of WebShop's two back ends: browser start, reset, per-action latency, oracle throughput.

Run from the repository root (needs the ``web`` extra and, for ``browser``, Chromium and
ChromeDriver: ``.ci/setup_chromium.sh``)::

    python benchmarks/bench_web.py                      # both back ends, 20 episodes each
    python benchmarks/bench_web.py --backends text --episodes 50

For each back end (``browser``: agentgym/WebShop-v0; ``text``: agentgym/WebShopText-v0) it prints:

* ``start``: the first ``reset`` of a fresh env (starts the shop server if none runs, and for
  ``browser`` ChromeDriver and Chromium);
* ``reset``: later ``reset`` calls (the browser is kept across episodes), mean and p50/p95;
* ``action``: ``env.step`` latency over the oracle's actions (search, clicks, buy) and the random
  agent's, p50/p95 in milliseconds;
* ``episodes/min``: oracle episodes (reset + steps until the purchase) per minute of wall time
  with 1 env, and with 4 envs stepped by 4 threads in one process (each env has its own browser;
  they share the server).

Only the env calls are timed, not the policy. Benchmarks are never run by the tests; timings
depend on the machine's load, so it prints the load average beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium
import numpy as np

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.webshop import random_action
from agentgym.parsing import format_answer

IDS = {"browser": "agentgym/WebShop-v0", "text": "agentgym/WebShopText-v0"}


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _oracle_episode(env: gymnasium.Env, seed: int, step_times: list[float]) -> float:
    """One oracle episode; appends each step's seconds to ``step_times``; returns the reward."""
    env.reset(seed=seed)
    reward = 0.0
    for _ in range(20):
        answer = env.unwrapped.oracle_answer()
        start = time.perf_counter()
        _, reward, terminated, truncated, _ = env.step(answer)
        step_times.append(time.perf_counter() - start)
        if terminated or truncated:
            break
    return float(reward)


def _random_steps(env: gymnasium.Env, seeds: range, step_times: list[float]) -> None:
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(15):
            answer = format_answer([random_action(obs, rng)], "think_answer", think="r")
            start = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(answer)
            step_times.append(time.perf_counter() - start)
            if terminated or truncated:
                break


def _throughput(env_id: str, num_envs: int, episodes: int) -> tuple[float, float]:
    """Oracle episodes per minute with ``num_envs`` envs in as many threads; and success rate."""
    envs = [gymnasium.make(env_id) for _ in range(num_envs)]
    try:
        for i, env in enumerate(envs):  # start browsers outside the timed part
            env.reset(seed=10_000 + i)
        per_env = [list(range(i, episodes, num_envs)) for i in range(num_envs)]

        def work(k: int) -> list[float]:
            sink: list[float] = []
            return [_oracle_episode(envs[k], seed, sink) for seed in per_env[k]]

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=num_envs) as pool:
            rewards = [r for rs in pool.map(work, range(num_envs)) for r in rs]
        elapsed = time.perf_counter() - start
    finally:
        for env in envs:
            env.close()
    return 60.0 * len(rewards) / elapsed, float(np.mean([r == 1.0 for r in rewards]))


def bench(backend: str, episodes: int) -> dict[str, float]:
    env_id = IDS[backend]
    env = gymnasium.make(env_id)
    try:
        start = time.perf_counter()
        env.reset(seed=0)
        first = time.perf_counter() - start
        resets: list[float] = []
        for seed in range(1, 11):
            start = time.perf_counter()
            env.reset(seed=seed)
            resets.append(time.perf_counter() - start)
        oracle_steps: list[float] = []
        for seed in range(episodes):
            _oracle_episode(env, seed, oracle_steps)
        random_steps: list[float] = []
        _random_steps(env, range(min(episodes, 10)), random_steps)
    finally:
        env.close()
    one, success1 = _throughput(env_id, 1, episodes)
    four, success4 = _throughput(env_id, 4, episodes)
    steps = oracle_steps + random_steps
    return {
        "start_s": first,
        "reset_mean_ms": 1e3 * statistics.fmean(resets),
        "reset_p50_ms": 1e3 * _pct(resets, 50),
        "reset_p95_ms": 1e3 * _pct(resets, 95),
        "action_p50_ms": 1e3 * _pct(steps, 50),
        "action_p95_ms": 1e3 * _pct(steps, 95),
        "actions": len(steps),
        "episodes_per_min_1": one,
        "episodes_per_min_4": four,
        "oracle_success": min(success1, success4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", choices=sorted(IDS), default=["browser", "text"])
    parser.add_argument("--episodes", type=int, default=20, help="oracle episodes per measure")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    header = (
        f"{'backend':8} {'start s':>8} {'reset ms':>9} {'p50':>7} {'p95':>7} "
        f"{'action p50 ms':>14} {'p95':>7} {'n':>5} {'ep/min x1':>10} {'ep/min x4':>10} "
        f"{'oracle':>7}"
    )
    print(header)
    for backend in args.backends:
        r = bench(backend, args.episodes)
        print(
            f"{backend:8} {r['start_s']:8.2f} {r['reset_mean_ms']:9.1f} {r['reset_p50_ms']:7.1f} "
            f"{r['reset_p95_ms']:7.1f} {r['action_p50_ms']:14.1f} {r['action_p95_ms']:7.1f} "
            f"{r['actions']:5d} {r['episodes_per_min_1']:10.1f} {r['episodes_per_min_4']:10.1f} "
            f"{r['oracle_success']:7.0%}"
        )
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
