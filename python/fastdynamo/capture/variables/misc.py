"""Python modules, classes and plain user objects seen during tracing.

>>> import math
>>> PythonModuleVariable(math).describe()
'PythonModuleVariable(math)'
"""
from __future__ import annotations

import types
from typing import Any

from ...exc import unsupported
from ...guards import type_is
from ...guards.sources import AttrSource
from .base import VariableTracker

# Modules whose members are trusted not to be monkey-patched: their attributes are
# wrapped without a source (no guard per function on every call).
TRUSTED_MODULE_PREFIXES = ("torch", "math", "operator", "functools", "builtins", "itertools",
                           "collections", "typing", "numbers")


def is_trusted_module(name: str) -> bool:
    return name.split(".")[0] in TRUSTED_MODULE_PREFIXES


class PythonModuleVariable(VariableTracker):
    """A module object such as ``torch``, ``math`` or a user module."""

    def __init__(self, module: types.ModuleType, source=None):
        self.module = module
        self.source = source

    def python_type(self) -> type:
        return types.ModuleType

    def as_python_constant(self) -> Any:
        return self.module

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..builder import wrap_value

        try:
            value = getattr(self.module, name)
        except AttributeError as err:
            raise unsupported(f"module {self.module.__name__} has no attribute {name!r}") from err
        trusted = is_trusted_module(self.module.__name__)
        source = None if trusted or self.source is None else AttrSource(self.source, name)
        return wrap_value(tx, value, source)

    def describe(self) -> str:
        return f"PythonModuleVariable({self.module.__name__})"


class ClassVariable(VariableTracker):
    """A class used as a value (``isinstance`` argument, namedtuple constructor...)."""

    def __init__(self, cls: type, source=None):
        self.cls = cls
        self.source = source

    def python_type(self) -> type:
        return type(self.cls)

    def as_python_constant(self) -> Any:
        return self.cls

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from .constant import wrap_constant_result
        from .containers import TupleVariable

        if issubclass(self.cls, tuple) and hasattr(self.cls, "_fields"):
            values = list(args) + [kwargs[f] for f in self.cls._fields[len(args):] if f in kwargs]
            return TupleVariable(values, tuple_type=self.cls)
        constant_args = all(a.is_python_constant() for a in args)
        if issubclass(self.cls, BaseException) and constant_args and not kwargs:
            # raising it breaks the graph; the instance is made by the rewritten code
            return ExceptionVariable(self.cls, [a.as_python_constant() for a in args])
        if self.cls in (slice, range, complex) and constant_args:
            return wrap_constant_result(self.cls(*[a.as_python_constant() for a in args]))
        raise unsupported(f"constructing an instance of {self.cls.__qualname__}")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..builder import wrap_value

        value = getattr(self.cls, name)
        if isinstance(value, (types.FunctionType, staticmethod, classmethod, property)):
            raise unsupported(f"class attribute {self.cls.__qualname__}.{name}")
        return wrap_value(tx, value, AttrSource(self.source, name) if self.source else None)

    def describe(self) -> str:
        return f"ClassVariable({self.cls.__qualname__})"


class ExceptionVariable(VariableTracker):
    """``SomeError(*constant args)`` made by the frame: only ever raised (a graph break),
    so it is rebuilt by calling the class again."""

    def __init__(self, cls: type, args: list):
        self.cls = cls
        self.args = args

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__name__}({', '.join(repr(a) for a in self.args)})"


class UserObjectVariable(VariableTracker):
    """An instance of a user class: data attributes are read for real and guarded on
    their source; methods are inlined with ``self`` bound. Attribute stores are side
    effects (:mod:`fastdynamo.capture.side_effects`), seen by later reads."""

    def __init__(self, value: Any, source=None):
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..builder import wrap_value
        from .functions import UserFunctionVariable, UserMethodVariable

        pending = tx.output.side_effects.load_attr(self.value, name)
        if pending is not None:
            return pending  # the instance dict wins over non-data descriptors (methods)
        cls = type(self.value)
        class_attr = _lookup_class(cls, name)
        if isinstance(class_attr, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(class_attr), self)
        if isinstance(class_attr, property) and isinstance(class_attr.fget, types.FunctionType):
            return UserFunctionVariable(class_attr.fget).call_function(tx, [self], {})
        if class_attr is not None and not _is_plain_data(class_attr) and name not in getattr(self.value, "__dict__", {}):
            raise unsupported(f"attribute {cls.__qualname__}.{name} of kind {type(class_attr).__name__}")
        if self.source is None:
            raise unsupported(f"attribute {name!r} of an object built during the trace")
        try:
            value = getattr(self.value, name)
        except AttributeError as err:
            raise unsupported(f"{cls.__qualname__} object has no attribute {name!r}") from err
        return wrap_value(tx, value, AttrSource(self.source, name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        from ..side_effects import where_of

        cls = type(self.value)
        if self.source is None:
            raise unsupported(f"assignment to attribute {name!r} of an object without a source")
        if cls.__setattr__ is not object.__setattr__ or cls.__getattribute__ is not object.__getattribute__:
            raise unsupported(f"assignment to {cls.__qualname__}.{name}: the class customises "
                              "attribute access (side effect)")
        if is_data_descriptor(_lookup_class(cls, name)) or not hasattr(self.value, "__dict__"):
            raise unsupported(f"assignment to {cls.__qualname__}.{name}, a descriptor or slot "
                              "(side effect)")
        tx.output.side_effects.store_attr(self, self.value, name, value, where=where_of(tx))

    def describe(self) -> str:
        return f"UserObjectVariable({type(self.value).__qualname__})"


def _lookup_class(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _is_plain_data(value: Any) -> bool:
    return not hasattr(type(value), "__get__")


def is_data_descriptor(value: Any) -> bool:
    """A class attribute that intercepts assignment (property, slot, ``__dict__``)."""
    return hasattr(type(value), "__set__") or hasattr(type(value), "__delete__")


def guard_object_type(tx, value: Any, source) -> None:
    if source is not None:
        tx.output.add_guard(source, type_is(type(value)))
