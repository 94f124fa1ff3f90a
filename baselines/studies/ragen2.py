"""RAGEN-2's three claims at small scale: ``python -m baselines.studies.ragen2 [--quick]``.

The study (configs in ``baselines/studies/ragen2.yaml``, seeds explicit) runs, in one results
folder (``--out``, default by the spec's name: ``runs/ragen2`` for ``ragen2.yaml``,
``runs/ragen2-filtering`` for ``ragen2_filtering.yaml``; ``--quick`` ``runs/<name>-quick``; the
folder records the spec's fingerprint in ``spec.json``, and a folder another spec made is
refused, :func:`claim_folder`):

1. one supervised warm start per environment (``agentgym export-sft`` data, then
   :func:`baselines.sft.train_sft`), then the warm-start gate (:mod:`baselines.studies.gate`,
   thresholds in the spec's ``gate`` section): an environment whose warm start fails it (the
   oracle's reasoning under it below half its MI ceiling, or validation success at its floor or
   ceiling) gets no RL runs; they are reported ``void`` with the reason and never counted;
2. every RL run of every claim in its own process (``python -m baselines.train``), skipped when
   its ``done.json`` exists (the study resumes where it stopped) or when its record is committed
   beside the report (:func:`run_record`, ``<doc stem>/runs/<claim>/<env>/<arm>/seed<k>.json``,
   written as each run ends: a study too long for one sitting is made in pieces with
   ``--stop-after MINUTES``, its records committed after each, and goes on from them on any
   machine that rebuilds the same warm start, :func:`checkpoint_digest`); a configuration that several
   claims name (the same resolved config and seeds, :func:`shared_runs`) runs once, in the folder
   of the first run that names it, and the others say so (``same_run_as`` in ``results.json``
   and in the report);
3. the statistics of each claim, written to ``results.json`` and ``--doc`` (default by the
   spec's name: ``docs/reproduction.md``, ``docs/reproduction-filtering.md``, ...; with
   ``--quick``, ``reproduction.md`` in the results folder: a quick run writes into ``docs/`` only
   when ``--doc`` names a file there) with PNG plots beside it.

``--report-only`` runs nothing: it re-decides the ``results.json`` committed beside ``--doc`` by
this code's rules and rewrites it and the report (:func:`regenerate`)::

    python -m baselines.studies.ragen2 --spec baselines/studies/ragen2_filtering.yaml --report-only

Provenance: every run folder holds the ``provenance.json`` its trainer wrote (the commit and
dirty state of the code, :mod:`agentgym.provenance`), and so does each warm start's; each run of
``results.json`` carries both. Whenever the report is made (a resumed study only recomputes it),
a run whose code (:data:`RESULT_CODE` and its env's module) changed since its commit, or that ran
on uncommitted changes to it, or that records no commit, is marked ``stale`` with the reason, and
the report counts and lists such runs, stale "as of" the commit that judged them: re-run them
into a fresh ``--out``.

Claims and their tests (issues 13 and 23), the statistics through :mod:`baselines.studies.stats`:

(a) ``collapse``: decided by the collapse detector's states (issue 44; :func:`_claim_collapse`):
    for every seed, the ``regularised`` run ends its MI history ``collapsed`` (its last state
    neither ``format_collapsed`` nor ``degenerate``), its ``control`` is never ``collapsed`` or
    ``degenerate`` and ends ``dependent``, and the bonus was not inert (the regularised run's
    entropy above its control's). MI is read only from the MI history (evaluations with enough
    valid reasonings). No test statistic: ``reproduced`` or ``inconclusive``. (Reports decided
    before the states were kept used a near-chance count of MI below 0.1 of its ceiling.)
(b) ``filtering``: paired per-seed differences of final validation success, each arm minus the
    ``baseline`` arm: mean, 95 % t interval and one-sided p for "the arm helps"; significant when
    some filtered arm's Holm-corrected p is within alpha on every environment.
(c) ``correlation``: Spearman correlation of RAGEN's MI-ZScore, MI / ceiling and the entropy
    (each a run's mean over its last :data:`LAST_EVALUATIONS` evaluations) with final validation
    success over the claim's own sweep, 95 % intervals from resamples of whole seeds, and the
    paper's signed statistic fixed in advance, ``rho(MI-ZScore) - rho(entropy)`` (RAGEN-2: +0.39
    and -0.14), tested one-sided by Meng, Rosenthal and Rubin's test of dependent correlations;
    significant when its Holm-corrected p is within alpha and its interval lies above 0 (the
    figures pooled over every run of the study are reported, never deciding: pooling envs
    confounds the scores with the env).

Each claim's verdict (:func:`_decide`, :func:`~baselines.studies.stats.verdict`; issue 44):
``reproduced`` when significant; ``not reproduced`` only when the data exclude the paper's effect
at the variance they showed; ``void: floor/ceiling`` when an arm (b) or (c) compares ended with a
median final success at or beyond the gate's floor or ceiling (:func:`floor_ceiling`); else
``inconclusive``. The power for the paper's effect sizes, planned (the spec's ``power`` section,
written before the study runs) and at the observed variance, is reported beside it and never
decides.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import agentgym
from agentgym import provenance
from agentgym.fileio import write_text_atomic
from baselines.collapse.detector import STATES
from baselines.studies import stats as st
from baselines.studies.gate import warm_start_gate
from baselines.studies.spec import (
    SPEC,
    SUCCESS_CEILING,
    SUCCESS_FLOOR,
    gate_settings,
    load_study,
)
from baselines.studies.stats import paired_t, spearman

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


#: The code a study run's numbers depend on, relative to the checkout (with its env's own modules:
#: :func:`result_code`): the RL trainer and its algorithm, the SFT warm start and its data, the
#: sampler (engines, the episode loop, chat rendering, action parsing), model loading, the
#: diagnostics, and the config defaults. A run made by code older than the checkout's in any of
#: these is stale.
RESULT_CODE = (
    "baselines/trainer.py",
    "baselines/llm/critic.py",  # PPO's values (the head or the critic model)
    "baselines/checkpoint.py",  # loading the warm start and resuming a run
    "baselines/progress.py",  # the reward-variance early stop
    "baselines/llm/chat_template.py",  # the prompt ids every reply is sampled after
    "baselines/studies/gate.py",  # which runs start at all
    "baselines/studies/spec.py",  # the gate's settings from the spec
    "baselines/rl/advantages.py",
    "baselines/rl/batch.py",
    "baselines/rl/losses.py",
    "baselines/rl/minibatches.py",
    "baselines/rl/filtering.py",
    "baselines/config.py",
    "baselines/sft.py",
    "agentgym/sft.py",
    "baselines/llm/engines/__init__.py",  # make_engine
    "baselines/llm/engines/base.py",
    "baselines/llm/engines/hf.py",
    "baselines/llm/engines/vllm.py",
    "baselines/llm/prompts.py",  # the prompt policy and the token context
    "baselines/episodes.py",
    "baselines/llm/policy.py",
    "baselines/llm/scoring.py",
    "baselines/collapse/reasoning.py",
    "baselines/collapse/mi.py",
    "baselines/collapse/detector.py",
    "baselines/collapse/scorer.py",
    "agentgym/chat.py",
    "agentgym/parsing.py",
    "agentgym/text_env.py",
    "agentgym/lockstep.py",
    "agentgym/envs/__init__.py",  # the registrations: each id's fixed and default arguments
)


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
    """SFT once per env (resumable): returns the checkpoint folder.

    The data: ``sft.episodes`` oracle episodes from :data:`agentgym.sft.SFT_SEED_START` (never an
    RL training or validation seed); with ``sft.epsilon`` > 0 a noisy oracle
    (:func:`agentgym.sft.oracle_episodes`) whose failures are kept, for a warm start between
    random and the oracle."""
    from agentgym.sft import SFT_SEED_START, export_sft
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
        epsilon = float(spec["sft"].get("epsilon", 0.0))
        seeds = range(SFT_SEED_START, SFT_SEED_START + spec["sft"]["episodes"])
        export_sft([env_id], seeds, data, only_success=epsilon == 0, epsilon=epsilon)
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


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else math.nan


def _last(rows: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return float(values[-1]) if values else math.nan


#: Claim (c) reads each score as its mean over a run's last evaluations (issue 23, item 5c): one
#: evaluation of 32 pairs is too noisy a reading of where a run ended.
LAST_EVALUATIONS = 3


def _mean_last(values: list[float | None], k: int = LAST_EVALUATIONS) -> float:
    """Mean of the finite values among the last ``k`` evaluations (an evaluation that could not
    score, e.g. with too few prompts, leaves a gap rather than reaching further back); NaN when
    there are none."""
    finite = [float(v) for v in values[-k:] if v is not None and math.isfinite(float(v))]
    return float(np.mean(finite)) if finite else math.nan


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
    """One run in its own process; ``done.json`` marks it complete (resume skips it) and holds
    its final success and wall time in seconds."""
    done = folder / "done.json"
    if done.is_file():
        return
    overrides = [*overrides, f"train.out_dir={folder / 'train'}"]
    resume = ["--resume"] if (folder / "train" / "checkpoint").is_dir() else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    folder.mkdir(parents=True, exist_ok=True)
    restarted = ""
    if not resume and (folder / "train").exists():
        # Stopped before its first checkpoint: nothing to resume from, and the trainer refuses
        # a folder that holds a run. The run is seeded, so starting over writes the same lines.
        shutil.rmtree(folder / "train")
        restarted = "study: the run had stopped before its first checkpoint; started over\n"
    started = time.perf_counter()
    with (folder / "log.txt").open("w") as log:
        log.write(restarted)
        log.flush()
        code = subprocess.call(
            [sys.executable, "-m", "baselines.train", "--no-progress", *resume, *overrides],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    if code != 0:
        raise RuntimeError(f"run {folder} failed (exit {code}); see {folder / 'log.txt'}")
    rows = _read_metrics(folder / "train" / "metrics.jsonl")
    body = {
        "final_val_success": _last(rows, "val/success_rate"),
        "wall_s": time.perf_counter() - started,  # this process's (a resumed run's last part)
    }
    write_text_atomic(done, json.dumps(body))


def checkpoint_digest(checkpoint: Path) -> str:
    """The sha256 (first 16 hex digits) of a checkpoint's weights: every ``*.safetensors`` file
    under ``checkpoint`` (its path relative to the folder, then its bytes, in sorted order).

    A committed run record (:func:`run_record`) names the digest of the warm start it started
    from, so a study resumed on another machine, which rebuilds its warm start from the spec,
    refuses to mix runs from two different warm starts.

    Raises:
        FileNotFoundError: ``checkpoint`` holds no ``*.safetensors`` file.
    """
    files = sorted(p for p in Path(checkpoint).rglob("*.safetensors") if p.is_file())
    if not files:
        raise FileNotFoundError(f"{checkpoint}: no *.safetensors weights to digest")
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(checkpoint)).encode("utf-8") + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


#: The folder, beside a study's report, that holds one committed record per finished run
#: (``docs/reproduction-confirm-correlation-ppo/runs/<claim>/<env>/<arm>/seed<k>.json``).
RECORDS = "runs"


def run_record(
    run: dict[str, Any], folder: Path, fingerprint: str, warm_start: Path
) -> dict[str, Any]:
    """A finished run's committed record: its :func:`_summary` (scores, per-step series,
    provenance of the run and of its warm start), the spec fingerprint, the warm start's
    :func:`checkpoint_digest` and the run's wall time in seconds (``wall_s``, from its
    ``done.json``; None when its process was made before the time was recorded there).

    The records, committed beside the report, are what a study resumed on a fresh machine (where
    ``runs/`` is gone) reads instead of running again: the study is made in pieces
    (``--stop-after``), each piece's records committed as it ends.
    """
    return {
        **_summary(run, folder),
        "warm_start_provenance": _read_provenance(warm_start.parent),
        "spec_fingerprint": fingerprint,
        "warm_start_digest": checkpoint_digest(warm_start),
        "wall_s": json.loads((folder / "done.json").read_text(encoding="utf-8")).get("wall_s"),
    }


def read_record(path: Path, fingerprint: str, digest: str) -> dict[str, Any] | None:
    """The committed record at ``path`` (:func:`run_record`), or None when there is none.

    Raises:
        ValueError: the record was made by another spec, or from another warm start than the one
            this study has now (rebuilt on another machine to other weights): the message names
            the fix (a new ``--doc``, or deleting the records to run them again).
    """
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    fix = f"give a new --doc, or delete {path.parent} to run those runs again"
    if record.get("spec_fingerprint") != fingerprint:
        raise ValueError(
            f"{path} was made by a spec with fingerprint {record.get('spec_fingerprint')}, not "
            f"this spec's {fingerprint}: {fix}"
        )
    if record.get("warm_start_digest") != digest:
        raise ValueError(
            f"{path} started from a warm start with digest {record.get('warm_start_digest')}, "
            f"but this study's warm start has {digest} (rebuilt to other weights, e.g. on "
            f"another machine or by other code); runs from two warm starts do not mix: {fix}"
        )
    return record


def _summary(run: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A finished run's record: ``run``, its provenance and :func:`_scores` of its metrics."""
    return {
        **run,
        "provenance": _read_provenance(folder / "train"),
        "metrics_path": str(folder / "train" / "metrics.jsonl"),
        **_scores(_read_metrics(folder / "train" / "metrics.jsonl")),
    }


def _scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The scores the report reads from a run's ``metrics.jsonl`` rows; with no rows (a void
    run) each is NaN, 0, False or empty, so a void run's record has the same keys."""
    diag = [r for r in rows if r.get("collapse/mi_estimate") is not None]
    # Every evaluation, also one with too few prompts to score an MI (num_pairs_total is logged
    # whenever the diagnostics run); metrics older than that key: the scored ones.
    evaluations = [r for r in rows if r.get("collapse/num_pairs_total") is not None] or diag
    near = [
        r
        for r in diag
        if r["collapse/mi_estimate"] < 0.1 * r["collapse/mi_upper_bound"]
        and r["collapse/retrieval_above_chance"] < 0.05
    ]
    entropies = [r["collapse/entropy"] for r in diag if r.get("collapse/entropy") is not None]
    return {
        "final_val_success": _last(rows, "val/success_rate"),
        "final_mi": _last(diag, "collapse/mi_estimate"),
        "final_mi_per_token": _last(diag, "collapse/mi_estimate_per_token"),
        "final_ragen_mi_zscore": _last(diag, "collapse/ragen_mi_zscore"),
        "final_entropy": _last(diag, "collapse/entropy"),
        "mi_ceiling": _last(diag, "collapse/mi_upper_bound"),
        # (c)'s scores: each the mean over the last LAST_EVALUATIONS evaluations.
        "mi_fraction_last": _mean_last(
            [
                r["collapse/mi_estimate"] / r["collapse/mi_upper_bound"]
                if r.get("collapse/mi_estimate") is not None and r.get("collapse/mi_upper_bound")
                else math.nan
                for r in evaluations
            ]
        ),
        "ragen_mi_zscore_last": _mean_last(
            [r.get("collapse/ragen_mi_zscore") for r in evaluations]
        ),
        "entropy_last": _mean_last([r.get("collapse/entropy") for r in evaluations]),
        "valid_rate_last": _mean_last([r.get("collapse/valid_thinking_rate") for r in evaluations]),
        "near_chance_evaluations": len(near),
        "entropy_held": bool(entropies) and entropies[-1] >= 0.9 * entropies[0],
        "flag_fired": any(r.get("collapse/template_collapse") == 1.0 for r in diag),
        # The manipulation check of (b): the share of groups the filter kept, over the run.
        "mean_kept_fraction": _mean(rows, "filter/kept_fraction"),
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
    "collapse/valid_thinking_rate",
    "collapse/retrieval_above_chance",
    "collapse/template_collapse",
    "val/success_rate",
    "train/reward_mean",
    "filter/kept_fraction",
    # (a) is decided by the detector's states (issue 44, item 4): each evaluation's one-hot state
    # and the number of reasonings it scored.
    "collapse/num_reasonings",
    *(f"collapse/state_{s}" for s in STATES),
)

#: The states whose evaluations hold no MI reading (the detector's ``_NO_MI_STATES``): the
#: rest make up its MI history, the only evaluations (a) reads an MI from.
NO_MI_STATES = ("format_collapsed", "insufficient_sample")


def state_sequence(series: dict[str, list[list[float]]]) -> list[tuple[int, str]]:
    """A run's detector states, ``[(step, state), ...]`` in step order, from its ``series``
    (the one-hot ``collapse/state_<s>`` of :data:`baselines.collapse.detector.STATES`); empty
    when the run logged none (made before the states were kept).

    Example:
        >>> state_sequence({"collapse/state_dependent": [[0, 1.0], [2, 0.0]],
        ...                 "collapse/state_collapsed": [[0, 0.0], [2, 1.0]]})
        [(0, 'dependent'), (2, 'collapsed')]
    """
    out: dict[int, str] = {}
    for s in STATES:
        for step, value in series.get(f"collapse/state_{s}", []):
            if value == 1.0:
                out[int(step)] = s
    return sorted(out.items())


def _series(rows: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """Per key of :data:`SERIES_KEYS`: ``[[step, value], ...]`` over the steps that logged it."""
    out: dict[str, list[list[float]]] = {}
    for key in SERIES_KEYS:
        points = [[r["step"], float(r[key])] for r in rows if r.get(key) is not None]
        if points:
            out[key] = points
    return out


# ------------------------------------------------------------------------------ statistics


def _collapse_run(r: dict[str, Any]) -> dict[str, Any]:
    """One run of (a) read by the detector's states: its state sequence, its MI history (the
    evaluations not in :data:`NO_MI_STATES`), and the mean entropy and MI / ceiling over the last
    :data:`LAST_EVALUATIONS` evaluations of that history (NaN when it is empty)."""
    states = state_sequence(r["series"])
    history = [step for step, state in states if state not in NO_MI_STATES]
    last = set(history[-LAST_EVALUATIONS:])

    def at(key: str) -> dict[int, float]:
        return {int(step): float(v) for step, v in r["series"].get(key, [])}

    entropy, mi, ceiling = (
        at(k) for k in ("collapse/entropy", "collapse/mi_estimate", "collapse/mi_upper_bound")
    )
    fractions = [mi[s] / ceiling[s] for s in sorted(last) if s in mi and ceiling.get(s)]
    entropies = [entropy[s] for s in sorted(last) if s in entropy]
    return {
        "states": [state for _, state in states],
        "state_steps": [step for step, _ in states],
        "mi_history_evaluations": len(history),
        "last_mi_history_state": next(
            (state for _, state in reversed(states) if state not in NO_MI_STATES), None
        ),
        "last_state": states[-1][1] if states else None,
        "entropy_mi_history_last": float(np.mean(entropies)) if entropies else math.nan,
        "mi_fraction_mi_history_last": float(np.mean(fractions)) if fractions else math.nan,
    }


def _claim_collapse(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Claim (a), decided by the detector's states (issue 44, item 4; the rule pre-registered in
    ``docs/ragen2.md``, "(a), with an informative control, decided by the detector's states"):
    reproduced when, for every seed of the ``regularised`` arm, its own seed has a ``control``
    run and

    * ``regularised``: the last evaluation of its MI history is ``collapsed``, and its last
      evaluation is neither ``format_collapsed`` nor ``degenerate``;
    * ``control``: no evaluation ``collapsed`` or ``degenerate``, and the last of its MI history
      ``dependent``;
    * the manipulation check (the bonus not inert): the regularised run's mean entropy over the
      last :data:`LAST_EVALUATIONS` evaluations of its MI history above its control's.

    Every MI figure is read from the MI history only (>= the detector's ``min_pairs`` scored
    reasonings). A run with no states (made before they were kept) satisfies nothing. The
    near-chance count of the earlier rule is still reported per run, never deciding.
    """
    read = [{**r, **_collapse_run(r)} for r in runs]
    treated = {r["seed"]: r for r in read if r["arm"] == "regularised"}
    control = {r["seed"]: r for r in read if r["arm"] == "control"}
    seeds: list[dict[str, Any]] = []
    for seed in sorted(treated):
        t, c = treated[seed], control.get(seed)
        t_ok = t["last_mi_history_state"] == "collapsed" and t["last_state"] not in (
            "format_collapsed",
            "degenerate",
        )
        c_ok = (
            c is not None
            and not {"collapsed", "degenerate"} & set(c["states"])
            and c["last_mi_history_state"] == "dependent"
        )
        bonus_moved = c is not None and t["entropy_mi_history_last"] > c["entropy_mi_history_last"]
        seeds.append(
            {
                "seed": seed,
                "regularised_collapses": t_ok,
                "control_holds": c_ok,
                "bonus_not_inert": bool(bonus_moved),
            }
        )
    treated_ok = bool(seeds) and all(x["regularised_collapses"] for x in seeds)
    control_ok = bool(seeds) and all(x["control_holds"] for x in seeds)
    moved = bool(seeds) and all(x["bonus_not_inert"] for x in seeds)
    return {
        "rule": "detector states (issue 44)",
        "per_seed": seeds,
        "per_run": [
            {
                k: r[k]
                for k in (
                    "env",
                    "arm",
                    "seed",
                    "states",
                    "state_steps",
                    "mi_history_evaluations",
                    "last_mi_history_state",
                    "last_state",
                    "entropy_mi_history_last",
                    "mi_fraction_mi_history_last",
                    "near_chance_evaluations",
                    "entropy_held",
                    "flag_fired",
                    "final_mi",
                    "mi_ceiling",
                    "mi_fraction_last",
                    "valid_rate_last",
                    "entropy_last",
                    "final_val_success",
                )
            }  # fmt: skip
            for r in read
        ],
        "regularised_collapses": treated_ok,
        "control_holds": control_ok,
        "bonus_not_inert": moved,
        "reproduced": treated_ok and control_ok and moved,
    }


def _claim_filtering(runs: list[dict[str, Any]], baseline: str) -> dict[str, Any]:
    """(b): per env and arm, the paired per-seed differences of final validation success (arm
    minus ``baseline``): :func:`~baselines.studies.stats.paired_t` and its one-sided p-value for
    "the arm helps" (``p_one_sided``); the decision is :func:`_decide`'s."""
    out: dict[str, Any] = {"baseline": baseline, "differences": {}}
    for env_id in sorted({r["env"] for r in runs}):
        base = {r["seed"]: r for r in runs if r["env"] == env_id and r["arm"] == baseline}
        for arm in sorted({r["arm"] for r in runs} - {baseline}):
            mine = {r["seed"]: r for r in runs if r["env"] == env_id and r["arm"] == arm}
            seeds = sorted(set(base) & set(mine))
            diffs = [mine[s]["final_val_success"] - base[s]["final_val_success"] for s in seeds]
            result = paired_t(diffs)
            p = result["p"]
            result["p_one_sided"] = (
                p / 2 if result["mean"] > 0 else 1 - p / 2 if math.isfinite(p) else math.nan
            )
            result["arm"], result["env"] = arm, env_id
            result["mi_arm"] = float(np.nanmean([mine[s]["final_mi"] for s in seeds] or [math.nan]))
            result["mi_baseline"] = float(
                np.nanmean([base[s]["final_mi"] for s in seeds] or [math.nan])
            )
            # Manipulation check: did the arm drop groups the baseline kept?
            for side, runs_of in (("arm", mine), ("baseline", base)):
                kept = [runs_of[s].get("mean_kept_fraction", math.nan) for s in seeds]
                finite = [k for k in kept if math.isfinite(k)]
                result[f"kept_{side}"] = float(np.mean(finite)) if finite else math.nan
            out["differences"][f"{_short(env_id)}/{arm}"] = result
    return out


def _rho(key: str):
    """Spearman of ``key`` with final validation success over a list of runs."""

    def value(rows: list[dict[str, Any]]) -> float:
        return spearman([r[key] for r in rows], [r["final_val_success"] for r in rows])

    return value


def _correlations(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Spearman rho of each score with final validation success over ``runs``, the scores each
    a run's mean over its last :data:`LAST_EVALUATIONS` evaluations: RAGEN's MI-ZScore (the
    paper's correlation figure), MI / ceiling and entropy. Percentile 95 % intervals from 2000
    resamples of whole seeds (runs of one seed move together:
    :func:`~baselines.studies.stats.cluster_bootstrap`), and the signed Meng-Rosenthal-Rubin
    test of ``rho(MI-ZScore) > rho(entropy)`` (``mrr_z``, ``p_one_sided``) with
    rho(MI-ZScore, entropy) as the predictors' correlation. The same difference for MI / ceiling
    is reported beside it (``fraction_minus_entropy``), never deciding."""
    scores = ("ragen_mi_zscore_last", "mi_fraction_last", "entropy_last")
    usable = [r for r in runs if all(math.isfinite(r[k]) for k in ("final_val_success", *scores))]
    out: dict[str, Any] = {"runs": len(usable), "seeds": len({r["seed"] for r in usable})}
    zscore, fraction, entropy = (_rho(k) for k in scores)
    out["spearman_ragen_mi_zscore"] = zscore(usable)
    out["spearman_mi_fraction"] = fraction(usable)
    out["spearman_entropy"] = entropy(usable)
    by_seed: dict[int, list[dict[str, Any]]] = {}
    for r in usable:
        by_seed.setdefault(r["seed"], []).append(r)
    for name, fn in (
        ("ci_ragen_mi_zscore", zscore),
        ("ci_mi_fraction", fraction),
        ("ci_entropy", entropy),
        ("ci_zscore_minus_entropy", lambda rows: zscore(rows) - entropy(rows)),
        ("ci_fraction_minus_entropy", lambda rows: fraction(rows) - entropy(rows)),
    ):
        out[name] = list(
            st.cluster_bootstrap(
                lambda picked, fn=fn: fn([r for s in picked for r in by_seed[s]]),
                [r["seed"] for r in usable],
            )
        )
    out["dropped"] = len(runs) - len(usable)  # no final validation or no scored evaluation
    out["zscore_minus_entropy"] = out["spearman_ragen_mi_zscore"] - out["spearman_entropy"]
    out["fraction_minus_entropy"] = out["spearman_mi_fraction"] - out["spearman_entropy"]
    between = spearman(
        [r["ragen_mi_zscore_last"] for r in usable], [r["entropy_last"] for r in usable]
    )
    out["spearman_zscore_entropy"] = between
    r1, r2 = out["spearman_ragen_mi_zscore"], out["spearman_entropy"]
    if len(usable) >= 4 and all(math.isfinite(v) and abs(v) < 1 for v in (r1, r2, between)):
        test = st.dependent_correlations_test(r1, r2, between, len(usable), signed=True)
        out["mrr_z"], out["p_one_sided"] = test["z"], test["p"]
    else:
        out["mrr_z"] = out["p_one_sided"] = math.nan
    return out


def _claim_correlation(sweep: list[dict[str, Any]], every: list[dict[str, Any]]) -> dict[str, Any]:
    """(c) on the claim's own sweep (one env), and, for comparison only, pooled over every run.

    The statistic, fixed before the study runs (issue 23, item 5c): the paper's signed
    ``rho(MI-ZScore, success) - rho(entropy, success)`` on the sweep, each score a run's mean
    over its last :data:`LAST_EVALUATIONS` evaluations (RAGEN-2 reports Spearman +0.39 for
    MI-ZScore and -0.14 for entropy: MI goes with success, entropy does not). An earlier version
    decided on ``|rho(MI)| - |rho(entropy)|`` of the final raw MI, a rule chosen after seeing
    data. Pooling runs of different envs confounds the scores with the env, so the pooled
    figures are reported but never decide. The decision is :func:`_decide`'s.
    """
    out = _correlations(sweep)
    out["pooled_all_runs"] = _correlations(every)
    return out


def _filtering_power(power: dict[str, float], n: int, level: float) -> float:
    """(b)'s power on ``n`` pairs at the (Bonferroni) ``level``: the one-sided paired t test
    (:func:`~baselines.studies.stats.paired_t_power`, ``alternative="greater"``), for the spec's
    ``filtering_effect`` and ``filtering_sd``; NaN when they are missing, sd is not > 0 or
    ``n < 2``."""
    effect, sd = power.get("filtering_effect", math.nan), power.get("filtering_sd", math.nan)
    if n < 2 or not math.isfinite(effect) or not sd > 0:
        return math.nan
    return st.paired_t_power(effect, sd, n, level, alternative="greater")


#: The most pairs :func:`_pairs_for_power` looks at.
MOST_PAIRS = 100_000


def _pairs_for_power(power: dict[str, float], level: float) -> int | None:
    """The fewest pairs for which :func:`_filtering_power` reaches
    :data:`~baselines.studies.stats.POWER_TO_DECIDE` (0.8), by bisection (the power rises with
    the pairs for a positive effect); None when it is NaN (the effect or sd missing, sd not
    > 0), the effect is not > 0, or :data:`MOST_PAIRS` pairs do not reach it."""
    if not power.get("filtering_effect", math.nan) > 0:
        return None
    # one pair has no test: the search starts at two
    return _runs_for_power(lambda n: _filtering_power(power, n, level), least=2)


def _correlation_power(power: dict[str, float], runs: int, level: float) -> float:
    """(c)'s power on ``runs`` runs at ``level`` for the spec's correlations: that of the
    signed test of rho(MI-ZScore) > rho(entropy) times that of rho(MI-ZScore) > 0 (see
    :func:`_decide`); NaN when they are missing or ``runs < 4``."""
    rhos = [power.get(k, math.nan) for k in ("correlation_mi", "correlation_entropy")]
    if runs < 4 or not all(math.isfinite(r) for r in rhos):
        return math.nan
    beats = st.dependent_correlations_power(
        *rhos, power.get("correlation_between", 0.0), runs, level, signed=True
    )
    # ... and rho(MI-ZScore) itself above 0 (one-sided: the two-sided power at twice the level).
    positive = st.correlation_power(rhos[0], runs, min(1.0, 2 * level)) if rhos[0] > 0 else 0.0
    return beats * positive


def design_power(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each claim's power for the paper's effect sizes, from the spec alone (before any run).

    The same computation as :func:`_decide`, with every planned run counted as it would be if
    none were void: (b) ``len(seeds)`` pairs per env and filtered arm, at the Bonferroni level
    alpha / m where m counts every (b) comparison and (c); (c) all its runs. (a) has no test:
    power NaN (its verdict can be ``reproduced`` or ``inconclusive`` only).

    Returns:
        ``{claim: {"runs": planned RL runs, "power": float, "n": pairs or runs tested}}``.
    """
    power = spec.get("power") or {}
    alpha = float(power.get("alpha", 0.05))
    nan = math.nan
    claims = spec["claims"]
    comparisons = 0
    if "filtering" in claims:
        body = claims["filtering"]
        arms = [a for a in body["arms"] if a != body.get("baseline", "none")]
        comparisons += len(arms) * len(body["envs"])
    comparisons += 1 if "correlation" in claims else 0
    level = alpha / max(1, comparisons)
    plan: dict[str, dict[str, Any]] = {}
    for name, body in claims.items():
        runs = len(body["envs"]) * len(body["arms"]) * len(body["seeds"])
        plan[name] = {"runs": runs, "power": nan, "n": 0}
    if "filtering" in claims:
        n = len(claims["filtering"]["seeds"])
        plan["filtering"].update(n=n, power=_filtering_power(power, n, level))
    if "correlation" in claims:
        n = plan["correlation"]["runs"]
        plan["correlation"].update(n=n, power=_correlation_power(power, n, level))
    return plan


def _runs_for_power(fn: Callable[[int], float], least: int = 4) -> int | None:
    """The fewest ``n >= least`` with ``fn(n) >= 0.8`` (:data:`~baselines.studies.stats.
    POWER_TO_DECIDE`), by bisection (``fn`` rises with ``n``); None when :data:`MOST_PAIRS`
    does not reach it or ``fn`` is NaN there."""
    if not fn(MOST_PAIRS) >= st.POWER_TO_DECIDE:
        return None
    low, high = least - 1, MOST_PAIRS
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fn(mid) >= st.POWER_TO_DECIDE else (mid, high)
    return high


def floor_ceiling(
    runs: list[dict[str, Any]], floor: float, ceiling: float
) -> dict[str, dict[str, Any]]:
    """Where each arm's success ended (issue 44): per ``env/arm``, the median over seeds of
    the final validation success, and ``void``: a reason when that median is at or below
    ``floor`` or at or above ``ceiling`` (the gate's thresholds, the spec's ``gate`` section),
    else None. An arm that ends there had no room to move, so a comparison it feeds measures
    the bound, not the claim (55 of (c)'s 84 GRPO runs ended at or below 0.05).

    Example:
        >>> out = floor_ceiling([{"env": "a/B-v0", "arm": "x", "final_val_success": v}
        ...                      for v in (0.0, 0.03, 0.5)], 0.05, 0.95)
        >>> out["B-v0/x"]["median"], out["B-v0/x"]["void"]
        (0.03, 'B-v0/x: median final success 0.030 over 3 seeds, at or below its floor 0.05')
    """
    finals: dict[str, list[float]] = {}
    for r in runs:
        value = float(r["final_val_success"])
        if math.isfinite(value):
            finals.setdefault(f"{_short(r['env'])}/{r['arm']}", []).append(value)
    out: dict[str, dict[str, Any]] = {}
    for key, values in sorted(finals.items()):
        median = float(np.median(values))
        where = f"{key}: median final success {median:.3f} over {len(values)} seeds"
        void = (
            f"{where}, at or below its floor {floor:g}"
            if median <= floor
            else f"{where}, at or above its ceiling {ceiling:g}"
            if median >= ceiling
            else None
        )
        out[key] = {"median": median, "seeds": len(values), "void": void}
    return out


#: The claims that compare success between arms, so that an arm at its floor or ceiling voids
#: them. (a) compares the reasoning's MI, and its design removes the task signal on purpose.
SUCCESS_CLAIMS = ("filtering", "correlation")


def _bounds(
    claims: dict[str, Any], by_claim: dict[str, list[dict[str, Any]]], thresholds: dict[str, float]
) -> None:
    """Each success claim's ``arm_final_success`` (:func:`floor_ceiling` of its counted runs)
    and ``floor_ceiling``: the reasons of the arms that void it ((b): an arm or the baseline of
    a comparison; (c): any arm of the sweep); (b)'s comparisons each get their own ``void``."""
    floor = float(thresholds.get("success_floor", SUCCESS_FLOOR))
    ceiling = float(thresholds.get("success_ceiling", SUCCESS_CEILING))
    for name in SUCCESS_CLAIMS:
        if name not in claims:
            continue
        arms = floor_ceiling(by_claim.get(name, []), floor, ceiling)
        claims[name]["arm_final_success"] = arms
        reasons = [a["void"] for a in arms.values() if a["void"]]
        if name == "filtering":
            baseline = claims[name].get("baseline", "none")
            for key, d in claims[name]["differences"].items():
                env = key.split("/")[0]
                mine = [arms.get(f"{env}/{a}", {}).get("void") for a in (d["arm"], baseline)]
                d["void"] = "; ".join(v for v in mine if v) or None
            reasons = [d["void"] for d in claims[name]["differences"].values() if d["void"]]
            reasons = sorted(set(reasons))
        claims[name]["floor_ceiling"] = reasons


def _decide(claims: dict[str, Any], power: dict[str, float]) -> None:
    """Each claim's ``verdict``, ``reproduced``, its planned ``power`` and the power at the
    variance observed (issues 23 and 44); :func:`~baselines.studies.stats.verdict` decides.

    Significance: the one-sided p-values of every (b) comparison (each env and filtered arm)
    and of (c) are corrected together by Holm's method (:func:`~baselines.studies.stats.holm`)
    at ``power["alpha"]``. (b) is significant when some arm's adjusted p is within alpha on
    every env; (c) when its adjusted p is, its cluster-bootstrap interval lies above 0, and so
    does the interval of rho(MI-ZScore) itself (the paper's MI goes with success: a difference
    made by entropy alone, with MI at 0, is not the claim).

    Exclusion ("not reproduced"), at the variance the data showed, never at the spec's: (b)
    when, for every filtered arm, some env's differences exclude the paper's
    ``filtering_effect`` (:func:`~baselines.studies.stats.below_effect_paired` at alpha, with
    the observed sd); (c) when the 95 % seed-resampled interval of the difference lies wholly
    below the paper's ``correlation_mi - correlation_entropy`` (+0.53) or that of
    rho(MI-ZScore) below ``correlation_mi`` (+0.39). Otherwise a non-significant claim is
    ``inconclusive``, whatever its power.

    Void: a success claim whose ``floor_ceiling`` (:func:`_bounds`) names an arm is
    ``void: floor/ceiling``.

    Power, reported beside the verdict and never deciding, at the Bonferroni level alpha / m (a
    lower bound of Holm's): ``power`` as planned (the spec's ``power`` section, fixed before
    the runs) and ``power_at_observed`` with the spec's variance replaced by the observed one,
    with ``n_for_power_at_observed``, the pairs or runs that would reach 0.8 there. (b):
    :func:`~baselines.studies.stats.paired_t_power`, one-sided, at the spec's
    ``filtering_sd`` and at the observed paired sd (the best arm's smallest power over envs);
    (c): :func:`~baselines.studies.stats.dependent_correlations_power` for ``correlation_mi``,
    ``correlation_entropy`` and ``correlation_between`` (observed: the sweep's
    rho(MI-ZScore, entropy)) times :func:`~baselines.studies.stats.correlation_power` of
    ``correlation_mi`` one-sided (the product: exact if the two tests were independent; an
    upper bound all the same, since runs of one seed are not independent). (a) has no test
    statistic: power NaN, so it is ``reproduced`` or ``inconclusive``.
    """
    alpha = float(power.get("alpha", 0.05))
    keys: list[tuple[str, str]] = []
    pvalues: list[float] = []
    for name, d in claims.get("filtering", {}).get("differences", {}).items():
        keys.append(("filtering", name))
        pvalues.append(d["p_one_sided"])
    if "correlation" in claims:
        keys.append(("correlation", ""))
        pvalues.append(claims["correlation"]["p_one_sided"])
    adjusted = dict(zip(keys, st.holm(pvalues), strict=True))
    m = max(1, sum(1 for p in pvalues if math.isfinite(p)))
    level = alpha / m
    if "filtering" in claims:
        c = claims["filtering"]
        effect = float(power.get("filtering_effect", math.nan))
        arms: dict[str, dict[str, Any]] = {}
        for name, d in c["differences"].items():
            d["p_holm"] = adjusted[("filtering", name)]
            d["power"] = _filtering_power(power, d["n"], level)
            # The same power at the observed sd (the paper's effect, not the observed one)
            # and the pairs it would need for 0.8.
            observed = {**power, "filtering_sd": d.get("sd", math.nan)}
            d["power_at_observed_sd"] = _filtering_power(observed, d["n"], level)
            d["pairs_for_power_at_observed_sd"] = _pairs_for_power(observed, level)
            below = st.below_effect_paired(
                d.get("mean", math.nan), d.get("sd", math.nan), d["n"], effect, alpha
            )
            d["p_below_paper_effect"], d["excludes_paper_effect"] = below["p"], below["excluded"]
            arm = arms.setdefault(
                d["arm"],
                {"significant": True, "power": math.inf, "observed": math.inf, "need": 0,
                 "excluded": False},
            )  # fmt: skip
            arm["significant"] &= bool(math.isfinite(d["p_holm"]) and d["p_holm"] <= alpha)
            arm["power"] = min(arm["power"], d["power"])
            arm["observed"] = min(arm["observed"], d["power_at_observed_sd"])
            need = d["pairs_for_power_at_observed_sd"]
            arm["need"] = None if need is None or arm["need"] is None else max(arm["need"], need)
            arm["excluded"] |= d["excludes_paper_effect"]
        best = max(arms.values(), key=lambda a: a["power"], default=None)
        c["significant"] = any(a["significant"] for a in arms.values())
        c["excludes_paper_effect"] = bool(arms) and all(a["excluded"] for a in arms.values())
        c["power"] = best["power"] if best else math.nan
        c["power_at_observed"] = best["observed"] if best else math.nan
        c["n_for_power_at_observed"] = best["need"] if best else None
    if "correlation" in claims:
        c = claims["correlation"]
        c["p_holm"] = adjusted[("correlation", "")]
        low, high = c["ci_zscore_minus_entropy"]
        mi_low, mi_high = c["ci_ragen_mi_zscore"]
        c["significant"] = bool(
            math.isfinite(c["p_holm"])
            and c["p_holm"] <= alpha
            and math.isfinite(low)
            and low > 0
            and math.isfinite(mi_low)
            and mi_low > 0
        )
        rho_mi = float(power.get("correlation_mi", math.nan))
        paper = rho_mi - float(power.get("correlation_entropy", math.nan))
        c["paper_difference"] = paper
        c["excludes_paper_effect"] = bool(
            (math.isfinite(high) and math.isfinite(paper) and high < paper)
            or (math.isfinite(mi_high) and math.isfinite(rho_mi) and mi_high < rho_mi)
        )
        c["power"] = _correlation_power(power, c["runs"], level)
        between = c.get("spearman_zscore_entropy", math.nan)
        observed = {**power, "correlation_between": between}
        c["power_at_observed"] = (
            _correlation_power(observed, c["runs"], level) if math.isfinite(between) else math.nan
        )
        c["n_for_power_at_observed"] = (
            _runs_for_power(lambda n: _correlation_power(observed, n, level))
            if math.isfinite(between)
            else None
        )
    if "collapse" in claims:
        a = claims["collapse"]
        a["significant"] = bool(
            a.get("regularised_collapses")
            and a.get("control_holds")
            and a.get("bonus_not_inert", True)  # a report from before the states: no such check
        )
        a["excludes_paper_effect"] = False  # no test statistic: never "not reproduced"
        a["power"] = a["power_at_observed"] = math.nan
        a["n_for_power_at_observed"] = None
    for c in claims.values():
        void = "; ".join(c.get("floor_ceiling") or []) or None
        c["verdict"] = st.verdict(c["significant"], c["excludes_paper_effect"], void)
        c["reproduced"] = c["verdict"] == "reproduced"
        c["alpha"] = alpha


def _gate(spec: dict[str, Any], env_id: str, checkpoint: Path, out: Path) -> dict[str, Any]:
    """The warm-start gate of ``env_id`` (:func:`baselines.studies.gate.warm_start_gate`),
    measured once per results folder (``gate/<env>.json``; a resumed study reads it)."""
    path = out / "gate" / f"{_short(env_id)}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    overrides, oracle, thresholds = gate_settings(spec, {})
    result = warm_start_gate(
        checkpoint,
        env_id,
        overrides,
        out / "gate" / _short(env_id),
        oracle_episodes=oracle,
        thresholds=thresholds,
    )
    write_text_atomic(path, json.dumps(result, indent=1))
    return result


def _void_summary(run: dict[str, Any], reason: str) -> dict[str, Any]:
    """A run the gate kept from starting: reported with its reason, never counted."""
    return {
        **run,
        "void": reason,
        "provenance": None,
        "metrics_path": None,
        "wall_s": None,
        **_scores([]),
    }


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
    is removed, so that the folder holds what the report shows (with no run to draw, every
    picture is)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    groups = _groups(runs)
    if not groups:  # every run void: nothing to draw, and no older picture left behind
        for stale in ("entropy_mi.png", "correlation.png"):
            (folder / stale).unlink(missing_ok=True)
        return []
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
    last = f"mean of the last {LAST_EVALUATIONS} evaluations"
    axes[0].scatter([r["ragen_mi_zscore_last"] for r in runs], success, s=14)
    axes[0].set(title="RAGEN MI-ZScore vs success", xlabel=last, ylabel="val success")
    axes[1].scatter([r["entropy_last"] for r in runs], success, s=14, color="tab:orange")
    axes[1].set(title="entropy vs success", xlabel=f"nats, {last}")
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


def _provenance_lines(
    runs: list[dict[str, Any]], stale: list[dict[str, Any]], as_of: str = "this code"
) -> list[str]:
    """The report's provenance section: runs per commit, the runs shared between claims, then
    every stale run with its reason, stale "as of" the code that judged it (``as_of``:
    :func:`_describe_code` of the report's provenance)."""
    commits: dict[str, int] = {}
    for r in runs:
        name = "void (never ran)" if r.get("void") else _describe_code(r["provenance"])
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
            f"**{len(stale)} stale runs**"
            f"{'' if as_of == 'not recorded' else f' as of {as_of}'}: the trainer, SFT, sampler or env code "
            "they ran has changed since (or was not recorded), so they may not be what that code "
            "gives; later commits may have changed more. "
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


#: What the report says of results made before spec fingerprints were recorded.
NO_FINGERPRINT = "not recorded (made before fingerprints)"


def _count(n: int | None) -> str:
    return "n/a" if n is None else str(n)


def _bounds_lines(claims: dict[str, Any]) -> list[str]:
    """The report's floor/ceiling section: each success claim's arms, their median final
    success and whether it voids the claim."""
    rows = [
        (name, key, arm)
        for name, c in claims.items()
        for key, arm in (c.get("arm_final_success") or {}).items()
    ]
    if not rows:
        return []
    return [
        "",
        "## Floors and ceilings over the run",
        "",
        "An arm whose median final validation success (over its seeds) is at or below the "
        "gate's floor, or at or above its ceiling, had no room to move at the end: the "
        "comparison it feeds is void ((a) compares MI, not success, and is not checked).",
        "",
        "| claim | env/arm | seeds | median final success | voids |",
        "| --- | --- | --- | --- | --- |",
        *[
            f"| {name} | {key} | {arm['seeds']} | {arm['median']:.3f} | "
            f"{'yes' if arm['void'] else ''} |"
            for name, key, arm in rows
        ],
    ]


def _alpha(claims: dict[str, Any]) -> float:
    return next((c["alpha"] for c in claims.values()), 0.05)


def _cost(runs: list[dict[str, Any]]) -> str:
    """The runs' own wall times summed, in CPU-hours (each run is one single-threaded process,
    so its wall time is about its CPU time), over the runs that recorded one: ``""`` when none
    did (made before records)."""
    timed = [r["wall_s"] for r in runs if r.get("wall_s") is not None and not r.get("same_run_as")]
    if not timed:
        return ""
    return (
        f"; the runs' own wall time {sum(timed) / 3600:.2f} CPU-hours over {len(timed)} runs "
        "(one single-threaded process each, warm start and gate not counted)"
    )


def _runs_of(states: list[str]) -> str:
    """A state sequence with repeats folded: ``dependent x3, undecided, collapsed x2``."""
    parts: list[list[Any]] = []
    for state in states:
        if parts and parts[-1][0] == state:
            parts[-1][1] += 1
        else:
            parts.append([state, 1])
    return ", ".join(f"{s} x{n}" if n > 1 else s for s, n in parts) or "none logged"


def _collapse_state_lines(a: dict[str, Any]) -> list[str]:
    """The report's (a) section under the detector-state rule (:func:`_claim_collapse`)."""
    lines = [
        "",
        "## (a) per seed, by the detector's states",
        "",
        "Reproduced only when every seed passes all three checks: the regularised run's last "
        "MI-history state is `collapsed` (and its last state neither `format_collapsed` nor "
        "`degenerate`); its control never `collapsed` or `degenerate` and last `dependent`; "
        f"and the bonus not inert (the regularised run's entropy over its last "
        f"{LAST_EVALUATIONS} MI-history evaluations above its control's).",
        "",
        "| seed | regularised collapses | control holds | bonus not inert |",
        "| --- | --- | --- | --- |",
        *(
            f"| {x['seed']} | {x['regularised_collapses']} | {x['control_holds']} | "
            f"{x['bonus_not_inert']} |"
            for x in a["per_seed"]
        ),
        "",
        "## (a) per run",
        "",
        f"MI / ceiling and entropy: means over the last {LAST_EVALUATIONS} evaluations of the "
        "MI history (evaluations with enough valid reasonings to score); valid rate over the last "
        f"{LAST_EVALUATIONS} evaluations; success: the final validation.",
        "",
        "| env | arm | seed | states | MI-history evaluations | MI / ceiling | entropy | "
        "valid rate | success |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in a["per_run"]:
        lines.append(
            f"| {_short(r['env'])} | {r['arm']} | {r['seed']} | {_runs_of(r['states'])} | "
            f"{r['mi_history_evaluations']} | {r['mi_fraction_mi_history_last']:.3f} | "
            f"{r['entropy_mi_history_last']:.3f} | {r.get('valid_rate_last', math.nan):.2f} | "
            f"{r.get('final_val_success', math.nan):.3f} |"
        )
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
        f"{sum(r['run_s'] for r in results['runs']) / 60:.0f} min" + _cost(results["runs"]) + ".  ",
        f"Code of these statistics: {_describe_code(results['provenance'])}; stale runs as "
        f"of it (made by older code than it): {len(stale)} of {len(results['runs'])}.  ",
        *(
            [
                f"Verdicts re-decided from the committed data, nothing re-run: "
                f"`{results['regenerated']['command']}` at "
                f"{_describe_code(results['regenerated']['provenance'])}.  "
            ]
            if results.get("regenerated")
            else []
        ),
        f"Spec fingerprint: {results.get('spec_fingerprint') or NO_FINGERPRINT}.  ",
        f"Data: `{rel}/results.json` (every run's config, seed, code and per-step series).",
        "",
        "Verdicts (issue 44): *reproduced* when the claim's test is significant in the paper's "
        f"direction (Holm-corrected over the claims' comparisons, alpha {_alpha(c)}); *not "
        "reproduced* only when the data exclude the paper's effect at the variance they showed "
        "((b): the one-sided t test of a gain at least the paper's, at alpha, with the observed "
        "paired sd; (c): the 95% seed-resampled interval of the difference, or of "
        "rho(MI-ZScore), wholly below the paper's); *void: floor/ceiling* when an arm that "
        "(b) or (c) compares ended with a median final success at or below the floor or at or "
        "above the ceiling of the gate; else *inconclusive*. Power never decides: it is shown "
        "for the paper's effect as planned (the spec's `power` section, fixed before the runs) "
        "and at the variance observed, with the pairs ((b)) or runs ((c)) that would reach 0.8 "
        "there.",
        "",
        "Power is that of the runs counted; *as designed*, that of every planned run (`--plan`).",
        "",
        "| claim | verdict | power: planned | at the observed variance | n for 0.8 at it | "
        "as designed | stale runs | void runs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *[
            f"| {titles[k]} | {v['verdict']} | {v['power']:.2f} | "
            f"{v.get('power_at_observed', math.nan):.2f} | "
            f"{_count(v.get('n_for_power_at_observed'))} | "
            f"{results.get('design_power', {}).get(k, math.nan):.2f} | "
            f"{sum(1 for r in stale if r['claim'] == k)} | "
            f"{sum(1 for r in results['runs'] if r['claim'] == k and r['void'])} |"
            for k, v in c.items()
        ],
        *_bounds_lines(c),
        "",
        "## Warm-start gate",
        "",
        "An environment's RL runs start only when the oracle's reasoning keeps at least half its "
        "MI ceiling under the warm start and the warm start's validation success is off its "
        "floor and ceiling (`baselines/studies/gate.py`); else they are void.",
        "",
        *(
            [
                "| env | passed | oracle MI / ceiling (nats) | validation success | reasons |",
                "| --- | --- | --- | --- | --- |",
            ]
            if results["gate"]
            else ["No gate recorded: these runs were made before the warm-start gate."]
        ),
        *[
            f"| {_short(env)} | {g['passed']} | {g['mi']:.3f} / {g['mi_ceiling']:.3f} | "
            f"{g['success']:.3f} ({g['val_episodes']} episodes) | {'; '.join(g['reasons'])} |"
            for env, g in results["gate"].items()
        ],
    ]
    if "filtering" in c:
        lines += [
            "",
            "## (b) paired differences in final validation success (arm minus baseline)",
            "",
            f"`p (gain >= paper)`: the one-sided t test that the gain is at least the paper's "
            f"{float(results['power'].get('filtering_effect', math.nan)):g} (small: excluded).",
            "",
            "| env/arm | n | mean | 95% low | 95% high | p (one-sided) | p (Holm) | "
            "p (gain >= paper) | power | MI arm | MI baseline | groups kept: arm | "
            "groups kept: baseline | void |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for key, s in c["filtering"]["differences"].items():
            lines.append(
                f"| {key} | {s['n']} | {s['mean']:.3f} | {s['low']:.3f} | {s['high']:.3f} | "
                f"{s['p_one_sided']:.3f} | {s['p_holm']:.3f} | "
                f"{s.get('p_below_paper_effect', math.nan):.3f} | {s['power']:.2f} | "
                f"{s['mi_arm']:.3f} | {s['mi_baseline']:.3f} | "
                f"{s.get('kept_arm', math.nan):.2f} | {s.get('kept_baseline', math.nan):.2f} | "
                f"{s.get('void') or ''} |"
            )
        assumed = float(results["power"].get("filtering_sd", math.nan))
        if c["filtering"]["differences"]:
            lines += [
                "",
                f"Power for the paper's gain at the paired sd the spec assumed before the runs "
                f"({assumed:g}) and at the paired sd observed, with the pairs that sd would need "
                "for 0.8 (neither decides):",
                "",
                "| env/arm | paired sd: assumed | observed | power at the observed sd | "
                "pairs for 0.8 at the observed sd |",
                "| --- | --- | --- | --- | --- |",
            ]
        for key, s in c["filtering"]["differences"].items():
            need = s.get("pairs_for_power_at_observed_sd")
            lines.append(
                f"| {key} | {assumed:g} | {s.get('sd', math.nan):.3f} | "
                f"{s.get('power_at_observed_sd', math.nan):.2f} | "
                f"{'n/a' if need is None else need} |"
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
            f"Each score is a run's mean over its last {LAST_EVALUATIONS} evaluations.",
            "",
            f"| score | sweep ({cc['runs']} runs): rho | 95% bootstrap | "
            f"pooled over all {pooled['runs']} runs: rho | 95% bootstrap |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, key, interval in (
            ("RAGEN MI-ZScore (the paper's)", "spearman_ragen_mi_zscore", "ci_ragen_mi_zscore"),
            ("MI / ceiling", "spearman_mi_fraction", "ci_mi_fraction"),
            ("entropy", "spearman_entropy", "ci_entropy"),
            ("rho(MI-ZScore, entropy)", "spearman_zscore_entropy", None),
            (
                "rho(MI-ZScore) - rho(entropy) (decides)",
                "zscore_minus_entropy",
                "ci_zscore_minus_entropy",
            ),
            (
                "rho(MI / ceiling) - rho(entropy)",
                "fraction_minus_entropy",
                "ci_fraction_minus_entropy",
            ),
        ):
            lines.append(
                f"| {name} | {cc[key]:.3f} | {ci(cc[interval]) if interval else ''} | "
                f"{pooled[key]:.3f} | {ci(pooled[interval]) if interval else ''} |"
            )
        lines += [
            "",
            f"Signed Meng-Rosenthal-Rubin test of rho(MI-ZScore) > rho(entropy) on the sweep: z "
            f"{cc['mrr_z']:.3f}, one-sided p {cc['p_one_sided']:.3f}, Holm {cc['p_holm']:.3f}; "
            f"intervals resample whole seeds ({cc['seeds']} seeds). Significant when that p is "
            "within alpha and the intervals of the difference and of rho(MI-ZScore) lie above "
            f"0. Runs left out (no final validation or no scored evaluation): "
            f"{cc.get('dropped', 0)}. The paper's difference is "
            f"{cc.get('paper_difference', math.nan):+.2f} (rho(MI-ZScore) "
            f"{float(results['power'].get('correlation_mi', math.nan)):+.2f}); excluded by "
            f"the intervals: {cc.get('excludes_paper_effect')}. Power at the observed "
            f"rho(MI-ZScore, entropy) {cc['spearman_zscore_entropy']:.3f} instead of the "
            f"spec's {float(results['power'].get('correlation_between', math.nan)):.2f}: "
            f"{cc.get('power_at_observed', math.nan):.2f}.",
        ]
    if "collapse" in c and c["collapse"].get("rule"):
        lines += _collapse_state_lines(c["collapse"])
    elif "collapse" in c:  # a report decided before the states were kept
        lines += [
            "",
            "## (a) per run",
            "",
            f"MI / ceiling, valid-reasoning rate and entropy: means over the last "
            f"{LAST_EVALUATIONS} evaluations; success: the final validation.",
            "",
            "| env | arm | seed | near-chance evaluations | entropy held | flag | final MI | "
            "ceiling | MI / ceiling | valid rate | entropy | success |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in c["collapse"]["per_run"]:
            lines.append(
                f"| {_short(r['env'])} | {r['arm']} | {r['seed']} | "
                f"{r['near_chance_evaluations']} | {r['entropy_held']} | {r['flag_fired']} | "
                f"{r['final_mi']:.3f} | {r['mi_ceiling']:.3f} | "
                f"{r.get('mi_fraction_last', math.nan):.3f} | "
                f"{r.get('valid_rate_last', math.nan):.2f} | "
                f"{r.get('entropy_last', math.nan):.3f} | "
                f"{r.get('final_val_success', math.nan):.3f} |"
            )
    lines += _provenance_lines(results["runs"], stale, _describe_code(results["provenance"]))
    lines += ["", *[f"![{p}]({rel}/{p})" for p in plots], ""]
    doc.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(doc, "\n".join(lines))


def run_study(
    spec: dict[str, Any],
    out: Path,
    doc: Path,
    command: str,
    jobs: int = 1,
    spec_path: str | Path = SPEC,
    stop_after_s: float | None = None,
) -> dict[str, Any]:
    """Warm starts, every run (resumable; ``jobs`` runs at once), statistics; writes
    results.json and ``doc``. ``out`` must be this spec's folder or new (:func:`claim_folder`).

    Each finished run's record (:func:`run_record`) is written beside ``doc``
    (``<doc's folder>/<doc's stem>/runs/<name>.json``) as it finishes: a run with a record is
    never run again, also on a fresh machine whose ``runs/`` is empty, so a study too long for
    one sitting is made in pieces, each piece's records committed as it ends. With
    ``stop_after_s``, no run starts after that many seconds (those started finish): when runs
    remain, nothing else is written and the result is ``{"partial": True, ...}`` with the counts.

    Raises:
        ValueError: ``out`` was made by another spec, or a committed record by another spec or
            from another warm start (nothing is run or written).
        RuntimeError: a run failed (its log is named); runs already started finish, and no
            further run starts.
    """
    t0 = time.perf_counter()
    fingerprint = claim_folder(out, spec, spec_path)
    runs = _runs(spec)
    checkpoints = {env: _warm_start(spec, env, out) for env in sorted({r["env"] for r in runs})}
    digests = {env: checkpoint_digest(checkpoint) for env, checkpoint in checkpoints.items()}
    gates = {env: _gate(spec, env, checkpoint, out) for env, checkpoint in checkpoints.items()}
    names = [f"{r['claim']}/{_short(r['env'])}/{r['arm']}/seed{r['seed']}" for r in runs]
    settings = [_train_overrides(run, checkpoints[run["env"]], spec) for run in runs]
    # A configuration two claims name runs once, in the folder of the first run that names it.
    made_by = shared_runs(settings)
    folders = [out / "runs" / names[j] for j in made_by]
    records_dir = doc.parent / doc.stem / RECORDS
    paths = [records_dir / f"{names[j]}.json" for j in made_by]
    records = {
        i: read_record(paths[i], fingerprint, digests[runs[i]["env"]])
        for i in range(len(runs))
        if made_by[i] == i and gates[runs[i]["env"]]["passed"]
    }
    todo = [i for i, record in records.items() if record is None]

    def make(i: int) -> bool:
        """Run ``i`` and write its record; False when the time was up before it started."""
        if stop_after_s is not None and time.perf_counter() - t0 >= stop_after_s:
            return False
        _execute(settings[i], folders[i])
        record = run_record(runs[i], folders[i], fingerprint, checkpoints[runs[i]["env"]])
        write_text_atomic(paths[i], json.dumps(record, indent=1, default=float))
        records[i] = record
        return True

    # Each run is its own single-threaded, seeded process: running ``jobs`` at once changes only
    # the wall time, never a result.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(make, i) for i in todo]
        try:
            made = sum(bool(future.result()) for future in futures)
        except BaseException:  # a failed run or Ctrl-C: start no further runs
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    if made < len(todo):
        return {
            "partial": True,
            "made": made,
            "remaining": len(todo) - made,
            "recorded": sum(record is not None for record in records.values()),
            "runs": len(records),
            "records": str(records_dir),
        }
    summaries = [
        dict(records[j])
        if gates[run["env"]]["passed"]
        else _void_summary(run, "warm-start gate: " + "; ".join(gates[run["env"]]["reasons"]))
        for run, j in zip(runs, made_by, strict=True)
    ]
    for i, (summary, j) in enumerate(zip(summaries, made_by, strict=True)):
        summary.update({k: runs[i][k] for k in ("claim", "env", "arm", "seed", "overrides")})
        summary["same_run_as"] = None if j == i else names[j]  # shared, and said so
    for s in summaries:  # a void run: the warm start's folder holds its provenance
        if s.get("void"):
            s["warm_start_provenance"] = _read_provenance(checkpoints[s["env"]].parent)
    now = provenance.describe()
    counted = [s for s in summaries if not s.get("void")]
    mark_stale(counted, provenance.source_root())
    for s in summaries:
        s.setdefault("void", None)
        s.setdefault("stale", None)
    by_claim = {name: [s for s in counted if s["claim"] == name] for name in spec["claims"]}
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
        "wall_s",
        "provenance",
        "warm_start_provenance",
        "stale",
        "void",
        "series",
    )
    claims: dict[str, Any] = {}
    if "collapse" in by_claim:
        claims["collapse"] = _claim_collapse(by_claim["collapse"])
    if "filtering" in by_claim:
        baseline = spec["claims"]["filtering"].get("baseline", "none")
        claims["filtering"] = _claim_filtering(by_claim["filtering"], baseline)
    if "correlation" in by_claim:
        once = [s for s in counted if s["same_run_as"] is None]  # a shared run counts once
        claims["correlation"] = _claim_correlation(by_claim["correlation"], once)
    _bounds(claims, by_claim, gate_settings(spec, {})[2])
    _decide(claims, dict(spec.get("power") or {}))
    results = {
        "command": command,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "model": spec["model"],
        "wall_s": time.perf_counter() - t0,
        # The code that made this report and against which `stale` was judged (each run's own
        # is in the run).
        "provenance": now,
        "spec_fingerprint": fingerprint,
        "runs": [{k: s[k] for k in keep} for s in summaries],
        "gate": gates,
        "power": spec.get("power") or {},
        "design_power": {k: v["power"] for k, v in design_power(spec).items()},
        "claims": claims,
    }
    text = json.dumps(results, indent=1, default=float)
    write_text_atomic(out / "results.json", text)
    plot_dir = doc.parent / (doc.stem)
    plots = _plots(counted, plot_dir, scatter="correlation" in claims)
    write_text_atomic(plot_dir / "results.json", text)  # committed beside the report
    _write_doc(doc, results, plots, plot_dir)
    return results


#: The decisions :func:`_decide` and :func:`_bounds` add to a claim; :func:`regenerate` removes
#: them (also those an older rule wrote) and decides again.
DECISION_KEYS = (
    "p_holm",
    "significant",
    "power",
    "power_at_observed",
    "n_for_power_at_observed",
    "excludes_paper_effect",
    "paper_difference",
    "arm_final_success",
    "floor_ceiling",
    "verdict",
    "reproduced",
    "alpha",
)


def regenerate(spec: dict[str, Any], doc: Path, command: str) -> dict[str, Any]:
    """Re-decide a committed study from its data, without running anything (``--report-only``).

    Reads ``results.json`` beside ``doc`` (``docs/reproduction-filtering/results.json`` for
    ``docs/reproduction-filtering.md``): its claims' statistics and its runs' final success are
    kept as computed; the decisions (:data:`DECISION_KEYS`) are removed and made again by this
    code's rules (:func:`_bounds`, :func:`_decide`) with the spec's ``power`` and ``gate``
    sections; then ``results.json`` and ``doc`` are rewritten, the plots left as they are.
    Staleness stays as judged when the statistics were computed, "as of" that report's commit
    (``provenance``); this regeneration's own code is recorded as ``regenerated``. Results
    made before a key existed read as missing (no power section, provenance or gate).

    Raises:
        FileNotFoundError: no committed ``results.json`` beside ``doc``.
        ValueError: it records a spec fingerprint other than ``spec``'s.
    """
    plot_dir = doc.parent / doc.stem
    path = plot_dir / "results.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"--report-only: no {path}; it re-decides a study from the results.json committed "
            "beside its report (give that report as --doc)"
        )
    results = json.loads(path.read_text(encoding="utf-8"))
    recorded = results.get("spec_fingerprint")
    mine = spec_fingerprint(spec)
    if recorded is not None and recorded != mine:
        raise ValueError(
            f"--report-only: {path} was made by a spec with fingerprint {recorded}, not this "
            f"spec's {mine}: give the spec that made it (--spec)"
        )
    power = dict(spec.get("power") or results.get("power") or {})
    results["power"] = power
    for run in results["runs"]:
        if "stale" not in run:  # made before staleness was judged: its code is unknown
            run["stale"] = provenance.stale_reason(run.get("provenance"), [], None)
        for key in ("provenance", "warm_start_provenance", "void", "same_run_as"):
            run.setdefault(key, None)
    results.setdefault("provenance", None)
    results.setdefault("gate", {})
    results.setdefault("design_power", {k: v["power"] for k, v in design_power(spec).items()})
    claims = results["claims"]
    for name, c in claims.items():
        for key in DECISION_KEYS:
            c.pop(key, None)
        for d in c.get("differences", {}).values():
            for key in ("void", "p_below_paper_effect", "excludes_paper_effect"):
                d.pop(key, None)
        if name == "collapse":
            c.setdefault("control_holds", False)
    counted = [r for r in results["runs"] if not r.get("void")]
    by_claim = {name: [r for r in counted if r["claim"] == name] for name in claims}
    _bounds(claims, by_claim, gate_settings(spec, {})[2])
    _decide(claims, power)
    now = provenance.describe()
    # The code that decides is the study's own: other uncommitted work in the checkout is not
    # named (it does not touch a committed statistic).
    dirty = [p for p in now.get("dirty_paths") or [] if p.startswith("baselines/studies/")]
    now = {"commit": now.get("commit"), "dirty": bool(dirty), "dirty_paths": dirty}
    results["regenerated"] = {"command": command, "provenance": now}
    text = json.dumps(results, indent=1, default=float)
    write_text_atomic(path, text)
    plots = sorted(p.name for p in plot_dir.glob("*.png"))
    _write_doc(doc, results, plots, plot_dir)
    return results


def spec_fingerprint(spec: dict[str, Any]) -> str:
    """The sha256 (first 16 hex digits) of a loaded spec's canonical content: its JSON with
    sorted keys, so comments, key order and spelling of the YAML do not count, and any setting
    does (a ``--quick`` spec is another spec).

    Example:
        >>> spec_fingerprint({"model": "tiny", "claims": {}}) == spec_fingerprint(
        ...     {"claims": {}, "model": "tiny"})
        True
    """
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: The file in a results folder that names the spec which made it.
SPEC_FILE = "spec.json"


def claim_folder(out: Path, spec: dict[str, Any], spec_path: str | Path) -> str:
    """Make ``out`` this spec's results folder, or refuse one another spec made (issue 44: a
    SmolLM2 spec silently took a tiny model's warm start and cached gate from another spec's
    folder). Writes ``out/spec.json`` (fingerprint, spec path, spec) into a new or empty folder;
    a folder that holds it with the same fingerprint is resumed.

    Returns:
        The fingerprint (:func:`spec_fingerprint`).

    Raises:
        ValueError: ``out`` holds another spec's fingerprint, or holds files but no
            ``spec.json`` (made before fingerprints, or by hand): the message names the fix.
    """
    mine = spec_fingerprint(spec)
    record = out / SPEC_FILE
    fix = (
        f"give a new --out (this spec's default: {default_paths(spec_path, False)[0]}) or "
        f"delete {out} to start over"
    )
    if record.is_file():
        theirs = json.loads(record.read_text(encoding="utf-8"))
        if theirs.get("fingerprint") != mine:
            raise ValueError(
                f"{out} was made by another spec ({theirs.get('spec_path')}, fingerprint "
                f"{theirs.get('fingerprint')}); this spec ({spec_path}) has fingerprint {mine}. "
                f"Its warm starts, gate and runs are not this spec's: {fix}"
            )
        return mine
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(
            f"{out} holds files but no {SPEC_FILE}, so which spec made it is unknown (made "
            f"before fingerprints, or by hand); its warm starts and gate may be another spec's: "
            f"{fix}"
        )
    out.mkdir(parents=True, exist_ok=True)
    body = {"fingerprint": mine, "spec_path": str(spec_path), "spec": spec}
    write_text_atomic(record, json.dumps(body, indent=1, default=str))
    return mine


def default_paths(spec_path: str | Path, quick: bool) -> tuple[Path, Path]:
    """``(--out, --doc)`` by the spec's name: ``ragen2.yaml`` gives ``runs/ragen2`` and
    ``docs/reproduction.md``; ``ragen2_filtering.yaml`` ``runs/ragen2-filtering`` and
    ``docs/reproduction-filtering.md``; another name ``runs/<name>`` and
    ``docs/reproduction-<name>.md``. With ``quick``, ``runs/<...>-quick`` and the report in it
    (a quick run writes into ``docs/`` only when ``--doc`` names a file there).

    Example:
        >>> [str(p) for p in default_paths("baselines/studies/ragen2_filtering.yaml", False)]
        ['runs/ragen2-filtering', 'docs/reproduction-filtering.md']
        >>> [str(p) for p in default_paths("ragen2.yaml", True)]
        ['runs/ragen2-quick', 'runs/ragen2-quick/reproduction.md']
    """
    name = Path(spec_path).stem.replace("_", "-")
    suffix = name[len("ragen2") :] if name.startswith("ragen2") else f"-{name}"
    if quick:
        out = Path("runs") / f"{name}-quick"
        return out, out / "reproduction.md"
    return Path("runs") / name, Path("docs") / f"reproduction{suffix}.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.studies.ragen2", description=__doc__)
    parser.add_argument("--spec", default=str(SPEC), help="study YAML")
    parser.add_argument("--quick", action="store_true", help="the reduced study (tests)")
    parser.add_argument(
        "--out",
        default=None,
        help="results folder (default by the spec's name: runs/ragen2-filtering for "
        "ragen2_filtering.yaml; with --quick, runs/<name>-quick); a folder another spec made "
        "is refused",
    )
    parser.add_argument(
        "--doc",
        default=None,
        help="report to write (default by the spec's name: docs/reproduction-filtering.md for "
        "ragen2_filtering.yaml, docs/reproduction.md for ragen2.yaml; with --quick, "
        "reproduction.md in the results folder: a quick run writes into docs/ only when this "
        "names a file there)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: re-decide the verdicts of the results.json committed beside --doc "
        "by this code's rules and rewrite it and the report (regenerate)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at once (each is one single-threaded process)"
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="MINUTES",
        help="start no run after this many minutes (those started finish), for a study made in "
        "pieces: each finished run's record is written beside --doc (commit them); when runs "
        "remain, exit 3 without a report, and the same command later (on any machine, from the "
        "committed records) goes on",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print each claim's planned runs and its power for the paper's effect (the spec's "
        "power section), then exit without running anything",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    if args.stop_after is not None and not (
        math.isfinite(args.stop_after) and args.stop_after >= 0
    ):
        parser.error(f"--stop-after must be a number of minutes >= 0; got {args.stop_after}")
    if args.stop_after is not None and (args.report_only or args.plan):
        parser.error("--stop-after applies to running a study, not to --report-only or --plan")
    try:
        spec = load_study(args.spec, quick=args.quick)
    except FileNotFoundError:
        parser.error(f"--spec: no such file {args.spec!r}")
    except (ValueError, yaml.YAMLError) as err:
        parser.error(f"--spec {args.spec}: {err}")
    if args.plan:
        runs = _runs(spec)
        settings = [_train_overrides(r, Path("warm-start"), spec) for r in runs]
        made_by = shared_runs(settings)
        for name, planned in design_power(spec).items():
            distinct = sum(1 for i, r in enumerate(runs) if r["claim"] == name and made_by[i] == i)
            power = (
                f"power {planned['power']:.2f} for the paper's effect (n = {planned['n']})"
                if math.isfinite(planned["power"])
                else "no test statistic, so no power: reproduced or inconclusive"
            )
            shared = planned["runs"] - distinct
            count = f"{planned['runs']} runs" + (
                f" ({shared} shared with another claim's identical run)" if shared else ""
            )
            print(f"{name}: {count}; {power}")
        return 0
    default_out, default_doc = default_paths(args.spec, args.quick)
    out = Path(args.out) if args.out else default_out
    if args.doc:
        doc = Path(args.doc)
    else:
        doc = out / "reproduction.md" if args.quick and args.out else default_doc
    command = "python -m baselines.studies.ragen2 " + " ".join(argv or sys.argv[1:])
    try:
        if args.report_only:
            results = regenerate(spec, doc, command.strip())
        else:
            results = run_study(
                spec,
                out,
                doc,
                command.strip(),
                jobs=args.jobs,
                spec_path=args.spec,
                stop_after_s=None if args.stop_after is None else 60.0 * args.stop_after,
            )
    except (FileNotFoundError, ValueError) as err:
        parser.error(str(err))
    if results.get("partial"):
        print(
            f"stopped after {args.stop_after:g} min: {results['made']} runs made now, "
            f"{results['recorded']} of {results['runs']} recorded in {results['records']}, "
            f"{results['remaining']} remain; commit the records and run the same command again "
            "to go on (no report is written until every run is recorded)"
        )
        return 3
    for name, claim in results["claims"].items():
        print(
            f"{name}: {claim['verdict']} (power for the paper's effect {claim['power']:.2f} "
            f"planned, {claim.get('power_at_observed', math.nan):.2f} at the observed "
            f"variance; reproduced={claim['reproduced']})"
        )
    if args.report_only:
        print(f"re-decided {doc.parent / doc.stem / 'results.json'} and wrote {doc}")
        return 0
    stale = sum(1 for r in results["runs"] if r["stale"])
    if stale:
        print(f"{stale} of {len(results['runs'])} runs are stale (made by older code): see {doc}")
    print(f"wrote {out / 'results.json'} and {doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
