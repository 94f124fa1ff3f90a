"""A bounded fuzz of every registered environment (issue 25): no action string raises out of
``step`` or holds it past its documented per-answer limit.

Each registered ``agentgym/...`` id plays seeded episodes whose turns Hypothesis draws from
issue 25's adversarial forms (:func:`tests.test_math_answers._fuzz_answers`: sums and products,
integrals and limits, nested functions, towers, matrices, long digit strings, lone UTF-16
surrogates, random characters; and the reported hangs, ``HANGS``), random Unicode with surrogates, hostile Python answers for
CodeExec, and the env's own valid or oracle actions (so that episodes go past the first turn),
written raw, in ``<answer>`` tags, several joined by ``||``, or as a fenced block.

The bounds: a step's wall time stays within its env's documented per-answer limit
(:func:`step_limit_s`) plus :data:`SLACK_S` (a step that never returns ends the test process at
twice that, with every thread's stack, rather than hang CI); the example counts (:data:`EXAMPLES`) are fixed and
derandomized, sized for one to two minutes of the whole file on a loaded 2-core machine (1 min
24 s measured, niced, at a load average of 5: 2,400 steps over the 15 ids of that day, before
CodeExec's v1 made 17, the slowest 4.2 s, a CodeExec grading run), so the run is the same every time and no assertion depends on speed beyond
that generous bound. At a157022~1 (before the math deadline) this file stops at Math-v0: a step
stuck in ``_too_many_digits`` past 70 s, its stack printed.
"""

from __future__ import annotations

import faulthandler
import os
import time
from typing import Any

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym
from agentgym.answers import CHECK_TIMEOUT_S
from agentgym.parsing import format_answer
from tests.test_contract import _check_step_info
from tests.test_math_answers import HANGS, _fuzz_answers

#: Every id this suite registers in Gymnasium's registry.
FUZZ_IDS = sorted(k for k in gymnasium.registry if k.startswith("agentgym/"))
#: Slack over a step's limit for a loaded machine and a deadline worker's restart, seconds.
SLACK_S = 30.0
#: Steps of environments that document no per-answer limit (pure Python, no checker): a hang
#: guard, seconds.
HANG_GUARD_S = 10.0
#: Episodes drawn per id (each up to MAX_TURNS steps), by cost of a step.
EXAMPLES = {"CodeExec": 16, "WebShop": 30, "MiniWoB": 30, "Math": 40}
DEFAULT_EXAMPLES = 80
MAX_TURNS = 4

#: Hostile bodies for a CodeExec answer's function (its grading run is bounded by the sandbox).
CODE_BODIES = [
    "return 10 ** (10 ** 5)",
    "return '\\ud800' * 3",
    "return [0] * 10 ** 6",
    "print('x' * 10 ** 6); return None",
    "import os; os._exit(0)",
    "raise SystemExit(3)",
    "return float('nan')",
    "return args",
    # a report line with a 5000-digit problem index (it once raised out of the grader)
    "r = __import__('sys').modules['__main__'].report\n"
    "    r.write('9' * 5000 + ' 0 R1\\n')\n"
    "    r.flush()\n"
    "    return 1",
]


def test_every_registered_id_is_fuzzed() -> None:
    assert FUZZ_IDS == sorted(agentgym.registered_envs())
    assert len(FUZZ_IDS) == 26  # CodeExec and CodeExecGenerated in v0 to v3, 5 MiniWoB ids


def step_limit_s(env: gymnasium.Env) -> float:
    """The documented limit of one step's work, seconds: the answer checker's deadline
    (:data:`agentgym.answers.CHECK_TIMEOUT_S`) for the Math envs, one grading run
    (``timeout_s``) for CodeExec, a WebDriver command (``command_timeout``) per action for the
    browser, else :data:`HANG_GUARD_S`."""
    inner = env.unwrapped
    if hasattr(inner, "timeout_s"):
        return float(inner.timeout_s)
    if getattr(inner, "backend", None) == "browser":
        return float(getattr(inner, "command_timeout", 20.0)) * inner.max_actions_per_turn
    if type(inner).__module__.endswith("math_word"):
        return CHECK_TIMEOUT_S
    return HANG_GUARD_S


def _examples(env_id: str) -> int:
    for key, count in EXAMPLES.items():
        if key in env_id:
            return count
    return DEFAULT_EXAMPLES


_unicode = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=300)
#: Unicode text with one lone surrogate somewhere (Hypothesis draws them rarely on its own).
_surrogate = st.tuples(_unicode, st.integers(0xD800, 0xDFFF), st.integers(0, 300)).map(
    lambda t: t[0][: t[2]] + chr(t[1]) + t[0][t[2] :]
)
_math_form = st.randoms(use_true_random=False).map(lambda rng: _fuzz_answers(rng, 1)[0])
_form = st.one_of(
    _math_form,
    _math_form,
    st.sampled_from(sorted(HANGS.values())),
    _unicode,
    _surrogate,
    st.sampled_from(["", "||", "<answer>", "</think>", "9" * 5000]),
)


def _own(env: gymnasium.Env) -> list[str]:
    """Actions the env recognises now: its oracle's, else its valid actions (maybe none)."""
    inner = env.unwrapped
    try:
        own = inner.oracle_actions()
    except NotImplementedError:
        own = []
    return list(own or inner.valid_actions() or [])


def _turn(draw: Any, env: gymnasium.Env) -> str:
    """One turn's text: 1-3 pieces of one kind (adversarial forms, the env's own actions, a
    hostile CodeExec answer) or of mixed kinds, written in one of the ways a model writes them."""
    entry_point = getattr(getattr(env.unwrapped, "problem", None), "entry_point", None)
    turn_kind = draw(st.sampled_from(["form", "form", "own", "code", "mixed"]))
    pieces: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = turn_kind
        if kind == "mixed":
            kind = draw(st.sampled_from(["form", "own", "code"]))
        own = _own(env) if kind == "own" else []
        if own:
            pieces.append(draw(st.sampled_from(own)))
        elif kind == "code" and isinstance(entry_point, str):
            body = draw(st.sampled_from(CODE_BODIES))
            pieces.append(f"def {entry_point}(*args, **kwargs):\n    {body}\n")
        else:
            pieces.append(draw(_form))
    wraps = ["tags", "tags", "tags", "raw"] + (["fenced"] if isinstance(entry_point, str) else [])
    wrap = draw(st.sampled_from(wraps))
    if wrap == "raw":
        return " || ".join(pieces)
    if wrap == "fenced":
        return format_answer([f"```python\n{pieces[0]}```"], "think_answer", think="t")
    return format_answer(pieces, "think_answer", think=draw(_form))


@pytest.mark.parametrize("env_id", FUZZ_IDS)
def test_fuzz_no_step_raises_or_runs_past_its_limit(
    env_id: str, record_property: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Figures go to the JUnit report (``--junitxml``): steps taken, how many were valid
    actions, the slowest step."""
    with capfd.disabled():  # the terminal's stderr, for the stacks of a step that hangs
        stderr = os.dup(2)
    env = gymnasium.make(env_id)
    worst, steps, valid = [0.0], [0], [0]
    try:
        limit = step_limit_s(env) + SLACK_S

        @settings(
            max_examples=_examples(env_id),
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(data=st.data(), seed=st.integers(0, 2**16))
        def episode(data: st.DataObject, seed: int) -> None:
            env.reset(seed=seed)
            for _ in range(MAX_TURNS):
                text = _turn(data.draw, env)
                start = time.monotonic()
                # A step that never returns (one C call holding the GIL, say) would hang the run:
                # at twice the limit the process prints every thread's stack and exits 1.
                faulthandler.dump_traceback_later(2 * limit, exit=True, file=stderr)
                try:
                    observation, reward, terminated, truncated, info = env.step(text)
                finally:
                    faulthandler.cancel_dump_traceback_later()
                seconds = time.monotonic() - start
                worst[0], steps[0] = max(worst[0], seconds), steps[0] + 1
                assert seconds <= limit, (env_id, text[:200], seconds)
                assert isinstance(observation, str) and isinstance(reward, float)
                _check_step_info(info)
                valid[0] += info["action_is_valid"]
                if terminated or truncated:
                    return

        episode()
    finally:
        env.close()
        os.close(stderr)
    record_property("fuzz_steps", steps[0])
    record_property("fuzz_valid_steps", valid[0])
    record_property("fuzz_slowest_step_s", round(worst[0], 3))
