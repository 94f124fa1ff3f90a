"""The sandbox image: built offline (debootstrap + ``docker import``), or from the Dockerfile.

Two ways to get the image that :class:`~sandboxes.code.docker_backend.DockerSandbox` runs:

* With a registry: ``docker build -t agentgym-sandbox:py3 sandboxes/docker`` (the Dockerfile there).
* Offline (no registry; what CI does): ``python -m sandboxes.code.image build``, which

  1. runs ``debootstrap --variant=minbase --include=python3 bookworm ROOT MIRROR`` (Debian's
     packages only; about a minute), adds the two sandbox users (``sandbox`` uid 1000 runs the code,
     ``keeper`` uid 1001 runs the idle process that holds the container open), removes what the
     sandbox never needs (documentation, locales, apt and dpkg state, perl, Python's test suite) so
     that each container's copy of the root file system is small, and packs the result as
     ``<cache-dir>/rootfs-bookworm-python3.tar`` (default cache dir ``/var/cache/agentgym``; kept
     between runs, so re-runs skip debootstrap);
  2. imports the tarball into the daemon as ``agentgym-sandbox:py3`` (skipped when that tag exists
     already, unless ``--force``).

  Needs root, ``debootstrap`` (``apt-get install debootstrap``) and a reachable Debian mirror (the
  first one in ``/etc/apt/sources.list.d/debian.sources`` or ``/etc/apt/sources.list``, else
  ``http://deb.debian.org/debian``; ``--mirror`` overrides).

Example (root, with a daemon at ``$DOCKER_HOST``)::

    python -m sandboxes.code.image build
    python -m sandboxes.code.image build --cache-dir /tmp/agentgym-cache --tag mysandbox:1
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_CACHE_DIR",
    "SANDBOX_UID",
    "KEEPER_UID",
    "build_rootfs",
    "import_image",
    "image_exists",
    "debian_mirror",
    "main",
]

DEFAULT_IMAGE = "agentgym-sandbox:py3"
DEFAULT_CACHE_DIR = Path("/var/cache/agentgym")
SUITE = "bookworm"
#: uid/gid that runs untrusted code in the container.
SANDBOX_UID = 1000
#: uid/gid of the idle process that keeps the container alive (a different user, so the code's
#: ``kill(-1)`` clean-up cannot reach it).
KEEPER_UID = 1001
ROOTFS_NAME = f"rootfs-{SUITE}-python3.tar"
#: Paths (relative to the root) removed from the debootstrap tree: never used by a sandboxed
#: Python program, and each container's root file system is a full copy under the vfs driver.
PRUNE = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/i18n",
    "usr/share/lintian",
    "usr/share/zoneinfo",
    "usr/share/perl",
    "usr/share/perl5",
    "usr/lib/x86_64-linux-gnu/perl-base",
    "usr/lib/x86_64-linux-gnu/perl",
    "usr/lib/x86_64-linux-gnu/gconv",
    "usr/bin/perl",
    "var/cache/apt",
    "var/cache/debconf",
    "var/lib/apt",
    "var/lib/dpkg",
    "var/log",
    "usr/lib/python3.11/test",
    "usr/lib/python3.11/idlelib",
    "usr/lib/python3.11/tkinter",
    "usr/lib/python3.11/ensurepip",
    "usr/lib/python3.11/lib2to3",
    "usr/lib/python3.11/pydoc_data",
)


def debian_mirror() -> str:
    """The first Debian mirror named in apt's sources (``http://deb.debian.org/debian`` if none)."""
    for path in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for match in re.finditer(r"(?:URIs:\s*|^deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            uri = match.group(1)
            if uri.startswith("http") and "security" not in uri:
                return uri
    return "http://deb.debian.org/debian"


def build_rootfs(cache_dir: Path = DEFAULT_CACHE_DIR, mirror: str | None = None) -> Path:
    """Build (or reuse) the sandbox root file system tarball.

    Args:
        cache_dir: where the tarball is kept between runs.
        mirror: Debian mirror URL (default: :func:`debian_mirror`).

    Returns:
        Path of ``<cache_dir>/rootfs-bookworm-python3.tar``.

    Raises:
        RuntimeError: not root, ``debootstrap`` missing, or debootstrap failed (its log tail is in
            the message).
    """
    cache_dir = Path(cache_dir)
    tarball = cache_dir / ROOTFS_NAME
    if tarball.exists() and tarball.stat().st_size > 0:
        return tarball
    if os.geteuid() != 0:
        raise RuntimeError("building the sandbox root file system needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed: run `apt-get install -y debootstrap`")
    cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="agentgym-rootfs-", dir=cache_dir))
    try:
        root = work / "root"
        cmd = [
            "debootstrap",
            "--variant=minbase",
            "--include=python3",
            SUITE,
            str(root),
            mirror or debian_mirror(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}"
            )
        _finish_rootfs(root)
        partial = work / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(partial), "."], check=True)
        partial.replace(tarball)  # atomic: a half-written tarball is never taken for a cache hit
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tarball


def _finish_rootfs(root: Path) -> None:
    for rel in PRUNE:
        target = root / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
    with open(root / "etc/passwd", "a", encoding="utf-8") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/work:/usr/sbin/nologin\n")
        f.write(f"keeper:x:{KEEPER_UID}:{KEEPER_UID}:keeper:/nonexistent:/usr/sbin/nologin\n")
    with open(root / "etc/group", "a", encoding="utf-8") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:\nkeeper:x:{KEEPER_UID}:\n")
    # Docker copies an image directory's mode onto a tmpfs mounted over it: /work must be 1777
    # so that the sandbox user can write the run's files there.
    (root / "work").mkdir(exist_ok=True)
    os.chmod(root / "work", 0o1777)


def image_exists(client: object, tag: str = DEFAULT_IMAGE) -> bool:
    """Whether the daemon of ``client`` (a ``docker.DockerClient``) has image ``tag``."""
    import docker.errors

    try:
        client.images.get(tag)  # type: ignore[attr-defined]
    except docker.errors.ImageNotFound:
        return False
    return True


def import_image(client: object, tarball: Path, tag: str = DEFAULT_IMAGE) -> str:
    """``docker import`` the root file system tarball as ``tag``; return the image id."""
    repository, _, version = tag.partition(":")
    # In memory (about 100 MB): the SDK's streamed upload is sent chunked, which dockerd rejects.
    data = Path(tarball).read_bytes()
    client.api.import_image_from_data(  # type: ignore[attr-defined]
        data,
        repository=repository,
        tag=version or "latest",
        changes=[
            f"USER {SANDBOX_UID}:{SANDBOX_UID}",
            "WORKDIR /work",
            "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1",
            'CMD ["sleep", "infinity"]',
        ],
    )
    return client.images.get(tag).id  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sandboxes.code.image build [--cache-dir DIR] [--tag TAG] [--mirror URL]``."""
    parser = argparse.ArgumentParser(prog="python -m sandboxes.code.image", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the sandbox image offline and import it")
    build.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    build.add_argument("--tag", default=DEFAULT_IMAGE)
    build.add_argument("--mirror", default=None)
    build.add_argument("--force", action="store_true", help="re-import even if the tag exists")
    args = parser.parse_args(argv)

    import docker

    client = docker.from_env()
    try:
        client.ping()
    except Exception as err:  # noqa: BLE001 - any failure to reach the daemon has one fix
        print(
            f"cannot reach a Docker daemon ({err}); start one and set DOCKER_HOST "
            "(see .ci/setup_docker.sh)",
            file=sys.stderr,
        )
        return 2
    if image_exists(client, args.tag) and not args.force:
        print(f"image {args.tag} exists", file=sys.stderr)
        return 0
    tarball = build_rootfs(args.cache_dir, args.mirror)
    print(f"rootfs {tarball} ({tarball.stat().st_size / 2**20:.0f} MiB)", file=sys.stderr)
    image_id = import_image(client, tarball, args.tag)
    print(f"imported {args.tag} {image_id}", file=sys.stderr)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
