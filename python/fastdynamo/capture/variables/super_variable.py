"""``super()``: zero-argument (the running method's ``__class__`` cell and first
argument) and two-argument forms, on instances and on classes (``__new__``, class
methods). Lookups walk ``type(obj).__mro__`` after the start class; what they find is
guarded through ``type(obj).__mro__[i].name`` when the object has a source.

>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> SuperVariable(int, ConstantVariable(1)).describe()
'SuperVariable(int, ConstantVariable(1))'
"""
from __future__ import annotations

import types
from typing import Any

import torch

from ...exc import unsupported
from ...guards import id_is
from ...guards.sources import AttrSource, ItemSource, TypeSource
from .attributes import class_attribute, is_generic_getattribute, property_get
from .base import VariableTracker
from .misc import ClassVariable
from .nn_module import NNModuleVariable
from .user_objects import ModelledCallVariable, object_init, object_new, object_setattr


class SuperVariable(VariableTracker):
    """``super(start, obj)``: attributes found on ``type(obj).__mro__`` after ``start``,
    bound to ``obj``."""

    def __init__(self, start: type, obj: VariableTracker):
        self.start = start
        self.obj = obj

    def python_type(self) -> type:
        return super

    def var_getattr(self, tx, name: str) -> VariableTracker:
        on_class = isinstance(self.obj, ClassVariable)
        mro = self.obj.cls.__mro__ if isinstance(self.obj, ClassVariable) else self.obj.python_type().__mro__
        if self.start not in mro:
            raise unsupported("super(type, obj): obj is not an instance of type (TypeError)")
        for index in range(mro.index(self.start) + 1, len(mro)):
            klass = mro[index]
            if name not in klass.__dict__:
                continue
            attr = klass.__dict__[name]
            special = self._special(attr)
            if special is not None:
                return special
            class_source = self._class_source(index)
            if on_class:
                return self._on_class(tx, klass, name, attr, class_source)
            if isinstance(attr, property):
                return property_get(tx, self.obj, klass, name, attr, class_source)
            if type(attr) is types.FunctionType:
                source = AttrSource(class_source, name) if class_source is not None else None
                if source is not None:
                    tx.output.add_guard(source, id_is(attr))
                from .functions import UserFunctionVariable, UserMethodVariable

                return UserMethodVariable(UserFunctionVariable(attr, source), self.obj)
            return class_attribute(tx, self.obj, klass, name, attr, None, class_source)
        raise unsupported(f"'super' object has no attribute {name!r} (AttributeError)")

    def _on_class(self, tx, klass: type, name: str, attr: Any, class_source) -> VariableTracker:
        """``super(C, cls).name`` (in ``__new__`` or a classmethod): functions unbound,
        static methods as their function, class methods bound to ``cls``."""
        from ..builder import wrap_value
        from .functions import UserFunctionVariable, UserMethodVariable

        source = AttrSource(class_source, name) if class_source is not None else None
        if attr is object.__dict__["__new__"]:
            return ModelledCallVariable(object_new, "object.__new__")
        if isinstance(attr, classmethod) and isinstance(attr.__func__, types.FunctionType):
            fn_source = AttrSource(source, "__func__") if source is not None else None
            if fn_source is not None:
                tx.output.add_guard(fn_source, id_is(attr.__func__))
            return UserMethodVariable(UserFunctionVariable(attr.__func__, fn_source), self.obj)
        if isinstance(attr, (staticmethod, types.FunctionType)):
            return wrap_value(tx, getattr(klass, name), source)
        raise unsupported(f"super(...).{name} of kind {type(attr).__name__} on a class")

    def _special(self, attr: Any) -> VariableTracker | None:
        obj = self.obj
        if attr is torch.nn.Module.__call__ and isinstance(obj, NNModuleVariable):
            return ModelledCallVariable(lambda tx, a, k: obj.call_module(tx, a, k), "nn.Module.__call__")
        if attr is object.__dict__["__init__"]:
            return ModelledCallVariable(lambda tx, a, k: object_init(tx, [obj, *a], k), "object.__init__")
        if is_generic_getattribute(attr):
            from .custom_lookup import object_getattribute

            return ModelledCallVariable(lambda tx, a, k: object_getattribute(tx, [obj, *a], k),
                                        "object.__getattribute__")
        if attr is object.__dict__["__setattr__"]:
            return ModelledCallVariable(lambda tx, a, k: object_setattr(tx, [obj, *a], k),
                                        "object.__setattr__")
        return None

    def _class_source(self, index: int):
        """``type(obj).__mro__[index]``, reached from the object's source."""
        source = self.obj.source
        if isinstance(self.obj, ClassVariable):
            return ItemSource(AttrSource(source, "__mro__"), index) if source is not None else None
        if source is not None:
            return ItemSource(AttrSource(TypeSource(source), "__mro__"), index)
        class_source = getattr(self.obj, "class_source", None)
        if class_source is not None:
            return ItemSource(AttrSource(class_source, "__mro__"), index)
        return None

    def describe(self) -> str:
        return f"SuperVariable({self.start.__qualname__}, {self.obj.describe()})"


def make_super(tx, args) -> VariableTracker:
    """``super()`` (the ``__class__`` cell and the first argument of the running
    function) or ``super(type, obj)``."""
    if len(args) == 2:
        start = args[0].as_python_constant()
        return SuperVariable(start, args[1])
    if args:
        raise unsupported("super() with one argument")
    code = tx.code
    if "__class__" not in code.co_freevars or not code.co_argcount:
        raise unsupported("super() outside a method (RuntimeError)")
    start = tx.cells["__class__"].load(tx).as_python_constant()
    first = code.co_varnames[0]
    obj = tx.cells[first].load(tx) if first in code.co_cellvars else tx._load_local(first)
    return SuperVariable(start, obj)
