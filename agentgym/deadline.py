"""Calls under a hard wall-clock deadline: :mod:`sandboxes.deadline`, where the process limits live
(beside :mod:`sandboxes.limits`), re-exported whole here for agentgym's answer checks and for
``baselines``, which reaches ``sandboxes`` through ``agentgym`` (DESIGN.md, the layers).
"""

from __future__ import annotations

from sandboxes.deadline import *  # noqa: F403 - the public names, one list: its __all__
from sandboxes.deadline import __all__ as __all__
