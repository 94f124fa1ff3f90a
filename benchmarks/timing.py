"""The one timing helper the benchmark scripts share (importable as ``timing`` from a script in
this folder, as ``children`` is)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeats: int, warmups: int = 0) -> float:
    """The median wall time of ``repeats`` calls of ``fn`` (seconds), after ``warmups`` calls
    that are not timed. The median, not the mean: one call slowed by a busy neighbour does not
    move it."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
