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
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import baselines  # noqa: E402, F401  (before torch: sets OMP_WAIT_POLICY, agentgym.threads)

# isort: split
import torch  # noqa: E402

from baselines.config import load_config  # noqa: E402
from baselines.diagnostics import score_matrix, score_matrix_naive  # noqa: E402
from baselines.episodes import reasoning_ids  # noqa: E402
from baselines.trainer import Trainer  # noqa: E402


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _kv_speedup(trainer: Trainer, episodes) -> tuple[float, float, float]:
    """Time the cached and the naive scorer on the batch's first-turn pairs."""
    tok = trainer.tokenizer
    pairs = [
        (tuple(e.turns[0].prompt_ids), reasoning_ids(tok, e.turns[0])) for e in episodes if e.turns
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
    args = parser.parse_args()
    device, dtype, model = "cpu", "float32", args.model
    if args.cuda_shape:
        if not torch.cuda.is_available():
            raise SystemExit("--cuda-shape needs a CUDA GPU")
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from baselines.policy import embedded_model_path

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
