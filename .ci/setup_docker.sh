#!/usr/bin/env bash
# Start a private Docker daemon and build the code-sandbox image offline; install bubblewrap.
#
# Run as root, after the project is installed with its `code` extra (the image builder is
# `python -m sandboxes.code.image build`). Idempotent: a second run finds the packages installed,
# the daemon answering and the image present, and does nothing.
#
# Use it either way:
#   source .ci/setup_docker.sh            # exports DOCKER_HOST into the calling shell
#   bash .ci/setup_docker.sh && export "$(cat /run/agentgym-docker/env)"
# The file $AGENTGYM_DOCKER_RUN/env (default /run/agentgym-docker/env) holds one line,
# DOCKER_HOST=unix:///run/agentgym-docker/docker.sock. Stop the daemon with .ci/teardown_docker.sh.
#
# The daemon: overlay2 storage where overlayfs mounts, else vfs; no bridge and no iptables
# (sandbox containers run with --network none), its own data root, exec root and unix socket, so
# it never touches a system dockerd. Images cannot be pulled (no registry): the sandbox image is
# debootstrap'ed and `docker import`ed; the rootfs tarball is cached in $AGENTGYM_CACHE
# (default /var/cache/agentgym) and the daemon's data root persists, so re-runs are fast.

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    # Sourced: do the work in a child bash (so that `set -e` holds there whatever the caller's
    # options are), then export DOCKER_HOST here.
    if bash "${BASH_SOURCE[0]}"; then
        export DOCKER_HOST="unix://${AGENTGYM_DOCKER_RUN:-/run/agentgym-docker}/docker.sock"
        echo "DOCKER_HOST=$DOCKER_HOST"
        return 0
    fi
    echo "setup_docker.sh failed" >&2
    return 1
fi

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
run_dir="${AGENTGYM_DOCKER_RUN:-/run/agentgym-docker}"
data_base="${AGENTGYM_DOCKER_DATA:-/var/lib/agentgym-docker}"
cache_dir="${AGENTGYM_CACHE:-/var/cache/agentgym}"
python="${PYTHON:-python3}"
sock="$run_dir/docker.sock"
host="unix://$sock"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ "${#need[@]}" -gt 0 ]; then
    echo "== apt-get install ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 "${need[@]}"
fi

# overlay2 when this kernel and file system can mount overlayfs (a container starts in about
# 0.3 s), else vfs (works anywhere, but copies the image for every container: about 1.5 s).
driver="${AGENTGYM_DOCKER_STORAGE:-}"
if [ -z "$driver" ]; then
    driver=vfs
    probe="$(mktemp -d "${data_base%/*}/agentgym-overlay-probe.XXXXXX" 2>/dev/null || mktemp -d)"
    mkdir -p "$probe/l" "$probe/u" "$probe/w" "$probe/m"
    if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" \
        "$probe/m" 2>/dev/null; then
        umount "$probe/m" && driver=overlay2
    fi
    rm -rf "$probe"
fi
data_root="$data_base/$driver"
mkdir -p "$run_dir" "$data_root" "$cache_dir"
if docker -H "$host" version >/dev/null 2>&1; then
    echo "== dockerd already answers at $host"
else
    echo "== starting dockerd at $host (storage driver $driver)"
    rm -f "$sock" "$run_dir/dockerd.pid"
    # setsid + nohup: the daemon outlives this shell; teardown_docker.sh stops it by its pid file.
    setsid nohup dockerd \
        --data-root "$data_root" \
        --exec-root "$run_dir/exec" \
        --pidfile "$run_dir/dockerd.pid" \
        -H "$host" \
        --storage-driver="$driver" \
        --iptables=false \
        --ip6tables=false \
        --bridge=none \
        >"$run_dir/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 120); do
        docker -H "$host" version >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! docker -H "$host" version >/dev/null 2>&1; then
        echo "dockerd did not answer within 60 s; its log:" >&2
        tail -n 40 "$run_dir/dockerd.log" >&2
        exit 1
    fi
fi
echo "DOCKER_HOST=$host" >"$run_dir/env"

echo "== sandbox image"
DOCKER_HOST="$host" "$python" -m sandboxes.code.image build --cache-dir "$cache_dir"
echo "DOCKER_HOST=$host"
