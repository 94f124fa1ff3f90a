"""Speed of the code sandboxes: run latency and throughput by runs in flight, and limit-to-result time.

For each back end (``process``: bubblewrap; ``docker``: when ``$DOCKER_HOST`` answers with the
image):

* p50/p95 latency of a trivial run (``pass``) and runs/s with 1, 4 and 20 runs in flight (Docker:
  a pool of that many warm containers, so that no run waits for a container);
* per limit kind (timeout, memory, processes, disk, output), the seconds from the limit being hit
  to the result. For ``timeout`` the limit is hit at ``timeout_s`` after the call; for the others
  the code writes ``time.time()`` to stderr just before its attack (allocate 400 MiB under
  memory_mb=128, fork without end, fill /work, flood stdout), so the figure is an upper bound
  (it includes the attack's own time to reach the limit). A fork bomb is not killed at the
  process limit (the run goes on, its forks refused): its result comes at its 2 s timeout.

Usage (the "before" figures: the same script with PYTHONPATH pointing at an older checkout)::

    DOCKER_HOST=unix:///run/agentgym-docker/docker.sock python benchmarks/bench_sandbox.py \\
        [--runs 40] [--backends process,docker]

Prints figures; asserts nothing. On a shared 2-core machine, expect noise between runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandboxes.code import docker_available, make_sandbox

IN_FLIGHT = (1, 4, 20)
ATTACKS = {
    "timeout": ("while True:\n    pass\n", 2.0),
    "memory": (
        "x = bytearray(400 * 2**20)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\n",
        10.0,
    ),
    "processes": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        2.0,
    ),
    "disk": ("f = open('/work/f', 'wb')\nwhile True:\n    f.write(b'x' * 2**20)\n", 10.0),
    "output": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", 10.0),
}


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def _box(backend: str, in_flight: int) -> Any:
    if backend == "docker":
        box = make_sandbox("docker", pool_size=in_flight)
        box.warm()
        return box
    return make_sandbox("process", isolation="bwrap")


def bench_in_flight(backend: str, runs: int) -> None:
    for in_flight in IN_FLIGHT:
        box = _box(backend, in_flight)
        try:
            box.run("pass", timeout_s=30)  # warm-up
            total = max(runs, 2 * in_flight)
            latencies: list[float] = []

            def one(_: int, box: Any = box, latencies: list[float] = latencies) -> None:
                start = time.perf_counter()
                box.run("pass", timeout_s=60)
                latencies.append(time.perf_counter() - start)

            start = time.perf_counter()
            with ThreadPoolExecutor(in_flight) as pool:
                list(pool.map(one, range(total)))
            rate = total / (time.perf_counter() - start)
        finally:
            box.close()
        p50, p95 = _percentiles(latencies)
        print(
            f"{backend:8s} in flight {in_flight:2d}: p50 {p50 * 1e3:7.1f} ms  "
            f"p95 {p95 * 1e3:7.1f} ms  {rate:6.1f} runs/s  ({total} runs)"
        )


def bench_limits(backend: str) -> None:
    box = _box(backend, 1)
    try:
        for kind, (attack, timeout_s) in ATTACKS.items():
            code = "import sys, time\nsys.stderr.write(repr(time.time()) + '\\n')\n" + attack
            start = time.time()
            result = box.run(code, timeout_s=timeout_s, memory_mb=128)
            end = time.time()
            if kind == "timeout":
                hit = start + timeout_s
            else:
                first = result.stderr.split("\n", 1)[0]
                hit = float(first) if first.replace(".", "", 1).isdigit() else start
            reported = getattr(result, "limit", "(no limit field)")
            print(
                f"{backend:8s} limit {kind:9s}: result {end - hit:6.3f} s after the hit "
                f"(run {end - start:6.3f} s; reported {reported}, exit {result.exit_code})"
            )
            if backend == "docker":
                getattr(box, "wait_removed", lambda: None)()
    finally:
        box.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per in-flight level")
    parser.add_argument("--backends", default="process,docker")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        if backend == "docker" and not docker_available():
            print("docker: no daemon with the sandbox image at $DOCKER_HOST; skipped")
            continue
        bench_in_flight(backend, args.runs)
        bench_limits(backend)


if __name__ == "__main__":
    main()
