"""Compatibility names: the episode loop lives in :mod:`baselines.episodes`, generation in
:mod:`baselines.engines` (this module only re-exports them; it imports both, neither imports it).
"""

from __future__ import annotations

from baselines.engines import SamplingSettings, generate
from baselines.episodes import (
    THINK_PREFIX,
    EpisodeRecord,
    TokenContext,
    TrainingRow,
    TurnRecord,
    collect_rollouts,
    extract_reasoning,
    reasoning_ids,
    render_prompt,
)

__all__ = [
    "THINK_PREFIX",
    "EpisodeRecord",
    "SamplingSettings",
    "TokenContext",
    "TrainingRow",
    "TurnRecord",
    "collect_rollouts",
    "extract_reasoning",
    "generate",
    "reasoning_ids",
    "render_prompt",
]
