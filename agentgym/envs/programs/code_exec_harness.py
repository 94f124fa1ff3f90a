"""CodeExec's grading harness: the program that runs an answer's calls, inside the code sandbox.

:func:`agentgym.envs.code_exec_grading.grade_batch` runs it as ``main.py`` in the sandbox (either
back end of :mod:`sandboxes.code`, under the sandbox's own Python: stdlib only), beside
``spec.json`` (the batch: per problem its prompt, answer, entry point, wire-encoded calls and
per-call time limit) and ``channel.py`` (:mod:`agentgym.envs.code_exec_channel`). For each problem
of the batch it runs the prompt and the answer in a fresh namespace, then calls the entry point
on each argument list and writes one line per call on a duplicate of stdout taken before the
answer ran (after a first line ``STARTED``, written before anything of the answer runs):
``<problem> <call> R<wire json>`` (returned), ``T`` (timed out), ``N<why>`` (not plain data),
``E<why>`` (raised); ``<problem> M E<why>`` when the answer's module code raised. Nothing here
decides a verdict: the host judges the values.
"""

import io
import json
import os
import signal
import sys

with open("channel.py", encoding="utf-8") as f:
    channel = {"__name__": "agentgym_channel"}
    exec(compile(f.read(), "channel.py", "exec"), channel)
with open("spec.json", encoding="utf-8") as f:
    batch = json.load(f)
report = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="replace")
report.write("STARTED\n")  # before the answer runs: it cannot take this line back
report.flush()
try:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
except OSError:
    pass


class _Sink(io.TextIOBase):
    def writable(self):
        return True

    def write(self, s):
        return len(s)


sys.stdout = _Sink()


class _Timeout(BaseException):
    pass


fired = [False]


def _alarm(signum, frame):
    fired[0] = True
    raise _Timeout()


signal.signal(signal.SIGALRM, _alarm)


def _reason(err):
    text = type(err).__name__ + (": " + str(err) if str(err) else "")
    return " ".join(text.split())[:300]


def _limited(fn, limit):
    fired[0] = False
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _emit(p, k, line):
    report.write(str(p) + " " + str(k) + " " + line + "\n")
    report.flush()


def _grade(p, spec):
    limit = spec["per_test_timeout_s"]
    ns = {"__name__": "solution"}
    # _limited calls each lambda below at once, in its own iteration: no late binding (B023)
    try:
        for name, code in (("prompt.py", spec["prelude"]), ("solution.py", spec["solution"])):
            _limited(lambda: exec(compile(code, name, "exec"), ns), limit)  # noqa: B023
        candidate = ns[spec["entry_point"]]
    except BaseException as err:
        _emit(p, "M", "E" + ("timed out" if fired[0] else _reason(err)))
        return
    for k, wire in enumerate(spec["calls"]):
        try:
            args, kwargs = channel["loads"](wire)
            line = "R" + _limited(lambda: channel["dumps"](candidate(*args, **kwargs)), limit)  # noqa: B023
            if fired[0]:
                line = "T"
        except channel["NotPlainData"] as err:
            line = "T" if fired[0] else "N" + _reason(err)
        except BaseException as err:
            line = "T" if fired[0] else "E" + _reason(err)
        _emit(p, k, line)


for p, spec in enumerate(batch):
    _grade(p, spec)
