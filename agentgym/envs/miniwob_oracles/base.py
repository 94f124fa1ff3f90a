"""What a MiniWoB++ oracle sees (:class:`OracleView`) and the registry it joins (:func:`oracle`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sandboxes.web.miniwob import ElementInfo, PageState

__all__ = ["ORACLES", "OracleView", "NoOracleMove", "oracle", "norm", "typed", "fields_get"]


class NoOracleMove(RuntimeError):
    """The oracle sees no move on this page (a page it does not understand)."""


def norm(text: str | None) -> str:
    """``text`` with runs of white space collapsed, stripped, lower-cased (``None`` -> '')."""
    return " ".join((text or "").split()).lower()


@dataclass(frozen=True)
class OracleView:
    """The page as the observation shows it, for an oracle.

    Attributes:
        task: the task name (e.g. ``"click-button"``).
        utterance: the instruction.
        fields: the instruction's fields (``miniwob.fields``' extractor: e.g. ``{"target":
            "Yes"}``); empty where it has none.
        page: the page (:class:`sandboxes.web.miniwob.PageState`).
        shown: the refs the observation shows (an action may name no other).
        history: the actions executed so far this episode, in order (what an agent's own
            context holds), e.g. ``("press[Tab]",)``.
    """

    task: str
    utterance: str
    fields: Mapping[str, str]
    page: PageState
    shown: frozenset[int] = frozenset()
    history: tuple[str, ...] = ()

    def elements(self) -> list[ElementInfo]:
        """Every element the observation shows with a ref, in document order."""
        return [e for e in self.page.root.walk() if e.ref in self.shown]

    def find(
        self,
        *,
        tag: str | Iterable[str] | None = None,
        text: str | None = None,
        id: str | None = None,
        cls: str | None = None,
        contains: str | None = None,
    ) -> list[ElementInfo]:
        """Elements matching every condition given: ``tag`` (one or several), ``text`` (the
        element's own text equal to it, by :func:`norm`), ``contains`` (its text contains it),
        ``id``, ``cls`` (one of its classes)."""
        tags = {tag} if isinstance(tag, str) else set(tag) if tag is not None else None
        out = []
        for e in self.elements():
            if tags is not None and e.tag not in tags:
                continue
            if text is not None and norm(e.text) != norm(text):
                continue
            if contains is not None and norm(contains) not in norm(e.text):
                continue
            if id is not None and e.id != id:
                continue
            if cls is not None and cls not in e.classes.split():
                continue
            out.append(e)
        return out

    def one(self, **conditions: object) -> ElementInfo:
        """The first element :meth:`find` matches; :class:`NoOracleMove` when none does."""
        found = self.find(**conditions)  # type: ignore[arg-type]
        if not found:
            raise NoOracleMove(f"no element with {conditions} on the page")
        return found[0]

    def submit(self) -> ElementInfo:
        """The page's Submit button."""
        for e in self.find(tag=("button", "input_submit", "input_button")):
            if norm(e.text) == "submit" or e.id == "subbtn" or norm(str(e.value)) == "submit":
                return e
        raise NoOracleMove("no Submit button on the page")

    def quoted(self) -> list[str]:
        """The double-quoted strings of the instruction, in order."""
        return re.findall(r'"([^"]*)"', self.utterance)


#: task name -> oracle (a function of the view returning one action string).
ORACLES: dict[str, Callable[[OracleView], str]] = {}


def oracle(*tasks: str) -> Callable[[Callable[[OracleView], str]], Callable[[OracleView], str]]:
    """Register the decorated function as the oracle of ``tasks``.

    Raises:
        ValueError: a task already has an oracle.
    """

    def register(function: Callable[[OracleView], str]) -> Callable[[OracleView], str]:
        for task in tasks:
            if task in ORACLES:
                raise ValueError(f"task {task!r} already has an oracle")
            ORACLES[task] = function
        return function

    return register


def typed(view: OracleView, element: ElementInfo, text: str) -> str | None:
    """``type[ref, text]`` unless ``element`` already holds ``text``."""
    if element.value == text:
        return None
    return f"type[{element.ref}, {text}]"


def fields_get(fields: Mapping[str, str], key: str) -> str:
    """``fields[key]``; :class:`NoOracleMove` when the instruction did not give it."""
    if key not in fields:
        raise NoOracleMove(f"the instruction has no field {key!r} ({dict(fields)})")
    return fields[key]
