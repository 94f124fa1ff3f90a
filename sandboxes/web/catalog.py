"""The shop's catalog: products generated deterministically from a seed.

WebShop's own data (1.18 M scraped Amazon products, Yao et al. 2022) cannot be had here, so the
catalog is generated. Its shape follows WebShop's product records: a title, a category path, a
price, a set of *attributes* (WebShop's ``Attributes``: short phrases such as "machine wash" or
"gluten free" that instructions ask for), selectable *options* (``customization_options``: size,
color, flavor, ...), a description and feature bullet points (``BulletPoints``) and a rating.

Generation (:func:`generate_catalog`): product ``i`` of the catalog of seed ``s`` comes from its own
``numpy.random.default_rng([s, i])`` (the reasoning-gym habit: every item is reproducible on its
own, whatever the catalog size). It draws a product type (uniform over :data:`PRODUCT_TYPES`: 5
categories, 10 subcategories, 30 types), a brand, a descriptor, 2-4 attributes from the
category's pool, for each option kind of its type 3-5 values (kept in vocabulary order), and a
price drawn uniform in the type's range: below 100 dollars its whole dollars plus .99, else
rounded to cents. The id
is ``B0`` plus 8 characters from the same generator (unique; a clash is redrawn from
``default_rng([s, i, k])``). Titles are unique: a clash gets a ``Model N`` suffix.

Option values are unique across option kinds (a value names its kind), so a page never shows
two option links with the same text.

Example:
    >>> catalog = generate_catalog(seed=0, num_products=1000)
    >>> len(catalog), catalog[0].product_id == generate_catalog(0, 1000)[0].product_id
    (1000, True)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

__all__ = [
    "Product",
    "ProductType",
    "Catalog",
    "generate_catalog",
    "CATEGORY_ATTRIBUTES",
    "OPTION_VALUES",
    "PRODUCT_TYPES",
    "BRANDS",
    "MIN_PRODUCTS",
]

MIN_PRODUCTS = 1

#: Attribute phrases per category (WebShop's most frequent attribute kinds, per category).
CATEGORY_ATTRIBUTES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "fashion": (
            "machine wash",
            "slim fit",
            "long sleeve",
            "short sleeve",
            "button closure",
            "quick drying",
            "cotton spandex",
            "relaxed fit",
            "elastic waist",
            "non slip",
        ),
        "beauty": (
            "long lasting",
            "paraben free",
            "cruelty free",
            "natural ingredients",
            "sensitive skin",
            "travel size",
            "easy apply",
            "hair growth",
            "dry skin",
            "alcohol free",
        ),
        "grocery": (
            "gluten free",
            "low sugar",
            "non gmo",
            "keto friendly",
            "ready to eat",
            "individually wrapped",
            "high protein",
            "low calorie",
            "plant based",
            "dairy free",
        ),
        "electronics": (
            "high definition",
            "fast charging",
            "noise cancelling",
            "easy install",
            "water resistant",
            "wireless bluetooth",
            "long battery life",
            "high speed",
            "usb port",
            "plug and play",
        ),
        "home": (
            "easy assemble",
            "solid wood",
            "living room",
            "space saving",
            "easy clean",
            "mid century",
            "storage space",
            "metal frame",
            "bedroom furniture",
            "heavy duty",
        ),
    }
)

#: Option values per option kind; no value appears under two kinds.
OPTION_VALUES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "size": ("x-small", "small", "medium", "large", "x-large", "xx-large"),
        "shoe size": ("us 6", "us 7", "us 8", "us 9", "us 10", "us 11", "us 12"),
        "color": (
            "black",
            "white",
            "navy",
            "grey",
            "red",
            "blue",
            "green",
            "beige",
            "pink",
            "brown",
        ),
        "flavor": (
            "vanilla",
            "chocolate",
            "strawberry",
            "original",
            "peanut butter",
            "sea salt",
            "honey",
        ),
        "scent": ("lavender", "unscented", "citrus", "rose", "coconut", "eucalyptus", "sandalwood"),
        "pack": ("pack of 1", "pack of 2", "pack of 4", "pack of 6", "pack of 12"),
        "capacity": ("32gb", "64gb", "128gb", "256gb", "512gb"),
        "length": ("3 ft", "6 ft", "10 ft", "15 ft"),
        "finish": ("natural oak", "walnut", "espresso", "white wash", "matte black"),
    }
)


@dataclass(frozen=True)
class ProductType:
    """A kind of product: what instructions ask for (``"t-shirt"``) and how it is sold.

    Attributes:
        name: the type as instructions write it, lower case (``"running shoes"``).
        category: top-level category (a key of :data:`CATEGORY_ATTRIBUTES`).
        subcategory: second level of the category path.
        option_kinds: the option kinds every product of this type offers (keys of
            :data:`OPTION_VALUES`).
        price_range: (low, high) price in US dollars.
    """

    name: str
    category: str
    subcategory: str
    option_kinds: tuple[str, ...]
    price_range: tuple[float, float]


def _t(name: str, category: str, sub: str, kinds: tuple[str, ...], lo: float, hi: float):
    return ProductType(name, category, sub, kinds, (lo, hi))


#: The 30 product types, 6 per category (WebShop's five: fashion, beauty, grocery, electronics,
#: home/furniture).
PRODUCT_TYPES: tuple[ProductType, ...] = (
    _t("t-shirt", "fashion", "clothing", ("size", "color"), 8, 40),
    _t("hoodie", "fashion", "clothing", ("size", "color"), 20, 70),
    _t("jeans", "fashion", "clothing", ("size", "color"), 20, 90),
    _t("running shoes", "fashion", "shoes", ("shoe size", "color"), 30, 150),
    _t("sandals", "fashion", "shoes", ("shoe size", "color"), 15, 60),
    _t("ankle boots", "fashion", "shoes", ("shoe size", "color"), 40, 160),
    _t("shampoo", "beauty", "hair care", ("scent", "pack"), 5, 35),
    _t("hair oil", "beauty", "hair care", ("scent",), 6, 30),
    _t("conditioner", "beauty", "hair care", ("scent", "pack"), 5, 35),
    _t("face moisturizer", "beauty", "skin care", ("scent",), 8, 60),
    _t("body lotion", "beauty", "skin care", ("scent", "pack"), 5, 30),
    _t("lip balm", "beauty", "skin care", ("flavor", "pack"), 3, 15),
    _t("protein bar", "grocery", "snacks", ("flavor", "pack"), 10, 45),
    _t("granola", "grocery", "snacks", ("flavor", "pack"), 5, 30),
    _t("potato chips", "grocery", "snacks", ("flavor", "pack"), 3, 25),
    _t("coffee beans", "grocery", "beverages", ("flavor", "pack"), 8, 40),
    _t("green tea", "grocery", "beverages", ("flavor", "pack"), 4, 25),
    _t("sparkling water", "grocery", "beverages", ("flavor", "pack"), 5, 30),
    _t("wireless earbuds", "electronics", "audio", ("color",), 20, 200),
    _t("bluetooth speaker", "electronics", "audio", ("color",), 20, 250),
    _t("headphones", "electronics", "audio", ("color",), 25, 350),
    _t("usb cable", "electronics", "accessories", ("length", "color"), 5, 25),
    _t("memory card", "electronics", "accessories", ("capacity",), 6, 80),
    _t("phone charger", "electronics", "accessories", ("color", "length"), 8, 40),
    _t("coffee table", "home", "furniture", ("finish",), 60, 400),
    _t("bookshelf", "home", "furniture", ("finish",), 50, 350),
    _t("office chair", "home", "furniture", ("color",), 60, 450),
    _t("bath towel", "home", "bath", ("color", "pack"), 10, 60),
    _t("shower curtain", "home", "bath", ("color",), 8, 40),
    _t("bath mat", "home", "bath", ("color", "pack"), 8, 45),
)

#: Brand names (invented; each one word, so ``title_score`` can count it as a noun).
BRANDS: tuple[str, ...] = (
    "Aldervale",
    "Brightmoor",
    "Calloway",
    "Dunmore",
    "Everwell",
    "Fernhill",
    "Glenrock",
    "Harrowgate",
    "Ivorybrook",
    "Junipera",
    "Kestrel",
    "Larkspur",
    "Marlowe",
    "Northfield",
    "Oakhurst",
    "Pinecrest",
    "Quillon",
    "Redwick",
    "Stonebay",
    "Thistle",
    "Umberly",
    "Valemont",
    "Westbrook",
    "Yarrow",
    "Zephyra",
)

DESCRIPTORS: tuple[str, ...] = (
    "classic",
    "premium",
    "everyday",
    "essential",
    "deluxe",
    "modern",
    "original",
    "signature",
    "ultra",
    "pro",
    "lite",
    "vintage",
)

_ID_ALPHABET = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"


@dataclass(frozen=True)
class Product:
    """One product of the catalog.

    Attributes:
        index: position in the catalog (0-based).
        product_id: unique id shown in results, ``B0`` plus 8 characters (like an ASIN).
        title: unique product title.
        brand: brand name.
        product_type: the :class:`ProductType`.
        attributes: attribute phrases (2-4, from the category's pool, in pool order).
        options: option kind -> offered values (3-5 per kind, in vocabulary order).
        price: price in US dollars (cents).
        rating: average rating, 1.0-5.0 (one decimal).
        description: one paragraph.
        features: bullet points.
    """

    index: int
    product_id: str
    title: str
    brand: str
    product_type: ProductType
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    price: float
    rating: float
    description: str
    features: tuple[str, ...]

    @property
    def category_path(self) -> tuple[str, str, str]:
        """``(category, subcategory, type name)``: WebShop's ``product_category`` levels."""
        t = self.product_type
        return (t.category, t.subcategory, t.name)

    @property
    def search_text(self) -> str:
        """The text the search index holds for this product (title, type, path, features)."""
        t = self.product_type
        return " ".join([self.title, t.name, t.category, t.subcategory, *self.features])


class Catalog:
    """An immutable sequence of :class:`Product` with lookup by id.

    Args:
        seed: the catalog seed it was generated from.
        products: the products, ``products[i].index == i``.
    """

    def __init__(self, seed: int, products: tuple[Product, ...]):
        self.seed = seed
        self.products = products
        self._by_id = {p.product_id: p for p in products}

    def __len__(self) -> int:
        return len(self.products)

    def __getitem__(self, index: int) -> Product:
        return self.products[index]

    def __iter__(self) -> Iterator[Product]:
        return iter(self.products)

    def get(self, product_id: str) -> Product | None:
        """The product of that id, or ``None``."""
        return self._by_id.get(product_id)

    def __repr__(self) -> str:
        return f"Catalog(seed={self.seed}, num_products={len(self)})"


def _product_id(rng: np.random.Generator) -> str:
    return "B0" + "".join(_ID_ALPHABET[i] for i in rng.integers(len(_ID_ALPHABET), size=8))


def _title_case(phrase: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in phrase.split())


def _make_product(seed: int, index: int) -> Product:
    rng = np.random.default_rng([seed, index])
    ptype = PRODUCT_TYPES[int(rng.integers(len(PRODUCT_TYPES)))]
    brand = BRANDS[int(rng.integers(len(BRANDS)))]
    descriptor = DESCRIPTORS[int(rng.integers(len(DESCRIPTORS)))]
    pool = CATEGORY_ATTRIBUTES[ptype.category]
    n_attr = int(rng.integers(2, 5))
    picked = sorted(int(i) for i in rng.choice(len(pool), size=n_attr, replace=False))
    attributes = tuple(pool[i] for i in picked)
    options: dict[str, tuple[str, ...]] = {}
    for kind in ptype.option_kinds:
        values = OPTION_VALUES[kind]
        n = int(rng.integers(3, min(5, len(values)) + 1))
        chosen = sorted(int(i) for i in rng.choice(len(values), size=n, replace=False))
        options[kind] = tuple(values[i] for i in chosen)
    lo, hi = ptype.price_range
    drawn = float(rng.uniform(lo, hi))
    price = float(np.floor(drawn)) + 0.99 if drawn < 100 else round(drawn, 2)
    rating = round(float(rng.uniform(2.5, 5.0)), 1)
    product_id = _product_id(rng)
    title = f"{brand} {_title_case(descriptor)} {_title_case(ptype.name)}, " + ", ".join(
        _title_case(a) for a in attributes[:2]
    )
    description = (
        f"The {brand} {descriptor} {ptype.name} is made for {ptype.subcategory} every day. "
        f"It is {' and '.join(attributes)}. Rated {rating} out of 5 by our customers."
    )
    features = (
        *(f"{_title_case(a)}: designed to be {a}." for a in attributes),
        "Options: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in options.items()),
        f"Category: {ptype.category} / {ptype.subcategory}.",
    )
    return Product(
        index=index,
        product_id=product_id,
        title=title,
        brand=brand,
        product_type=ptype,
        attributes=attributes,
        options=MappingProxyType(options),
        price=price,
        rating=rating,
        description=description,
        features=features,
    )


@functools.lru_cache(maxsize=8)
def generate_catalog(seed: int = 0, num_products: int = 1000) -> Catalog:
    """The catalog of ``seed`` with ``num_products`` products (cached: same arguments, same object).

    Args:
        seed: catalog seed, an int >= 0.
        num_products: number of products, >= 1 (WebShop-v0 uses 1000).

    Returns:
        A :class:`Catalog`; product ``i`` depends only on ``(seed, i)``, except that a clash of id
        or title with an earlier product is resolved (see the module docstring).

    Raises:
        ValueError: a bad seed or size; the message names the argument.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"catalog seed must be an int >= 0, got {seed!r}")
    if (
        isinstance(num_products, bool)
        or not isinstance(num_products, (int, np.integer))
        or num_products < MIN_PRODUCTS
    ):
        raise ValueError(f"num_products must be an int >= {MIN_PRODUCTS}, got {num_products!r}")
    products: list[Product] = []
    ids: set[str] = set()
    titles: set[str] = set()
    for index in range(int(num_products)):
        product = _make_product(int(seed), index)
        pid, k = product.product_id, 0
        while pid in ids:
            k += 1
            pid = _product_id(np.random.default_rng([int(seed), index, k]))
        title, n = product.title, 1
        while title.lower() in titles:
            n += 1
            title = f"{product.title}, Model {n}"
        if pid != product.product_id or title != product.title:
            product = dataclasses.replace(product, product_id=pid, title=title)
        ids.add(pid)
        titles.add(title.lower())
        products.append(product)
    return Catalog(int(seed), tuple(products))
