"""10,000 fuzzed actions across MiniWoB++'s tasks: markup and script in typed text, huge strings,
private-use, astral and control characters, refs from another episode, points outside the task
area, malformed syntax. No action raises, nothing typed is ever run or parsed as markup, and an
invalid action leaves the page as it was."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import gymnasium
import numpy as np

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.miniwob import random_action
from agentgym.envs.miniwob_tasks import ALL_TASKS
from agentgym.parsing import format_answer

ACTIONS = 10_000
HOSTILE_TEXTS = (
    '<img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned=1</script>",
    "</textarea><svg onload=window.__pwned=1>",
    "'); window.__pwned=1; ('",
    "${window.__pwned=1}",
    "javascript:window.__pwned=1",
    "\u202eevil\u202c",  # a bidi override (format character: refused)
    "\ue007\ue006",  # WebDriver's Enter and Return keys (private use: refused)
    "\U0001f4a5 boom",  # astral (refused)
    "a\x00b",  # NUL (refused)
    "line\nbreak",  # a control character (refused)
    "x" * 10_000,  # over the length limit
    "ünïcödé ☃ 中文",  # printable BMP text (typed)
)
MALFORMED = (
    "click[]",
    "click[-1]",
    "click[99999999999]",
    "click[1.5]",
    "type[,]",
    "select[]",
    "scroll[1]",
    "press[]",
    "press[Enter+Meta]",
    "click_at[1e9, 1]",
    "click_at[-5, 3]",
    "drag[1, 2, 3]",
    "click_at[nan, inf]",
    "[[[[",
    "click[" * 200,
    "",
)
# Counts the page's executable and embedded nodes: typed text must never add one.
_NODES_JS = "return document.querySelectorAll('script, img, iframe, object, embed, svg').length"
# Tasks draw images and SVG as they run, but never add a script or a frame.
_SCRIPTS_JS = "return document.querySelectorAll('script, iframe, object, embed').length"


def _fuzzed(obs: str, old_refs: list[int], rng: np.random.Generator) -> str:
    kind = rng.integers(6)
    refs = [
        int(line.split("[", 1)[1].split("]", 1)[0]) for line in obs.splitlines()[1:] if "] " in line
    ]
    ref = int(rng.choice(refs)) if refs else 1
    if kind == 0:
        return random_action(obs, rng)
    if kind == 1:
        text = HOSTILE_TEXTS[int(rng.integers(len(HOSTILE_TEXTS)))]
        return f"type[{ref}, {text}]"
    if kind == 2:
        return MALFORMED[int(rng.integers(len(MALFORMED)))]
    if kind == 3:  # a ref of an earlier episode's page (may or may not exist on this one)
        stale = int(rng.choice(old_refs)) if old_refs else 500
        return ["click", "type", "select", "scroll"][int(rng.integers(4))] + f"[{stale}, down]"
    if kind == 4:
        x, y = rng.integers(-50, 300, size=2)
        return f"click_at[{x}, {y}]" if rng.random() < 0.5 else f"drag[{x}, {y}, {y}, {x}]"
    key = ["Enter", "Tab", "Escape", "Backspace", "F5", "Control+w", "Alt+F4"][int(rng.integers(7))]
    return f"press[{key}]"


def _fuzz_shard(shard: int, shards: int, actions: int) -> tuple[int, int]:
    """``actions`` fuzzed actions on one env (its own browser), episodes ``shard, shard +
    shards, ...`` (task ``ALL_TASKS[episode % 125]``); returns (actions taken, episodes)."""
    rng = np.random.default_rng([20261205, shard])
    env = gymnasium.make("agentgym/MiniWoBAll-v0", max_turns=50)
    taken = 0
    episode = shard
    played = 0
    old_refs: list[int] = []
    try:
        while taken < actions:
            task = ALL_TASKS[episode % len(ALL_TASKS)]
            obs, _ = env.reset(seed=episode, options={"task": task})
            episode += shards
            played += 1
            driver = env.unwrapped.browser.driver
            scripts = driver.execute_script(_SCRIPTS_JS)
            done = False
            while not done and taken < actions:
                action = _fuzzed(obs, old_refs, rng)
                before = obs
                obs, reward, terminated, truncated, info = env.step(
                    format_answer([action], "think_answer", think="f")
                )
                taken += 1
                done = terminated or truncated
                assert isinstance(reward, float) and np.isfinite(reward)
                if not info["action_is_valid"]:
                    assert obs == before and info["invalid_reason"]
                if not done:  # after any action: Enter may submit what was typed before
                    assert driver.execute_script("return window.__pwned === undefined"), action
                if action.startswith("type[") and not done:
                    assert driver.execute_script(_SCRIPTS_JS) == scripts, action
            old_refs = [
                int(line.split("[", 1)[1].split("]", 1)[0])
                for line in obs.splitlines()[1:]
                if "] " in line
            ]
    finally:
        env.close()
    return taken, played


def test_ten_thousand_fuzzed_actions() -> None:
    """Four envs (each its own browser) in four threads, 2,500 actions each: the browsers' waits
    overlap, so the 10,000 take about half the time of one env."""
    shards = 4
    with ThreadPoolExecutor(shards) as pool:
        futures = [pool.submit(_fuzz_shard, k, shards, ACTIONS // shards) for k in range(shards)]
        results = [f.result() for f in futures]
    assert sum(taken for taken, _ in results) == ACTIONS
    assert sum(played for _, played in results) >= 100


def test_hostile_text_typed_into_every_kind_of_field_stays_text() -> None:
    """Each printable hostile string typed into a text input and a textarea is the field's value
    verbatim, and the page's nodes are unchanged."""
    for task, tag in (("enter-text", "input_text"), ("copy-paste", "textarea")):
        env = gymnasium.make("agentgym/MiniWoB-v0", task=task)
        try:
            obs, _ = env.reset(seed=0)
            driver = env.unwrapped.browser.driver
            nodes = driver.execute_script(_NODES_JS)
            line = next(x for x in obs.splitlines()[1:] if tag in x)
            ref = int(line.split("[", 1)[1].split("]", 1)[0])
            for text in HOSTILE_TEXTS[:6] + HOSTILE_TEXTS[-1:]:
                obs, _, _, _, info = env.step(
                    format_answer([f"type[{ref}, {text}]"], "think_answer", think="f")
                )
                if "<" in text:  # refused: a page may echo typed text as HTML
                    assert not info["action_is_valid"]
                    assert "'<' is refused" in info["invalid_reason"]
                else:
                    assert info["action_is_valid"], info["invalid_reason"]
                    value = driver.execute_script(
                        "return document.activeElement && document.activeElement.value"
                    )
                    assert value == text
                assert driver.execute_script(_NODES_JS) == nodes
                assert driver.execute_script("return window.__pwned === undefined")
        finally:
            env.close()
