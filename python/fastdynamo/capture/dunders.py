"""Operators as CPython runs them on tuples, lists and user objects: a tuple subclass's
or a user class's own dunder (``__add__``, ``__eq__``, ... of a ``typing.NamedTuple``,
a namedtuple subclass or any class of the user's) is called, in CPython's order (a right operand whose type is a subclass of the left's and
overrides the reflected method goes first; ``NotImplemented`` tries the other side), and
sequences compare item by item with the identity shortcut (``(x,) == (x,)`` holds for a
tensor ``x`` without calling ``Tensor.__eq__``).

>>> import operator
>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> from fastdynamo.capture.variables.containers import TupleVariable
>>> one = ConstantVariable(1)
>>> compare_sequences(None, operator.lt, TupleVariable([one]), TupleVariable([one, one])).value
True
"""
from __future__ import annotations

import operator
import types
from collections.abc import Callable
from typing import Any

import torch

from ..exc import unsupported
from ..guards import id_is
from ..guards.sources import AttrSource, Source, TypeSource
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable
from .variables.containers import BaseSequenceVariable, ListVariable, TupleVariable
from .variables.misc import UserObjectVariable
from .variables.tensor import TensorVariable
from .variables.user_objects import NewObjectVariable

# operator function -> (method, reflected method)
_BINARY_NAMES: dict[Callable, tuple[str, str]] = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"), operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.truediv: ("__truediv__", "__rtruediv__"), operator.floordiv: ("__floordiv__", "__rfloordiv__"),
    operator.mod: ("__mod__", "__rmod__"), operator.pow: ("__pow__", "__rpow__"),
    operator.lshift: ("__lshift__", "__rlshift__"), operator.rshift: ("__rshift__", "__rrshift__"),
    operator.and_: ("__and__", "__rand__"), operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"),
}
_INPLACE = {
    operator.iadd: (operator.add, "__iadd__"), operator.isub: (operator.sub, "__isub__"),
    operator.imul: (operator.mul, "__imul__"), operator.imatmul: (operator.matmul, "__imatmul__"),
    operator.itruediv: (operator.truediv, "__itruediv__"),
    operator.ifloordiv: (operator.floordiv, "__ifloordiv__"), operator.imod: (operator.mod, "__imod__"),
    operator.ipow: (operator.pow, "__ipow__"), operator.ilshift: (operator.lshift, "__ilshift__"),
    operator.irshift: (operator.rshift, "__irshift__"), operator.iand: (operator.and_, "__iand__"),
    operator.ior: (operator.or_, "__ior__"), operator.ixor: (operator.xor, "__ixor__"),
}
# comparison -> (method, the reflected comparison's method)
_COMPARE_NAMES = {
    operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"), operator.le: ("__le__", "__ge__"),
    operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__"),
}


def _owner_class(value: VariableTracker) -> tuple[type, Source | None, type] | None:
    """(class, where the rewritten code finds it, the built-in base whose methods are not
    the user's) for a value whose type may define its own dunders."""
    if isinstance(value, TupleVariable) and value.tuple_type is not tuple:
        from .variables.attributes import class_source_of

        return value.tuple_type, class_source_of(value), tuple
    if isinstance(value, UserObjectVariable):
        return (type(value.value), TypeSource(value.source) if value.source is not None else None,
                getattr(value, "base", object))  # a dict subclass: dict's methods are not the user's
    if isinstance(value, NewObjectVariable):
        return value.cls, value.class_source, getattr(value, "base", object)  # dict subclasses: dict's
    return None


# torch.Size's C methods that are tuple concatenation and repetition giving a Size.
_SIZE_SEQUENCE_OPS = frozenset({"__add__", "__radd__", "__mul__", "__rmul__"})


def user_method(tx, value: VariableTracker, name: str) -> tuple[Any, Source | None] | None:
    """``(function, source)`` of ``type(value).name`` when a tuple subclass or a user
    class defines it (above ``tuple``/``object`` in the MRO), guarded by identity where
    the class has a source; None when the built-in behaviour applies. Other kinds of
    attribute (a C method, a descriptor) are unsupported."""
    owner = _owner_class(value)
    if owner is None:
        return None
    from .variables.attributes import MISSING, own_class_attribute

    cls, class_source, base = owner
    if cls is torch.Size and name in _SIZE_SEQUENCE_OPS:
        return None  # a Size from + and * (operators._sequence_like)
    found = own_class_attribute(cls, name, base)
    if found is MISSING:
        _guard_builtin_slot(tx, cls, class_source, name)
        return None
    if not isinstance(found, types.FunctionType):
        raise unsupported(f"{cls.__qualname__}.{name} of kind {type(found).__name__}")
    source = AttrSource(class_source, name) if class_source is not None else None
    if source is not None and tx is not None:
        tx.output.add_guard(source, id_is(found))
    return found, source


def _guard_builtin_slot(tx, cls: type, class_source: Source | None, name: str) -> None:
    """The built-in behaviour applied because no user class defines ``name``: a class
    that defines it after the trace must not reuse the entry."""
    from .variables.attributes import MISSING, guard_type_lacks, type_lookup

    if tx is None or class_source is None:
        return
    builtin = type_lookup(cls, name)
    if builtin is MISSING:
        guard_type_lacks(tx, class_source, name)
    else:
        tx.output.add_guard(AttrSource(class_source, name), id_is(builtin))


def call_special(tx, value: VariableTracker, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``type(value).name(value, *args, **kwargs)`` (``obj[i]``, ``obj(...)``, ``len(obj)``)
    for a user object; unsupported when its class does not define ``name`` in Python."""
    found = user_method(tx, value, name)
    if found is None:
        raise unsupported(f"{name} of {value.describe()} (not defined by its class in Python)")
    return _inline(tx, found, [value, *args], kwargs)


def _inline(tx, found: tuple[Any, Source | None], args: list, kwargs: dict | None = None) -> VariableTracker:
    from .variables.functions import UserFunctionVariable

    fn, source = found
    return UserFunctionVariable(fn, source).call_function(tx, args, kwargs or {})


def _operand_method(tx, value: VariableTracker, name: str):
    """What runs for ``name`` on this operand: its class's own method; for ``__ne__``
    inherited from ``object``, ``object.__ne__``, which inverts the class's own
    ``__eq__`` (an ``("invert", found)`` pair); None for the built-in behaviour."""
    found = user_method(tx, value, name)
    if found is not None or name != "__ne__":
        return found
    owner = _owner_class(value)
    if owner is None or owner[2] is not object:
        return None  # a built-in base's __ne__ (tuple's) never asks __eq__
    from .variables.attributes import type_lookup

    if type_lookup(owner[0], "__ne__") is not object.__ne__:
        return None
    equal = user_method(tx, value, "__eq__")
    return ("invert", equal) if equal is not None else None


def _call(tx, found, args: list[VariableTracker]) -> VariableTracker | None:
    """Inline ``fn(*args)``; None when it returned ``NotImplemented``."""
    if isinstance(found[0], str):  # ("invert", found): object.__ne__ over __eq__
        equal = _call(tx, found[1], args)
        return None if equal is None else ConstantVariable(not equal.truth(tx))
    result = _inline(tx, found, args)
    if result.is_python_constant() and result.as_python_constant() is NotImplemented:
        return None
    return result


# A tensor operand converts objects that have these (numbers, sequences, arrays,
# __torch_function__) instead of returning NotImplemented: not modelled.
_TENSOR_CONVERTS = ("__torch_function__", "__float__", "__int__", "__index__", "__complex__",
                    "__array__", "__len__", "__getitem__", "__iter__")


def _tensor_would_convert(value: VariableTracker) -> bool:
    owner = _owner_class(value)
    return owner is not None and any(hasattr(owner[0], name) for name in _TENSOR_CONVERTS)


def _dispatch(tx, left, right, method: str, reflected: str) -> VariableTracker | None:
    """CPython's binary-operator order over the operands' own Python methods."""
    if (isinstance(left, TensorVariable) and _tensor_would_convert(right)) or \
            (isinstance(right, TensorVariable) and _tensor_would_convert(left)):
        raise unsupported(f"{method} between a tensor and {right.describe()} that torch may convert")
    forward = _operand_method(tx, left, method)
    backward = None
    if _type_of(right) is not _type_of(left):
        backward = _operand_method(tx, right, reflected)
    calls = [(forward, [left, right]), (backward, [right, left])]
    if backward is not None and _is_proper_subclass(right, left):
        calls.reverse()
    for found, args in calls:
        if found is not None:
            result = _call(tx, found, args)
            if result is not None:
                return result
    return None


def user_binary_op(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """``op(left, right)`` through a tuple subclass's own dunders, or None (built-in
    behaviour applies)."""
    if not (_custom(left) or _custom(right)):
        return None
    if op in _INPLACE:
        plain, inplace = _INPLACE[op]
        found = user_method(tx, left, inplace)
        if found is not None:
            result = _call(tx, found, [left, right])
            if result is not None:
                return result
        op = plain
    names = _BINARY_NAMES.get(op)
    return _dispatch(tx, left, right, *names) if names else None


def user_compare_op(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    if not (_custom(left) or _custom(right)):
        return None
    return _dispatch(tx, left, right, *_COMPARE_NAMES[op])


def compare_sequences(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``left <op> right`` for two tuples or two lists (``list_richcompare``,
    ``tuple_richcompare``): items compared with identity first, then ``==``."""
    from .operators import _sequence_items, compare_op, rich_compare_bool

    kinds = {_kind(left), _kind(right)}
    if len(kinds) > 1:  # a list and a tuple: NotImplemented both ways
        if op in (operator.eq, operator.ne):
            return ConstantVariable(op is operator.ne)
        raise unsupported(f"{op.__name__} between a list and a tuple (TypeError in Python)")
    a, b = _sequence_items(left), _sequence_items(right)
    if kinds == {list} and len(a) != len(b) and op in (operator.eq, operator.ne):
        return ConstantVariable(op is operator.ne)
    index = 0
    while index < len(a) and index < len(b) and rich_compare_bool(tx, a[index], b[index]):
        index += 1
    if index >= len(a) or index >= len(b):
        return ConstantVariable(op(len(a), len(b)))
    if op in (operator.eq, operator.ne):
        return ConstantVariable(op is operator.ne)
    return compare_op(tx, op, a[index], b[index])


def _custom(value: VariableTracker) -> bool:
    return _owner_class(value) is not None


def _kind(value: VariableTracker) -> type:
    return list if isinstance(value, ListVariable) or (
        not isinstance(value, BaseSequenceVariable) and type(value.as_python_constant()) is list) else tuple


def _type_of(value: VariableTracker) -> type | None:
    try:
        return value.python_type()
    except Exception:  # noqa: BLE001 - unknown type
        return None


def _is_proper_subclass(right: VariableTracker, left: VariableTracker) -> bool:
    rtype, ltype = _type_of(right), _type_of(left)
    return rtype is not None and ltype is not None and rtype is not ltype and issubclass(rtype, ltype)


__all__ = ["call_special", "compare_sequences", "user_binary_op", "user_compare_op", "user_method"]


def compare_dicts(tx, op: Callable, left, right) -> VariableTracker:
    """``left == right`` / ``!=`` for two dicts (``dict_equal``: same keys, values equal
    with the identity shortcut; two OrderedDicts also compare their order)."""
    import collections

    from .operators import rich_compare_bool

    if op not in (operator.eq, operator.ne):
        raise unsupported(f"{op.__name__} between dicts (TypeError in Python)")
    a, b = left.items, right.items
    equal = len(a) == len(b) and all(k in b and rich_compare_bool(tx, v, b[k]) for k, v in a.items())
    ordered = collections.OrderedDict
    if equal and issubclass(left.python_type(), ordered) and issubclass(right.python_type(), ordered):
        equal = list(a) == list(b)
    return ConstantVariable(equal if op is operator.eq else not equal)
