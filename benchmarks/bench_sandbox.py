"""Speed of the code sandboxes: run latency, throughput by pool size, container start, naive baseline.

For each back end (``process``: bubblewrap; ``docker``: when ``$DOCKER_HOST`` answers):

* latency p50/p95 of a trivial program (``pass``) and of one HumanEval grading run (HumanEval/0's
  canonical solution against its 7 tests, through :func:`agentgym.envs.code_exec.grade`);
* runs/s of the trivial program with 1, 2 and 4 runs in flight (Docker: pool sizes 1, 2, 4);
* Docker only: container start time (create + start of one pool container), and the naive
  baseline, ``docker run --rm`` of a fresh container per run, with the ratio to the pooled run.

Usage::

    DOCKER_HOST=unix:///run/agentgym-docker/docker.sock python benchmarks/bench_sandbox.py [--runs 30]

Prints figures; asserts nothing. On a shared 2-core machine, expect noise between runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from agentgym.envs.code_exec import grade, humaneval_problems
from sandboxes.code import docker_available, make_sandbox


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def _latency(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return _percentiles(samples)


def _throughput(box: object, in_flight: int, runs: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(lambda _: box.run("pass", timeout_s=30), range(runs)))  # type: ignore[attr-defined]
    return runs / (time.perf_counter() - start)


def bench_backend(backend: str, runs: int) -> None:
    problem = humaneval_problems()[0]
    opts = {"pool_size": 4} if backend == "docker" else {}
    box = make_sandbox(backend, **opts)
    try:
        p50, p95 = _latency(lambda: box.run("pass", timeout_s=30), runs)
        print(f"{backend:8s} trivial run        p50 {p50 * 1e3:7.1f} ms  p95 {p95 * 1e3:7.1f} ms")
        p50h, p95h = _latency(lambda: grade(box, problem, problem.solution), runs)
        print(f"{backend:8s} HumanEval/0 grade  p50 {p50h * 1e3:7.1f} ms  p95 {p95h * 1e3:7.1f} ms")
    finally:
        box.close()
    for size in (1, 2, 4):
        opts = {"pool_size": size} if backend == "docker" else {}
        box = make_sandbox(backend, **opts)
        try:
            if backend == "docker":
                box.warm()  # type: ignore[attr-defined]
            rate = _throughput(box, size, max(runs, 4 * size))
        finally:
            box.close()
        print(f"{backend:8s} pool/in-flight {size}   {rate:6.2f} runs/s")
    if backend == "docker":
        _bench_docker_start(runs, p50)


def _bench_docker_start(runs: int, pooled_p50: float) -> None:
    import docker

    from sandboxes.code.docker_backend import DockerSandbox

    starts = []
    for _ in range(max(3, runs // 5)):
        box = DockerSandbox(pool_size=1)
        start = time.perf_counter()
        box.warm()
        starts.append(time.perf_counter() - start)
        box.close()
    s50, s95 = _percentiles(starts)
    print(f"docker   container start     p50 {s50 * 1e3:7.1f} ms  p95 {s95 * 1e3:7.1f} ms")
    client = docker.from_env()
    image = DockerSandbox.__init__.__kwdefaults__["image"]  # type: ignore[index]

    def naive() -> None:
        client.containers.run(
            image, ["python3", "-c", "pass"], remove=True, network_mode="none", init=True
        )

    n50, n95 = _latency(naive, max(3, runs // 3))
    client.close()
    print(f"docker   `docker run --rm`   p50 {n50 * 1e3:7.1f} ms  p95 {n95 * 1e3:7.1f} ms")
    print(f"docker   naive / pooled p50 ratio: {n50 / pooled_p50:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30, help="samples per latency figure")
    args = parser.parse_args()
    backends = ["process"] + (["docker"] if docker_available() else [])
    if "docker" not in backends:
        print("docker: no daemon with the sandbox image at $DOCKER_HOST; measuring process only")
    for backend in backends:
        bench_backend(backend, args.runs)


if __name__ == "__main__":
    main()
