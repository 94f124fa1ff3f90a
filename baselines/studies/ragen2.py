"""RAGEN-2's three claims at small scale: ``python -m baselines.studies.ragen2 [--quick]``.

The study (configs in ``baselines/studies/ragen2.yaml``, seeds explicit) runs, in one results
folder (``--out``, default ``runs/ragen2``; ``--quick`` ``runs/ragen2-quick``):

1. one supervised warm start per environment (``agentgym export-sft`` data, then
   :func:`baselines.sft.train_sft`), so that every RL run starts input-dependent;
2. every RL run of every claim in its own process (``python -m baselines.train``), skipped when
   its ``done.json`` exists (the study resumes where it stopped); a configuration that several
   claims name (the same resolved config and seeds, :func:`shared_runs`) runs once, in the folder
   of the first run that names it, and the others say so (``same_run_as`` in ``results.json``
   and in the report);
3. the statistics of each claim, written to ``results.json`` and ``--doc`` (default
   ``docs/reproduction.md``; with ``--quick``, ``reproduction.md`` in the results folder: a quick
   run writes into ``docs/`` only when ``--doc`` names a file there) with PNG plots beside it.

Provenance: every run folder holds the ``provenance.json`` its trainer wrote (the commit and
dirty state of the code, :mod:`agentgym.provenance`), and so does each warm start's; each run of
``results.json`` carries both. Whenever the report is made (a resumed study only recomputes it),
a run whose code (:data:`RESULT_CODE` and its env's module) changed since its commit, or that ran
on uncommitted changes to it, or that records no commit, is marked ``stale`` with the reason, and
the report counts and lists such runs: re-run them into a fresh ``--out``.

Claims and their tests (issue 13):

(a) ``collapse``: the ``regularised`` arm reproduces template collapse when, for every seed, MI falls
    below 0.1 of its ceiling with retrieval at chance (retrieval - chance < 0.05) for >= 3
    evaluations while entropy does not fall (last >= 0.9 x first) and the flag fires; and the
    ``control`` keeps MI >= 0.5 of its ceiling at the end and never fires.
(b) ``filtering``: paired per-seed differences of final validation success, each arm minus the
    ``baseline`` arm, mean with a 95 % t interval; reproduced when some filtered arm's interval
    lies above 0 on every environment.
(c) ``correlation``: Spearman correlation of final MI (summed), per-token MI, RAGEN's MI-ZScore and
    the entropy with final validation success over the claim's own sweep, 95 % bootstrap
    intervals (2000 seeded resamples of runs), the paired difference rho(MI) - rho(entropy) and
    |rho(MI)| - |rho(entropy)|; reproduced when the interval of the latter lies above 0 (the same
    figures pooled over every run of the study are reported, never deciding: pooling envs
    confounds the scores with the env).

A claim that does not reproduce is reported as such.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import agentgym
from agentgym import provenance
from agentgym.fileio import write_text_atomic

__all__ = [
    "RESULT_CODE",
    "load_study",
    "mark_stale",
    "result_code",
    "run_study",
    "shared_runs",
    "spearman",
    "paired_t",
    "main",
]

SPEC = Path(__file__).with_name("ragen2.yaml")
# Two-sided 95 % Student t quantiles, df = 1..30 (beyond: 1.96).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]  # fmt: skip


CLAIMS = ("collapse", "filtering", "correlation")

#: The code a study run's numbers depend on, relative to the checkout (with its env's own modules:
#: :func:`result_code`): the RL trainer and its algorithm, the SFT warm start and its data, the
#: sampler (engines, the episode loop, chat rendering, action parsing), model loading, the
#: diagnostics, and the config defaults. A run made by code older than the checkout's in any of
#: these is stale.
RESULT_CODE = (
    "baselines/trainer.py",
    "baselines/advantages.py",
    "baselines/batch.py",
    "baselines/losses.py",
    "baselines/minibatches.py",
    "baselines/filtering.py",
    "baselines/config.py",
    "baselines/sft.py",
    "agentgym/sft.py",
    "baselines/engines.py",
    "baselines/episodes.py",
    "baselines/policy.py",
    "baselines/scoring.py",
    "baselines/diagnostics.py",
    "agentgym/chat.py",
    "agentgym/parsing.py",
    "agentgym/text_env.py",
    "agentgym/lockstep.py",
    "agentgym/envs/__init__.py",  # the registrations: each id's fixed and default arguments
)


def load_study(path: str | Path = SPEC, quick: bool = False) -> dict[str, Any]:
    """The study spec; with ``quick`` its ``quick`` section replaces the keys it names.

    A spec may hold any of the three claims (at least one; e.g. a confirmation run of (a) with
    another model holds only ``collapse``).

    Raises:
        ValueError: no claim, an unknown claim, or a claim without envs, seeds or arms.
    """
    spec = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    quick_part = spec.pop("quick", {}) or {}
    if quick:
        spec.update(quick_part)
    claims = spec.get("claims") or {}
    unknown = sorted(set(claims) - set(CLAIMS))
    if unknown or not claims:
        raise ValueError(f"{path}: claims must be some of {', '.join(CLAIMS)} (got {unknown})")
    for claim, body in claims.items():
        # Every claim, (c) included, is decided on runs of its own arms.
        if not body or not body.get("seeds") or not body.get("envs") or not body.get("arms"):
            raise ValueError(f"{path}: claims.{claim} needs envs, seeds and arms")
    return spec


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rho: the Pearson correlation of average ranks (ties share their mean rank).

    Returns NaN when either side is constant or fewer than 3 pairs are given.

    Example:
        >>> round(spearman([1, 2, 3, 4], [10, 20, 40, 30]), 6)
        0.8
    """
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) < 3 or len(a) != len(b):
        return math.nan

    def ranks(v: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(1, len(v) + 1)
        for value in np.unique(v):
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def paired_t(diffs: list[float]) -> dict[str, float]:
    """Mean of paired differences with a 95 % Student t interval (n - 1 degrees of freedom).

    Example:
        >>> paired_t([0.1, 0.3])["mean"], round(paired_t([0.1, 0.3])["low"], 4)
        (0.2, -1.0706)
    """
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return {"n": n, "mean": mean, "low": math.nan, "high": math.nan}
    half = (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * float(d.std(ddof=1)) / math.sqrt(n)
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half}


def _bootstrap(x: list[float], y: list[float], z: list[float], seed: int = 0, n: int = 2000):
    """Percentile 95 % intervals of rho(x, z), rho(y, z), their difference and the difference of
    their absolute values, resampling runs."""
    rng = np.random.default_rng(seed)
    idx = np.arange(len(z))
    rx, ry, rd, ra = [], [], [], []
    for _ in range(n):
        pick = rng.choice(idx, size=len(idx), replace=True)
        a = spearman([x[i] for i in pick], [z[i] for i in pick])
        b = spearman([y[i] for i in pick], [z[i] for i in pick])
        if math.isfinite(a) and math.isfinite(b):
            rx.append(a)
            ry.append(b)
            rd.append(a - b)
            ra.append(abs(a) - abs(b))

    def interval(v: list[float]) -> list[float]:
        return (
            [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))] if v else [math.nan] * 2
        )

    return interval(rx), interval(ry), interval(rd), interval(ra)


# ------------------------------------------------------------------------------ running


def _short(env_id: str) -> str:
    return env_id.split("/")[-1]


def result_code(env_id: str) -> list[str]:
    """:data:`RESULT_CODE` and the modules of ``env_id``: those of its registration's folder and
    of ``agentgym/solvers/`` (the warm start's oracle) whose names start with its module's name.

    Example:
        >>> result_code("agentgym/Sokoban-v0")[len(RESULT_CODE):]
        ['agentgym/envs/sokoban.py', 'agentgym/envs/sokoban_generation.py', 'agentgym/solvers/sokoban.py']

    Raises:
        KeyError: ``env_id`` is not a registered agentgym id.
    """
    module = agentgym.registered_envs()[env_id].entry_point.partition(":")[0]
    folder, _, stem = module.replace(".", "/").rpartition("/")
    package = Path(agentgym.__file__).resolve().parent.parent
    found = [
        p.relative_to(package).as_posix()
        for where in (folder, "agentgym/solvers")
        for p in sorted((package / where).glob(f"{stem}*.py"))
    ]
    return [*RESULT_CODE, *found]


def _read_provenance(folder: Path) -> dict[str, Any] | None:
    path = folder / provenance.FILE_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def mark_stale(runs: list[dict[str, Any]], root: Path | None) -> None:
    """Set each run's ``stale``: None when neither its warm start nor its RL run is older than
    the code in ``root`` (:func:`agentgym.provenance.stale_reason` over :func:`result_code` of
    its env), else the reason, naming which of the two.

    Args:
        runs: dicts with ``env``, ``provenance`` and ``warm_start_provenance`` (each the
            ``provenance.json`` of the folder, or None when it has none).
        root: the git checkout the study runs from (:func:`agentgym.provenance.source_root`).
    """
    for run in runs:
        paths = result_code(run["env"])
        run["stale"] = None
        for part, key in (("warm start", "warm_start_provenance"), ("RL run", "provenance")):
            reason = provenance.stale_reason(run[key], paths, root)
            if reason is not None:
                run["stale"] = f"{part}: {reason}"
                break


def _warm_start(spec: dict[str, Any], env_id: str, out: Path) -> Path:
    """SFT once per env (resumable): returns the checkpoint folder."""
    from agentgym.sft import export_sft
    from baselines.sft import load_sft_config, train_sft

    folder = out / "sft" / _short(env_id)
    checkpoint = folder / "checkpoint"
    state = checkpoint / "state.json"
    if state.is_file():  # checkpoints are also written during the run: only a finished one counts
        if json.loads(state.read_text()).get("finished"):
            return checkpoint
    elif (checkpoint / "config.json").is_file():  # an earlier version's final checkpoint
        return checkpoint
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data.jsonl"
    if not data.exists():
        export_sft([env_id], range(spec["sft"]["episodes"]), data)
    s = spec["sft"]
    config = load_sft_config(
        None,
        [
            f"model.path={spec['model']}",
            f"sft.data={data}",
            f"sft.out_dir={folder}",
            f"sft.lr={s['lr']}",
            f"sft.epochs={s['epochs']}",
            f"sft.batch_size={s['batch_size']}",
            "sft.threads=1",
        ],
    )
    # A run stopped part way (config.yaml is written at its start) continues from its checkpoint.
    train_sft(config, progress=False, resume=(folder / "config.yaml").is_file())
    return checkpoint


def _runs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    runs = []
    for claim, body in spec["claims"].items():
        for env_id in body["envs"]:
            for arm, overrides in (body.get("arms") or {}).items():
                for seed in body["seeds"]:
                    runs.append(
                        {
                            "claim": claim,
                            "env": env_id,
                            "arm": arm,
                            "seed": int(seed),
                            "overrides": list(overrides),
                        }  # fmt: skip
                    )
    return runs


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _last(rows: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return float(values[-1]) if values else math.nan


def _train_overrides(run: dict[str, Any], checkpoint: Path, spec: dict[str, Any]) -> list[str]:
    """The ``python -m baselines.train`` settings of ``run`` (all but its folder)."""
    seed = run["seed"]
    return [
        f"model.path={checkpoint}",
        f"rollout.env_id={run['env']}",
        # Steps on the regularisers alone are what claim (a) watches: never stop on them (the
        # study ran before this stop existed; RAGEN has none). Empty steps still stop (RAGEN's).
        "train.max_steps_without_signal=0",
        *spec["common"],
        *run["overrides"],
        f"train.seed={seed}",
        f"rollout.train_seed={100_000 * (seed + 1)}",
        "rollout.val_seed=10000000",
    ]


def shared_runs(settings: list[list[str]]) -> list[int]:
    """For each run's settings (:func:`_train_overrides`), the index of the first run whose
    resolved configuration is the same (its own index when none before it is): a run is made
    once and its result shared by the claims that name the same configuration (defaults spelled
    out or not, overrides in any order).

    Example:
        >>> shared_runs([["algorithm.lr=0.1"], ["algorithm.lr=0.2"], ["algorithm.lr=0.1"]])
        [0, 1, 0]

    Raises:
        ValueError: settings that :func:`baselines.config.load_config` refuses.
    """
    from baselines.config import config_to_dict, load_config

    first: dict[str, int] = {}
    out = []
    for i, overrides in enumerate(settings):
        with warnings.catch_warnings():  # a config's warnings go to its run's own log.txt
            warnings.simplefilter("ignore")
            config = load_config(None, overrides)
        key = json.dumps(config_to_dict(config), sort_keys=True)
        out.append(first.setdefault(key, i))
    return out


def _execute(overrides: list[str], folder: Path) -> None:
    """One run in its own process; ``done.json`` marks it complete (resume skips it)."""
    done = folder / "done.json"
    if done.is_file():
        return
    overrides = [*overrides, f"train.out_dir={folder / 'train'}"]
    resume = ["--resume"] if (folder / "train" / "checkpoint").is_dir() else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "log.txt").open("w") as log:
        code = subprocess.call(
            [sys.executable, "-m", "baselines.train", "--no-progress", *resume, *overrides],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    if code != 0:
        raise RuntimeError(f"run {folder} failed (exit {code}); see {folder / 'log.txt'}")
    rows = _read_metrics(folder / "train" / "metrics.jsonl")
    write_text_atomic(done, json.dumps({"final_val_success": _last(rows, "val/success_rate")}))


def _summary(run: dict[str, Any], folder: Path) -> dict[str, Any]:
    rows = _read_metrics(folder / "train" / "metrics.jsonl")
    diag = [r for r in rows if r.get("collapse/mi_estimate") is not None]
    near = [
        r
        for r in diag
        if r["collapse/mi_estimate"] < 0.1 * r["collapse/mi_upper_bound"]
        and r["collapse/retrieval_above_chance"] < 0.05
    ]
    entropies = [r["collapse/entropy"] for r in diag if r.get("collapse/entropy") is not None]
    return {
        **run,
        "provenance": _read_provenance(folder / "train"),
        "metrics_path": str(folder / "train" / "metrics.jsonl"),
        "final_val_success": _last(rows, "val/success_rate"),
        "final_mi": _last(diag, "collapse/mi_estimate"),
        "final_mi_per_token": _last(diag, "collapse/mi_estimate_per_token"),
        "final_ragen_mi_zscore": _last(diag, "collapse/ragen_mi_zscore"),
        "final_entropy": _last(diag, "collapse/entropy"),
        "mi_ceiling": _last(diag, "collapse/mi_upper_bound"),
        "near_chance_evaluations": len(near),
        "entropy_held": bool(entropies) and entropies[-1] >= 0.9 * entropies[0],
        "flag_fired": any(r.get("collapse/template_collapse") == 1.0 for r in diag),
        "series": _series(rows),
        "run_s": float(sum(r.get("timing/step_s") or 0.0 for r in rows)),
    }


#: The per-step values a run's ``series`` keeps (results.json stays self-contained: the report and
#: its plots are rebuilt from it, without the runs' folders).
SERIES_KEYS = (
    "collapse/entropy",
    "collapse/mi_estimate",
    "collapse/mi_upper_bound",
    "collapse/mi_estimate_per_token",
    "collapse/ragen_mi_zscore",
    "collapse/retrieval_above_chance",
    "collapse/template_collapse",
    "val/success_rate",
    "train/reward_mean",
)


def _series(rows: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """Per key of :data:`SERIES_KEYS`: ``[[step, value], ...]`` over the steps that logged it."""
    out: dict[str, list[list[float]]] = {}
    for key in SERIES_KEYS:
        points = [[r["step"], float(r[key])] for r in rows if r.get(key) is not None]
        if points:
            out[key] = points
    return out


# ------------------------------------------------------------------------------ statistics


def _claim_collapse(runs: list[dict[str, Any]]) -> dict[str, Any]:
    treated = [r for r in runs if r["arm"] == "regularised"]
    control = [r for r in runs if r["arm"] == "control"]
    treated_ok = bool(treated) and all(
        r["near_chance_evaluations"] >= 3 and r["entropy_held"] and r["flag_fired"] for r in treated
    )
    control_ok = bool(control) and all(
        not r["flag_fired"] and r["final_mi"] >= 0.5 * r["mi_ceiling"] for r in control
    )
    return {
        "per_run": [
            {
                k: r[k]
                for k in (
                    "env",
                    "arm",
                    "seed",
                    "near_chance_evaluations",
                    "entropy_held",
                    "flag_fired",
                    "final_mi",
                    "mi_ceiling",
                )
            }  # fmt: skip
            for r in runs
        ],
        "regularised_collapses": treated_ok,
        "control_holds": control_ok,
        "reproduced": treated_ok and control_ok,
    }


def _claim_filtering(runs: list[dict[str, Any]], baseline: str) -> dict[str, Any]:
    out: dict[str, Any] = {"baseline": baseline, "differences": {}}
    helps_everywhere: dict[str, bool] = {}
    for env_id in sorted({r["env"] for r in runs}):
        base = {r["seed"]: r for r in runs if r["env"] == env_id and r["arm"] == baseline}
        for arm in sorted({r["arm"] for r in runs} - {baseline}):
            mine = {r["seed"]: r for r in runs if r["env"] == env_id and r["arm"] == arm}
            seeds = sorted(set(base) & set(mine))
            diffs = [mine[s]["final_val_success"] - base[s]["final_val_success"] for s in seeds]
            stats = paired_t(diffs)
            stats["mi_arm"] = float(np.nanmean([mine[s]["final_mi"] for s in seeds] or [math.nan]))
            stats["mi_baseline"] = float(
                np.nanmean([base[s]["final_mi"] for s in seeds] or [math.nan])
            )
            out["differences"][f"{_short(env_id)}/{arm}"] = stats
            helps = math.isfinite(stats["low"]) and stats["low"] > 0
            helps_everywhere[arm] = helps_everywhere.get(arm, True) and helps
    out["reproduced"] = any(helps_everywhere.values())
    return out


def _correlations(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Spearman rho of each score with final validation success over ``runs``, with intervals."""
    usable = [
        r
        for r in runs
        if all(
            math.isfinite(r[k])
            for k in ("final_val_success", "final_mi", "final_mi_per_token", "final_entropy")
        )
    ]
    success = [r["final_val_success"] for r in usable]
    out: dict[str, Any] = {"runs": len(usable)}
    for key, name in (
        ("final_mi", "mi"),
        ("final_mi_per_token", "mi_per_token"),
        ("final_ragen_mi_zscore", "ragen_mi_zscore"),
        ("final_entropy", "entropy"),
    ):
        out[f"spearman_{name}"] = spearman([r[key] for r in usable], success)
    mi_ci, ent_ci, diff_ci, abs_ci = _bootstrap(
        [r["final_mi"] for r in usable], [r["final_entropy"] for r in usable], success
    )
    out.update({"ci_mi": mi_ci, "ci_entropy": ent_ci, "ci_mi_minus_entropy": diff_ci})
    out["mi_minus_entropy"] = out["spearman_mi"] - out["spearman_entropy"]
    out["abs_mi_minus_abs_entropy"] = abs(out["spearman_mi"]) - abs(out["spearman_entropy"])
    out["ci_abs_mi_minus_abs_entropy"] = abs_ci
    return out


def _claim_correlation(sweep: list[dict[str, Any]], every: list[dict[str, Any]]) -> dict[str, Any]:
    """(c) on the claim's own sweep (one env), and, for comparison only, pooled over every run.

    Reproduced when the 95 % bootstrap interval of ``|rho(MI)| - |rho(entropy)|`` on the sweep lies
    above 0: MI predicts success better than entropy does in either direction (an entropy that
    falls as success rises predicts it too). Pooling runs of different envs confounds the scores
    with the env (e.g. one env where the warm start left MI at 0 and success near 0), so the
    pooled figures are reported but never decide.
    """
    out = _correlations(sweep)
    out["pooled_all_runs"] = _correlations(every)
    low = out["ci_abs_mi_minus_abs_entropy"][0]
    out["reproduced"] = bool(math.isfinite(low) and low > 0)
    return out


# ------------------------------------------------------------------------------ report


def _mean_curve(runs: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """The mean over runs of ``series[key]`` at the steps every run logged."""
    tables = [dict((int(x), y) for x, y in r["series"].get(key, [])) for r in runs]
    steps = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    return steps, [float(np.mean([t[x] for t in tables])) for x in steps]


def _groups(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
    """``{(claim, env): {arm: [runs over seeds]}}``."""
    out: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        out.setdefault((r["claim"], r["env"]), {}).setdefault(r["arm"], []).append(r)
    return out


def _plots(runs: list[dict[str, Any]], folder: Path, scatter: bool = True) -> list[str]:
    """Entropy and MI over steps per arm (mean over seeds), final validation success per arm with
    95 % t intervals over seeds, and (``scatter``: the study has claim (c)) the correlation scatter;
    PNGs in ``folder``, whose names are returned. Without the scatter a stale ``correlation.png``
    is removed, so that the folder holds what the report shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    groups = _groups(runs)
    names = []
    fig, axes = plt.subplots(len(groups), 3, figsize=(15, 3.2 * len(groups)), squeeze=False)
    for row, ((claim, env_id), arms) in enumerate(sorted(groups.items())):
        ax_h, ax_mi, ax_s = axes[row]
        for arm, members in sorted(arms.items()):
            ax_h.plot(*_mean_curve(members, "collapse/entropy"), label=arm)
            line = ax_mi.plot(*_mean_curve(members, "collapse/mi_estimate"), label=arm)[0]
            ax_mi.plot(
                *_mean_curve(members, "collapse/mi_upper_bound"), ls=":", color=line.get_color()
            )
        where = f"{claim} / {_short(env_id)}"
        ax_h.set(title=f"{where}: entropy (mean over seeds)", xlabel="step", ylabel="nats")
        ax_mi.set(title=f"{where}: MI (solid) and its ceiling (dotted)", xlabel="step")
        ax_h.legend(fontsize=7)
        labels = sorted(arms)
        finals = [[m["final_val_success"] for m in arms[a]] for a in labels]
        means = [float(np.mean(v)) for v in finals]
        halves = []
        for v in finals:
            t = paired_t(v)  # the interval of a mean (a one-sample t interval)
            halves.append(0.0 if math.isnan(t["low"]) else t["mean"] - t["low"])
        ax_s.bar(labels, means, yerr=halves, capsize=4, color="tab:gray")
        for i, v in enumerate(finals):
            ax_s.scatter([i] * len(v), v, color="black", s=10, zorder=3)
        ax_s.set(title=f"{where}: final validation success (95% t)", ylim=(0, 1.05))
    fig.tight_layout()
    fig.savefig(folder / "entropy_mi.png", dpi=80)
    names.append("entropy_mi.png")
    plt.close(fig)
    if not scatter:
        (folder / "correlation.png").unlink(missing_ok=True)
        return names
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    success = [r["final_val_success"] for r in runs]
    axes[0].scatter([r["final_mi"] for r in runs], success, s=14)
    axes[0].set(title="final MI (summed) vs success", xlabel="nats", ylabel="val success")
    axes[1].scatter([r["final_entropy"] for r in runs], success, s=14, color="tab:orange")
    axes[1].set(title="final entropy vs success", xlabel="nats")
    fig.tight_layout()
    fig.savefig(folder / "correlation.png", dpi=80)
    names.append("correlation.png")
    plt.close(fig)
    return names


def _describe_code(p: dict[str, Any] | None) -> str:
    """``commit `3f4ff41ab2c0``` (and its uncommitted changes), or the installed version."""
    if not p or not p.get("commit"):
        return f"installed agentgym {p['agentgym_version']}" if p else "not recorded"
    dirty = f" with uncommitted changes to {', '.join(p['dirty_paths'])}" if p["dirty"] else ""
    return f"commit `{p['commit'][:12]}`{dirty}"


def _provenance_lines(runs: list[dict[str, Any]], stale: list[dict[str, Any]]) -> list[str]:
    """The report's provenance section: runs per commit, the runs shared between claims, then
    every stale run with its reason."""
    commits: dict[str, int] = {}
    for r in runs:
        name = _describe_code(r["provenance"])
        commits[name] = commits.get(name, 0) + 1
    lines = [
        "",
        "## Provenance",
        "",
        "RL runs per code: " + "; ".join(f"{k}: {n}" for k, n in sorted(commits.items())) + ".",
    ]
    shared = [r for r in runs if r.get("same_run_as")]
    if shared:
        lines += [
            "",
            f"{len(shared)} runs have the configuration (settings and seeds) of a run listed "
            "before them and share its result rather than run again:",
            "",
            "| claim | env | arm | seed | same run as |",
            "| --- | --- | --- | --- | --- |",
            *[
                f"| {r['claim']} | {_short(r['env'])} | {r['arm']} | {r['seed']} | "
                f"{r['same_run_as']} |"
                for r in shared
            ],
        ]
    if stale:
        lines += [
            "",
            f"**{len(stale)} stale runs**: the trainer, SFT, sampler or env code they ran has "
            "changed since (or was not recorded), so they may not be what this code gives. "
            "Re-run them into a fresh `--out`.",
            "",
            "| claim | env | arm | seed | why stale |",
            "| --- | --- | --- | --- | --- |",
            *[
                f"| {r['claim']} | {_short(r['env'])} | {r['arm']} | {r['seed']} | {r['stale']} |"
                for r in stale
            ],
        ]
    return lines


def _write_doc(doc: Path, results: dict[str, Any], plots: list[str], plot_dir: Path) -> None:
    rel = os.path.relpath(plot_dir, doc.parent)
    c = results["claims"]
    titles = {
        "collapse": "(a) template collapse under strong regularisation",
        "filtering": "(b) SNR filtering helps",
        "correlation": "(c) MI predicts success better than entropy",
    }
    stale = [r for r in results["runs"] if r["stale"]]
    lines = [
        "# RAGEN-2's claims at small scale",
        "",
        f"Command: `{results['command']}`  ",
        f"Model: `{results['model']}` (warm-started per env by SFT on oracle chats)  ",
        f"Machine: {results['machine']}; wall time of the last invocation "
        f"{results['wall_s']:.0f} s; training steps of all runs "
        f"{sum(r['run_s'] for r in results['runs']) / 60:.0f} min.  ",
        f"Code: {_describe_code(results['provenance'])}; stale runs (made by older code): "
        f"{len(stale)} of {len(results['runs'])}.  ",
        f"Data: `{rel}/results.json` (every run's config, seed, code and per-step series).",
        "",
        "| claim | reproduced | stale runs |",
        "| --- | --- | --- |",
        *[
            f"| {titles[k]} | {v['reproduced']} | {sum(1 for r in stale if r['claim'] == k)} |"
            for k, v in c.items()
        ],
    ]
    if "filtering" in c:
        lines += [
            "",
            "## (b) paired differences in final validation success (arm minus baseline)",
            "",
            "| env/arm | n | mean | 95% low | 95% high | MI arm | MI baseline |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for key, s in c["filtering"]["differences"].items():
            lines.append(
                f"| {key} | {s['n']} | {s['mean']:.3f} | {s['low']:.3f} | {s['high']:.3f} | "
                f"{s['mi_arm']:.3f} | {s['mi_baseline']:.3f} |"
            )
    if "correlation" in c:
        cc = c["correlation"]

        def ci(v: list[float]) -> str:
            return f"[{v[0]:.3f}, {v[1]:.3f}]"

        pooled = cc["pooled_all_runs"]
        lines += [
            "",
            "## (c) Spearman with final validation success",
            "",
            f"| score | sweep ({cc['runs']} runs): rho | 95% bootstrap | "
            f"pooled over all {pooled['runs']} runs: rho | 95% bootstrap |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, key, interval in (
            ("MI (summed)", "spearman_mi", "ci_mi"),
            ("MI per token (RAGEN's headline)", "spearman_mi_per_token", None),
            ("RAGEN MI-ZScore", "spearman_ragen_mi_zscore", None),
            ("entropy", "spearman_entropy", "ci_entropy"),
            ("rho(MI) - rho(entropy)", "mi_minus_entropy", "ci_mi_minus_entropy"),
            (
                "abs rho(MI) - abs rho(entropy) (decides)",
                "abs_mi_minus_abs_entropy",
                "ci_abs_mi_minus_abs_entropy",
            ),
        ):
            lines.append(
                f"| {name} | {cc[key]:.3f} | {ci(cc[interval]) if interval else ''} | "
                f"{pooled[key]:.3f} | {ci(pooled[interval]) if interval else ''} |"
            )
    if "collapse" in c:
        lines += [
            "",
            "## (a) per run",
            "",
            "| env | arm | seed | near-chance evaluations | entropy held | flag | final MI | ceiling |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in c["collapse"]["per_run"]:
            lines.append(
                f"| {_short(r['env'])} | {r['arm']} | {r['seed']} | "
                f"{r['near_chance_evaluations']} | {r['entropy_held']} | {r['flag_fired']} | "
                f"{r['final_mi']:.3f} | {r['mi_ceiling']:.3f} |"
            )
    lines += _provenance_lines(results["runs"], stale)
    lines += ["", *[f"![{p}]({rel}/{p})" for p in plots], ""]
    doc.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(doc, "\n".join(lines))


def run_study(
    spec: dict[str, Any], out: Path, doc: Path, command: str, jobs: int = 1
) -> dict[str, Any]:
    """Warm starts, every run (resumable; ``jobs`` runs at once), statistics; writes
    results.json and ``doc``.

    Raises:
        RuntimeError: a run failed (its log is named); runs already started finish, and no
            further run starts.
    """
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    runs = _runs(spec)
    checkpoints = {env: _warm_start(spec, env, out) for env in sorted({r["env"] for r in runs})}
    names = [f"{r['claim']}/{_short(r['env'])}/{r['arm']}/seed{r['seed']}" for r in runs]
    settings = [_train_overrides(run, checkpoints[run["env"]], spec) for run in runs]
    # A configuration two claims name runs once, in the folder of the first run that names it.
    made_by = shared_runs(settings)
    folders = [out / "runs" / names[j] for j in made_by]
    # Each run is its own single-threaded, seeded process: running ``jobs`` at once changes only
    # the wall time, never a result.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [
            pool.submit(_execute, settings[i], folders[i])
            for i in range(len(runs))
            if made_by[i] == i
        ]
        try:
            for future in futures:
                future.result()
        except BaseException:  # a failed run or Ctrl-C: start no further runs
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    summaries = [_summary(run, folder) for run, folder in zip(runs, folders, strict=True)]
    for i, (summary, j) in enumerate(zip(summaries, made_by, strict=True)):
        summary["same_run_as"] = None if j == i else names[j]  # shared, and said so
    for s in summaries:  # the warm start's folder holds the checkpoint and its provenance
        s["warm_start_provenance"] = _read_provenance(checkpoints[s["env"]].parent)
    now = provenance.describe()
    mark_stale(summaries, provenance.source_root())
    by_claim = {name: [s for s in summaries if s["claim"] == name] for name in spec["claims"]}
    keep = (
        "claim",
        "env",
        "arm",
        "seed",
        "overrides",
        "same_run_as",
        "metrics_path",
        "final_val_success",
        "run_s",
        "provenance",
        "warm_start_provenance",
        "stale",
        "series",
    )
    claims: dict[str, Any] = {}
    if "collapse" in by_claim:
        claims["collapse"] = _claim_collapse(by_claim["collapse"])
    if "filtering" in by_claim:
        baseline = spec["claims"]["filtering"].get("baseline", "none")
        claims["filtering"] = _claim_filtering(by_claim["filtering"], baseline)
    if "correlation" in by_claim:
        once = [s for s in summaries if s["same_run_as"] is None]  # a shared run counts once
        claims["correlation"] = _claim_correlation(by_claim["correlation"], once)
    results = {
        "command": command,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "model": spec["model"],
        "wall_s": time.perf_counter() - t0,
        "provenance": now,  # the code that made this report (each run's own is in the run)
        "runs": [{k: s[k] for k in keep} for s in summaries],
        "claims": claims,
    }
    text = json.dumps(results, indent=1, default=float)
    write_text_atomic(out / "results.json", text)
    plot_dir = doc.parent / (doc.stem)
    plots = _plots(summaries, plot_dir, scatter="correlation" in claims)
    write_text_atomic(plot_dir / "results.json", text)  # committed beside the report
    _write_doc(doc, results, plots, plot_dir)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.studies.ragen2", description=__doc__)
    parser.add_argument("--spec", default=str(SPEC), help="study YAML")
    parser.add_argument("--quick", action="store_true", help="the reduced study (tests)")
    parser.add_argument("--out", default=None, help="results folder")
    parser.add_argument(
        "--doc",
        default=None,
        help="report to write (default docs/reproduction.md; with --quick, reproduction.md in "
        "the results folder: a quick run writes into docs/ only when this names a file there)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at once (each is one single-threaded process)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    try:
        spec = load_study(args.spec, quick=args.quick)
    except FileNotFoundError:
        parser.error(f"--spec: no such file {args.spec!r}")
    except (ValueError, yaml.YAMLError) as err:
        parser.error(f"--spec {args.spec}: {err}")
    out = Path(args.out or ("runs/ragen2-quick" if args.quick else "runs/ragen2"))
    doc = Path(args.doc or (out / "reproduction.md" if args.quick else "docs/reproduction.md"))
    command = "python -m baselines.studies.ragen2 " + " ".join(argv or sys.argv[1:])
    results = run_study(spec, out, doc, command.strip(), jobs=args.jobs)
    for name, claim in results["claims"].items():
        print(f"{name}: reproduced={claim['reproduced']}")
    stale = sum(1 for r in results["runs"] if r["stale"])
    if stale:
        print(f"{stale} of {len(results['runs'])} runs are stale (made by older code): see {doc}")
    print(f"wrote {out / 'results.json'} and {doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
