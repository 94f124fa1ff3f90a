"""Where the RL trainer's memory goes: peak RSS per phase of a training run.

Usage::

    python benchmarks/bench_memory.py --config baselines/configs/sokoban_cpu.yaml train.steps=2
    python benchmarks/bench_memory.py --config baselines/configs/sokoban.yaml train.steps=2 \
        model.path=embedded
    python benchmarks/bench_memory.py --optimizer-state-first --stop-after-rollout \
        --config baselines/configs/webshop.yaml train.steps=1

Runs :class:`baselines.trainer.Trainer` in this process (output in a temporary folder that is
removed) while a sampling thread reads the process's resident set (``/proc/self/statm``) every
0.1 s. Each of the trainer's phases (model load, validation, each rollout turn, MI diagnostics,
the pre-update scoring pass, the update, the memory release after it) is timed and gets its peak
RSS; the baseline is the RSS after the model, its optimizer and its copies are built. Also
printed: the size of the HF engine's cross-turn key/value store at its largest. Figures are
printed, never asserted; the aim (issue 22) is every shipped multi-turn config within 8 GB.
Phases are named by step (``s0``, ``s1``, ...).

Step 1's generation holds AdamW's state (two float32 moments per weight, allocated by step 0's
update; with PPO's critic model, for both models), which step 0's does not. With
``--optimizer-state-first`` every optimizer of the trainer takes one step at learning rate 0 on
zero gradients before step 0 (AdamW's update and its weight decay are then exactly zero: the
weights do not move, the state is allocated), so step 0's rollout holds what step 1's would,
without waiting a whole step; ``--stop-after-rollout`` then ends the run after the first rollout
(the figures printed are those of the rollout and what came before). The optimizers' step count
starts at 1, not 0, for the steps that follow (a bias-correction difference: a benchmark only).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentgym.threads import set_omp_wait_policy  # noqa: E402

set_omp_wait_policy()

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PhaseSampler:
    """Peak RSS per named phase, sampled by a daemon thread."""

    def __init__(self, interval: float = 0.1) -> None:
        self.phase = "start"
        self.rows: dict[str, list[float]] = {}  # phase -> [peak, seconds, entries]
        self._t = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.sample()

    def sample(self) -> None:
        row = self.rows.setdefault(self.phase, [0.0, 0.0, 0.0])
        row[0] = max(row[0], rss_bytes() / 1e9)

    def enter(self, phase: str) -> str:
        self.sample()
        now = time.perf_counter()
        self.rows.setdefault(self.phase, [0.0, 0.0, 0.0])[1] += now - self._t
        previous, self.phase, self._t = self.phase, phase, now
        self.rows.setdefault(phase, [0.0, 0.0, 0.0])[2] += 1
        self.sample()
        return previous

    def stop(self) -> None:
        self.enter("end")
        self._stop.set()
        self._thread.join()


def allocate_optimizer_state(optimizers) -> None:
    """One step of each optimizer (None skipped) at learning rate 0 on zero gradients: its state
    is allocated and the weights stay bit-for-bit as they were (AdamW: ``p *= 1 - lr * wd`` and
    ``p -= lr * ...`` with lr 0)."""
    import torch

    for opt in optimizers:
        if opt is None:
            continue
        lrs = [group["lr"] for group in opt.param_groups]
        for group in opt.param_groups:
            group["lr"] = 0.0
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        before = [p.detach().clone() for g in opt.param_groups for p in g["params"][:1]]
        opt.step()
        after = [p.detach() for g in opt.param_groups for p in g["params"][:1]]
        assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
        for group, lr in zip(opt.param_groups, lrs, strict=True):
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*")
    parser.add_argument(
        "--optimizer-state-first",
        action="store_true",
        help="allocate the optimizers' state before step 0 (one step at lr 0, zero gradients)",
    )
    parser.add_argument(
        "--stop-after-rollout", action="store_true", help="end the run after the first rollout"
    )
    args = parser.parse_args()

    from baselines import trainer, update
    from baselines.config import load_config
    from baselines.llm.engines import hf as engines

    sampler = PhaseSampler()
    out = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    store_peak = [0.0]

    def wrap(owner, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def wrapped(*a, **k):
            previous = sampler.enter(phase)
            try:
                return original(*a, **k)
            finally:
                sampler.enter(previous)

        setattr(owner, name, wrapped)

    wrap(trainer.Trainer, "validate", "validation")
    wrap(trainer.Trainer, "_diagnostics", "MI diagnostics")
    wrap(update.Actor, "compute_log_prob", "pre-update scoring")
    wrap(update.Critic, "compute_values", "pre-update scoring")
    wrap(trainer.Trainer, "_update", "update")
    wrap(trainer, "release_memory", "release_memory")
    original_generate = engines.generate_cached
    step_now = [0]
    original_rollout = trainer.Trainer._rollout

    class RolloutDone(Exception):
        pass

    def rollout(self, step, *a, **k):
        step_now[0] = step
        previous = sampler.enter(f"s{step} rollout (other)")
        try:
            out = original_rollout(self, step, *a, **k)
        finally:
            sampler.enter(previous)
        if args.stop_after_rollout:
            raise RolloutDone
        return out

    trainer.Trainer._rollout = rollout

    def generate_cached(model, tokenizer, prompt_ids, sampling, store=None, **kwargs):
        previous = sampler.enter(f"s{step_now[0]} decode (batch of {len(prompt_ids)})")
        try:
            return original_generate(model, tokenizer, prompt_ids, sampling, store, **kwargs)
        finally:
            if store is not None:
                size = sum(
                    k.numel() * k.element_size() * 2 for _, kv in store.entries for k, _ in kv
                )
                store_peak[0] = max(store_peak[0], size / 1e9)
            sampler.enter(previous)

    engines.generate_cached = generate_cached
    config = load_config(
        args.config,
        [*args.overrides, f"train.out_dir={out / 'run'}", "train.save_every=0"],
    )
    try:
        sampler.enter("model load")
        t = trainer.Trainer(config, progress=False)
        if args.optimizer_state_first:
            allocate_optimizer_state([t.optimizer, t.critic_optimizer])
        sampler.enter("steps (other)")
        baseline = rss_bytes() / 1e9
        try:
            t.run()
        except RolloutDone:  # run() closed the engine on its way out
            pass
    finally:
        sampler.stop()
        shutil.rmtree(out, ignore_errors=True)
    print(f"config {args.config} {' '.join(args.overrides)}; load {os.getloadavg()[0]:.1f}")
    state = "with" if args.optimizer_state_first else "before"
    print(
        f"RSS after the model, optimizer and copies are built ({state} its state): {baseline:.2f} GB"
    )
    print(f"cross-turn key/value store at its largest: {store_peak[0]:.2f} GB")
    print(f"{'phase':<34} {'peak RSS GB':>11} {'seconds':>9} {'times':>6}")
    for phase, (peak, seconds, times) in sampler.rows.items():
        if phase in ("start", "end"):
            continue
        print(f"{phase:<34} {peak:>11.2f} {seconds:>9.1f} {int(times):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
