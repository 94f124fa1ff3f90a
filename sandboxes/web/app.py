"""The shop web site: a Flask application over a catalog and its search index.

Pages (every page is fixed by its URL alone; the server keeps no session, so one server serves any
number of environments at once):

=====================================  ==========================================================
URL                                    page
=====================================  ==========================================================
``/``                                  home: the search box and its Search button
``/search?q=Q&page=N``                 results of query ``Q`` (:mod:`sandboxes.web.search`),
                                       10 a page, at most 5 pages; links: Back to Search,
                                       ``< Prev``, ``Next >``, one per product id
``/item/ID?q=Q&page=N&KIND=VALUE...``  a product: title, price, rating, one link per option value
                                       (selecting it), the selected options, Description,
                                       Features, Buy Now; ``< Prev`` returns to the results page
``/item/ID/description?...``           the description (``< Prev`` returns to the item page)
``/item/ID/features?...``              the feature bullet points
``/buy/ID?KIND=VALUE...``              the purchase: "Thank you for shopping with us!" and the
                                       product and options bought; no links (the episode ends)
=====================================  ==========================================================

Every text that comes from a request (the query, option values) is HTML-escaped by Jinja's
autoescaping and URL-encoded by ``url_for``: a query holding markup is shown as text, never
parsed. Unknown ids and empty queries give a 404/400 page with a Back to Search link.

The layout keeps each visible line in its own block element (``div``, ``h1``/``h2``, ``li``) and
puts nothing visible in attributes, so the text a browser renders (``innerText``) and the text
:func:`sandboxes.web.page.html_to_page` derives from the HTML are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from flask import Flask, abort, render_template, request, url_for

from sandboxes.web.catalog import Catalog, Product
from sandboxes.web.search import SearchIndex

__all__ = ["create_app", "RESULTS_PER_PAGE", "RESERVED_PARAMS"]

RESULTS_PER_PAGE = 10
#: Query parameters that are not option kinds.
RESERVED_PARAMS = ("q", "page")


def _selected(product: Product, args: Any) -> dict[str, str]:
    """The valid option selections in ``args``, in the product's option-kind order."""
    out = {}
    for kind, values in product.options.items():
        value = args.get(kind)
        if value in values:
            out[kind] = value
    return out


def create_app(catalog: Catalog, index: SearchIndex | None = None) -> Flask:
    """The Flask application of the shop over ``catalog``.

    Args:
        catalog: the products.
        index: its search index (built here if ``None``).

    Returns:
        A :class:`flask.Flask` WSGI application (serve it with :class:`sandboxes.web.server.
        ShopServer`).
    """
    index = index if index is not None else SearchIndex(catalog)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 1 << 20

    def product_or_404(product_id: str) -> Product:
        product = catalog.get(product_id)
        if product is None:
            abort(404)
        return product

    def page_number(total: int) -> tuple[int, int]:
        num_pages = max(1, math.ceil(total / RESULTS_PER_PAGE))
        try:
            page = int(request.args.get("page", "1"))
        except ValueError:
            page = 1
        return min(max(page, 1), num_pages), num_pages

    def nav_state(product: Product) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if request.args.get("q"):
            state["q"] = request.args["q"]
            state["page"] = request.args.get("page", "1")
        state.update(_selected(product, request.args))
        return state

    @app.get("/")
    def home() -> str:
        return render_template("home.html", page_kind="home")

    @app.get("/search")
    def search() -> tuple[str, int] | str:
        query = request.args.get("q", "")
        if not query.strip():
            return render_template(
                "message.html", page_kind="error", message="Please enter a search query."
            ), 400
        hits = index.search(query)
        page, num_pages = page_number(len(hits))
        start = (page - 1) * RESULTS_PER_PAGE
        products = [catalog[i] for i in hits[start : start + RESULTS_PER_PAGE]]
        return render_template(
            "results.html",
            page_kind="results",
            query=query,
            page=page,
            num_pages=num_pages,
            total=len(hits),
            products=products,
        )

    @app.get("/item/<product_id>")
    def item(product_id: str) -> str:
        product = product_or_404(product_id)
        state = nav_state(product)
        selected = _selected(product, request.args)
        base = {k: v for k, v in state.items() if k in RESERVED_PARAMS}
        option_urls = {
            kind: {
                value: url_for(
                    "item", product_id=product.product_id, **base, **{**selected, kind: value}
                )
                for value in values
            }
            for kind, values in product.options.items()
        }
        if "q" in state:
            prev_url = url_for("search", q=state["q"], page=state["page"])
        else:
            prev_url = url_for("home")
        return render_template(
            "item.html",
            page_kind="item",
            product=product,
            selected=selected,
            state=state,
            option_urls=option_urls,
            prev_url=prev_url,
        )

    def detail(
        product_id: str, page_kind: str, heading: str, lines: Callable[[Product], list[str]]
    ) -> str:
        """A product's detail page: ``heading`` over the ``lines`` it has of that kind."""
        product = product_or_404(product_id)
        return render_template(
            "detail.html",
            page_kind=page_kind,
            product=product,
            state=nav_state(product),
            heading=heading,
            lines=lines(product),
        )

    @app.get("/item/<product_id>/description")
    def description(product_id: str) -> str:
        return detail(product_id, "description", "Description", lambda p: [p.description])

    @app.get("/item/<product_id>/features")
    def features(product_id: str) -> str:
        return detail(product_id, "features", "Features", lambda p: list(p.features))

    @app.get("/buy/<product_id>")
    def buy(product_id: str) -> str:
        product = product_or_404(product_id)
        return render_template(
            "done.html",
            page_kind="done",
            product=product,
            selected=_selected(product, request.args),
        )

    @app.errorhandler(404)
    def not_found(_err: Exception) -> tuple[str, int]:
        return render_template("message.html", page_kind="error", message="Page not found."), 404

    return app
