"""Python values fully known at trace time: numbers, strings, None, slices, dtypes,
ranges, and the pure functions that compute on them.

Operations on constants are computed for real; the guards that make this valid are
installed by the builder on the constant's source when it was read.

>>> ConstantVariable(2).call_method(None, "__add__", [ConstantVariable(3)], {}).value
5
"""
from __future__ import annotations

import math
import operator
from typing import Any

from ...exc import unsupported
from .base import CallableVariable, VariableTracker
from .symbolic import concrete, has_symbolic, wrap_symbolic

# Types whose methods never mutate the value: calling them for real is safe.
IMMUTABLE_TYPES = (int, float, bool, complex, str, bytes, type(None), slice, range,
                   frozenset, type(Ellipsis), type(NotImplemented))


class ConstantVariable(VariableTracker):
    """A value known at trace time."""

    def __init__(self, value: Any, source=None):
        if has_symbolic(value):
            # Symbolic sizes are SymbolicValues; one that reaches a constant is
            # specialised (a guard on its value), so Python code never sees a symbol.
            value = concrete(value)
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def truth(self, tx) -> bool:
        return bool(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError as err:
            raise unsupported(f"{type(self.value).__name__} has no attribute {name!r}") from err
        if callable(attr):
            return PureFunctionVariable(attr)
        return ConstantVariable(attr)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, (tuple, str, range, frozenset, bytes, list)):
            return [ConstantVariable(v) for v in self.value]
        raise unsupported(f"iterating over {type(self.value).__name__}")

    def describe(self) -> str:
        return f"ConstantVariable({self.value!r})"


class PureFunctionVariable(CallableVariable):
    """A callable without side effects on its arguments (math.*, str methods, pure
    builtins): called for real when every argument is a constant."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if all(a.is_python_constant() for a in args) and all(
                v.is_python_constant() for v in kwargs.values()):
            const_args = [a.as_python_constant() for a in args]
            const_kwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
            return wrap_constant_result(constant_call(self.fn, *const_args, **const_kwargs))
        raise unsupported(f"{_name(self.fn)} called with non-constant arguments")

    def describe(self) -> str:
        return f"PureFunctionVariable({_name(self.fn)})"


def constant_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` run for real on the Python values a trace holds. An exception
    it raises is the user's program's (``max([])``, ``1 < "a"``, ``[1].index(2)``): the frame
    raises it when it runs as Python, so it ends the graph with its reason instead of
    surfacing as a compiler error."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the eager run raises the real error
        raise unsupported(f"{_name(fn)}(...) raised {type(err).__name__}: {err}") from err


def wrap_constant_result(value: Any) -> VariableTracker:
    """Wrap the result of a real call on constants (tuples become TupleVariables so that
    later code can mix them with symbolic items)."""
    from .containers import ListVariable, TupleVariable

    if has_symbolic(value):
        if type(value) in (tuple, list) or _is_size(value):
            items = [wrap_constant_result(v) for v in value]
            if type(value) is list:
                return ListVariable(items)
            if _is_size(value):
                from .symbolic import size_variable

                return size_variable(items)
            return TupleVariable(items)
        return wrap_symbolic(value)
    if isinstance(value, tuple) and type(value) is tuple:
        return TupleVariable([wrap_constant_result(v) for v in value])
    if isinstance(value, list):
        return ListVariable([wrap_constant_result(v) for v in value])
    if type(value) is set:  # mutable: a container the trace owns, rebuilt per call
        from .containers import SetVariable

        return SetVariable(value)
    if type(value) is dict:
        from .containers import DictVariable

        return DictVariable({k: wrap_constant_result(v) for k, v in value.items()})
    return ConstantVariable(value)


def _is_size(value: Any) -> bool:
    import torch

    return type(value) is torch.Size


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


# math and operator functions are pure on constants; operator ones on symbolic values are
# routed to the binary-op machinery by the builtins module.
PURE_MODULES = (math, operator)
