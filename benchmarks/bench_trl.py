"""The README's main job beside Hugging Face TRL's GRPOTrainer on the same work, per half of a step.

Usage::

    python benchmarks/bench_trl.py [--threads 1 2] [--steps 3] [--trl-variants default]

Same work on both sides: SmolLM2-135M-Instruct (embedded, float32 master weights), Bandit-v0,
16 episodes per step (4 prompts x 4 samples), 48 new tokens, temperature 0.7, lr 1e-5, one
optimizer step per batch.

* TRL: ``GRPOTrainer`` with :class:`baselines.integrations.trl.AgentgymRollout` as its
  ``rollout_func`` (the agentgym episode loop and HF engine, with the ``<think>`` prefill, as the
  agentgym trainer), ``use_cpu=True``, ``per_device_train_batch_size=16``, ``num_generations=4``.
  Variants: ``default`` is GRPOConfig's own defaults on CPU (``bf16=True``: accelerate's bf16
  autocast; ``gradient_checkpointing=True``; ``beta=0``), ``nogc`` the same without gradient
  checkpointing, ``fp32`` with ``bf16=False`` and no gradient checkpointing, ``ragen`` the
  ``fp32`` settings on :class:`baselines.integrations.trl.AgentgymGRPOTrainer` with quick.yaml's
  filter and MI diagnostics (every step, 16 pairs). Timed by wrapping the rollout
  function (generation: ``generate`` plus env steps), ``_generate_and_score_completions`` (the
  whole preparation) and a callback around each optimizer step; update = step - preparation
  (forward, backward, AdamW).
* agentgym: :class:`baselines.trainer.Trainer` on ``baselines/configs/quick.yaml``, calling
  ``Trainer.step`` (no checkpoint or validation), once with ``diagnostics.every=0`` (like for like)
  and once with the shipped MI diagnostics (``diagnostics.every=1``); both with
  ``rollout.val_episodes=0``. Figures: ``timing/generation_s``, ``timing/backward_s``
  (forward, backward, AdamW), ``timing/diagnostics_s``, ``timing/step_s``.

Each configuration runs in its own process (threads set before torch works); the table gives the
mean over steps 2.. (step 1 warms up) and step 1 alone. Never run by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from children import add_child_options, run_if_child, spawn

REPO = Path(__file__).resolve().parent.parent


def trl_child(a: dict) -> None:
    """TRL's GRPOTrainer for ``a["steps"]`` steps; prints ``RESULT {json}``.

    ``a``: {"threads", "steps", "out_dir", "variant"}.
    """
    import resource
    import time

    import torch

    torch.set_num_threads(a["threads"])
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from baselines.config import DiagnosticsConfig
    from baselines.integrations.trl import AgentgymGRPOTrainer, AgentgymRollout, episode_return
    from baselines.llm.policy import load_policy
    from baselines.rl.filtering import FilterConfig
    from tests.helpers import cpu_grpo_config

    torch.manual_seed(0)
    model, tok = load_policy("embedded", device="cpu", dtype="float32")
    rollout = AgentgymRollout("Bandit-v0", tok, max_new_tokens=48, seed=1000)
    variant = a["variant"]
    kwargs = {"num_generations": 4, "max_steps": a["steps"], "learning_rate": 1e-5}
    if variant in ("nogc", "fp32", "ragen"):
        kwargs["gradient_checkpointing"] = False
    if variant in ("fp32", "ragen"):
        kwargs["bf16"] = False
    args = cpu_grpo_config(a["out_dir"], max_completion_length=48, temperature=0.7, **kwargs)
    extra = {}
    if variant == "ragen":
        extra = {"snr_filter": FilterConfig(), "diagnostics": DiagnosticsConfig(max_pairs=16)}
    trainer = (AgentgymGRPOTrainer if variant == "ragen" else GRPOTrainer)(
        model=model,
        processing_class=tok,
        reward_funcs=episode_return,
        train_dataset=rollout.dataset(num_prompts=4 * a["steps"]),
        rollout_func=rollout,
        args=args,
        **extra,
    )
    gen, prep, steps, tokens = [], [], [], []

    def timed_rollout(prompts, trainer_):
        t0 = time.perf_counter()
        out = rollout(prompts, trainer_)
        gen.append(time.perf_counter() - t0)
        tokens.append(sum(sum(m) for m in out["env_mask"]))
        return out

    trainer.rollout_func = timed_rollout
    inner = trainer._generate_and_score_completions

    def timed_prep(*args_, **kwargs_):
        t0 = time.perf_counter()
        out = inner(*args_, **kwargs_)
        prep.append(time.perf_counter() - t0)
        return out

    trainer._generate_and_score_completions = timed_prep

    class Clock(TrainerCallback):
        def on_step_begin(self, args_, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args_, state, control, **kw):
            steps.append(time.perf_counter() - self.t0)

    trainer.add_callback(Clock())
    load0 = os.getloadavg()[0]
    trainer.train()
    result = {
        "generation": gen,
        "prepare": prep,
        "step": steps,
        "update": [s - p for s, p in zip(steps, prep, strict=False)],
        "sampled_tokens": tokens,
        "diagnostics": [
            h["timing/diagnostics_s"]
            for h in trainer.state.log_history
            if "timing/diagnostics_s" in h
        ]
        or [0.0],
        "threads": torch.get_num_threads(),
        "bf16": args.bf16,
        "mixed_precision": str(trainer.accelerator.mixed_precision),
        "gradient_checkpointing": args.gradient_checkpointing,
        "beta": args.beta,
        "param_dtype": str(next(trainer.model.parameters()).dtype),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load": [load0, os.getloadavg()[0]],
    }
    print("RESULT " + json.dumps(result))


def agentgym_child(a: dict) -> None:
    """agentgym's Trainer on quick.yaml for ``a["steps"]`` steps; prints ``RESULT {json}``.

    ``a``: {"threads", "steps", "out_dir", "diagnostics_every", "dtype"}.
    """
    import resource

    from baselines.config import load_config
    from baselines.trainer import Trainer

    cfg = load_config(
        "baselines/configs/quick.yaml",
        [
            f"train.out_dir={a['out_dir']}",
            f"train.threads={a['threads']}",
            f"train.steps={a['steps']}",
            "rollout.val_episodes=0",
            f"diagnostics.every={a['diagnostics_every']}",
            f"model.dtype={a.get('dtype', 'auto')}",
        ],
    )
    trainer = Trainer(cfg, progress=False)
    import torch

    load0 = os.getloadavg()[0]
    rows = [trainer.step(s) for s in range(a["steps"])]
    trainer.close()

    def col(key):
        return [r.get(key, 0.0) for r in rows]

    result = {
        "generation": col("timing/generation_s"),
        "env": col("timing/env_s"),
        "update": col("timing/backward_s"),
        "old_ref": col("timing/ref_old_logprob_s"),
        "diagnostics": col("timing/diagnostics_s"),
        "step": col("timing/step_s"),
        "trained_tokens": col("actor/tokens_trained"),
        "skipped": col("actor/skipped"),
        "threads": torch.get_num_threads(),
        "autocast": str(trainer.autocast_dtype),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load": [load0, os.getloadavg()[0]],
    }
    print("RESULT " + json.dumps(result))


CHILDREN = {"trl": trl_child, "agentgym": agentgym_child}


def _run(name: str, payload: dict) -> dict:
    """Run ``name``'s ``*_child`` function in a child process; its ``RESULT`` dict."""
    out = spawn(__file__, name, payload, REPO)
    if "RESULT " not in out:
        raise RuntimeError(f"child {name} printed no RESULT:\n{out[-4000:]}")
    return json.loads(out.split("RESULT ", 1)[1].splitlines()[0])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _mean(values: list[float]) -> float:
    later = values[1:] or values
    return sum(later) / len(later)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--trl-variants",
        nargs="+",
        default=["default"],
        choices=["default", "nogc", "fp32", "ragen"],
    )
    parser.add_argument(
        "--agentgym-diagnostics", type=int, nargs="+", default=[0, 1], help="diagnostics.every"
    )
    parser.add_argument(
        "--agentgym-dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="model.dtype of the agentgym runs (auto: bf16 autocast where the CPU has bf16)",
    )
    add_child_options(parser, CHILDREN)
    args = parser.parse_args()
    if run_if_child(args, CHILDREN):
        return
    print(f"load at start: {_load()}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    results = []
    for n in args.threads:
        runs = [("trl " + v, "trl", {"variant": v}) for v in args.trl_variants]
        runs += [
            (
                f"agentgym diag={d}",
                "agentgym",
                {"diagnostics_every": d, "dtype": args.agentgym_dtype},
            )
            for d in args.agentgym_diagnostics
        ]
        for name, child, extra in runs:
            load = _load()
            payload = {
                "threads": n,
                "steps": args.steps,
                "out_dir": tempfile.mkdtemp(prefix="bench-trl-"),
                **extra,
            }
            r = _run(child, payload)
            results.append((name, n, r))
            per_step = " | ".join(
                f"gen {g:.1f} upd {u:.1f} step {s:.1f}"
                for g, u, s in zip(r["generation"], r["update"], r["step"], strict=False)
            )
            settings = {
                k: r[k]
                for k in ("mixed_precision", "gradient_checkpointing", "param_dtype", "autocast")
                if k in r
            }
            tokens = r.get("trained_tokens", r.get("sampled_tokens"))
            print(
                f"  threads={n} {name}: {per_step}  (tokens trained per step {tokens}; "
                f"load {load}; {settings})",
                flush=True,
            )
    print(f"load at end: {_load()}")
    print()
    print(
        f"{'configuration':22s} {'thr':>3s} {'gen_s':>6s} {'update_s':>8s} {'diag_s':>6s} "
        f"{'step_s':>6s} {'gen1':>6s} {'upd1':>6s} {'step1':>6s} {'rss_MB':>7s} {'load1':>5s}"
    )
    for name, n, r in results:
        diag = _mean(r["diagnostics"]) if "diagnostics" in r else 0.0
        print(
            f"{name:22s} {n:3d} {_mean(r['generation']):6.1f} {_mean(r['update']):8.1f} "
            f"{diag:6.1f} {_mean(r['step']):6.1f} {r['generation'][0]:6.1f} "
            f"{r['update'][0]:6.1f} {r['step'][0]:6.1f} {r['rss_mb']:7.0f} {r['load'][0]:5.2f}"
        )


if __name__ == "__main__":
    main()
