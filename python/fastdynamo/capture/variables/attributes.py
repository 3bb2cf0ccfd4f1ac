"""Attribute lookup on instances in Python's own order.

``object.__getattribute__`` resolves ``obj.name`` as: a **data descriptor** found on the
type (property, ``__slots__`` member, getset such as ``__class__``) > the **instance
``__dict__``** > a **non-data descriptor or plain class attribute** (functions become bound
methods, ``staticmethod``, ``classmethod``) > the type's **``__getattr__``** (for modules,
``nn.Module.__getattr__`` finds parameters, buffers and submodules). The trackers of user
objects and modules walk these steps with the helpers here, so a class method named like
a submodule wins, as it does in eager.

Every decision that depends on the instance is guarded where the frame can reach it
again: a method is guarded as ``obj.name.__func__ is fn`` (fails when the instance dict
shadows it, e.g. ``m.forward = f`` after the first call, or when the class attribute is
replaced), a plain class attribute through ``obj.name`` itself.

>>> class A:
...     x = 1
...     def f(self): pass
>>> type_lookup(A, "x"), type_lookup(A, "missing") is MISSING
(1, True)
"""
from __future__ import annotations

import types
from typing import Any

from ...exc import unsupported
from ...guards import id_is, type_lacks
from ...guards.sources import AttrSource, GenericAttrSource, Source, TypeSource
from .base import VariableTracker

MISSING = object()


def type_lookup(cls: type, name: str) -> Any:
    """``name`` on ``cls``'s MRO without invoking descriptors (``_PyType_Lookup``)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


def own_class_attribute(cls: type, name: str, base: type) -> Any:
    """``name`` on the classes of ``cls``'s MRO that come before the built-in ``base``
    (``tuple``, ``object``): what the user's classes define, or MISSING."""
    for klass in cls.__mro__:
        if klass is base:
            return MISSING
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


def is_data_descriptor(value: Any) -> bool:
    """A class attribute that wins over the instance dict (it defines ``__set__`` or
    ``__delete__``: property, slot member, ``__dict__``/``__class__`` getset)."""
    return hasattr(type(value), "__set__") or hasattr(type(value), "__delete__")


# ``__getattribute__`` of built-in types whose slot is CPython's generic lookup
# (``PyObject_GenericGetAttr``): a subclass of ``dict`` (``ModelOutput``) looks up its
# attributes exactly as a plain object does. (A type lists its own wrapper only where
# it fills the slot itself, which differs between versions: 3.13's list none.)
_GENERIC_GETATTRIBUTE = tuple(base.__dict__["__getattribute__"] for base in (
    object, dict, list, tuple, set, frozenset, int, float, complex, str, bytes, BaseException)
    if "__getattribute__" in base.__dict__)


def is_generic_getattribute(attr: Any) -> bool:
    """``attr`` (a class's ``__getattribute__``) is the generic lookup."""
    return any(attr is generic for generic in _GENERIC_GETATTRIBUTE)


def has_custom_getattribute(cls: type) -> bool:
    """``cls`` defines its own ``__getattribute__`` (a Python function or a C slot)."""
    return not is_generic_getattribute(type_lookup(cls, "__getattribute__"))


def instance_attr_source(instance_source: Source | None, cls: type, name: str) -> Source | None:
    """Where ``obj.name``, as the generic lookup finds it, is read again: ``obj.name``,
    or ``object.__getattribute__(obj, name)`` when ``cls`` customises the lookup (a guard
    must neither run the class's own lookup nor get another answer from it)."""
    if instance_source is None:
        return None
    if has_custom_getattribute(cls):
        return GenericAttrSource(instance_source, name)
    return AttrSource(instance_source, name)


def method_source(instance_source: Source | None, class_source: Source | None,
                  name: str, cls: type = object) -> Source | None:
    """Where the function behind ``obj.name`` is found again: ``obj.name.__func__``
    (through the instance, so shadowing it fails the guard), else ``cls.name``."""
    if instance_source is not None:
        return AttrSource(instance_attr_source(instance_source, cls, name), "__func__")  # type: ignore[arg-type]
    if class_source is not None:
        return AttrSource(class_source, name)
    return None


def class_attribute(tx, owner: VariableTracker, cls: type, name: str, attr: Any,
                    instance_source: Source | None, class_source: Source | None) -> VariableTracker:
    """``obj.name`` when the lookup reached the non-data step: ``attr`` was found on
    ``cls`` (not a data descriptor) and the instance dict does not shadow it."""
    from ..builder import wrap_value
    from .functions import UserFunctionVariable, UserMethodVariable
    from .misc import ClassVariable

    through = instance_attr_source(instance_source, cls, name) if instance_source is not None else \
        AttrSource(class_source, name) if class_source is not None else None
    if isinstance(attr, types.FunctionType):
        source = method_source(instance_source, class_source, name, cls)
        if source is not None:
            tx.output.add_guard(source, id_is(attr))
        return UserMethodVariable(UserFunctionVariable(attr, source), owner)
    if isinstance(attr, staticmethod) and isinstance(attr.__func__, types.FunctionType):
        return wrap_value(tx, attr.__func__, through)
    if isinstance(attr, classmethod) and isinstance(attr.__func__, types.FunctionType):
        source = method_source(instance_source, class_source, name, cls)
        if source is not None:
            tx.output.add_guard(source, id_is(attr.__func__))
        cls_source = TypeSource(instance_source) if instance_source is not None else class_source
        return UserMethodVariable(UserFunctionVariable(attr.__func__, source),
                                  ClassVariable(cls, cls_source))
    if hasattr(type(attr), "__get__"):
        from .dict_objects import builtin_method, object_method

        bound = builtin_method(owner, name, attr) or object_method(owner, name, attr)
        if bound is not None:
            return bound
        raise unsupported(f"attribute {cls.__qualname__}.{name} of kind {type(attr).__name__}")
    return wrap_value(tx, attr, through)


def property_get(tx, owner: VariableTracker, cls: type, name: str, prop: property,
                 class_source: Source | None) -> VariableTracker:
    """``obj.name`` for a property: its getter, inlined with ``self`` bound."""
    from .functions import UserFunctionVariable

    if not isinstance(prop.fget, types.FunctionType):
        raise unsupported(f"property {cls.__qualname__}.{name} without a Python getter")
    return UserFunctionVariable(prop.fget, _accessor_source(tx, prop, "fget", class_source, name)) \
        .call_function(tx, [owner], {})


def property_set(tx, owner: VariableTracker, cls: type, name: str, prop: property,
                 value: VariableTracker, class_source: Source | None) -> None:
    """``obj.name = value`` for a property: its setter, inlined."""
    from .functions import UserFunctionVariable

    if not isinstance(prop.fset, types.FunctionType):
        raise unsupported(f"assignment to property {cls.__qualname__}.{name} without a Python setter")
    UserFunctionVariable(prop.fset, _accessor_source(tx, prop, "fset", class_source, name)) \
        .call_function(tx, [owner, value], {})


def _accessor_source(tx, prop: property, which: str, class_source: Source | None,
                     name: str) -> Source | None:
    # ``cls.name`` is the property itself; its getter/setter is guarded by identity.
    if class_source is None:
        return None
    source = AttrSource(AttrSource(class_source, name), which)
    tx.output.add_guard(source, id_is(getattr(prop, which)))
    return source


def instance_getattr(tx, owner: VariableTracker, cls: type, name: str, own,
                     instance_source: Source | None, class_source: Source | None,
                     guard_absent=None) -> VariableTracker:
    """``obj.name`` as ``type(obj)``'s attribute slot runs it (``slot_tp_getattr_hook``):
    the class's own ``__getattribute__`` (a Python function, inlined) or the generic
    lookup (:func:`generic_getattr`); when that raises ``AttributeError`` and the class
    defines ``__getattr__``, ``__getattr__(obj, name)``. ``own(name)`` reads the
    instance's own storage (dict or slot: a pending store, the real value, or None when
    absent); ``guard_absent()`` guards that the instance dict stays without ``name``."""
    from ..opcodes.exceptions import RaisedInTrace
    from .custom_lookup import call_custom_getattribute

    fallback = type_lookup(cls, "__getattr__")
    try:
        if has_custom_getattribute(cls):
            return call_custom_getattribute(tx, owner, cls, name, class_source)
        return generic_getattr(tx, owner, cls, name, own, instance_source, class_source, guard_absent)
    except RaisedInTrace as raised:
        if fallback is MISSING and issubclass(raised.exception.cls, AttributeError):
            guard_lookup_unchanged(tx, class_source, cls)  # a __getattr__ added later would answer
        if fallback is MISSING or not issubclass(raised.exception.cls, AttributeError):
            raise
    return call_getattr_fallback(tx, owner, cls, name, fallback, class_source)


def call_getattr_fallback(tx, owner: VariableTracker, cls: type, name: str, fallback: Any,
                          class_source: Source | None) -> VariableTracker:
    """``type(obj).__getattr__(obj, name)`` after the lookup raised ``AttributeError``."""
    from .constant import ConstantVariable
    from .functions import UserFunctionVariable

    if not isinstance(fallback, types.FunctionType):
        raise unsupported(f"{cls.__qualname__}.__getattr__ of kind {type(fallback).__name__}")
    source = method_source(None, class_source, "__getattr__")
    if source is not None:
        tx.output.add_guard(source, id_is(fallback))
    return UserFunctionVariable(fallback, source).call_function(tx, [owner, ConstantVariable(name)], {})


def generic_getattr(tx, owner: VariableTracker, cls: type, name: str, own,
                    instance_source: Source | None, class_source: Source | None,
                    guard_absent=None) -> VariableTracker:
    """``object.__getattribute__(obj, name)``: data descriptor on the type > instance
    dict > other class attribute; else ``AttributeError``, raised in the trace (after
    ``guard_absent()``), which the caller's ``try`` or ``hasattr`` may handle."""
    from .misc import ClassVariable

    attr = type_lookup(cls, name)
    if attr is not MISSING and is_data_descriptor(attr):
        if isinstance(attr, property):
            return property_get(tx, owner, cls, name, attr, class_source)
        if name == "__class__" and attr is object.__dict__["__class__"]:
            return ClassVariable(cls, class_source)
        if isinstance(attr, types.MemberDescriptorType):  # a __slots__ member
            found = own(name)
            if found is not None:
                return found
        if name == "__dict__" and is_instance_dict_descriptor(attr):
            from .custom_lookup import InstanceDictView
            from .user_objects import frame_made_instance_dict

            made = frame_made_instance_dict(owner)
            if made is not None:
                return made

            return InstanceDictView(owner, instance_attr_source(instance_source, cls, name))
        raise unsupported(f"attribute {cls.__qualname__}.{name} of kind {type(attr).__name__}")
    found = own(name)
    if found is not None:
        return found
    if attr is not MISSING:
        return class_attribute(tx, owner, cls, name, attr, instance_source, class_source)
    guard_type_lacks(tx, class_source, name)
    if guard_absent is not None:
        guard_absent()
    from .custom_lookup import raise_attribute_error

    raise_attribute_error(cls, name)


def is_instance_dict_descriptor(attr: Any) -> bool:
    """The ``__dict__`` getset a class statement gives its instances."""
    return type(attr) is types.GetSetDescriptorType and attr.__name__ == "__dict__" \
        and is_heap_type(attr.__objclass__)


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


def is_heap_type(cls: type) -> bool:
    """A class made by a class statement (not a built-in type)."""
    return bool(cls.__flags__ & _HEAPTYPE)


def class_source_of(value: VariableTracker) -> Source | None:
    """Where the rewritten code finds ``type(value)`` again: the class's own source where
    the frame made the value from it, else through the value's source; None when neither
    exists."""
    made_from = getattr(value, "class_source", None)
    if made_from is not None:
        return made_from
    source = getattr(value, "source", None)
    return TypeSource(source) if source is not None else None


def generic_setattr_target(cls: type, name: str) -> Any:
    """What ``object.__setattr__(obj, name, v)`` meets on ``cls``: a data descriptor
    (property, slot) or MISSING (the instance dict)."""
    attr = type_lookup(cls, name)
    return attr if attr is not MISSING and is_data_descriptor(attr) else MISSING


def guard_type_lacks(tx, class_source: Source | None, name: str) -> None:
    """No class of the MRO at ``class_source`` defines ``name``: what a lookup that
    found nothing there relied on (a class attribute or ``__getattr__`` added after the
    trace must not reuse it)."""
    if class_source is not None:
        tx.output.add_guard(class_source, type_lacks(name))


def guard_lookup_unchanged(tx, class_source: Source | None, cls: type) -> None:
    """The class's attribute lookup stays what raised ``AttributeError`` in the trace:
    its ``__getattribute__`` the same, and no ``__getattr__`` when it had none."""
    if class_source is None:
        return
    tx.output.add_guard(AttrSource(class_source, "__getattribute__"), id_is(type_lookup(cls, "__getattribute__")))
    if type_lookup(cls, "__getattr__") is MISSING:
        guard_type_lacks(tx, class_source, "__getattr__")


def guard_key(tx, dict_source: Source, name: str, present: bool) -> None:
    """``name in <dict at dict_source>`` stays ``present``: what lets a trace rely on
    an attribute being absent from an instance dict (or a module's tables)."""
    from ...guards import contains

    tx.output.add_guard(dict_source, contains(name, present))


def has_attribute(tx, obj: VariableTracker, name: str) -> bool:
    """``hasattr(obj, name)`` for a tracked value, exactly, or Unsupported."""
    from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable
    from .misc import ClassVariable, UserObjectVariable
    from .nn_module import NNModuleVariable
    from .user_objects import NewObjectVariable

    if isinstance(obj, (UserObjectVariable, NewObjectVariable, NNModuleVariable)):
        return _has_instance_attribute(tx, obj, name)
    if isinstance(obj, UserMethodVariable):
        # the method type's attributes, else the function's (method_getattro)
        return type_lookup(types.MethodType, name) is not MISSING or has_attribute(tx, obj.fn, name)
    if isinstance(obj, ClassVariable) and is_heap_type(obj.cls):
        return _class_has_attribute(tx, obj, name)
    if obj.is_python_constant() and not isinstance(obj, UserFunctionVariable):
        return hasattr(obj.as_python_constant(), name)
    cls = obj.python_type()
    if type_lookup(cls, name) is not MISSING:
        return True  # a type attribute (slot, method, getset) of a tracked builtin kind
    if type_lookup(cls, "__getattr__") is not MISSING:
        raise unsupported(f"hasattr on a {cls.__qualname__}, whose class defines __getattr__")
    if type_lookup(cls, "__dict__") is MISSING:
        return False  # no instance dict: the type decides
    if isinstance(obj, UserFunctionVariable) and obj.source is not None:
        guard_key(tx, AttrSource(obj.source, "__dict__"), name, name in obj.fn.__dict__)
        return name in obj.fn.__dict__
    if isinstance(obj, PartialVariable):
        if obj.source is None:
            return False  # made by the frame: its instance dict is empty
        guard_key(tx, AttrSource(obj.source, "__dict__"), name, name in obj.instance_dict)
        return name in obj.instance_dict
    raise unsupported(f"hasattr({obj.describe()}, {name!r}): its instance dict is not tracked")


def _class_has_attribute(tx, obj, name: str) -> bool:
    """``hasattr(cls, name)`` for a Python class: its MRO decides (under the plain
    metaclass ``type``, whose own attributes every class has), guarded both ways."""
    from ...guards import type_defines

    cls = obj.cls
    if type(cls) is not type:
        raise unsupported(f"hasattr on class {cls.__qualname__}, whose metaclass is {type(cls).__qualname__}")
    if type_lookup(type, name) is not MISSING:
        return True  # type's own attributes (__name__, mro, ...): on every class
    if obj.source is None:
        raise unsupported(f"hasattr on class {cls.__qualname__} without a source")
    found = type_lookup(cls, name) is not MISSING
    tx.output.add_guard(obj.source, type_defines(name) if found else type_lacks(name))
    return found


def _has_instance_attribute(tx, obj: VariableTracker, name: str) -> bool:
    """User objects and modules: found by the modelled lookup (which guards what it
    read), or absent everywhere the lookup would look (guarded)."""
    from .custom_lookup import customises_lookup, lookup_or_missing
    from .misc import UserObjectVariable
    from .nn_module import NNModuleVariable
    from .user_objects import NewObjectVariable

    if customises_lookup(obj):  # the class's own lookup runs; AttributeError means absent
        return lookup_or_missing(tx, obj, name) is not None
    cls = obj.python_type()
    if isinstance(obj, NewObjectVariable):
        if name in obj.attrs or type_lookup(cls, name) is not MISSING:
            obj.var_getattr(tx, name)
            return True
        if type_lookup(cls, "__getattr__") is not MISSING or has_custom_getattribute(cls):
            raise unsupported(f"hasattr on a {cls.__qualname__}, which customises attribute lookup")
        guard_type_lacks(tx, obj.class_source, name)
        guard_lookup_unchanged(tx, obj.class_source, cls)
        return False
    value = obj.value if isinstance(obj, UserObjectVariable) else obj.module  # type: ignore[attr-defined]
    if _really_has(value, name) is False and tx.output.side_effects.load_attr(value, name) is None:
        if type_lookup(cls, "__getattr__") not in (MISSING, _MODULE_GETATTR) or has_custom_getattribute(cls):
            raise unsupported(f"hasattr on a {cls.__qualname__}, which customises attribute lookup")
        if obj.source is not None:
            guard_type_lacks(tx, TypeSource(obj.source), name)
            if not isinstance(obj, NNModuleVariable):  # nn.Module's own __getattr__ is modelled
                guard_lookup_unchanged(tx, TypeSource(obj.source), cls)
            if hasattr(value, "__dict__"):
                guard_key(tx, AttrSource(obj.source, "__dict__"), name, False)
            if isinstance(obj, NNModuleVariable):
                for table in ("_parameters", "_buffers", "_modules"):
                    guard_key(tx, AttrSource(obj.source, table), name, False)
        return False
    obj.var_getattr(tx, name)  # present (or made by the frame): the lookup models it
    return True


def _really_has(value: Any, name: str) -> bool:
    try:
        object.__getattribute__(value, name) if not _is_module(value) else getattr(value, name)
    except AttributeError:
        return False
    return True


def _is_module(value: Any) -> bool:
    import torch

    return isinstance(value, torch.nn.Module)


def _module_getattr() -> Any:
    import torch

    return torch.nn.Module.__getattr__


_MODULE_GETATTR = _module_getattr()
