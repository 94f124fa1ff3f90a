"""A blind agent for CodeExec's yes/no problems: it never computes the task, only farms the feedback.

Issue 45 (item 2): a policy trained with RL finds any channel from the tests that pay to what it
sees. This agent is the attack made explicit. On a problem whose every test is one call returning
a bool, its answer numbers its calls (the harness calls them in the check's order, so a call's
number names its test) and returns a chosen bool, or raises, on each. It keeps every output vector
of the *deciding* calls (those that decide the reward: every call on v0 and v1, the hidden ones on
v2 and v3) consistent with what it was told, and picks each attempt's plan by minimax (Mastermind's
rule): full guesses, and probes that answer one call and raise on the others (on v1 a probe's
"some test returned a wrong value" line is one bit of that call's expected value). It reads, where
shown: the pass count (v0), the wrong-value line and success (v1), whether every hidden test
passed (v2: it answers the public calls True). On v3 it raises on every public call, so no
attempt passes the public tests (which would end the episode) and it keeps all its attempts; v3
tells nothing of the hidden tests before the episode's end (its hidden runs are made then, for
every attempt), so there it is a guesser told nothing, its attempts' distinct guesses judged at
the end.

:func:`simulate` plays the same agent against known expected outputs, with the feedback *model* of
each version instead of the env: the tests check that the real env tells the agent exactly what
the model says (``told_nothing`` is the model of an env that says only "solved" or not, which is
chance). ``python -m tests.blind_code_agent`` prints the measurement on all HumanEval yes/no
problems (docs/environments.md, CodeExec).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Plan of one attempt: per call, True/False (returned) or None (the call raises).
Plan = tuple[bool | None, ...]

#: What each version's feedback says of an attempt (:meth:`BlindProber.told`).
MODELS = ("counts", "wrong_value", "hidden_solved", "told_nothing")
#: The model of each registered version.
MODEL_OF = {"v0": "counts", "v1": "wrong_value", "v2": "hidden_solved", "v3": "told_nothing"}
MAX_GUESSES = 64  # full guesses weighed per attempt (the hypotheses' first ones, in order)


def answer_code(entry_point: str, plan: Plan) -> str:
    """Python source of an answer whose k-th call returns ``plan[k]`` or raises (None)."""
    return (
        f"P = {plan!r}\nN = [0]\ndef {entry_point}(*args, **kwargs):\n"
        "    N[0] += 1\n    v = P[N[0] - 1] if N[0] <= len(P) else True\n"
        "    if v is None:\n        raise ValueError('probe')\n    return v\n"
    )


class BlindProber:
    """The agent (module docstring) on ``n`` calls whose first ``public`` are not deciding (it
    answers those True; with ``told_nothing`` it raises on them: a public test failed keeps v3's
    episode going)."""

    def __init__(self, n: int, public: int, model: str):
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}")
        self.n, self.public, self.model = n, public, model
        self.fill: bool | None = None if model == "told_nothing" else True  # public calls
        m = n - public
        # every output vector of the deciding calls, as rows (row r: True where r has a 0 bit,
        # first call high; row 0 is all True), in the order of itertools.product((True, False))
        self.left = ((np.arange(2**m)[:, None] >> np.arange(m - 1, -1, -1)) & 1) == 0

    def _full(self, h: np.ndarray) -> Plan:
        return (self.fill,) * self.public + tuple(bool(x) for x in h)

    def told(self, plan: Plan, truths: np.ndarray) -> np.ndarray:
        """What the model says of ``plan`` when the deciding calls expect each row of ``truths``
        (one int per row: the pass count, or an encoding of the bits the version shows)."""
        mine = plan[self.public :]
        answered = np.array([p is not None for p in mine])
        value = np.array([bool(p) for p in mine])
        agree = answered & (truths == value)
        solved = agree.all(axis=1)
        if self.model == "counts":
            return agree.sum(axis=1)
        if self.model == "wrong_value":
            wrong = (answered & (truths != value)).any(axis=1)
            return solved * 2 + wrong
        return solved.astype(int)  # hidden_solved; told_nothing: whether solved, at the end

    def plan(self, last: bool) -> Plan:
        """The next attempt's plan: the full guess or probe whose worst answer leaves fewest
        hypotheses (a full guess on the last attempt; ties to the earlier candidate)."""
        guesses = [self._full(h) for h in self.left[:MAX_GUESSES]]
        if last or len(self.left) == 1:
            return guesses[0]
        m = self.n - self.public
        probes = [
            (self.fill,) * self.public + tuple(True if j == i else None for j in range(m))
            for i in range(m)
        ]

        def worst(plan: Plan) -> int:
            return int(np.unique(self.told(plan, self.left), return_counts=True)[1].max())

        return min(guesses + probes, key=worst)

    def learn(self, plan: Plan, said: int) -> None:
        """Keep the hypotheses under which the model says ``said`` of ``plan``."""
        self.left = self.left[self.told(plan, self.left) == said]


def read_feedback(model: str, observation: str, solved: bool) -> int:
    """What the env's observation says, in :meth:`BlindProber.told`'s terms."""
    if model == "counts":
        shown = re.search(r"Attempt \d+: (\d+)/\d+ tests passed", observation)
        if shown is None:
            raise ValueError("no pass count in a v0 observation")
        return int(shown.group(1))
    if model == "wrong_value":
        return solved * 2 + ("returned a wrong value" in observation.rsplit("Attempt", 1)[-1])
    return int(solved)


def simulate(model: str, truth: Sequence[bool], public: int, attempts: int = 3) -> list[Plan]:
    """The agent's plans against ``truth`` (every call's expected output) under ``model``, up to
    and including the solving one (``told_nothing``: every attempt, as v3 ends an episode on
    the public tests or the last turn, never on the hidden ones)."""
    agent = BlindProber(len(truth), public, model)
    deciding = tuple(truth[public:])
    plans = []
    for a in range(attempts):
        plan = agent.plan(last=a == attempts - 1)
        plans.append(plan)
        if plan[public:] == deciding and model != "told_nothing":
            break
        said = 0 if model == "told_nothing" else int(agent.told(plan, np.array([deciding]))[0])
        agent.learn(plan, said)
    return plans


def play(env: Any, task_id: str, model: str, public: int) -> tuple[list[Plan], bool]:
    """The agent on the real env (reset to ``task_id``): its plans, and whether it solved (the
    episode's ``success``: on v3, judged on its last step)."""
    _, info = env.reset(options={"task_id": task_id})
    agent, entry_point = BlindProber(info["num_tests"], public, model), info["entry_point"]
    plans: list[Plan] = []
    terminated = truncated = False
    while not (terminated or truncated):
        plan = agent.plan(last=env.unwrapped.turn == env.unwrapped.max_turns - 1)
        plans.append(plan)
        code = answer_code(entry_point, plan)
        obs, _, terminated, truncated, info = env.step(f"<think>t</think><answer>{code}</answer>")
        if not info["action_is_valid"]:
            raise AssertionError("the blind agent's answer was refused")
        agent.learn(plan, read_feedback(model, obs, bool(info["success"])))
    return plans, bool(info["success"])


#: HumanEval's yes/no problems (every test one call, every canonical output a bool) and the
#: canonical outputs in call order (measured: the canonical solutions graded, 2026-12-05).
YES_NO: dict[str, tuple[bool, ...]] = {}


def yes_no_problems() -> dict[str, tuple[bool, ...]]:
    """HumanEval's yes/no problems with their canonical outputs (graded once, cached)."""
    if YES_NO:
        return YES_NO
    from agentgym.envs.code_exec_grading import UnsupportedCheck, grade_batch, plan_checks
    from agentgym.envs.code_exec_tasks import humaneval_problems
    from sandboxes.code import acquire_shared, release_shared

    items = []
    for p in humaneval_problems():
        try:
            plan = plan_checks(p)
        except UnsupportedCheck:
            continue
        if len(plan.calls) == len(plan.tests):
            items.append(p)
    box = acquire_shared("process")
    try:
        results = grade_batch(box, [(p, p.solution) for p in items], timeout_s=120)
    finally:
        release_shared(box)
    for p, r in zip(items, results, strict=True):
        if r.outcomes and all(ok and isinstance(v, bool) for ok, v in r.outcomes):
            YES_NO[p.task_id] = tuple(v for _, v in r.outcomes)
    return YES_NO


def main() -> None:  # pragma: no cover - the measurement, printed
    import gymnasium

    import agentgym  # noqa: F401 - registers the ids
    from agentgym.envs.code_exec import split_plan, split_tests
    from agentgym.envs.code_exec_grading import plan_checks
    from agentgym.envs.code_exec_tasks import humaneval_problems

    problems = yes_no_problems()
    print(f"{len(problems)} yes/no problems; 3 attempts; blind prober vs chance")
    for version, model in MODEL_OF.items():
        env = gymnasium.make(f"agentgym/CodeExec-{version}", backend="process")
        solved, chance = 0, 0.0
        try:
            for task_id, truth in problems.items():
                public = len(split_tests(len(truth))[0]) if version in ("v2", "v3") else 0
                _, ok = play(env, task_id, model, public)
                solved += ok
                problem = humaneval_problems()[int(task_id.split("/")[1])]
                split = version in ("v2", "v3")
                hidden = split_plan(plan_checks(problem))[1] if split else truth
                chance += min(1.0, 3 / 2 ** len(hidden))
        finally:
            env.close()
        print(f"{version} ({model}): solved {solved}/{len(problems)}; chance {chance:.2f}")


if __name__ == "__main__":  # pragma: no cover
    main()
