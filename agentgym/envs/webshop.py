"""WebShop-v0: find and buy the product an instruction describes, on a local shop web site.

A faithful, self-contained equivalent of WebShop (Yao et al. 2022, "WebShop: Towards Scalable
Real-World Web Interaction with Grounded Language Agents"): the shop (:mod:`sandboxes.web`) is a
Flask site served on 127.0.0.1, over a catalog of generated products (1,000 by default, from
``catalog_seed``); each episode draws an instruction from one product with ``self.np_random``.

* Back ends (same pages, same text, same rewards; a test plays both):

  - ``agentgym/WebShop-v0``: ``backend="browser"``. Selenium 4 drives headless Chromium, which
    loads the pages and is read the way a user sees them (``innerText``); clicks are real clicks.
    The browser starts at the first ``reset`` and lives across episodes; ``close()`` ends it.
  - ``agentgym/WebShopText-v0``: ``backend="text"``. The same server over HTTP, its HTML turned
    into the same text (:func:`sandboxes.web.page.html_to_page`). No browser needed.

* Observation: the instruction, the page's visible text, and the actions the page offers::

      Instruction: i am looking for a t-shirt that is machine wash, with size: medium and
      color: navy, and price lower than 20.00 dollars
      Page:
      WebShop
      Search
      Available actions: search[<query>]

* Actions (one per turn, inside the action format, e.g. ``<think>..</think><answer>..</answer>``):
  ``search[QUERY]`` where the page has the search box (the home page), and ``click[LABEL]`` for a
  link the page shows (a product id, an option value, ``Next >``, ``< Prev``, ``Back to Search``,
  ``Description``, ``Features``, ``Buy Now``); labels match ignoring case and extra spaces. An
  action the page does not offer, an empty query, or a query of more than ``max_query_length``
  characters (after removing control characters and collapsing white space) is an invalid action
  (the shared policy of :class:`~agentgym.text_env.TextEnv`; default reward -0.1, page unchanged).
* Reward: 0 per step until ``Buy Now``; buying ends the episode with WebShop's reward
  (:func:`agentgym.envs.webshop_goals.get_reward`)::

      r_type * (n_attr_matched + n_option_matched + r_price) / (n_attr + n_option + 1)

  each goal attribute, goal option and the price bound weighing ``1 / (n_attr + n_option + 1)``,
  times the type multiplier ``r_type`` (1, 0.5, 0.1 or 0). ``success`` is a reward of 1.
  ``info["reward_parts"]`` gives every part. Running out of turns truncates with reward 0.
* Oracle (:meth:`WebShopEnv.oracle_actions`): searches the target's title, pages to it, selects
  the goal's options and buys: reward 1. Random agent: :func:`random_action`.

Example:
    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/WebShopText-v0")
    >>> obs, info = env.reset(seed=0)
    >>> obs.splitlines()[-1]
    'Available actions: search[<query>]'
    >>> for _ in range(10):
    ...     obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_answer())
    ...     if terminated:
    ...         break
    >>> reward, info["success"]
    (1.0, True)
    >>> env.close()
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from agentgym.agents import RandomAgent
from agentgym.envs.webshop_goals import Goal, RewardParts, get_reward, make_goal
from agentgym.parsing import parse_turn
from agentgym.text_env import ActionOutcome, TextEnv

try:  # selenium: only the browser back end needs it; WebShopText-v0 runs without
    from sandboxes.web.browser import BrowserConfig, ChromiumBrowser
except ModuleNotFoundError as _err:
    BrowserConfig = ChromiumBrowser = None  # type: ignore[assignment,misc]
    _BROWSER_IMPORT_ERROR: ModuleNotFoundError | None = _err
else:
    _BROWSER_IMPORT_ERROR = None
from sandboxes.web.catalog import Catalog, Product
from sandboxes.web.page import PageView, clean_query
from sandboxes.web.server import ShopServer, acquire_server, release_server, shop_for
from sandboxes.web.text_backend import HttpReader

__all__ = ["WebShopEnv", "random_action", "WebShopRandomAgent", "BACKENDS"]

BACKENDS: tuple[str, ...] = ("browser", "text")
SEARCH_PLACEHOLDER = "search[<query>]"
_ACTION = re.compile(r"(search|click)\[(.*)\]", re.IGNORECASE | re.DOTALL)


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


class WebShopEnv(TextEnv):
    """Shop on a local web site for the product an instruction describes (module docstring).

    Args:
        backend: ``"browser"`` (headless Chromium through Selenium) or ``"text"`` (HTTP + HTML
            to text).
        catalog_seed: seed of the generated catalog (>= 0); the episode seed picks the goal.
        num_products: catalog size (>= 1; default 1000).
        max_query_length: longest accepted search query, in characters after cleaning (>= 1).
        chromium_path, chromedriver_path: the binaries (``None``: ``$AGENTGYM_CHROMIUM`` /
            ``$AGENTGYM_CHROMEDRIVER`` or ``/usr/bin/chromium`` / ``/usr/bin/chromedriver``).
        page_load_timeout: seconds per page load in the browser (> 0).
        command_timeout: seconds per WebDriver command before the browser counts as hung (> 0).
        max_turns: turns per episode (default 15).
        max_actions_per_turn: must be 1 (the page changes after every action).
        **kwargs: the other :class:`~agentgym.text_env.TextEnv` arguments.

    Raises:
        ValueError: an argument out of range.
        sandboxes.web.browser.BrowserError: ``backend="browser"`` and Chromium or ChromeDriver is
            missing (the message says how to install them).
    """

    #: Steps wait on another process (a browser, a sandbox): :class:`agentgym.lockstep.LocalEnvs`
    #: steps a batch of them in threads.
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "io_bound": True}

    def __init__(
        self,
        *,
        backend: str = "browser",
        catalog_seed: int = 0,
        num_products: int = 1000,
        max_query_length: int = 500,
        chromium_path: str | None = None,
        chromedriver_path: str | None = None,
        page_load_timeout: float = 10.0,
        command_timeout: float = 20.0,
        max_turns: int = 15,
        max_actions_per_turn: int = 1,
        **kwargs: Any,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        _check_int("catalog_seed", catalog_seed, 0)
        _check_int("num_products", num_products, 1)
        _check_int("max_query_length", max_query_length, 1)
        if max_actions_per_turn != 1:
            raise ValueError("WebShop takes one action per turn: max_actions_per_turn must be 1")
        super().__init__(max_turns=max_turns, max_actions_per_turn=1, **kwargs)
        self.backend = backend
        self.catalog_seed = int(catalog_seed)
        self.num_products = int(num_products)
        self.max_query_length = int(max_query_length)
        if backend == "browser" and _BROWSER_IMPORT_ERROR is not None:
            package = (_BROWSER_IMPORT_ERROR.name or "selenium").partition(".")[0]
            raise ModuleNotFoundError(
                f"WebShop's browser back end needs the package {package!r}: pip install "
                "'agentgym[web]' (WebShopText-v0, backend='text', needs no browser)",
                name=package,
            )
        self.page_load_timeout = float(page_load_timeout)
        self.browser_config = (
            BrowserConfig(
                chromium_path=chromium_path,
                chromedriver_path=chromedriver_path,
                page_load_timeout=page_load_timeout,
                command_timeout=command_timeout,
            )
            if BrowserConfig is not None
            else None
        )
        if backend == "browser":
            self.browser_config.resolved()  # fail now, with the fix, if a binary is missing
        self._server: ShopServer | None = None
        self._release: Callable[[], Any] = lambda: None
        self._reader: ChromiumBrowser | HttpReader | None = None
        self.goal: Goal | None = None
        self.view = PageView(url="/", text="", links=(), has_search=False)
        self.reward_parts: RewardParts | None = None

    # ------------------------------------------------------------------ parts

    @property
    def catalog(self) -> Catalog:
        """The catalog (generated once per process for ``(catalog_seed, num_products)``)."""
        return shop_for(self.catalog_seed, self.num_products)[0]

    @property
    def server(self) -> ShopServer | None:
        """The shop server this env uses (``None`` before the first reset and after close)."""
        return self._server

    @property
    def reader(self) -> ChromiumBrowser | HttpReader | None:
        """The back end that loads and reads pages (``None`` before the first reset)."""
        return self._reader

    def _ensure_started(self) -> ChromiumBrowser | HttpReader:
        if self._server is None or not self._server.running:
            if self._server is not None:
                self._release()
                if self._reader is not None:
                    self._reader.close()
                    self._reader = None
            self._server = acquire_server(self.catalog_seed, self.num_products)
            # released by close(), or when the env is garbage-collected without close()
            self._release = weakref.finalize(self, release_server, self._server)
        if self._reader is None:
            if self.backend == "browser":
                self._reader = ChromiumBrowser(self._server.url, self.browser_config)
            else:
                self._reader = HttpReader(self._server.url, self.page_load_timeout)
        return self._reader

    def close(self) -> None:
        """Stop the browser (no Chromium or ChromeDriver process is left) and let go of the
        server (stopped when no env of this process uses it). Idempotent."""
        reader, self._reader = self._reader, None
        self._server = None
        try:
            if reader is not None:
                reader.close()
        finally:
            self._release()  # a finalizer runs at most once
        super().close()

    # ------------------------------------------------------------------ TextEnv hooks

    @property
    def instructions_text(self) -> str:
        return (
            "WebShop: you are shopping on a web site. Find and buy the product that the "
            "instruction describes: the right kind of product, with the requested attributes and "
            "options, within the price bound. Each observation shows the instruction, the page "
            "and the available actions. Actions: search[your query] on the page with the search "
            "box, and click[label] for any link the page shows (a product id to open it, an "
            "option value to select it, Next >, < Prev, Back to Search, Description, Features, "
            "Buy Now). Buying ends the episode with a reward in [0, 1]: the share of requested "
            "attributes, options and price bound that the bought product meets, times 0 to 1 for "
            "the product type; 1 is a success. An action that the page does not offer is invalid."
        )

    def _reset_state(self, options: dict[str, Any]) -> dict[str, Any]:
        reader = self._ensure_started()
        self.goal = make_goal(self.catalog, self.np_random)
        self.reward_parts = None
        self.view = reader.goto("/")
        return {"instruction": self.goal.instruction}

    def _parse_action(self, token: str) -> tuple[str, Any, str] | None:
        match = _ACTION.fullmatch(token)
        if match is None:
            return None
        kind, argument = match.group(1).lower(), match.group(2)
        if kind == "search":
            if not self.view.has_search or len(argument) > 20 * self.max_query_length:
                return None
            query = clean_query(argument)
            if not query or len(query) > self.max_query_length:
                return None
            return ("search", query, f"search[{query}]")
        index = self.view.find_link(argument)
        if index is None:
            return None
        return ("click", index, f"click[{self.view.links[index].label}]")

    def _why_not(self, token: str) -> str:
        """Why ``token`` is not an action of the current page (for ``info["invalid_reason"]``)."""
        match = _ACTION.fullmatch(token)
        if match is None:
            return "an action is search[your query] or click[a label shown on the page]"
        kind, argument = match.group(1).lower(), match.group(2)
        if kind == "search":
            if not self.view.has_search:
                return "this page has no search box (click[Back to Search] returns to one)"
            query = clean_query(argument[: 20 * self.max_query_length + 1])
            if not query:
                return "the search query is empty"
            return f"the search query is over {self.max_query_length} characters"
        return f"this page has no link or button {argument.strip()[:80]!r}"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`TextEnv.step`, with an unrecognised action's reason naming why and the page's
        valid actions (e.g. ``'search[shoes]': this page has no search box; valid actions here:
        click[Back to Search], ...``)."""
        reasons: list[str] = []
        if self._has_reset and not self._episode_over:  # the page the turn is read against
            parsed = parse_turn(action, self.action_format, self.max_actions_per_turn)
            if parsed.error is None:
                for piece in parsed.actions:
                    if self._parse_action(piece) is None:
                        reasons.append(f"{piece[:80]!r}: {self._why_not(piece)}")
            offered = ", ".join(self.page_actions()) or "none"
        observation, reward, terminated, truncated, info = super().step(action)
        reason = info.get("invalid_reason")
        if reasons and isinstance(reason, str) and reason.startswith("unrecognised action"):
            info["invalid_reason"] = (
                f"unrecognised action(s): {'; '.join(reasons)}; valid actions here: {offered}"
            )
        return observation, reward, terminated, truncated, info

    def _action_name(self, action: tuple[str, Any, str]) -> str:
        return action[2]

    def _apply_action(self, action: tuple[str, Any, str]) -> ActionOutcome:
        reader = self._ensure_started()
        kind, value, _ = action
        before = self.view
        restarts = reader.restarts
        self.view = reader.search(value) if kind == "search" else reader.click(before, value)
        info: dict[str, Any] = {"url": self.view.url}
        if reader.restarts != restarts:
            info["browser_restarts"] = reader.restarts - restarts
        path = urlsplit(self.view.url).path
        if path.startswith("/buy/"):
            product = self.catalog.get(path[len("/buy/") :])
            assert product is not None and self.goal is not None
            selected = _selected_options(product, self.view.url)
            self.reward_parts = get_reward(self.goal, product, selected, self.catalog)
            info.update(
                purchased=product.product_id,
                selected_options=selected,
                reward_parts=self.reward_parts.as_dict(),
            )
            return ActionOutcome(self.reward_parts.total, True, terminated=True, info=info)
        return ActionOutcome(0.0, self.view != before, info=info)

    def _success(self) -> bool:
        return self.reward_parts is not None and self.reward_parts.total == 1.0

    def page_actions(self) -> list[str]:
        """The actions the current page offers, as shown (``search[<query>]`` for the box)."""
        actions = [SEARCH_PLACEHOLDER] if self.view.has_search else []
        seen: set[str] = set()
        for link in self.view.links:
            if link.label.casefold() not in seen:
                seen.add(link.label.casefold())
                actions.append(f"click[{link.label}]")
        return actions

    def valid_actions(self) -> list[str] | None:
        """The page's ``click[...]`` actions; ``None`` where a free-text search is possible."""
        if self.view.has_search:
            return None
        return [a for a in self.page_actions() if a != SEARCH_PLACEHOLDER]

    def _render_state(self) -> str:
        instruction = self.goal.instruction if self.goal else ""
        actions = self.page_actions()
        return (
            f"Instruction: {instruction}\nPage:\n{self.view.text}\n"
            f"Available actions: {', '.join(actions) if actions else 'none'}"
        )

    def oracle_actions(self) -> list[str]:
        """Search the target's title, page to it, select the goal's options, buy (reward 1)."""
        assert self.goal is not None
        target = self.catalog[self.goal.target_index]
        view = self.view
        if view.has_search:
            return [f"search[{target.title}]"]
        path = urlsplit(view.url).path

        def click(label: str) -> list[str] | None:
            return [f"click[{label}]"] if view.find_link(label) is not None else None

        if path == "/search":
            return click(target.product_id) or click("Next >") or click("Back to Search") or []
        if path == f"/item/{target.product_id}":
            selected = _selected_options(target, view.url)
            for kind, value in self.goal.options.items():
                if selected.get(kind) != value:
                    return [f"click[{value}]"]
            return ["click[Buy Now]"]
        return click("< Prev") or click("Back to Search") or ["click[Back to Search]"]


def _selected_options(product: Product, url: str) -> dict[str, str]:
    """Option kind -> value selected in ``url``'s query, for the kinds ``product`` offers."""
    args = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    return {
        kind: args[kind] for kind, values in product.options.items() if args.get(kind) in values
    }


_WORD = re.compile(r"[a-z0-9][a-z0-9-]*")


def random_action(observation: str, rng: np.random.Generator) -> str:
    """A random agent's action from what it sees (no privileged state).

    On a page with the search box: ``search[...]`` of 1-4 words drawn without replacement from the
    instruction (the first observation line). Elsewhere: a uniform choice among the listed
    ``click[...]`` actions.

    Args:
        observation: a WebShop observation.
        rng: the generator.

    Returns:
        One action (not wrapped in the action format).
    """
    lines = observation.splitlines()
    listed = lines[-1].removeprefix("Available actions: ") if lines else ""
    actions = [] if listed == "none" else _split_actions(listed)
    if SEARCH_PLACEHOLDER in actions:
        instruction = lines[0].removeprefix("Instruction: ").lower() if lines else ""
        words = _WORD.findall(instruction) or ["shop"]
        k = int(rng.integers(1, min(4, len(words)) + 1))
        picked = sorted(int(i) for i in rng.choice(len(words), size=k, replace=False))
        return "search[" + " ".join(words[i] for i in picked) + "]"
    if not actions:
        return "click[Back to Search]"
    return actions[int(rng.integers(len(actions)))]


def _split_actions(listed: str) -> list[str]:
    """Split ``click[a], click[b, c], search[<query>]`` at the commas between actions."""
    return [part for part in re.split(r"(?<=\]), (?=(?:click|search)\[)", listed) if part]


class WebShopRandomAgent(RandomAgent):
    """The random agent for ``agentgym eval --agent agentgym.envs.webshop:WebShopRandomAgent``.

    Per episode a generator ``numpy.random.default_rng([seed, episode_seed])`` drives
    :func:`random_action` on the latest observation.
    """

    name = "webshop-random"
    description = (
        "on a page with the search box a search of 1-4 words of the instruction, elsewhere a "
        "uniform choice among the page's clicks; one action per turn"
    )

    def choose(self, request: Any, rng: np.random.Generator) -> str:
        return random_action(request.observation, rng)
