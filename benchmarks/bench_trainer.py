"""Where a training step's time goes, and what filtering and KV reuse save.

Usage::

    python benchmarks/bench_trainer.py                 # SmolLM2-135M-Instruct (embedded), CPU
    python benchmarks/bench_trainer.py --model tiny    # the tiny random-init model (seconds)
    python benchmarks/bench_trainer.py --cuda-shape    # on a CUDA GPU: random-init SmolLM2 shape, bf16
    .venv-vllm/bin/python benchmarks/bench_trainer.py --engine vllm --filters top_p   # vLLM engine

Prints, per configuration: the per-step time split (generation, environment stepping,
reference/old log-probs, MI diagnostics, backward), generated tokens/s, the environment's share of
rollout time (aim < 2%), the MI diagnostics' share of a step (aim < 10%), the KV-reuse speed-up of
the MI scorer over plain teacher forcing on the step's own (prompt, reasoning) pairs (aim >= 5x),
tokens trained per step with SNR-Aware Filtering and without, and peak memory. Never run by tests.

``--update-floor CONFIG`` (issue 41): the update of one captured multi-turn batch of CONFIG (by
default 4 Sokoban rows of ``sokoban.yaml``), the previous commit against this tree, beside its
FLOP floor over the bf16 matmul rate on the model's own shapes measured in the same run
(:func:`update_floor`, :func:`floor_gflop`)::

    python benchmarks/bench_trainer.py --update-floor baselines/configs/sokoban.yaml --threads 1
        [--capture rollout.num_groups=2 rollout.group_size=2] [--floor-before 7b0f209]
        [--repeats 2] [--rounds 1]

``--update-only`` (issue 22): the update alone, before and after the scoring rewrite, on ONE
captured main-job batch::

    python benchmarks/bench_trainer.py --update-only [--threads 1 2] [--repeats 2]
        [--batch FILE] [--before DIR | --before-commit 23535da] [--configs a b c c']

1. Capture (once; reused when ``--batch`` exists): the README's main job
   (``baselines/configs/quick.yaml``: Bandit, 4 groups x 4, 48 new tokens, temperature 0.7) rolled
   out once with the trainer's own rollout (``Trainer._rollout(0)``, ``train.seed`` 0), all 16
   episodes built into one :class:`~baselines.rl.batch.RolloutBatch` (no filter), saved with
   ``torch.save`` as its tensors plus the ``[P, N]`` group rewards, so every configuration sees
   exactly the same tokens.
2. Per thread count, per configuration, one subprocess (threads are set before torch does work,
   ``train.threads=N``): (a) the previous trainer (``--before-commit``, default 23535da, unpacked
   with ``git archive``) at its defaults (model.dtype auto = float32 on CPU, micro_batch_size 4,
   full logits at every position); (b) this trainer at the old settings (model.dtype=float32,
   micro_batch_size=4); (c) this trainer at the new defaults (model.dtype=auto: bf16 autocast
   where native, micro_batch_size=0, micro_batch_tokens=4096); (c') the main job as shipped
   (quick.yaml: auto, micro_batch_size 4). Each times ``Trainer._update`` on the batch (GRPO
   advantages from the group rewards, forward, backward, clipping, one AdamW step): one warm-up
   update, then the median of ``--repeats``. Peak RSS is the subprocess's ``ru_maxrss`` (model
   load included).
3. Matmul peak in the same run: ``torch.mm`` 2048 x 2048 in float32 and bfloat16 at each thread
   count (median of 5 after 2 warm-ups), measured before and after the updates; the higher is
   the peak.

GFLOP of one update (multiply-adds count 2; attention's score/value matmuls, ~3% here, and
element-wise work are left out)::

    trunk = 6 * N_ne * T_real            # forward 2 + backward 4 per parameter and real token
    head (a, full logits) = 6 * H * V * T_real      # head at every real position
    head (b, c, scored)   = 8 * H * V * S           # forward 2 + backward 4 + checkpoint
                                                    # recompute 2, at the S loss positions

``N_ne``: parameters without the (tied) embedding; ``T_real``: attention-mask tokens; padding
the micro-batches add is real work but not counted (``padded`` column). GFLOP/s over the median
seconds, as a fraction of the measured matmul peak of the dtype the configuration computes in.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from children import add_child_options, archived_tree, run_if_child, spawn

#: ``--child NAME``: this file runs as one of the ``*_child`` functions below, against the tree its
#: PYTHONPATH names (``--update-only``'s before tree too), importing what it needs itself.
_CHILD = __name__ == "__main__" and "--child" in sys.argv[1:]
if not _CHILD:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    import baselines  # noqa: F401  (before torch: sets OMP_WAIT_POLICY, agentgym.threads)

    # isort: split
    import torch

    from baselines.collapse import score_matrix, score_matrix_naive
    from baselines.collapse.reasoning import reasoning_ids
    from baselines.config import load_config
    from baselines.trainer import Trainer


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _kv_speedup(trainer: Trainer, episodes) -> tuple[float, float, float]:
    """Time the cached and the naive scorer on the batch's first-turn pairs."""
    tok = trainer.tokenizer
    pairs = [
        (tuple(e.turns[0].sample.prompt_ids), reasoning_ids(tok, e.turns[0]))
        for e in episodes
        if e.turns
    ]
    prompt_ids = [list(p) for p in sorted({p for p, _ in pairs})]
    z_ids = [z for _, z in pairs]
    with torch.no_grad():
        t0 = time.perf_counter()
        cached = score_matrix(trainer.model, prompt_ids, z_ids, batch_size=8)
        t_cached = time.perf_counter() - t0
        t0 = time.perf_counter()
        naive = score_matrix_naive(trainer.model, prompt_ids, z_ids, batch_size=8)
        t_naive = time.perf_counter() - t0
    err = float((cached - naive).abs().max())
    return t_naive / t_cached, t_cached, err


def run(
    model: str,
    steps: int,
    groups: int,
    group_size: int,
    new_tokens: int,
    env_id: str,
    filter_strategy: str,
    device: str,
    dtype: str,
    engine: str = "hf",
) -> dict[str, float]:
    out = tempfile.mkdtemp(prefix="bench-trainer-")
    overrides = [
        f"model.path={model}",
        f"model.device={device}",
        f"model.dtype={dtype}",
        f"rollout.env_id={env_id}",
        f"rollout.num_groups={groups}",
        f"rollout.group_size={group_size}",
        f"rollout.max_new_tokens={new_tokens}",
        "rollout.temperature=0.7",
        "rollout.val_episodes=0",
        "diagnostics.every=1",
        f"diagnostics.max_pairs={groups * group_size}",
        f"filter.strategy={filter_strategy}",
        f"train.out_dir={out}",
        f"train.steps={steps}",
        "train.save_every=1000000",
        "algorithm.micro_batch_size=4",
        f"rollout.engine={engine}",
    ]
    if model == "tiny":
        overrides += [
            "rollout.env_kwargs={action_format: raw}",
            "rollout.think_prefix=false",
            "algorithm.lr=0.01",
        ]
    trainer = Trainer(load_config(None, overrides), progress=False)
    rows = [trainer.step(s) for s in range(steps)]
    episodes, _ = trainer._rollout(steps)  # one more batch for the scorer comparison
    speedup, t_cached, err = _kv_speedup(trainer, episodes)

    def mean(key: str) -> float:
        return float(np.mean([r.get(key, 0.0) for r in rows]))

    rollout_s = mean("timing/generation_s") + mean("timing/env_s")
    return {
        "step_s": mean("timing/step_s"),
        "generation_s": mean("timing/generation_s"),
        "env_s": mean("timing/env_s"),
        "ref_old_logprob_s": mean("timing/ref_old_logprob_s"),
        "diagnostics_s": mean("timing/diagnostics_s"),
        "backward_s": mean("timing/backward_s"),
        "prompt_s": mean("timing/prompt_s"),
        "generated_tokens_per_s": mean("timing/generated_tokens_per_s"),
        "env_share_of_rollout": mean("timing/env_s") / rollout_s if rollout_s else 0.0,
        "diagnostics_share_of_step": mean("timing/diagnostics_s") / mean("timing/step_s"),
        "kv_reuse_speedup": speedup,
        "kv_cached_scorer_s": t_cached,
        "kv_max_abs_diff": err,
        "tokens_trained": mean("actor/tokens_trained"),
        "tokens_before_filter": mean("filter/tokens_before"),
        "kept_fraction": mean("filter/kept_fraction"),
        "peak_memory_mb": _peak_memory_mb(trainer.device),
    }


# ---------------------------------------------------------------- --update-only (issue 22)

REPO = Path(__file__).resolve().parent.parent
QUICK = "baselines/configs/quick.yaml"


def capture_child(a: dict) -> None:
    """Roll out the main job (or ``a["config"]``) once and save the batch.

    ``a``: {"config", "file", "out_dir", "model", optional "overrides"}."""
    import dataclasses

    import torch

    from baselines.config import load_config
    from baselines.rl.batch import build_batch
    from baselines.trainer import Trainer

    cfg = load_config(
        a["config"],
        [
            f"train.out_dir={a['out_dir']}",
            "train.threads=2",
            "rollout.val_episodes=0",
            "diagnostics.every=0",
        ]
        + a["model"]
        + a.get("overrides", []),
    )
    trainer = Trainer(cfg, progress=False)
    episodes, timings = trainer._rollout(0)
    P, N = cfg.rollout.num_groups, cfg.rollout.group_size
    rewards = torch.tensor([e.total_reward for e in episodes], dtype=torch.float64).view(P, N)
    pad = trainer.tokenizer.pad_token_id if trainer.tokenizer.pad_token_id is not None else 0
    batch = build_batch(episodes, pad)
    fields = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    torch.save(
        {
            "batch": {k: v for k, v in fields.items() if v is not None},
            "group_rewards": rewards,
            "responses": [t.action for e in episodes for t in e.turns],
            "config": a["config"],
            "seed": cfg.train.seed,
        },
        a["file"],
    )
    info = {
        "rows": batch.num_rows,
        "real": int(batch.attention_mask.sum()),
        "loss": batch.num_tokens,
        "rewards": rewards.tolist(),
    }
    print(json.dumps(info))


def update_child(a: dict) -> None:
    """Time Trainer._update on the saved batch; runs against either tree (PYTHONPATH picks it).

    ``a``: {"config", "file", "out_dir", "threads", "overrides", "repeats", "model"}.
    """
    import inspect
    import statistics

    import torch

    from baselines.config import load_config
    from baselines.rl.batch import RolloutBatch, grpo_token_advantages
    from baselines.trainer import Trainer

    cfg = load_config(
        a["config"],
        [
            f"train.out_dir={a['out_dir']}",
            f"train.threads={a['threads']}",
            "rollout.val_episodes=0",
            "diagnostics.every=0",
        ]
        + a["model"]
        + a["overrides"],
    )
    trainer = Trainer(cfg, progress=False)
    saved = torch.load(a["file"], weights_only=False)
    rewards = saved["group_rewards"]
    new_api = "group_rewards" in inspect.signature(Trainer._update).parameters

    def update():
        batch = RolloutBatch(**{k: v.clone() for k, v in saved["batch"].items()})
        metrics, timings = {}, {}
        t0 = time.perf_counter()
        if new_api:
            trainer._update(batch, rewards, metrics, timings)
        else:  # 23535da: the step set GRPO advantages before _update
            batch.advantages = grpo_token_advantages(batch, rewards, normalize_std=True)
            trainer._update(batch, metrics, timings)
        return time.perf_counter() - t0, metrics, timings

    load0 = os.getloadavg()[0]
    update()  # warm-up
    runs, prepass, metrics = [], [], {}
    for _ in range(a["repeats"]):
        seconds, metrics, timings = update()
        runs.append(seconds)
        prepass.append(timings.get("timing/ref_old_logprob_s", 0.0))
    model = trainer.model
    params = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    b = saved["batch"]
    rows = list(range(b["input_ids"].shape[0]))
    if hasattr(trainer, "actor"):  # baselines.update's Actor packs the micro-batches
        packs = trainer.actor.micro_batches(RolloutBatch(**b), rows)
    elif hasattr(trainer, "_micro_batches"):
        packs = trainer._micro_batches(RolloutBatch(**b), rows)
    else:
        packs = trainer._batches(list(range(b["input_ids"].shape[0])))
    lengths = b["attention_mask"].sum(1)
    padded = sum(len(p) * int(lengths[p].max()) for p in packs)
    mc = model.config
    result = {
        "seconds": statistics.median(runs),
        "runs": runs,
        "prepass_s": statistics.median(prepass),
        "prepass": _has_prepass(trainer, int(b["input_ids"].shape[0])),
        "critic_model": getattr(trainer, "critic_worker", None) is not None,
        "row_lengths": lengths.tolist(),
        "layers": mc.num_hidden_layers,
        "attention_width": mc.num_attention_heads
        * getattr(mc, "head_dim", mc.hidden_size // mc.num_attention_heads),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
        "non_embedding": params - emb.numel(),
        "hidden": emb.shape[1],
        "vocab": emb.shape[0],
        "real": int(b["attention_mask"].sum()),
        "loss": int(b["loss_mask"].sum()),
        "rows": int(b["input_ids"].shape[0]),
        "micro_batches": len(packs),
        "padded": padded,
        "autocast": str(getattr(trainer, "autocast_dtype", None)),
        "param_dtype": str(next(model.parameters()).dtype),
        "entropy": metrics.get("actor/entropy"),
        "load": [load0, os.getloadavg()[0]],
    }
    print("RESULT " + json.dumps(result))


def _has_prepass(trainer, rows: int) -> bool:
    """The update scores the batch once before it trains (old or reference log-probs, values)."""
    actor = getattr(trainer, "actor", None)
    if actor is None:
        return False
    return bool(
        actor.needs_old_logprobs(rows)
        or trainer.config.algorithm.kl_coef > 0
        or actor.value_head is not None
        or getattr(trainer, "critic_worker", None) is not None
    )


def shapes_child(a: dict) -> None:
    """bf16 matmul GFLOP/s on the model's own linear shapes (``a``: {"threads", "tokens"}): each
    distinct (in, out) of the embedded model's ``nn.Linear`` layers, forward ``x @ W.T`` and both
    backward products, ``tokens`` rows; the FLOP-weighted rate (total GFLOP over total seconds),
    median of 5 after 2 warm-ups, in bf16 (what the trainer's autocast computes in)."""
    import statistics

    import torch
    from transformers import AutoModelForCausalLM

    from baselines.llm.policy import embedded_model_path

    torch.set_num_threads(a["threads"])
    model = AutoModelForCausalLM.from_pretrained(embedded_model_path())
    shapes = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            key = (module.in_features, module.out_features)
            shapes[key] = shapes.get(key, 0) + 1
    t = a["tokens"]
    flop = seconds = 0.0
    for (i, o), count in shapes.items():
        x = torch.randn(t, i, dtype=torch.bfloat16)
        w = torch.randn(o, i, dtype=torch.bfloat16)
        g = torch.randn(t, o, dtype=torch.bfloat16)
        for left, right in ((x, w.T), (g, w), (g.T, x)):
            for _ in range(2):
                left @ right
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                left @ right
                times.append(time.perf_counter() - t0)
            flop += count * 2 * t * i * o
            seconds += count * statistics.median(times)
    print(flop / seconds / 1e9)


def matmul_child(a: dict) -> None:
    """2048 x 2048 matmul GFLOP/s. ``a``: {"threads", "dtype" (a torch dtype's name)}."""
    import statistics

    import torch

    torch.set_num_threads(a["threads"])
    dtype = getattr(torch, a["dtype"])
    x, y = torch.randn(2048, 2048).to(dtype), torch.randn(2048, 2048).to(dtype)
    for _ in range(2):
        torch.mm(x, y)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        torch.mm(x, y)
        times.append(time.perf_counter() - t0)
    print(2 * 2048**3 / statistics.median(times) / 1e9)


CHILDREN = {
    "capture": capture_child,
    "update": update_child,
    "matmul": matmul_child,
    "shapes": shapes_child,
}

#: name -> (code tree: "before" or "after", overrides, compute dtype for the peak, head model).
UPDATE_CONFIGS = {
    "a before, defaults": ("before", [], "float32", "full"),
    "b after, old settings": (
        "after",
        ["model.dtype=float32", "algorithm.micro_batch_size=4"],
        "float32",
        "scored",
    ),
    "c after, new defaults": (
        "after",
        ["model.dtype=auto", "algorithm.micro_batch_size=0", "algorithm.micro_batch_tokens=4096"],
        "bfloat16",
        "scored",
    ),
    "c' quick.yaml shipped": ("after", [], "bfloat16", "scored"),
}


def _child(name: str, payload: dict, tree: Path) -> str:
    """Run ``name``'s ``*_child`` function in a child process, against ``tree``; its stdout."""
    return spawn(__file__, name, payload, tree)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def update_gflop(r: dict, head: str) -> float:
    """The update's GFLOP by the module docstring's formula."""
    trunk = 6 * r["non_embedding"] * r["real"]
    hv = r["hidden"] * r["vocab"]
    head_flop = 6 * hv * r["real"] if head == "full" else 8 * hv * r["loss"]
    return (trunk + head_flop) / 1e9


def _before_tree(args: argparse.Namespace) -> Path:
    return Path(args.before) if args.before else archived_tree(REPO, args.before_commit)


def matmul_peaks(threads: list[int]) -> dict[tuple[int, str], float]:
    return {
        (n, dtype): float(
            _child("matmul", {"threads": n, "dtype": dtype}, REPO).strip().splitlines()[-1]
        )
        for n in threads
        for dtype in ("float32", "bfloat16")
    }


def update_only(args: argparse.Namespace) -> None:
    before = _before_tree(args)
    batch_file = Path(args.batch)
    print(
        f"load (1/5/15 min) at start: {_load()}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
    )
    if not batch_file.is_file():
        info = _child(
            "capture",
            {
                "config": QUICK,
                "file": str(batch_file),
                "out_dir": tempfile.mkdtemp(),
                "model": _model_overrides(args.model),
            },
            REPO,
        )
        print(f"captured {batch_file}: {info.strip().splitlines()[-1]}")
    saved = torch.load(batch_file, weights_only=False)["batch"]
    print(
        f"batch {batch_file}: {saved['input_ids'].shape[0]} rows, "
        f"{int(saved['attention_mask'].sum())} real tokens, {int(saved['loss_mask'].sum())} "
        f"loss tokens, padded width {saved['input_ids'].shape[1]}"
    )
    peaks = [matmul_peaks(args.threads)]
    print("matmul 2048^2 GFLOP/s (start): " + _peaks_text(peaks[0]))
    results: dict[tuple[str, int], dict] = {}
    chosen = {name: UPDATE_CONFIGS[name] for name in _pick(args.configs)}
    for n in args.threads:
        for name, (tree, overrides, _, _) in chosen.items():
            root = before if tree == "before" else REPO
            load = _load()
            payload = {
                "config": QUICK,
                "file": str(batch_file.resolve()),
                "out_dir": tempfile.mkdtemp(prefix="bench-update-"),
                "threads": n,
                "overrides": overrides,
                "repeats": args.repeats,
                "model": _model_overrides(args.model),
            }
            out = _child("update", payload, root)
            r = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
            r["load_before"] = load
            results[(name, n)] = r
            runs = ", ".join(f"{x:.1f}" for x in r["runs"])
            print(
                f"  threads={n} {name}: {r['seconds']:.1f} s (runs {runs}; load {load})", flush=True
            )
    peaks.append(matmul_peaks(args.threads))
    print("matmul 2048^2 GFLOP/s (end):   " + _peaks_text(peaks[1]))
    peak = {k: max(p[k] for p in peaks) for k in peaks[0]}
    print(f"load at end: {_load()}")
    print()
    header = (
        f"{'configuration':24s} {'thr':>3s} {'update_s':>8s} {'runs':>13s} {'rss_MB':>7s} "
        f"{'GFLOP':>6s} {'GFLOP/s':>7s} {'of_peak':>7s} {'mbs':>3s} {'padded':>6s} "
        f"{'params':>8s} {'autocast':>8s} {'load1':>5s}"
    )
    print(header)
    for n in args.threads:
        for name, (_, _, dtype, head) in chosen.items():
            r = results[(name, n)]
            gflop = update_gflop(r, head)
            rate = gflop / r["seconds"]
            runs = "/".join(f"{x:.1f}" for x in r["runs"])
            print(
                f"{name:24s} {n:3d} {r['seconds']:8.1f} {runs:>13s} {r['rss_mb']:7.0f} "
                f"{gflop:6.0f} {rate:7.1f} {rate / peak[(n, dtype)]:7.1%} {r['micro_batches']:3d} "
                f"{r['padded']:6d} {r['param_dtype'].replace('torch.', ''):>8s} "
                f"{r['autocast'].replace('torch.', ''):>8s} {r['load'][0]:5.2f}"
            )
    for n in args.threads:
        a = results.get(("a before, defaults", n), {}).get("seconds")
        if a is None:
            continue
        ratios = [
            f"({name.split()[0]})/(a) = {results[(name, n)]['seconds'] / a:.3f}"
            for name in chosen
            if name[0] != "a"
        ]
        c = results.get(("c after, new defaults", n), {}).get("seconds")
        if c is not None:
            ratios.append(f"acceptance (c)/(a) <= 0.5: {'met' if c / a <= 0.5 else 'NOT met'}")
        print(f"threads={n}: " + "  ".join(ratios))


def floor_gflop(r: dict) -> dict[str, float]:
    """The ideal GFLOP of one update (``--update-floor``): every pass the algorithm needs, each
    matmul counted once, nothing recomputed, no padding.

    ``passes`` = 3 forwards' worth (forward 1 + backward 2) plus 1 for the pre-update pass
    (old/reference log-probs, values) when the update has one; a separate critic model adds its
    own trunk's passes. Multiply-adds count 2::

        trunk     = 2 * N_ne * T_real * passes
        attention = sum over rows of 2 * T_row^2 * (heads * head_dim) * layers * passes
                    (causal: QK^T and PV over the T^2 / 2 visible pairs each)
        head      = 2 * H * V * S * passes          (the LM head at the S loss positions)

    ``N_ne``: parameters without the (tied) embedding. Returns GFLOP per part and ``total``.
    """
    passes = 3 + int(r["prepass"])
    trunk = 2 * r["non_embedding"] * r["real"] * passes
    attention = sum(2 * t * t * r["attention_width"] * r["layers"] for t in r["row_lengths"])
    attention *= passes
    head = 2 * r["hidden"] * r["vocab"] * r["loss"] * passes
    critic = 0.0
    if r["critic_model"]:  # the critic's trunk: its pre-pass, forward and backward
        critic = 4 * (trunk / passes + attention / passes)
    parts = {"trunk": trunk, "attention": attention, "head": head, "critic": critic}
    parts = {k: v / 1e9 for k, v in parts.items()}
    parts["total"] = sum(parts.values())
    return parts


def update_floor(args: argparse.Namespace) -> None:
    """``--update-floor CONFIG`` (issue 41): the update of one captured multi-turn batch of
    CONFIG (rolled out once with ``--capture``'s overrides into ``--batch-floor``, default
    ``$TMPDIR/agentgym-<config>-batch.pt``, and reused while that file exists), the tree at
    ``--floor-before`` against this one, ``--rounds`` times alternating, beside its floor
    (:func:`floor_gflop` over the bf16 matmul rate on the model's own linear shapes, measured
    before and after in the same run; the higher is the rate)."""
    config = args.update_floor
    stem = Path(config).stem
    batch_file = Path(args.batch_floor or Path(tempfile.gettempdir()) / f"agentgym-{stem}-batch.pt")
    before = archived_tree(REPO, args.floor_before)
    print(f"load (1/5/15 min) at start: {_load()}; config {config}; before {args.floor_before}")
    if not batch_file.is_file():
        info = _child(
            "capture",
            {
                "config": config,
                "file": str(batch_file),
                "out_dir": tempfile.mkdtemp(),
                "model": [],
                "overrides": args.capture,
            },
            REPO,
        )
        print(f"captured {batch_file} ({' '.join(args.capture)}): {info.strip().splitlines()[-1]}")
    saved = torch.load(batch_file, weights_only=False)["batch"]
    lengths = saved["attention_mask"].sum(1)
    print(
        f"batch: {saved['input_ids'].shape[0]} rows of {lengths.tolist()} tokens, "
        f"{int(saved['loss_mask'].sum())} loss tokens"
    )
    tokens = int(lengths.float().mean())
    n = args.threads[0]
    rates = [float(_child("shapes", {"threads": n, "tokens": tokens}, REPO).split()[-1])]
    print(f"bf16 matmul on the model's linear shapes ({tokens} rows, {n} thread): {rates[0]:.0f}")
    results = {}
    for rnd in range(args.rounds):  # the trees alternate, round by round
        for name, tree in (("before", before), ("after", REPO)):
            payload = {
                "config": config,
                "file": str(batch_file.resolve()),
                "out_dir": tempfile.mkdtemp(prefix="bench-update-"),
                "threads": n,
                # the model the batch was captured with (e.g. a warm start's model.path)
                "overrides": [o for o in args.capture if o.startswith("model.")],
                "repeats": args.repeats,
                "model": [],
            }
            load = _load()
            out = _child("update", payload, tree)
            r = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
            results.setdefault(name, []).append(r)
            runs = ", ".join(f"{x:.1f}" for x in r["runs"])
            print(
                f"  {name} round {rnd}: {r['seconds']:.1f} s (runs {runs}; load {load})", flush=True
            )
    rates.append(float(_child("shapes", {"threads": n, "tokens": tokens}, REPO).split()[-1]))
    rate = max(rates)
    print(
        f"matmul rate (start, end): {rates[0]:.0f}, {rates[1]:.0f} GFLOP/s; load at end {_load()}"
    )
    print()
    print(
        f"{'tree':7s} {'update_s':>8s} {'prepass_s':>9s} {'rss_MB':>7s} {'trunk':>6s} "
        f"{'attn':>5s} {'head':>5s} {'GFLOP':>6s} {'floor_s':>7s} {'x_floor':>7s}"
    )
    for name, rs in results.items():
        seconds = sorted(r["seconds"] for r in rs)[len(rs) // 2]
        r = rs[0]
        f = floor_gflop(r)
        floor = f["total"] / rate
        print(
            f"{name:7s} {seconds:8.1f} {r['prepass_s']:9.1f} {max(x['rss_mb'] for x in rs):7.0f} "
            f"{f['trunk']:6.0f} {f['attention']:5.0f} {f['head']:5.0f} {f['total']:6.0f} "
            f"{floor:7.1f} {seconds / floor:7.2f}"
        )


def _pick(keys: list[str]) -> list[str]:
    """``--configs a c`` -> the matching ``UPDATE_CONFIGS`` names, in the order given."""
    by_key = {name.split()[0]: name for name in UPDATE_CONFIGS}
    return [by_key[k] for k in keys]


def _model_overrides(model: str) -> list[str]:
    """``--model``: the main job's embedded SmolLM2, or another (``tiny``: a smoke test)."""
    if model == "embedded":
        return []
    extra = [f"model.path={model}"]
    if model == "tiny":
        extra += ["rollout.env_kwargs={action_format: raw}", "rollout.think_prefix=false"]
    return extra


def _peaks_text(p: dict[tuple[int, str], float]) -> str:
    return "  ".join(f"{d} x{n}: {v:.0f}" for (n, d), v in p.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded", help="embedded | tiny | checkpoint path")
    parser.add_argument("--env", default="agentgym/Bandit-v0")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--engine", default="hf", choices=["hf", "vllm", "auto"])
    parser.add_argument(
        "--filters", nargs="+", default=["top_p", "none"], choices=["top_p", "none"]
    )
    parser.add_argument(
        "--cuda-shape",
        action="store_true",
        help="CUDA: a random-init model of SmolLM2-135M's shape in bfloat16",
    )
    parser.add_argument(
        "--update-only",
        action="store_true",
        help="issue 22: time Trainer._update before/after on one captured main-job batch",
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--batch", default=str(Path(tempfile.gettempdir()) / "agentgym-main-job-batch.pt")
    )
    parser.add_argument("--before", default="", help="a checkout of the previous trainer")
    parser.add_argument("--before-commit", default="23535da")
    parser.add_argument(
        "--configs",
        nargs="+",
        default=["a", "b", "c", "c'"],
        choices=["a", "b", "c", "c'"],
        help="--update-only: which configurations, in this order",
    )
    parser.add_argument(
        "--update-floor",
        default="",
        metavar="CONFIG",
        help="issue 41: the update of a captured CONFIG batch, --floor-before vs this tree, "
        "beside its floor",
    )
    parser.add_argument("--floor-before", default="7b0f209")
    parser.add_argument(
        "--capture",
        nargs="*",
        default=["rollout.num_groups=2", "rollout.group_size=2"],
        help="--update-floor: overrides of the captured rollout",
    )
    parser.add_argument("--batch-floor", default="", help="--update-floor: the batch file")
    parser.add_argument("--rounds", type=int, default=1)
    add_child_options(parser, CHILDREN)
    args = parser.parse_args()
    if run_if_child(args, CHILDREN):
        return
    if args.update_floor:
        update_floor(args)
        return
    if args.update_only:
        update_only(args)
        return
    device, dtype, model = "cpu", "float32", args.model
    if args.cuda_shape:
        if not torch.cuda.is_available():
            raise SystemExit("--cuda-shape needs a CUDA GPU")
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from baselines.llm.policy import embedded_model_path

        source = embedded_model_path()
        folder = Path(tempfile.mkdtemp(prefix="smollm2-shape-"))
        config = AutoConfig.from_pretrained(source)
        AutoModelForCausalLM.from_config(config).save_pretrained(folder)
        AutoTokenizer.from_pretrained(source).save_pretrained(folder)
        device, dtype, model = "cuda", "bfloat16", str(folder)
    print(
        f"model={model} env={args.env} P={args.groups} N={args.group_size} "
        f"new_tokens={args.new_tokens} device={device} dtype={dtype} "
        f"threads={torch.get_num_threads()} engine={args.engine}"
    )
    results = {}
    for strategy in args.filters:
        results[strategy] = run(
            model,
            args.steps,
            args.groups,
            args.group_size,
            args.new_tokens,
            args.env,
            strategy,
            device,
            dtype,
            args.engine,
        )
    names = {"top_p": "filter top_p", "none": "no filter"}
    print(f"{'metric':28s}" + "".join(f" {names[k]:>14s}" for k in results))
    for key in results[args.filters[0]]:
        print(f"{key:28s}" + "".join(f" {r[key]:14.4g}" for r in results.values()))


if __name__ == "__main__":
    main()
