"""Template-collapse diagnostics of RAGEN-2 ("Reasoning Collapse in Agentic RL"): the one rule of
the reasoning z (:mod:`~baselines.collapse.reasoning`), the MI estimate
(:mod:`~baselines.collapse.mi`), the detector (:mod:`~baselines.collapse.detector`), the
scorer of log p(z | x) (:mod:`~baselines.collapse.scorer`) and the detector's simulated controls
(:mod:`~baselines.collapse.controls`). Imports only ``baselines.llm``.
"""

from baselines.collapse.detector import (
    STATES,
    DetectorSettings,
    ZScoreTracker,
    mi_fraction_upper_bound,
)
from baselines.collapse.mi import RETRIEVAL_KS, mi_metrics, mi_pairs, retrieval_chance
from baselines.collapse.reasoning import (
    THINK_CLOSE,
    THINK_OPEN,
    Z_STATUSES,
    ThinkBlock,
    extract_reasoning,
    reasoning_ids,
    reasoning_span,
    reasoning_text,
    think_block,
)
from baselines.collapse.scorer import episode_mi_diagnostics, score_matrix, score_matrix_naive

__all__ = [
    "mi_metrics",
    "mi_pairs",
    "reasoning_text",
    "retrieval_chance",
    "RETRIEVAL_KS",
    "DetectorSettings",
    "STATES",
    "ZScoreTracker",
    "mi_fraction_upper_bound",
    "score_matrix",
    "score_matrix_naive",
    "episode_mi_diagnostics",
    "THINK_OPEN",
    "THINK_CLOSE",
    "Z_STATUSES",
    "extract_reasoning",
    "reasoning_ids",
    "reasoning_span",
    "think_block",
    "ThinkBlock",
]
