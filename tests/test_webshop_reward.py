"""WebShop's reward, part by part, on hand-worked cases (sandboxes.web.goals.get_reward).

The formula (WebShop, Yao et al. 2022, web_agent_site/engine/goal.py get_reward)::

    total = r_type * (n_attr_matched + n_option_matched + r_price) / (n_attr + n_option + 1)

Every expected value below is worked out by hand from it.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest

from agentgym.envs.webshop_goals import Goal, get_reward
from sandboxes.web.catalog import Catalog, Product, ProductType

TSHIRT = ProductType("t-shirt", "fashion", "clothing", ("size", "color"), (8, 40))
HOODIE = ProductType("hoodie", "fashion", "clothing", ("size", "color"), (20, 70))
COFFEE_BEANS = ProductType("coffee beans", "grocery", "beverages", ("flavor",), (8, 40))
COFFEE_TABLE = ProductType("coffee table", "home", "furniture", ("finish",), (60, 400))
# Long made-up types to reach title scores between 0 and 0.2 (r_type 0.5 and 0.1).
SEVEN_WORDS = ProductType("a b c d e f g", "home", "bath", ("color",), (1, 9))
ELEVEN_WORDS = ProductType("a b c d e f g h i j k", "home", "bath", ("color",), (1, 9))
SHARES_A = ProductType("a z", "grocery", "snacks", ("color",), (1, 9))


def _product(
    index: int,
    ptype: ProductType,
    attributes: tuple[str, ...],
    price: float,
    description: str = "plain",
    features: tuple[str, ...] = (),
    title: str | None = None,
) -> Product:
    return Product(
        index=index,
        product_id=f"B0TEST{index:04d}",
        title=title or f"Brand {ptype.name}",
        brand="Brand",
        product_type=ptype,
        attributes=attributes,
        options=MappingProxyType({}),
        price=price,
        rating=4.0,
        description=description,
        features=features,
    )


def _goal(target: Product, attributes: tuple[str, ...], options: dict[str, str], upper: float):
    return Goal(
        target_index=target.index,
        product_id=target.product_id,
        product_type=target.product_type.name,
        category_path=target.category_path,
        title=target.title,
        attributes=attributes,
        options=MappingProxyType(options),
        price_upper=upper,
        instruction="hand-made",
    )


TARGET = _product(0, TSHIRT, ("machine wash", "slim fit", "short sleeve"), 15.99)
GOAL = _goal(TARGET, ("machine wash", "slim fit"), {"size": "medium", "color": "navy"}, 20.0)


def _catalog(*others: Product) -> Catalog:
    return Catalog(0, (TARGET, *others))


def test_perfect_purchase_scores_one() -> None:
    parts = get_reward(GOAL, TARGET, {"size": "medium", "color": "navy"}, _catalog())
    # (2 attributes + 2 options + price) / (2 + 2 + 1) = 5/5, r_type 1
    assert (parts.n_attr_matched, parts.n_option_matched, parts.r_price) == (2, 2, 1.0)
    assert (parts.r_type, parts.query_match, parts.category_match, parts.title_score) == (
        1.0,
        True,
        True,
        1.0,
    )
    assert parts.total == 1.0


def test_one_option_missing() -> None:
    parts = get_reward(GOAL, TARGET, {"size": "medium"}, _catalog())
    assert parts.total == pytest.approx(4 / 5)  # (2 + 1 + 1) / 5


def test_wrong_option_value_counts_as_missing() -> None:
    parts = get_reward(GOAL, TARGET, {"size": "large", "color": "navy"}, _catalog())
    assert parts.n_option_matched == 1 and parts.total == pytest.approx(4 / 5)


def test_no_options_selected() -> None:
    parts = get_reward(GOAL, TARGET, {}, _catalog())
    assert parts.total == pytest.approx(3 / 5)  # (2 + 0 + 1) / 5


def test_over_price_and_one_attribute_missing() -> None:
    other = _product(1, TSHIRT, ("machine wash", "long sleeve"), 25.99)
    parts = get_reward(GOAL, other, {"size": "medium"}, _catalog(other))
    # attributes: machine wash yes, slim fit no -> 1; options 1; price 25.99 > 20 -> 0
    assert (parts.n_attr_matched, parts.n_option_matched, parts.r_price) == (1, 1, 0.0)
    assert parts.r_type == 1.0
    assert parts.total == pytest.approx(2 / 5)


def test_price_bound_is_inclusive() -> None:
    other = _product(1, TSHIRT, ("machine wash", "slim fit"), 20.0)
    assert get_reward(GOAL, other, {}, _catalog(other)).r_price == 1.0


def test_attribute_found_in_text_counts() -> None:
    """WebShop's fallback: a goal attribute that is not a product attribute but appears in the
    title, description or features still counts."""
    in_description = _product(1, TSHIRT, (), 9.99, description="Soft. Slim Fit  for all.")
    in_features = _product(2, TSHIRT, (), 9.99, features=("Machine wash: yes",))
    in_title = _product(3, TSHIRT, (), 9.99, title="Brand T-Shirt, Machine Wash, Slim Fit")
    catalog = _catalog(in_description, in_features, in_title)
    assert get_reward(GOAL, in_description, {}, catalog).matched_attributes == ("slim fit",)
    assert get_reward(GOAL, in_features, {}, catalog).matched_attributes == ("machine wash",)
    assert get_reward(GOAL, in_title, {}, catalog).n_attr_matched == 2


def test_other_type_same_category_path_without_shared_noun_scores_zero() -> None:
    """A hoodie for a t-shirt goal: category_match holds, but title_score is 0, so r_type = 0
    (WebShop applies the title_score floors after the match test)."""
    hoodie = _product(1, HOODIE, ("machine wash", "slim fit"), 15.99)
    parts = get_reward(GOAL, hoodie, {"size": "medium", "color": "navy"}, _catalog(hoodie))
    assert parts.category_match and not parts.query_match
    assert parts.title_score == 0.0 and parts.r_type == 0.0 and parts.total == 0.0


def test_shared_noun_in_another_category_matches_by_title_score() -> None:
    """coffee table for a coffee beans goal: title_score 1/2 > 0.2, so r_type = 1."""
    beans = _product(0, COFFEE_BEANS, ("gluten free",), 9.99)
    table = _product(1, COFFEE_TABLE, ("gluten free",), 99.0)
    goal = _goal(beans, ("gluten free",), {}, 10.0)
    parts = get_reward(goal, table, {}, Catalog(0, (beans, table)))
    assert not parts.query_match and not parts.category_match
    assert parts.title_score == 0.5 and parts.r_type == 1.0
    assert parts.total == pytest.approx(1 / 2)  # (1 attribute + 0 options + 0 price) / 2


def test_weak_title_score_halves_or_cuts_to_a_tenth() -> None:
    seven = _product(0, SEVEN_WORDS, ("heavy duty",), 5.0)
    eleven = _product(0, ELEVEN_WORDS, ("heavy duty",), 5.0)
    bought = _product(1, SHARES_A, ("heavy duty",), 5.0)
    goal7 = _goal(seven, ("heavy duty",), {}, 10.0)
    parts7 = get_reward(goal7, bought, {}, Catalog(0, (seven, bought)))
    # title_score 1/7 = 0.143: no match (<= 0.2) -> 0.5; not below 0.1 -> stays 0.5
    assert parts7.title_score == pytest.approx(1 / 7) and parts7.r_type == 0.5
    assert parts7.total == pytest.approx(0.5 * (1 + 1) / 2)
    goal11 = _goal(eleven, ("heavy duty",), {}, 10.0)
    parts11 = get_reward(goal11, bought, {}, Catalog(0, (eleven, bought)))
    # title_score 1/11 = 0.091 < 0.1 -> 0.1
    assert parts11.title_score == pytest.approx(1 / 11) and parts11.r_type == 0.1
    assert parts11.total == pytest.approx(0.1)


def test_option_matching_is_exact_not_fuzzy() -> None:
    """x-large is not xx-large (WebShop's fuzzy ratio > 85 would count it; see goals.py)."""
    goal = _goal(TARGET, ("machine wash",), {"size": "x-large"}, 20.0)
    parts = get_reward(goal, TARGET, {"size": "xx-large"}, _catalog())
    assert parts.n_option_matched == 0 and parts.total == pytest.approx(2 / 3)
    parts = get_reward(goal, TARGET, {"size": " X-Large "}, _catalog())
    assert parts.n_option_matched == 1  # case and white space do not matter


def test_as_dict_lists_every_part() -> None:
    parts = get_reward(GOAL, TARGET, {"size": "medium"}, _catalog())
    assert parts.as_dict() == {
        "r_type": 1.0,
        "query_match": True,
        "category_match": True,
        "title_score": 1.0,
        "n_attr": 2,
        "n_attr_matched": 2,
        "n_option": 2,
        "n_option_matched": 1,
        "r_price": 1.0,
        "total": 0.8,
    }
