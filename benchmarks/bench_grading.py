"""Reward-checking speed: CodeExec grading time per HumanEval problem, and math answer checks/s.

* CodeExec: for each back end (``process``; ``docker`` when ``$DOCKER_HOST`` answers with the
  image), grade the canonical solution of every ``--stride``-th HumanEval problem, one
  :func:`agentgym.envs.code_exec_grading.grade` call (one sandbox run) per problem, and print the
  p50/p95 of the wall-clock time per problem (host-side test planning and verdicts included).
* Math: :func:`agentgym.answers.check_answer` over a fixed list of (reference, answer) pairs
  (numbers, fractions, LaTeX, several-part answers, a slow power), repeated ``--math-rounds``
  times; prints checks/s, and the deadline's overhead per check: the same checks in this process
  without a deadline (``answers._check_now``) against ``check_answer`` in its worker process, and
  an empty call of the worker pool (``abs(-1)``).
* Math, adversarial (``--adversarial``): the seconds of ``check_answer`` and of ``parse_answer``
  on each of issue 25's hangs (``tests.test_math_answers.HANGS``) and on ``--fuzz`` seeded fuzz
  answers (the test's generators); prints the slowest, and how many reached the deadline.

* Math, Math-Verify's table (``--table``): the in-process seconds per row of
  ``tests/data/math_verify_cases.jsonl`` (reading the reference and grading the prediction,
  :func:`agentgym.answers._grade_now`, caches cleared each round), beside the peer, Math-Verify's
  own ``verify(parse(gold), parse(prediction))`` on the same row, and with ``--compare-math
  OLD.py`` an older ``agentgym/answers.py`` (``git show REV:agentgym/answers.py > /tmp/old.py``),
  the three alternating row by row, each first in turn, so that they see the same load and
  math-verify's own caches favour none; prints p50, p95 and the total,
  and the verdicts on which the two checkers differ.

* ``--compare-with OLD.py``: also time another grader module (e.g. the in-sandbox grader of
  commit 315f5e0: ``git show 315f5e0:agentgym/envs/code_exec.py > /tmp/old_code_exec.py``),
  alternating old and new on each problem, so that both see the same machine load.

Usage::

    DOCKER_HOST=unix:///run/agentgym-docker/docker.sock python benchmarks/bench_grading.py \
        [--stride 4] [--math-rounds 20] [--backends process,docker] [--compare-with OLD.py] \
        [--adversarial] [--fuzz 200] [--table [--compare-math OLD.py] [--table-rounds 3]]

Prints figures; asserts nothing. On a shared 2-core machine, expect noise between runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from typing import Any

MATH_CASES = [
    ("18", "The total is $18.00."),
    ("1/2", "\\frac{1}{2}"),
    ("1/2", "0.49"),
    ("1234", "1,234"),
    ("42", "#### 42"),
    ("12 and 20", "12 and 20"),
    ("12 and 20", "20"),
    ("(0, 1)", "(0, 1)"),
    ("3e-9", "4e-9"),
    ("x = 1 or x = 2", "x = 2 or x = 1"),
    ("5", "\\boxed{5}"),
    ("7", "**7**"),
    ("0.5", "50%"),
    ("2", "(a+b+c+d)^40"),
]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def _load_module(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("compared_grader", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def bench_code(backend: str, stride: int, compare_with: str | None) -> None:
    from agentgym.envs.code_exec import grade, humaneval_problems
    from sandboxes.code import make_sandbox

    graders = {"new": grade}
    if compare_with:
        graders["old"] = _load_module(compare_with).grade
    problems = humaneval_problems()[::stride]
    box = make_sandbox(backend)
    samples: dict[str, list[float]] = {name: [] for name in graders}
    failed = dict.fromkeys(graders, 0)
    try:
        for fn in graders.values():
            fn(box, problems[0], problems[0].solution)  # warm-up
        for p in problems:
            for name, fn in graders.items():  # alternate: the same load for both
                start = time.perf_counter()
                result = fn(box, p, p.solution, timeout_s=60)
                samples[name].append(time.perf_counter() - start)
                failed[name] += result.passed != result.total
    finally:
        box.close()
    for name in graders:
        p50, p95 = _percentiles(samples[name])
        print(
            f"code/{backend:8s} {name}: {len(problems)} problems  per problem p50 "
            f"{p50 * 1e3:7.1f} ms  p95 {p95 * 1e3:7.1f} ms  (canonical not full marks: "
            f"{failed[name]})"
        )


def bench_math(rounds: int) -> None:
    from agentgym import answers
    from agentgym.answers import check_answer

    pool = answers._pool()
    for ref, ans in MATH_CASES:  # warm-up (imports, the worker's start)
        check_answer(ref, ans)
        answers._check_now(ref, ans, False)
    n = rounds * len(MATH_CASES)
    seconds = {}
    for cached in (False, True):  # uncached: every text read afresh; cached: the overhead alone
        for where, fn in [
            ("worker", lambda r, a: check_answer(r, a)),
            ("in-process", lambda r, a: answers._check_now(r, a, False)),
        ]:
            start = time.perf_counter()
            for _ in range(rounds):
                if not cached:
                    answers._parse_text.cache_clear()
                    pool.call(5.0, answers._parse_text.cache_clear)
                for ref, ans in MATH_CASES:
                    fn(ref, ans)
            seconds[cached, where] = elapsed = time.perf_counter() - start
            label = f"{'cached' if cached else 'uncached'} {where}"
            print(f"math check_answer {label:20s}: {n} checks, {n / elapsed:8.0f} checks/s")
    start = time.perf_counter()
    for _ in range(n):
        pool.call(5.0, abs, -1)
    empty = (time.perf_counter() - start) / n
    for cached in (False, True):
        overhead = (seconds[cached, "worker"] - seconds[cached, "in-process"]) / n
        print(
            f"math deadline overhead per check ({'cached' if cached else 'uncached'} texts): "
            f"{overhead * 1e3:.3f} ms"
        )
    print(f"math an empty worker call (abs(-1)): {empty * 1e3:.3f} ms")


def bench_adversarial(fuzz: int) -> None:
    import random

    from agentgym.answers import CHECK_TIMEOUT_S, check_answer, parse_answer
    from tests.test_math_answers import HANGS, _fuzz_answers

    check_answer("1", "1")  # the worker's start
    cases = [*HANGS.items()]
    cases += [(f"fuzz {i}", t) for i, t in enumerate(_fuzz_answers(random.Random(25), fuzz))]
    worst: list[tuple[float, str]] = []
    timed_out = 0
    for name, text in cases:
        start = time.perf_counter()
        parsed = parse_answer(text)
        mid = time.perf_counter()
        check_answer("2", text)
        end = time.perf_counter()
        timed_out += bool(parsed is not None and parsed.timed_out)
        worst.append((max(mid - start, end - mid), name))
        if not name.startswith("fuzz"):
            print(f"  {name}: parse {mid - start:6.3f} s, check {end - mid:6.3f} s")
    worst.sort(reverse=True)
    print(
        f"math adversarial: {len(cases)} answers ({len(HANGS)} of issue 25, {fuzz} fuzz), "
        f"{timed_out} reached the {CHECK_TIMEOUT_S:g} s deadline; slowest calls: "
        + ", ".join(f"{s:.2f} s ({n})" for s, n in worst[:3])
    )


def bench_table(rounds: int, compare_math: str | None) -> None:
    import json
    from pathlib import Path

    import math_verify

    from agentgym import answers

    table = Path(__file__).resolve().parent.parent / "tests" / "data" / "math_verify_cases.jsonl"
    rows = [json.loads(line) for line in table.read_text(encoding="utf-8").splitlines() if line]
    old = _load_module(compare_math) if compare_math else None

    def peer(gold: str, prediction: str) -> bool:
        return bool(math_verify.verify(math_verify.parse(gold), math_verify.parse(prediction)))

    graders: list[tuple[str, Any]] = [
        ("agentgym", lambda g, p: answers._grade_now(g, p, True)[1]),
        ("Math-Verify", peer),
    ]
    if old is not None:
        graders.insert(1, (f"agentgym {compare_math}", lambda g, p: old._grade_now(g, p, True)[1]))
    times: dict[str, list[float]] = {name: [] for name, _ in graders}
    verdicts: dict[str, list[bool]] = {name: [] for name, _ in graders}
    for round_ in range(rounds):
        for module in (answers, old):
            if module is not None:
                module._parse_text.cache_clear()
        for i, row in enumerate(rows):  # each goes first as often: math-verify caches parses
            for name, grade in graders[i % len(graders) :] + graders[: i % len(graders)]:
                start = time.perf_counter()
                verdict = grade(row["gold"], row["prediction"])
                times[name].append(time.perf_counter() - start)
                if round_ == 0:
                    verdicts[name].append(verdict)
    for name, samples in times.items():
        p50, p95 = _percentiles(samples)
        print(
            f"math table {name:24s}: {len(rows)} rows x {rounds}, p50 {p50 * 1e3:7.2f} ms, "
            f"p95 {p95 * 1e3:7.2f} ms, total {sum(samples) / rounds:6.2f} s per pass"
        )
    if old is not None:
        differ = [
            row["source"]
            for row, a, b in zip(rows, verdicts["agentgym"], verdicts[graders[1][0]], strict=True)
            if a != b
        ]
        print(f"math table verdicts that differ from {compare_math}: {differ or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--math-rounds", type=int, default=20)
    parser.add_argument("--backends", default="process,docker")
    parser.add_argument("--compare-with", default=None, help="another grader module's file")
    parser.add_argument("--adversarial", action="store_true", help="time issue 25's answers")
    parser.add_argument("--fuzz", type=int, default=200, help="fuzz answers with --adversarial")
    parser.add_argument("--table", action="store_true", help="time Math-Verify's table")
    parser.add_argument("--table-rounds", type=int, default=3)
    parser.add_argument("--compare-math", default=None, help="an older answers.py, with --table")
    args = parser.parse_args()
    from sandboxes.code import docker_available

    bench_math(args.math_rounds)
    if args.adversarial:
        bench_adversarial(args.fuzz)
    if args.table:
        bench_table(args.table_rounds, args.compare_math)
    for backend in filter(None, args.backends.split(",")):  # --backends '' : math only
        if backend == "docker" and not docker_available():
            print("code/docker: no daemon with the image at $DOCKER_HOST; skipped")
            continue
        bench_code(backend, args.stride, args.compare_with)


if __name__ == "__main__":
    main()
