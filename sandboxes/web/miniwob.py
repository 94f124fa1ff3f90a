"""MiniWoB++'s task pages in headless Chromium: load, seed, read, act, recover.

MiniWoB++ (Shi et al. 2017, "World of Bits"; Liu et al. 2018, "Reinforcement Learning on Web
Interfaces Using Workflow-Guided Exploration") is 125 small self-contained HTML pages, each with a
JavaScript task generator and reward. The pages come from the installed ``miniwob`` package
(Farama, MIT; :func:`miniwob_html_dir`), loaded as ``file://`` URLs: nothing is fetched from a
network. :class:`MiniWoBBrowser` is a :class:`~sandboxes.web.browser.ChromiumBrowser` (the same
start, clean-up, orphan reaping and restart machinery as ``WebShop-v0``'s browser) that drives
one task page at a time.

How an episode runs (the protocol of the ``miniwob`` package's ``selenium_instance.py``, with the
changes LLM agents need):

* :meth:`MiniWoBBrowser.open` reloads the task page (no state leaks from the last episode),
  seeds the page's random numbers with ``Math.seedrandom(seed)``, starts the episode with
  ``core.startEpisodeReal()``, and then **disables the episode timer**: MiniWoB++ ends an
  episode with reward -1 after ``core.EPISODE_MAX_TIME`` (10 s by default) of wall-clock time, far
  less than an LLM's turn. The timer is cleared and replaced by a sentinel, so the page's
  ``core.endEpisode`` still pays out; the countdown display is stopped.
* **The page's clock starts at a fixed instant** (:data:`FIXED_CLOCK_MS`, 2024-01-15 12:00:00
  UTC, in the UTC time zone): ``new Date()`` and ``Date.now()`` return that instant plus the
  real milliseconds since the page loaded (so animations still run), which makes date pickers
  and "today" the same in every process on every day. Installed before any page script runs
  (DevTools ``Page.addScriptToEvaluateOnNewDocument``).
* Every action is followed by a bounded **settle**: the driver waits until the page has no
  pending short timer (``setTimeout`` of at most :data:`SETTLE_TIMER_MS`) or animation frame
  callback (both counted by the same injected script), no running jQuery animation or finite
  CSS animation or transition, and no image of its style sheets still loading, for at most
  ``settle_s`` seconds, then reads the page in one round trip (:meth:`MiniWoBBrowser.read`):
  the instruction (``core.getUtterance()``), the visible elements with their refs
  (``core.getDOMInfo()``, plus each ``<select>``'s options and each SVG shape's fill), and the
  reward globals (``WOB_DONE_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL``, ``WOB_REWARD_REASON``).
* Actions are real input where WebDriver has it: a click is a pointer press and release at the
  element's centre (scrolled into view first); typing is key events (WebDriver's element send
  keys, after clearing the field); a key press is a key event; a selection is WebDriver's
  select; a scroll sets the element's scroll position. Text is always sent as keys or as a
  script *argument*, never pasted into markup or script source.
* A failed browser (crashed renderer, hung script, dead driver) is restarted and the episode
  replayed from its seed and actions (:meth:`MiniWoBBrowser._reopen`), then the failed operation
  retried once; a second failure raises :class:`~sandboxes.web.browser.BrowserError`.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from sandboxes.web.browser import BrowserConfig, ChromiumBrowser

__all__ = [
    "FIXED_CLOCK_MS",
    "KEYS",
    "SETTLE_TIMER_MS",
    "TASK_AREA",
    "MiniWoBBrowser",
    "PageState",
    "ElementInfo",
    "miniwob_html_dir",
    "task_url",
]

#: The page's clock at load: 2024-01-15 12:00:00 UTC, in milliseconds since the Unix epoch.
FIXED_CLOCK_MS = 1_705_320_000_000
#: A ``setTimeout`` of at most this many milliseconds is waited for by the settle after an action;
#: a longer one (a countdown, the episode timer) is not.
SETTLE_TIMER_MS = 2_000
#: The task area of every MiniWoB++ page, in CSS pixels from the page's top-left corner:
#: ``(left, top, width, height)`` of ``#wrap`` (``core.css``: 160 x 210, the instruction on top).
TASK_AREA = (0, 0, 160, 210)

#: The keys ``press[...]`` accepts: name -> WebDriver key sequence (modifier chords as tuples).
KEYS: dict[str, tuple[str, ...]] = {
    "Enter": (Keys.ENTER,),
    "Tab": (Keys.TAB,),
    "Shift+Tab": (Keys.SHIFT, Keys.TAB),
    "Backspace": (Keys.BACKSPACE,),
    "Delete": (Keys.DELETE,),
    "Escape": (Keys.ESCAPE,),
    "Space": (Keys.SPACE,),
    "ArrowUp": (Keys.ARROW_UP,),
    "ArrowDown": (Keys.ARROW_DOWN,),
    "ArrowLeft": (Keys.ARROW_LEFT,),
    "ArrowRight": (Keys.ARROW_RIGHT,),
    "Home": (Keys.HOME,),
    "End": (Keys.END,),
    "PageUp": (Keys.PAGE_UP,),
    "PageDown": (Keys.PAGE_DOWN,),
    "Control+PageUp": (Keys.CONTROL, Keys.PAGE_UP),  # a year back in jQuery UI's date picker
    "Control+PageDown": (Keys.CONTROL, Keys.PAGE_DOWN),
    "Control+a": (Keys.CONTROL, "a"),
    "Control+c": (Keys.CONTROL, "c"),
    "Control+v": (Keys.CONTROL, "v"),
    "Control+x": (Keys.CONTROL, "x"),
}

# Installed before any page script (Page.addScriptToEvaluateOnNewDocument): the fixed clock, and
# a count of pending short timers for the settle. Both are plain functions of the page's own
# time; nothing here reads input from a model.
_PRELUDE_JS = r"""
(() => {
  const RealDate = Date;
  const start = performance.now();
  const now = () => %(clock)d + Math.floor(performance.now() - start);
  function FixedDate(...args) {
    if (!new.target) return new RealDate(now()).toString();
    return args.length ? new RealDate(...args) : new RealDate(now());
  }
  FixedDate.prototype = RealDate.prototype;
  FixedDate.now = now;
  FixedDate.UTC = RealDate.UTC;
  FixedDate.parse = RealDate.parse;
  Object.defineProperty(FixedDate.prototype, "constructor", {value: FixedDate});
  window.Date = FixedDate;
  const pending = new Set();
  const realSetTimeout = window.setTimeout.bind(window);
  const realClearTimeout = window.clearTimeout.bind(window);
  window.setTimeout = function (fn, delay, ...rest) {
    const short = !(delay > %(settle)d);
    let id = null;
    id = realSetTimeout(function () {
      pending.delete(id);
      return typeof fn === "function" ? fn.apply(this, rest) : undefined;
    }, delay);
    if (short && typeof fn === "function") pending.add(id);
    return id;
  };
  window.clearTimeout = function (id) { pending.delete(id); return realClearTimeout(id); };
  const frames = new Set();
  const realRequestFrame = window.requestAnimationFrame.bind(window);
  const realCancelFrame = window.cancelAnimationFrame.bind(window);
  window.requestAnimationFrame = function (fn) {
    let id = null;
    id = realRequestFrame(function (t) { frames.delete(id); return fn(t); });
    frames.add(id);
    return id;
  };
  window.cancelAnimationFrame = function (id) { frames.delete(id); return realCancelFrame(id); };
  // Images a page's own style sheets name (e.g. icons drawn with `content: url(...)`): an icon
  // whose image has not loaded yet has no size, so it would be missing from a read.
  let images = null;
  function styleImages() {
    const out = [];
    for (const sheet of Array.from(document.styleSheets)) {
      let rules = [];
      try { rules = Array.from(sheet.cssRules || []); } catch (e) { continue; }
      for (const rule of rules) {
        const text = rule.cssText || "";
        for (const m of text.matchAll(/url\(["']?([^"')]+)["']?\)/g)) {
          const img = new Image();
          img.src = new URL(m[1], sheet.href || document.baseURI).href;
          out.push(img);
        }
      }
    }
    return out;
  }
  window.__agentgymPendingTimers = () => {
    if (images === null && document.readyState === "complete") images = styleImages();
    const loading = (images || []).filter((img) => !img.complete).length +
      Array.from(document.images).filter((img) => !img.complete).length;
    const running = document.getAnimations ? document.getAnimations().filter((a) =>
      a.playState === "running" && a.effect && isFinite(a.effect.getComputedTiming().endTime)
    ).length : 0;
    return pending.size + frames.size + loading + running;
  };
})();
"""

_START_JS = """
Math.seedrandom(arguments[0]);
core.startEpisodeReal();
if (core.EP_TIMER !== null) clearTimeout(core.EP_TIMER);
core.EP_TIMER = -1;  // not null, so core.endEpisode still pays out; no timer behind it
core.clearTimer();
return true;
"""


_READ_FUNCTION = """
function read() {
const root = core.getDOMInfo();
const extra = {};
for (const [ref, el] of Object.entries(core.previousDOMInfo)) {
  if (el instanceof HTMLSelectElement) {
    extra[ref] = {options: Array.from(el.options).map((o) => o.text.replace(/\\s+/g, " ").trim()),
                  selected: Array.from(el.options).flatMap((o, i) => o.selected ? [i] : []),
                  multiple: el.multiple};
  } else if (el instanceof SVGElement) {
    const style = getComputedStyle(el);
    extra[ref] = {fill: style.fill, stroke: style.stroke};
  }
  if (el.disabled === true) (extra[ref] = extra[ref] || {}).disabled = true;
  if (el.readOnly === true) (extra[ref] = extra[ref] || {}).readonly = true;
}
// The natural-language inbox tasks' getUtterance answers {utterance, fields}: the fields are the
// answer's parts and never reach the observation.
const said = core.getUtterance();
const structured = said !== null && typeof said === "object";
return {
  utterance: structured ? String(said.utterance) : said,
  fields: structured && said.fields && typeof said.fields === "object" ? said.fields : null,
  root: root,
  extra: extra,
  done: WOB_DONE_GLOBAL === true,
  raw_reward: Number(WOB_RAW_REWARD_GLOBAL),
  reason: WOB_REWARD_REASON === null || WOB_REWARD_REASON === undefined
    ? null : String(WOB_REWARD_REASON),
};
}
"""
_READ_JS = _READ_FUNCTION + "return read();"

# Wait (at most arguments[0] ms) until no short timer is pending, no jQuery animation or request
# runs and the task says it is ready; then answer [settled, the page read if arguments[1]].
_SETTLE_JS = (
    _READ_FUNCTION
    + """
const done = arguments[arguments.length - 1];
const limit = performance.now() + arguments[0];
const wantRead = arguments[1];
function busy() {
  const timers = window.__agentgymPendingTimers ? window.__agentgymPendingTimers() : 0;
  const jq = window.jQuery;
  const animating = jq && jq.fn && jq(":animated").length > 0;
  return timers > 0 || animating || (jq && jq.active > 0) || window.WOB_TASK_READY === false;
}
function check() {
  if (!busy() || performance.now() > limit) {
    done([!busy(), wantRead ? read() : null]);
  } else {
    setTimeout(check, 5);
  }
}
check();
"""
)

# Scroll the element into view where it is not, and return its centre in viewport pixels.
_CENTRE_JS = """
const el = core.previousDOMInfo[arguments[0]];
if (!el || !el.isConnected) return null;
el.scrollIntoView({block: "nearest", inline: "nearest"});
const r = el.getBoundingClientRect();
if (r.width === 0 || r.height === 0) return null;
return [r.left + r.width / 2, r.top + r.height / 2];
"""

_ELEMENT_JS = """
const el = core.previousDOMInfo[arguments[0]];
return el && el.isConnected ? el : null;
"""

_SCROLL_JS = """
const el = core.previousDOMInfo[arguments[0]];
if (!el || !el.isConnected) return null;
const before = el.scrollTop;
const step = Math.max(40, Math.floor(el.clientHeight * 0.8));
el.scrollTop = before + arguments[1] * step;
return el.scrollTop !== before;
"""


def miniwob_html_dir() -> Path:
    """The task pages of the installed ``miniwob`` package (``.../miniwob/html``), found without
    importing it (its import registers Gymnasium ids of its own).

    Raises:
        ModuleNotFoundError: ``miniwob`` is not installed; the message names the fix.
    """
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the MiniWoB++ environments need the package 'miniwob' (its 125 task pages): "
            "pip install 'agentgym[web]' (pins miniwob==1.1.0)",
            name="miniwob",
        )
    html = Path(next(iter(spec.submodule_search_locations))) / "html"
    if not (html / "core" / "core.js").is_file():
        raise ModuleNotFoundError(
            f"the installed 'miniwob' package has no task pages under {html}: reinstall it "
            "(pip install --force-reinstall miniwob==1.1.0)",
            name="miniwob",
        )
    return html


def task_url(task: str, html_dir: Path | None = None) -> str:
    """The ``file://`` URL of ``task``'s page.

    Raises:
        ValueError: no page of that name (the message names the directory).
    """
    root = (html_dir or miniwob_html_dir()) / "miniwob"
    page = root / f"{task}.html"
    if not task or "/" in task or os.sep in task or not page.is_file():
        raise ValueError(f"no MiniWoB++ task page {task!r} in {root}")
    return page.as_uri()


@dataclass(frozen=True)
class ElementInfo:
    """One visible element of the page, as ``core.getDOMInfo()`` reports it.

    Attributes:
        ref: the element's ref (int; > 0 for elements, < 0 for the pseudo-elements of text runs).
        tag: lower-case tag, ``input_<type>`` for inputs (``core.getDOMInfo``'s convention),
            ``t`` for a text run.
        box: ``(left, top, width, height)`` in CSS pixels from the viewport's top-left.
        text: the element's own text (its text-only children joined), or ``None``.
        value: an input's or textarea's value (str), a checkbox's or radio's checked state
            (bool), or ``None``.
        id: the element's ``id`` attribute ('' when none).
        classes: its ``class`` attribute ('' when none).
        bg_color, fg_color: computed CSS colours (``rgb(...)``), or ``None``.
        focused: it has the keyboard focus.
        options: a ``<select>``'s option texts, else ``None``; ``selected`` the indices of its
            chosen options; ``multiple`` whether it takes several.
        fill: an SVG shape's computed fill colour, else ``None``.
        disabled: the element is disabled.
        readonly: a read-only input or textarea (it takes no typed text).
        children: the child elements, in document order.
    """

    ref: int
    tag: str
    box: tuple[float, float, float, float]
    text: str | None = None
    value: str | bool | None = None
    id: str = ""
    classes: str = ""
    bg_color: str | None = None
    fg_color: str | None = None
    focused: bool = False
    options: tuple[str, ...] | None = None
    selected: tuple[int, ...] = ()
    multiple: bool = False
    fill: str | None = None
    disabled: bool = False
    readonly: bool = False
    children: tuple[ElementInfo, ...] = ()

    def walk(self) -> list[ElementInfo]:
        """This element and all its descendants, in document order."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


@dataclass(frozen=True)
class PageState:
    """What one read of the page returned.

    Attributes:
        utterance: the task's instruction (``core.getUtterance()``; its ``utterance`` part where
            a page answers ``{utterance, fields}``).
        fields: the instruction's fields where the page gives them itself (the natural-language
            inbox tasks), else ``None``.
        root: the ``<body>`` element and everything visible under it.
        done: the page ended the episode (``WOB_DONE_GLOBAL``).
        raw_reward: MiniWoB++'s raw reward of the ended episode in [-1, 1]
            (``WOB_RAW_REWARD_GLOBAL``; 0 while the episode runs).
        reason: the page's reason for its reward, or ``None``.
        settled: the page was quiet (no short timer, no animation) when read.
    """

    utterance: str
    fields: dict[str, str] | None
    root: ElementInfo
    done: bool
    raw_reward: float
    reason: str | None
    settled: bool = True
    refs: frozenset[int] = field(default=frozenset())

    def element(self, ref: int) -> ElementInfo | None:
        """The element with ``ref``, or ``None``."""
        for element in self.root.walk():
            if element.ref == ref:
                return element
        return None


def _colour(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _element(data: dict[str, Any], extra: dict[str, Any]) -> ElementInfo:
    ref = int(data.get("ref", 0))
    more = extra.get(str(ref), {})
    value = data.get("value")
    if value is not None and not isinstance(value, bool):
        value = str(value)
    text = data.get("text")
    options = more.get("options")
    return ElementInfo(
        ref=ref,
        tag=str(data.get("tag", "")).lower(),
        box=tuple(float(data.get(k) or 0.0) for k in ("left", "top", "width", "height")),
        text=str(text) if text is not None else None,
        value=value,
        id=str(data.get("id") or ""),
        classes=str(data.get("classes") or "") if isinstance(data.get("classes"), str) else "",
        bg_color=_colour(data.get("bgColor")),
        fg_color=_colour(data.get("fgColor")),
        focused=bool(data.get("focused", False)),
        options=tuple(str(o) for o in options) if isinstance(options, list) else None,
        selected=tuple(int(i) for i in more.get("selected") or ()),
        multiple=bool(more.get("multiple", False)),
        fill=_colour(more.get("fill")),
        disabled=bool(more.get("disabled", False)),
        readonly=bool(more.get("readonly", False)),
        children=tuple(_element(child, extra) for child in data.get("children") or ()),
    )


def _state(data: dict[str, Any], settled: bool) -> PageState:
    root = _element(data["root"] or {"tag": "body"}, data.get("extra") or {})
    fields = data.get("fields")
    return PageState(
        utterance=str(data.get("utterance") or ""),
        fields={str(k): str(v) for k, v in fields.items()} if isinstance(fields, dict) else None,
        root=root,
        done=bool(data.get("done")),
        raw_reward=float(data.get("raw_reward") or 0.0),
        reason=data.get("reason"),
        settled=settled,
        refs=frozenset(e.ref for e in root.walk() if e.ref > 0),
    )


class MiniWoBBrowser(ChromiumBrowser):
    """One headless Chromium that plays MiniWoB++ task pages (module docstring).

    Args:
        config: how to start Chromium (its ``extra_flags``/``extra_env`` are added to this
            class's: ``--lang=en-US``, ``TZ=UTC``, ``LANG=en_US.UTF-8``).
        settle_s: longest wait, in seconds, for the page to settle after an action (> 0).
        html_dir: the task pages (``None``: :func:`miniwob_html_dir`).

    Raises:
        sandboxes.web.browser.BrowserError: a binary is missing (the message says how to install).
        ModuleNotFoundError: ``miniwob`` is not installed.
    """

    def __init__(
        self,
        config: BrowserConfig | None = None,
        *,
        settle_s: float = 3.0,
        html_dir: Path | None = None,
    ):
        config = config or BrowserConfig()
        config = BrowserConfig(
            chromium_path=config.chromium_path,
            chromedriver_path=config.chromedriver_path,
            page_load_timeout=config.page_load_timeout,
            command_timeout=config.command_timeout,
            max_restarts=config.max_restarts,
            extra_flags=("--lang=en-US", *config.extra_flags),
            extra_env=(("TZ", "UTC"), ("LANG", "en_US.UTF-8"), *config.extra_env),
        )
        if not settle_s > 0:
            raise ValueError(f"settle_s must be > 0 seconds, got {settle_s!r}")
        self.html_dir = html_dir or miniwob_html_dir()
        super().__init__((self.html_dir / "miniwob").as_uri(), config)
        self.settle_s = float(settle_s)
        self.task: str | None = None
        self.seed: str | None = None
        self.actions: list[tuple[str, tuple[Any, ...]]] = []
        self._pointer: tuple[int, int] | None = None

    # ------------------------------------------------------------------ lifecycle hooks

    def _after_start(self, driver: Any) -> None:
        driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument",
            {"source": _PRELUDE_JS % {"clock": FIXED_CLOCK_MS, "settle": SETTLE_TIMER_MS}},
        )
        driver.set_script_timeout(self.settle_s + self.config.command_timeout)

    def _reopen(self) -> None:
        """Replay the episode on a fresh browser: reload the task, reseed, redo every action."""
        if self.task is None or self.seed is None:
            return
        # Read after every step, as the episode did: a read assigns the refs the actions name.
        self._start_episode(self.task, self.seed)
        self._settle_and_read()
        for kind, args in self.actions:
            self._perform(kind, args)

    # ------------------------------------------------------------------ episode

    def _start_episode(self, task: str, seed: str) -> None:
        driver = self._driver
        driver.get(task_url(task, self.html_dir))
        driver.execute_script(_START_JS, seed)
        self._settle()

    def _settle(self) -> bool:
        settled, _ = self._driver.execute_async_script(_SETTLE_JS, self.settle_s * 1000.0, False)
        return bool(settled)

    def _settle_and_read(self) -> PageState:
        settled, data = self._driver.execute_async_script(_SETTLE_JS, self.settle_s * 1000.0, True)
        return _state(data, bool(settled))

    def read(self, settled: bool = True) -> PageState:
        """Read the page now (one round trip).

        Raises:
            WebDriverException: the page or the browser failed (the callers recover).
        """
        data = self._driver.execute_script(_READ_JS)
        return _state(data, settled)

    def open(self, task: str, seed: str) -> PageState:
        """Start an episode of ``task`` seeded with ``seed`` (any string) and read it.

        Raises:
            ValueError: no such task page.
            sandboxes.web.browser.BrowserError: the browser failed twice.
        """
        task_url(task, self.html_dir)  # the name is checked before anything starts
        self.task, self.seed, self.actions = task, str(seed), []

        def operation() -> PageState:
            driver = self._driver
            driver.get(task_url(task, self.html_dir))
            driver.execute_script(_START_JS, str(seed))
            return self._settle_and_read()

        return self.recover(operation)

    def act(self, kind: str, *args: Any) -> tuple[Any, PageState]:
        """Do one action (``kind`` one of ``click``, ``click_at``, ``drag``, ``type``, ``press``,
        ``select``, ``deselect``, ``scroll``), let the page settle, and read it.

        Returns:
            ``(result, state)``: the action's own result (``None`` when it was done; an error
            text when the page refused it, e.g. an element that is gone), and the page after it.

        Raises:
            sandboxes.web.browser.BrowserError: the browser failed twice (after a restart and a
                replay of the episode).
        """
        result, state = self.recover(lambda: self._perform(kind, args))
        # logged even when the page refused it: it may have done part of its work (a cleared
        # field), and a replay does the same again
        self.actions.append((kind, args))
        return result, state

    def _perform(self, kind: str, args: tuple[Any, ...]) -> tuple[Any, PageState]:
        """Do an action, settle, and read. After a pointer action the pointer, still where it
        went, is moved there again once the page has settled: the page then sees it over
        whatever element is there now (hover styles such as jQuery UI's ``ui-state-hover``),
        whether or not the browser sent that mouse event on its own while the page redrew."""
        self._pointer = None
        result = getattr(self, f"_do_{kind}")(*args)
        if self._pointer is not None:
            self._settle()
            builder = ActionBuilder(self._driver, duration=0)
            builder.pointer_action.move_to_location(*self._pointer)
            builder.perform()
        return result, self._settle_and_read()

    # ------------------------------------------------------------------ actions

    def _pointer_click(self, x: float, y: float) -> None:
        self._pointer = (int(round(x)), int(round(y)))
        builder = ActionBuilder(self._driver, duration=0)
        builder.pointer_action.move_to_location(*self._pointer)
        builder.pointer_action.click()
        builder.perform()

    def _do_click(self, ref: int) -> str | None:
        centre = self._driver.execute_script(_CENTRE_JS, ref)
        if centre is None:
            return f"element [{ref}] is no longer shown"
        self._pointer_click(*centre)
        return None

    def _do_click_at(self, x: float, y: float) -> None:
        self._pointer_click(x, y)
        return None

    def _do_drag(self, x1: float, y1: float, x2: float, y2: float) -> None:
        builder = ActionBuilder(self._driver, duration=0)
        pointer = builder.pointer_action
        pointer.move_to_location(int(round(x1)), int(round(y1)))
        pointer.pointer_down()
        for i in range(1, 6):  # intermediate moves, as a hand would make
            pointer.move_to_location(
                int(round(x1 + (x2 - x1) * i / 5)), int(round(y1 + (y2 - y1) * i / 5))
            )
        pointer.pointer_up()
        builder.perform()
        self._pointer = (int(round(x2)), int(round(y2)))
        return None

    def _do_type(self, ref: int, text: str) -> str | None:
        element = self._driver.execute_script(_ELEMENT_JS, ref)
        if element is None:
            return f"element [{ref}] is no longer shown"
        try:
            element.clear()
            element.send_keys(text)
        except WebDriverException as err:
            if "not interactable" in str(err) or "invalid element state" in str(err):
                if self._driver.execute_script("return WOB_DONE_GLOBAL === true"):
                    return None  # clearing it (its focus) already ended the episode
                return f"element [{ref}] does not take text"
            raise
        return None

    def _do_press(self, key: str) -> None:
        sequence = KEYS[key]
        chain = ActionChains(self._driver, duration=0)
        if len(sequence) == 1:
            chain.send_keys(sequence[0])
        else:
            modifier, last = sequence
            chain.key_down(modifier).send_keys(last).key_up(modifier)
        chain.perform()
        return None

    def _do_select(self, ref: int, index: int, deselect: bool = False) -> str | None:
        element = self._driver.execute_script(_ELEMENT_JS, ref)
        if element is None:
            return f"element [{ref}] is no longer shown"
        try:
            if deselect:
                Select(element).deselect_by_index(index)
            else:
                Select(element).select_by_index(index)
        except (NotImplementedError, WebDriverException) as err:
            if isinstance(err, WebDriverException) and "not interactable" not in str(err):
                raise
            return f"option {index + 1} of element [{ref}] cannot be chosen (disabled)"
        return None

    def _do_deselect(self, ref: int, index: int) -> str | None:
        return self._do_select(ref, index, deselect=True)

    def _do_scroll(self, ref: int, direction: int) -> str | None:
        moved = self._driver.execute_script(_SCROLL_JS, ref, direction)
        if moved is None:
            return f"element [{ref}] is no longer shown"
        return None

    def __repr__(self) -> str:
        return f"MiniWoBBrowser(task={self.task!r}, started={self.started})"
