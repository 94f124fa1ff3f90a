"""The local shop of WebShop-v0: catalog, search, site, server and the two page readers.

Modules (each small, named for what it holds):

* :mod:`sandboxes.web.catalog`: products generated deterministically from a seed.
* :mod:`sandboxes.web.search`: BM25 ranking (bm25s), deterministic.
* :mod:`sandboxes.web.app`: the Flask site (pages, URLs).
* :mod:`sandboxes.web.server`: serving it on 127.0.0.1 (werkzeug, a background thread), shared.
* :mod:`sandboxes.web.page`: what an agent sees of a page; the HTML-to-text renderer.
* :mod:`sandboxes.web.browser`: headless Chromium through Selenium 4 (the ``browser`` back end).
* :mod:`sandboxes.web.text_backend`: plain HTTP (the ``text`` back end).

The environment (:mod:`agentgym.envs.webshop`) uses only :class:`~sandboxes.web.server.ShopServer`
(via ``acquire_server``), a reader (:class:`~sandboxes.web.browser.ChromiumBrowser` or
:class:`~sandboxes.web.text_backend.HttpReader`: ``goto``, ``click``, ``search``, ``close``), the
catalog. The task's instructions (goals) and WebShop's reward live with the environment, in
:mod:`agentgym.envs.webshop_goals`: this package serves and reads the site, it does not score.
"""
