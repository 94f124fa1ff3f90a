"""MiniWoB++'s web tasks as text multi-turn environments, played in a real browser.

MiniWoB++ (Shi et al. 2017, "World of Bits: An Open-Domain Platform for Web-Based Agents"; Liu et
al. 2018, "Reinforcement Learning on Web Interfaces Using Workflow-Guided Exploration") is 125
small web pages, each a task generator with a JavaScript reward: click a button, fill a form,
pick a date, find an email. The pages come from the installed ``miniwob`` package and run in
headless Chromium (:class:`sandboxes.web.miniwob.MiniWoBBrowser`: fresh page and seed on every
reset, the in-page timer off, the page's clock fixed, real clicks and key events).

Ids (:mod:`agentgym.envs.miniwob_tasks` holds the lists and their sources):

* ``agentgym/MiniWoB-v0``: one task, ``task=`` (default ``click-test``).
* ``agentgym/MiniWoBHTML-v0``: the 56 tasks of WebN-T5, WebGUM and HTML-T5; the seed picks the
  task (``seed % 56``) and the instance, so seeds 0-279 play every task 5 times.
* ``agentgym/MiniWoBAll-v0``: all 125 of BrowserGym's tasks with coordinate actions on; seeds
  0-624 are BrowserGym's protocol (125 tasks x 5 seeds).
* ``agentgym/MiniWoBTrain-v0`` / ``agentgym/MiniWoBHeldOut-v0``: BrowserGym's split of the 125.

Observation: the instruction, then the page's visible elements one per line, indented by
depth, each with its ``[ref]``, tag (``input_text``, ``checkbox``, ``select``...), ``#id``,
up to three ``.class`` names (icons have no text), text, value, checked state, options, and (for tasks about colours) colours; with coordinate
actions on, each line also ends with its box ``@(left,top,width,height)`` in CSS pixels::

    Instruction: Enter "Nathalie" into the text field and press Submit.
    [4] div#form
      [5] input_text#tt value=""
      [6] button#subbtn "Submit"

The fields of the instruction (``info["fields"]`` of reset: MiniWoB++'s own extractor, or the
page's own fields on the natural-language inbox tasks) are never put in the observation. They
are privileged: on those inbox tasks they are the page's ground truth, which an odd instruction
template states the other way round, so an agent under evaluation must not read them.

Actions (one per turn, inside the suite's action format, e.g. ``<answer>click[6]</answer>``):

* ``click[ref]``: a real mouse click at the element's centre (scrolled into view first);
* ``type[ref, text]``: clear the field, then type ``text`` as key events (at most
  ``max_type_length`` printable characters of the Basic Multilingual Plane, without ``<``:
  some pages echo typed text as HTML, MiniWoB++'s ``terminal`` on Enter, so a ``<`` could make
  an element whose handler runs script, and script could write the reward; surrounding double
  quotes are dropped);
* ``press[key]``: one key or chord of :data:`sandboxes.web.miniwob.KEYS` (``Enter``, ``Tab``,
  ``Backspace``, ``ArrowDown``, ``Control+a``...);
* ``select[ref, option]``: choose an option of a ``<select>`` by its text (case and extra
  spaces ignored); on a list that takes several (``multiple``), choosing a chosen option
  un-chooses it;
* ``scroll[ref, up|down]``: scroll the element by 80 % of its height;
* with ``coordinates=True`` only: ``click_at[x, y]`` and ``drag[x1, y1, x2, y2]`` in CSS pixels
  from the page's top-left corner, inside the task area (``0 <= x < 160``, ``0 <= y < 210``).

A ref the last observation did not show (the page's frame and a wrapper shown as its child
have none), a point outside the task area, an unknown key or
option, or text that is too long, not printable or holds ``<`` is an invalid action (the shared policy of
:class:`~agentgym.text_env.TextEnv`; ``info["invalid_reason"]`` names why). No action string
raises, and typed text only ever reaches the page as key events.

Reward: the episode ends when the page ends it. ``reward_mode="strict"`` (default): 1 for a
success and 0 otherwise, where a success is MiniWoB++'s raw reward of 1, or at least the
threshold of :data:`agentgym.envs.miniwob_tasks.CONTINUOUS_REWARD_TASKS` for the tasks whose
reward is partial credit. ``reward_mode="raw"``: MiniWoB++'s raw reward in [-1, 1] (without its
time discount). The step that ends the episode has the raw reward in ``info["raw_reward"]`` and
BrowserGym's looser ``raw > 0`` in ``info["browsergym_success"]``, for comparison. Running out of
turns truncates with reward 0. A browser that fails twice (after a restart and a replay of the
episode) truncates the episode with ``info["browser_error"]``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, ClassVar

import numpy as np

from agentgym.agents import RandomAgent
from agentgym.envs.miniwob_tasks import (
    ALL_TASKS,
    COLOR_TASKS,
    CONTINUOUS_REWARD_TASKS,
    HELD_OUT_TASKS,
    HTML_TASKS,
    SIZE_TASKS,
    TRAIN_TASKS,
)
from agentgym.parsing import parse_turn
from agentgym.text_env import ActionOutcome, TextEnv

try:  # selenium: only needed once an env starts its browser
    from sandboxes.web.browser import BrowserConfig, BrowserError
    from sandboxes.web.miniwob import KEYS, TASK_AREA, ElementInfo, MiniWoBBrowser, PageState
except ModuleNotFoundError as _err:  # pragma: no cover - exercised without the web extra
    _BROWSER_IMPORT_ERROR: ModuleNotFoundError | None = _err
    KEYS = {}  # type: ignore[assignment]
    TASK_AREA = (0, 0, 160, 210)
else:
    _BROWSER_IMPORT_ERROR = None

__all__ = [
    "MiniWoBEnv",
    "TASK_SETS",
    "REWARD_MODES",
    "render_page",
    "random_action",
    "MiniWoBRandomAgent",
]

#: The task lists the ``task_set`` argument names.
TASK_SETS: dict[str, tuple[str, ...]] = {
    "all": ALL_TASKS,
    "html": HTML_TASKS,
    "train": TRAIN_TASKS,
    "held_out": HELD_OUT_TASKS,
}
REWARD_MODES: tuple[str, ...] = ("strict", "raw")

_ACTION = re.compile(r"\s*([A-Za-z_]+)\s*\[(.*)\]\s*", re.DOTALL)
_REF_DIGITS = re.compile(r"\d{1,9}")
_SHOWN_REF = re.compile(r"^ *\[(\d+)\] ", re.MULTILINE)
_NUMBER = re.compile(r"\s*(-?\d{1,6}(?:\.\d{1,6})?)\s*")
_STRUCTURAL = frozenset({"wrap", "area"})  # MiniWoB++'s frame around every task
_WRAPPERS = frozenset({"div", "span", "p", "form", "label", "section"})
_TRANSPARENT = frozenset({"rgba(0, 0, 0, 0)", "transparent"})
_KEY_NAMES = {name.lower(): name for name in KEYS}


def _quote(text: str, exact: bool = False) -> str:
    """``text`` in double quotes, ``\\`` and ``"`` escaped. An element's text has its runs of
    white space collapsed, as the page shows it; a field's value (``exact``) is kept as it is,
    with line breaks, tabs and other control characters escaped (``\\n``, ``\\t``, ``\\u0007``)."""
    if not exact:
        text = " ".join(text.split())
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    if exact:
        text = "".join(ch if ch.isprintable() or ch == " " else json.dumps(ch)[1:-1] for ch in text)
    return '"' + text + '"'


def _tag(element: ElementInfo) -> str:
    tag = element.tag
    if tag in ("input_checkbox", "input_radio"):
        return tag[len("input_") :]
    return tag


def _line(element: ElementInfo, colors: bool, boxes: bool, sizes: bool = False) -> str:
    classes = "".join(f".{c[:24]}" for c in element.classes.split()[:3])
    parts = [
        f"[{element.ref}] {_tag(element)}" + (f"#{element.id}" if element.id else "") + classes
    ]
    if element.text:
        parts.append(_quote(element.text))
    if isinstance(element.value, bool):
        parts.append("checked" if element.value else "unchecked")
    elif element.value is not None:
        parts.append(f"value={_quote(element.value, exact=True)}")
    if element.options is not None:
        parts.append("options=[" + ", ".join(_quote(o) for o in element.options) + "]")
        chosen = [element.options[i] for i in element.selected if 0 <= i < len(element.options)]
        if element.multiple:
            parts.append("multiple selected=[" + ", ".join(_quote(o) for o in chosen) + "]")
        elif chosen:
            parts.append(f"selected={_quote(chosen[0])}")
    if element.disabled:
        parts.append("disabled")
    if element.readonly:
        parts.append("readonly")
    if element.focused:
        parts.append("focused")
    if colors:
        if element.fill and element.fill not in _TRANSPARENT and element.fill != "none":
            parts.append(f"fill={element.fill}")
        if element.bg_color and element.bg_color not in _TRANSPARENT:
            parts.append(f"background={element.bg_color}")
        if element.fg_color and element.text:
            parts.append(f"color={element.fg_color}")
    if boxes:
        left, top, width, height = (round(v) for v in element.box)
        parts.append(f"@({left},{top},{width},{height})")
    elif sizes:
        parts.append("size={}x{}".format(*(round(v) for v in element.box[2:])))
    return " ".join(parts)


def render_page(
    root: ElementInfo, *, colors: bool = False, boxes: bool = False, sizes: bool = False
) -> list[str]:
    """The page's visible elements as text lines, one per element, indented two spaces a level.

    ``<body>`` and MiniWoB++'s frame (``#wrap``, ``#area``) are not shown (their children are);
    a wrapper (``div``, ``span``, ``p``, ``form``, ``label``, ``section``) with no id, class,
    text or value and one child is shown as that child. A run of text inside mixed content is shown quoted,
    without a ref (it cannot be the target of an action).

    Args:
        root: the page (:attr:`sandboxes.web.miniwob.PageState.root`).
        colors: show colours (``background=``, ``color=``, an SVG shape's ``fill=``).
        boxes: end each line with ``@(left,top,width,height)`` in CSS pixels.
        sizes: show each element's rendered size, ``size=WxH`` in CSS pixels (for the tasks
            whose instructions say "small" or "large"; implied by ``boxes``).

    Returns:
        The lines (list of str), in document order.
    """
    lines: list[str] = []

    def visit(element: ElementInfo, depth: int) -> None:
        if element.tag == "t":
            if element.text:
                box = ""
                if boxes:
                    box = " @({},{},{},{})".format(*(round(v) for v in element.box))
                lines.append("  " * depth + _quote(element.text) + box)
            return
        frame = element.tag == "body" or element.id in _STRUCTURAL
        wrapper = (
            element.tag in _WRAPPERS
            and not element.id
            and not element.classes.strip()
            and not element.text
            and element.value is None
            and len(element.children) == 1
        )
        if frame or wrapper:
            for child in element.children:
                visit(child, depth)
            return
        lines.append("  " * depth + _line(element, colors, boxes, sizes))
        for child in element.children:
            visit(child, depth + 1)

    visit(root, 0)
    return lines


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def _printable_problem(text: str) -> str | None:
    """Why ``text`` cannot be typed (WebDriver types only the Basic Multilingual Plane and reads
    U+E000-U+F8FF as special keys), or ``None``."""
    for ch in text:
        code = ord(ch)
        if code > 0xFFFF:
            return f"character U+{code:05X} is outside the Basic Multilingual Plane"
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn"):
            return f"character U+{code:04X} is not printable (category {category})"
    return None


class MiniWoBEnv(TextEnv):
    """A MiniWoB++ task, or a set of them, in headless Chromium (module docstring).

    Args:
        task: the one task to play (a name of :data:`~agentgym.envs.miniwob_tasks.ALL_TASKS`);
            ``None`` with ``task_set`` (with neither: ``click-test``).
        task_set: ``"all"``, ``"html"``, ``"train"`` or ``"held_out"`` (:data:`TASK_SETS`), or
            ``None`` with ``task``. The seed picks the task: ``seed % len(tasks)``.
        coordinates: offer ``click_at`` and ``drag`` and show element boxes.
        reward_mode: ``"strict"`` (1 for a success, else 0) or ``"raw"`` (MiniWoB++'s raw reward).
        colors: show colours: ``"auto"`` (for the tasks of
            :data:`~agentgym.envs.miniwob_tasks.COLOR_TASKS`), ``True`` or ``False``.
        max_type_length: longest text ``type`` accepts, in characters (>= 1).
        settle_s: longest wait for the page to settle after an action, in seconds (> 0).
        chromium_path, chromedriver_path: the binaries (``None``: ``$AGENTGYM_CHROMIUM`` /
            ``$AGENTGYM_CHROMEDRIVER`` or ``/usr/bin/chromium`` / ``/usr/bin/chromedriver``).
        page_load_timeout: seconds per page load (> 0).
        command_timeout: seconds per WebDriver command before the browser counts as hung (> 0).
        max_turns: turns per episode (default 10, as BrowserGym).
        max_actions_per_turn: must be 1 (the page changes after every action).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range, or both or neither of ``task`` and ``task_set``.
        ModuleNotFoundError: ``selenium`` or ``miniwob`` is missing (the message names the fix).
        sandboxes.web.browser.BrowserError: Chromium or ChromeDriver is missing.
    """

    #: Steps wait on a browser: :class:`agentgym.lockstep.LocalEnvs` steps a batch in threads.
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "io_bound": True}

    def __init__(
        self,
        *,
        task: str | None = None,
        task_set: str | None = None,
        coordinates: bool = False,
        reward_mode: str = "strict",
        colors: bool | str = "auto",
        max_type_length: int = 256,
        settle_s: float = 3.0,
        chromium_path: str | None = None,
        chromedriver_path: str | None = None,
        page_load_timeout: float = 10.0,
        command_timeout: float = 20.0,
        max_turns: int = 10,
        max_actions_per_turn: int = 1,
        max_observation_length: int = 16384,
        **kwargs: Any,
    ):
        if task_set is not None:
            if task_set not in TASK_SETS:
                raise ValueError(f"task_set must be one of {tuple(TASK_SETS)}, got {task_set!r}")
            if task is not None:
                raise ValueError("give task= or task_set=, not both")
            self.tasks: tuple[str, ...] = TASK_SETS[task_set]
        else:
            task = "click-test" if task is None else task
            if task not in ALL_TASKS:
                raise ValueError(
                    f"task must be one of MiniWoB++'s {len(ALL_TASKS)} tasks "
                    f"(agentgym.envs.miniwob_tasks.ALL_TASKS), got {task!r}"
                )
            self.tasks = (task,)
        if not isinstance(coordinates, bool):
            raise ValueError(f"coordinates must be a bool, got {coordinates!r}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        if colors not in ("auto", True, False):
            raise ValueError(f"colors must be 'auto', True or False, got {colors!r}")
        _check_int("max_type_length", max_type_length, 1)
        for name, value in (
            ("settle_s", settle_s),
            ("page_load_timeout", page_load_timeout),
            ("command_timeout", command_timeout),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
        if max_actions_per_turn != 1:
            raise ValueError("MiniWoB takes one action per turn: max_actions_per_turn must be 1")
        if _BROWSER_IMPORT_ERROR is not None:
            package = (_BROWSER_IMPORT_ERROR.name or "selenium").partition(".")[0]
            raise ModuleNotFoundError(
                f"the MiniWoB++ environments need the package {package!r}: "
                "pip install 'agentgym[web]'",
                name=package,
            )
        super().__init__(
            max_turns=max_turns,
            max_actions_per_turn=1,
            max_observation_length=max_observation_length,
            **kwargs,
        )
        self.task_set = task_set
        self.coordinates = coordinates
        self.reward_mode = reward_mode
        self.colors = colors
        self.max_type_length = int(max_type_length)
        self.settle_s = float(settle_s)
        self.browser_config = BrowserConfig(
            chromium_path=chromium_path,
            chromedriver_path=chromedriver_path,
            page_load_timeout=page_load_timeout,
            command_timeout=command_timeout,
        )
        self.browser_config.resolved()  # fail now, with the fix, if a binary is missing
        from sandboxes.web.miniwob import miniwob_html_dir

        self._html_dir = miniwob_html_dir()  # fail now, with the fix, if miniwob is missing
        self._browser: MiniWoBBrowser | None = None
        self.task: str = self.tasks[0]
        self.page: PageState | None = None
        self.fields: dict[str, str] = {}
        self.raw_reward: float | None = None
        self.page_seed: str | None = None
        self._browser_failed = False
        self._reset_seed: int | None = None
        self._shown: tuple[PageState, frozenset[int]] | None = None
        self._history: tuple[str, ...] = ()

    # ------------------------------------------------------------------ parts

    @property
    def browser(self) -> MiniWoBBrowser | None:
        """The browser (``None`` before the first reset and after close)."""
        return self._browser

    def _ensure_browser(self) -> MiniWoBBrowser:
        if self._browser is None:
            self._browser = MiniWoBBrowser(
                self.browser_config, settle_s=self.settle_s, html_dir=self._html_dir
            )
        return self._browser

    def close(self) -> None:
        """Stop the browser (no Chromium or ChromeDriver process is left). Idempotent."""
        browser, self._browser = self._browser, None
        if browser is not None:
            browser.close()
        super().close()

    def show_colors(self) -> bool:
        """Whether observations of the current task show colours."""
        return self.task in COLOR_TASKS if self.colors == "auto" else bool(self.colors)

    def success_threshold(self, task: str | None = None) -> float:
        """The raw reward that counts as a success on ``task`` (default: the current one)."""
        return float(CONTINUOUS_REWARD_TASKS.get(task or self.task, 1.0))

    # ------------------------------------------------------------------ TextEnv hooks

    @property
    def instructions_text(self) -> str:
        coords = (
            " click_at[x, y] clicks the point (x, y) and drag[x1, y1, x2, y2] drags the mouse "
            "from one point to another, in pixels from the page's top-left corner, inside the "
            "task area (0 <= x < 160, 0 <= y < 210); each element's box is shown as "
            "@(left,top,width,height)."
            if self.coordinates
            else ""
        )
        return (
            "MiniWoB++: do what the instruction says on a small web page. Each observation shows "
            "the instruction, then the page's elements one per line with their [ref] numbers, "
            "indented by depth, with text, values, checked states and options. Actions: "
            "click[ref] clicks an element; type[ref, text] replaces a field's text with text; "
            "press[key] presses a key (" + ", ".join(KEYS) + "); select[ref, option] chooses "
            "an option of a list; scroll[ref, up] or scroll[ref, down] scrolls an element."
            + coords
            + " The episode ends when the page ends it: "
            + (
                "reward 1 for a success, else 0."
                if self.reward_mode == "strict"
                else "reward from -1 (failure) to 1 (success), partial credit between."
            )
            + " A ref that the last observation did not show is an invalid action."
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def example_actions(self) -> list[str]:
        """``click[5]``: the format example of the instructions (the action set is not finite)."""
        return ["click[5]"]

    def _pick_task(self, options: dict[str, Any]) -> str:
        chosen = options.get("task")
        if chosen is not None:
            if chosen not in self.tasks:
                raise ValueError(
                    f"options['task'] must be one of this env's {len(self.tasks)} tasks, "
                    f"got {chosen!r}"
                )
            return str(chosen)
        if len(self.tasks) == 1:
            return self.tasks[0]
        if self._reset_seed is not None:
            return self.tasks[int(self._reset_seed) % len(self.tasks)]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        self.task = self._pick_task(options)
        js_seed = str(int(self.np_random.integers(2**31 - 1)))
        browser = self._ensure_browser()
        self.page = browser.open(self.task, js_seed)
        self.raw_reward = None
        self._browser_failed = False
        self._history = ()
        if self.page.fields is not None:  # the page's own (the natural-language inbox tasks)
            self.fields = dict(self.page.fields)
        else:
            self.fields = _fields(self.task, self.page.utterance)
        self.page_seed = js_seed
        return {"task": self.task, "fields": dict(self.fields)}

    def _render_state(self) -> str:
        assert self.page is not None
        lines = render_page(
            self.page.root,
            colors=self.show_colors(),
            boxes=self.coordinates,
            sizes=self.task in SIZE_TASKS,
        )
        text = "\n".join([f"Instruction: {self.page.utterance}", *lines])
        limit = self.observation_space.max_length
        if len(text) > limit:  # keep whole lines, and say what was left out
            kept: list[str] = []
            size = 0
            for i, line in enumerate(text.split("\n")):
                note = f"... ({len(lines) + 1 - i} more lines not shown)"
                if size + len(line) + 1 + len(note) > limit:
                    kept.append(note)
                    break
                kept.append(line)
                size += len(line) + 1
            text = "\n".join(kept)
        return text

    def _success(self) -> bool:
        return self.raw_reward is not None and self.raw_reward >= self.success_threshold()

    # ------------------------------------------------------------------ oracle

    def has_oracle(self, task: str | None = None) -> bool:
        """Whether ``task`` (default: the current one) has a scripted oracle
        (:data:`agentgym.envs.miniwob_oracles.ORACLES`)."""
        from agentgym.envs.miniwob_oracles import ORACLES

        return (task or self.task) in ORACLES

    def oracle_actions(self) -> list[str]:
        """The scripted oracle's next action, read from the current page (what the observation
        shows, and the instruction's fields). A task with no oracle, or a page its oracle does not
        understand, gets ``click`` on the first element shown: a recognised action, no solution.

        Raises:
            RuntimeError: called before :meth:`reset`.
        """
        from agentgym.envs.miniwob_oracles import ORACLES, NoOracleMove, OracleView

        if self.page is None:
            raise RuntimeError("call reset() before oracle_actions()")
        shown = self.shown_refs()
        solver = ORACLES.get(self.task)
        if solver is not None:
            view = OracleView(
                self.task, self.page.utterance, dict(self.fields), self.page, shown, self._history
            )
            try:
                return [solver(view)]
            except (NoOracleMove, KeyError, IndexError, ValueError):
                pass
        return [f"click[{min(shown)}]"] if shown else ["press[Tab]"]

    # ------------------------------------------------------------------ actions

    def shown_refs(self) -> frozenset[int]:
        """The refs the current observation shows: the only ones an action may name (the page's
        frame, a wrapper shown as its child and lines cut by the length limit have none)."""
        if self.page is None:
            return frozenset()
        if self._shown is None or self._shown[0] is not self.page:
            text = self._render_state()
            self._shown = (self.page, frozenset(int(r) for r in _SHOWN_REF.findall(text)))
        return self._shown[1]

    def _element(self, ref_text: str) -> ElementInfo | None:
        ref = ref_number(ref_text)
        if ref is None or self.page is None:
            return None
        return self.page.element(ref) if ref in self.shown_refs() else None

    def _parse_action(self, token: str) -> tuple[str, tuple[Any, ...], str] | None:
        parsed = self._parse_or_reason(token)
        return parsed if isinstance(parsed, tuple) else None

    def _parse_or_reason(self, token: str) -> tuple[str, tuple[Any, ...], str] | str:
        """The action ``(kind, args, canonical text)``, or why ``token`` is not one."""
        match = _ACTION.fullmatch(token)
        if match is None:
            return (
                "an action is click[ref], type[ref, text], press[key], select[ref, option] or "
                "scroll[ref, up|down]"
            )
        kind, body = match.group(1).lower(), match.group(2)
        if kind != "type" and re.search(r"\]\s*[A-Za-z_]+\s*\[", body):
            return "one action per turn: this turn holds several"
        if kind in ("click_at", "drag"):
            if not self.coordinates:
                return f"{kind} needs coordinate actions (agentgym/MiniWoBAll-v0, coordinates=True)"
            return self._parse_points(kind, body)
        if kind == "press":
            name = _KEY_NAMES.get(body.strip().lower())
            if name is None:
                return f"press takes one of {', '.join(KEYS)}, got {body.strip()[:40]!r}"
            return ("press", (name,), f"press[{name}]")
        if kind not in ("click", "type", "select", "scroll"):
            return f"unknown action {kind[:40]!r}"
        ref_text, comma, rest = body.partition(",")
        element = self._element(ref_text)
        if element is None:
            return (
                f"no element {ref_text.strip()[:20]!r} on the page: a ref is a number in "
                "brackets from the last observation"
            )
        ref = element.ref
        if kind == "click":
            if comma:
                return "click takes one ref: click[ref]"
            return ("click", (ref,), f"click[{ref}]")
        if not comma:
            return f"{kind} takes a ref and an argument: {kind}[ref, ...]"
        argument = rest[1:] if rest.startswith(" ") else rest
        if kind == "type":
            if len(argument) >= 2 and argument.startswith('"') and argument.endswith('"'):
                argument = argument[1:-1]
            if len(argument) > self.max_type_length:
                return f"the text is over {self.max_type_length} characters"
            problem = _printable_problem(argument)
            if problem is not None:
                return f"the text cannot be typed: {problem}"
            if "<" in argument:
                # A page may echo typed text as HTML (MiniWoB++'s terminal writes a command into
                # innerHTML on Enter): without "<" no element, handler or script can come of it.
                return "the text cannot be typed: '<' is refused (a page may echo text as HTML)"
            return ("type", (ref, argument), f"type[{ref}, {argument}]")
        if kind == "select":
            if element.options is None:
                return f"element [{ref}] is not a list of options"
            wanted = " ".join(argument.strip().strip('"').split()).lower()
            for index, option in enumerate(element.options):
                if " ".join(option.split()).lower() == wanted:
                    if element.multiple and index in element.selected:
                        return ("deselect", (ref, index), f"select[{ref}, {option}]")
                    return ("select", (ref, index), f"select[{ref}, {option}]")
            return f"element [{ref}] has no option {argument.strip()[:60]!r}"
        direction = argument.strip().lower()
        if direction not in ("up", "down"):
            return "scroll takes up or down: scroll[ref, down]"
        return ("scroll", (ref, 1 if direction == "down" else -1), f"scroll[{ref}, {direction}]")

    def _parse_points(self, kind: str, body: str) -> tuple[str, tuple[Any, ...], str] | str:
        pieces = body.split(",")
        wanted = 2 if kind == "click_at" else 4
        numbers = [_NUMBER.fullmatch(p) for p in pieces]
        if len(pieces) != wanted or any(n is None for n in numbers):
            return f"{kind} takes {wanted} numbers" + (
                ": click_at[x, y]" if kind == "click_at" else ": drag[x1, y1, x2, y2]"
            )
        values = [round(float(n.group(1))) for n in numbers if n is not None]  # pixels
        left, top, width, height = TASK_AREA
        for x, y in zip(values[0::2], values[1::2], strict=True):
            if not (left <= x < left + width and top <= y < top + height):
                return f"the point ({x}, {y}) is outside the task area (160 x 210 pixels)"
        text = ", ".join(str(v) for v in values)
        return (kind, tuple(values), f"{kind}[{text}]")

    def _action_name(self, action: tuple[str, tuple[Any, ...], str]) -> str:
        return action[2]

    def _apply_action(self, action: tuple[str, tuple[Any, ...], str]) -> ActionOutcome:
        kind, args, name = action
        self._history = (*self._history, name)
        browser = self._ensure_browser()
        before = self._render_state()
        restarts = browser.restarts
        try:
            result, self.page = browser.act(kind, *args)
        except BrowserError as err:  # failed again after a restart: drop it, the next reset
            self._browser_failed = True  # starts a new one
            self._browser = None
            browser.close()
            return ActionOutcome(0.0, False, terminated=True, info={"browser_error": str(err)})
        info: dict[str, Any] = {}
        if browser.restarts != restarts:
            info["browser_restarts"] = browser.restarts - restarts
        if result is not None:
            info["action_error"] = result
        if self.page.done:
            self.raw_reward = self.page.raw_reward
            success = self._success()
            reward = self.raw_reward if self.reward_mode == "raw" else float(success)
            info.update(
                raw_reward=self.raw_reward,
                browsergym_success=self.raw_reward > 0,
                reward_reason=self.page.reason,
            )
            return ActionOutcome(reward, True, terminated=True, info=info)
        return ActionOutcome(0.0, self._render_state() != before, info=info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`TextEnv.step`, with the reason an action is invalid named (e.g. ``no element
        '99' on the page``), and a browser that failed twice ending the episode as truncated."""
        reasons: list[str] = []
        if self._has_reset and not self._episode_over:
            parsed = parse_turn(action, self.action_format, self.max_actions_per_turn)
            if parsed.error is None:
                for piece in parsed.actions:
                    why = self._parse_or_reason(piece)
                    if isinstance(why, str):
                        reasons.append(f"{piece[:80]!r}: {why}")
        observation, reward, terminated, truncated, info = super().step(action)
        reason = info.get("invalid_reason")
        if reasons and isinstance(reason, str) and reason.startswith("unrecognised action"):
            info["invalid_reason"] = "unrecognised action(s): " + "; ".join(reasons)
        if self._browser_failed and terminated:
            terminated, truncated = False, True
        return observation, reward, terminated, truncated, info


def ref_number(text: str) -> int | None:
    """The element ref an action names: ``text`` is 1 to 9 digits (``\\d``: any Unicode decimal
    digit), optionally in brackets, with white space (``str.isspace``) around each part
    (``"12"``, ``" [ 12 ] "``, ``"[12"``); else ``None``.

    The forms of the regex ``r"\\s*\\[?\\s*(\\d{1,9})\\s*\\]?\\s*"`` (full match), read by
    stripping instead: that regex backtracks over its adjacent white-space runs (``click[`` and
    16,000 spaces took 3.4 s); this takes time linear in ``len(text)``.

    Example:
        >>> ref_number(" [ 12 ] "), ref_number("[12"), ref_number("1 2"), ref_number("[[1]")
        (12, 12, None, None)
    """
    inner = text.strip()
    if inner.startswith("["):
        inner = inner[1:].lstrip()
    if inner.endswith("]"):
        inner = inner[:-1].rstrip()
    return int(inner) if _REF_DIGITS.fullmatch(inner) else None


def _fields(task: str, utterance: str) -> dict[str, str]:
    """The instruction's fields by MiniWoB++'s own extractor (``miniwob.fields``), or ``{}``."""
    try:
        from miniwob.fields import get_field_extractor
    except ImportError:  # pragma: no cover - miniwob is checked at construction
        return {}
    try:
        return {str(k): str(v) for k, v in get_field_extractor(task)(utterance)}
    except Exception:  # an utterance the extractor does not parse: no fields, as miniwob does
        return {}


_LINE = re.compile(r"\s*\[(\d+)\] (\S+)(.*)")
_OPTIONS = re.compile(r"options=\[(.*?)\](?: selected=|$| disabled| focused| @)")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def random_action(observation: str, rng: np.random.Generator) -> str:
    """A random agent's action from what it sees (no privileged state).

    A uniform choice among: ``click[ref]`` of every element shown; ``type[ref, word]`` of every
    text field, with a word drawn from the instruction; ``select[ref, option]`` of every option
    of every list.

    Args:
        observation: a MiniWoB observation.
        rng: the generator.

    Returns:
        One action (not wrapped in the action format).
    """
    lines = observation.splitlines()
    instruction = lines[0].removeprefix("Instruction: ") if lines else ""
    words = [w.strip('".,:;!?') for w in instruction.split()]
    words = [w for w in words if w] or ["a"]
    choices: list[str] = []
    for line in lines[1:]:
        match = _LINE.match(line)
        if match is None:
            continue
        ref, tag, rest = match.groups()
        tag = tag.partition("#")[0]
        choices.append(f"click[{ref}]")
        typable = tag.startswith("input_") and tag not in ("input_button", "input_submit")
        if (typable or tag == "textarea") and " readonly" not in rest:
            choices.append(f"type[{ref}, {words[int(rng.integers(len(words)))]}]")
        options = _OPTIONS.search(rest)
        if tag == "select" and options is not None:
            for option in _QUOTED.findall(options.group(1)):
                choices.append(f"select[{ref}, {option.replace(chr(92) + chr(34), chr(34))}]")
    if not choices:
        return "press[Tab]"
    return choices[int(rng.integers(len(choices)))]


class MiniWoBRandomAgent(RandomAgent):
    """The random agent for ``agentgym eval --agent agentgym.envs.miniwob:MiniWoBRandomAgent``.

    Per episode a generator ``numpy.random.default_rng([seed, episode_seed])`` drives
    :func:`random_action` on the latest observation.
    """

    name = "miniwob-random"
    description = (
        "uniform over the click, type (a word of the instruction) and select actions the "
        "observation shows, one per turn"
    )

    def choose(self, request: Any, rng: np.random.Generator) -> str:
        return random_action(request.observation, rng)
