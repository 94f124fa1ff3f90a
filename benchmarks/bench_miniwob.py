"""Speed and memory of the MiniWoB++ envs, beside WebShop-v0 and Farama's ``miniwob`` envs.

Run from the repository root (needs the ``web`` extra, the ``miniwob`` package, Chromium and
ChromeDriver: ``.ci/setup_chromium.sh``)::

    python benchmarks/bench_miniwob.py                  # 112 oracle episodes (every task twice)
    python benchmarks/bench_miniwob.py --episodes 280 --skip-webshop
    python benchmarks/bench_miniwob.py --quick          # smoke test: a few episodes of each part

For ``agentgym/MiniWoBHTML-v0`` (the 56 tasks of the HTML subset; seed ``s`` plays task
``s % 56``, so seeds ``0..N-1`` with ``N >= 56`` bring up every task) and, smaller, for
``agentgym/WebShop-v0``, it prints:

* ``start s``: the first ``reset`` of a fresh env (starts ChromeDriver and Chromium, and for
  WebShop the shop server if none runs);
* ``reset ms``: later ``reset`` calls (the browser is kept; MiniWoB loads a fresh task page each
  time), p50/p95 in milliseconds, over the resets of the one-env oracle run;
* ``oracle step ms`` / ``random step ms``: ``env.step`` latency, p50/p95, over the scripted
  oracle's actions (``env.unwrapped.oracle_answer()``) and over the random agent's
  (``random_action(observation, rng)``), reported separately;
* the seeds: ``0..N-1``, or with ``N < 56`` (``--quick``) ``N`` seeds spread evenly over the
  56 tasks; the random agent's likewise;
* ``ep/min x1`` / ``x4``: oracle episodes (reset + steps until the episode ends) per minute of
  wall time with 1 env, and with 4 envs each played by its own thread in one process (each env
  has its own browser). The wall time includes the oracle's answers (plain Python over the page
  already read), so it is what a rollout loop with a free policy would see;
* ``oracle``: the oracle's success rate over those episodes (reward 1), over all of them and over
  the tasks with a real oracle only (``env.unwrapped.has_oracle()``; the others get a placeholder
  click and fail);
* ``MiB/env``: memory of one env's own browser processes (``browser.pids()``: ChromeDriver,
  Chromium and its children) summed, measured after the runs while the browsers are alive: PSS
  (proportional set size: shared pages split between the processes sharing them, so sums add up)
  where the OS reports it, else USS, else RSS; the column header names the kind, and RSS (which
  counts shared pages once per process and so overstates) is printed beside it.

Then the peer, measured in the same run: Farama's ``miniwob`` package (its gymnasium envs,
``miniwob/<task>-v1``) on a few tasks, reset and step (a ``CLICK_ELEMENT`` on a random element of
the observation) p50/p95, with its default screenshot on every observation and with screenshots
off, beside ours on the same tasks with the same kind of action (a click on a random element
shown). Farama's reset does not reload the page (it restarts the task in place) and its step
reads the page straight after the action; ours loads a fresh page per reset and waits for the
page to settle after each action. BrowserGym (not installed, not measured) documents a fixed
0.5 s sleep per step.

The floor, in the same run: on the same browser, a bare WebDriver round trip
(``execute_script("return 1")``) and a bare ``driver.get`` of a task page (no prelude, no settle,
no read): no step can be faster than the first, no reset than the second; and this CPU's float32
matmul GFLOP/s on one thread (the machine's compute limit, the same line as the other benchmarks).

Aims (printed beside the figures): reset p50 <= 200 ms, step p50 <= 50 ms, >= 120 oracle
episodes a minute on the HTML subset with one env.

Only the env calls are timed, not the policies (except in episodes a minute, as said). A part
that fails prints why and the rest goes on. Benchmarks are never run by the tests; timings depend
on the machine's load, so it prints the load average beside them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium
import numpy as np
from bench_web import IDS as WEBSHOP_IDS
from bench_web import _pct

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs import miniwob as miniwob_env
from agentgym.envs import webshop as webshop_env
from agentgym.parsing import format_answer

HTML_ID = "agentgym/MiniWoBHTML-v0"
HTML_TASKS = 56
WEBSHOP_ID = WEBSHOP_IDS["browser"]
AIM_RESET_P50_MS = 200.0
AIM_STEP_P50_MS = 50.0
AIM_EPISODES_PER_MIN = 120.0
PEER_TASKS = ("click-test", "click-button", "click-checkboxes", "enter-text")
MAX_STEPS = 20  # the envs truncate first (MiniWoB: 10 turns)
_REF_LINE = re.compile(r"\s*\[(\d+)\]")


def _load() -> str:
    return "load " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _ms(values: list[float], q: float) -> float:
    return 1e3 * _pct(values, q)


def spread_seeds(n: int, period: int = HTML_TASKS) -> list[int]:
    """``n`` seeds whose tasks (``seed % period``) are spread over the period: ``0..n-1`` when
    ``n >= period`` (every task comes up), else ``n`` evenly spaced tasks."""
    return list(range(n)) if n >= period else [i * period // n for i in range(n)]


def _action_format(env: gymnasium.Env) -> str:
    return getattr(env.unwrapped, "action_format", "think_answer")


# ---------------------------------------------------------------------- memory


def browser_memory(pids: list[int]) -> tuple[str, float, float]:
    """``(kind, MiB of kind, MiB of RSS)`` summed over ``pids``; kind is pss, uss or rss."""
    import psutil

    kind, total, rss = "rss", 0.0, 0.0
    kinds: set[str] = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            try:
                full = proc.memory_full_info()
            except psutil.AccessDenied:
                full = proc.memory_info()
        except psutil.Error:  # gone since listed
            continue
        rss += full.rss
        for name in ("pss", "uss", "rss"):
            if hasattr(full, name):
                kinds.add(name)
                total += getattr(full, name)
                break
    if kinds:
        # one kind for all (a mix would be odd; name the weakest)
        kind = next(k for k in ("rss", "uss", "pss") if k in kinds)
    return kind, total / 2**20, rss / 2**20


def _env_pids(env: gymnasium.Env) -> list[int]:
    unwrapped = env.unwrapped
    for name in ("browser", "reader"):  # MiniWoBEnv.browser, WebShopEnv.reader
        holder = getattr(unwrapped, name, None)
        if holder is not None and hasattr(holder, "pids"):
            return list(holder.pids())
    return []


# ---------------------------------------------------------------------- our envs


class Episodes:
    """What a run of oracle episodes records."""

    def __init__(self) -> None:
        self.resets: list[float] = []
        self.steps: list[float] = []
        self.rewards: list[float] = []
        self.tasks: list[str] = []
        self.has_oracle: list[bool] = []
        self.invalid = 0
        self.browser_errors: list[str] = []

    def extend(self, other: Episodes) -> None:
        self.resets += other.resets
        self.steps += other.steps
        self.rewards += other.rewards
        self.tasks += other.tasks
        self.has_oracle += other.has_oracle
        self.invalid += other.invalid
        self.browser_errors += other.browser_errors


def _oracle_episode(env: gymnasium.Env, seed: int, out: Episodes) -> None:
    start = time.perf_counter()
    env.reset(seed=seed)
    out.resets.append(time.perf_counter() - start)
    unwrapped = env.unwrapped
    out.tasks.append(str(getattr(unwrapped, "task", "")))
    has_oracle = getattr(unwrapped, "has_oracle", None)
    out.has_oracle.append(bool(has_oracle()) if has_oracle is not None else True)
    reward = 0.0
    for _ in range(MAX_STEPS):
        answer = unwrapped.oracle_answer()
        start = time.perf_counter()
        _, reward, terminated, truncated, info = env.step(answer)
        out.steps.append(time.perf_counter() - start)
        if info.get("invalid_reason"):
            out.invalid += 1
        if info.get("browser_error"):
            out.browser_errors.append(str(info["browser_error"])[:200])
        if terminated or truncated:
            break
    out.rewards.append(float(reward))


def _random_steps(
    env: gymnasium.Env, seeds: list[int], policy: Callable[[str, Any], str]
) -> list[float]:
    times: list[float] = []
    fmt = _action_format(env)
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(MAX_STEPS):
            answer = format_answer([policy(obs, rng)], fmt, think="r")
            start = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(answer)
            times.append(time.perf_counter() - start)
            if terminated or truncated:
                break
    return times


def _threaded(envs: list[gymnasium.Env], seeds: list[int]) -> tuple[Episodes, float]:
    """Oracle episodes of ``seeds`` spread over ``envs``, one thread each; (record, seconds)."""
    per_env = [seeds[k :: len(envs)] for k in range(len(envs))]

    def work(k: int) -> Episodes:
        out = Episodes()
        for seed in per_env[k]:
            _oracle_episode(envs[k], seed, out)
        return out

    start = time.perf_counter()
    if len(envs) == 1:
        parts = [work(0)]
    else:
        with ThreadPoolExecutor(max_workers=len(envs)) as pool:
            parts = list(pool.map(work, range(len(envs))))
    elapsed = time.perf_counter() - start
    total = Episodes()
    for part in parts:
        total.extend(part)
    return total, elapsed


def _success(rewards: list[float], mask: list[bool] | None = None) -> tuple[float, int]:
    picked = [r for i, r in enumerate(rewards) if mask is None or mask[i]]
    return (float(np.mean([r == 1.0 for r in picked])) if picked else float("nan")), len(picked)


def bench_env(
    env_id: str,
    episodes: int,
    random_episodes: int,
    threads: int,
    policy: Callable[[str, Any], str],
) -> dict[str, Any]:
    """All the figures of one env id (module docstring)."""
    seeds = spread_seeds(episodes)
    r: dict[str, Any] = {"env_id": env_id}
    env = gymnasium.make(env_id)
    try:
        start = time.perf_counter()
        env.reset(seed=10_000)
        r["start_s"] = time.perf_counter() - start
        one, elapsed1 = _threaded([env], seeds)
        r["random_steps"] = _random_steps(env, spread_seeds(random_episodes), policy)
        r["memory_1"] = browser_memory(_env_pids(env))
    finally:
        env.close()
    r["one"] = one
    r["per_min_1"] = 60.0 * len(one.rewards) / elapsed1
    envs = [gymnasium.make(env_id) for _ in range(threads)]
    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:  # start browsers, untimed
            list(pool.map(lambda k: envs[k].reset(seed=10_001 + k), range(threads)))
        many, elapsed4 = _threaded(envs, seeds)
        r["memory_many"] = [browser_memory(_env_pids(e)) for e in envs]
    finally:
        for e in envs:
            e.close()
    r["many"] = many
    r["per_min_many"] = 60.0 * len(many.rewards) / elapsed4
    return r


def _aim(value: float, aim: float, below: bool) -> str:
    if value != value:  # nan
        return "aim n/a"
    ok = value <= aim if below else value >= aim
    return f"aim {'<=' if below else '>='} {aim:g}: {'met' if ok else 'MISSED'}"


def print_env(r: dict[str, Any], threads: int, name: str, aims: bool) -> None:
    one: Episodes = r["one"]
    many: Episodes = r["many"]
    rnd: list[float] = r["random_steps"]
    print(f"\n== {name} ({r['env_id']}) == {_load()}")
    print(f"start (first reset, fresh env)  {r['start_s']:8.2f} s")
    rp50 = _ms(one.resets, 50)
    aim = f"   {_aim(rp50, AIM_RESET_P50_MS, True)}" if aims else ""
    print(
        f"reset ms       p50 {rp50:7.1f}  p95 {_ms(one.resets, 95):7.1f}  "
        f"n {len(one.resets):4d}{aim}"
    )
    for label, values in (("oracle step ms", one.steps), ("random step ms", rnd)):
        p50 = _ms(values, 50)
        aim = f"   {_aim(p50, AIM_STEP_P50_MS, True)}" if aims else ""
        print(
            f"{label} p50 {p50:7.1f}  p95 {_ms(values, 95):7.1f}  n {len(values):4d}  "
            f"max {_ms(values, 100):7.1f}{aim}"
        )
    aim = f"   {_aim(r['per_min_1'], AIM_EPISODES_PER_MIN, False)}" if aims else ""
    print(f"oracle episodes/min x1 {r['per_min_1']:7.1f}  ({len(one.rewards)} episodes){aim}")
    print(
        f"oracle episodes/min x{threads} {r['per_min_many']:7.1f}  ({len(many.rewards)} episodes, "
        f"{threads} envs, {threads} threads)"
    )
    for label, rec in (("x1", one), (f"x{threads}", many)):
        rate, n = _success(rec.rewards)
        line = f"oracle success {label}: {rate:6.1%} of {n}"
        if any(not h for h in rec.has_oracle):
            rate_o, n_o = _success(rec.rewards, rec.has_oracle)
            line += f"; {rate_o:6.1%} of the {n_o} on tasks with a real oracle"
        line += f"; invalid oracle actions {rec.invalid}"
        if rec.browser_errors:
            line += f"; browser errors {len(rec.browser_errors)}: {rec.browser_errors[0]!r}"
        print(line)
    if aims:  # the MiniWoB part: which tasks came up, which the oracle failed
        covered = len(set(one.tasks))
        failed = sorted(
            {
                t
                for t, rw, h in zip(one.tasks, one.rewards, one.has_oracle, strict=True)
                if h and rw != 1.0
            }
        )
        print(f"tasks covered x1: {covered} of {HTML_TASKS}")
        if failed:
            print(f"tasks with a real oracle that failed an episode (x1): {', '.join(failed)}")
    kind, mib, rss = r["memory_1"]
    many_mem = r["memory_many"]
    mean_many = float(np.mean([m[1] for m in many_mem])) if many_mem else float("nan")
    rss_many = float(np.mean([m[2] for m in many_mem])) if many_mem else float("nan")
    print(
        f"MiB/env ({kind.upper()} of the env's browser processes): 1 env {mib:7.1f} "
        f"(RSS {rss:7.1f}); {threads} envs, mean {mean_many:7.1f} (RSS {rss_many:7.1f})"
    )


# ---------------------------------------------------------------------- the peer


def _click_refs(observation: str) -> list[int]:
    return [int(m.group(1)) for m in map(_REF_LINE.match, observation.splitlines()[1:]) if m]


def bench_ours_click(task: str, episodes: int, steps: int) -> dict[str, Any]:
    """agentgym/MiniWoB-v0 on ``task``: reset and random-click step times."""
    env = gymnasium.make("agentgym/MiniWoB-v0", task=task)
    fmt = _action_format(env)
    resets: list[float] = []
    step_times: list[float] = []
    try:
        start = time.perf_counter()
        env.reset(seed=0)
        first = time.perf_counter() - start
        memory = browser_memory(_env_pids(env))
        for seed in range(1, episodes + 1):
            start = time.perf_counter()
            obs, _ = env.reset(seed=seed)
            resets.append(time.perf_counter() - start)
            rng = np.random.default_rng(seed)
            for _ in range(steps):
                refs = _click_refs(obs) or [1]
                answer = format_answer([f"click[{refs[int(rng.integers(len(refs)))]}]"], fmt)
                start = time.perf_counter()
                obs, _, terminated, truncated, _ = env.step(answer)
                step_times.append(time.perf_counter() - start)
                if terminated or truncated:
                    break
    finally:
        env.close()
    return {"first": first, "resets": resets, "steps": step_times, "memory": memory}


def _farama_pids(env: gymnasium.Env) -> list[int]:
    import psutil

    try:
        pid = env.unwrapped.instance.driver.service.process.pid
        proc = psutil.Process(pid)
        return [pid, *(c.pid for c in proc.children(recursive=True))]
    except Exception:
        return []


def bench_farama(task: str, episodes: int, steps: int, screenshots: bool) -> dict[str, Any]:
    """Farama's ``miniwob/<task>-v1``: reset and random CLICK_ELEMENT step times."""
    from miniwob.action import ActionTypes

    resets: list[float] = []
    step_times: list[float] = []
    start = time.perf_counter()
    env = gymnasium.make(f"miniwob/{task}-v1")  # starts ChromeDriver + Chromium
    try:
        options = {"record_screenshots": screenshots}
        env.reset(seed=0, options=options)
        first = time.perf_counter() - start
        memory = browser_memory(_farama_pids(env))
        for seed in range(1, episodes + 1):
            start = time.perf_counter()
            obs, _ = env.reset(seed=seed, options=options)
            resets.append(time.perf_counter() - start)
            rng = np.random.default_rng(seed)
            for _ in range(steps):
                # a text node has a negative ref and no element to click: skip those
                elements = obs["dom_elements"]
                refs = [int(e["ref"]) for e in elements if e["tag"] != "body" and e["ref"] > 0]
                refs = refs or [1]
                action = env.unwrapped.create_action(
                    ActionTypes.CLICK_ELEMENT, ref=refs[int(rng.integers(len(refs)))]
                )
                start = time.perf_counter()
                obs, _, terminated, truncated, _ = env.step(action)
                step_times.append(time.perf_counter() - start)
                if terminated or truncated:
                    break
    finally:
        env.close()
    return {"first": first, "resets": resets, "steps": step_times, "memory": memory}


def bench_peer(tasks: list[str], episodes: int, steps: int) -> None:
    print(f"\n== peer: Farama miniwob vs ours, random clicks on {', '.join(tasks)} == {_load()}")
    os.environ.setdefault("MINIWOB_CHROME_BINARY", "/usr/bin/chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
    farama_error: str | None = None
    try:
        import miniwob  # noqa: F401  (registers miniwob/<task>-v1)
        from miniwob.action import ActionTypes  # noqa: F401
    except Exception as err:
        farama_error = f"cannot import Farama's miniwob: {type(err).__name__}: {err}"
    header = (
        f"{'env':30} {'first s':>8} {'reset p50':>10} {'p95':>7} {'step p50':>9} {'p95':>7} "
        f"{'steps':>6} {'MiB/env':>8}"
    )
    print(header)
    rows: dict[str, dict[str, list[float]]] = {}

    def add(name: str, r: dict[str, Any]) -> None:
        row = rows.setdefault(name, {"first": [], "resets": [], "steps": [], "mem": []})
        row["first"].append(r["first"])
        row["resets"] += r["resets"]
        row["steps"] += r["steps"]
        if "memory" in r:
            row["mem"].append(r["memory"][1])

    for task in tasks:
        try:
            add("agentgym/MiniWoB-v0", bench_ours_click(task, episodes, steps))
        except Exception as err:
            print(f"ours on {task} failed: {type(err).__name__}: {err}")
        if farama_error is not None:
            continue
        for screenshots in (True, False):
            name = "miniwob/*-v1" + (" (screenshots)" if screenshots else " (no screenshots)")
            try:
                add(name, bench_farama(task, episodes, steps, screenshots))
            except Exception as err:
                farama_error = (
                    f"Farama's env failed on {task} (headless Chromium via "
                    f"MINIWOB_CHROME_BINARY/MINIWOB_CHROMEDRIVER): {type(err).__name__}: "
                    f"{str(err).splitlines()[0] if str(err) else ''}"
                )
                break
    for name, row in rows.items():
        mem = f"{np.mean(row['mem']):8.1f}" if row["mem"] else f"{'-':>8}"
        print(
            f"{name:30} {np.median(row['first']):8.2f} {_ms(row['resets'], 50):10.1f} "
            f"{_ms(row['resets'], 95):7.1f} {_ms(row['steps'], 50):9.1f} "
            f"{_ms(row['steps'], 95):7.1f} {len(row['steps']):6d} {mem}"
        )
    if farama_error is not None:
        print(f"peer not measured: {farama_error}")
    print(
        "notes: times in ms except 'first s' (median over tasks of make + first reset); "
        "MiB/env: PSS (else USS/RSS) of the env's ChromeDriver + Chromium after the first reset, "
        "mean over tasks. Farama's reset restarts the task on the loaded page (no page load) and its step "
        "reads the page straight after the action; ours loads a fresh page per reset and waits "
        "for the page to settle after each action. BrowserGym (not installed, not measured) "
        "documents a fixed 0.5 s sleep per step, i.e. a step p50 of >= 500 ms."
    )


# ---------------------------------------------------------------------- main


def _part(name: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception as err:  # print why, go on with the other parts
        print(f"\n{name} failed: {type(err).__name__}: {err}")
        traceback.print_exc(limit=3, file=sys.stdout)


def bench_floor(task: str = "click-test", n: int = 50) -> None:
    """The browser's floor: a bare WebDriver round trip and a bare page load, on our browser."""
    from sandboxes.web.miniwob import task_url

    env = gymnasium.make("agentgym/MiniWoB-v0", task=task)
    try:
        env.reset(seed=0)  # starts the browser
        driver = env.unwrapped.browser.driver
        url = task_url(task)
        trips, loads = [], []
        for _ in range(n):
            start = time.perf_counter()
            driver.execute_script("return 1")
            trips.append(time.perf_counter() - start)
        for _ in range(max(5, n // 5)):
            start = time.perf_counter()
            driver.get(url)
            loads.append(time.perf_counter() - start)
    finally:
        env.close()
    print(f"\n== floor (same browser, {task}) == {_load()}")
    print(
        f"WebDriver round trip p50 {_ms(trips, 50):.1f} ms, p95 {_ms(trips, 95):.1f} ms; "
        f"bare page load p50 {_ms(loads, 50):.1f} ms, p95 {_ms(loads, 95):.1f} ms"
    )
    try:
        import torch
    except ImportError:
        print("matmul: torch not installed (the train extra)")
        return
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 1024, generator=gen), torch.randn(1024, 1024, generator=gen)
    a @ b
    start, reps = time.perf_counter(), 10
    for _ in range(reps):
        a @ b
    gflops = reps * 2 * 1024**3 / (time.perf_counter() - start) / 1e9
    print(f"matmul float32 1024^3, 1 thread: {gflops:.1f} GFLOP/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--episodes",
        type=int,
        default=2 * HTML_TASKS,
        help="MiniWoB oracle episodes per measure (seeds 0..N-1; >= 56 covers every task)",
    )
    parser.add_argument("--random-episodes", type=int, default=20, help="random-agent episodes")
    parser.add_argument("--threads", type=int, default=4, help="envs (and threads) of the xN run")
    parser.add_argument("--webshop-episodes", type=int, default=10)
    parser.add_argument("--peer-tasks", nargs="+", default=list(PEER_TASKS))
    parser.add_argument("--peer-episodes", type=int, default=10, help="episodes per peer task")
    parser.add_argument("--peer-steps", type=int, default=5, help="most clicks per peer episode")
    parser.add_argument("--skip-peer", action="store_true", help="skip Farama's miniwob")
    parser.add_argument("--skip-webshop", action="store_true", help="skip WebShop-v0")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 8 oracle episodes, 3 random, 3 WebShop, 2 peer tasks x 3 episodes",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.random_episodes, args.webshop_episodes = 8, 3, 3
        args.peer_tasks, args.peer_episodes, args.peer_steps = args.peer_tasks[:2], 3, 3
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {_load()}")
    print(
        f"aims: reset p50 <= {AIM_RESET_P50_MS:g} ms, step p50 <= {AIM_STEP_P50_MS:g} ms, "
        f">= {AIM_EPISODES_PER_MIN:g} oracle episodes/min on the HTML subset with one env"
    )
    if args.episodes < HTML_TASKS:
        print(f"note: {args.episodes} episodes < {HTML_TASKS}: not every HTML task comes up")

    def miniwob_part() -> None:
        r = bench_env(
            HTML_ID, args.episodes, args.random_episodes, args.threads, miniwob_env.random_action
        )
        print_env(r, args.threads, "MiniWoB HTML subset", aims=True)

    def webshop_part() -> None:
        n = args.webshop_episodes
        r = bench_env(WEBSHOP_ID, n, min(n, 10), args.threads, webshop_env.random_action)
        print_env(r, args.threads, "WebShop", aims=False)

    _part("floor", bench_floor)
    _part("MiniWoB", miniwob_part)
    if not args.skip_webshop:
        _part("WebShop", webshop_part)
    if not args.skip_peer:
        _part("peer", lambda: bench_peer(args.peer_tasks, args.peer_episodes, args.peer_steps))
    print(f"\nload after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
