"""Calls, subscripts and ``len()`` of user objects, through their class's own special
methods (``__call__``, ``__getitem__``, ``__len__``), as CPython looks them up: on the
type, never on the instance. A class that does not define one in Python breaks the
graph.
"""
from __future__ import annotations

from ...exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable


class SpecialMethodCalls(VariableTracker):
    """Mixed into the trackers of user objects."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from ..dunders import call_special

        return call_special(tx, self, "__call__", args, kwargs)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        from ..dunders import call_special

        return call_special(tx, self, "__getitem__", [index], {})

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        from .user_iteration import iterate_user_object

        return iterate_user_object(tx, self).unpack_var_sequence(tx)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        from ..dunders import call_special

        if name != "__len__" or args or kwargs:
            raise unsupported(f"{name}() of {self.describe()}")
        length = call_special(tx, self, "__len__", [], {})
        value = length.as_python_constant() if length.is_python_constant() else None
        if type(value) is not int or value < 0:
            raise unsupported("__len__ returned something other than an int >= 0 (TypeError/ValueError)")
        return ConstantVariable(value)
