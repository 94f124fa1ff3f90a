"""Peak memory and seconds per step of the shipped RL configs, at their shipped batch shapes.

Usage::

    python benchmarks/bench_recipes.py                                  # every shipped config
    python benchmarks/bench_recipes.py --configs sokoban frozen_lake --steps 2
    python benchmarks/bench_recipes.py --configs sokoban --set model.path=runs/sft/sokoban/checkpoint
    python benchmarks/bench_recipes.py --configs webshop --keep runs/bench --report-every 300
        # a long run: its run folder kept, and its peak RSS so far printed every 5 minutes

Each config runs as its own ``python -m baselines.train`` process (``train.steps`` = ``--steps``,
with the config's own validation before the first step unless ``--no-validation``: it is the
rollout phase with the most live episodes; output in a temporary folder that is removed, or
kept under ``--keep``), so its peak RSS is that process's
alone (its own ``getrusage(RUSAGE_SELF).ru_maxrss``, vLLM's engine included: the child runs it in
process unless ``VLLM_ENABLE_V1_MULTIPROCESSING`` is set; printed at exit by
``children.run_module_reporting_peak_rss`` in the child ``--child train``; Linux reports KiB). Printed per
config: peak RSS in GB, the mean ``timing/step_s`` and its generation / update parts from
``metrics.jsonl``, tokens trained and the valid-action rate, with the machine's load average at the
start and end. The aim (issue 22): every shipped multi-turn config within 8 GB. Never run by tests.
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
from pathlib import Path

from children import add_child_options, run_if_child, run_module_reporting_peak_rss

REPO = Path(__file__).resolve().parent.parent
CONFIGS = ["quick", "bandit", "sokoban", "frozen_lake", "countdown", "math", "code", "webshop"]


def _high_water_gb(pid: int) -> float:
    """``VmHWM`` of process ``pid`` (its peak RSS so far; Linux ``/proc``) in GB; NaN when
    unreadable (the process ended, or not Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


def _steps_done(metrics: Path) -> int:
    try:
        return sum(1 for line in metrics.read_text().splitlines() if '"step"' in line)
    except OSError:
        return 0


def run_one(
    name: str,
    steps: int,
    extra: list[str],
    validation: bool = True,
    keep: Path | None = None,
    report_every: float = 0.0,
) -> dict[str, float | str]:
    """Train ``baselines/configs/<name>.yaml`` for ``steps`` steps in a child process; with
    ``keep`` its run folder is ``keep/<name>`` and stays (else a temporary one, removed); with
    ``report_every`` > 0 a line every that many seconds gives the child's peak RSS so far and
    the steps it has logged, so a run stopped before its end still leaves its figures."""
    if keep is not None:
        out = keep / name
        out.mkdir(parents=True)  # main() checked that it is new
    else:
        out = Path(tempfile.mkdtemp(prefix=f"bench-recipe-{name}-"))
    argv = [
        "--config",
        str(REPO / "baselines" / "configs" / f"{name}.yaml"),
        f"train.steps={steps}",
        f"train.out_dir={out / 'run'}",
        "train.save_every=0",
        "train.max_steps_without_update=0",
        "train.max_steps_without_signal=0",
        *([] if validation else ["rollout.val_episodes=0"]),
        *extra,
    ]
    script = str(Path(__file__).resolve())
    cmd = [sys.executable, script, "--child", "train", "--payload", json.dumps({"argv": argv})]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    # vLLM (rollout.engine vllm, or auto where it is installed) in the trainer's own process, so
    # that the peak RSS counts its weights and key/value cache too (its engine process would not be).
    env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True
        )
        try:
            while True:
                try:
                    child.wait(timeout=report_every if report_every > 0 else None)
                    break
                except subprocess.TimeoutExpired:
                    print(
                        f"  {name}: {time.perf_counter() - t0:.0f} s, peak RSS so far "
                        f"{_high_water_gb(child.pid):.2f} GB, steps logged "
                        f"{_steps_done(out / 'run' / 'metrics.jsonl')}",
                        flush=True,
                    )
        finally:
            if child.poll() is None:  # interrupted (Ctrl-C, SIGTERM): leave no trainer behind
                child.terminate()
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        stderr.seek(0)
        said = stderr.read()
    proc = subprocess.CompletedProcess(cmd, child.returncode, "", said)
    wall = time.perf_counter() - t0
    peaks = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS")]
    peak_kib = int(peaks[-1]) if peaks else 0
    try:
        if proc.returncode != 0:
            said = [x for x in proc.stderr.strip().splitlines() if not x.startswith("PEAK_RSS")]
            return {"config": name, "error": (said or ["no output"])[-1][:200]}
        lines = [json.loads(x) for x in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    finally:
        if keep is None:
            shutil.rmtree(out, ignore_errors=True)

    def mean(key: str) -> float:
        values = [line[key] for line in lines if line.get(key) is not None]
        return sum(values) / len(values) if values else float("nan")

    return {
        "config": name,
        "peak_rss_gb": peak_kib * 1024 / 1e9,
        "step_s": mean("timing/step_s"),
        "generation_s": mean("timing/generation_s"),
        "update_s": mean("timing/backward_s") + mean("timing/ref_old_logprob_s"),
        "tokens_trained": mean("actor/tokens_trained"),
        "valid_action_rate": mean("rollout/valid_action_rate"),
        "wall_s": wall,
        "load": f"{load_before:.1f}->{os.getloadavg()[0]:.1f}",
    }


#: What this script runs as a child: ``baselines.train`` with ``payload["argv"]``, printing its
#: own peak RSS at exit.
CHILDREN = {"train": lambda a: run_module_reporting_peak_rss("baselines.train", a["argv"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_child_options(parser, CHILDREN)
    parser.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every config"
    )
    parser.add_argument(
        "--no-validation", action="store_true", help="rollout.val_episodes=0 (faster)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each run's folder as DIR/<config> (metrics.jsonl), else a removed temp folder",
    )
    parser.add_argument(
        "--report-every",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="print each child's peak RSS so far and steps logged every SECONDS (0: never)",
    )
    args = parser.parse_args()
    if run_if_child(args, CHILDREN):
        return
    if args.keep is not None:
        taken = [
            str(args.keep / n) for n in dict.fromkeys(args.configs) if (args.keep / n).exists()
        ]
        if taken or len(set(args.configs)) < len(args.configs):
            parser.error(
                f"--keep: {', '.join(taken) or 'a config named twice'} would be overwritten; "
                "name a new --keep folder, remove it, or list each config once"
            )

    def stop(signum: int, frame: object) -> None:  # SIGTERM (timeout, a job runner): as Ctrl-C,
        raise KeyboardInterrupt  # so run_one's clean-up stops its trainer

    signal.signal(signal.SIGTERM, stop)
    print(
        f"{'config':<12} {'peak GB':>8} {'step s':>8} {'gen s':>8} {'update s':>9} "
        f"{'tokens':>8} {'valid':>6} {'load':>10}"
    )
    for name in args.configs:
        try:
            row = run_one(
                name,
                args.steps,
                args.set,
                validation=not args.no_validation,
                keep=args.keep,
                report_every=args.report_every,
            )
        except KeyboardInterrupt:
            sys.exit(f"{name}: stopped before its end (its trainer was stopped too)")
        if "error" in row:
            print(f"{name:<12} failed: {row['error']}")
            continue
        print(
            f"{name:<12} {row['peak_rss_gb']:>8.2f} {row['step_s']:>8.1f} "
            f"{row['generation_s']:>8.1f} {row['update_s']:>9.1f} {row['tokens_trained']:>8.0f} "
            f"{row['valid_action_rate']:>6.2f} {row['load']:>10}",
            flush=True,
        )


if __name__ == "__main__":
    main()
