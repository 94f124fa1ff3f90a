"""The warm-start gate of the RAGEN-2 study: RL runs start only from a warm start that can show
what the claims are about (issue 23, item 4).

A claim about template collapse needs a policy whose reasoning depends on its input to begin
with, and a claim about success needs success that can move both ways. The earlier study ran
24 of 66 runs from a FrozenLake warm start whose reasoning had MI 0.000 with the map and whose
success sat at its floor; nothing stopped them and they were counted. The gate measures, for each
environment's warm start, before any RL run of that environment starts:

1. **input dependence**: the MI of the *oracle's* reasoning under the warm-started model, scored
   as the trainer's diagnostics score sampled reasoning (:func:`baselines.collapse.mi_pairs`,
   :func:`~baselines.collapse.score_matrix`, :func:`~baselines.collapse.mi_metrics`), on
   ``oracle_episodes`` oracle chats from :data:`GATE_SEED` (apart from the SFT data, the RL seeds
   and the validation seeds), against its ceiling ``mi_upper_bound`` (the entropy of the prompt
   mixture). It must reach :data:`MI_FRACTION` of the ceiling;
2. **room to move**: the warm start's success on the study's validation seeds at its
   validation temperature (``rollout.val_temperature``: greedy by default, 0.5 in the RAGEN-
   faithful specs; the ``val_initial/success_rate`` every run would log at step 0, played by the
   ``hf:`` agent on the trainer's prompts), which must lie strictly between
   :data:`SUCCESS_FLOOR` and :data:`SUCCESS_CEILING`.

An environment that fails either check gets no RL runs: its runs are reported ``void`` with the
reason and never enter a claim's statistics.

Any checkpoint can be measured on its own, with the study's settings given as trainer
overrides::

    python -m baselines.studies.gate runs/sft/frozen_lake/checkpoint --env agentgym/FrozenLake-v0 \
        rollout.val_episodes=32 rollout.val_temperature=0.5 rollout.max_new_tokens=96

or with a study spec's own settings (its ``gate`` section and its ``common`` trainer overrides,
as the study measures its warm starts; flags and overrides given after it win)::

    python -m baselines.studies.gate runs/ragen2-correlation/sft/Bandit-v0/checkpoint \
        --env agentgym/Bandit-v0 --spec baselines/studies/ragen2_correlation.yaml
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import yaml

from agentgym.fileio import write_text_atomic
from baselines.studies.spec import (
    MI_FRACTION,
    SUCCESS_CEILING,
    SUCCESS_FLOOR,
    gate_settings,
    load_study,
)

__all__ = [
    "GATE_SEED",
    "MI_FRACTION",
    "SUCCESS_CEILING",
    "SUCCESS_FLOOR",
    "gate_reasons",
    "gate_settings",
    "main",
    "oracle_mi",
    "warm_start_gate",
]

#: First reset seed of the oracle chats the gate scores (SFT data starts at 2,000,000, the
#: study's validation seeds at 10,000,000, its training seeds below 10,000,000 / 2).
GATE_SEED = 3_000_000


def gate_reasons(
    mi: float,
    ceiling: float,
    success: float,
    *,
    mi_fraction: float = MI_FRACTION,
    success_floor: float = SUCCESS_FLOOR,
    success_ceiling: float = SUCCESS_CEILING,
) -> list[str]:
    """Why a warm start fails the gate (empty: it passes).

    Args:
        mi: the oracle reasoning's MI estimate under the warm start (nats).
        ceiling: its ceiling, the entropy of the prompt mixture (nats, > 0).
        success: the warm start's validation success rate in [0, 1].
        mi_fraction, success_floor, success_ceiling: the thresholds (a study spec's ``gate``
            section may set them; the defaults are this module's constants).

    Example:
        >>> gate_reasons(1.2, 2.0, 0.4)
        []
        >>> gate_reasons(0.0, 2.0, 1.0)  # doctest: +NORMALIZE_WHITESPACE
        ['the oracle reasoning MI is 0.000 nats, 0.00 of its ceiling 2.000 (needs >= 0.5)',
         'validation success 1.000 is at its ceiling (needs < 0.95)']
    """
    reasons = []
    share = mi / ceiling if ceiling > 0 else math.nan
    if not (math.isfinite(share) and share >= mi_fraction):
        reasons.append(
            f"the oracle reasoning MI is {mi:.3f} nats, {share:.2f} of its ceiling "
            f"{ceiling:.3f} (needs >= {mi_fraction})"
        )
    if not math.isfinite(success) or success <= success_floor:
        reasons.append(
            f"validation success {success:.3f} is at its floor (needs > {success_floor})"
        )
    elif success >= success_ceiling:
        reasons.append(
            f"validation success {success:.3f} is at its ceiling (needs < {success_ceiling})"
        )
    return reasons


def oracle_mi(
    model: Any,
    tokenizer: Any,
    env_id: str,
    env_kwargs: dict[str, Any] | None,
    seeds: range,
    think_prefix: bool = True,
) -> dict[str, float]:
    """:func:`baselines.collapse.mi_metrics` of the oracle's first-turn reasoning under
    ``model``: each oracle chat's generation prompt (the trainer's rendering) against the text of
    its first ``<think>`` block, every reasoning scored under every distinct prompt.

    Returns:
        ``mi_metrics``' dict (``mi_estimate``, ``mi_upper_bound``, ``retrieval_accuracy``, ...)
        plus ``num_episodes``.

    Raises:
        ValueError: fewer than 2 distinct prompts among the chats.
    """
    import torch

    from agentgym.sft import oracle_episodes
    from baselines.collapse import mi_metrics, mi_pairs, score_matrix
    from baselines.llm.prompts import encode_content, prompt_token_ids, render_prompt

    records = list(oracle_episodes(env_id, seeds, env_kwargs))
    prompts = [render_prompt(tokenizer, r["messages"][:2], think_prefix) for r in records]
    chat_of = {p: r["messages"][:2] for p, r in zip(prompts, records, strict=True)}
    replies = [r["messages"][2]["content"] for r in records]
    distinct, zs, index, _ = mi_pairs(prompts, replies)
    if len(distinct) < 2:
        raise ValueError(
            f"oracle_mi: {len(records)} oracle chats of {env_id} gave {len(distinct)} distinct "
            "prompt(s); the MI needs at least 2: use more episodes"
        )
    # Tokenised from the chat, not the text: an observation's control strings stay text.
    prompt_ids = [prompt_token_ids(tokenizer, chat_of[p], think_prefix) for p in distinct]
    z_ids = [encode_content(tokenizer, z) for z in zs]
    with torch.no_grad():
        loglik = score_matrix(model, prompt_ids, z_ids)
    out = mi_metrics(loglik, index, lengths=torch.tensor([len(z) for z in z_ids]))
    return {**out, "num_episodes": float(len(records))}


def warm_start_gate(
    checkpoint: Path,
    env_id: str,
    common: list[str],
    out: Path,
    *,
    oracle_episodes: int = 32,
    thresholds: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Measure one environment's warm start and decide whether its RL runs may start.

    Args:
        checkpoint: the warm start (an SFT checkpoint folder).
        env_id: the environment.
        common: the study's shared trainer overrides (``rollout.*`` settings of validation:
            ``val_episodes``, ``max_new_tokens``, ``think_prefix``, ``max_context_tokens``,
            ``env_kwargs``), resolved with :func:`baselines.config.load_config`.
        out: a folder for the gate's validation bundle (``gate_eval.json``).
        oracle_episodes: oracle chats scored for the MI check.
        thresholds: ``mi_fraction``, ``success_floor``, ``success_ceiling`` for
            :func:`gate_reasons` (absent keys: the module's constants).

    Returns:
        ``passed`` (bool), ``reasons`` (list of str), ``mi``, ``mi_ceiling``,
        ``mi_fraction``, ``success``, ``val_episodes``, ``oracle_episodes``.

    Raises:
        ValueError: a bad override, or ``rollout.val_episodes`` below 1 (nothing is written).
        KeyError: an unknown environment id.
    """
    from agentgym.eval import evaluate
    from baselines.config import load_config
    from baselines.llm.policy import load_policy

    rc = load_config(None, [*common, f"rollout.env_id={env_id}"]).rollout
    if rc.val_episodes < 1:
        raise ValueError(
            f"rollout.val_episodes={rc.val_episodes}: the gate plays at least 1 validation "
            "episode (32 or more to read a success rate)"
        )
    out.mkdir(parents=True, exist_ok=True)
    bundle = evaluate(
        [rc.env_id],
        f"hf:{checkpoint}",
        episodes=rc.val_episodes,
        seed=STUDY_VAL_SEED,
        out=out / "gate_eval.json",
        env_kwargs=rc.env_kwargs,
        agent_kwargs={
            "max_new_tokens": rc.max_new_tokens,
            "temperature": rc.val_temperature,
            "think_prefix": rc.think_prefix,
            "max_context_tokens": rc.max_context_tokens,
        },
        overwrite=True,
        progress=False,
    )
    success = float(bundle["runs"][0]["summary"]["success_rate"])
    model, tokenizer = load_policy(str(checkpoint), device="cpu", dtype="float32")
    seeds = range(GATE_SEED, GATE_SEED + oracle_episodes)
    mi = oracle_mi(model, tokenizer, rc.env_id, rc.env_kwargs, seeds, rc.think_prefix)
    reasons = gate_reasons(mi["mi_estimate"], mi["mi_upper_bound"], success, **(thresholds or {}))
    return {
        "passed": not reasons,
        "reasons": reasons,
        "mi": mi["mi_estimate"],
        "mi_ceiling": mi["mi_upper_bound"],
        "mi_fraction": mi["mi_estimate"] / mi["mi_upper_bound"],
        "success": success,
        "val_episodes": rc.val_episodes,
        "oracle_episodes": oracle_episodes,
    }


#: The study's validation seeds (``rollout.val_seed`` of every study run).
STUDY_VAL_SEED = 10_000_000


def main(argv: list[str] | None = None) -> int:
    """``python -m baselines.studies.gate CHECKPOINT --env ID [--spec SPEC] [override ...]``:
    measure one warm start (settings: :func:`gate_settings`), print the gate's JSON
    (:func:`warm_start_gate`), also written to ``OUT/gate.json``, and exit 0 when it passes, 1
    when not, 2 on bad input.
    """
    parser = argparse.ArgumentParser(
        prog="python -m baselines.studies.gate",
        description=(
            "Measure one warm start (an SFT checkpoint folder) against the RAGEN-2 study's gate: "
            "the MI of the oracle's reasoning under it must reach a share of its ceiling, and its "
            "validation success must lie strictly between a floor and a ceiling. Trainer "
            "overrides set the validation (rollout.val_episodes, rollout.val_temperature, "
            "rollout.max_new_tokens, ...). Prints the result as JSON; exit 0: passes, 1: fails, "
            "2: bad input."
        ),
    )
    parser.add_argument("checkpoint", help="the warm start: an SFT run's checkpoint/ folder")
    parser.add_argument("--env", required=True, help="environment id, e.g. agentgym/Bandit-v0")
    parser.add_argument(
        "--spec",
        default=None,
        help="a study spec (e.g. baselines/studies/ragen2_correlation.yaml): its gate section "
        "and common trainer overrides, as the study uses them; flags and overrides given win",
    )
    parser.add_argument(
        "--oracle-episodes", type=int, default=None, help="oracle chats scored (default 32)"
    )
    parser.add_argument(
        "--out", default=None, help="folder for gate.json and the validation bundle "
        "(default: gate/ beside the checkpoint folder)",
    )  # fmt: skip
    parser.add_argument("--mi-fraction", type=float, default=None,
                        help=f"least share of the MI ceiling (default {MI_FRACTION})")  # fmt: skip
    parser.add_argument("--success-floor", type=float, default=None,
                        help=f"success must be above this (default {SUCCESS_FLOOR})")  # fmt: skip
    parser.add_argument("--success-ceiling", type=float, default=None,
                        help=f"success must be below this (default {SUCCESS_CEILING})")  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="trainer overrides (rollout.* of validation)")
    args = parser.parse_intermixed_args(argv)
    try:
        if args.spec is not None:
            spec = load_study(args.spec)
        else:
            spec = None
        overrides, oracle_episodes, thresholds = gate_settings(spec, vars(args))
    except (OSError, ValueError, yaml.YAMLError) as err:
        parser.error(f"--spec: {err}")
    checkpoint = Path(args.checkpoint)
    if not checkpoint.is_dir():
        parser.error(f"no checkpoint folder {checkpoint}: give the SFT run's checkpoint/ folder")
    if not (checkpoint / "config.json").is_file():
        hint = checkpoint / "checkpoint"
        parser.error(
            f"{checkpoint} holds no model (no config.json): give the SFT run's checkpoint/ "
            f"folder{f', e.g. {hint}' if hint.is_dir() else ''}"
        )
    if oracle_episodes < 2:
        parser.error(
            f"--oracle-episodes must be >= 2 (the MI needs 2 prompts); got {oracle_episodes}"
        )
    from agentgym.eval import EvalError

    out = Path(args.out) if args.out else checkpoint.parent / "gate"
    try:
        result = warm_start_gate(
            checkpoint,
            args.env,
            overrides,
            out,
            oracle_episodes=oracle_episodes,
            thresholds=thresholds,
        )
    except (KeyError, ValueError, OSError, EvalError) as err:
        parser.error(str(err))
    text = json.dumps(result, indent=1)
    write_text_atomic(out / "gate.json", text + "\n")
    print(text)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
