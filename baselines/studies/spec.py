"""The RAGEN-2 study spec (``baselines/studies/ragen2*.yaml``): reading it and checking its claims
and its gate section, for the study (:mod:`baselines.studies.ragen2`) and the gate command
(:mod:`baselines.studies.gate`) alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CLAIMS",
    "MI_FRACTION",
    "SPEC",
    "SUCCESS_CEILING",
    "SUCCESS_FLOOR",
    "gate_settings",
    "load_study",
]

#: Least share of the MI ceiling the oracle's reasoning must keep under the warm start.
MI_FRACTION = 0.5


#: Success must be above this (off the floor) ...
SUCCESS_FLOOR = 0.05


#: ... and below this (off the ceiling).
SUCCESS_CEILING = 0.95


def gate_settings(
    spec: dict[str, Any] | None, given: dict[str, Any]
) -> tuple[list[str], int, dict[str, float]]:
    """The gate's settings for a warm start: each of ``oracle_episodes``, ``mi_fraction``,
    ``success_floor`` and ``success_ceiling`` from ``given`` (the command's parsed flags; None:
    not given), else from the study spec's ``gate`` section, else the default (32 and this
    module's constants); the trainer overrides are the spec's ``common`` followed by
    ``given["overrides"]`` (the later wins). The study (:func:`baselines.studies.ragen2._gate`)
    and the command both read a spec through it.

    Args:
        spec: a loaded study spec (:func:`baselines.studies.spec.load_study`), or None.
        given: settings that win over the spec's; missing or None keys do not.

    Returns:
        ``(overrides, oracle_episodes, thresholds)``, thresholds as the keywords of
        :func:`baselines.studies.gate.gate_reasons`.

    Raises:
        ValueError: the spec's gate section names a key the gate does not know.

    Example:
        >>> gate_settings(None, {"mi_fraction": 0.4, "overrides": ["rollout.val_episodes=8"]})
        (['rollout.val_episodes=8'], 32, {'mi_fraction': 0.4, 'success_floor': 0.05, \
'success_ceiling': 0.95})
    """
    defaults = {
        "oracle_episodes": 32,
        "mi_fraction": MI_FRACTION,
        "success_floor": SUCCESS_FLOOR,
        "success_ceiling": SUCCESS_CEILING,
    }
    section = dict((spec or {}).get("gate") or {})
    unknown = sorted(set(section) - set(defaults))
    if unknown:
        raise ValueError(
            f"the gate section's keys {unknown} are unknown; it may set {', '.join(defaults)}"
        )
    common = [str(x) for x in (spec or {}).get("common") or []]
    chosen = {
        key: given[key] if given.get(key) is not None else section.get(key, default)
        for key, default in defaults.items()
    }
    oracle = int(chosen.pop("oracle_episodes"))
    thresholds = {key: float(value) for key, value in chosen.items()}
    return [*common, *(given.get("overrides") or [])], oracle, thresholds


SPEC = Path(__file__).with_name("ragen2.yaml")


CLAIMS = ("collapse", "filtering", "correlation")


def load_study(path: str | Path = SPEC, quick: bool = False) -> dict[str, Any]:
    """The study spec; with ``quick`` its ``quick`` section replaces the keys it names.

    A spec may hold any of the three claims (at least one; e.g. a confirmation run of (a) with
    another model holds only ``collapse``).

    Raises:
        ValueError: not a mapping, no claim, an unknown claim, a claim without envs, seeds or
            arms, or a gate section with a key the gate does not know
            (:func:`gate_settings`).
    """
    spec = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(spec, dict):
        raise ValueError(
            f"{path}: a study spec is a mapping with claims (got {type(spec).__name__})"
        )
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
    try:
        gate_settings(spec, {})
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return spec
