#!/usr/bin/env bash
# Stop the private dockerd started by .ci/setup_docker.sh (idempotent; its data root and the image
# cache are kept for the next run). Removes any container left behind first, so a leak cannot
# survive into the next run, and reports them (a non-empty list is a bug in the sandbox code).
set -uo pipefail
run_dir="${AGENTGYM_DOCKER_RUN:-/run/agentgym-docker}"
host="unix://$run_dir/docker.sock"
pidfile="$run_dir/dockerd.pid"

if docker -H "$host" version >/dev/null 2>&1; then
    left="$(docker -H "$host" ps -aq)"
    if [ -n "$left" ]; then
        echo "teardown: removing containers left behind: $left" >&2
        # shellcheck disable=SC2086
        docker -H "$host" rm -f $left >/dev/null
    fi
fi
if [ -f "$pidfile" ]; then
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$pidfile"
fi
rm -f "$run_dir/docker.sock" "$run_dir/env"
echo "teardown: dockerd stopped"
