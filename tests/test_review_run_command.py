"""Review of sandboxes.limits.run_command (65eb4e4): the time bound and its argument."""

from __future__ import annotations

import sys
import time

import pytest

from sandboxes.limits import run_command


def test_a_grandchild_in_its_own_session_holding_stdout_does_not_outlast_the_timeout() -> None:
    """The docstring says "wait at most ``timeout`` s". A grandchild that leaves the group
    (``setsid``) keeps the stdout pipe open, is not reached by ``killpg``, and the second
    ``proc.communicate()`` (no timeout) then waits for it: here 6 s for a 0.5 s bound, forever
    for a daemon. Expected: the call returns within about the bound."""
    t0 = time.monotonic()
    run = run_command(["sh", "-c", "setsid sleep 6 & echo started"], timeout=0.5)
    elapsed = time.monotonic() - t0
    assert elapsed < 4.0, f"run_command took {elapsed:.1f} s with timeout=0.5 ({run})"


@pytest.mark.parametrize("timeout", [0, -1])
def test_a_timeout_that_is_not_positive_is_refused(timeout: float) -> None:
    """The docstring requires ``timeout > 0``; 0 or a negative bound silently kills the program
    at once and reports ``timed_out=True`` instead of naming the bad argument."""
    with pytest.raises(ValueError, match="timeout"):
        run_command([sys.executable, "-c", "print('hi')"], timeout=timeout)
