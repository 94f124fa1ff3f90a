"""The shop site, its server, the HTML-to-text renderer and WebShopText-v0 (no browser here)."""

from __future__ import annotations

import threading
import urllib.request

import gymnasium
import numpy as np
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.webshop import WebShopEnv, WebShopRandomAgent, random_action
from agentgym.parsing import format_answer
from sandboxes.web.catalog import generate_catalog
from sandboxes.web.page import (
    Link,
    PageView,
    canonical_url,
    clean_query,
    html_to_page,
    normalize_label,
    resolve_href,
)
from sandboxes.web.server import ShopServer, acquire_server, release_server, shop_for
from sandboxes.web.text_backend import HttpReader
from tests.helpers import run_python

TEXT_ID = "agentgym/WebShopText-v0"


def _answer(action: str) -> str:
    return format_answer([action], "think_answer", think="t")


# ----------------------------------------------------------------------------- renderer


def test_html_to_page_hand_example() -> None:
    html = (
        "<html><head><title>T</title><style>a{}</style></head><body>"
        "<h1>Web  Shop</h1>\n<div>a <a href='/x'> b </a>\n  c</div>"
        "<ul><li><div><a href='/y?q=1&amp;page=2'>ID</a></div><div>t &lt;b&gt;</div></li></ul>"
        "<script>var hidden = 1;</script>"
        "<form><div><input name='q' value='typed'> <button>Search</button></div></form>"
        "<div>one<br>two</div><a>no href</a></body></html>"
    )
    page = html_to_page(html, "/p")
    assert page.text == "Web Shop\na b c\nID\nt <b>\nSearch\none\ntwo\nno href"
    assert page.links == (Link("b", "/x"), Link("ID", "/y?q=1&page=2"))
    assert page.has_search and page.url == "/p"


def test_labels_and_urls() -> None:
    assert normalize_label("  Next   >") == normalize_label("next >") == "next >"
    assert canonical_url("http://h:1/search?q=a%7Eb+c&page=2") == "/search?q=a~b+c&page=2"
    assert canonical_url("/search?q=a~b%20c&page=2") == "/search?q=a~b+c&page=2"
    assert resolve_href("/item/B0X?q=a", "/buy/B0X?size=small") == "/buy/B0X?size=small"


def test_clean_query() -> None:
    assert clean_query("  green\n\ttea\x00 \u2028 ") == "green tea"
    assert clean_query("\ud800x") == "x"  # an unpaired surrogate cannot be sent
    assert clean_query("😀 ünï") == "😀 ünï"
    assert clean_query("\x01\x02") == ""


# ----------------------------------------------------------------------------- server


def test_server_starts_serves_and_stops_cleanly() -> None:
    catalog, index = shop_for(0, 1000)
    threads_before = set(threading.enumerate())
    server = ShopServer(catalog, index)
    assert server.running and server.url == f"http://127.0.0.1:{server.port}"
    listening = server._server.socket  # our own socket: whether the port is free is another
    # matter (any process may take a freed port at once, e.g. a test running beside this one)
    with urllib.request.urlopen(server.url + "/", timeout=10) as response:
        assert response.status == 200 and b"Search" in response.read()
    server.close()
    server.close()  # twice is fine
    assert not server.running
    assert listening.fileno() == -1  # closed
    assert set(threading.enumerate()) - threads_before == set()


def test_shared_server_is_reference_counted() -> None:
    a = acquire_server(0, 1000)
    b = acquire_server(0, 1000)
    assert a is b
    release_server(a)
    assert b.running
    release_server(b)
    assert not b.running
    c = acquire_server(0, 1000)
    assert c is not a and c.running
    release_server(c)


def test_pages_over_http() -> None:
    server = acquire_server(0, 1000)
    reader = HttpReader(server.url)
    try:
        home = reader.goto("/")
        assert home == PageView("/", "WebShop\nSearch", (), True)
        results = reader.search("green tea")
        lines = results.text.splitlines()
        assert lines[:4] == [
            "Back to Search",
            'Results for "green tea"',
            "Page 1 of 5 (Total results: 50)",
            "Next >",
        ]
        first = results.links[2]
        assert first.label.startswith("B0") and first.href.startswith(f"/item/{first.label}")
        item = reader.click(results, 2)
        product = generate_catalog(0, 1000).get(first.label)
        assert product is not None
        assert item.text.splitlines()[2:5] == [
            product.title,
            f"Price: ${product.price:.2f}",
            f"Rating: {product.rating} out of 5",
        ]
        labels = [link.label for link in item.links]
        assert labels[:2] == ["Back to Search", "< Prev"]
        assert labels[-3:] == ["Description", "Features", "Buy Now"]
        assert labels[2:-3] == [v for values in product.options.values() for v in values]
        assert reader.goto("/item/NOPE").text == "Back to Search\nPage not found."
        assert reader.goto("/search?q=").text == "Back to Search\nPlease enter a search query."
        assert reader.goto("/search?q=green+tea&page=99").text.splitlines()[2] == (
            "Page 5 of 5 (Total results: 50)"
        )
    finally:
        release_server(server)


def test_query_markup_is_escaped_not_injected() -> None:
    server = acquire_server(0, 1000)
    try:
        query = '<script>alert("x")</script><b>bold</b> &amp; t-shirt'
        url = server.url + "/search?q=" + urllib.parse.quote(query)
        with urllib.request.urlopen(url, timeout=10) as response:
            html = response.read().decode("utf-8")
        assert "<script>" not in html and "<b>bold" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;b&gt;bold" in html
        page = HttpReader(server.url).search(query)
        assert f'Results for "{query}"' in page.text.splitlines()
    finally:
        release_server(server)


# ----------------------------------------------------------------------------- the text env


def test_first_observation_hand_example() -> None:
    env = gymnasium.make(TEXT_ID)
    obs, info = env.reset(seed=0)
    goal = env.unwrapped.goal
    assert obs == (
        f"Instruction: {goal.instruction}\nPage:\nWebShop\nSearch\n"
        "Available actions: search[<query>]"
    )
    assert info["instruction"] == goal.instruction
    assert info["valid_actions"] is None  # a free-text search is possible
    env.close()


def test_same_seed_same_catalog_instruction_and_first_page() -> None:
    a, b = gymnasium.make(TEXT_ID), gymnasium.make(TEXT_ID)
    for seed in (0, 1, 123):
        obs_a, _ = a.reset(seed=seed)
        obs_b, _ = b.reset(seed=seed)
        assert obs_a == obs_b
        assert a.unwrapped.goal == b.unwrapped.goal
    assert a.unwrapped.catalog is b.unwrapped.catalog
    other = gymnasium.make(TEXT_ID, catalog_seed=1)
    assert other.reset(seed=0)[0] != a.reset(seed=0)[0]
    for env in (a, b, other):
        env.close()


def test_goal_is_the_same_in_a_fresh_process() -> None:
    code = (
        "import gymnasium, agentgym\n"
        "env = gymnasium.make('agentgym/WebShopText-v0')\n"
        "print(env.reset(seed=7)[0]); env.close()\n"
    )
    out = run_python("-c", code, timeout=120, check=True).stdout
    env = gymnasium.make(TEXT_ID)
    assert out.rstrip("\n") == env.reset(seed=7)[0]
    env.close()


def _play(env: gymnasium.Env, actions: list[str]) -> list[tuple]:
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(_answer(action))
        out.append((obs, reward, terminated, truncated, info["action_is_valid"]))
        if terminated or truncated:
            break
    return out


BAD_PAGE_ACTIONS = {
    "unknown button": "click[Add to Cart]",
    "click on home": "click[Search]",
    "empty search": "search[]",
    "blank search": "search[   \n ]",
    "control-only search": "search[\x00\x01]",
    "50kB query": "search[" + "ab " * 17_000 + "]",
    "no brackets": "search green tea",
    "unclosed": "click[Next >",
    "other verb": "buy[B012345678]",
}


@pytest.mark.parametrize("name", list(BAD_PAGE_ACTIONS))
def test_bad_actions_on_the_home_page_are_penalised(name: str) -> None:
    env = gymnasium.make(TEXT_ID)
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(_answer(BAD_PAGE_ACTIONS[name]))
    assert info["action_is_valid"] is False and "unrecognised action" in info["invalid_reason"]
    assert (reward, terminated, truncated) == (-0.1, False, False)
    assert obs == obs0
    env.close()


def test_actions_not_on_this_page_are_invalid() -> None:
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    env.step(_answer("search[green tea]"))
    obs0 = env.unwrapped.render()
    for action in ("search[green tea]", "click[Buy Now]", "click[Description]", "click[B0NOTHERE]"):
        obs, reward, *_, info = env.step(_answer(action))
        assert info["action_is_valid"] is False and reward == -0.1 and obs == obs0, action
    env.close()


@pytest.mark.parametrize(
    "query",
    [
        "<script>alert(1)</script>",
        '"><img src=x onerror=alert(1)>',
        "{{ 7*7 }} {% raw %}",
        "ünïcödé 日本語 😀 \u202e rtl",
        "\ue007 private use",
        "a" * 500,
    ],
)
def test_odd_queries_are_shown_as_text(query: str) -> None:
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(_answer(f"search[{query}]"))
    assert info["action_is_valid"] is True and reward == 0.0
    assert f'Results for "{clean_query(query)}"' in obs.splitlines()
    assert "49" not in obs.split("Results for")[1].splitlines()[0]  # no template evaluation
    env.close()


def test_query_length_limit() -> None:
    env = gymnasium.make(TEXT_ID, max_query_length=10)
    env.reset(seed=0)
    assert env.step(_answer("search[0123456789]"))[4]["action_is_valid"] is True
    env.reset(seed=0)
    assert env.step(_answer("search[01234567890]"))[4]["action_is_valid"] is False
    env.close()


def test_click_labels_ignore_case_and_spacing() -> None:
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    env.step(_answer("search[green tea]"))
    obs, _, _, _, info = env.step(_answer("click[  NEXT   > ]"))
    assert info["action_is_valid"] and info["executed_actions"] == ("click[Next >]",)
    assert "Page 2 of 5" in obs
    env.close()


def test_selecting_the_selected_option_again_is_not_effective() -> None:
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    inner = env.unwrapped
    steps = 0
    while not inner.view.url.startswith(f"/item/{inner.goal.product_id}"):
        env.step(inner.oracle_answer())
        steps += 1
        assert steps < 10
    value = next(iter(inner.goal.options.values()))
    first = env.step(_answer(f"click[{value}]"))
    again = env.step(_answer(f"click[{value}]"))
    assert first[4]["action_is_effective"] is True
    assert again[4]["action_is_effective"] is False and again[0] == first[0]
    env.close()


def test_buying_ends_the_episode_with_the_reward_parts() -> None:
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    inner = env.unwrapped
    env.step(inner.oracle_answer())  # search
    env.step(inner.oracle_answer())  # open the target
    obs, reward, terminated, truncated, info = env.step(_answer("click[Buy Now]"))
    goal = inner.goal
    n_attr, n_opt = len(goal.attributes), len(goal.options)
    # no option selected: (n_attr + 0 + 1) / (n_attr + n_opt + 1)
    assert reward == pytest.approx((n_attr + 1) / (n_attr + n_opt + 1))
    assert terminated and not truncated and info["success"] is (n_opt == 0)
    assert info["purchased"] == goal.product_id and info["selected_options"] == {}
    assert info["reward_parts"]["total"] == reward
    assert obs.splitlines()[2] == "Thank you for shopping with us!"
    assert obs.endswith("Available actions: none")
    env.close()


def test_running_out_of_turns_truncates_with_no_reward() -> None:
    env = gymnasium.make(TEXT_ID, max_turns=2)
    env.reset(seed=0)
    first = env.step(_answer("search[green tea]"))
    last = env.step(_answer("click[Next >]"))
    assert first[1:4] == (0.0, False, False)
    assert last[1:4] == (0.0, False, True) and last[4]["success"] is False
    env.close()


def test_oracle_succeeds_on_100_seeds() -> None:
    env = gymnasium.make(TEXT_ID)
    successes, turns = 0, []
    for seed in range(100):
        env.reset(seed=seed)
        for _ in range(15):
            *_, terminated, truncated, info = env.step(env.unwrapped.oracle_answer())
            if terminated or truncated:
                break
        successes += bool(info["success"])
        turns.append(info["turn"])
    env.close()
    assert successes == 100
    assert max(turns) <= 9  # search, <= 4 x Next >, open, <= 2 options, buy


def test_random_agent_runs_and_its_success_is_reported() -> None:
    """The random agent never raises and buys something now and then (its rate is printed)."""
    env = gymnasium.make(TEXT_ID)
    rewards, successes, buys = [], 0, 0
    for seed in range(30):
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng([0, seed])
        total = 0.0
        while True:
            obs, reward, terminated, truncated, info = env.step(_answer(random_action(obs, rng)))
            assert info["action_is_valid"], (obs, info["actions"])
            total += reward
            if terminated or truncated:
                break
        buys += "purchased" in info
        successes += bool(info["success"])
        rewards.append(total)
    env.close()
    print(
        f"random agent over 30 seeds: success {successes}/30, bought {buys}/30, "
        f"mean return {np.mean(rewards):.3f}"
    )
    assert buys > 0 and 0 <= successes <= buys


def test_random_action_hand_cases() -> None:
    obs = "Instruction: i need green tea\nPage:\nx\nAvailable actions: click[a, b], click[Next >]"
    rng = np.random.default_rng(0)
    assert {random_action(obs, rng) for _ in range(30)} == {"click[a, b]", "click[Next >]"}
    home = "Instruction: i need green tea\nPage:\nWebShop\nAvailable actions: search[<query>]"
    action = random_action(home, np.random.default_rng(1))
    assert action.startswith("search[") and set(action[7:-1].split()) <= {
        "i",
        "need",
        "green",
        "tea",
    }
    assert random_action("Instruction: x\nAvailable actions: none", rng) == "click[Back to Search]"


def test_webshop_random_agent_batches() -> None:
    agent = WebShopRandomAgent(seed=0)
    env = gymnasium.make(TEXT_ID)
    obs, info = env.reset(seed=0)

    class Req:
        env_id, episode, seed, turn, action_format = TEXT_ID, 0, 0, 1, "think_answer"
        observation = obs

    (answer,) = agent.act([Req()])
    assert env.step(answer)[4]["action_is_valid"]
    env.close()


def test_constructor_checks_arguments() -> None:
    with pytest.raises(ValueError, match="backend"):
        WebShopEnv(backend="lynx")
    with pytest.raises(ValueError, match="max_actions_per_turn"):
        WebShopEnv(backend="text", max_actions_per_turn=2)
    with pytest.raises(ValueError, match="num_products"):
        WebShopEnv(backend="text", num_products=0)
    with pytest.raises(ValueError, match="catalog_seed"):
        WebShopEnv(backend="text", catalog_seed=-3)


def test_close_releases_the_shared_server() -> None:
    a, b = gymnasium.make(TEXT_ID), gymnasium.make(TEXT_ID)
    a.reset(seed=0)
    b.reset(seed=0)
    server = a.unwrapped.server
    assert server is b.unwrapped.server and server.running
    a.close()
    assert server.running
    b.close()
    assert not server.running
    b.close()  # twice is fine


def test_an_invalid_action_says_why_and_lists_the_valid_ones() -> None:
    """Issue 16: the reason names the fault (no search box here, no such link, not an action) and
    the page's valid actions, which the chat layer shows the agent."""
    env = gymnasium.make(TEXT_ID)
    env.reset(seed=0)
    env.step(_answer("search[green tea]"))
    offered = ", ".join(env.unwrapped.page_actions())
    assert offered.startswith("click[Back to Search]")
    info = env.step(_answer("search[green tea]"))[4]
    assert info["invalid_reason"] == (
        "unrecognised action(s): 'search[green tea]': this page has no search box "
        f"(click[Back to Search] returns to one); valid actions here: {offered}"
    )
    info = env.step(_answer("click[Buy Now]"))[4]
    assert info["invalid_reason"] == (
        "unrecognised action(s): 'click[Buy Now]': this page has no link or button 'Buy Now'; "
        f"valid actions here: {offered}"
    )
    env.reset(seed=0)
    info = env.step(_answer("buy[B012345678]"))[4]
    assert info["invalid_reason"] == (
        "unrecognised action(s): 'buy[B012345678]': an action is search[your query] or "
        "click[a label shown on the page]; valid actions here: "
        + ", ".join(env.unwrapped.page_actions())
    )
    env.close()
