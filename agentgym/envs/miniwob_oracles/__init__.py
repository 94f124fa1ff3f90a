"""Scripted oracles for MiniWoB++ tasks: the next action from what the observation shows.

Each oracle is a function of an :class:`~agentgym.envs.miniwob_oracles.base.OracleView` (the task,
its instruction, the instruction's fields as MiniWoB++'s extractor reads them, and the page's
elements: everything the text observation shows, nothing more; and the actions it took so far
this episode, as an agent's context holds them) that returns one action string, e.g.
``"click[6]"``. An oracle reads the page afresh every turn, so a multi-step task (tick three
boxes, then submit) is solved one step at a time from what is already done on the page. :data:`ORACLES` maps a task name to its oracle; the tasks with none
are listed with the reason in ``docs/miniwob.md``.
"""

from __future__ import annotations

from agentgym.envs.miniwob_oracles import basic, clicks, forms, widgets  # noqa: F401  (register them)
from agentgym.envs.miniwob_oracles.base import ORACLES, NoOracleMove, OracleView

__all__ = ["ORACLES", "OracleView", "NoOracleMove", "UNSOLVED"]

#: The HTML tasks (:data:`agentgym.envs.miniwob_tasks.HTML_TASKS`) whose oracle wins fewer than
#: 19 of seeds 0-19 (``tests/test_miniwob_oracles.py``), with the measured reason.
UNSOLVED: dict[str, str] = {
    "click-checkboxes-large": "17/20: up to 12 boxes to tick plus Submit is 13 actions, over the "
    "10-turn budget (all 20 with 13 turns)",
    "click-pie": "17/20: the first slice starts selected and, once the menu has opened, ignores a "
    "click (the page's wheelnav quirk); no action of this env selects it",
    "email-inbox-forward-nl-turk": "18/20: one instruction swaps sender and recipient (the page's "
    "own template), one has two emails from the sender and rewards only one of them",
    "tic-tac-toe": "15/20: the page's opponent plays at random part of the time; the oracle "
    "maximises the chance of a win against it, which is below 1 when the page moves first",
}
