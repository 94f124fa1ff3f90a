"""MiniWoB++ in a real headless Chromium: observation text, actions, rewards, the disabled timer,
resets that leak nothing, typed text that stays text, and the task sets' seeds.

Needs Debian's ``chromium`` and ``chromium-driver`` (CI: ``.ci/setup_chromium.sh``) and the
``miniwob`` package (``agentgym[web]``).
"""

from __future__ import annotations

import re
import threading
import time

import gymnasium
import numpy as np
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.miniwob import MiniWoBEnv, random_action, ref_number, render_page
from agentgym.envs.miniwob_tasks import ALL_TASKS, HTML_TASKS
from agentgym.lockstep import LocalEnvs, play_lockstep
from agentgym.parsing import format_answer
from sandboxes.web.miniwob import FIXED_CLOCK_MS, ElementInfo


def _answer(action: str) -> str:
    return format_answer([action], "think_answer", think="t")


def _ref(observation: str, needle: str) -> int:
    """The ref of the first observation line containing ``needle``."""
    for line in observation.splitlines():
        if needle in line and "[" in line:
            return int(line.split("[", 1)[1].split("]", 1)[0])
    raise AssertionError(f"no line with {needle!r} in:\n{observation}")


@pytest.fixture()
def enter_text():
    env = gymnasium.make("agentgym/MiniWoB-v0", task="enter-text")
    yield env
    env.close()


# ----------------------------------------------------------------------------- observation text


def test_render_page_by_hand() -> None:
    def e(ref, tag, **kw):
        return ElementInfo(ref=ref, tag=tag, box=(1.0, 2.0, 30.0, 40.4), **kw)

    page = e(
        1,
        "body",
        children=(
            e(
                2,
                "div",
                id="wrap",
                children=(
                    e(
                        3,
                        "div",
                        id="area",
                        children=(
                            e(4, "div", children=(e(5, "span", text='Say "hi"'),)),
                            e(
                                6,
                                "label",
                                children=(
                                    e(7, "input_checkbox", value=True, id="ch0"),
                                    e(-1, "t", text="  two   words "),
                                ),
                            ),
                            e(8, "input_text", value="", focused=True),
                            e(
                                9,
                                "select",
                                options=("A", "B b"),
                                selected=(1,),
                                bg_color="rgb(255, 0, 0)",
                            ),
                            e(10, "span", classes="like icon x y", bg_color="rgba(0, 0, 0, 0)"),
                        ),
                    ),
                ),
            ),
        ),
    )
    assert render_page(page) == [
        '[5] span "Say \\"hi\\""',  # a text-less single-child wrapper shows as its child
        "[6] label",
        "  [7] checkbox#ch0 checked",
        '  "two words"',
        '[8] input_text value="" focused',
        '[9] select options=["A", "B b"] selected="B b"',
        "[10] span.like.icon.x",
    ]
    assert render_page(page, colors=True, boxes=True)[4:6] == [
        '[8] input_text value="" focused @(1,2,30,40)',
        '[9] select options=["A", "B b"] selected="B b" background=rgb(255, 0, 0) @(1,2,30,40)',
    ]
    assert render_page(page, sizes=True)[0] == '[5] span "Say \\"hi\\"" size=30x40'


def test_a_page_that_gives_its_own_fields_keeps_them_out_of_the_observation() -> None:
    """The natural-language inbox pages' getUtterance answers {utterance, fields}."""
    env = gymnasium.make("agentgym/MiniWoB-v0", task="email-inbox-nl-turk")
    try:
        obs, info = env.reset(seed=1)
        instruction = obs.splitlines()[0]
        assert "fields" not in instruction and "{" not in instruction
        assert info["fields"] and set(info["fields"]) <= {"by", "to", "task", "message"}
        assert info["fields"]["task"] in ("forward", "reply", "delete", "star")
    finally:
        env.close()


def test_observation_fields_and_clock(enter_text) -> None:
    obs, info = enter_text.reset(seed=3)
    lines = obs.splitlines()
    target = info["fields"]["target"]
    assert lines[0] == f'Instruction: Enter "{target}" into the text field and press Submit.'
    assert lines[1:] == [
        "[4] div#form",
        '  [5] input_text#tt value=""',
        '  [6] button#subbtn.secondary-action "Submit"',
    ]
    assert info["task"] == "enter-text"
    now = enter_text.unwrapped.browser.driver.execute_script("return Date.now()")
    assert (
        FIXED_CLOCK_MS <= now < FIXED_CLOCK_MS + 600_000
    )  # the fixed instant, plus the test's own time
    tz = "return Intl.DateTimeFormat().resolvedOptions().timeZone"
    assert enter_text.unwrapped.browser.driver.execute_script(tz) == "UTC"


# ----------------------------------------------------------------------------- rewards


def test_success_failure_and_raw_rewards(enter_text) -> None:
    obs, info = enter_text.reset(seed=3)
    target = info["fields"]["target"]
    field, submit = _ref(obs, "input_text"), _ref(obs, "Submit")
    obs, reward, terminated, _, step = enter_text.step(_answer(f"type[{field}, {target}]"))
    assert (reward, terminated, step["action_is_effective"]) == (0.0, False, True)
    assert f'value="{target}"' in obs
    _, reward, terminated, truncated, step = enter_text.step(_answer(f"click[{submit}]"))
    assert (reward, terminated, truncated, step["success"]) == (1.0, True, False, True)
    assert step["raw_reward"] == 1.0 and step["browsergym_success"] is True

    obs, info = enter_text.reset(seed=3)
    enter_text.step(_answer(f"type[{field}, {info['fields']['target']}x]"))  # a wrong text
    _, reward, terminated, _, step = enter_text.step(_answer(f"click[{submit}]"))
    assert (reward, terminated, step["success"]) == (0.0, True, False)
    assert step["raw_reward"] == -1.0 and step["browsergym_success"] is False

    raw = gymnasium.make("agentgym/MiniWoB-v0", task="enter-text", reward_mode="raw")
    try:
        raw.reset(seed=3)
        raw.step(_answer(f"type[{field}, wrong]"))
        assert raw.step(_answer(f"click[{submit}]"))[1] == -1.0
    finally:
        raw.close()


def test_partial_credit_is_miniwobs_fraction() -> None:
    """click-checkboxes-soft pays (right - wrong boxes) / boxes (its page, line 101-103): with
    nothing ticked, (n - 2k) / n for n boxes of which the instruction names k."""
    env = gymnasium.make("agentgym/MiniWoB-v0", task="click-checkboxes-soft", reward_mode="raw")
    try:
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            n = obs.count("checkbox#")
            words = obs.splitlines()[0].split("similar to ", 1)[1].split(" and click")[0]
            k = len(words.split(", "))
            _, reward, terminated, _, step = env.step(_answer(f"click[{_ref(obs, 'Submit')}]"))
            assert terminated and reward == pytest.approx((n - 2 * k) / n)
            assert step["raw_reward"] == pytest.approx((n - 2 * k) / n)
            assert step["success"] is False
    finally:
        env.close()


def test_a_long_pause_changes_no_reward(enter_text) -> None:
    """MiniWoB++ ends an episode with -1 after 10 s (core.js: EPISODE_MAX_TIME); here it waits."""
    obs, info = enter_text.reset(seed=5)
    time.sleep(11.0)
    obs, *_ = enter_text.step(
        _answer(f"type[{_ref(obs, 'input_text')}, {info['fields']['target']}]")
    )
    _, reward, terminated, _, step = enter_text.step(_answer(f"click[{_ref(obs, 'Submit')}]"))
    assert (reward, terminated, step["raw_reward"]) == (1.0, True, 1.0)


# ----------------------------------------------------------------------------- actions


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("click[99]", "no element '99' on the page"),
        ("click[abc]", "no element 'abc' on the page"),
        ("click[2]", "no element '2' on the page"),  # div#wrap: the frame, never shown
        ("click[3]", "no element '3' on the page"),  # div#area
        ("type[5]", r"type takes a ref and an argument"),
        ("type[5, " + "x" * 257 + "]", "over 256 characters"),
        ("type[5, a\x07b]", r"U\+0007 is not printable"),
        ("type[5, \U0001f600]", "outside the Basic Multilingual Plane"),
        ("type[5, \ue007]", r"U\+E007 is not printable \(category Co\)"),
        ("press[F13]", "press takes one of Enter"),
        ("select[5, x]", r"element \[5\] is not a list of options"),
        ("scroll[5, left]", "scroll takes up or down"),
        ("click_at[10, 10]", "needs coordinate actions"),
        ("hover[5]", "unknown action 'hover'"),
        ("click 5", "an action is click"),
    ],
)
def test_invalid_actions_name_the_reason_and_change_nothing(enter_text, action, reason) -> None:
    obs, _ = enter_text.reset(seed=3)
    after, reward, terminated, truncated, info = enter_text.step(_answer(action))
    assert info["action_is_valid"] is False
    assert reward == -0.1 and not terminated and not truncated
    assert after == obs
    import re

    assert re.search(reason, info["invalid_reason"]), info["invalid_reason"]


def test_a_read_only_field_says_so() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0", task="choose-date")
    try:
        obs, _ = env.reset(seed=0)
        line = next(x for x in obs.splitlines() if "#datepicker" in x)
        assert line.endswith(" readonly")
        _, _, _, _, info = env.step(_answer(f"type[{_ref(obs, '#datepicker')}, 01/01/2016]"))
        assert info["action_error"] == f"element [{_ref(obs, '#datepicker')}] does not take text"
    finally:
        env.close()


def test_select_press_and_coordinates() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0", task="choose-list")
    try:
        obs, info = env.reset(seed=2)
        select = _ref(obs, "select")
        target = info["fields"]["target"]
        obs, _, _, _, step = env.step(_answer(f"select[{select}, {target.upper()}]"))  # any case
        assert step["executed_actions"] == (f"select[{select}, {target}]",)
        assert f'selected="{target}"' in obs
        _, reward, terminated, _, _ = env.step(_answer(f"click[{_ref(obs, 'Submit')}]"))
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()
    env = gymnasium.make("agentgym/MiniWoBAll-v0")
    try:
        obs, info = env.reset(seed=0, options={"task": "click-test"})
        assert " @(" in obs  # boxes shown with coordinate actions on
        line = next(x for x in obs.splitlines()[1:] if "button" in x)
        left, top, width, height = (int(v) for v in line.split("@(")[1].rstrip(")").split(","))
        bad = env.step(_answer("click_at[170, 20]"))[4]
        assert "outside the task area" in bad["invalid_reason"]
        _, reward, terminated, _, _ = env.step(
            _answer(f"click_at[{left + width // 2}, {top + height // 2}]")
        )
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()


def test_typed_markup_and_script_stay_text(enter_text) -> None:
    obs, _ = enter_text.reset(seed=3)
    field = _ref(obs, "input_text")
    driver = enter_text.unwrapped.browser.driver
    count = "return document.querySelectorAll('img, script, iframe, object').length"
    elements = driver.execute_script(count)
    for text in [
        '<img src=x onerror="window.__pwned=1">',
        '"); window.__pwned = 1; ("',
        "</script><script>window.__pwned=1</script>",
        "${window.__pwned=1}",
    ]:
        obs, _, _, _, info = enter_text.step(_answer(f"type[{field}, {text}]"))
        value = driver.execute_script("return document.getElementById('tt').value")
        if "<" in text:  # refused: a page may echo typed text as HTML (the terminal task does)
            assert not info["action_is_valid"] and "'<' is refused" in info["invalid_reason"]
        else:
            assert value == (text[1:-1] if text.startswith('"') and text.endswith('"') else text)
        assert driver.execute_script("return window.__pwned === undefined")
        assert driver.execute_script(count) == elements


# ----------------------------------------------------------------------------- resets and seeds


def test_reset_reloads_the_page_and_same_seed_same_episode(enter_text) -> None:
    first, _ = enter_text.reset(seed=7)
    driver = enter_text.unwrapped.browser.driver
    driver.execute_script("window.__leak = 1; document.body.dataset.leak = 'yes';")
    second, _ = enter_text.reset(seed=7)
    assert second == first
    assert driver.execute_script(
        "return window.__leak === undefined && !document.body.dataset.leak"
    )
    other, _ = enter_text.reset(seed=8)
    assert other != first


def test_the_seed_picks_the_task_in_a_task_set() -> None:
    env = gymnasium.make("agentgym/MiniWoBHTML-v0")
    try:
        seen = []
        for seed in (0, 1, 55, 56, 57, 279):
            _, info = env.reset(seed=seed)
            seen.append(info["task"])
        assert seen == [HTML_TASKS[s % len(HTML_TASKS)] for s in (0, 1, 55, 56, 57, 279)]
        assert len(HTML_TASKS) == 56 and len(ALL_TASKS) == 125
        with pytest.raises(ValueError, match="options\\['task'\\]"):
            env.reset(seed=0, options={"task": "no-such-task"})
    finally:
        env.close()


def test_bad_arguments_name_the_fix() -> None:
    with pytest.raises(ValueError, match="task must be one of MiniWoB"):
        MiniWoBEnv(task="no-such-task")
    with pytest.raises(ValueError, match="not both"):
        MiniWoBEnv(task="click-test", task_set="html")
    with pytest.raises(ValueError, match="task_set must be one of"):
        MiniWoBEnv(task_set="everything")
    with pytest.raises(ValueError, match="reward_mode"):
        MiniWoBEnv(reward_mode="soft")
    with pytest.raises(ValueError, match="max_actions_per_turn must be 1"):
        MiniWoBEnv(max_actions_per_turn=2)


def test_random_agent_reads_only_the_observation() -> None:
    observation = (
        "Instruction: Select Kassi from the list and click Submit.\n"
        '[4] select options=["Suellen", "Kassi \\"K\\""] selected="Suellen"\n'
        '[5] input_text#tt value=""\n'
        '[6] button "Submit"\n'
        '  "free text"'
    )
    rng = np.random.default_rng(0)
    seen = {random_action(observation, rng) for _ in range(400)}
    words = ["Select", "Kassi", "from", "the", "list", "and", "click", "Submit"]
    assert seen == {
        "click[4]",
        "click[5]",
        "click[6]",
        "select[4, Suellen]",
        'select[4, Kassi "K"]',
        *(f"type[5, {w}]" for w in words),
    }


# ----------------------------------------------------------------------------- review cases


def test_a_value_is_shown_exactly_as_typed(enter_text) -> None:
    obs, info = enter_text.reset(seed=3)
    field = _ref(obs, "input_text")
    target = info["fields"]["target"]
    obs, *_ = enter_text.step(_answer(f"type[{field},  {target}  x]"))  # one space is the separator
    assert f'value=" {target}  x"' in obs
    obs, *_ = enter_text.step(_answer(f"type[{field}, {target} ]"))
    assert f'value="{target} "' in obs  # a trailing space shows: the value is not the target
    _, reward, terminated, _, step = enter_text.step(_answer(f"click[{_ref(obs, 'Submit')}]"))
    assert (reward, terminated, step["raw_reward"]) == (0.0, True, -1.0)


def test_a_list_that_takes_several_shows_and_toggles_every_choice() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0", task="click-scroll-list")
    try:
        obs, _ = env.reset(seed=0)
        line = next(x for x in obs.splitlines() if "select" in x)
        ref = _ref(obs, "select")
        first, second = line.split("options=[")[1].split("]")[0].split(", ")[:2]
        obs, *_ = env.step(_answer(f"select[{ref}, {first.strip(chr(34))}]"))
        obs, *_ = env.step(_answer(f"select[{ref}, {second.strip(chr(34))}]"))
        assert f"multiple selected=[{first}, {second}]" in obs
        obs, _, _, _, info = env.step(_answer(f"select[{ref}, {first.strip(chr(34))}]"))
        assert f"multiple selected=[{second}]" in obs and info["action_is_effective"]
    finally:
        env.close()


def test_a_wrapper_with_classes_keeps_its_line() -> None:
    env = gymnasium.make("agentgym/MiniWoB-v0", task="text-editor")
    try:
        obs, _ = env.reset(seed=0)
        assert "span.ql-color.ql-picker.ql-color-picker" in obs  # the colour picker says so
    finally:
        env.close()


def test_more_review_cases() -> None:
    env = gymnasium.make("agentgym/MiniWoBAll-v0")
    try:
        obs, info = env.reset(seed=0, options={"task": "click-test"})
        assert "page_seed" not in info and env.unwrapped.page_seed  # kept off what agents read
        step = env.step(_answer("click_at[159.6, 10]"))[4]  # rounds to 160: outside
        assert "(160, 10) is outside the task area" in step["invalid_reason"]
        button = _ref(obs, "button")
        step = env.step(_answer(f"click[{button}] click[{button}]"))[4]
        assert "one action per turn" in step["invalid_reason"]
    finally:
        env.close()
    for name in ("settle_s", "page_load_timeout", "command_timeout"):
        with pytest.raises(ValueError, match=f"{name} must be a number of seconds > 0"):
            MiniWoBEnv(**{name: 0})
    raw = MiniWoBEnv(reward_mode="raw")
    assert "reward from -1 (failure) to 1 (success)" in raw.instructions
    raw.close()


# ----------------------------------------------------------------------------- in a pool


def test_browser_envs_step_together_in_threads_each_with_its_own_browser() -> None:
    """Four MiniWoB envs in :class:`agentgym.lockstep.LocalEnvs`: each first step waits at a
    barrier until all four are stepping (played one after the other they would never get past it), each
    env has its own driver and browser processes, and every episode sees exactly what it sees
    played alone (same observations and rewards as a sequential replay of the same actions)."""
    tasks = ["click-test", "click-button", "enter-text", "click-checkboxes"]
    barrier = threading.Barrier(len(tasks))

    class _Together(gymnasium.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.seen: list[tuple[str, float]] = []

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            self.seen = [(obs, 0.0)]
            return obs, info

        def step(self, action):
            if len(self.seen) == 1:  # the first turn: every episode steps it
                barrier.wait(timeout=120)  # BrokenBarrierError when stepped one at a time
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.seen.append((obs, float(reward)))
            return obs, reward, terminated, truncated, info

    def policy(live):
        return [
            _answer(random_action(e.observation, np.random.default_rng([e.index, len(e.steps)])))
            for e in live
        ]

    envs = [_Together(gymnasium.make("agentgym/MiniWoB-v0", task=t)) for t in tasks]
    alone = [gymnasium.make("agentgym/MiniWoB-v0", task=t) for t in tasks]
    try:
        pool = LocalEnvs(envs, threads=len(tasks))
        assert pool.threads == len(tasks)
        seeds = [3, 4, 5, 6]
        played = play_lockstep(pool, seeds, policy)
        assert all(e.steps for e in played) and barrier.n_waiting == 0 and not barrier.broken
        drivers = {id(env.unwrapped.browser.driver) for env in envs}
        pids = [set(env.unwrapped.browser.pids()) for env in envs]
        assert len(drivers) == len(tasks)
        assert all(a.isdisjoint(b) for i, a in enumerate(pids) for b in pids[i + 1 :])
        for env, single, episode in zip(envs, alone, played, strict=True):
            obs, _ = single.reset(seed=episode.seed)
            seen = [(obs, 0.0)]
            for step in episode.steps:
                obs, reward, *_ = single.step(step.action)
                seen.append((obs, float(reward)))
            assert seen == env.seen
    finally:
        for env in envs + alone:
            env.close()


def test_a_page_that_echoes_typed_text_as_html_gets_no_markup() -> None:
    """MiniWoB++'s terminal writes a submitted command into ``innerHTML``: a typed ``<img
    onerror=...>`` then Enter ran script in the page (found by the fuzz test), which could have
    written the reward. ``<`` is refused; what can be typed stays text after Enter."""
    env = gymnasium.make("agentgym/MiniWoB-v0", task="terminal")
    try:
        obs, _ = env.reset(seed=0)
        driver = env.unwrapped.browser.driver
        field = _ref(obs, "input_text")
        _, _, _, _, info = env.step(
            _answer(f'type[{field}, <img src=x onerror="window.__pwned=1">]')
        )
        assert not info["action_is_valid"] and "'<' is refused" in info["invalid_reason"]
        for text in ["${window.__pwned=1}", "&lt;img src=x onerror=window.__pwned=1&gt;"]:
            obs, *_ = env.step(_answer(f"type[{field}, {text}]"))
            obs, *_ = env.step(_answer("press[Enter]"))
            assert driver.execute_script("return window.__pwned === undefined")
            assert driver.execute_script("return document.querySelectorAll('img').length") == 0
    finally:
        env.close()


#: The ref regex ref_number replaced (adjacent white-space runs: it backtracks).
_OLD_REF = re.compile(r"\s*\[?\s*(\d{1,9})\s*\]?\s*")


def test_a_ref_is_read_in_linear_time_with_the_old_forms() -> None:
    """Round 7 (tests/test_attacks_round7.py, the fence finding): ``click[`` + 16,000 spaces +
    ``x]`` took 3.4 s in the old ``_REF.fullmatch``, growing faster than quadratically.
    :func:`ref_number` reads the same forms (checked on random strings against the old regex)
    and 4 MiB of white space in milliseconds."""
    pieces = ["[", "]", " ", "\t", "\n", "\u00a0", "1", "23", "\u0663", "x", "9" * 5]
    rng = np.random.default_rng(0)
    for _ in range(100_000):
        text = "".join(rng.choice(pieces, size=int(rng.integers(0, 10))))
        match = _OLD_REF.fullmatch(text)
        assert ref_number(text) == (int(match.group(1)) if match else None), repr(text)
    for text in (" " * 4 * 2**20 + "x", "[" + " " * 2**21 + "7" + " " * 2**21, "[" * 2**22):
        start = time.perf_counter()
        ref_number(text)
        assert time.perf_counter() - start < 1.0
    assert ref_number("[" + " " * 2**20 + "7" + " " * 2**20 + "]") == 7
