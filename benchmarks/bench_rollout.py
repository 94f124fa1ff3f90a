"""Rollout throughput: the hf and vllm engines, vLLM weight sync, and Ray environment stepping.

Usage::

    # engines (run in the venv that has vLLM, e.g. .venv-vllm; --no-vllm for hf alone)
    .venv-vllm/bin/python benchmarks/bench_rollout.py engines --episodes 8 32 64 --max-new-tokens 32
    # the trainer's episode loop against the raw engine on the same batch
    python benchmarks/bench_rollout.py loop --episodes 8 --max-new-tokens 32
    # multi-turn episodes: the HF engine with and without keys/values kept across turns
    python benchmarks/bench_rollout.py turns --episodes 8 --max-new-tokens 32
    # Ray workers against in-process stepping (main venv, `ray` extra)
    python benchmarks/bench_rollout.py ray --workers 1 2 4 --episodes 64

``engines``: the first prompts of ``E`` Sokoban episodes (seeds 0..E-1) in one batch, sampled at
temperature 1 with no stop strings, ``--max-new-tokens`` per reply, on SmolLM2-135M-Instruct
(float32 on CPU, bfloat16 on CUDA); prints generated tokens/s per engine and batch size, and the
vLLM weight-sync time (safetensors to /dev/shm + in-place reload), mean of ``--syncs`` syncs.

``loop``: the trainer's episode loop (:func:`baselines.episodes.collect_rollouts`, one turn of
``E`` Sokoban episodes: prompt building, generation, environment steps) against the raw HF engine
on the same prompt ids and seed (the same sampled ids, checked); prints tokens/s of each and their
ratio (the loop's overhead).

``turns``: ``E`` whole Sokoban episodes (5 turns, greedy) through the trainer's loop with
``HFEngine(kv_cache=False)`` (``model.generate``: every prompt prefilled in full, the history
re-encoded each turn) and the default ``HFEngine`` (keys/values reused across turns); checks that
both sampled the same ids and prints the wall time, generated tokens/s, prompt tokens prefilled
and reused, and the speed-up.

``ray``: ``E`` Sokoban episodes stepped with scripted replies (a seeded choice of moves) until
they end, in-process and with each number of Ray workers; prints environment steps/s (resets
excluded). The environments are cheap (tens of microseconds a step), so this measures Ray's
per-call overhead against that: Ray pays off for environments whose steps cost milliseconds
(sandboxes, browsers) or across nodes. Never run by tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import baselines  # noqa: E402, F401  (before torch: sets OMP_WAIT_POLICY, agentgym.threads)

ENV = "agentgym/Sokoban-v0"


def _prompts(tokenizer, count: int) -> list[list[int]]:
    from tests.helpers import first_prompt_ids

    return first_prompt_ids(tokenizer, [(ENV, range(count))])


def bench_engines(args: argparse.Namespace) -> None:
    import torch

    from baselines.llm.engines import HFEngine, SamplingSettings
    from baselines.llm.policy import load_policy

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_policy("embedded")
    sampling = SamplingSettings(max_new_tokens=args.max_new_tokens, stop_strings=())
    engines = [("hf", HFEngine(model, tokenizer))]
    vllm_engine = None
    if not args.no_vllm:
        from baselines.llm.engines import VLLMEngine

        t0 = time.perf_counter()
        vllm_engine = VLLMEngine(model, tokenizer, max_model_len=2048)
        print(f"vllm start-up: {time.perf_counter() - t0:.1f} s")
        engines.append(("vllm", vllm_engine))
    print(f"{'engine':>6} {'episodes':>8} {'tokens':>7} {'seconds':>8} {'tokens/s':>9}")
    try:
        for count in args.episodes:
            prompts = _prompts(tokenizer, count)
            for name, engine in engines:
                if name == "hf" and count > args.hf_max_episodes:
                    print(f"{name:>6} {count:>8}  skipped (--hf-max-episodes)")
                    continue
                torch.manual_seed(0)
                t0 = time.perf_counter()
                out = engine.generate(prompts, sampling)
                seconds = time.perf_counter() - t0
                tokens = sum(len(g.sampled_ids) for g in out)
                print(f"{name:>6} {count:>8} {tokens:>7} {seconds:>8.2f} {tokens / seconds:>9.1f}")
        if vllm_engine is not None:
            times = [vllm_engine.sync_weights(model) for _ in range(args.syncs)]
            print(
                f"vllm weight sync: {sum(times) / len(times):.2f} s per step "
                f"(mean of {len(times)}: {', '.join(f'{t:.2f}' for t in times)})"
            )
    finally:
        if vllm_engine is not None:
            vllm_engine.close()


def bench_loop(args: argparse.Namespace) -> None:
    """The trainer's episode loop against the raw engine on the same batch and seed."""
    import torch

    from baselines.episodes import collect_rollouts
    from baselines.llm.engines import HFEngine, SamplingSettings
    from baselines.llm.policy import load_policy

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(
        args.model, texts=_tiny_texts() if args.model == "tiny" else None
    )
    engine = HFEngine(model, tokenizer)
    sampling = SamplingSettings(max_new_tokens=args.max_new_tokens, stop_strings=())
    engine.generate(_prompts(tokenizer, 2), sampling)  # warm-up
    print(f"{'episodes':>8} {'engine tok/s':>12} {'loop tok/s':>10} {'loop/engine':>11}")
    for count in args.episodes:
        torch.manual_seed(0)
        t0 = time.perf_counter()
        episodes = collect_rollouts(
            model, tokenizer, ENV, list(range(count)), 1, sampling,
            env_kwargs={"max_turns": 1}, engine=engine,
        )  # fmt: skip
        loop_s = time.perf_counter() - t0
        tokens = sum(len(t.sample.sampled_ids) for e in episodes for t in e.turns)
        prompts = [e.turns[0].sample.prompt_ids for e in episodes]
        torch.manual_seed(0)
        t0 = time.perf_counter()
        raw = engine.generate(prompts, sampling)
        raw_s = time.perf_counter() - t0
        raw_tokens = sum(len(g.sampled_ids) for g in raw)
        assert [e.turns[0].sample.sampled_ids for e in episodes] == [g.sampled_ids for g in raw]
        print(
            f"{count:>8} {raw_tokens / raw_s:>12.1f} {tokens / loop_s:>10.1f} "
            f"{(tokens / loop_s) / (raw_tokens / raw_s):>11.2f}"
        )


def bench_turns(args: argparse.Namespace) -> None:
    """Whole multi-turn episodes: full prefill each turn against keys/values kept across turns."""
    import torch

    from baselines.episodes import collect_rollouts
    from baselines.llm.engines import HFEngine, SamplingSettings
    from baselines.llm.policy import load_policy

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(
        args.model, texts=_tiny_texts() if args.model == "tiny" else None
    )
    sampling = SamplingSettings(max_new_tokens=args.max_new_tokens, temperature=0.0)
    print(f"{'episodes':>8} {'kv cache':>8} {'wall s':>7} {'tok/s':>7} {'prefilled':>9} "
          f"{'reused':>7}")  # fmt: skip
    for count in args.episodes:
        results = {}
        for kv in (False, True):
            engine = HFEngine(model, tokenizer, kv_cache=kv)
            prefilled = reused = 0
            if engine.cache is not None:
                real = engine.generate

                def counted(prompts, settings, real=real, engine=engine):
                    out = real(prompts, settings)
                    counted.stats = (engine.cache.prefilled_tokens, engine.cache.reused_tokens)
                    return out

                engine.generate = counted
            t0 = time.perf_counter()
            episodes = collect_rollouts(
                model, tokenizer, ENV, list(range(count)), 1, sampling, engine=engine
            )
            wall = time.perf_counter() - t0
            tokens = sum(len(t.sample.sampled_ids) for e in episodes for t in e.turns)
            if kv:
                prefilled, reused = counted.stats
            else:
                prefilled = sum(len(t.sample.prompt_ids) for e in episodes for t in e.turns)
            results[kv] = (wall, [[t.sample.sampled_ids for t in e.turns] for e in episodes])
            print(f"{count:>8} {'on' if kv else 'off':>8} {wall:>7.1f} {tokens / wall:>7.1f} "
                  f"{prefilled:>9} {reused:>7}")  # fmt: skip
        same = results[False][1] == results[True][1]
        print(f"{count:>8} speed-up {results[False][0] / results[True][0]:.2f}x; "
              f"same sampled ids: {same}")  # fmt: skip


def _tiny_texts() -> list[str]:
    from baselines.episodes import vocabulary_texts

    return vocabulary_texts(ENV, {}, range(32))


def _scripted_steps(pool, count: int, seed: int) -> tuple[int, float]:
    import numpy as np

    rng = np.random.default_rng(seed)
    moves = ["Up", "Down", "Left", "Right"]
    pool.reset_many(list(range(count)))
    live = list(range(count))
    steps, seconds = 0, 0.0
    while live:
        actions = [
            f"<think></think><answer>{' || '.join(rng.choice(moves, size=2))}</answer>"
            for _ in live
        ]
        t0 = time.perf_counter()
        results = pool.step_many(live, actions)
        seconds += time.perf_counter() - t0
        steps += len(live)
        live = [i for i, r in zip(live, results, strict=True) if not (r[2] or r[3])]
    return steps, seconds


def bench_ray(args: argparse.Namespace) -> None:
    import gymnasium as gym
    import ray

    import agentgym  # noqa: F401
    from agentgym.lockstep import LocalEnvs
    from baselines.ray_rollout import RayEnvPool

    count = max(args.episodes)
    print(f"{'stepping':>12} {'episodes':>8} {'steps':>6} {'seconds':>8} {'steps/s':>9}")
    envs = [gym.make(ENV) for _ in range(count)]
    steps, seconds = _scripted_steps(LocalEnvs(envs), count, seed=0)
    print(f"{'in-process':>12} {count:>8} {steps:>6} {seconds:>8.3f} {steps / seconds:>9.1f}")
    for env in envs:
        env.close()
    ray.init(
        num_cpus=max(os.cpu_count() or 1, max(args.workers)),
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        for workers in args.workers:
            with RayEnvPool(ENV, {}, num_workers=workers) as pool:
                pool.worker_pids()  # actors up before timing
                steps, seconds = _scripted_steps(pool, count, seed=0)
            label = f"ray x{workers}"
            print(f"{label:>12} {count:>8} {steps:>6} {seconds:>8.3f} {steps / seconds:>9.1f}")
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["engines", "loop", "turns", "ray"])
    parser.add_argument("--model", default="embedded", help="loop: embedded | tiny | folder")
    parser.add_argument("--episodes", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--hf-max-episodes", type=int, default=64)
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    if args.part == "engines":
        bench_engines(args)
    elif args.part == "loop":
        bench_loop(args)
    elif args.part == "turns":
        bench_turns(args)
    else:
        bench_ray(args)


if __name__ == "__main__":  # vLLM's engine starts a spawned process
    main()
