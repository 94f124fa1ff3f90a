"""The environments, and the one table that registers every id (``agentgym list`` prints it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache, partial
from typing import Any

from agentgym.action_keys import answer_key, code_key, expression_key
from agentgym.registration import (
    EnvEntry,
    EnvKwargsError,
    TaskParam,
    canonical_value,
    register_env,
)

# Task parameters per family (the common ones of every text env are in COMMON_TASK_PARAMS). The
# bounds keep a replay's cost small: the leaderboard replays whatever a bundle names within them.
_SOKOBAN = {
    "dim_room": TaskParam("int_pair", 3, 10),
    "num_boxes": TaskParam("int", 1, 3),
    "level_file": TaskParam("file", high=16 * 2**20, nullable=True),
    "min_solution_steps": TaskParam("int", 1, 100),
}
_FROZEN_LAKE = {
    "size": TaskParam("int", 2, 12),
    "p": TaskParam("float", 0.01, 1.0),
    "is_slippery": TaskParam("bool"),
    "desc": TaskParam("rows", high=12, nullable=True),
}
_BANDIT = {
    "name_split": TaskParam("choice", choices=("train", "heldout")),
    # Whose arm names (agentgym.envs.bandit.NAME_SETS): other names, other episodes.
    "name_set": TaskParam(
        "choice", choices=("agentgym", "ragen"), hint="use name_set='ragen' for RAGEN's name pairs"
    ),
    "low_arm_reward": TaskParam("float", -10.0, 10.0),
    "high_arm_reward": TaskParam("float", -10.0, 10.0),
    "high_arm_prob": TaskParam("float", 0.0, 1.0),
    # How the risky payout is drawn; "per_episode" has no leaderboard (_check_bandit_bundle).
    "payout_draws": TaskParam(
        "choice",
        choices=("seeded", "per_episode"),
        hint="use payout_draws='per_episode' for RAGEN's independent draw per episode",
    ),
}
_COUNTDOWN = {
    "num_numbers": TaskParam("int", 3, 6),
    "max_number": TaskParam("int", 1, 10_000),
    "max_target": TaskParam("int", 2, 100_000),
    "format_score": TaskParam("float", 0.0, 0.999),
    # RAGEN/TinyZero's rule (every number exactly once) or the earlier subset rule: task-defining.
    "number_rule": TaskParam("choice", choices=("exact", "subset")),
}


def _math_task_config(config: Mapping[str, Any], kw: Mapping[str, Any]) -> dict[str, Any]:
    """A (checked) ``task_config`` in canonical form (:attr:`TaskParam.canonical`): each entry in
    its kind of :data:`MATH_TASK_CONFIG_BOUNDS` (``difficulty=1`` is ``1.0``), those equal to
    the task's reasoning-gym default (:func:`reasoning_gym_defaults`) dropped, keys sorted: every
    spelling of reasoning-gym's defaults is ``{}``, its ``None``."""
    bounds = MATH_TASK_CONFIG_BOUNDS.get(kw.get("task"), {})  # type: ignore[arg-type]
    defaults = reasoning_gym_defaults(kw.get("task")) if config else {}
    out = {}
    for name in sorted(config):
        value = canonical_value(bounds.get(name), config[name], kw)
        if name in defaults and _same_scalar(value, defaults[name]):
            continue
        out[name] = value
    return out


def _same_scalar(a: Any, b: Any) -> bool:
    """``a == b``, a bool equal only to the same bool (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return type(a) is type(b) and a == b


@lru_cache(maxsize=64)
def reasoning_gym_defaults(task: Any) -> Mapping[str, Any]:
    """The default of each field of reasoning-gym's configuration dataclass for ``task`` (those
    with a plain default; not ``seed`` or ``size``, which the env sets), read from the installed
    reasoning-gym (importing it registers its tasks: a few seconds, once per process). Empty for
    a task reasoning-gym does not register, or without reasoning-gym (whose replay fails anyway,
    naming the extra to install).

    Example:
        >>> reasoning_gym_defaults("chain_sum")["min_terms"]
        2
    """
    if not isinstance(task, str):
        return {}
    try:
        import reasoning_gym  # noqa: F401 - registers the tasks
        from reasoning_gym.factory import DATASETS
    except ImportError:
        return {}
    pair = DATASETS.get(task)
    if pair is None or not dataclasses.is_dataclass(pair[1]):
        return {}
    return {
        f.name: f.default
        for f in dataclasses.fields(pair[1])
        if f.default is not dataclasses.MISSING and f.name not in ("seed", "size")
    }


_MATH = {
    "task": TaskParam("str", high=64),
    # None is reasoning-gym's defaults, as {} and every spelling of them are: one board for all.
    "task_config": TaskParam(
        "mapping",
        high=32,
        nullable=True,
        none_means=lambda kw: {},
        canonical=_math_task_config,
    ),
    "reward_decay": TaskParam("float", 1e-6, 1.0),
}
#: The reasoning-gym configuration fields a result bundle may set (``task_config``), per task,
#: with their bounds; with any other task a bundle's ``task_config`` must be empty (reasoning-gym's
#: defaults). The bounds keep one problem's generation short: ``basic_arithmetic`` looks for
#: divisors by trial division up to the square root of a product of terms, so its cost grows
#: exponentially with terms and digits (reasoning-gym's defaults, 6 terms of 4 digits, are its
#: bounds); ``chain_sum`` only adds; ``gsm_symbolic`` supports difficulty 1.0 only.
MATH_TASK_CONFIG_BOUNDS: Mapping[str, Mapping[str, TaskParam]] = {
    "basic_arithmetic": {
        "min_terms": TaskParam("int", 1, 6),
        "max_terms": TaskParam("int", 1, 6),
        "min_digits": TaskParam("int", 1, 4),
        "max_digits": TaskParam("int", 1, 4),
        "allow_parentheses": TaskParam("bool"),
        "allow_negation": TaskParam("bool"),
        "format_style": TaskParam("choice", choices=("simple", "natural")),
        "whitespace": TaskParam("choice", choices=("no_space", "single", "random")),
    },
    "chain_sum": {
        "min_terms": TaskParam("int", 1, 20),
        "max_terms": TaskParam("int", 1, 20),
        "min_digits": TaskParam("int", 1, 20),
        "max_digits": TaskParam("int", 1, 20),
        "allow_negation": TaskParam("bool"),
    },
    "gsm_symbolic": {"difficulty": TaskParam("float", 1.0, 1.0)},
}


def _check_math_task_config(kw: Mapping[str, Any]) -> None:
    """A bundle's ``task_config`` within :data:`MATH_TASK_CONFIG_BOUNDS` for its task (checked
    before anything is built: a config out of them can take minutes per problem)."""
    config = kw.get("task_config") or {}
    if not config:
        return
    task = kw.get("task")
    bounds = MATH_TASK_CONFIG_BOUNDS.get(task)  # type: ignore[arg-type]
    if bounds is None:
        raise EnvKwargsError(
            f"task_config: a result bundle may configure only the tasks "
            f"{', '.join(sorted(MATH_TASK_CONFIG_BOUNDS))} (each within stated bounds); task "
            f"{task!r} is replayed with reasoning-gym's defaults: remove task_config",
            "task_config",
        )
    for name, value in config.items():
        param = bounds.get(name)
        if param is None:
            raise EnvKwargsError(
                f"task_config: {name!r} is not a field of {task} a result bundle may set; "
                f"those are {', '.join(sorted(bounds))}",
                "task_config",
            )
        try:
            param.check(f"task_config[{name!r}]", value)
        except EnvKwargsError as err:
            raise EnvKwargsError(
                f"{err} (the bounds of {task} in a result bundle, which keep the replay short)",
                "task_config",
            ) from None


_MATH_FILE = {
    "dataset_file": TaskParam("file", high=16 * 2**20, nullable=True),
    "reward_decay": TaskParam("float", 1e-6, 1.0),
}
_WEBSHOP = {
    "backend": TaskParam("choice", choices=("browser", "text")),
    "catalog_seed": TaskParam("int", 0, 2**31 - 1),
    "num_products": TaskParam("int", 1, 5000),
    "max_query_length": TaskParam("int", 1, 5000),
}
_MINIWOB = {
    "task": TaskParam("str", high=64, nullable=True),
    "task_set": TaskParam("choice", choices=("all", "html", "train", "held_out"), nullable=True),
    "coordinates": TaskParam("bool"),
    "reward_mode": TaskParam("choice", choices=("strict", "raw")),
    "colors": TaskParam("choice", choices=("auto", True, False)),
    "max_type_length": TaskParam("int", 1, 4096),
}
_CODE_EXEC = {
    "source": TaskParam("choice", choices=("humaneval", "generated")),
    "feedback_chars": TaskParam("int", 0, 100_000),
    "feedback": TaskParam("choice", choices=("public_final", "public", "pass_fail", "counts")),
}


def _sokoban_worst(kw: Mapping[str, Any]) -> float:
    """Every action pays -0.1; a box pushed off a target pays -1, and pushing it back on first
    paid +1, so at most one net -1 per box (a level file's box count is unknown: -1 per action)."""
    steps = int(kw.get("max_steps") or 0)
    if kw.get("level_file"):
        return -1.1 * steps
    return -0.1 * steps - int(kw.get("num_boxes", 1))


def _check_bandit_bundle(kw: Mapping[str, Any]) -> None:
    """A bundle's Bandit run draws its payouts ``"seeded"``: with ``"per_episode"`` an episode's
    payout depends on how many resets with its seed the process made before
    (:class:`agentgym.envs.bandit.BanditEnv`), which a replay in another process cannot know."""
    if kw.get("payout_draws", "seeded") != "seeded":
        raise EnvKwargsError(
            "payout_draws: 'per_episode' draws each episode's risky payout from a count of the "
            "resets the evaluating process made with its seed, which a replay cannot reproduce, "
            "so it has no leaderboard: evaluate it locally, or submit a run made with "
            "payout_draws='seeded' (the default)",
            "payout_draws",
        )


def _bandit_worst(kw: Mapping[str, Any]) -> float:
    low = min(0.0, float(kw.get("low_arm_reward", 0.15)), float(kw.get("high_arm_reward", 1.0)))
    return int(kw.get("max_turns", 1)) * low


def _miniwob_worst(kw: Mapping[str, Any]) -> float:
    """``reward_mode="raw"`` pays MiniWoB++'s raw reward, down to -1, on the step that ends the
    episode (once per episode: the page ends it); ``"strict"`` pays 1 or 0."""
    return -1.0 if kw.get("reward_mode", "strict") == "raw" else 0.0


# What the ids of one environment class share: its entry point, task parameters and checks, and
# (where every id of it has the same) its default settings.
_sokoban = partial(
    EnvEntry,
    entry_point="agentgym.envs.sokoban:SokobanEnv",
    task_params=_SOKOBAN,
    step_worst=_sokoban_worst,
)
_frozen_lake = partial(
    EnvEntry, entry_point="agentgym.envs.frozen_lake:FrozenLakeEnv", task_params=_FROZEN_LAKE
)
_bandit = partial(
    EnvEntry,
    entry_point="agentgym.envs.bandit:BanditEnv",
    default_kwargs={"max_turns": 1, "max_actions_per_turn": 1},
    task_params=_BANDIT,
    step_worst=_bandit_worst,
    check_bundle=_check_bandit_bundle,
)
_MATH_DEFAULTS = {"reward_decay": 0.5, "max_turns": 3, "max_actions_per_turn": 1}
_math = partial(
    EnvEntry,
    entry_point="agentgym.envs.math_word:MathEnv",
    default_kwargs=_MATH_DEFAULTS,
    task_params=_MATH,
    check_bundle=_check_math_task_config,
    action_key=answer_key,  # the answer text: white space does not count
)
_webshop = partial(
    EnvEntry,
    entry_point="agentgym.envs.webshop:WebShopEnv",
    default_kwargs={
        "catalog_seed": 0,
        "num_products": 1000,
        "max_turns": 15,
        "max_actions_per_turn": 1,
    },
    task_params=_WEBSHOP,
    min_ranked_episodes=4,
)


def _check_miniwob_task(kw: Mapping[str, Any]) -> None:
    """A bundle's ``task`` is one of MiniWoB++'s tasks, and its task or task set replays exactly
    (no task of :data:`agentgym.envs.miniwob_tasks.NONDETERMINISTIC_TASKS`, nor, with
    coordinates, of :data:`~agentgym.envs.miniwob_tasks.BOX_NONDETERMINISTIC_TASKS`)."""
    from agentgym.envs.miniwob import TASK_SETS
    from agentgym.envs.miniwob_tasks import (
        ALL_TASKS,
        BOX_NONDETERMINISTIC_TASKS,
        NONDETERMINISTIC_TASKS,
    )

    task = kw.get("task")
    if task is None:
        tasks = TASK_SETS.get(kw.get("task_set") or "", ())
        odd = sorted(set(tasks) & set(NONDETERMINISTIC_TASKS))
        if kw.get("coordinates"):
            odd += sorted(set(tasks) & set(BOX_NONDETERMINISTIC_TASKS))
        if odd:
            raise EnvKwargsError(
                f"task_set: {kw.get('task_set')!r} holds tasks that cannot be replayed exactly "
                f"({', '.join(odd)}), so it has no leaderboard: evaluate it locally, or submit "
                "agentgym/MiniWoBHTML-v0 or MiniWoBTrain-v0",
                "task_set",
            )
        return
    if kw.get("coordinates") and task in BOX_NONDETERMINISTIC_TASKS:
        raise EnvKwargsError(
            f"task: {task!r} with coordinates=True cannot be replayed exactly "
            f"({BOX_NONDETERMINISTIC_TASKS[task]}): submit it without coordinates",
            "task",
        )
    if task not in ALL_TASKS:
        raise EnvKwargsError(
            f"task: {task!r} is not one of MiniWoB++'s {len(ALL_TASKS)} tasks "
            "(agentgym.envs.miniwob_tasks.ALL_TASKS)",
            "task",
        )
    if task in NONDETERMINISTIC_TASKS:
        raise EnvKwargsError(
            f"task: {task!r} cannot be replayed exactly ({NONDETERMINISTIC_TASKS[task]}), so "
            "it has no leaderboard: evaluate it locally, or submit another task",
            "task",
        )


_miniwob = partial(
    EnvEntry,
    entry_point="agentgym.envs.miniwob:MiniWoBEnv",
    default_kwargs={"max_turns": 10, "max_actions_per_turn": 1},
    task_params=_MINIWOB,
    min_ranked_episodes=4,
    check_bundle=_check_miniwob_task,
    step_worst=_miniwob_worst,
)
_CODE_EXEC_DEFAULTS = {"backend": "auto", "max_turns": 3, "max_actions_per_turn": 1}
_code_exec = partial(
    EnvEntry,
    entry_point="agentgym.envs.code_exec:CodeExecEnv",
    default_kwargs=_CODE_EXEC_DEFAULTS,
    task_params=_CODE_EXEC,
    opaque_action_names=True,  # executed_actions: "code (N chars)", not the code
    action_key=code_key,  # the code's syntax tree: a fence, layout and comments do not count
)


def _code_exec_versions(name: str, summary: str, source: str) -> tuple[EnvEntry, ...]:
    """v0 to v3 of one CodeExec task. v0: each attempt's feedback and reward count the
    passed tests (``feedback="counts"``), which lets a blind agent solve a problem with few yes/no
    tests from the counts (issue 25). v1 says only pass or fail per attempt and pays the best
    attempt at the end (``feedback="pass_fail"``); every test still both gives feedback and
    decides the reward. v2 (``feedback="public"``) splits each problem's tests: the public
    quarter is shown and reported on, the hidden rest alone decides the reward, and each attempt
    makes a public run then a hidden run and is told whether every hidden test passed (issue
    45); superseded by v3, because a hidden run can signal the next attempt's feedback through
    counters of the kernel or container it shares with the next public run
    (tests/test_attacks_round8.py). v3 (the env's default, ``feedback="public_final"``) keeps
    the split but tells an attempt nothing of the hidden tests: it makes the public run only,
    passing every public test ends the episode, and every hidden run is made on the episode's
    last step, after its last public run. v0, v1 and v2 stay as they were, so their episodes and
    the bundles made on them replay unchanged (DESIGN.md: a change that alters episodes bumps
    the version)."""
    return (
        _code_exec(
            id=f"agentgym/{name}-v0",
            summary=f"{summary}; 3 attempts, each shown its pass count (superseded by v2).",
            default_kwargs={**_CODE_EXEC_DEFAULTS, "feedback": "counts"},
            task_kwargs={"source": source},
        ),
        _code_exec(
            id=f"agentgym/{name}-v1",
            summary=f"{summary}; 3 attempts, each told only pass or fail (superseded by v2).",
            default_kwargs={**_CODE_EXEC_DEFAULTS, "feedback": "pass_fail"},
            task_kwargs={"source": source},
        ),
        _code_exec(
            id=f"agentgym/{name}-v2",
            summary=f"{summary}; public tests shown and reported on, hidden tests pay; 3 attempts "
            "(superseded by v3).",
            default_kwargs={**_CODE_EXEC_DEFAULTS, "feedback": "public"},
            task_kwargs={"source": source},
        ),
        _code_exec(
            id=f"agentgym/{name}-v3",
            summary=f"{summary}; public tests shown and reported on, hidden tests judged and paid "
            "at the end; 3 attempts.",
            default_kwargs={**_CODE_EXEC_DEFAULTS, "feedback": "public_final"},
            task_kwargs={"source": source},
        ),
    )


ENTRIES: tuple[EnvEntry, ...] = (
    _sokoban(
        id="agentgym/Sokoban-v0",
        summary="Push 1 box onto its target in a 6x6 room; 10 actions over up to 5 turns.",
        default_kwargs={
            "dim_room": (6, 6),
            "num_boxes": 1,
            "max_steps": 10,
            "max_turns": 5,
            "max_actions_per_turn": 5,
        },
    ),
    _sokoban(
        id="agentgym/SokobanHard-v0",
        summary="Sokoban, 8x8 room with 2 boxes; 30 actions over up to 10 turns.",
        task_kwargs={"dim_room": (8, 8), "num_boxes": 2},
        default_kwargs={"max_steps": 30, "max_turns": 10, "max_actions_per_turn": 5},
    ),
    _frozen_lake(
        id="agentgym/FrozenLake-v0",
        summary="Walk a random 4x4 frozen lake to the goal without falling into a hole.",
        default_kwargs={
            "size": 4,
            "p": 0.8,
            "is_slippery": False,
            "max_turns": 5,
            "max_actions_per_turn": 3,
        },
    ),
    _frozen_lake(
        id="agentgym/FrozenLakeSlippery-v0",
        summary="FrozenLake on slippery ice: a move goes sideways with probability 2/3.",
        task_kwargs={"is_slippery": True},
        default_kwargs={"size": 4, "p": 0.8, "max_turns": 10, "max_actions_per_turn": 3},
    ),
    _bandit(
        id="agentgym/Bandit-v0",
        summary="Two arms with semantic names, a safe low arm and a risky high arm; one pull.",
        task_kwargs={"name_split": "train"},
    ),
    _bandit(
        id="agentgym/BanditHeldOut-v0",
        summary="Bandit-v0 with held-out arm names, for testing generalisation.",
        task_kwargs={"name_split": "heldout"},
    ),
    EnvEntry(
        id="agentgym/Countdown-v0",
        entry_point="agentgym.envs.countdown:CountdownEnv",
        summary="Reach a target using every given number exactly once with + - * / (RAGEN's rule).",
        default_kwargs={"num_numbers": 4, "max_turns": 1, "max_actions_per_turn": 1},
        task_params=_COUNTDOWN,
        action_key=expression_key,  # the parsed expression: spacing and redundancy do not count
    ),
    _math(
        id="agentgym/Math-v0",
        summary="GSM8K-style word problems (reasoning-gym gsm_symbolic); 3 attempts with feedback.",
        default_kwargs={"task": "gsm_symbolic", **_MATH_DEFAULTS},
    ),
    _math(
        id="agentgym/MathArithmetic-v0",
        summary="Arithmetic expressions (reasoning-gym basic_arithmetic); 3 attempts with feedback.",
        task_kwargs={"task": "basic_arithmetic"},
    ),
    _math(
        id="agentgym/MathChainSum-v0",
        summary="Chains of additions and subtractions (reasoning-gym chain_sum); 3 attempts.",
        task_kwargs={"task": "chain_sum"},
    ),
    EnvEntry(
        id="agentgym/MathFile-v0",
        entry_point="agentgym.envs.math_word:MathFileEnv",
        summary="Math problems from your JSONL file (dataset_file=; question/answer); 3 attempts.",
        default_kwargs=_MATH_DEFAULTS,
        task_params=_MATH_FILE,
        action_key=answer_key,
    ),
    _webshop(
        id="agentgym/WebShop-v0",
        summary="Find and buy the instructed product on a local shop site in headless Chromium.",
        task_kwargs={"backend": "browser"},
    ),
    _webshop(
        id="agentgym/WebShopText-v0",
        summary="WebShop-v0 over plain HTTP: the same shop pages turned into the same text.",
        task_kwargs={"backend": "text"},
    ),
    _miniwob(
        id="agentgym/MiniWoB-v0",
        summary="One MiniWoB++ web task (task=, default click-test) in headless Chromium.",
        default_kwargs={"task": "click-test", "max_turns": 10, "max_actions_per_turn": 1},
    ),
    _miniwob(
        id="agentgym/MiniWoBHTML-v0",
        summary="MiniWoB++'s 56 HTML tasks (WebN-T5/WebGUM); the seed picks the task (seed % 56).",
        task_kwargs={"task": None, "task_set": "html", "coordinates": False},
    ),
    _miniwob(
        id="agentgym/MiniWoBAll-v0",
        summary="All 125 MiniWoB++ tasks (BrowserGym's), coordinate actions on; seed % 125 picks.",
        task_kwargs={"task": None, "task_set": "all", "coordinates": True},
        nondeterministic=True,  # NONDETERMINISTIC_TASKS, BOX_NONDETERMINISTIC_TASKS (miniwob_tasks)
    ),
    _miniwob(
        id="agentgym/MiniWoBTrain-v0",
        summary="BrowserGym's training split of MiniWoB++'s tasks, coordinate actions on.",
        task_kwargs={"task": None, "task_set": "train", "coordinates": True},
    ),
    _miniwob(
        id="agentgym/MiniWoBHeldOut-v0",
        summary="BrowserGym's held-out split of MiniWoB++'s tasks, coordinate actions on.",
        task_kwargs={"task": None, "task_set": "held_out", "coordinates": True},
        nondeterministic=True,  # NONDETERMINISTIC_TASKS, BOX_NONDETERMINISTIC_TASKS (miniwob_tasks)
    ),
    *_code_exec_versions(
        "CodeExec", "Complete a HumanEval function; hidden tests run in a sandbox", "humaneval"
    ),
    *_code_exec_versions(
        "CodeExecGenerated",
        "Write a small generated Python function (7 families); sandboxed tests",
        "generated",
    ),
)


def register_all() -> None:
    """Register every id in :data:`ENTRIES` (idempotent)."""
    for entry in ENTRIES:
        register_env(entry)
