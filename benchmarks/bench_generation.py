"""Multi-turn rollout speed against the machine's limit: Sokoban turns of 16 and 64 episodes,
the previous commit's engine against this tree's, each beside its floor.

Usage::

    python benchmarks/bench_generation.py [--episodes 16 64] [--before-commit HEAD~1]
        [--threads 1] [--max-new-tokens 128] [--group-size 8] [--no-before] [--micro]
        [--engines hf vllm] [--vllm-dtype auto]

``--engines vllm`` runs the same rollout through :class:`baselines.llm.engines.VLLMEngine`
(run the script with a python that has vLLM's CPU build, ``.venv-vllm/bin/python``, docs/engines.md;
``taskset -c 0`` holds vLLM's worker to one core, as ``--threads 1`` holds the HF engine).

Each rollout runs in its own child process (``children.spawn``: its own peak RSS, and the
``before`` tree imported from a ``git archive`` of ``--before-commit``): ``E`` Sokoban episodes
(``E / G`` groups of ``G = --group-size`` episodes, 8 by default; seeds 0.., 5 turns;
``--kv-cache-gib`` overrides the prefix store's bound) through the trainer's loop
(:func:`baselines.episodes.collect_rollouts`) with the engine settings of ``sokoban.yaml``
(temperature 1, ``</answer>`` stop, ``max_new_tokens`` 128, and the tree's own defaults of
``rollout.generation_batch_tokens``, ``kv_cache_gib`` and ``prefill_chunk_tokens``, which
sokoban.yaml leaves; one ``torch.Generator`` per episode) on the
embedded SmolLM2-135M under bf16 autocast where the CPU has it, ``--threads`` torch threads.

The floor: the FLOPs of processing every token of every episode once (each episode's final
context: ``2 x non-embedding parameters`` a token, attention's ``4 x layers x hidden x
position``, and the LM head ``2 x vocab x hidden`` for each sampled token only), over the matmul
rate measured in the same run: a child times ``x @ W^T`` under the same autocast for the
model's own weight shapes (q, k, v, o, gate, up, down, LM head) at 512 rows, ``--threads``
threads, at the start and the end; the higher is used. Printed per tree and batch: seconds,
generation seconds, sampled and prefilled tokens a second, prefix-store reuse, prompt tokens
shared between rows with one prompt (not prefilled) and drops, peak RSS,
the floor in seconds and the ratio seconds / floor (issue 41's aim: 3), then the roofline of
the forwards the rollout ran (:func:`roofline_seconds`: each forward at ``max(FLOP / matmul
rate, bytes / stream rate)``, the stream rate measured beside the matmul rate) and its ratio,
and the decoding steps. ``--micro`` adds the
kernels behind the changes: the attention of one decoding step (SDPA with ``enable_gqa``, as
transformers calls it for an unpadded batch; SDPA on packed heads, as for a padded one; and
:func:`baselines.llm.attention.sdpa_packed_gqa` on the engine's reserved buffer) and
one sampling step (``torch.multinomial`` a row against inversion), each on the shapes of
16 and 64 Sokoban rows. Never run by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from children import add_child_options, archived_tree, run_if_child, spawn
from timing import median_seconds

REPO = Path(__file__).resolve().parent.parent
ENV = "agentgym/Sokoban-v0"


def _model_flop(model) -> dict:
    config = model.config
    emb = model.get_input_embeddings().weight
    non_embedding = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    if model.get_output_embeddings().weight is not emb:
        non_embedding -= model.get_output_embeddings().weight.numel()
    return {
        "non_embedding": non_embedding,
        "layers": config.num_hidden_layers,
        "attn_width": config.num_attention_heads * getattr(config, "head_dim", None)
        or config.hidden_size,
        "hidden": emb.shape[1],
        "vocab": emb.shape[0],
    }


def rollout_child(a: dict) -> None:
    """``a``: {"episodes", "threads", "max_new_tokens"}; prints ``RESULT {json}``."""
    import resource

    from agentgym.threads import set_omp_wait_policy

    set_omp_wait_policy()
    import torch

    from baselines.config import RolloutConfig
    from baselines.episodes import collect_rollouts
    from baselines.llm.engines import HFEngine, SamplingSettings
    from baselines.llm.policy import load_policy
    from baselines.llm.scoring import autocast, resolve_autocast

    torch.set_num_threads(a["threads"])
    model, tok = load_policy("embedded", device="cpu", dtype="float32")
    model.eval()
    count = a["episodes"]
    sampling = SamplingSettings(
        max_new_tokens=a["max_new_tokens"], temperature=1.0, stop_strings=("</answer>",)
    )
    # The tree's own defaults of sokoban.yaml's rollout section (the config leaves them).
    rollout = RolloutConfig(env_id=ENV)
    amp = resolve_autocast("auto", "cpu")
    if a.get("engine", "hf") == "vllm":
        from baselines.llm.engines import VLLMEngine

        # The HF engine's dtype under autocast; vLLM's CPU build holds its weights in it.
        engine = VLLMEngine(
            model,
            tok,
            dtype=a.get("vllm_dtype") or ("bfloat16" if amp is not None else "float32"),
            max_model_len=4096,
            kv_cache_gib=max(1, round(a.get("kv_cache_gib", rollout.kv_cache_gib))),
        )
    else:
        engine = HFEngine(
            model,
            tok,
            max_batch_tokens=rollout.generation_batch_tokens,
            kv_cache_bytes=int(a.get("kv_cache_gib", rollout.kv_cache_gib) * 2**30),
            prefill_chunk_tokens=rollout.prefill_chunk_tokens,
        )
    generators = [torch.Generator().manual_seed(1000 + i) for i in range(count)]
    timings: dict[str, float] = {}
    forwards: list[tuple[int, int, int]] = []  # (rows, new tokens, keys read in all)

    def log_forward(module, args, kwargs) -> None:
        rows, new = kwargs["input_ids"].shape
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        layer = cache.layers[0] if getattr(cache, "layers", None) else None
        past = layer.get_seq_length() if layer is not None and layer.is_initialized else 0
        # Keys and values a forward reads, in tokens: every row's past and new tokens.
        forwards.append((rows, new, rows * (past + new)))

    model.register_forward_pre_hook(log_forward, with_kwargs=True)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with autocast("cpu", amp):
        episodes = collect_rollouts(
            model,
            tok,
            ENV,
            list(range(count // a.get("group_size", 8))),
            a.get("group_size", 8),
            sampling,
            engine=engine,
            generators=generators,
            timings=timings,
        )
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    contexts = [len(e.turns[-1].sample.prompt_ids) + len(e.turns[-1].sample.sampled_ids)
                for e in episodes if e.turns]  # fmt: skip
    sampled = sum(len(t.sample.sampled_ids) for e in episodes for t in e.turns)
    cache = getattr(engine, "cache", None)  # the HF engine's prefix store; vLLM has none
    if a.get("engine", "hf") == "vllm":
        engine.close()  # its engine process
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_bytes = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim
    kv_bytes *= 2 if amp is not None else 4  # stored in the autocast dtype
    result = {
        "seconds": wall,
        "generation_s": timings.get("timing/generation_s", 0.0),
        "env_s": timings.get("timing/env_s", 0.0),
        "sampled": sampled,
        "contexts": contexts,
        "prefilled": getattr(cache, "prefilled_tokens", 0),  # vLLM: not counted (0)
        "reused": getattr(cache, "reused_tokens", 0),
        "shared": getattr(cache, "shared_tokens", 0),  # a tree before the shared first prompts: 0
        "dropped": getattr(cache, "dropped", 0),
        "turns": sum(len(e.turns) for e in episodes),
        "peak_gb": peak * 1024 / 1e9,
        "rise_gb": (peak - loaded) * 1024 / 1e9,
        "amp": str(amp),
        "forwards": forwards,
        "kv_bytes_per_token": kv_bytes,
        **_model_flop(model),
    }
    print("RESULT " + json.dumps(result))


def matmul_child(a: dict) -> None:
    """GFLOP/s of ``x [512, in] @ W^T`` under the rollout's autocast, summed over the model's own
    weight shapes; prints the rate."""
    import statistics

    from agentgym.threads import set_omp_wait_policy

    set_omp_wait_policy()
    import torch

    from baselines.llm.policy import load_policy
    from baselines.llm.scoring import autocast, resolve_autocast

    torch.set_num_threads(a["threads"])
    model, _ = load_policy("embedded", device="cpu", dtype="float32")
    layer = model.model.layers[0]
    weights = [m.weight for m in layer.modules() if isinstance(m, torch.nn.Linear)]
    weights.append(model.get_output_embeddings().weight)
    rows = 512
    xs = [torch.randn(rows, w.shape[1]) for w in weights]
    flop = sum(2 * rows * w.shape[0] * w.shape[1] for w in weights)
    amp = resolve_autocast("auto", "cpu")
    times = []
    with torch.no_grad(), autocast("cpu", amp):
        for i in range(7):
            t0 = time.perf_counter()
            for x, w in zip(xs, weights, strict=True):
                torch.nn.functional.linear(x, w)
            if i >= 2:
                times.append(time.perf_counter() - t0)
    # The rate memory streams at: a sum over 2 GiB of float32 (four times this machine's
    # 480 MiB L3, so none of it is cached), median of 5.
    big = torch.ones(2**29)
    reads = []
    for _ in range(6):
        t0 = time.perf_counter()
        big.sum()
        reads.append(time.perf_counter() - t0)
    print(flop / statistics.median(times) / 1e9, big.nbytes / statistics.median(reads[1:]) / 1e9)


def micro_child(a: dict) -> None:
    """The kernels: one decoding step's SDPA and one sampling step; prints ``RESULT {json}``."""

    from agentgym.threads import set_omp_wait_policy

    set_omp_wait_policy()
    import torch
    import torch.nn.functional as F

    from baselines.llm.attention import sdpa_packed_gqa
    from baselines.llm.engines import sample_rows

    torch.set_num_threads(a["threads"])

    def ms(fn) -> float:
        return median_seconds(fn, repeats=10, warmups=1) * 1e3

    out = {}
    g = torch.Generator().manual_seed(0)
    layer = torch.nn.Module()
    layer.num_key_value_groups = 3
    for rows, keys in ((16, 600), (64, 1200)):
        q = torch.randn(rows, 9, 1, 64, generator=g).bfloat16()
        # The engine's cache: the filled part of a buffer reserved for 128 more tokens.
        k = torch.randn(rows, 3, keys + 128, 64, generator=g).bfloat16()[:, :, :keys]
        v = torch.randn(rows, 3, keys + 128, 64, generator=g).bfloat16()[:, :, :keys]
        mask = torch.ones(rows, 1, 1, keys, dtype=torch.bool)
        gqa = ms(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        packed = q.reshape(rows, 3, 3, 64)
        pack = ms(lambda p=packed, k=k, v=v, m=mask: F.scaled_dot_product_attention(p, k, v, m))
        ours = ms(lambda q=q, k=k, v=v, m=mask: sdpa_packed_gqa(layer, q, k, v, m, scaling=0.125))
        out[f"decode attention {rows} rows x {keys} keys (bf16, 9 on 3 heads)"] = (gqa, pack, ours)
    for rows in (16, 64):
        probs = torch.softmax(torch.randn(rows, 49152, generator=g), dim=-1)
        gens = [torch.Generator().manual_seed(r) for r in range(rows)]
        multi = ms(lambda p=probs, gs=gens: [torch.multinomial(p[r], 1, generator=gs[r])
                                             for r in range(len(gs))])  # fmt: skip
        inv = ms(lambda p=probs, gs=gens: sample_rows(p, list(range(len(gs))), gs))
        out[f"sampling {rows} rows x 49,152 tokens"] = (multi, inv)
    out = {name: [round(x, 3) for x in times] for name, times in out.items()}
    print("RESULT " + json.dumps(out))


CHILDREN = {"rollout": rollout_child, "matmul": matmul_child, "micro": micro_child}


def roofline_seconds(r: dict, gflops: float, gbps: float) -> float:
    """The forwards the rollout ran, each at the machine's limit: ``max(FLOP / matmul rate,
    bytes / stream rate)`` a forward (Williams et al. 2009, the roofline), summed. A forward's
    FLOP: ``2 x non-embedding parameters`` a new token, attention's ``4 x layers x width`` per
    new token and key read, the LM head for one position a row (``logits_to_keep=1``); its
    bytes: the weights once in the autocast dtype (LM head included) and every key and value it
    reads (``kv_bytes_per_token`` each). Unlike the FLOP floor (the work, done once in the
    largest batches) it takes the engine's batching as given: how near each forward runs to
    the machine, where a decoding step of 16 rows is bound by memory, not arithmetic."""
    width = 4 if r["amp"] == "None" else 2  # weights cast to the autocast dtype
    weights = width * (r["non_embedding"] + r["vocab"] * r["hidden"])
    total = 0.0
    for rows, new, keys in r["forwards"]:
        per_row = keys / rows
        flop = (2 * r["non_embedding"] * rows * new
                + 4 * r["layers"] * r["attn_width"] * rows * new * per_row
                + 2 * r["vocab"] * r["hidden"] * rows)  # fmt: skip
        moved = weights + keys * r["kv_bytes_per_token"]
        total += max(flop / (gflops * 1e9), moved / (gbps * 1e9))
    return total


def floor_gflop(r: dict) -> float:
    """The rollout's ideal GFLOP (module docstring)."""
    trunk = sum(2 * r["non_embedding"] * n for n in r["contexts"])
    attention = sum(4 * r["layers"] * r["attn_width"] * n * (n - 1) / 2 for n in r["contexts"])
    head = 2 * r["vocab"] * r["hidden"] * r["sampled"]
    return (trunk + attention + head) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--before-commit", default="HEAD~1")
    parser.add_argument("--no-before", action="store_true", help="this tree only")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--kv-cache-gib",
        type=float,
        default=None,
        help="the prefix store's bound (default: the tree's)",
    )
    parser.add_argument(
        "--group-size",
        type=int,
        default=8,
        help="episodes a seed (1: distinct seeds, as validation)",
    )
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["hf"],
        choices=["hf", "vllm"],
        help="rollout engines, each on every tree (vllm: run under a python that has vLLM, "
        "e.g. .venv-vllm/bin/python; its forwards are not logged, so no roofline)",
    )
    parser.add_argument(
        "--vllm-dtype",
        default=None,
        help="vLLM's weights (default: the HF engine's autocast dtype; 'auto' is the engine's "
        "own default, float32 on CPU, as rollout.engine=vllm runs)",
    )
    parser.add_argument("--micro", action="store_true", help="also time the kernels")
    add_child_options(parser, CHILDREN)
    args = parser.parse_args()
    if run_if_child(args, CHILDREN):
        return
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.before_commit],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    trees = {} if args.no_before else {f"before {commit}": archived_tree(REPO, commit)}
    trees["after (this tree)"] = REPO
    print(f"load (1/5/15 min) at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    def rate() -> tuple[float, float]:
        out = spawn(__file__, "matmul", {"threads": args.threads}, REPO).split()
        return float(out[-2]), float(out[-1])

    measured = [rate()]  # (matmul GFLOP/s, memory GB/s) at the start, then at the end
    print(f"matmul on the model's shapes, {args.threads} thread(s): {measured[0][0]:.0f} GFLOP/s; "
          f"memory streams at {measured[0][1]:.1f} GB/s")  # fmt: skip
    if args.micro:
        micro = json.loads(spawn(__file__, "micro", {"threads": args.threads}, REPO)
                           .split("RESULT ", 1)[1].splitlines()[0])  # fmt: skip
        for name, times in micro.items():
            if len(times) == 3:
                print(f"  {name}: SDPA enable_gqa (unpadded, before) {times[0]:.2f} ms, SDPA "
                      f"packed (padded, before) {times[1]:.2f} ms, after {times[2]:.2f} ms")  # fmt: skip
            else:
                print(f"  {name}: torch.multinomial a row (before) {times[0]:.2f} ms, by "
                      f"inversion (after) {times[1]:.2f} ms")  # fmt: skip
    results = {}
    runs = {f"{name} {engine}" if len(args.engines) > 1 else name: (tree, engine)
            for name, tree in trees.items() for engine in args.engines}  # fmt: skip
    for count in args.episodes:
        for name, (tree, engine) in runs.items():
            payload = {"episodes": count, "threads": args.threads,
                       "max_new_tokens": args.max_new_tokens,
                       "group_size": args.group_size, "engine": engine,
                       "vllm_dtype": args.vllm_dtype}  # fmt: skip
            if args.kv_cache_gib is not None:
                payload["kv_cache_gib"] = args.kv_cache_gib
            out = spawn(__file__, "rollout", payload, tree)
            results[(count, name)] = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
            r = results[(count, name)]
            print(f"  {count} episodes, {name}: {r['seconds']:.1f} s", flush=True)
    measured.append(rate())
    peak, stream = (max(column) for column in zip(*measured, strict=True))
    print(f"matmul at the end: {measured[1][0]:.0f} GFLOP/s, memory {measured[1][1]:.1f} GB/s; "
          f"the floors use {peak:.0f} and {stream:.1f}")  # fmt: skip
    print(f"load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"{'episodes':>8} {'tree':<22} {'wall_s':>7} {'gen_s':>7} {'sampled/s':>9} "
          f"{'prefill/s':>9} {'reused':>7} {'shared':>7} {'dropped':>7} {'peak_GB':>7} "
          f"{'floor_s':>7} {'ratio':>6} {'roof_s':>7} {'ratio':>6} {'steps':>6}")  # fmt: skip
    for (count, name), r in results.items():
        floor = floor_gflop(r) / peak
        roof = roofline_seconds(r, peak, stream) or float("nan")  # vLLM: no forwards logged
        steps = sum(1 for _, new, _ in r["forwards"] if new == 1)
        print(f"{count:>8} {name:<22} {r['seconds']:>7.1f} {r['generation_s']:>7.1f} "
              f"{r['sampled'] / r['seconds']:>9.1f} {r['prefilled'] / r['seconds']:>9.1f} "
              f"{r['reused']:>7} {r.get('shared', 0):>7} {r['dropped']:>7} {r['peak_gb']:>7.2f} {floor:>7.1f} "
              f"{r['seconds'] / floor:>6.1f} {roof:>7.1f} {r['seconds'] / roof:>6.1f} {steps:>6}")  # fmt: skip


if __name__ == "__main__":
    main()
