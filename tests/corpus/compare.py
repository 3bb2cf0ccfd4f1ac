"""Run a corpus program eager and compiled on equal fresh arguments and compare results,
argument state afterwards and exceptions (values and types)."""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

import fastdynamo
from fastdynamo.exc import FullGraphError


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, recursively; objects by their attributes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if type(a).__name__ in ("dict_keys", "dict_values", "dict_items"):
        return same(list(a), list(b))
    if isinstance(a, (int, float, str, bool, bytes, type(None), frozenset, set, type)):
        return a == b or (a != a and b != b)
    if isinstance(a, torch.Size):
        return a == b
    if dataclasses.is_dataclass(a):
        return same(dataclasses.asdict(a), dataclasses.asdict(b))
    if hasattr(a, "__dict__"):
        return same(vars(a), vars(b))
    if hasattr(type(a), "__slots__"):
        return all(same(getattr(a, s, None), getattr(b, s, None)) for s in type(a).__slots__)
    return repr(a) == repr(b)


def outcome(fn, args) -> tuple[Any, type | None]:
    try:
        return fn(*args), None
    except Exception as err:  # noqa: BLE001 - compared with the compiled run's
        return None, type(err)


def compare(program, compiled) -> str | None:
    """None when the compiled run matched eager, else what differed."""
    eager_args, compiled_args = program.make_args(), program.make_args()
    expected, expected_error = outcome(program.fn, eager_args)
    actual, actual_error = outcome(compiled, compiled_args)
    if expected_error is not actual_error:
        return f"raised {actual_error}, eager raised {expected_error}"
    if not same(actual, expected):
        return f"returned {actual!r:.200}, eager returned {expected!r:.200}"
    if not same(list(compiled_args), list(eager_args)):
        return "arguments differ after the call"
    return None


def refused_by_fullgraph(program) -> str | None:
    """The reason ``fullgraph=True`` refuses the program, or None if it compiles whole."""
    fastdynamo.reset()
    try:
        fastdynamo.compile(program.fn, backend="eager", fullgraph=True)(*program.make_args())
    except FullGraphError as err:
        return str(err)
    finally:
        fastdynamo.reset()
    return None
