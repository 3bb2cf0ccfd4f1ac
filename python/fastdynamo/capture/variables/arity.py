"""How many arguments, and which keywords, the modelled builtin methods and functions
accept: a call CPython would reject with ``TypeError`` must not succeed in the trace.

A mismatch is :class:`~fastdynamo.exc.Unsupported`: the graph breaks and Python raises
the real error. A modelled method missing from the table is unsupported too, so adding a
method to a container model means adding its row here.

>>> check_arity(dict, "update", [1], {})
>>> check_arity(dict, "update", [1, 2], {})
Traceback (most recent call last):
...
fastdynamo.exc.Unsupported: ...dict.update() takes at most 1 positional argument, got 2 (TypeError in Python)
"""
from __future__ import annotations

import collections
from typing import Any

from ...exc import unsupported

ANY = None  # no upper bound
ANY_KEYWORD = "*"


def _row(low: int, high: int | None, *keywords: str) -> tuple:
    return (low, high, frozenset(keywords))


_SEQUENCE = {
    "__len__": _row(0, 0), "__getitem__": _row(1, 1), "__contains__": _row(1, 1),
    "index": _row(1, 3), "count": _row(1, 1),
}
_LIST = {
    **_SEQUENCE, "append": _row(1, 1), "extend": _row(1, 1), "pop": _row(0, 1), "insert": _row(2, 2),
    "clear": _row(0, 0), "reverse": _row(0, 0), "remove": _row(1, 1), "copy": _row(0, 0),
    "sort": _row(0, 0, "key", "reverse"), "__setitem__": _row(2, 2), "__delitem__": _row(1, 1),
}
_DICT = {
    "keys": _row(0, 0), "values": _row(0, 0), "items": _row(0, 0), "get": _row(1, 2),
    "__getitem__": _row(1, 1), "__contains__": _row(1, 1), "__len__": _row(0, 0), "copy": _row(0, 0),
    "__setitem__": _row(2, 2), "__delitem__": _row(1, 1), "update": _row(0, 1, ANY_KEYWORD),
    "pop": _row(1, 2), "setdefault": _row(1, 2), "clear": _row(0, 0), "popitem": _row(0, 0),
    "__iter__": _row(0, 0), "__reversed__": _row(0, 0),
}
_SET = {
    "__len__": _row(0, 0), "__contains__": _row(1, 1), "__iter__": _row(0, 0), "copy": _row(0, 0),
    "add": _row(1, 1), "discard": _row(1, 1), "remove": _row(1, 1), "clear": _row(0, 0),
    "pop": _row(0, 0), "update": _row(0, ANY), "union": _row(0, ANY), "intersection": _row(0, ANY),
    "difference": _row(0, ANY), "symmetric_difference": _row(1, 1), "issubset": _row(1, 1),
    "issuperset": _row(1, 1), "isdisjoint": _row(1, 1), "intersection_update": _row(0, ANY),
    "difference_update": _row(0, ANY), "symmetric_difference_update": _row(1, 1),
}
_FROZENSET = {name: row for name, row in _SET.items()
              if name in ("__len__", "__contains__", "__iter__", "copy", "union", "intersection",
                          "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint")}
_VIEW = {"__len__": _row(0, 0), "__contains__": _row(1, 1), "__iter__": _row(0, 0),
         "__reversed__": _row(0, 0), "isdisjoint": _row(1, 1)}

_ORDERED_DICT = {**_DICT, "move_to_end": _row(1, 2, "last"), "popitem": _row(0, 1, "last")}
_COUNTER = {**_DICT, "update": _row(0, 1, ANY_KEYWORD), "subtract": _row(0, 1, ANY_KEYWORD),
            "most_common": _row(0, 1), "total": _row(0, 0), "elements": _row(0, 0)}

_DEQUE = {"__len__": _row(0, 0), "__getitem__": _row(1, 1), "__setitem__": _row(2, 2),
          "__contains__": _row(1, 1), "copy": _row(0, 0), "index": _row(1, 3), "count": _row(1, 1),
          "append": _row(1, 1), "appendleft": _row(1, 1), "extend": _row(1, 1), "extendleft": _row(1, 1),
          "pop": _row(0, 0), "popleft": _row(0, 0), "rotate": _row(0, 1), "clear": _row(0, 0),
          "reverse": _row(0, 0)}

METHODS: dict[type, dict[str, tuple]] = {
    collections.deque: _DEQUE,
    collections.OrderedDict: _ORDERED_DICT, collections.Counter: _COUNTER, collections.defaultdict: _DICT,
    list: _LIST, tuple: _SEQUENCE, dict: _DICT, set: _SET, frozenset: _FROZENSET,
    type({}.keys()): _VIEW, type({}.values()): {k: v for k, v in _VIEW.items() if k != "isdisjoint"},
    type({}.items()): _VIEW,
}

# Builtin functions and types whose call is modelled symbolically (their handlers in
# builtins.py); builtins called for real on constants check their arguments themselves.
FUNCTIONS: dict[Any, tuple] = {
    len: _row(1, 1), iter: _row(1, 2), next: _row(1, 2), reversed: _row(1, 1),
    map: _row(2, ANY), filter: _row(2, 2), zip: _row(0, ANY, "strict"),
    enumerate: _row(1, 2, "iterable", "start"), sorted: _row(1, 1, "key", "reverse"),
    list: _row(0, 1), tuple: _row(0, 1), set: _row(0, 1), frozenset: _row(0, 1),
    dict: _row(0, 1, ANY_KEYWORD), sum: _row(1, 2, "start"), any: _row(1, 1), all: _row(1, 1),
    min: _row(1, ANY, "key", "default"), max: _row(1, ANY, "key", "default"),
    abs: _row(1, 1), bool: _row(0, 1), range: _row(1, 3), dict.fromkeys: _row(1, 2),
}


def check_arity(owner: type, name: str, args: list, kwargs: dict) -> None:
    """``owner.name(*args, **kwargs)`` (``self`` not counted) has a shape CPython accepts."""
    row = METHODS.get(_base_type(owner), {}).get(name)
    if row is None:
        raise unsupported(f"{owner.__name__}.{name}() is not modelled")
    _check(f"{owner.__name__}.{name}()", row, args, kwargs)


def check_call_arity(fn: Any, args: list, kwargs: dict) -> None:
    """A call of a builtin in :data:`FUNCTIONS` has a shape CPython accepts."""
    try:
        row = FUNCTIONS.get(fn)
    except TypeError:  # unhashable
        return
    if row is not None:
        _check(f"{getattr(fn, '__qualname__', fn)}()", row, args, kwargs)


def _check(what: str, row: tuple, args: list, kwargs: dict) -> None:
    low, high, keywords = row
    if len(args) < low and not _keywords_fill(low, args, kwargs, keywords):
        raise unsupported(f"{what} takes at least {low} positional argument{'s' * (low != 1)}, "
                          f"got {len(args)} (TypeError in Python)")
    if high is not None and len(args) > high:
        raise unsupported(f"{what} takes at most {high} positional argument{'s' * (high != 1)}, "
                          f"got {len(args)} (TypeError in Python)")
    if ANY_KEYWORD not in keywords:
        for key in kwargs:
            if key not in keywords:
                raise unsupported(f"{what} got an unexpected keyword argument {key!r} (TypeError in Python)")


def _keywords_fill(low: int, args: list, kwargs: dict, keywords: frozenset) -> bool:
    # enumerate(iterable=...) is the one modelled call with a required keyword-capable
    # parameter; everything else is positional-only.
    return "iterable" in keywords and "iterable" in kwargs and len(args) + 1 >= low


def _base_type(owner: type) -> type:
    for base in owner.__mro__:
        if base in METHODS:
            return base
    return owner

