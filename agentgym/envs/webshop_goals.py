"""WebShop-v0's task: instructions (goals) drawn from the catalog, and the reward for a purchase.

The scoring lives here, with the environment (:mod:`agentgym.envs.webshop`); ``sandboxes.web``
only serves and reads the shop site.

Goal (:func:`make_goal`, from a generator the environment owns): a target product is drawn
uniformly; the goal asks for its product type, 1 to ``min(3, n)`` of its ``n`` attributes
(a uniform subset), one value of each of its option kinds (uniform over the offered values), and a
price bound: the smallest of :data:`PRICE_BOUNDS` strictly above the target's price. The
instruction reads like WebShop's (Yao et al. 2022, ``web_agent_site/engine/goal.py`` builds them
from human-written templates)::

    i am looking for a t-shirt that is machine wash and slim fit, with size: medium and
    color: navy, and price lower than 20.00 dollars

Reward (:func:`get_reward`), following WebShop's ``get_reward`` (``web_agent_site/engine/goal.py``)
part by part::

    total = r_type * (n_attr_matched + n_option_matched + r_price) / (n_attr + n_option + 1)

* ``n_attr_matched``: goal attributes that the bought product has: one of its attributes, or the
  phrase appears in its title, description or features (WebShop's text fallback). Weight
  ``1 / (n_attr + n_option + 1)`` each.
* ``n_option_matched``: goal option values among the options selected at purchase. Same weight
  each.
* ``r_price``: 1 if the price is at most the goal's bound, else 0. Same weight.
* ``r_type`` multiplies the sum: 1.0 when the type matches, else 0.5; 0.1 when ``title_score`` is
  under 0.1 and 0.0 when it is 0. The type matches when ``query_match`` (same product type: the
  search query WebShop's goals were scraped under), ``category_match`` (at least 2 of the 3
  category-path levels shared) or ``title_score > 0.2``; ``title_score`` is the share of the
  goal title's nouns found among the bought title's nouns. WebShop finds nouns with spaCy's POS
  tagger; here a title's nouns are, by construction, the words of its product type (its head
  noun phrase: "running shoes" gives {"running", "shoes"}).

Where WebShop compares attributes and options by fuzzy matching (``fuzz.token_set_ratio > 85``,
to absorb the spelling variants of scraped data), this catalog's vocabulary is closed, so
they are compared exactly after lower-casing and collapsing white space (fuzzy matching would
count "x-large" as "xx-large"). ``success`` is ``total == 1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import numpy as np

from sandboxes.web.catalog import Catalog, Product

__all__ = ["Goal", "RewardParts", "make_goal", "get_reward", "title_nouns", "PRICE_BOUNDS"]

#: Price bounds an instruction may state, in dollars.
PRICE_BOUNDS: tuple[float, ...] = (
    10.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    80.0,
    100.0,
    150.0,
    200.0,
    300.0,
    400.0,
    500.0,
)


@dataclass(frozen=True)
class Goal:
    """What the shopper must buy.

    Attributes:
        target_index: catalog index of the product the goal was drawn from.
        product_id: its id.
        product_type: its type name (e.g. ``"t-shirt"``).
        category_path: its ``(category, subcategory, type)``.
        title: its title (the goal's "name" in WebShop's reward).
        attributes: the attribute phrases asked for.
        options: option kind -> asked value.
        price_upper: price bound in dollars (inclusive).
        instruction: the instruction text shown to the agent.
    """

    target_index: int
    product_id: str
    product_type: str
    category_path: tuple[str, str, str]
    title: str
    attributes: tuple[str, ...]
    options: Mapping[str, str]
    price_upper: float
    instruction: str

    def as_dict(self) -> dict[str, object]:
        """Plain data (for ``info``)."""
        return {
            "target_index": self.target_index,
            "product_id": self.product_id,
            "product_type": self.product_type,
            "attributes": list(self.attributes),
            "options": dict(self.options),
            "price_upper": self.price_upper,
            "instruction": self.instruction,
        }


@dataclass(frozen=True)
class RewardParts:
    """Each part of WebShop's reward for one purchase (see the module docstring).

    Attributes:
        r_type: type multiplier in {0, 0.1, 0.5, 1}.
        query_match: same product type.
        category_match: at least 2 category-path levels shared.
        title_score: share of the goal title's nouns in the bought title's nouns, in [0, 1].
        n_attr: goal attributes; n_attr_matched: those matched.
        n_option: goal options; n_option_matched: those matched.
        r_price: 1.0 if the price is within the bound, else 0.0.
        total: the reward, in [0, 1].
    """

    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    n_attr: int
    n_attr_matched: int
    n_option: int
    n_option_matched: int
    r_price: float
    total: float
    matched_attributes: tuple[str, ...] = field(default=())
    matched_options: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, object]:
        """Every part but the matched names, by name (in ``info["reward_parts"]``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _MATCHED}


#: The fields of :class:`RewardParts` that :meth:`RewardParts.as_dict` leaves out.
_MATCHED = ("matched_attributes", "matched_options")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def price_bound(price: float) -> float:
    """The smallest of :data:`PRICE_BOUNDS` strictly above ``price`` (or ``2 * price`` past them)."""
    for bound in PRICE_BOUNDS:
        if bound > price:
            return bound
    return float(np.ceil(2 * price))


def make_goal(catalog: Catalog, rng: np.random.Generator) -> Goal:
    """Draw a goal from ``catalog`` with ``rng`` (the environment's ``np_random``).

    Draws, in this order: the target index (``rng.integers(len(catalog))``), the number of
    attributes ``k`` (``rng.integers(1, min(3, n) + 1)``), ``k`` attributes without replacement
    (kept in the product's order), then one value per option kind in the product's kind order.
    """
    product = catalog[int(rng.integers(len(catalog)))]
    n = len(product.attributes)
    k = int(rng.integers(1, min(3, n) + 1))
    picked = sorted(int(i) for i in rng.choice(n, size=k, replace=False))
    attributes = tuple(product.attributes[i] for i in picked)
    options = {
        kind: values[int(rng.integers(len(values)))] for kind, values in product.options.items()
    }
    bound = price_bound(product.price)
    ptype = product.product_type.name
    article = "an" if ptype[0] in "aeiou" else "a"
    parts = [f"i am looking for {article} {ptype} that is {' and '.join(attributes)}"]
    if options:
        parts.append("with " + " and ".join(f"{k}: {v}" for k, v in options.items()))
    parts.append(f"and price lower than {bound:.2f} dollars")
    return Goal(
        target_index=product.index,
        product_id=product.product_id,
        product_type=ptype,
        category_path=product.category_path,
        title=product.title,
        attributes=attributes,
        options=MappingProxyType(options),
        price_upper=bound,
        instruction=", ".join(parts),
    )


def title_nouns(product: Product) -> frozenset[str]:
    """The nouns of a product's title: the words of its product type (lower case)."""
    return frozenset(product.product_type.name.lower().split())


def _goal_nouns(goal: Goal, catalog: Catalog) -> frozenset[str]:
    return title_nouns(catalog[goal.target_index])


def get_reward(
    goal: Goal, product: Product, selected_options: Mapping[str, str], catalog: Catalog
) -> RewardParts:
    """WebShop's reward for buying ``product`` with ``selected_options`` (module docstring).

    Args:
        goal: the episode's goal.
        product: the product bought.
        selected_options: option kind -> value selected at purchase (kinds not selected absent).
        catalog: the catalog the goal was drawn from (for the goal title's nouns).

    Returns:
        A :class:`RewardParts`; ``total`` in [0, 1].
    """
    query_match = product.product_type.name == goal.product_type
    shared = sum(a == b for a, b in zip(product.category_path, goal.category_path, strict=True))
    category_match = shared >= 2
    desired = _goal_nouns(goal, catalog)
    bought = title_nouns(product)
    title_score = len(desired & bought) / len(desired) if desired else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0

    product_attrs = {_norm(a) for a in product.attributes}
    text = _norm(" ".join([product.title, product.description, *product.features]))
    matched_attrs = tuple(
        a for a in goal.attributes if _norm(a) in product_attrs or _norm(a) in text
    )
    chosen = {_norm(v) for v in selected_options.values()}
    matched_opts = tuple(v for v in goal.options.values() if _norm(v) in chosen)
    r_price = 1.0 if product.price <= goal.price_upper else 0.0
    n_attr, n_opt = len(goal.attributes), len(goal.options)
    total = r_type * (len(matched_attrs) + len(matched_opts) + r_price) / (n_attr + n_opt + 1)
    return RewardParts(
        r_type=r_type,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
        n_attr=n_attr,
        n_attr_matched=len(matched_attrs),
        n_option=n_opt,
        n_option_matched=len(matched_opts),
        r_price=r_price,
        total=float(total),
        matched_attributes=matched_attrs,
        matched_options=matched_opts,
    )
