"""Wrapping real values read from the frame into VariableTrackers, with guards.

``wrap_value(tx, value, source)`` is the one place that decides how a value the trace
reads (an argument, a global, an attribute) is modelled, and which guard makes that
model valid on later calls. ``source=None`` means the value is trusted (a constant of
the code, a member of torch or math) and not guarded.

>>> from fastdynamo.capture.output_graph import OutputGraph
>>> from fastdynamo.guards.sources import LocalSource
>>> class Tx: output = OutputGraph()
>>> tx = Tx()
>>> wrap_value(tx, 4, LocalSource(0, "n")).as_python_constant()
4
>>> [g.text() for g in tx.output.guards]
['n == 4']
"""
from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import functools
import math
import operator
import types
import weakref
from typing import Any, Callable

import torch

from ..exc import unsupported
from ..guards import equals, id_is, len_is, type_is
from ..guards.sources import AttrSource, BuiltinSource, GlobalSource, ItemSource, LocalSource, Source
from .variables.attributes import type_lookup
from .variables.base import MethodCallVariable, VariableTracker
from .variables.builtins import BuiltinVariable, OperatorVariable, is_modelled_builtin
from .variables.constant import ConstantVariable, PureFunctionVariable, wrap_constant_result
from .variables.containers import (
    DictVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    overrides_tuple_protocol,
)
from .variables.dict_objects import OutsideDictObjectVariable, is_dict_subclass
from .variables.dict_order import OrderGuard
from .variables.environ import wrap_environ
from .variables.functions import PartialVariable, UserFunctionVariable, UserMethodVariable
from .variables.misc import ClassVariable, PythonModuleVariable, UserObjectVariable, is_trusted_module
from .variables.nn_module import NNModuleVariable
from .variables.optimizers import OptimizerVariable, is_modelled_optimizer
from .variables.symbolic import size_variable
from .variables.torch_functions import (
    GradModeExitVariable,
    GradModeVariable,
    TorchFunctionVariable,
    is_is_compiling,
)
from .variables.user_objects import ExternalWeakRefVariable

_PLAIN_CONSTANTS = (int, float, bool, str, bytes, type(None))


def is_plain_constant(value: Any) -> bool:
    """Values the ``equals`` guard can check: scalars, strings, None, tuples of those."""
    if type(value) in _PLAIN_CONSTANTS:
        return True
    if type(value) in (tuple, frozenset):
        return all(is_plain_constant(v) for v in value)
    return False


class GlobalsSource:
    """How a translator's globals are reached on later calls: the compiled frame's own
    globals (``root``), another module's globals through a function's ``__globals__``
    (``base``), or not at all (trusted library code: no guards)."""

    def __init__(self, base: Source | None = None, root: bool = False):
        self.base = base
        self.root = root

    def for_global(self, name: str) -> Source | None:
        if self.root:
            return GlobalSource(name)
        if self.base is not None:
            return ItemSource(self.base, name)
        return None

    def for_builtin(self, name: str) -> Source | None:
        return BuiltinSource(name) if (self.root or self.base is not None) else None


ROOT_GLOBALS = GlobalsSource(root=True)
TRUSTED_GLOBALS = GlobalsSource()


def globals_source_for(tx, fn: types.FunctionType, fn_source: Source | None) -> GlobalsSource:
    """The GlobalsSource for inlining ``fn`` called from ``tx``."""
    if fn.__globals__ is tx.root_globals:
        return ROOT_GLOBALS
    if is_trusted_module(fn.__module__ or ""):
        return TRUSTED_GLOBALS
    if fn_source is not None:
        return GlobalsSource(base=AttrSource(fn_source, "__globals__"))
    raise unsupported(f"globals of {fn.__qualname__} cannot be guarded (no source)")


def is_torch_callable(value: Any) -> bool:
    """Functions and builtins of the torch namespace (recorded as graph nodes), and
    instances of torch's classes (an optimizer: its methods are recorded calls too, which
    refuse arguments holding real tensors; its data attributes are read through a guard,
    ``TorchFunctionVariable.var_getattr``)."""
    if isinstance(value, types.MethodDescriptorType) or isinstance(value, types.WrapperDescriptorType):
        return getattr(value, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor)
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.split(".")[0] == "torch":
        return True
    owner = getattr(value, "__self__", None)
    return isinstance(owner, types.ModuleType) and owner.__name__.startswith("torch")


def _refusing_cycles(wrap: Callable[[Any, Any, Source | None], VariableTracker]):
    """Containers are wrapped item by item: one inside itself (reached again while its
    items are being wrapped) would never end, so it is refused."""
    @functools.wraps(wrap)
    def wrap_once(tx, value: Any, source: Source | None) -> VariableTracker:
        # (by type, not isinstance: that would read ``value.__class__`` through a user
        # class's own ``__getattribute__``, user code run by the compiler)
        if not issubclass(type(value), (list, tuple, dict)):
            return wrap(tx, value, source)
        if id(value) in tx.output.wrapping:
            raise unsupported(f"a {type(value).__name__} that contains itself")
        tx.output.wrapping.add(id(value))
        try:
            return wrap(tx, value, source)
        finally:
            tx.output.wrapping.discard(id(value))
    return wrap_once


@_refusing_cycles
def wrap_value(tx, value: Any, source: Source | None) -> VariableTracker:
    """Model ``value`` (read from ``source``) as a VariableTracker and guard it."""
    def guard(check: tuple) -> None:
        if source is not None:
            tx.output.add_guard(source, check)

    if _looks_itself_up(type(value)):
        return _user_object(tx, value, source)
    environ = wrap_environ(value, source)
    if environ is not None:
        guard(id_is(value))
        return environ
    if isinstance(value, torch.Tensor):
        if source is None:
            raise unsupported("a tensor that the rewritten code cannot load (no source)")
        return tx.output.add_tensor_input(value, source)
    if type(value) is int and isinstance(source, LocalSource):
        symbolic = tx.output.add_int_input(value, source)
        if symbolic is not None:  # automatic dynamic: a symbol, its type guarded
            guard(type_is(int))
            return symbolic
    if type(value) is tuple and isinstance(source, LocalSource) and is_plain_constant(value):
        items = _tuple_with_symbolic_ints(tx, value, source)
        if items is not None:
            guard(type_is(tuple))
            guard(len_is(len(value)))
            return TupleVariable(items)
    if is_plain_constant(value):
        guard(equals(value))
        return _constant_tuple(value, source) if type(value) is tuple else ConstantVariable(value, source)
    if value is NotImplemented or value is Ellipsis:  # singletons, guarded by identity
        guard(id_is(value))
        return ConstantVariable(value, source)
    if type(value) in (list, dict) and source is not None:
        # One variable per list or dict from the frame, so in-place changes made through
        # one path are seen through the others (side effects).
        known = tx.output.side_effects.tracked_variable(value, source)
        if known is not None:
            return known
    if type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(type(value), "_fields")
                                        and not overrides_tuple_protocol(type(value))):
        guard(type_is(type(value)))
        guard(len_is(len(value)))
        items = [wrap_value(tx, v, ItemSource(source, i) if source is not None else None)
                 for i, v in enumerate(value)]
        if type(value) is list:
            return _tracked(tx, value, ListVariable(items, source=source))
        return TupleVariable(items, source=source, tuple_type=type(value))
    if type(value) is dict:
        if not all(type(k) in (str, int) for k in value):
            raise unsupported("dict with keys other than str/int")
        guard(type_is(dict))
        guard(len_is(len(value)))
        var = DictVariable({k: wrap_value(tx, v, ItemSource(source, k) if source is not None else None)
                            for k, v in value.items()}, source=source)
        var.order_guard = OrderGuard(tx, source, value.keys()) if source is not None else None
        return _tracked(tx, value, var)
    if type(value) is collections.OrderedDict and source is not None:
        return _outside_ordered_dict(tx, value, source)
    if type(value) in (set, frozenset) and all(is_plain_constant(v) for v in value):
        if type(value) is frozenset:
            guard(equals(value))
            return ConstantVariable(value, source)
        raise unsupported("a set from outside the frame")
    if isinstance(value, torch.nn.Module):
        guard(id_is(value))
        return _tracked(tx, value, NNModuleVariable(value, source), pinned=True)
    if isinstance(value, types.ModuleType):
        guard(id_is(value))
        return PythonModuleVariable(value, source)
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format, enum.Enum)) \
            or value is Ellipsis:
        guard(id_is(value))  # singletons
        return ConstantVariable(value, source)
    if type(value) in _FIELD_GUARDED:
        # Made afresh by each call, so compared by value: exact type, then each field.
        guard(type_is(type(value)))
        if type(value) is torch.Size:
            guard(len_is(len(value)))
            if source is not None and _argument_or_item(source):
                items = _tuple_with_symbolic_ints(tx, tuple(value), source)
                if items is not None:  # sizes passed to a resume function, now symbolic
                    return size_variable(items)
        if source is not None:
            for name, field_source, field in _fields(value, source):
                if not is_plain_constant(field):
                    raise unsupported(f"{type(value).__name__} with a {type(field).__name__} {name}")
                tx.output.add_guard(field_source, equals(field))
        return ConstantVariable(value, source)
    if isinstance(value, functools.partial):
        guard(type_is(functools.partial))
        fn = wrap_value(tx, value.func, AttrSource(source, "func") if source else None)
        args = [wrap_value(tx, a, ItemSource(AttrSource(source, "args"), i) if source else None)
                for i, a in enumerate(value.args)]
        kwargs = {k: wrap_value(tx, v, ItemSource(AttrSource(source, "keywords"), k) if source else None)
                  for k, v in value.keywords.items()}
        partial = PartialVariable(fn, args, kwargs, source)
        partial.instance_dict = value.__dict__  # for hasattr (guarded there)
        return partial
    grad_mode = _grad_mode_exited(value) if isinstance(value, types.MethodType) else None
    if grad_mode is not None:
        # The exit of a with-block entered before a graph break (graph_break.py).
        guard(type_is(types.MethodType))
        owner = AttrSource(source, "__self__") if source is not None else None
        if owner is not None:
            tx.output.add_guard(owner, type_is(type(grad_mode)))
            tx.output.add_guard(AttrSource(owner, "prev"), equals(grad_mode.prev))
        ctx = GradModeVariable(type(grad_mode) is torch.enable_grad, bool(grad_mode.prev))
        exit_var = GradModeExitVariable(ctx)
        exit_var.source = source
        return exit_var
    if isinstance(value, types.MethodType) and value.__func__.__name__ == "__exit__":
        # Another context manager entered before a graph break: what it restores on
        # exit (autocast, inference mode, user state) is not modelled.
        raise unsupported(f"exit of a with-block over {type(value.__self__).__qualname__}")
    if isinstance(value, types.MethodType):
        fn = wrap_value(tx, value.__func__, AttrSource(source, "__func__") if source else None)
        self_var = wrap_value(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        return UserMethodVariable(fn, self_var, source)
    if isinstance(value, types.BuiltinMethodType) and type(value.__self__) in (list, dict) \
            and source is not None:
        # ``lst.append`` left on the stack by a graph break (graph_break.py): the method
        # of the container, which is itself wrapped (and tracked for mutations).
        guard(type_is(types.BuiltinMethodType))
        tx.output.add_guard(AttrSource(source, "__name__"), equals(value.__name__))
        container = wrap_value(tx, value.__self__, AttrSource(source, "__self__"))
        return MethodCallVariable(container, value.__name__)
    if is_modelled_builtin(value):
        guard(id_is(value))
        return BuiltinVariable(value, source)
    if is_is_compiling(value):
        guard(id_is(value))
        return TorchFunctionVariable(value, source)
    if is_modelled_optimizer(value):
        guard(id_is(value))
        return OptimizerVariable(value, source)
    if is_torch_callable(value) and not isinstance(value, type):
        guard(id_is(value))
        return TorchFunctionVariable(value, source)
    if isinstance(value, types.FunctionType):
        guard(id_is(value))
        return UserFunctionVariable(value, source)
    if isinstance(value, types.BuiltinFunctionType):
        module = getattr(value, "__module__", None)
        if module == "math":
            guard(id_is(value))
            return PureFunctionVariable(value, source)
        if module in ("_operator", "operator"):
            guard(id_is(value))
            return OperatorVariable(value, source)
        raise unsupported(f"C function {getattr(value, '__qualname__', value)!r}")
    if isinstance(value, type):
        guard(id_is(value))
        if value in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.Size, torch.device,
                     torch.finfo, torch.iinfo):  # finfo(dtype) of a constant dtype: a constant
            return TorchFunctionVariable(value, source)
        return ClassVariable(value, source)
    if value is math.inf or value is operator:
        return ConstantVariable(value)
    if type(value) is weakref.ReferenceType and source is not None:
        guard(type_is(weakref.ReferenceType))
        return ExternalWeakRefVariable(value, source)
    if callable(value) and not hasattr(value, "__dict__"):
        raise unsupported(f"callable of type {type(value).__qualname__}")
    return _user_object(tx, value, source)


def _looks_itself_up(cls: type) -> bool:
    """Instances of a plain user class with a Python ``__getattribute__``: wrapped
    without ``isinstance`` checks, which would read ``obj.__class__`` through it (the
    user's code, run by the compiler)."""
    return isinstance(type_lookup(cls, "__getattribute__"), types.FunctionType) \
        and not issubclass(cls, (type, torch.Tensor, torch.nn.Module, BaseException, enum.Enum))


def _user_object(tx, value: Any, source: Source | None) -> VariableTracker:
    """An instance of a user class, guarded on its type."""
    def guard(check: tuple) -> None:
        if source is not None:
            tx.output.add_guard(source, check)

    if source is None:
        raise unsupported(f"object of type {type(value).__qualname__} without a source")
    if _in_function_constants(source) or type(value) in _SENTINEL_TYPES:
        # a default or closure constant of a function (sentinels such as dataclasses'
        # _HAS_DEFAULT_FACTORY): pinned, so ``is`` between two paths to it is decidable
        guard(id_is(value))
        sentinel = (OutsideDictObjectVariable(value, source) if is_dict_subclass(type(value))
                    else UserObjectVariable(value, source))
        sentinel.identity_guarded = True
        return _tracked(tx, value, sentinel, pinned=True)
    guard(type_is(type(value)))
    if is_dict_subclass(type(value)):
        return _tracked(tx, value, OutsideDictObjectVariable(value, source))
    return _tracked(tx, value, UserObjectVariable(value, source))


# Marker objects of the standard library that code compares with ``is`` (dataclasses'
# field kinds: ``f._field_type is _FIELD`` in ``dataclasses.fields``): pinned by identity.
_SENTINEL_TYPES = tuple(getattr(dataclasses, name) for name in (
    "_FIELD_BASE", "_MISSING_TYPE", "_HAS_DEFAULT_FACTORY_CLASS", "_KW_ONLY_TYPE") if hasattr(dataclasses, name))


def _outside_ordered_dict(tx, value: collections.OrderedDict, source: Source) -> VariableTracker:
    """An ``OrderedDict`` from outside the frame (a module's hook tables), read only:
    its type, length, key order and items guarded as a dict's; changing it breaks."""
    from .variables.collections_ import OrderedDictVariable

    if not all(type(k) in (str, int) for k in value):
        raise unsupported("OrderedDict with keys other than str/int")
    tx.output.add_guard(source, type_is(collections.OrderedDict))
    tx.output.add_guard(source, len_is(len(value)))
    var = OrderedDictVariable({k: wrap_value(tx, v, ItemSource(source, k)) for k, v in value.items()},
                              source=source)
    var.order_guard = OrderGuard(tx, source, value.keys())
    return var


def _in_function_constants(source: Source | None) -> bool:
    """``source`` reads a function's defaults or closure cells (fixed by the function)."""
    while isinstance(source, (AttrSource, ItemSource)):
        if isinstance(source, AttrSource) and source.attr in ("__defaults__", "__kwdefaults__", "__closure__"):
            return True
        source = source.base
    return False


def _tracked(tx, value: Any, var: VariableTracker, pinned: bool = False) -> VariableTracker:
    """Register a mutable object from the frame with the side-effect tracker (identity
    and aliasing checks; see :mod:`fastdynamo.capture.side_effects`); ``pinned`` when
    its guard is ``id_is``."""
    if var.source is not None:
        tx.output.side_effects.track(value, var.source, var, pinned=pinned)
    return var


def _grad_mode_exited(method: types.MethodType) -> torch.no_grad | torch.enable_grad | None:
    """The ``no_grad``/``enable_grad`` object (exactly, not a subclass) whose
    ``__exit__`` ``method`` is, or None."""
    ctx = method.__self__
    if (type(ctx) is torch.no_grad or type(ctx) is torch.enable_grad) and method.__func__ is type(ctx).__exit__:
        return ctx
    return None


_FIELD_GUARDED = (torch.device, slice, range, torch.Size)


def _fields(value: Any, source: Source):
    """(name, source, value) of what makes a device/slice/range/Size equal to another."""
    if type(value) is torch.Size:
        return [(f"item {i}", ItemSource(source, i), v) for i, v in enumerate(value)]
    names = ("type", "index") if type(value) is torch.device else ("start", "stop", "step")
    return [(name, AttrSource(source, name), getattr(value, name)) for name in names]


def _argument_or_item(source: Source | None) -> bool:
    """An argument of the frame, or an item of one (``shape[1]`` of a Size or tuple
    passed to a resume function): where an int may become symbolic."""
    while isinstance(source, ItemSource):
        source = source.base
    return isinstance(source, LocalSource)


def _constant_tuple(value: tuple, source: Source | None) -> VariableTracker:
    """A tuple of constants (guarded by value) that keeps its source: the rewritten code
    returns, and a graph break passes on, the caller's own tuple rather than a copy
    rebuilt from its items, which ``is`` would tell apart."""
    variable = wrap_constant_result(value)
    variable.source = source
    return variable


def _tuple_with_symbolic_ints(tx, value: tuple, source: Source) -> list[VariableTracker] | None:
    """The items of a tuple argument (sizes passed to a resume function) when some int
    item became symbolic (automatic dynamic); the others are guarded by value. None
    when none did: the whole tuple is then one constant, as before."""
    items: list[VariableTracker | None] = []
    for i, item in enumerate(value):
        symbolic = tx.output.add_int_input(item, ItemSource(source, i)) if type(item) is int else None
        if symbolic is not None:
            tx.output.add_guard(ItemSource(source, i), type_is(int))
        items.append(symbolic)
    if all(item is None for item in items):
        return None
    result: list[VariableTracker] = []
    for i, (item, known) in enumerate(zip(value, items, strict=True)):
        if known is None:
            tx.output.add_guard(ItemSource(source, i), equals(item))
            known = wrap_constant_result(item) if type(item) is tuple else ConstantVariable(item)
        result.append(known)
    return result


def wrap_code_constant(value: Any) -> VariableTracker:
    """A ``LOAD_CONST`` operand (never guarded)."""
    return wrap_constant_result(value)


def builtin_value(name: str) -> Any:
    return getattr(builtins, name)


__all__ = ["GlobalsSource", "ROOT_GLOBALS", "TRUSTED_GLOBALS", "globals_source_for", "wrap_value",
           "wrap_code_constant", "is_plain_constant", "is_torch_callable", "SetVariable"]
