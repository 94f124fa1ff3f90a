"""Removing what environments started outside their process, once that process has died.

CodeExec's Docker sandboxes and WebShop's browser carry their owner's pid
(:func:`sandboxes.code.docker_backend.reap_orphans`,
:func:`sandboxes.web.browser.reap_orphaned_browsers`); a process that was killed before it could
close its environments leaves them behind. :func:`reap_orphans` removes, on this machine, those
whose owner is gone. Those who run environments in processes they may kill (``baselines``' Ray
pool) call it here: ``agentgym`` is their way to the sandboxes, never ``sandboxes`` itself.
"""

from __future__ import annotations

import contextlib

__all__ = ["reap_orphans"]


def reap_orphans() -> None:
    """Remove, on this machine, the Docker sandboxes and browsers of processes that died without
    closing them. Best effort: a missing Docker daemon, SDK or Selenium is skipped."""
    with contextlib.suppress(Exception):
        from sandboxes.web.browser import reap_orphaned_browsers

        reap_orphaned_browsers()
    with contextlib.suppress(Exception):
        import docker

        from sandboxes.code.docker_backend import reap_orphans as reap_containers

        client = docker.from_env(timeout=10)
        try:
            reap_containers(client)
        finally:
            client.close()
