"""Canonical keys of executed actions, for the leaderboard's duplicate check.

The leaderboard (``python -m leaderboards``) tells one run's episodes from another's by what
their steps executed (:func:`leaderboards.verify.executed_record`), not by the answer text: a copy
whose answers spell the same actions otherwise is the same run. Each env's executed action names
(``info["executed_actions"]``) are canonical where the env reads an action into one of a few
moves (Sokoban's ``Up``, Bandit's arm names, MiniWoB++'s ``click[3]``); where the name is the
agent's own text, an :attr:`agentgym.registration.EnvEntry.action_key` here maps each spelling of
one action to one key:

* :func:`expression_key` (Countdown): the parsed expression in one spelling
  (:func:`agentgym.solvers.countdown_expr.canonical_expression`);
* :func:`answer_key` (Math): the answer text with white space runs collapsed;
* :func:`code_key` (CodeExec, whose names are ``code (N chars)``: keyed on the action piece that
  ran): a digest of the syntax tree of the code that ran.

A key never raises and costs time linear in the text (each text is bounded by its env).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator

__all__ = ["answer_key", "code_key", "expression_key", "INVALID_CODE"]

#: The key of a CodeExec answer that is not code that can run (over the length cap, or its code
#: does not parse): nothing of it ran.
INVALID_CODE = "invalid"

#: Fields of a syntax tree node that are layout, not code: how a string literal was prefixed
#: (``u"x"`` is ``"x"``) and ``# type:`` comments.
_LAYOUT_FIELDS = frozenset({"kind", "type_comment", "type_ignores"})


def expression_key(name: str) -> str:
    """A Countdown action's key: its expression in canonical form (``52 - (86 + 27 - 64)``
    and ``52-( 86+27 -64 )`` are ``52-(86+27-64)``), or the name with its white space removed
    if it is not an expression (the env never executes such a one).

    Example:
        >>> expression_key(" 52  -   ( 86  +  27  -  64 ) ")
        '52-(86+27-64)'
    """
    from agentgym.solvers.countdown_expr import canonical_expression

    canonical = canonical_expression(name)
    return canonical if canonical is not None else "".join(name.split())


def answer_key(name: str) -> str:
    """A Math action's key: the answer text read (``info["executed_actions"]``) with white space
    runs collapsed to one space and the ends stripped (the env does not expose the value it
    read, so two spellings of one value, ``18`` and ``18.0``, stay two keys).

    Example:
        >>> answer_key("  1 /\\n 2 ")
        '1 / 2'
    """
    return " ".join(name.split())


def code_key(answer: str) -> str:
    """A CodeExec action's key: ``"py:"`` and the SHA-256 of the syntax tree of the code the
    answer holds (:func:`agentgym.envs.code_exec.extract_code`: a fenced block's content, else
    the text), so that a fence, formatting, comments and string prefixes do not count; what runs
    (names, literals, docstrings) does. :data:`INVALID_CODE` for an answer over
    :data:`agentgym.envs.code_exec.MAX_ANSWER_CHARS` characters (checked before anything else)
    or whose code does not parse.

    The parse runs one thread at a time (:data:`agentgym.envs.code_exec_grading.AST_LOCK`) and
    the tree is walked without recursion, so no nesting the parser accepts can exhaust the stack.

    Example:
        >>> code_key("```python\\ndef f():\\n    return 1  # one\\n```") == code_key(
        ...     "def f():  return (1)"
        ... )
        True
        >>> code_key("def f(:")
        'invalid'
    """
    from agentgym.envs.code_exec import MAX_ANSWER_CHARS, extract_code
    from agentgym.envs.code_exec_grading import AST_LOCK

    if not isinstance(answer, str) or len(answer) > MAX_ANSWER_CHARS:
        return INVALID_CODE
    code = extract_code(answer)
    try:
        with AST_LOCK:
            tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return INVALID_CODE
    digest = hashlib.sha256()
    for part in _tree_parts(tree):
        digest.update(part.encode("utf-8", "surrogatepass"))
    return f"py:{digest.hexdigest()}"


def _tree_parts(tree: ast.AST) -> Iterator[str]:
    """The syntax tree as a stream of unambiguous text parts (node types, field names, lists
    with their lengths, constants with their types), depth first, without recursion."""
    stack: list[object] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            yield item.text
        elif isinstance(item, ast.AST):
            yield f"{type(item).__name__}("
            stack.append(_Text(")"))
            fields = [f for f in item._fields if f not in _LAYOUT_FIELDS]
            for name in reversed(fields):
                stack.append(getattr(item, name, None))
                stack.append(_Text(f"{name}="))
        elif isinstance(item, list):
            yield f"[{len(item)}:"
            stack.append(_Text("]"))
            stack.extend(reversed(item))
        else:
            yield _constant(item)


class _Text:
    """A fixed part of :func:`_tree_parts`' stream (told apart from a constant)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _constant(value: object) -> str:
    """A literal as text with its type, its length first: an int in hex (a decimal ``repr`` of
    a very long int literal raises), every other literal by ``repr``."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = hex(value)
    else:
        text = repr(value)
    return f"<{type(value).__name__}:{len(text)}:{text}>"
