"""The WebShop catalog, its BM25 search (sandboxes.web) and the goals drawn from it (agentgym.envs)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from agentgym.envs.webshop_goals import PRICE_BOUNDS, make_goal, price_bound
from sandboxes.web.catalog import (
    CATEGORY_ATTRIBUTES,
    OPTION_VALUES,
    PRODUCT_TYPES,
    generate_catalog,
)
from sandboxes.web.search import MAX_RESULTS, SearchIndex, tokenize
from tests.helpers import run_python

# ----------------------------------------------------------------------------- catalog


def test_catalog_size_and_categories() -> None:
    catalog = generate_catalog(0, 1000)
    assert len(catalog) == 1000
    assert [p.index for p in catalog] == list(range(1000))
    categories = Counter(p.product_type.category for p in catalog)
    assert set(categories) == set(CATEGORY_ATTRIBUTES) and len(categories) == 5
    assert min(categories.values()) > 100  # 30 types drawn uniformly: about 200 per category
    assert len({p.product_type.name for p in catalog}) == len(PRODUCT_TYPES) == 30


def test_catalog_products_are_well_formed() -> None:
    catalog = generate_catalog(0, 1000)
    assert len({p.product_id for p in catalog}) == 1000
    assert len({p.title.lower() for p in catalog}) == 1000
    for p in catalog:
        assert len(p.product_id) == 10 and p.product_id.startswith("B0")
        assert catalog.get(p.product_id) is p
        pool = CATEGORY_ATTRIBUTES[p.product_type.category]
        assert 2 <= len(p.attributes) <= 4 and set(p.attributes) <= set(pool)
        assert list(p.options) == list(p.product_type.option_kinds)
        for kind, values in p.options.items():
            assert 3 <= len(values) <= 5 and set(values) <= set(OPTION_VALUES[kind])
        lo, hi = p.product_type.price_range
        assert lo <= p.price <= hi + 1
        assert round(p.price, 2) == p.price
        if p.price < 100:
            assert round(p.price % 1, 2) == 0.99
        assert 2.5 <= p.rating <= 5.0


def test_option_values_name_their_kind() -> None:
    """No value is offered under two kinds, so option links on a page never share a label."""
    every = [v for values in OPTION_VALUES.values() for v in values]
    assert len(every) == len(set(every))


def test_same_seed_same_catalog_other_seed_other_catalog() -> None:
    a = generate_catalog(5, 50)
    generate_catalog.cache_clear()
    b = generate_catalog(5, 50)
    assert a is not b and a.products == b.products
    assert generate_catalog(6, 50).products != a.products
    # product i depends only on (seed, i): a longer catalog starts with the shorter one
    assert generate_catalog(5, 80).products[:50] == a.products


def test_catalog_is_the_same_in_a_fresh_process() -> None:
    code = (
        "from sandboxes.web.catalog import generate_catalog\n"
        "c = generate_catalog(0, 1000)\n"
        "print(c[0].product_id, c[999].title, c[500].price)\n"
    )
    out = run_python("-c", code, timeout=60, check=True).stdout.strip()
    c = generate_catalog(0, 1000)
    assert out == f"{c[0].product_id} {c[999].title} {c[500].price}"


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_bad_catalog_seed_is_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="catalog seed"):
        generate_catalog(bad, 10)  # type: ignore[arg-type]


def test_bad_catalog_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="num_products"):
        generate_catalog(0, 0)


# ----------------------------------------------------------------------------- search


def test_tokenize() -> None:
    assert tokenize("Slim-Fit T-Shirt, 2 Pack!") == ["slim", "fit", "t", "shirt", "2", "pack"]
    assert tokenize("<script>alert(1)</script>") == ["script", "alert", "1", "script"]
    assert tokenize("Ünïcode café") == ["ünïcode", "café"]
    assert tokenize("") == []


def _bm25_reference(docs: list[list[str]], query: list[str], k1: float, b: float) -> np.ndarray:
    """Okapi BM25, Lucene variant, written out from the formula (independent of bm25s)."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    out = np.zeros(n)
    for t in query:
        df = sum(t in d for d in docs)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            tf = d.count(t)
            out[i] += idf * tf / (tf + k1 * (1 - b + b * len(d) / avgdl))
    return out


@pytest.mark.parametrize(
    "query", ["green tea gluten free", "t-shirt machine wash navy", "bookshelf bookshelf oak"]
)
def test_bm25_scores_match_the_formula(query: str) -> None:
    catalog = generate_catalog(3, 60)
    index = SearchIndex(catalog)
    docs = [tokenize(p.search_text) for p in catalog]
    expected = _bm25_reference(docs, tokenize(query), 1.5, 0.75)
    np.testing.assert_allclose(index.scores(query), expected, rtol=1e-5, atol=1e-6)
    ranked = index.search(query)
    positive = [i for i in range(60) if expected[i] > 0]
    assert sorted(ranked) == sorted(positive)[: len(ranked)] or len(positive) > MAX_RESULTS
    assert len(ranked) == min(len(positive), MAX_RESULTS)
    ordered = expected[ranked]
    assert all(a >= b - 1e-5 for a, b in zip(ordered, ordered[1:], strict=False))


def test_search_ties_break_by_catalog_index() -> None:
    """Products with equal scores come in catalog order (a stable sort)."""
    catalog = generate_catalog(0, 1000)
    index = SearchIndex(catalog)
    scores = index.scores("beauty")
    hits = index.search("beauty")
    assert len(hits) == MAX_RESULTS
    assert any(scores[a] == scores[b] for a, b in zip(hits, hits[1:], strict=False))
    for a, b in zip(hits, hits[1:], strict=False):
        assert scores[a] > scores[b] or (scores[a] == scores[b] and a < b)


def test_search_edge_cases() -> None:
    index = SearchIndex(generate_catalog(0, 1000))
    assert index.search("") == []
    assert index.search("zzzz qqqq") == []  # no known token: nothing
    assert index.search("😀 <b>") == []
    assert len(index.search("x" * 50_000)) == 0
    assert index.search("Green TEA") == index.search("green tea")


def test_title_query_finds_its_product_first_nearly_always() -> None:
    """The oracle's query: a product's own title ranks it within the first results page."""
    catalog = generate_catalog(0, 1000)
    index = SearchIndex(catalog)
    ranks = [index.search(p.title).index(p.index) for p in catalog]
    assert max(ranks) < 10
    assert sum(r == 0 for r in ranks) >= 990


# ----------------------------------------------------------------------------- goals


def test_price_bound_is_the_next_bucket() -> None:
    assert price_bound(9.99) == 10.0
    assert price_bound(10.0) == 20.0  # strictly above
    assert price_bound(134.92) == 150.0
    assert price_bound(499.99) == 500.0
    assert price_bound(600.0) == 1200.0
    assert PRICE_BOUNDS == tuple(sorted(PRICE_BOUNDS))


def test_goal_is_drawn_from_its_target() -> None:
    catalog = generate_catalog(0, 1000)
    for seed in range(50):
        goal = make_goal(catalog, np.random.default_rng(seed))
        target = catalog[goal.target_index]
        assert goal.product_id == target.product_id
        assert 1 <= len(goal.attributes) <= 3 and set(goal.attributes) <= set(target.attributes)
        assert list(goal.options) == list(target.options)
        assert all(goal.options[k] in target.options[k] for k in goal.options)
        assert target.price < goal.price_upper
        assert goal.instruction.startswith("i am looking for a")
        assert f"price lower than {goal.price_upper:.2f} dollars" in goal.instruction
        for kind, value in goal.options.items():
            assert f"{kind}: {value}" in goal.instruction


def test_goal_hand_example() -> None:
    """Seed 0 over catalog 0, worked out from the draw order in make_goal's docstring."""
    catalog = generate_catalog(0, 1000)
    rng = np.random.default_rng(0)
    goal = make_goal(catalog, rng)
    ref = np.random.default_rng(0)
    target = catalog[int(ref.integers(1000))]
    n = len(target.attributes)
    k = int(ref.integers(1, min(3, n) + 1))
    attrs = tuple(target.attributes[i] for i in sorted(ref.choice(n, size=k, replace=False)))
    options = {kind: v[int(ref.integers(len(v)))] for kind, v in target.options.items()}
    assert goal.target_index == target.index
    assert goal.attributes == attrs and dict(goal.options) == options
    assert goal.instruction == (
        f"i am looking for a {target.product_type.name} that is {' and '.join(attrs)}, with "
        + " and ".join(f"{k}: {v}" for k, v in options.items())
        + f", and price lower than {price_bound(target.price):.2f} dollars"
    )
