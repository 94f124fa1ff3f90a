"""Serving the shop: werkzeug's threaded WSGI server on 127.0.0.1 in a background thread.

:class:`ShopServer` starts at construction (the OS picks a free port) and stops with
:meth:`ShopServer.close` (``shutdown`` of the serve loop, the socket closed, the thread joined;
idempotent). One server serves many environments: :func:`acquire_server` hands out a shared,
reference-counted server per ``(catalog seed, catalog size)`` within a process, and
:func:`release_server` stops it when its last user lets go.

Example:
    >>> server = acquire_server(0, 1000)
    >>> server.url.startswith("http://127.0.0.1:")
    True
    >>> release_server(server)
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server

from sandboxes.web.app import create_app
from sandboxes.web.catalog import Catalog, generate_catalog
from sandboxes.web.search import SearchIndex

__all__ = ["ShopServer", "acquire_server", "release_server", "server_users", "shop_for"]

_LOCK = threading.Lock()
_SHARED: dict[tuple[int, int], tuple[ShopServer, int]] = {}
_INDEXES: dict[tuple[int, int], SearchIndex] = {}


def shop_for(catalog_seed: int, num_products: int) -> tuple[Catalog, SearchIndex]:
    """The catalog and its search index for these arguments (built once per process)."""
    key = (int(catalog_seed), int(num_products))
    catalog = generate_catalog(*key)
    with _LOCK:
        index = _INDEXES.get(key)
        if index is None or index.catalog is not catalog:
            index = _INDEXES[key] = SearchIndex(catalog)
    return catalog, index


class ShopServer:
    """The shop site served on ``127.0.0.1`` at a free port, in a daemon thread.

    Args:
        catalog: the products.
        index: their search index (built if ``None``).
        host: the address to bind (loopback by default; the site is for this machine only).

    Attributes:
        url: base URL, ``http://127.0.0.1:PORT`` (no trailing slash).
        port: the port.
    """

    def __init__(self, catalog: Catalog, index: SearchIndex | None = None, host: str = "127.0.0.1"):
        self.catalog = catalog
        app = create_app(catalog, index)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log per request
        self._server: BaseWSGIServer | None = make_server(host, 0, app, threaded=True)
        self.port: int = self._server.server_port
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"webshop-server-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._server is not None and self._thread.is_alive()

    def close(self) -> None:
        """Stop serving, close the socket, join the thread (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ShopServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ShopServer({self.url}, {self.catalog!r}, running={self.running})"


def acquire_server(catalog_seed: int, num_products: int) -> ShopServer:
    """A running shared server for this catalog; pair every call with :func:`release_server`."""
    key = (int(catalog_seed), int(num_products))
    catalog, index = shop_for(*key)
    with _LOCK:
        entry = _SHARED.get(key)
        if entry is None or not entry[0].running:
            server = ShopServer(catalog, index)
            _SHARED[key] = (server, 1)
            return server
        server, users = entry
        _SHARED[key] = (server, users + 1)
        return server


def release_server(server: ShopServer) -> None:
    """Let go of a server from :func:`acquire_server`; the last user's release stops it."""
    with _LOCK:
        for key, (shared, users) in list(_SHARED.items()):
            if shared is server:
                if users > 1:
                    _SHARED[key] = (shared, users - 1)
                    return
                del _SHARED[key]
                break
    server.close()


def server_users(server: ShopServer) -> int:
    """How many :func:`acquire_server` holders ``server`` has now (0 once it is released)."""
    with _LOCK:
        for shared, users in _SHARED.values():
            if shared is server:
                return users
    return 0
