"""Python builtins (len, range, isinstance, zip, sum, min/max, getattr...) and the
``operator`` module on symbolic values.

Each modelled builtin has one handler here; a builtin without a handler is called for
real when all its arguments are constants and it is known to be pure, otherwise the
call is unsupported.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> BuiltinVariable(len).call_function(None, [ConstantVariable((1, 2))], {}).as_python_constant()
2
"""
from __future__ import annotations

import builtins
import copy
import functools
import inspect
import itertools
import operator
import weakref
from typing import Any, Callable

from ...exc import unsupported
from .arity import check_call_arity
from .base import CallableVariable, VariableTracker
from .constant import ConstantVariable, constant_call, wrap_constant_result
from .containers import (
    BaseSequenceVariable,
    DictVariable,
    IteratorVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    dict_items,
    hashable,
    iterate,
    snapshot_iterator,
)

# Builtins that are pure on constant arguments.
PURE_BUILTINS = {abs, all, any, bin, bool, chr, divmod, float, format, hash, hex, int, len, max,
                 min, oct, ord, pow, repr, round, sorted, str, sum, tuple, list, dict, set,
                 frozenset, reversed, enumerate, zip, range, slice, isinstance, issubclass,
                 callable, type, complex}

_HANDLERS: dict[Any, Callable] = {}


def handles(*fns):
    def register(handler):
        for fn in fns:
            _HANDLERS[fn] = handler
        return handler
    return register


def is_modelled_builtin(value: Any) -> bool:
    try:
        return value in _HANDLERS or value in PURE_BUILTINS
    except TypeError:
        return False


class BuiltinVariable(CallableVariable):
    """A Python builtin function or type."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        check_call_arity(self.fn, args, kwargs)
        handler = _HANDLERS.get(self.fn)
        if handler is not None:
            result = handler(tx, *args, **kwargs)
            if result is not None:
                return result
        if self.fn in PURE_BUILTINS and all(a.is_python_constant() for a in args) \
                and all(v.is_python_constant() for v in kwargs.values()):
            value = constant_call(self.fn, *[a.as_python_constant() for a in args],
                                  **{k: v.as_python_constant() for k, v in kwargs.items()})
            if isinstance(value, (enumerate, zip, reversed, map, filter)) or type(value).__name__.endswith("iterator"):
                return IteratorVariable([wrap_constant_result(v) for v in value])
            return wrap_constant_result(value)
        raise unsupported(f"builtin {getattr(self.fn, '__name__', self.fn)}() with arguments "
                          f"({', '.join(a.describe() for a in args)})")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if isinstance(self.fn, type) and name == "fromkeys" and self.fn is dict:
            return BuiltinVariable(dict.fromkeys)
        if self.fn is itertools.chain and name == "from_iterable":
            return BuiltinVariable(itertools.chain.from_iterable)
        if isinstance(self.fn, type):
            from .dict_objects import unbound_builtin_method

            unbound = unbound_builtin_method(self.fn, name, getattr(self.fn, name, None))
            if unbound is not None:  # dict.get(d, k), list.__len__(l)
                return unbound
        raise unsupported(f"attribute {name!r} of builtin {self.fn.__name__}")

    def describe(self) -> str:
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"


def _constants(*values: VariableTracker) -> bool:
    return all(v.is_python_constant() for v in values)


@handles(len)
def _len(tx, value, **_):
    from .tensor import TensorVariable

    if isinstance(value, TensorVariable):
        if value.example.dim() == 0:
            raise unsupported("len() of a 0-d tensor")
        return ConstantVariable(value.example.shape[0])
    if isinstance(value, TupleVariable):
        value.check_plain("__len__")
    if isinstance(value, (BaseSequenceVariable, DictVariable)):
        return ConstantVariable(len(value.items))
    if value.is_python_constant():
        return ConstantVariable(constant_call(len, value.as_python_constant()))
    return value.call_method(tx, "__len__", [], {})


@handles(isinstance)
def _isinstance(tx, value, classes, **_):
    cls = classes.as_python_constant()
    # (a bad second argument raises here as in isinstance: the frame raises it as Python)
    if not isinstance(cls, tuple):
        return ConstantVariable(constant_call(issubclass, value.python_type(), cls))
    return ConstantVariable(any(constant_call(issubclass, value.python_type(), c) for c in cls))


@handles(getattr)
def _getattr(tx, obj, name, *default):
    """``getattr(obj, name[, default])``: the default only when the attribute is really
    absent (decided exactly, as ``hasattr``), never because modelling it failed."""
    attr = _attribute_name(name, "getattr")
    from .custom_lookup import customises_lookup, lookup_or_missing

    if customises_lookup(obj):  # the lookup runs once; its AttributeError means absent
        found = lookup_or_missing(tx, obj, attr) if default else obj.var_getattr(tx, attr)
        return found if found is not None else default[0]
    if not _has_attribute(tx, obj, attr):
        if default:
            return default[0]
        raise unsupported(f"{obj.describe()} has no attribute {attr!r} (AttributeError)")
    return obj.var_getattr(tx, attr)


def _has_attribute(tx, obj, attr: str) -> bool:
    from .attributes import has_attribute
    from .tensor import TensorVariable

    if isinstance(obj, TensorVariable):
        return hasattr(obj.example, attr)
    return has_attribute(tx, obj, attr)


def _attribute_name(name: VariableTracker, caller: str) -> str:
    if not name.is_python_constant() or type(name.as_python_constant()) is not str:
        raise unsupported(f"{caller}() with a name that is not a constant string")
    return name.as_python_constant()


@handles(setattr)
def _setattr(tx, obj, name, value):
    obj.store_attr(tx, _attribute_name(name, "setattr"), value)
    return ConstantVariable(None)


@handles(vars)
def _vars(tx, *args):
    if len(args) != 1:
        raise unsupported("vars() without an argument (the frame's locals)")
    return args[0].var_getattr(tx, "__dict__")


@handles(delattr)
def _delattr(tx, obj, name):
    obj.delete_attr(tx, _attribute_name(name, "delattr"))
    return ConstantVariable(None)


@handles(hasattr)
def _hasattr(tx, obj, name):
    return ConstantVariable(_has_attribute(tx, obj, name.as_python_constant()))


@handles(range)
def _range(tx, *args):
    return ConstantVariable(constant_call(range, *[a.as_python_constant() for a in args]))


@handles(iter)
def _iter(tx, value, *sentinel):
    if sentinel:
        raise unsupported("iter(callable, sentinel)")
    return iterate(tx, value)


@handles(next)
def _next(tx, iterator, *default):
    if not isinstance(iterator, IteratorVariable):
        raise unsupported(f"next() on {iterator.describe()}")
    item = iterator.next_item(tx)
    if item is None:
        if default:
            return default[0]
        raise unsupported("StopIteration from next()")
    return item


@handles(enumerate)
def _enumerate(tx, iterable=None, start=None, **kwargs):
    from .iterators import EnumerateVariable

    iterable = iterable if iterable is not None else kwargs["iterable"]
    first = start.as_python_constant() if start is not None else 0
    if type(first) is not int:
        raise unsupported(f"enumerate() start of type {type(first).__name__}")
    return EnumerateVariable(iterate(tx, iterable), first)


@handles(zip)
def _zip(tx, *iterables, strict=None):
    from .iterators import ZipVariable

    return ZipVariable([iterate(tx, it) for it in iterables],
                       strict=bool(strict.truth(tx)) if strict is not None else False)


@handles(map)
def _map(tx, fn, *iterables):
    from .iterators import MapVariable

    return MapVariable(fn, [iterate(tx, it) for it in iterables])


@handles(filter)
def _filter(tx, fn, iterable):
    from .iterators import FilterVariable

    return FilterVariable(fn, iterate(tx, iterable))


@handles(reversed)
def _reversed(tx, value):
    return snapshot_iterator(list(reversed(value.unpack_var_sequence(tx))), [value])


@handles(sorted)
def _sorted(tx, iterable, *, key=None, reverse=None):
    """``sorted`` of constants, or of any values by a key function the trace calls on each
    one (a lambda, ``operator.itemgetter``...) whose results are constants; the sort itself
    is Python's, so its order (stable, ``reverse`` too) and its errors are eager's."""
    from .dict_views import unordered_items

    backwards = bool(reverse.as_python_constant()) if reverse is not None else False
    if key is None or (key.is_python_constant() and key.as_python_constant() is None):
        values = [item.as_python_constant() for item in unordered_items(tx, iterable)]
        return ListVariable([wrap_constant_result(v) for v in constant_call(sorted, values, reverse=backwards)])
    items = iterable.unpack_var_sequence(tx)
    keys = [key.call_function(tx, [item], {}) for item in items]
    if not all(k.is_python_constant() for k in keys):
        raise unsupported("sorted() by a key that is not a constant (a tensor, a symbolic size)")
    values = [k.as_python_constant() for k in keys]
    order = constant_call(sorted, range(len(items)), key=values.__getitem__, reverse=backwards)
    return ListVariable([items[i] for i in order])


@handles(list)
def _list(tx, iterable=None):
    return ListVariable(iterable.unpack_var_sequence(tx) if iterable is not None else [])


@handles(tuple)
def _tuple(tx, iterable=None):
    return TupleVariable(iterable.unpack_var_sequence(tx) if iterable is not None else [])


@handles(dict)
def _dict(tx, *args, **kwargs):
    items = dict_items(tx, args[0]) if args else {}
    items.update(kwargs)
    return DictVariable(items)


@handles(set)
def _set(tx, iterable=None):
    from .dict_views import unordered_items

    items = unordered_items(tx, iterable) if iterable is not None else []
    return SetVariable({hashable(i) for i in items})


@handles(sum)
def _sum(tx, iterable, start=None):
    from ..operators import binary_op

    total = start if start is not None else ConstantVariable(0)
    if start is not None and issubclass(start.python_type(), (str, bytes, bytearray)):
        raise unsupported(f"sum() of {start.python_type().__name__} (TypeError: sum() can't sum them)")
    for item in iterable.unpack_var_sequence(tx):
        total = binary_op(tx, operator.add, total, item)
    return total


def _min_max(python_fn, torch_name):
    def handler(tx, *args, **kwargs):
        from .dict_views import unordered_items
        from .tensor import TensorVariable

        items = unordered_items(tx, args[0]) if len(args) == 1 and not kwargs else \
            args[0].unpack_var_sequence(tx) if len(args) == 1 else list(args)
        if kwargs:
            raise unsupported(f"{python_fn.__name__}() with keyword arguments")
        if any(isinstance(i, TensorVariable) for i in items):
            if len(items) == 2 and all(isinstance(i, TensorVariable) for i in items):
                import torch

                return tx.output.record_call("call_function", getattr(torch, torch_name), items, {})
            raise unsupported(f"{python_fn.__name__}() over tensors (data-dependent)")
        values = [i.as_python_constant() for i in items]
        # one iterable argument: its items as Python's one-argument form sees them (an
        # empty one raises there), else the arguments themselves
        return wrap_constant_result(constant_call(python_fn, values) if len(args) == 1
                                    else constant_call(python_fn, *values))
    return handler


handles(min)(_min_max(min, "minimum"))
handles(max)(_min_max(max, "maximum"))


@handles(abs)
def _abs(tx, value):
    from ..operators import unary_op

    return unary_op(tx, operator.abs, value)


@handles(any)
def _any(tx, iterable):
    # pulls one item at a time and stops at the first true one, as CPython does
    iterator = iterate(tx, iterable)
    return ConstantVariable(any(item.truth(tx) for item in iter(lambda: iterator.next_item(tx), None)))


@handles(all)
def _all(tx, iterable):
    iterator = iterate(tx, iterable)
    return ConstantVariable(all(item.truth(tx) for item in iter(lambda: iterator.next_item(tx), None)))


@handles(bool)
def _bool(tx, value=None):
    return ConstantVariable(False if value is None else value.truth(tx))


@handles(int, float, complex)
def _scalar(tx, *args):
    from .tensor import TensorVariable

    if any(isinstance(a, TensorVariable) for a in args):
        raise unsupported("converting a tensor to a Python number (data-dependent)")
    return None  # constants: the pure path computes it


@handles(type)
def _type(tx, value, *rest):
    if rest:
        raise unsupported("type() with three arguments")
    from .attributes import class_source_of
    from .misc import ClassVariable

    return ClassVariable(value.python_type(), class_source_of(value))


@handles(print)
def _print(tx, *args, **kwargs):
    raise unsupported("print() has effects outside the graph")


@handles(id)
def _id(tx, value):
    from .identity import identity_of

    return ConstantVariable(identity_of(tx, value))


@handles(callable)
def _callable(tx, value):
    """``callable(v)`` is ``type(v)`` having ``__call__`` on its MRO (``tp_call``): read
    from the value's exact type, which its guards fix."""
    from .attributes import MISSING, type_lookup

    if value.is_python_constant():
        return ConstantVariable(callable(value.as_python_constant()))
    return ConstantVariable(type_lookup(value.python_type(), "__call__") is not MISSING)


@handles(super)
def _super(tx, *args):
    from .super_variable import make_super

    return make_super(tx, list(args))


@handles(weakref.ref)
def _weakref(tx, *args, **kwargs):
    from .user_objects import make_weakref

    return make_weakref(tx, list(args), kwargs)


@handles(copy.copy)
def _copy(tx, value):
    from .copies import copy_value

    return copy_value(tx, value)


@handles(copy.deepcopy)
def _deepcopy(tx, value, memo=None):
    from .copies import deepcopy_value

    if memo is not None and not (memo.is_python_constant() and memo.as_python_constant() is None):
        raise unsupported("copy.deepcopy with a memo")
    return deepcopy_value(tx, value)


@handles(inspect.signature)
def _signature(tx, obj, **options):
    from .signatures import signature_of

    if options:
        raise unsupported(f"inspect.signature with {', '.join(options)}")
    return signature_of(tx, obj)


@handles(functools.update_wrapper)
def _update_wrapper(tx, wrapper, wrapped, assigned=None, updated=None):
    from .functions import update_wrapper

    assigned_names = assigned.as_python_constant() if assigned is not None else functools.WRAPPER_ASSIGNMENTS
    updated_names = updated.as_python_constant() if updated is not None else functools.WRAPPER_UPDATES
    return update_wrapper(tx, wrapper, wrapped, assigned_names, updated_names)


@handles(functools.partial)
def _partial(tx, fn, *args, **kwargs):
    from .functions import PartialVariable

    return PartialVariable(fn, list(args), kwargs)


def _bound_checked(fn, handler):
    """``handler`` called only with arguments its signature (CPython's) accepts."""
    signature = inspect.signature(handler)

    def checked(tx, *args, **kwargs):
        try:
            signature.bind(tx, *args, **kwargs)
        except TypeError as err:
            raise unsupported(f"{fn.__qualname__}(): {err} (TypeError in Python)") from err
        return handler(tx, *args, **kwargs)
    return checked


def _register_itertools() -> None:
    from .collections_ import HANDLERS as COLLECTIONS
    from .itertools_ import HANDLERS

    handlers: dict[Any, Callable] = {**HANDLERS, **COLLECTIONS}
    for fn, handler in handlers.items():
        handles(fn)(_bound_checked(fn, handler))


_register_itertools()


class OperatorVariable(VariableTracker):
    """A function of the ``operator`` module: symbolic operands go through the same
    machinery as the bytecode operators."""

    def __init__(self, fn: Callable, source=None):
        self.fn = fn
        self.source = source

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from .. import operators as ops

        fn = self.fn
        if kwargs:
            raise unsupported(f"operator.{fn.__name__} with keyword arguments")
        if fn is operator.getitem:
            return ops.getitem(tx, *args)
        if fn is operator.setitem:
            ops.setitem(tx, *args)
            return ConstantVariable(None)
        if fn in (operator.is_, operator.is_not):
            if len(args) != 2:
                raise unsupported(f"operator.{fn.__name__} takes 2 arguments (TypeError)")
            same = ops.is_same(args[0], args[1], tx)
            return ConstantVariable(same if fn is operator.is_ else not same)
        if fn is operator.not_:
            return ConstantVariable(not args[0].truth(tx))
        if fn is operator.truth:
            return ConstantVariable(args[0].truth(tx))
        if fn is operator.contains:
            return ConstantVariable(ops.contains_op(tx, args[1], args[0]))
        if fn in ops.COMPARE_OPERATORS.values():
            return ops.compare_op(tx, fn, *args)
        if fn in (operator.neg, operator.pos, operator.invert, operator.abs, operator.inv) and len(args) == 1:
            return ops.unary_op(tx, fn, args[0])
        if len(args) == 2 and fn in ops.BINARY_OPERATORS.values():
            return ops.binary_op(tx, fn, *args)
        if all(a.is_python_constant() for a in args):
            return wrap_constant_result(fn(*[a.as_python_constant() for a in args]))
        raise unsupported(f"operator.{fn.__name__} on symbolic values")

    def describe(self) -> str:
        return f"OperatorVariable({self.fn.__name__})"


_ = builtins
