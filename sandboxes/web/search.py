"""The shop's search engine: BM25 over the catalog, deterministic.

Ranking: Okapi BM25 (Robertson & Zaragoza 2009) as computed by the ``bm25s`` library (Lu 2024,
method ``"lucene"``, as in Lucene/Pyserini, which WebShop's search engine uses)::

    score(q, d) = sum over query tokens t of  idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),   k1 = 1.5,  b = 0.75

with ``N`` documents, ``df(t)`` of them holding ``t``, ``|d|`` the document's length in tokens and
``avgdl`` the mean length.

* Documents: each product's :attr:`~sandboxes.web.catalog.Product.search_text` (title, type,
  category path, feature bullets).
* Tokens (:func:`tokenize`): lower case, maximal runs of Unicode word characters (``\\w+``); no
  stemming and no stop words. A query token absent from the catalog is ignored; a query token that
  repeats counts once per occurrence.
* Results: products with a score above 0, by score descending, ties by catalog index ascending
  (a stable sort, so the order never depends on the platform), at most :data:`MAX_RESULTS` (50, as
  WebShop shows the top 50).

Example:
    >>> from sandboxes.web.catalog import generate_catalog
    >>> index = SearchIndex(generate_catalog(0, 1000))
    >>> hits = index.search(generate_catalog(0, 1000)[7].title)
    >>> hits[0]
    7
"""

from __future__ import annotations

import logging
import re

import bm25s
import numpy as np

from sandboxes.web.catalog import Catalog

__all__ = ["SearchIndex", "tokenize", "MAX_RESULTS"]

MAX_RESULTS = 50
_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (``re.findall(r"\\w+", text.lower())``)."""
    return _TOKEN.findall(text.lower())


class SearchIndex:
    """A BM25 index of a catalog.

    Args:
        catalog: the products to index.
        k1, b: BM25 parameters (defaults as in Lucene and bm25s).
    """

    def __init__(self, catalog: Catalog, k1: float = 1.5, b: float = 0.75):
        self.catalog = catalog
        corpus = [tokenize(p.search_text) for p in catalog]
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every product for ``query``: float32 array of shape ``(len(catalog),)``."""
        ids = self._bm25.get_tokens_ids(tokenize(query))
        if not ids:
            return np.zeros(len(self.catalog), dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)

    def search(self, query: str, limit: int = MAX_RESULTS) -> list[int]:
        """Catalog indices of the best ``limit`` products for ``query`` (module docstring)."""
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order[:limit] if scores[i] > 0]
