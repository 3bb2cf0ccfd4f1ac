"""Python modules, classes and plain user objects seen during tracing.

>>> import math
>>> PythonModuleVariable(math).describe()
'PythonModuleVariable(math)'
"""
from __future__ import annotations

import types
from typing import Any

from ...exc import unsupported
from ...guards import id_is, query_is, type_is
from ...guards.sources import AttrSource, TypeSource
from .attributes import (
    MISSING,
    generic_getattr,
    generic_setattr_target,
    instance_attr_source,
    instance_getattr,
    is_heap_type,
    method_source,
    property_set,
    type_lookup,
)
from .base import VariableTracker
from .constant import ConstantVariable
from .special_calls import SpecialMethodCalls

# Modules whose members are trusted not to be monkey-patched: their attributes are
# wrapped without a source (no guard per function on every call).
TRUSTED_MODULE_PREFIXES = ("torch", "math", "operator", "functools", "builtins", "itertools",
                           "collections", "typing", "numbers")


def is_trusted_module(name: str) -> bool:
    return name.split(".")[0] in TRUSTED_MODULE_PREFIXES


_STATE_CONSTANTS = (bool, int, float, str, type(None))


def _computed_by_module_class(module: types.ModuleType, name: str) -> bool:
    """Whether ``module.name`` comes from the module's class (a subclass of ModuleType
    with a descriptor for ``name``, or a ``__getattr__`` when the module's dict lacks it):
    a value computed on each read, not a binding in the module's dict."""
    cls = type(module)
    if cls is types.ModuleType:
        return False
    attr = type_lookup(cls, name)
    if attr is not MISSING:
        return hasattr(type(attr), "__get__")
    return name not in vars(module) and type_lookup(cls, "__getattr__") is not MISSING


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
        if _computed_by_module_class(self.module, name) and type(value) in _STATE_CONSTANTS:
            # a flag the module's class computes on each read (torch.backends.cudnn's
            # `deterministic`, mkldnn's `enabled`): read again by the guard on every call
            tx.output.add_guard(None, query_is(getattr, (self.module, name), value))
            return ConstantVariable(value)
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
            return TupleVariable(values, tuple_type=self.cls, class_source=self.source)
        constant_args = all(a.is_python_constant() for a in args)
        if issubclass(self.cls, BaseException) and constant_args and not kwargs:
            # raising it breaks the graph; the instance is made by the rewritten code
            return ExceptionVariable(self.cls, [a.as_python_constant() for a in args])
        if self.cls in (slice, range, complex) and constant_args:
            return wrap_constant_result(self.cls(*[a.as_python_constant() for a in args]))
        from .user_objects import construct

        return construct(tx, self.cls, self.source, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """``cls.name``: functions and static methods as themselves, class methods bound
        to the class; ``object.__setattr__``/``__init__`` are modelled calls."""
        from ..builder import wrap_value
        from .custom_lookup import object_getattribute
        from .functions import UserFunctionVariable, UserMethodVariable
        from .user_objects import ModelledCallVariable, object_init, object_new, object_setattr

        modelled = {"__setattr__": object_setattr, "__init__": object_init, "__new__": object_new,
                    "__getattribute__": object_getattribute}
        if self.cls is object and name in modelled:
            return ModelledCallVariable(modelled[name], f"object.{name}")
        source = AttrSource(self.source, name) if self.source else None
        attr = type_lookup(self.cls, name)
        if isinstance(attr, classmethod) and isinstance(attr.__func__, types.FunctionType):
            fn_source = AttrSource(source, "__func__") if source else None
            if fn_source is not None:
                tx.output.add_guard(fn_source, id_is(attr.__func__))
            return UserMethodVariable(UserFunctionVariable(attr.__func__, fn_source), self)
        if isinstance(attr, (staticmethod, types.FunctionType)):
            return wrap_value(tx, getattr(self.cls, name), source)
        if attr is not MISSING and hasattr(type(attr), "__get__"):
            from .dict_objects import unbound_builtin_method

            unbound = unbound_builtin_method(self.cls, name, attr)
            if unbound is not None:
                return unbound
            raise unsupported(f"class attribute {self.cls.__qualname__}.{name} of kind {type(attr).__name__}")
        try:
            value = getattr(self.cls, name)
        except AttributeError as err:
            raise unsupported(f"class {self.cls.__qualname__} has no attribute {name!r}") from err
        if source is None and is_heap_type(self.cls):
            # a Python class's attributes can be reassigned: without a source to guard,
            # the value read now could be stale on the next call
            raise unsupported(f"attribute {name!r} of class {self.cls.__qualname__} without a source")
        return wrap_value(tx, value, source)

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


class UserObjectVariable(SpecialMethodCalls, VariableTracker):
    """An instance of a user class: data attributes are read for real and guarded on
    their source; methods are inlined with ``self`` bound. Attribute stores are side
    effects (:mod:`fastdynamo.capture.side_effects`), seen by later reads.
    ``identity_guarded`` when its source is guarded by identity (``is`` is decidable)."""

    identity_guarded = False

    def __init__(self, value: Any, source=None):
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        cls = type(self.value)
        class_source = TypeSource(self.source) if self.source is not None else None
        return instance_getattr(tx, self, cls, name, lambda attr: self._own(tx, attr), self.source,
                                class_source, guard_absent=lambda: self._guard_dict(tx, name))

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """``object.__getattribute__(obj, name)``."""
        cls = type(self.value)
        class_source = TypeSource(self.source) if self.source is not None else None
        return generic_getattr(tx, self, cls, name, lambda attr: self._own(tx, attr), self.source,
                               class_source, guard_absent=lambda: self._guard_dict(tx, name))

    def _own(self, tx, name: str) -> VariableTracker | None:
        """The instance's own ``name`` (dict entry or slot), or None when it has none."""
        from ..builder import wrap_value

        pending = tx.output.side_effects.load_attr(self.value, name)
        if pending is not None:
            return pending
        try:
            instance_dict = object.__getattribute__(self.value, "__dict__")
        except AttributeError:
            instance_dict = {}
        slot = isinstance(type_lookup(type(self.value), name), types.MemberDescriptorType)
        if name not in instance_dict and not (slot and _slot_is_set(self.value, name)):
            return None
        if self.source is None:
            raise unsupported(f"attribute {name!r} of an object built during the trace")
        value = instance_dict[name] if name in instance_dict else object.__getattribute__(self.value, name)
        return wrap_value(tx, value, instance_attr_source(self.source, type(self.value), name))

    def _guard_dict(self, tx, name: str) -> None:
        """The lookup fell through to ``__getattr__``: ``name`` must stay out of the
        instance dict for that to hold on later calls."""
        from .attributes import guard_key

        instance_dict = _instance_dict(self.value)
        if self.source is not None and type(instance_dict) is dict:
            dict_source = instance_attr_source(self.source, type(self.value), "__dict__")
            assert dict_source is not None
            guard_key(tx, dict_source, name, False)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``obj.name = value``: the class's own ``__setattr__`` is inlined when it is a
        Python function; otherwise ``object.__setattr__``."""
        cls = type(self.value)
        setter = type_lookup(cls, "__setattr__")
        if isinstance(setter, types.FunctionType):
            from .constant import ConstantVariable
            from .functions import UserFunctionVariable

            source = method_source(None, TypeSource(self.source) if self.source else None, "__setattr__")
            if source is not None:
                tx.output.add_guard(source, id_is(setter))
            UserFunctionVariable(setter, source).call_function(tx, [self, ConstantVariable(name), value], {})
            return
        if setter is not OBJECT_SETATTR:
            raise unsupported(f"assignment to {cls.__qualname__}.{name}: __setattr__ of kind "
                              f"{type(setter).__name__}")
        self.generic_store_attr(tx, name, value)

    def generic_store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__(obj, name, value)``."""
        from ..side_effects import where_of

        cls = type(self.value)
        if self.source is None:
            raise unsupported(f"assignment to attribute {name!r} of an object without a source")
        target = generic_setattr_target(cls, name)
        if isinstance(target, property):
            property_set(tx, self, cls, name, target, value, TypeSource(self.source))
            return
        if type_lookup(cls, "__setattr__") is not OBJECT_SETATTR:
            # the replayed store (STORE_ATTR) would run the class's __setattr__ again
            raise unsupported(f"object.__setattr__ on {cls.__qualname__}, whose class customises "
                              "__setattr__ (side effect)")
        slot = isinstance(target, types.MemberDescriptorType)
        if target is not MISSING and not slot or target is MISSING and not hasattr(self.value, "__dict__"):
            raise unsupported(f"assignment to {cls.__qualname__}.{name}, a descriptor or missing slot "
                              "(side effect)")
        tx.output.side_effects.store_attr(self, self.value, name, value, where=where_of(tx))

    def describe(self) -> str:
        return f"UserObjectVariable({type(self.value).__qualname__})"


OBJECT_SETATTR = object.__dict__["__setattr__"]


def _instance_dict(obj: Any) -> Any:
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


def _slot_is_set(obj: Any, name: str) -> bool:
    try:
        object.__getattribute__(obj, name)  # the slot, not the class's own lookup
    except AttributeError:
        return False
    return True


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
