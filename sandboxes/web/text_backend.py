"""The ``text`` back end: the shop over plain HTTP, pages turned into text by
:func:`sandboxes.web.page.html_to_page`.

It behaves as :class:`sandboxes.web.browser.ChromiumBrowser` does, without a browser: a click
follows the link's ``href``; a search requests ``/search?q=QUERY`` as the home page's form would
submit it. Requests go straight to the loopback server (no proxy), with a timeout.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from urllib.parse import urlencode

from sandboxes.web.page import PageView, canonical_url, html_to_page, resolve_href

__all__ = ["HttpReader"]


class HttpReader:
    """Reads the shop's pages over HTTP.

    Args:
        base_url: the site, ``http://127.0.0.1:PORT``.
        timeout: seconds per request.
    """

    restarts = 0  # nothing to restart; kept for the same interface as ChromiumBrowser

    def __init__(self, base_url: str, timeout: float = 10.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def goto(self, url: str) -> PageView:
        """Request ``url`` (a path on the site) and read it; a 4xx page is read like any other."""
        target = canonical_url(url)
        try:
            with self._opener.open(self.base_url + target, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            body = err.read()
            err.close()
        return html_to_page(body.decode("utf-8"), target)

    def click(self, view: PageView, index: int) -> PageView:
        """Follow link ``index`` of ``view``."""
        return self.goto(resolve_href(view.url, view.links[index].href))

    def search(self, query: str) -> PageView:
        """Submit ``query`` as the search form does (GET ``/search?q=...``)."""
        return self.goto("/search?" + urlencode({"q": query}))

    def close(self) -> None:
        """Nothing to release (connections close after each request)."""
