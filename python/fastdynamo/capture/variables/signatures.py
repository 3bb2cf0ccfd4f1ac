"""``inspect.signature(fn)`` of a function (or a bound method of one) from outside the
frame, computed at trace time instead of traced: the real ``inspect`` walks ``unwrap``,
``sys.getrecursionlimit()``, slotted ``Parameter`` objects and a mapping proxy.

What the answer depends on is guarded on the function's source:

- ``__code__`` (pinned by ``id_is``): the parameters' names and kinds;
- ``__defaults__`` (None, or a tuple of its length) and ``__kwdefaults__`` (None, or
  its keys in order): which parameters have a default;
- ``__signature__``, ``__wrapped__``, ``_partialmethod``, ``__partialmethod__`` absent
  from the function's ``__dict__`` (each would change what ``inspect`` looks at; a
  function that has one is unsupported).

A parameter's ``default`` and ``annotation`` are read when the trace asks for them,
through ``fn.__defaults__[i]``, ``fn.__kwdefaults__[name]`` and
``fn.__annotations__[name]`` (guarded like any value read from the frame). Supported
on the result: ``.parameters`` (``len``, ``in``, iteration over the names, ``[name]``,
``.get(name)``) and, per parameter, ``name``, ``kind``, ``default``, ``annotation``,
``empty``; a signature or parameter that outlives the trace (returned, stored, live at
a graph break) is not rebuilt: unsupported.
"""
from __future__ import annotations

import inspect
import types
from typing import Any

from ...exc import unsupported
from ...guards import id_is, is_none, len_is, type_is
from ...guards.sources import AttrSource, ItemSource, Source
from .base import MethodCallVariable, VariableTracker
from .constant import ConstantVariable

# Names in a function's __dict__ that change what inspect.signature reports.
_SIGNATURE_KEYS = ("__signature__", "__wrapped__", "_partialmethod", "__partialmethod__")
_SELF = object()  # what a bound method is bound to while its signature is computed


def _empty() -> VariableTracker:
    """``Parameter.empty`` (a class): as any class, so ``default is empty`` is decided."""
    from ..builder import wrap_value

    return wrap_value(None, inspect.Parameter.empty, None)


def signature_of(tx, target: VariableTracker) -> SignatureVariable:
    """``inspect.signature(target)`` for a tracked function or bound method."""
    from .functions import UserFunctionVariable, UserMethodVariable

    bound = isinstance(target, UserMethodVariable)
    fn_var = target.fn if isinstance(target, UserMethodVariable) else target
    if not isinstance(fn_var, UserFunctionVariable) or fn_var.source is None:
        raise unsupported(f"inspect.signature of {target.describe()}")
    fn, source = fn_var.fn, fn_var.source
    for key in _SIGNATURE_KEYS:
        tx.output.add_guard(AttrSource(source, "__dict__"), ("contains", key, key in fn.__dict__))
        if key in fn.__dict__:
            raise unsupported(f"inspect.signature of {fn.__qualname__}, which has {key}")
    tx.output.add_guard(AttrSource(source, "__code__"), id_is(fn.__code__))
    _guard_defaults(tx, fn, source)
    try:
        signature = inspect.signature(types.MethodType(fn, _SELF) if bound else fn)
    except (TypeError, ValueError) as err:
        raise unsupported(f"inspect.signature of {fn.__qualname__} raised {type(err).__name__}") from err
    return SignatureVariable(signature, fn, source)


def _guard_defaults(tx, fn: types.FunctionType, source: Source) -> None:
    defaults_source, kwdefaults_source = AttrSource(source, "__defaults__"), AttrSource(source, "__kwdefaults__")
    if fn.__defaults__ is None:
        tx.output.add_guard(defaults_source, is_none())
    else:
        tx.output.add_guard(defaults_source, type_is(tuple))
        tx.output.add_guard(defaults_source, len_is(len(fn.__defaults__)))
    if fn.__kwdefaults__ is None:
        tx.output.add_guard(kwdefaults_source, is_none())
    else:
        tx.output.add_guard(kwdefaults_source, type_is(dict))
        tx.output.add_guard(kwdefaults_source, ("keys_are", tuple(fn.__kwdefaults__)))


class SignatureVariable(VariableTracker):
    """An ``inspect.Signature`` computed at trace time for the function at ``fn_source``."""

    def __init__(self, signature: inspect.Signature, fn: types.FunctionType, fn_source: Source):
        self.signature = signature
        self.fn = fn
        self.fn_source = fn_source
        self.source = None

    def python_type(self) -> type:
        return inspect.Signature

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "parameters":
            return ParametersVariable(self)
        if name == "return_annotation":
            return _annotation(tx, self, "return", self.signature.return_annotation)
        if name == "empty":
            return _empty()
        raise unsupported(f"attribute {name!r} of an inspect.Signature")

    def describe(self) -> str:
        return f"SignatureVariable({self.fn.__qualname__})"


class ParametersVariable(VariableTracker):
    """``signature.parameters``: a read-only mapping of names to parameters."""

    def __init__(self, signature: SignatureVariable):
        self.signature = signature
        self.source = None

    def python_type(self) -> type:
        return types.MappingProxyType

    def _parameter(self, name: Any) -> ParameterVariable | None:
        parameter = self.signature.signature.parameters.get(name) if type(name) is str else None
        return ParameterVariable(self.signature, parameter) if parameter is not None else None

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(name) for name in self.signature.signature.parameters]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "get":
            return MethodCallVariable(self, name)
        raise unsupported(f"attribute {name!r} of the parameters of an inspect.Signature")

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        parameter = self._parameter(index.as_python_constant()) if index.is_python_constant() else None
        if parameter is None:
            raise unsupported(f"{index.describe()} is not a parameter of {self.signature.fn.__qualname__} (KeyError)")
        return parameter

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.signature.signature.parameters))
        if name == "get" and 1 <= len(args) <= 2 and not kwargs and args[0].is_python_constant():
            parameter = self._parameter(args[0].as_python_constant())
            if parameter is not None:
                return parameter
            return args[1] if len(args) == 2 else ConstantVariable(None)
        raise unsupported(f"{name}() of the parameters of an inspect.Signature")

    def describe(self) -> str:
        return f"ParametersVariable({self.signature.fn.__qualname__})"


class ParameterVariable(VariableTracker):
    """One ``inspect.Parameter`` of a :class:`SignatureVariable`."""

    def __init__(self, signature: SignatureVariable, parameter: inspect.Parameter):
        self.signature = signature
        self.parameter = parameter
        self.source = None

    def python_type(self) -> type:
        return inspect.Parameter

    def var_getattr(self, tx, name: str) -> VariableTracker:
        parameter = self.parameter
        if name in ("name", "kind"):
            return ConstantVariable(getattr(parameter, name))
        if name == "empty":
            return _empty()
        if name == "default":
            return self._default(tx)
        if name == "annotation":
            return _annotation(tx, self.signature, parameter.name, parameter.annotation)
        raise unsupported(f"attribute {name!r} of an inspect.Parameter")

    def _default(self, tx) -> VariableTracker:
        from ..builder import wrap_value

        parameter, fn, source = self.parameter, self.signature.fn, self.signature.fn_source
        if parameter.default is inspect.Parameter.empty:
            return _empty()  # (which parameters have one is guarded)
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            return wrap_value(tx, parameter.default, ItemSource(AttrSource(source, "__kwdefaults__"), parameter.name))
        code = fn.__code__
        position = code.co_varnames[:code.co_argcount].index(parameter.name)
        index = position - (code.co_argcount - len(fn.__defaults__ or ()))
        return wrap_value(tx, parameter.default, ItemSource(AttrSource(source, "__defaults__"), index))

    def describe(self) -> str:
        return f"ParameterVariable({self.parameter.name})"


def _annotation(tx, signature: SignatureVariable, name: str, value: Any) -> VariableTracker:
    """The annotation of ``name`` (or "return"), read through ``fn.__annotations__``."""
    from ..builder import wrap_value

    annotations_source = AttrSource(signature.fn_source, "__annotations__")
    present = name in signature.fn.__annotations__
    tx.output.add_guard(annotations_source, type_is(dict))
    tx.output.add_guard(annotations_source, ("contains", name, present))
    if not present:
        return _empty()
    return wrap_value(tx, value, ItemSource(annotations_source, name))
