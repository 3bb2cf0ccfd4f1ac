"""Symbolic sizes during tracing: a ``SymInt`` (or ``SymBool``/``SymFloat``) of the
capture's ShapeEnv, as ``x.shape[0]``, ``x.numel()`` or ``n * 2`` give them.

Only what is modelled stays symbolic: arithmetic and comparisons with ints and other
sizes, truth (``if n > 4``: the ShapeEnv records the condition as a guard), and use as
an argument of a graph op. Everything else takes the value as a Python constant, which
specialises it (``int(s)`` records ``s == value``): correct for every size the guards
admit, never a symbol leaking into Python code.

>>> concrete((3, "a"))
(3, 'a')
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from ...exc import unsupported
from .base import VariableTracker

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PYTHON_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}
# Operators a symbolic size takes part in without being specialised.
ARITHMETIC = frozenset({operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                        operator.truediv, operator.pow, operator.iadd, operator.isub, operator.imul,
                        operator.ifloordiv, operator.imod, operator.itruediv, operator.ipow,
                        operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
                        operator.neg, operator.pos})
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
            operator.itruediv: operator.truediv, operator.ipow: operator.pow}


class SymbolicValue(VariableTracker):
    """A symbolic number; ``sym`` is the SymInt/SymFloat/SymBool."""

    def __init__(self, sym: Any):
        self.sym = sym

    def python_type(self) -> type:
        return _PYTHON_TYPES[type(self.sym)]

    def is_python_constant(self) -> bool:
        return True  # it can be one, at the cost of a guard (as_python_constant)

    def as_python_constant(self) -> Any:
        return concrete(self.sym)

    def graph_arg(self, fake: bool) -> Any:
        return self.sym  # nodes: OutputGraph turns it into sym_size arithmetic

    def truth(self, tx) -> bool:
        return bool(self.sym)  # the ShapeEnv records the condition the trace took

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .constant import ConstantVariable

        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def describe(self) -> str:
        return f"SymbolicValue({self.sym})"


def symbolic_op(op: Any, operands: list[VariableTracker]) -> VariableTracker | None:
    """``op(*operands)`` kept symbolic, or None when it is not modelled (the caller then
    uses the operands as constants)."""
    from .constant import ConstantVariable

    if op not in ARITHMETIC or not any(isinstance(v, SymbolicValue) for v in operands):
        return None
    values = []
    for v in operands:
        if isinstance(v, SymbolicValue):
            values.append(v.sym)
        elif isinstance(v, ConstantVariable) and type(v.value) in (int, float, bool):
            values.append(v.value)
        else:
            return None
    try:
        result = _INPLACE.get(op, op)(*values)
    except Exception as err:  # noqa: BLE001 - the eager run raises the real error
        raise unsupported(f"{op.__name__} on sizes raised {type(err).__name__}: {err}") from err
    return wrap_symbolic(result)


def wrap_symbolic(value: Any) -> VariableTracker:
    """A symbolic number as SymbolicValue (a constant when the ShapeEnv knows it)."""
    from .constant import ConstantVariable

    if isinstance(value, _SYMBOLIC):
        if value.node.expr.is_number:
            return ConstantVariable(concrete(value))
        return SymbolicValue(value)
    return ConstantVariable(value)


def concrete(value: Any) -> Any:
    """``value`` with every symbolic number replaced by its example value (which records
    a guard that it keeps that value)."""
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    if isinstance(value, torch.Size):
        return torch.Size([concrete(v) for v in value])
    if type(value) in (tuple, list):
        return type(value)(concrete(v) for v in value)
    return value


def has_symbolic(value: Any) -> bool:
    """Whether ``value`` holds a symbolic number (also inside tuples, lists, slices, dicts)."""
    if isinstance(value, _SYMBOLIC):
        return True
    if isinstance(value, (tuple, list)):
        return any(has_symbolic(v) for v in value)
    if isinstance(value, slice):
        return has_symbolic((value.start, value.stop, value.step))
    if isinstance(value, dict):
        return has_symbolic(list(value.values()))
    return False


def size_variable(items: list[VariableTracker]) -> VariableTracker:
    """A ``torch.Size`` with symbolic items (``x.shape``)."""
    from .containers import TupleVariable

    class SizeVariable(TupleVariable):
        """torch.Size: a tuple whose slices are Sizes; ``numel()`` stays symbolic; any
        other method is called on the concrete Size (specialised)."""

        def __init__(self, items, source=None, tuple_type: type = torch.Size):
            super().__init__(items, source, tuple_type=torch.Size)

        def check_plain(self, *names: str) -> None:
            return None  # Size's overrides keep tuple semantics (slices are Sizes)

        def call_method(self, tx, name, args, kwargs) -> VariableTracker:
            if name == "numel" and not args and not kwargs:
                result: VariableTracker = wrap_symbolic(1)
                for item in self.items:
                    result = symbolic_op(operator.mul, [result, item]) or wrap_symbolic(
                        result.as_python_constant() * item.as_python_constant())
                return result
            if name in ("__len__", "__getitem__", "__contains__", "index", "count"):
                return super().call_method(tx, name, args, kwargs)
            from .constant import ConstantVariable

            return ConstantVariable(self.as_python_constant()).call_method(tx, name, args, kwargs)

        def var_getattr(self, tx, name: str) -> VariableTracker:
            from .base import MethodCallVariable

            return MethodCallVariable(self, name)

        def describe(self) -> str:
            return f"SizeVariable(len={len(self.items)})"

    return SizeVariable(items)


class SymbolicSlice(VariableTracker):
    """``a:b:c`` with a symbolic bound: symbolic as a graph op's index (``x[:, :n - 1]``),
    specialised anywhere else (a list slice)."""

    def __init__(self, parts: list[VariableTracker]):
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def as_python_constant(self) -> Any:
        return slice(*[p.as_python_constant() for p in self.parts])

    def is_python_constant(self) -> bool:
        return True

    def graph_arg(self, fake: bool) -> Any:
        return slice(*[p.graph_arg(fake) for p in self.parts])

    def describe(self) -> str:
        return "SymbolicSlice"
