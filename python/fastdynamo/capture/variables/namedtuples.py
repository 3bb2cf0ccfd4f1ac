"""Attributes of namedtuples beyond their fields: ``_fields``, ``_replace(**changes)``,
``_asdict()``, and the methods and properties a ``typing.NamedTuple`` class defines.

``_replace`` and ``_asdict`` are modelled on the items (a new tuple of the same type; a
dict in field order); ``_replace`` with a name that is not a field breaks the graph (a
ValueError in Python). A class's own methods are inlined with the tuple as ``self``,
guarded through the tuple's source where it has one.
"""
from __future__ import annotations

import types

from ...exc import unsupported
from ...guards import id_is
from .attributes import MISSING, method_source, own_class_attribute
from .base import VariableTracker
from .constant import wrap_constant_result


def namedtuple_attribute(tx, value, fields: tuple[str, ...], name: str) -> VariableTracker | None:
    """``value.name`` for a namedtuple ``value`` (a TupleVariable), or None when it is
    not one of these attributes."""
    from .user_objects import ModelledCallVariable

    cls = value.tuple_type
    if name == "_fields":
        return wrap_constant_result(tuple(fields))
    if name == "_replace":
        return ModelledCallVariable(lambda tx, args, kwargs: _replace(value, fields, args, kwargs),
                                    f"{cls.__name__}._replace")
    if name == "_asdict":
        return ModelledCallVariable(lambda tx, args, kwargs: _asdict(value, fields, args, kwargs),
                                    f"{cls.__name__}._asdict")
    found = own_class_attribute(cls, name, tuple)
    if isinstance(found, types.FunctionType):
        return _bound(tx, value, name, found)
    if isinstance(found, property) and isinstance(found.fget, types.FunctionType):
        return _bound(tx, value, name, found.fget).call_function(tx, [], {})
    if found is not MISSING:
        raise unsupported(f"{cls.__qualname__}.{name} of kind {type(found).__name__}")
    return None


def _bound(tx, value, name: str, fn: types.FunctionType) -> VariableTracker:
    from .functions import UserFunctionVariable, UserMethodVariable

    source = method_source(value.source, value.class_source, name)
    if source is not None:
        tx.output.add_guard(source, id_is(fn))
    return UserMethodVariable(UserFunctionVariable(fn, source), value)


def _replace(value, fields: tuple[str, ...], args: list, kwargs: dict) -> VariableTracker:
    from .containers import TupleVariable

    unknown = set(kwargs) - set(fields)
    if args or unknown:
        raise unsupported(f"_replace() with {'positional arguments' if args else sorted(unknown)} "
                          "(TypeError/ValueError in Python)")
    items = [kwargs.get(field, item) for field, item in zip(fields, value.items, strict=True)]
    return TupleVariable(items, tuple_type=value.tuple_type, class_source=value.class_source)


def _asdict(value, fields: tuple[str, ...], args: list, kwargs: dict) -> VariableTracker:
    from .containers import DictVariable

    if args or kwargs:
        raise unsupported("_asdict() takes no arguments (TypeError in Python)")
    return DictVariable(dict(zip(fields, value.items, strict=True)))


__all__ = ["namedtuple_attribute"]
