"""The typed channel between the code sandbox and the grader: plain data only, both ways.

The grader sends each test call's arguments into the sandbox, and the sandbox sends back what the
answer's function returned, through this one encoding. Only *plain data* passes, checked by exact
type (a subclass, however it defines ``__eq__``, is not plain data), with two exceptions that
HumanEval's own ``==`` accepts: a ``collections.Counter``, ``OrderedDict`` or ``defaultdict``
travels as the dict it holds, and a namedtuple (a tuple subclass with ``_fields``:
``collections.namedtuple``, ``typing.NamedTuple``) as the tuple it holds. The grader then
compares what arrives, a plain dict or tuple, with ``==``: what the value *holds* is compared,
never its class's own ``__eq__`` (the rule: equality after this serialisation).

=============  =====================================================================
Python type    wire form (JSON)
=============  =====================================================================
``None``       ``null``
``bool``       ``true`` / ``false``
``int``        a JSON integer (at most Python's ``int_max_str_digits``, 4300 digits)
``float``      a JSON number; ``{"f": "nan" | "inf" | "-inf"}`` for the non-finite
``str``        a JSON string
``list``       a JSON array
``tuple``      ``{"t": [...]}`` (kept apart from lists: HumanEval compares tuples);
               namedtuples too (their items, decoded as a plain tuple)
``dict``       ``{"d": [[key, value], ...]}`` (keys: ``None``/bool/int/float/str/tuple);
               ``Counter``, ``OrderedDict``, ``defaultdict`` too (decoded as a plain dict)
=============  =====================================================================

Anything else (sets, generators, NumPy values, classes of the answer's own, self-containing or
deeper than :data:`MAX_DEPTH` nesting) is :class:`NotPlainData`: the grader counts that test
as failed. Decoding is as strict: a JSON object that is not one of the three tagged forms above
is refused, so whatever bytes arrive, the grader only ever holds ordinary Python values.

This file is stdlib-only and also runs *inside* the sandbox (the grader ships its source next to
the harness), so one implementation encodes and decodes on both sides.

Example:
    >>> loads(dumps((1, [2.5, None], {"a": True})))
    (1, [2.5, None], {'a': True})
    >>> from collections import Counter
    >>> loads(dumps(Counter("abb")))
    {'a': 1, 'b': 2}
"""

from __future__ import annotations

import collections
import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "DICT_TYPES", "NotPlainData", "to_wire", "from_wire", "dumps", "loads"]

#: Deepest nesting of lists, tuples and dicts that passes.
MAX_DEPTH = 50
#: The standard library's dict subclasses that travel as the dict they hold (exact types).
DICT_TYPES = (collections.Counter, collections.OrderedDict, collections.defaultdict)


def _is_namedtuple(kind: type) -> bool:
    fields = getattr(kind, "_fields", None)
    return issubclass(kind, tuple) and type(fields) is tuple


class NotPlainData(ValueError):
    """A value (or wire text) outside the plain data the channel carries."""


def to_wire(value: Any, depth: int = 0) -> Any:
    """The JSON-ready form of ``value``.

    Raises:
        NotPlainData: ``value`` is not plain data (see the module table), or nests too deep.
    """
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {"f": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if kind is list:
        return [to_wire(v, depth + 1) for v in value]
    # tuple.__iter__ and dict.items: what the value holds, whatever its class overrides
    if kind is tuple or _is_namedtuple(kind):
        return {"t": [to_wire(v, depth + 1) for v in tuple.__iter__(value)]}
    if kind is dict or kind in DICT_TYPES:
        items = dict.items(value)
        return {"d": [[to_wire(k, depth + 1), to_wire(v, depth + 1)] for k, v in items]}
    raise NotPlainData(
        f"a value of type {kind.__name__!r}: only None, bool, int, float, str, list, tuple "
        "(or a namedtuple) and dict (or a Counter, OrderedDict or defaultdict) count"
    )


def _hashable(key: Any) -> bool:
    if type(key) is tuple:
        return all(_hashable(k) for k in key)
    return key is None or type(key) in (bool, int, float, str)


def from_wire(obj: Any, depth: int = 0) -> Any:
    """The Python value of a decoded JSON document in wire form.

    Raises:
        NotPlainData: ``obj`` is not in wire form.
    """
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(obj)
    if obj is None or kind in (bool, int, float, str):
        return obj
    if kind is list:
        return [from_wire(v, depth + 1) for v in obj]
    if kind is dict and len(obj) == 1:
        tag, body = next(iter(obj.items()))
        if tag == "t" and type(body) is list:
            return tuple(from_wire(v, depth + 1) for v in body)
        if tag == "f" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "d" and type(body) is list:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise NotPlainData("a dict entry must be a [key, value] pair")
                key = from_wire(pair[0], depth + 1)
                if not _hashable(key):
                    raise NotPlainData("a dict key must be None, bool, int, float, str or tuple")
                out[key] = from_wire(pair[1], depth + 1)
            return out
    raise NotPlainData("not in the channel's wire form")


def dumps(value: Any) -> str:
    """``value`` as one line of wire JSON.

    Raises:
        NotPlainData: not plain data, or an int too long to write (over 4300 digits).
    """
    try:
        return json.dumps(to_wire(value), separators=(",", ":"), allow_nan=False)
    except NotPlainData:
        raise
    except (ValueError, RecursionError) as err:
        raise NotPlainData(str(err)[:200]) from None


def loads(text: str) -> Any:
    """The value of one line of wire JSON.

    Raises:
        NotPlainData: not JSON, not in wire form, or nested too deep.
    """
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as err:
        raise NotPlainData(f"not JSON: {str(err)[:200]}") from None
    return from_wire(obj)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"bare {name} (non-finite floats travel as tagged objects)")
