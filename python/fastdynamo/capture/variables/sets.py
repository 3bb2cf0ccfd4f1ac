"""Sets made by the frame: constants only (a set of tensors is unsupported), mutated in
place by their methods and in-place operators, rebuilt as a new set on every call.
A set passed in from outside is unsupported (it cannot be guarded by value), a
frozenset is a constant guarded by value.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> s = SetVariable({1})
>>> s.call_method(None, "add", [ConstantVariable(2)], {}).as_python_constant() is None
True
>>> sorted(s.items)
[1, 2]
"""
from __future__ import annotations

from typing import Any

from ...exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable, wrap_constant_result
from .containers import method_of, record_mutation


class SetVariable(VariableTracker):
    """A set of constants."""

    def __init__(self, items: set | frozenset, source=None):
        self.items = set(items)
        self.source = source

    def python_type(self) -> type:
        return set

    def as_python_constant(self) -> Any:
        return set(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return method_of(self, name)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(v) for v in self.items]

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        from .arity import check_arity

        check_arity(set, name, args, kwargs)
        if name in _SET_MUTATORS:
            if self.source is not None:
                raise unsupported(f"mutating {self.source.name()}, a set from outside the frame")
            record_mutation(tx, self)
        const_args = [a.as_python_constant() for a in args]
        try:
            result = getattr(self.items, name)(*const_args)
        except (KeyError, TypeError) as err:  # the eager run raises it
            raise unsupported(f"set.{name}() raised {type(err).__name__}: {err}") from err
        return wrap_constant_result(result)

    def describe(self) -> str:
        return f"SetVariable({sorted(map(repr, self.items))})"


_SET_MUTATORS = frozenset({"add", "update", "discard", "remove", "clear", "pop", "intersection_update",
                           "difference_update", "symmetric_difference_update"})
