"""WebShop-v0 in a real headless Chromium (Selenium 4): parity with the text back end, markup
safety in the DOM, crash and hang recovery, and no leaked browser process.

Needs Debian's ``chromium`` and ``chromium-driver`` (CI: ``.ci/setup_chromium.sh``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import psutil
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.webshop import random_action
from agentgym.parsing import format_answer
from sandboxes.web.browser import BrowserError, ChromiumBrowser
from sandboxes.web.server import server_users
from tests.helpers import alive

BROWSER_ID = "agentgym/WebShop-v0"
TEXT_ID = "agentgym/WebShopText-v0"


def _answer(action: str) -> str:
    return format_answer([action], "think_answer", think="t")


def _browser_descendants() -> list[int]:
    """Chromium and ChromeDriver processes below this test process."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name():
                out.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _with_marker(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker`` (a browser's profile dir): /proc scan."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            out.append(int(entry.name))
    return alive(out)


@pytest.fixture(scope="module")
def pair():
    """One browser env and one text env, reused across the parity tests (a browser starts once)."""
    browser, text = gymnasium.make(BROWSER_ID), gymnasium.make(TEXT_ID)
    yield browser, text
    browser.close()
    text.close()


def _compare(pair, seed: int, actions: list[str]) -> int:
    """Play ``actions`` through both envs from ``reset(seed)``; assert identical outcomes."""
    browser, text = pair
    obs_b, info_b = browser.reset(seed=seed)
    obs_t, info_t = text.reset(seed=seed)
    assert obs_b == obs_t
    assert info_b["valid_actions"] == info_t["valid_actions"]
    played = 0
    for action in actions:
        step_b = browser.step(_answer(action))
        step_t = text.step(_answer(action))
        played += 1
        assert step_b[0] == step_t[0], action
        assert step_b[1:4] == step_t[1:4], action
        for key in ("action_is_valid", "action_is_effective", "success", "valid_actions"):
            assert step_b[4][key] == step_t[4][key], (action, key)
        assert step_b[4].get("reward_parts") == step_t[4].get("reward_parts")
        assert step_b[4].get("url") == step_t[4].get("url")
        if step_b[2] or step_b[3]:
            break
    return played


def _oracle_with_detours(seed: int) -> list[str]:
    """The oracle's actions of an episode, recorded on a text env, with one detour through the
    target's Features and Description pages."""
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=seed)
    inner = env.unwrapped
    out: list[str] = []
    detoured = False
    for _ in range(12):
        if not detoured and inner.view.url.startswith(f"/item/{inner.goal.product_id}"):
            detoured = True
            for step in ("click[Features]", "click[< Prev]", "click[Description]", "click[< Prev]"):
                out.append(step)
                env.step(_answer(step))
        action = inner.oracle_actions()[0]
        out.append(action)
        if env.step(_answer(action))[2]:
            break
    env.close()
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_episodes_with_detours_are_identical(pair, seed: int) -> None:
    actions = _oracle_with_detours(seed)
    assert _compare(pair, seed, actions) == len(actions)
    assert pair[0].unwrapped.reward_parts.total == 1.0


def test_navigation_and_bad_actions_are_identical(pair) -> None:
    actions = [
        "click[Next >]",  # not on the home page: invalid
        "search[]",
        "search[" + "x" * 50_000 + "]",
        "search[green tea  gluten\tfree]",
        "click[Next >]",
        "click[next >]",
        "click[< Prev]",
        "click[Add to cart]",
        "click[Back to Search]",
        "search[<script>window.__pwned = 1</script> ünïcödé 😀 \ue007 \u202e]",
        "click[Back to Search]",
        'search["><img src=x onerror="window.__pwned=2"> t-shirt]',
    ]
    assert _compare(pair, 3, actions) == len(actions)


def test_random_agent_episodes_are_identical(pair) -> None:
    for seed in (4, 5):
        rng = np.random.default_rng([1, seed])
        text = gymnasium.make(TEXT_ID)
        obs, _ = text.reset(seed=seed)
        actions = []
        for _ in range(15):
            action = random_action(obs, rng)
            actions.append(action)
            obs, _, terminated, truncated, _ = text.step(_answer(action))
            if terminated or truncated:
                break
        text.close()
        assert _compare(pair, seed, actions) == len(actions)


def test_query_markup_never_enters_the_dom(pair) -> None:
    browser = pair[0]
    browser.reset(seed=0)
    query = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><b>bold</b>'
    obs, _, _, _, info = browser.step(_answer(f"search[{query}]"))
    assert info["action_is_valid"] and f'Results for "{query}"' in obs
    driver = browser.unwrapped.reader._state["driver"]
    counts = driver.execute_script(
        "return [document.querySelectorAll('script').length,"
        " document.querySelectorAll('img').length, document.querySelectorAll('b').length,"
        " typeof window.__pwned];"
    )
    assert counts == [0, 0, 0, "undefined"]


def test_browser_starts_lazily_lives_across_episodes_and_close_leaves_no_process() -> None:
    env = gymnasium.make(BROWSER_ID)
    assert env.unwrapped.reader is None  # construction starts nothing
    env.reset(seed=0)
    env.step(_answer("search[green tea]"))
    reader = env.unwrapped.reader
    pids = reader.pids()
    profile = reader._state["profile"]
    assert len(pids) >= 3 and alive(pids) == pids  # driver, browser, its helpers
    assert os.path.isdir(profile) and _with_marker(profile)
    env.reset(seed=1)
    assert reader.pids()[:2] == pids[:2]  # the same driver and browser in the next episode
    env.close()
    assert alive(pids) == []
    assert _with_marker(profile) == []
    assert not os.path.exists(profile)
    env.close()  # twice is fine


def test_several_envs_get_their_own_browsers() -> None:
    envs = [gymnasium.make(BROWSER_ID) for _ in range(2)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    pid_sets = [set(env.unwrapped.reader.pids()) for env in envs]
    assert pid_sets[0] and pid_sets[1] and not pid_sets[0] & pid_sets[1]
    assert envs[0].unwrapped.server is envs[1].unwrapped.server  # one shared shop server
    done = [False, False]
    for _ in range(10):  # interleaved oracle turns
        for i, env in enumerate(envs):
            if not done[i]:
                done[i] = env.step(env.unwrapped.oracle_answer())[2]
    assert done == [True, True]
    assert all(env.unwrapped.reward_parts.total == 1.0 for env in envs)
    envs[0].close()
    assert alive(list(pid_sets[0])) == []
    assert envs[1].reset(seed=2)[0]  # the other one still works
    envs[1].close()
    assert alive(list(pid_sets[1])) == []


def _chromium_main_pid(reader: ChromiumBrowser) -> int:
    driver_pid = reader._state["pids"][0]
    (browser,) = psutil.Process(driver_pid).children()
    return browser.pid


def test_crashed_browser_is_restarted_within_the_episode() -> None:
    env = gymnasium.make(BROWSER_ID)
    text = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    text.reset(seed=0)
    actions = ["search[green tea]", "click[Next >]"]
    for action in actions:
        env.step(_answer(action))
        text.step(_answer(action))
    reader = env.unwrapped.reader
    old = reader.pids()
    os.kill(_chromium_main_pid(reader), signal.SIGKILL)  # the browser crashes
    step_b = env.step(_answer("click[< Prev]"))
    step_t = text.step(_answer("click[< Prev]"))
    assert step_b[0] == step_t[0] and step_b[1:4] == step_t[1:4]
    assert step_b[4]["browser_restarts"] == 1 and reader.restarts == 1
    assert alive(old) == []  # what was left of the crashed browser is gone
    # the driver dies too: the next action still works
    os.kill(reader._state["pids"][0], signal.SIGKILL)
    step_b = env.step(_answer("click[Next >]"))
    step_t = text.step(_answer("click[Next >]"))
    assert step_b[0] == step_t[0] and reader.restarts == 2
    pids = reader.pids()
    env.close()
    text.close()
    assert alive(pids) == []


def test_hung_browser_is_restarted_after_the_command_timeout() -> None:
    # 15 s, not less: the restarted browser's commands run under the same bound, and on a loaded
    # 2-core machine (CI ran at load 14) 3 s leaves a healthy browser little room.
    env = gymnasium.make(BROWSER_ID, command_timeout=15.0, page_load_timeout=15.0)
    text = gymnasium.make(TEXT_ID)
    env.reset(seed=1)
    text.reset(seed=1)
    reader = env.unwrapped.reader
    hung = [p for p in reader.pids() if p != reader._state["pids"][0]]
    for pid in hung:  # freeze every Chromium process: commands to it never answer
        with contextlib.suppress(ProcessLookupError):  # a short-lived helper that already ended
            os.kill(pid, signal.SIGSTOP)
    step_b = env.step(_answer("search[bath towel]"))
    step_t = text.step(_answer("search[bath towel]"))
    assert step_b[0] == step_t[0] and step_b[1:4] == step_t[1:4]
    assert step_b[4]["browser_restarts"] == 1
    assert alive(hung) == []
    pids = reader.pids()
    env.close()
    text.close()
    assert alive(pids) == []


def test_missing_binaries_give_an_error_naming_the_fix() -> None:
    with pytest.raises(BrowserError, match="setup_chromium.sh") as err:
        gymnasium.make(BROWSER_ID, chromium_path="/nonexistent/chromium")
    assert "chromium_path" in str(err.value)
    with pytest.raises(BrowserError, match="chromium-driver"):
        gymnasium.make(BROWSER_ID, chromedriver_path="/nonexistent/chromedriver")


def test_garbage_collected_env_leaves_no_browser() -> None:
    gc.collect()  # envs an earlier test left to the collector must not be counted below
    env = gymnasium.make(BROWSER_ID)
    env.reset(seed=0)
    pids = env.unwrapped.reader.pids()
    server = env.unwrapped.server
    users = server_users(server)
    del env
    gc.collect()
    assert alive(pids) == []
    assert server_users(server) == users - 1  # the env's hold on the shared server is released


def test_process_exit_without_close_leaves_no_browser() -> None:
    code = (
        "import json, gymnasium, agentgym\n"
        "env = gymnasium.make('agentgym/WebShop-v0')\n"
        "env.reset(seed=0)\n"
        "print(json.dumps([env.unwrapped.reader.pids(), env.unwrapped.reader._state['profile']]))\n"
    )  # no close(): the atexit finalizer must clean up
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    pids, profile = json.loads(out)
    assert len(pids) >= 3
    assert alive(pids) == [] and _with_marker(profile) == []
    assert not os.path.exists(profile)


def test_async_vector_env_subprocess_browsers_are_closed() -> None:
    before = set(_browser_descendants())
    vec = gymnasium.make_vec(BROWSER_ID, num_envs=2, vectorization_mode="async")
    observations, _ = vec.reset(seed=[0, 1])
    assert all(o.startswith("Instruction: ") for o in observations)
    started = [p for p in _browser_descendants() if p not in before]
    assert len(started) >= 6  # two drivers, two browsers and their helpers
    vec.step([_answer("search[green tea]")] * 2)
    vec.close()
    assert alive(started) == []


def test_restarts_leave_no_chromium_temp_dirs() -> None:
    """Chromium's own temp dirs (org.chromium.Chromium.*, scoped_dir*) go to the browser's dir,
    so a crash + restart and a close leave nothing behind in the system temp dir."""
    env = gymnasium.make(BROWSER_ID)
    env.reset(seed=0)
    reader = env.unwrapped.reader
    first = reader._state["profile"]
    browser = psutil.Process(_chromium_main_pid(reader))
    assert browser.environ()["TMPDIR"] == os.path.join(first, "tmp")
    assert os.listdir(os.path.join(first, "tmp"))  # Chromium did make its temp dirs there
    browser.kill()  # a crash: the browser cannot clean up
    env.step(_answer("search[green tea]"))
    assert reader.restarts == 1
    second = reader._state["profile"]
    assert second != first and not os.path.exists(first)  # the restart removed the old dir
    restarted = psutil.Process(_chromium_main_pid(reader))
    assert restarted.environ()["TMPDIR"] == os.path.join(second, "tmp")
    env.close()
    assert not os.path.exists(second)


def test_a_click_waits_for_the_document_to_be_replaced_whatever_chromium_calls_the_race() -> None:
    """The wait after a click: an element of the shown document is not replaced; after a real
    navigation it is. Under load Chromium also answered that lookup with "unknown error:
    unhandled inspector error: ... Node with given id does not belong to the document" (CI,
    2026-12-02), which selenium's ``staleness_of`` raised as a failure: it counts as replaced;
    an unrelated error still propagates. Chromium cannot be made to pick that wording, so
    those two cases use an element that raises it."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    from sandboxes.web.browser import document_replaced

    env = gymnasium.make(BROWSER_ID)
    env.reset(seed=0)
    driver = env.unwrapped.reader._state["driver"]
    old = driver.find_element(By.TAG_NAME, "html")
    assert document_replaced(old)(driver) is False
    driver.get(driver.current_url)  # a new document: the old node is gone
    assert document_replaced(old)(driver) is True
    env.close()

    class Raising:
        def __init__(self, message: str) -> None:
            self.message = message

        def is_enabled(self) -> bool:
            raise WebDriverException(self.message)

    inspector = (
        'unknown error: unhandled inspector error: {"code":-32000,"message":"Node with given id '
        'does not belong to the document"}'
    )
    assert document_replaced(Raising(inspector))(None) is True
    with pytest.raises(WebDriverException, match="chrome not reachable"):
        document_replaced(Raising("unknown error: chrome not reachable"))(None)


def test_page_races_are_retried_inside_the_driver() -> None:
    """A stale element or "Node with given id does not belong to the document" (the inspector's
    node of a replaced document) is retried from fresh lookups, without a browser restart."""
    from selenium.common.exceptions import JavascriptException, StaleElementReferenceException

    from sandboxes.web import browser as browser_module

    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise StaleElementReferenceException("stale element reference: element is not attached")
        if calls["n"] == 2:
            raise JavascriptException(
                "javascript error: Node with given id does not belong to the document"
            )
        return "done"

    assert browser_module._retry_races(flaky) == "done" and calls["n"] == 3
    with pytest.raises(JavascriptException, match="undefined"):  # not a race: raised at once
        browser_module._retry_races(lambda: (_ for _ in ()).throw(JavascriptException("undefined")))
    env = gymnasium.make(BROWSER_ID)
    env.reset(seed=0)
    reader = env.unwrapped.reader
    view = reader.search("green tea")
    # Replace the document under a held element: the next lookup of that node races.
    real_find = reader._state["driver"].find_elements
    replaced = {"done": False, "lookups": 0}

    def find_after_replace(*args: object, **kwargs: object) -> list:
        replaced["lookups"] += 1
        found = real_find(*args, **kwargs)
        if not replaced["done"]:
            replaced["done"] = True
            reader._state["driver"].execute_script("location.reload()")
            reader._state["driver"].execute_script("return 1")  # let the reload land
        return found

    reader._state["driver"].find_elements = find_after_replace
    index = next(i for i, link in enumerate(view.links) if link.label)
    after = reader.click(view, index)
    assert replaced["done"] and after.url != view.url
    assert replaced["lookups"] == 2  # the first lookup's elements went stale: looked up again
    assert reader.restarts == 0  # retried inside the driver, not by a restart
    env.close()
