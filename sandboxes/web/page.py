"""What an agent sees of a page, and the text renderer of the ``text`` back end.

A page is read into a :class:`PageView`: its visible text, its links (label and target) and whether
it has the search box. The ``browser`` back end reads it from Chromium (``document.body.innerText``
and the ``a[href]`` elements' ``innerText``: the text as rendered for a user); the ``text`` back end
derives it from the HTML with :func:`html_to_page`, a small implementation of the parts of the
HTML standard's ``innerText`` algorithm ("rendered text collection steps") that the shop's pages
use:

* only ``<body>`` counts; ``head``, ``script``, ``style``, ``template``, ``noscript`` and form
  controls' values give no text;
* block-level elements (:data:`BLOCK_TAGS`) and ``<br>`` break lines;
* inside a line, runs of ASCII white space (space, tab, CR, LF, FF) collapse to one space (CSS
  ``white-space: normal``); character references are decoded.

Both back ends then pass the text through :func:`normalize_text` (each line stripped of white
space, empty lines dropped), so they give the same :class:`PageView` for the same page (the
tests play the same actions through both and compare).

:func:`clean_query` turns the text of a ``search[...]`` action into the query both back ends
submit: characters that a browser's text input cannot hold (control characters, unpaired
surrogates) are removed and white space is collapsed, as the HTML standard's value sanitization
of ``<input type=text>`` strips line breaks.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

__all__ = [
    "Link",
    "PageView",
    "html_to_page",
    "normalize_text",
    "normalize_label",
    "clean_query",
    "canonical_url",
    "resolve_href",
    "BLOCK_TAGS",
]

#: Elements rendered as blocks by a browser's default style sheet (each starts a new line).
BLOCK_TAGS = frozenset(
    "address article aside blockquote body center dd details dialog dir div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu "
    "nav ol p pre section summary table tbody thead tfoot tr ul".split()
)
_HIDDEN_TAGS = frozenset("head script style template noscript title select textarea".split())
_VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())
_CSS_SPACE = re.compile(r"[ \t\n\r\f]+")


@dataclass(frozen=True)
class Link:
    """A link on the page.

    Attributes:
        label: its visible text, normalised (:func:`normalize_text` on one line).
        href: its ``href`` attribute as written in the HTML (relative to the site).
    """

    label: str
    href: str


@dataclass(frozen=True)
class PageView:
    """A page as an agent sees it.

    Attributes:
        url: the page's path and query (``/search?q=...``), without scheme and host.
        text: the visible text, normalised (lines joined by ``"\\n"``).
        links: the links, in document order.
        has_search: whether the page holds the search box (then ``search[...]`` is possible).
    """

    url: str
    text: str
    links: tuple[Link, ...]
    has_search: bool

    def find_link(self, label: str) -> int | None:
        """Index of the first link whose label equals ``label`` (:func:`normalize_label`)."""
        wanted = normalize_label(label)
        for i, link in enumerate(self.links):
            if normalize_label(link.label) == wanted:
                return i
        return None


def normalize_text(text: str) -> str:
    """Lines stripped of white space, empty lines dropped, joined by ``"\\n"``."""
    lines = (line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return "\n".join(line for line in lines if line)


def normalize_label(label: str) -> str:
    """Case-folded label with white space collapsed: how ``click[...]`` targets are compared."""
    return " ".join(label.split()).casefold()


def clean_query(text: str) -> str:
    """The query a ``search[text]`` action submits (module docstring): control and surrogate
    characters removed, white space collapsed to single spaces, stripped."""
    spaced = " ".join(text.split())  # white space (tabs, line breaks too) first, as spaces
    kept = "".join(ch for ch in spaced if unicodedata.category(ch) not in ("Cc", "Cs"))
    return " ".join(kept.split())


def canonical_url(url: str) -> str:
    """Path and query of ``url`` with the query re-encoded one way (``urlencode`` of its decoded
    pairs), so that a browser's form encoding and Python's give the same string."""
    parts = urlsplit(url)
    query = urlencode(parse_qsl(parts.query, keep_blank_values=True))
    return (parts.path or "/") + ("?" + query if query else "")


def resolve_href(current: str, href: str) -> str:
    """The site path and query that the link ``href`` on page ``current`` leads to."""
    return canonical_url(urljoin("http://site" + current, href))


class _Renderer(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.current: list[str] = []
        self.in_body = False
        self.hidden = 0
        self.links: list[tuple[list[str], str]] = []
        self.open_link: tuple[list[str], str] | None = None
        self.has_search = False
        self.in_form = False

    def _break(self) -> None:
        line = _CSS_SPACE.sub(" ", "".join(self.current)).strip(" ")
        if line:
            self.lines.append(line)
        self.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self.in_body = True
        if tag in _HIDDEN_TAGS and tag not in _VOID_TAGS:
            self.hidden += 1
            return
        if not self.in_body or self.hidden:
            return
        attributes = dict(attrs)
        if tag in BLOCK_TAGS or tag == "br":
            self._break()
        if tag == "form":
            self.in_form = True
        elif tag == "input" and self.in_form and attributes.get("name") == "q":
            self.has_search = True
        elif tag == "a" and attributes.get("href") is not None:
            self.open_link = ([], attributes["href"] or "")
            self.links.append(self.open_link)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_TAGS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN_TAGS:
            self.hidden = max(0, self.hidden - 1)
            return
        if not self.in_body or self.hidden:
            return
        if tag == "a":
            self.open_link = None
        elif tag == "form":
            self.in_form = False
        if tag in BLOCK_TAGS:
            self._break()
        if tag == "body":
            self.in_body = False

    def handle_data(self, data: str) -> None:
        if self.in_body and not self.hidden:
            self.current.append(data)
            if self.open_link is not None:
                self.open_link[0].append(data)


def html_to_page(html: str, url: str) -> PageView:
    """The :class:`PageView` of an HTML document (module docstring).

    Args:
        html: the document.
        url: its path and query on the site.

    Returns:
        The page's text, links and search box, as a browser would render them.
    """
    renderer = _Renderer()
    renderer.feed(html)
    renderer.close()
    renderer._break()
    links = tuple(
        Link(normalize_text(_CSS_SPACE.sub(" ", "".join(parts))), href)
        for parts, href in renderer.links
    )
    return PageView(
        url=url,
        text=normalize_text("\n".join(renderer.lines)),
        links=links,
        has_search=renderer.has_search,
    )
