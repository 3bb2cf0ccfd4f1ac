"""Classes that customise attribute lookup, as CPython runs them.

A class whose ``__getattribute__`` is a Python function (Hugging Face's
``PreTrainedConfig`` maps ``hidden_size`` to ``n_embd`` through its ``attribute_map``)
gets it inlined for every ``obj.name`` (guarded by identity through
``type(obj).__getattribute__``); ``super().__getattribute__(name)`` and
``object.__getattribute__(obj, name)`` reaching ``object`` run the generic lookup
(:func:`.attributes.generic_getattr`), whose values are read again through
``object.__getattribute__`` too (:class:`~fastdynamo.guards.sources.GenericAttrSource`),
so a guard never runs the class's own lookup. An ``AttributeError`` raised inside is an
exception of the trace: ``__getattr__`` is then called (``slot_tp_getattr_hook``),
``hasattr`` answers False and ``getattr(obj, name, default)`` gives the default.
``obj.__dict__`` reached by the generic lookup is a read-only view
(:class:`InstanceDictView`).

>>> from fastdynamo.capture.opcodes.exceptions import RaisedInTrace
>>> try:
...     raise_attribute_error(int, "x")
... except RaisedInTrace as raised:
...     print(raised.exception.cls.__name__, raised.exception.args)
AttributeError ["'int' object has no attribute 'x'"]
"""
from __future__ import annotations

import types
from typing import NoReturn

from ...exc import unsupported
from ...guards import id_is
from ...guards.sources import ItemSource, Source
from .attributes import (
    MISSING,
    guard_key,
    has_custom_getattribute,
    is_data_descriptor,
    method_source,
    type_lookup,
)
from .base import MethodCallVariable, VariableTracker
from .constant import ConstantVariable


def raise_attribute_error(cls: type, name: str) -> NoReturn:
    """``AttributeError`` raised in the trace (handled there, or a graph break)."""
    raise_in_trace(AttributeError, f"'{cls.__name__}' object has no attribute '{name}'")


def raise_in_trace(cls: type[BaseException], *args) -> NoReturn:
    """``raise cls(*args)`` in the traced code, at the running instruction."""
    from ..opcodes.exceptions import RaisedInTrace
    from .misc import ExceptionVariable

    raise RaisedInTrace(ExceptionVariable(cls, list(args)))


def call_custom_getattribute(tx, owner: VariableTracker, cls: type, name: str,
                             class_source: Source | None) -> VariableTracker:
    """``type(obj).__getattribute__(obj, name)`` for a class that defines it in Python,
    inlined and guarded by identity (replacing the method recompiles)."""
    from .functions import UserFunctionVariable

    getattribute = type_lookup(cls, "__getattribute__")
    if not isinstance(getattribute, types.FunctionType):
        raise unsupported(f"{cls.__qualname__} customises __getattribute__ "
                          f"(a {type(getattribute).__name__}, not a Python function)")
    source = method_source(None, class_source, "__getattribute__")
    if source is not None:
        tx.output.add_guard(source, id_is(getattribute))
    return UserFunctionVariable(getattribute, source).call_function(tx, [owner, ConstantVariable(name)], {})


def object_getattribute(tx, args, kwargs) -> VariableTracker:
    """``object.__getattribute__(obj, name)`` (also ``super().__getattribute__(name)``
    reaching a built-in base whose lookup is the generic one)."""
    if kwargs or len(args) != 2:
        raise unsupported("object.__getattribute__ with these arguments (TypeError)")
    obj, name = args
    if not name.is_python_constant() or type(name.as_python_constant()) is not str:
        raise unsupported("object.__getattribute__ with a name that is not a constant string")
    lookup = getattr(obj, "generic_getattr", None)
    if lookup is None:
        raise unsupported(f"object.__getattribute__ on {obj.describe()}")
    return lookup(tx, name.as_python_constant())


def customises_lookup(obj: VariableTracker) -> bool:
    """A user object whose class runs Python code to look attributes up (its own
    ``__getattribute__`` or a ``__getattr__``): ``hasattr`` and ``getattr`` with a
    default run that lookup and catch its ``AttributeError``."""
    from .misc import UserObjectVariable
    from .user_objects import NewObjectVariable

    if not isinstance(obj, (UserObjectVariable, NewObjectVariable)):
        return False
    cls = obj.python_type()
    return has_custom_getattribute(cls) or type_lookup(cls, "__getattr__") is not MISSING


def lookup_or_missing(tx, obj: VariableTracker, name: str) -> VariableTracker | None:
    """``obj.name``, or None when the lookup raised ``AttributeError`` (any other
    exception propagates, as from ``hasattr``)."""
    from ..opcodes.exceptions import RaisedInTrace

    try:
        return obj.var_getattr(tx, name)
    except RaisedInTrace as raised:
        if issubclass(raised.exception.cls, AttributeError):
            return None
        raise


class InstanceDictView(VariableTracker):
    """``obj.__dict__`` of a user object, read only: ``get``, ``[key]`` and ``in``, each
    key's presence guarded (``contains``) and its value read through the dict. Pending
    attribute stores of the trace are seen; any change through the dict is unsupported."""

    def __init__(self, owner: VariableTracker, source: Source | None):
        self.owner = owner
        self.source = source

    def python_type(self) -> type:
        return dict

    def lookup(self, tx, key: VariableTracker) -> VariableTracker | None:
        """The value under ``key``, or None when absent."""
        from ..builder import wrap_value
        from .user_objects import NewObjectVariable

        name = key.as_python_constant() if key.is_python_constant() else None
        if type(name) is not str:
            raise unsupported(f"{self.describe()} with a key that is not a constant string")
        cls = self.owner.python_type()
        if is_data_descriptor(type_lookup(cls, name)):
            raise unsupported(f"{cls.__qualname__}.__dict__[{name!r}] shadowed by a data descriptor")
        if isinstance(self.owner, NewObjectVariable):
            return self.owner.attrs.get(name)
        value = self.owner.value  # type: ignore[attr-defined]
        pending = tx.output.side_effects.load_attr(value, name)
        if pending is not None:
            return pending
        instance_dict = object.__getattribute__(value, "__dict__")
        if name not in instance_dict:
            if self.source is not None:
                guard_key(tx, self.source, name, False)
            return None
        if self.source is None:
            raise unsupported(f"__dict__ of an object built during the trace ({name!r})")
        return wrap_value(tx, instance_dict[name], ItemSource(self.source, name))

    def contains(self, tx, key: VariableTracker) -> bool:
        return self.lookup(tx, key) is not None

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        found = self.lookup(tx, index)
        if found is None:
            raise_in_trace(KeyError, index.as_python_constant())
        return found

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("get", "__getitem__", "__contains__"):
            return MethodCallVariable(self, name)
        raise unsupported(f"{self.describe()}.{name} (only get, [] and in are modelled)")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "get" and not kwargs and len(args) in (1, 2):
            found = self.lookup(tx, args[0])
            return found if found is not None else args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "__getitem__" and not kwargs and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__contains__" and not kwargs and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        raise unsupported(f"{self.describe()}.{name}() with these arguments")

    def describe(self) -> str:
        return f"InstanceDictView({self.owner.describe()})"
