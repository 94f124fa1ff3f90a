"""Headless Chromium driven by Selenium 4: start, read pages, click, search, recover, clean up.

:class:`ChromiumBrowser` owns one ChromeDriver process and the Chromium it starts. Both binaries
are given by path (:class:`BrowserConfig`; defaults ``/usr/bin/chromium`` and
``/usr/bin/chromedriver`` from Debian's ``chromium`` and ``chromium-driver`` packages, overridable
with the ``AGENTGYM_CHROMIUM`` and ``AGENTGYM_CHROMEDRIVER`` environment variables), so
selenium-manager never runs and nothing is downloaded. Each browser gets one fresh temp dir
holding its ``--user-data-dir`` and its ``TMPDIR`` (Chromium's own temp dirs), removed on close and
on every restart.

Reading is what a user sees: ``document.body.innerText`` and the ``innerText`` of every
``a[href]``. Clicking clicks the element (Selenium scrolls it into view and sends a real mouse
click), then waits for the old document to go stale and the new one to finish loading.
A search types the query into the search box by setting its value (ChromeDriver's ``send_keys``
accepts only the Basic Multilingual Plane and reads U+E000-U+E05D as special keys, so arbitrary
Unicode goes in through the DOM) and clicks the Search button.

Robustness:

* every page load is bounded by ``page_load_timeout`` and every WebDriver command by
  ``command_timeout`` (the HTTP timeout of Selenium's client), so a hung browser raises instead of
  blocking;
* a race with the page (a stale element, "Node with given id does not belong to the document",
  an execution context destroyed by a navigation: the DevTools inspector's view of a document
  that has just been replaced) is retried inside the driver, up to :data:`RACE_RETRIES` times,
  from a fresh lookup of the page; a click is retried only when it was not dispatched;
* an operation that fails with another WebDriver, HTTP or OS error (a crashed or hung browser) kills
  the browser, starts a new one, reloads the last page and retries the operation once
  (:attr:`ChromiumBrowser.restarts` counts this); a second failure raises :class:`BrowserError`;
* :meth:`ChromiumBrowser.close` quits the driver, then kills whatever is left of the process
  tree (found by parentage and by the unique user-data-dir on the command line) and removes the
  profile; a :func:`weakref.finalize` does the same at garbage collection or interpreter exit;
* a process killed outright (SIGKILL, a Ray actor replaced) cannot clean up: each profile dir
  names its owner's pid, and every browser start first kills the browsers and removes the
  profiles of owners that are gone (:func:`reap_orphaned_browsers`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psutil
import urllib3
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from sandboxes.web.page import Link, PageView, canonical_url, normalize_text

__all__ = [
    "BrowserConfig",
    "BrowserError",
    "ChromiumBrowser",
    "CHROMIUM_FLAGS",
    "HEADLESS_FLAGS",
    "default_chromium_path",
    "reap_orphaned_browsers",
    "is_page_race",
    "RACE_RETRIES",
    "default_chromedriver_path",
]

#: Flags that run Chromium headless as root (in a container), without GPU, background
#: networking, updates or sync.
HEADLESS_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

#: The shop browser's flags: headless, with no network of its own, in a tall window.
CHROMIUM_FLAGS: tuple[str, ...] = (*HEADLESS_FLAGS, "--no-proxy-server", "--window-size=1280,2400")

_READ_PAGE_JS = """
return {
  url: window.location.pathname + window.location.search,
  text: document.body ? document.body.innerText : "",
  links: Array.from(document.querySelectorAll("a[href]")).map(
    (a) => [a.innerText, a.getAttribute("href")]),
  has_search: document.querySelector("form input[name=q]") !== null,
};
"""

_T = TypeVar("_T")

#: Times a page race (stale element, inspector node of a replaced document) is retried.
RACE_RETRIES = 5
_RACE_MESSAGES = (
    "stale element",
    "does not belong to the document",
    "execution context was destroyed",
    "cannot find context with specified id",
    "inspected target navigated or closed",
    "target frame detached",
    "node is detached from document",
)


def is_page_race(error: BaseException) -> bool:
    """Whether ``error`` is a race with a document being replaced (retrying the lookup fixes it)."""
    if isinstance(error, StaleElementReferenceException):
        return True
    if not isinstance(error, WebDriverException):
        return False
    text = str(error).lower()
    return any(message in text for message in _RACE_MESSAGES)


def _retry_races(operation: Callable[[], _T]) -> _T:
    """Run ``operation``; rerun it (fresh lookups) after a page race, up to RACE_RETRIES times."""
    for attempt in range(RACE_RETRIES + 1):
        try:
            return operation()
        except WebDriverException as err:
            if attempt == RACE_RETRIES or not is_page_race(err):
                raise
            time.sleep(0.02 * (attempt + 1))
    raise AssertionError("unreachable")


def document_replaced(old: Any) -> Callable[[Any], bool]:
    """A ``WebDriverWait`` condition: true once ``old`` (an element of the document shown
    before a click) no longer belongs to the shown document. Like selenium's
    ``expected_conditions.staleness_of``, but every page race counts as replaced (:func:`is_page_race`):
    under load Chromium may answer a lookup of a node of the replaced document with "unknown
    error: ... Node with given id does not belong to the document" instead of a stale-element
    error, which ``staleness_of`` lets through as a failure. Other errors propagate."""

    def replaced(_driver: Any) -> bool:
        try:
            old.is_enabled()
        except WebDriverException as err:
            if is_page_race(err):
                return True
            raise
        return False

    return replaced


def default_chromium_path() -> str:
    """``$AGENTGYM_CHROMIUM`` or ``/usr/bin/chromium``."""
    return os.environ.get("AGENTGYM_CHROMIUM", "/usr/bin/chromium")


def default_chromedriver_path() -> str:
    """``$AGENTGYM_CHROMEDRIVER`` or ``/usr/bin/chromedriver``."""
    return os.environ.get("AGENTGYM_CHROMEDRIVER", "/usr/bin/chromedriver")


class BrowserError(RuntimeError):
    """The browser could not be started, or failed again after a restart."""


@dataclass(frozen=True)
class BrowserConfig:
    """How to start Chromium.

    Attributes:
        chromium_path: the Chromium binary (``None``: :func:`default_chromium_path`).
        chromedriver_path: the ChromeDriver binary (``None``: :func:`default_chromedriver_path`).
        page_load_timeout: seconds a page may take to load (> 0).
        command_timeout: seconds any WebDriver command may take before the browser counts as
            hung (> 0).
        max_restarts: restarts allowed over the browser's life before failures raise (>= 0).
        extra_flags: more Chromium command-line flags.
        extra_env: more environment variables for ChromeDriver and Chromium, as ``(name, value)``
            pairs (e.g. ``("TZ", "UTC")``).
    """

    chromium_path: str | None = None
    chromedriver_path: str | None = None
    page_load_timeout: float = 10.0
    command_timeout: float = 20.0
    max_restarts: int = 100
    extra_flags: tuple[str, ...] = field(default=())
    extra_env: tuple[tuple[str, str], ...] = field(default=())

    def resolved(self) -> tuple[str, str]:
        """``(chromium, chromedriver)`` paths, checked.

        Raises:
            BrowserError: a binary is missing or not executable; the message says how to install.
        """
        chromium = self.chromium_path or default_chromium_path()
        driver = self.chromedriver_path or default_chromedriver_path()
        for what, path, package in (
            ("Chromium", chromium, "chromium"),
            ("ChromeDriver", driver, "chromium-driver"),
        ):
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise BrowserError(
                    f"{what} not found at {path!r}: install it (as root: `bash "
                    f".ci/setup_chromium.sh`, or `apt-get install chromium chromium-driver`; "
                    f"Debian package {package!r}), or pass its path (chromium_path=/"
                    f"chromedriver_path=, or $AGENTGYM_CHROMIUM/$AGENTGYM_CHROMEDRIVER)"
                )
        for name in ("page_load_timeout", "command_timeout"):
            if not getattr(self, name) > 0:
                raise BrowserError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        return chromium, driver


def _kill_tree(root_pids: list[int], marker: str | None) -> None:
    """SIGKILL the processes in ``root_pids``, their descendants, and any process whose command
    line holds ``marker`` (the browser's unique profile dir), then reap what we can."""
    victims: dict[int, psutil.Process] = {}
    for pid in root_pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            victims[pid] = proc
            for child in proc.children(recursive=True):
                victims[child.pid] = child
    if marker:
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(marker in part for part in proc.info["cmdline"] or ()):
                    victims[proc.pid] = proc
    victims.pop(os.getpid(), None)
    for proc in victims.values():
        with contextlib.suppress(psutil.Error, OSError):
            proc.send_signal(signal.SIGCONT)  # a stopped process must run to die cleanly
            proc.kill()
    psutil.wait_procs(list(victims.values()), timeout=5)


PROFILE_PREFIX = "agentgym-chromium-"
_PROFILE_OWNER = re.compile(re.escape(PROFILE_PREFIX) + r"(\d+)-")


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # exists, not ours to inspect


def reap_orphaned_browsers() -> list[int]:
    """Kill the browsers, and remove the profiles, of owner processes that died without closing
    them (SIGKILL, OOM, a Ray actor killed): their ChromeDriver and Chromium outlive them.

    Each profile dir is ``<tmp>/agentgym-chromium-<owner pid>-XXXX``. A Chromium process whose
    ``--user-data-dir`` names a dead owner is killed with its descendants and with its parent
    ChromeDriver; then every such profile dir in the temp dir is removed. The same rule as the
    Docker sandbox's owner label (:func:`sandboxes.code.docker_backend.reap_orphans`). Runs
    before every browser start.

    Returns:
        The process ids killed.
    """
    dead: dict[int, bool] = {}

    def owner_dead(text: str) -> bool:
        match = _PROFILE_OWNER.search(text)
        if match is None:
            return False
        owner = int(match.group(1))
        if owner not in dead:
            dead[owner] = not _pid_alive(owner)
        return dead[owner]

    roots: list[int] = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            args = proc.info["cmdline"] or ()
            if any(a.startswith("--user-data-dir=") and owner_dead(a) for a in args):
                roots.append(proc.pid)
                parent = proc.parent()
                if parent is not None and "chromedriver" in parent.name():
                    roots.append(parent.pid)
    if roots:
        _kill_tree(roots, None)
    tmp = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            if name.startswith(PROFILE_PREFIX) and owner_dead(name):
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
    return roots


def _cleanup(state: dict[str, Any]) -> None:
    """Quit the driver and remove every trace; safe to call many times (used by finalize too)."""
    driver = state.pop("driver", None)
    pids: list[int] = state.pop("pids", [])
    profile: str | None = state.pop("profile", None)
    if driver is not None:
        if state.get("healthy", True):
            with contextlib.suppress(Exception):
                driver.quit()
        else:
            with contextlib.suppress(Exception):
                driver.service.process.kill()
    _kill_tree(pids, profile)
    if driver is not None:
        with contextlib.suppress(Exception):
            driver.service.process.wait(timeout=5)  # reap ChromeDriver (our child)
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


class ChromiumBrowser:
    """One headless Chromium, started lazily, for reading and navigating the shop.

    Args:
        base_url: the site, ``http://127.0.0.1:PORT``.
        config: how to start Chromium.

    Raises:
        BrowserError: (at construction) a binary is missing; (at the first page) Chromium does
            not start.
    """

    def __init__(self, base_url: str, config: BrowserConfig | None = None):
        self.config = config or BrowserConfig()
        self._paths = self.config.resolved()
        self.base_url = base_url.rstrip("/")
        self.restarts = 0
        self._state: dict[str, Any] = {}
        self._last_url = "/"
        self._finalizer = weakref.finalize(self, _cleanup, self._state)

    # ------------------------------------------------------------------ lifecycle

    @property
    def started(self) -> bool:
        return self._state.get("driver") is not None

    def pids(self) -> list[int]:
        """ChromeDriver's and Chromium's process ids now (empty when not started)."""
        out: list[int] = []
        for pid in self._state.get("pids", []):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                out.append(pid)
                out.extend(child.pid for child in proc.children(recursive=True))
        return out

    def start(self) -> None:
        """Start ChromeDriver and Chromium (a no-op when running)."""
        if self.started:
            return
        chromium, driver_path = self._paths
        reap_orphaned_browsers()
        # One directory per browser holds its profile and, as TMPDIR, every temporary directory
        # Chromium and ChromeDriver make (org.chromium.Chromium.*, scoped_dir*), so that removing
        # it after any end (close, restart, a reaped orphan) leaves nothing behind in /tmp.
        profile = tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-")
        os.mkdir(os.path.join(profile, "tmp"))
        options = Options()
        options.binary_location = chromium
        user_data = os.path.join(profile, "profile")
        for flag in (*CHROMIUM_FLAGS, *self.config.extra_flags, f"--user-data-dir={user_data}"):
            options.add_argument(flag)
        options.page_load_strategy = "normal"
        env = dict(os.environ)
        env.update(dict(self.config.extra_env))
        env.update(TMPDIR=os.path.join(profile, "tmp"), TMP=os.path.join(profile, "tmp"))
        service = Service(executable_path=driver_path, log_output=subprocess.DEVNULL, env=env)
        self._state.update(profile=profile, healthy=True)
        try:
            driver = webdriver.Chrome(service=service, options=options)
        except Exception as err:
            if service.process is not None:
                self._state["pids"] = [service.process.pid]
            self._state["healthy"] = False
            _cleanup(self._state)
            raise BrowserError(
                f"Chromium did not start ({chromium}, {driver_path}): {err}"
            ) from err
        driver.command_executor._client_config.timeout = self.config.command_timeout
        driver.set_page_load_timeout(self.config.page_load_timeout)
        driver.set_script_timeout(self.config.command_timeout)
        self._state.update(driver=driver, pids=[service.process.pid])
        try:
            self._after_start(driver)
        except Exception:
            self._state["healthy"] = False
            _cleanup(self._state)
            raise

    def _after_start(self, driver: webdriver.Chrome) -> None:
        """Set up a freshly started browser (a subclass hook; called by :meth:`start`, also after
        every restart). A failure here kills the new browser."""

    def restart(self) -> None:
        """Kill the browser (whatever its state) and start a new one."""
        self._state["healthy"] = False
        _cleanup(self._state)
        self.restarts += 1
        self.start()

    def close(self) -> None:
        """Quit, kill what is left, remove the profile (idempotent)."""
        _cleanup(self._state)

    # ------------------------------------------------------------------ pages

    @property
    def _driver(self) -> webdriver.Chrome:
        self.start()
        return self._state["driver"]

    @property
    def driver(self) -> webdriver.Chrome:
        """The WebDriver session (started on first use)."""
        return self._driver

    def _reopen(self) -> None:
        """Bring a freshly restarted browser back to where the failed one was before an operation
        is retried (:meth:`recover`): here, reload the last page read. A subclass whose pages keep
        state a reload loses (a task page mid-episode) replays it instead."""
        self._driver.get(self.base_url + self._last_url)

    def _read(self) -> PageView:
        data = _retry_races(lambda: self._driver.execute_script(_READ_PAGE_JS))
        view = PageView(
            url=canonical_url(data["url"]),
            text=normalize_text(data["text"]),
            links=tuple(Link(normalize_text(label), href) for label, href in data["links"]),
            has_search=bool(data["has_search"]),
        )
        self._last_url = view.url
        return view

    def _navigate_by(self, act: Callable[[webdriver.Chrome], None]) -> None:
        """Run ``act`` (a click) and wait for the next document to load.

        ``act`` and the lookup before it are retried after a page race (the click was then not
        dispatched); the wait treats a race as "not loaded yet".
        """
        driver = self._driver

        def dispatch() -> Any:
            old = driver.find_element(By.TAG_NAME, "html")
            act(driver)
            return old

        old = _retry_races(dispatch)
        wait = WebDriverWait(driver, self.config.page_load_timeout, poll_frequency=0.01)
        wait.until(document_replaced(old))

        def loaded(d: webdriver.Chrome) -> bool:
            try:
                return d.execute_script("return document.readyState") == "complete"
            except WebDriverException as err:
                if is_page_race(err):
                    return False
                raise

        wait.until(loaded)

    def _recover(self, operation: Callable[[], _T]) -> _T:
        return self.recover(operation)

    def recover(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation``; after a WebDriver, HTTP or OS error (a crashed or hung browser) kill
        the browser, start a new one, :meth:`_reopen` and run ``operation`` once more.

        Raises:
            BrowserError: the restarts are used up, or the operation fails again after one.
        """
        try:
            return operation()
        except (WebDriverException, urllib3.exceptions.HTTPError, OSError) as first:
            if self.restarts >= self.config.max_restarts:
                raise BrowserError(
                    f"browser failed and its {self.config.max_restarts} restarts are used up: "
                    f"{first}"
                ) from first
            try:
                self.restart()
                self._reopen()
                return operation()
            except (WebDriverException, urllib3.exceptions.HTTPError, OSError) as second:
                self._state["healthy"] = False
                raise BrowserError(f"browser failed again after a restart: {second}") from first

    def goto(self, url: str) -> PageView:
        """Load ``url`` (a path on the site) and read it."""

        def operation() -> PageView:
            self._driver.get(self.base_url + url)
            return self._read()

        return self._recover(operation)

    def click(self, view: PageView, index: int) -> PageView:
        """Click link ``index`` of ``view`` (the page now shown) and read the new page."""
        label = view.links[index].label

        def click_link(driver: webdriver.Chrome) -> None:  # fresh lookups on every retry
            links = driver.find_elements(By.CSS_SELECTOR, "a[href]")
            shown = (
                driver.execute_script("return arguments[0].innerText;", links[index])
                if index < len(links)
                else None
            )
            if shown is None or normalize_text(shown) != label:
                raise BrowserError(f"link {index} {label!r} is not on the page")
            links[index].click()

        def operation() -> PageView:
            self._navigate_by(click_link)
            return self._read()

        return self._recover(operation)

    def search(self, query: str) -> PageView:
        """Type ``query`` into the search box, press Search, read the results."""

        def submit(driver: webdriver.Chrome) -> None:  # fresh lookups on every retry
            box = driver.find_element(By.CSS_SELECTOR, "form input[name=q]")
            button = driver.find_element(By.CSS_SELECTOR, "form button[type=submit]")
            driver.execute_script("arguments[0].value = arguments[1];", box, query)
            button.click()

        def operation() -> PageView:
            self._navigate_by(submit)
            return self._read()

        return self._recover(operation)

    def screenshot(self, path: str) -> None:
        """Save a PNG of the current page (for people looking at what the agent sees)."""
        self._driver.save_screenshot(path)

    def __repr__(self) -> str:
        return f"ChromiumBrowser({self.base_url}, started={self.started})"
