"""Instances of user classes made by the frame, ``super()``, and calls the translator
models with a Python function of its own.

``C(*args)`` for an ordinary class (a metaclass that does not override ``__call__``;
only Python classes on the MRO) runs ``C.__new__`` (``object.__new__`` makes a
:class:`NewObjectVariable`; a Python ``__new__`` is inlined) and inlines ``C.__init__``;
dataclasses are ordinary classes whose generated ``__init__`` is a Python function
(traced like any other). The
object's attributes live in the tracker, in insertion order; when it leaves the frame
(returned, stored, alive at a graph break) the rewritten code rebuilds it with
:func:`rebuild_object`: ``object.__new__(cls)`` and ``object.__setattr__`` for each
attribute, in order.

>>> class P:
...     pass
>>> obj = rebuild_object(P, ("a", "b"), (1, 2))
>>> type(obj) is P, vars(obj)
(True, {'a': 1, 'b': 2})
"""
from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ...exc import unsupported
from ...guards import id_is, is_none
from ...guards.sources import AttrSource, Source, WeakRefCallSource
from .attributes import (
    MISSING,
    generic_getattr,
    generic_setattr_target,
    instance_getattr,
    is_heap_type,
    method_source,
    property_set,
    type_lookup,
)
from .base import VariableTracker
from .constant import ConstantVariable
from .special_calls import SpecialMethodCalls


def rebuild_object(cls: type, names: tuple, values: tuple) -> Any:
    """An instance of ``cls`` made by the frame, rebuilt after the graph (every such
    instance came from ``object.__new__``; the class's own ``__new__`` already ran)."""
    obj: Any = object.__new__(cls)
    for name, value in zip(names, values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def set_attributes(obj: Any, names: tuple, values: tuple) -> Any:
    """``obj`` with ``setattr`` of each name, in order (a function made by the frame
    and given attributes, e.g. by ``functools.wraps``)."""
    for name, value in zip(names, values, strict=True):
        setattr(obj, name, value)
    return obj


def constructible(cls: type) -> str | None:
    """Why instances of ``cls`` are not modelled, or None for an ordinary class."""
    if type(cls).__call__ is not type.__call__:
        return f"the metaclass {type(cls).__qualname__} overrides __call__"
    if getattr(cls, "__abstractmethods__", None):
        return "an abstract class"
    if issubclass(cls, torch.nn.Module):
        return "an nn.Module constructed inside the frame"
    if any(klass is not object and not is_heap_type(klass) for klass in cls.__mro__):
        from .dict_objects import is_dict_subclass

        if not is_dict_subclass(cls):
            return "a subclass of a builtin type"
    return None


def construct(tx, cls: type, class_source, args, kwargs) -> VariableTracker:
    """``cls(*args, **kwargs)`` as ``type.__call__`` runs it: ``cls.__new__`` (object's,
    or a Python one, inlined), then ``__init__`` when the result is an instance of cls."""
    from .functions import UserFunctionVariable
    from .misc import ClassVariable

    why = constructible(cls)
    if why is not None:
        raise unsupported(f"constructing {cls.__qualname__}: {why}")
    new = type_lookup(cls, "__new__")
    if new is object.__new__:
        obj: VariableTracker = NewObjectVariable(cls, class_source)
    elif new is dict.__new__:
        from .dict_objects import DictObjectVariable

        obj = DictObjectVariable(cls, class_source)  # an empty dict of the subclass
    elif isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType):
        source = AttrSource(class_source, "__new__") if class_source is not None else None
        if source is not None:
            tx.output.add_guard(source, id_is(new.__func__))
        obj = UserFunctionVariable(new.__func__, source).call_function(
            tx, [ClassVariable(cls, class_source), *args], kwargs)
        if not issubclass(obj.python_type(), cls):
            return obj  # __init__ is not called on what __new__ returned
    else:
        raise unsupported(f"{cls.__qualname__}.__new__ of kind {type(new).__name__}")
    init = type_lookup(cls, "__init__")
    if init is object.__init__:
        if (args or kwargs) and new is object.__new__:
            raise unsupported(f"{cls.__qualname__}() takes no arguments (TypeError)")
        return obj
    builtin_init = getattr(obj, "builtin_call", None)
    if isinstance(init, types.WrapperDescriptorType) and builtin_init is not None:
        builtin_init(tx, "__init__", list(args), dict(kwargs))  # dict's or OrderedDict's
        return obj
    if not isinstance(init, types.FunctionType):
        raise unsupported(f"{cls.__qualname__}.__init__ of kind {type(init).__name__}")
    init_source = method_source(None, class_source, "__init__")
    if init_source is not None:
        tx.output.add_guard(init_source, id_is(init))
    result = UserFunctionVariable(init, init_source).call_function(tx, [obj, *args], kwargs)
    if not (result.is_python_constant() and result.as_python_constant() is None):
        raise unsupported(f"{cls.__qualname__}.__init__ returned a value (TypeError)")
    return obj


def object_new(tx, args, kwargs) -> VariableTracker:
    """``object.__new__(cls)``: a new instance, without ``__init__``."""
    from .misc import ClassVariable

    if not args or not isinstance(args[0], ClassVariable):
        raise unsupported("object.__new__ without a class (TypeError)")
    cls = args[0].cls
    why = constructible(cls)
    if why is None and type_lookup(cls, "__new__") is dict.__new__:
        why = "not safe for a dict subclass, use dict.__new__() (TypeError)"
    if why is not None:
        raise unsupported(f"object.__new__({cls.__qualname__}): {why}")
    extra = len(args) > 1 or bool(kwargs)
    overrides_new = type_lookup(cls, "__new__") is not object.__new__
    if extra and (overrides_new or type_lookup(cls, "__init__") is object.__init__):
        raise unsupported("object.__new__() with extra arguments (TypeError)")
    return NewObjectVariable(cls, args[0].source)


class NewObjectVariable(SpecialMethodCalls, VariableTracker):
    """An instance of a user class made during the trace; ``attrs`` are its instance
    dict (and slots), in insertion order."""

    def __init__(self, cls: type, class_source=None):
        self.cls = cls
        self.class_source = class_source
        self.attrs: dict[str, VariableTracker] = {}

    def python_type(self) -> type:
        return self.cls

    def truth(self, tx) -> bool:
        if type_lookup(self.cls, "__bool__") is not MISSING or type_lookup(self.cls, "__len__") is not MISSING:
            raise unsupported(f"truth of a {self.cls.__qualname__} (it defines __bool__ or __len__)")
        return True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return instance_getattr(tx, self, self.cls, name, self.attrs.get, None, self.class_source)

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """``object.__getattribute__(obj, name)``."""
        return generic_getattr(tx, self, self.cls, name, self.attrs.get, None, self.class_source)

    def _call_class_function(self, tx, method: str, fn: types.FunctionType, args: list) -> None:
        """``type(obj).method(obj, *args)`` for a Python function found on the class,
        inlined and guarded by identity."""
        from .functions import UserFunctionVariable

        source = method_source(None, self.class_source, method)
        if source is not None:
            tx.output.add_guard(source, id_is(fn))
        UserFunctionVariable(fn, source).call_function(tx, [self, *args], {})

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        setter = type_lookup(self.cls, "__setattr__")
        if isinstance(setter, types.FunctionType):
            self._call_class_function(tx, "__setattr__", setter, [ConstantVariable(name), value])
            return
        if setter is not object.__dict__["__setattr__"]:
            raise unsupported(f"assignment to {self.cls.__qualname__}.{name}: __setattr__ of kind "
                              f"{type(setter).__name__}")
        self.generic_store_attr(tx, name, value)

    def generic_store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__(obj, name, value)``: a property's setter, a slot, or the
        instance dict (the tracker's ``attrs``)."""
        target = generic_setattr_target(self.cls, name)
        if isinstance(target, property):
            property_set(tx, self, self.cls, name, target, value, self.class_source)
            return
        if target is not MISSING and not isinstance(target, types.MemberDescriptorType):
            raise unsupported(f"assignment to {self.cls.__qualname__}.{name}, a {type(target).__name__}")
        if target is MISSING and not _has_instance_dict(self.cls):
            raise unsupported(f"{self.cls.__qualname__} has no attribute {name!r} to assign (AttributeError)")
        self.attrs[name] = value

    def delete_attr(self, tx, name: str) -> None:
        """``del obj.name``: the class's Python ``__delattr__`` (inlined), or
        ``object.__delattr__``: a property's deleter, or the instance dict's entry
        (``AttributeError`` when absent)."""
        from .custom_lookup import raise_attribute_error

        deleter = type_lookup(self.cls, "__delattr__")
        if isinstance(deleter, types.FunctionType):
            self._call_class_function(tx, "__delattr__", deleter, [ConstantVariable(name)])
            return
        if deleter is not object.__dict__["__delattr__"]:
            raise unsupported(f"del {self.cls.__qualname__}.{name}: __delattr__ of kind {type(deleter).__name__}")
        target = generic_setattr_target(self.cls, name)
        if target is not MISSING:
            raise unsupported(f"del {self.cls.__qualname__}.{name}, a {type(target).__name__}")
        if name not in self.attrs:
            raise_attribute_error(self.cls, name)
        del self.attrs[name]

    def describe(self) -> str:
        return f"NewObjectVariable({self.cls.__qualname__})"


def frame_made_instance_dict(owner: VariableTracker) -> VariableTracker | None:
    """``obj.__dict__`` of an object made by the frame whose attributes all live in its
    instance dict (no ``__slots__``): the dict over its ``attrs``; else None."""
    from .dict_objects import InstanceDictVariable

    if not isinstance(owner, NewObjectVariable) or has_slots(owner.cls):
        return None
    return InstanceDictVariable(owner)


def has_slots(cls: type) -> bool:
    """A class on ``cls``'s MRO declares ``__slots__`` members."""
    return any(type(attr) is types.MemberDescriptorType for klass in cls.__mro__ for attr in vars(klass).values())


def _has_instance_dict(cls: type) -> bool:
    return type_lookup(cls, "__dict__") is not MISSING


class ModelledCallVariable(VariableTracker):
    """A callable whose call the translator models with ``handler(tx, args, kwargs)``
    (``object.__setattr__``, ``super().__call__`` of a module, ``object.__init__``)."""

    def __init__(self, handler: Callable, what: str):
        self.handler = handler
        self.what = what

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.handler(tx, args, kwargs)

    def describe(self) -> str:
        return f"ModelledCallVariable({self.what})"


def object_setattr(tx, args, kwargs) -> VariableTracker:
    """``object.__setattr__(obj, name, value)``."""
    if kwargs or len(args) != 3 or not args[1].is_python_constant():
        raise unsupported("object.__setattr__ with these arguments")
    obj, name, value = args
    store = getattr(obj, "generic_store_attr", None)
    if store is None:
        raise unsupported(f"object.__setattr__ on {obj.describe()}")
    store(tx, name.as_python_constant(), value)
    return ConstantVariable(None)


def object_init(tx, args, kwargs) -> VariableTracker:
    """``object.__init__(self)`` (``super().__init__()`` reaching object)."""
    if len(args) != 1 or kwargs:
        raise unsupported("object.__init__() with arguments (TypeError)")
    return ConstantVariable(None)


class WeakRefVariable(VariableTracker):
    """``weakref.ref(obj)`` made by the frame: calling it returns ``obj`` (alive: the
    frame holds it); rebuilt by calling ``weakref.ref`` again if it leaves the frame
    (which returns CPython's shared reference when there is one, as in eager)."""

    def __init__(self, referent: VariableTracker):
        self.referent = referent

    def python_type(self) -> type:
        return weakref.ReferenceType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            raise unsupported("calling a weak reference with arguments (TypeError)")
        return self.referent

    def describe(self) -> str:
        return f"WeakRefVariable({self.referent.describe()})"


def make_weakref(tx, args, kwargs) -> VariableTracker:
    """``weakref.ref(obj)`` without a callback, for objects that support weak references."""
    if len(args) != 1 or kwargs:
        raise unsupported("weakref.ref with a callback")
    referent = args[0]
    cls = referent.python_type()
    if type_lookup(cls, "__weakref__") is MISSING and not issubclass(cls, (torch.Tensor, types.FunctionType, type)):
        raise unsupported(f"cannot create weak reference to {cls.__qualname__} object (TypeError)")
    return WeakRefVariable(referent)


class ExternalWeakRefVariable(VariableTracker):
    """A weak reference from outside the frame (exactly a ``weakref.ref``, guarded):
    passed around as itself. Calling it reads its referent through the source ``ref()``
    (:class:`WeakRefCallSource`, read natively by the guards), guarded by identity, or
    as dead (``is_none``): a later call with another referent, or with the referent
    gone, recompiles."""

    def __init__(self, reference: weakref.ReferenceType, source: Source):
        self.reference = reference
        self.source: Source = source

    def python_type(self) -> type:
        return weakref.ReferenceType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from ..builder import wrap_value
        from .constant import ConstantVariable

        if args or kwargs:
            raise unsupported("calling a weak reference with arguments (TypeError)")
        source = WeakRefCallSource(self.source)
        referent = self.reference()
        if referent is None:
            tx.output.add_guard(source, is_none())
            return ConstantVariable(None)
        tx.output.add_guard(source, id_is(referent))
        # pinned: ``is`` against another path to the same object is decidable
        tx.output.side_effects.track(referent, source, pinned=True)
        var = wrap_value(tx, referent, source)
        if hasattr(var, "identity_guarded"):
            var.identity_guarded = True
        return var
