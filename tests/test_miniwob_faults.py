"""MiniWoB++ browser faults: a crashed renderer, a dead driver, a hung browser, a killed owner.
The episode is replayed on a new browser and ends as it would have; nothing is left behind (the
env's own processes only)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import gymnasium
import psutil

import agentgym  # noqa: F401  (registers the ids)
from agentgym.parsing import format_answer
from tests.helpers import alive


def _answer(action: str) -> str:
    return format_answer([action], "think_answer", think="t")


def _ref(observation: str, needle: str) -> int:
    for line in observation.splitlines()[1:]:
        if needle in line:
            return int(line.split("[", 1)[1].split("]", 1)[0])
    raise AssertionError(f"no line with {needle!r} in:\n{observation}")


def _renderers(browser) -> list[int]:
    """The Chromium renderer processes of this env's browser."""
    return [
        pid
        for pid in browser.pids()
        if "--type=renderer" in " ".join(psutil.Process(pid).cmdline())
    ]


def _checkboxes_episode(env, kill=None) -> tuple[list[str], float, dict]:
    """click-checkboxes, seed 4: tick every named box then Submit; ``kill(browser)`` runs after
    the first tick. Returns the observations, the final reward and the last info."""
    obs, info = env.reset(seed=4)
    names = info["fields"]
    wanted = [v for k, v in sorted(names.items()) if k.startswith("target")]
    seen = [obs]
    for i, name in enumerate(wanted):
        lines = obs.splitlines()
        label = next(n for n, line in enumerate(lines) if line.strip() == f'"{name}"')
        box = int(lines[label - 1].split("[", 1)[1].split("]", 1)[0])
        obs, reward, terminated, _, step = env.step(_answer(f"click[{box}]"))
        seen.append(obs)
        if i == 0 and kill is not None:
            kill(env.unwrapped.browser)
    obs, reward, terminated, truncated, step = env.step(_answer(f"click[{_ref(obs, 'Submit')}]"))
    assert terminated and not truncated
    return seen, reward, step


def test_a_killed_renderer_or_driver_is_replaced_and_the_episode_replayed() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0", task="click-checkboxes")
    try:
        calm, calm_reward, _ = _checkboxes_episode(env)
        assert calm_reward == 1.0

        def kill_renderer(browser) -> None:
            for pid in _renderers(browser):
                os.kill(pid, signal.SIGKILL)

        old = env.unwrapped.browser.pids()
        crashed, reward, step = _checkboxes_episode(env, kill_renderer)
        assert (crashed, reward) == (calm, 1.0)  # the same pages after the replay, and the win
        assert env.unwrapped.browser.restarts == 1
        assert alive(old) == []  # what was left of the crashed browser is gone

        def kill_driver(browser) -> None:
            os.kill(browser._state["pids"][0], signal.SIGKILL)

        old = env.unwrapped.browser.pids()
        crashed, reward, _ = _checkboxes_episode(env, kill_driver)
        assert (crashed, reward) == (calm, 1.0)
        assert env.unwrapped.browser.restarts == 2 and alive(old) == []
        pids = env.unwrapped.browser.pids()
    finally:
        env.close()
    assert alive(pids) == []


def test_a_hung_browser_is_restarted_after_the_command_timeout() -> None:
    # 15 s: the restarted browser's commands run under the same bound, and a loaded 2-core
    # machine leaves a healthy browser little room below that (tests/test_webshop_browser.py).
    env = gymnasium.make("agentgym/MiniWoB-v0", task="enter-text", command_timeout=15.0)
    try:
        obs, info = env.reset(seed=2)
        browser = env.unwrapped.browser
        hung = [p for p in browser.pids() if p != browser._state["pids"][0]]
        for pid in hung:  # freeze every Chromium process: no command to it answers
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        field = _ref(obs, "input_text")
        obs, _, _, _, step = env.step(_answer(f"type[{field}, {info['fields']['target']}]"))
        assert step["browser_restarts"] == 1 and alive(hung) == []
        assert f'value="{info["fields"]["target"]}"' in obs
        _, reward, terminated, _, _ = env.step(_answer(f"click[{_ref(obs, 'Submit')}]"))
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()


def test_a_browser_that_fails_twice_truncates_the_episode() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0", task="enter-text")
    try:
        obs, _ = env.reset(seed=2)
        browser = env.unwrapped.browser
        browser.config = type(browser.config)(
            **{**browser.config.__dict__, "max_restarts": 0}  # no restart allowed
        )
        for pid in _renderers(browser):
            os.kill(pid, signal.SIGKILL)
        obs2, reward, terminated, truncated, step = env.step(
            _answer(f"click[{_ref(obs, 'Submit')}]")
        )
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert "restarts are used up" in step["browser_error"]
        assert alive(browser.pids()) == []  # the failed browser is gone
        assert env.reset(seed=3)[0].startswith("Instruction: ")  # the next episode: a new one
        assert env.unwrapped.browser is not browser
    finally:
        env.close()


def test_close_and_a_killed_owner_leave_no_browser() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0")
    assert env.unwrapped.browser is None  # construction starts nothing
    env.reset(seed=0)
    pids = env.unwrapped.browser.pids()
    profile = env.unwrapped.browser._state["profile"]
    assert len(pids) >= 3 and alive(pids) == pids
    env.close()
    assert alive(pids) == [] and not os.path.exists(profile)
    env.close()  # twice is fine

    code = (
        "import json, os, signal, gymnasium, agentgym\n"
        "env = gymnasium.make('agentgym/MiniWoB-v0')\n"
        "env.reset(seed=0)\n"
        "b = env.unwrapped.browser\n"
        "print(json.dumps([b.pids(), b._state['profile']]), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"  # the owner dies without any clean-up
    )
    killed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    pids, profile = json.loads(killed.stdout)
    assert alive(pids)  # orphans, until the next browser start reaps them
    env = gymnasium.make("agentgym/MiniWoB-v0")
    try:
        env.reset(seed=0)
        assert alive(pids) == [] and not os.path.exists(profile)
    finally:
        env.close()
