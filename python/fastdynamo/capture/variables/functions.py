"""User functions, closures, lambdas, bound methods and ``functools.partial``.

Calls to user functions are inlined: a child translator walks the callee's bytecode
with the caller's symbolic arguments, so the callee's tensor ops land in the same graph.

>>> def double(x): return x * 2
>>> UserFunctionVariable(double).describe()
'UserFunctionVariable(double)'
"""
from __future__ import annotations

import functools
import types
from typing import Any

from ...bytecode import version
from ...exc import unsupported
from ...guards import code_is, id_is, len_is
from ...guards.sources import AttrSource, ClosureSource, ItemSource
from ..binding import bind_arguments
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import DictVariable, TupleVariable

# What functools.update_wrapper may set on a function made by the frame.
WRAPPER_ATTRIBUTES = frozenset(functools.WRAPPER_ASSIGNMENTS) | {"__wrapped__"}


class CellVariable(VariableTracker):
    """A closure cell. Cells from outside the trace (``real_cell``) read their contents
    lazily (wrapped with ``contents_source``); a store to one is a side effect, seen by
    later loads through any CellVariable of the same cell. ``name`` is the free
    variable's name (a cell is reached under the name of its variable only)."""

    def __init__(self, contents: VariableTracker | None = None, real_cell=None, contents_source=None,
                 name: str | None = None):
        self.contents = contents
        self.real_cell = real_cell
        self.contents_source = contents_source
        if name is None and isinstance(contents_source, ClosureSource):
            name = contents_source.free_name
        self.name = name

    @property
    def cell_source(self):
        """Where the rewritten code finds the cell: ``ClosureSource`` for the compiled
        frame's own free variables (stored with STORE_DEREF), ``fn.__closure__[i]`` for
        an inlined function's; None when the function has no source."""
        source = self.contents_source
        if isinstance(source, AttrSource) and source.attr == "cell_contents":
            return source.base
        return source

    def load(self, tx) -> VariableTracker:
        if self.real_cell is not None:
            effects = tx.output.side_effects
            if self.cell_source is not None:
                effects.track(self.real_cell, self.cell_source, kind=("cell", self.name),
                              pinned=not isinstance(self.cell_source, ClosureSource))
            pending = effects.load_cell(self.real_cell)
            if pending is not None:
                return pending
        if self.contents is None:
            if self.real_cell is None:
                raise unsupported("free variable referenced before assignment")
            from ..builder import wrap_value

            try:
                value = self.real_cell.cell_contents
            except ValueError as err:
                raise unsupported("empty closure cell") from err
            self.contents = wrap_value(tx, value, self.contents_source)
        return self.contents

    def store(self, tx, value: VariableTracker) -> None:
        """``STORE_DEREF``: a cell made in the trace just takes the value."""
        if self.real_cell is None:
            self.contents = value
            return
        if self.cell_source is None:
            raise unsupported(f"assignment to nonlocal {self.name!r} of a function without a source")
        from ..side_effects import where_of

        tx.output.side_effects.store_cell(self.real_cell, self.cell_source, self.name, value,
                                          where_of(tx))


class BaseFunctionVariable(VariableTracker):
    """Shared inlining of a code object with defaults, closure and globals."""

    def inline(self, tx, code: types.CodeType, args, kwargs, defaults, kwdefaults,
               cells: dict[str, CellVariable], f_globals: dict, globals_source, name: str):
        if code.co_flags & (version.CO_COROUTINE | version.CO_ASYNC_GENERATOR | version.CO_ITERABLE_COROUTINE):
            raise unsupported(f"calling the coroutine function {name}")
        bound = bind_arguments(code, args, kwargs, defaults, kwdefaults,
                               make_tuple=TupleVariable, make_dict=DictVariable)
        return tx.inline_call(code, bound, cells, f_globals, globals_source, name)


class UserFunctionVariable(BaseFunctionVariable):
    """A Python function object that exists outside the trace (guarded by identity)."""

    def __init__(self, fn: types.FunctionType, source=None):
        self.fn = fn
        self.source = source

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from ..builder import globals_source_for, wrap_value

        if getattr(self.fn, "_fastdynamo_disabled", False):
            raise unsupported(f"call to {self.fn.__qualname__}, marked fastdynamo.disable")
        src = self.source
        if src is not None:  # the code inlined: assigning __code__ later must recompile
            tx.output.add_guard(src, code_is(self.fn.__code__))
        defaults = tuple(
            wrap_value(tx, value, ItemSource(AttrSource(src, "__defaults__"), i) if src else None)
            for i, value in enumerate(self.fn.__defaults__ or ()))
        kwdefaults = {
            key: wrap_value(tx, value, ItemSource(AttrSource(src, "__kwdefaults__"), key) if src else None)
            for key, value in (self.fn.__kwdefaults__ or {}).items()}
        cells = {}
        closure = self.fn.__closure__ or ()
        for i, (name, cell) in enumerate(zip(self.fn.__code__.co_freevars, closure, strict=True)):
            cell_source = (AttrSource(ItemSource(AttrSource(src, "__closure__"), i), "cell_contents")
                           if src else None)
            cells[name] = CellVariable(real_cell=cell, contents_source=cell_source, name=name)
        globals_source = globals_source_for(tx, self.fn, src)
        return self.inline(tx, self.fn.__code__, args, kwargs, defaults, kwdefaults, cells,
                           self.fn.__globals__, globals_source, self.fn.__qualname__)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..builder import wrap_value

        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            value = getattr(self.fn, name)
            return wrap_value(tx, value, AttrSource(self.source, name)) if self.source is not None \
                else ConstantVariable(value)
        if name == "__code__":
            # immutable, and what the trace inlines: a constant, pinned on the function
            # (``fn.__code__ = other`` is allowed)
            if self.source is not None:
                tx.output.add_guard(AttrSource(self.source, name), id_is(self.fn.__code__))
            return ConstantVariable(self.fn.__code__, AttrSource(self.source, name) if self.source else None)
        if name in ("__defaults__", "__kwdefaults__", "__annotations__") and self.source is not None:
            return wrap_value(tx, getattr(self.fn, name), AttrSource(self.source, name))
        if name in self.fn.__dict__ and self.source is not None:
            # an attribute of the function's own (``__wrapped__``, user flags): read through it
            return wrap_value(tx, self.fn.__dict__[name], AttrSource(self.source, name))
        raise unsupported(f"attribute {name!r} of function {self.fn.__qualname__}")

    def describe(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


class NestedFunctionVariable(BaseFunctionVariable):
    """A function made by ``MAKE_FUNCTION`` during the trace (lambdas, inner defs,
    comprehensions): its defaults and closure cells are symbolic."""

    def __init__(self, code: types.CodeType, qualname: str, defaults: tuple, kwdefaults: dict,
                 closure: tuple, f_globals: dict, globals_source):
        self.code = code
        self.qualname = qualname
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure
        self.f_globals = f_globals
        self.globals_source = globals_source
        # attributes set by the frame (``functools.wraps``, ``fn.attr = v``), in order
        self.attrs: dict[str, VariableTracker] = {}

    def python_type(self) -> type:
        return types.FunctionType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(self.code.co_name if name == "__name__" else self.qualname)
        if name in ("__doc__", "__type_params__") and hasattr(types.FunctionType, name):
            # what CPython derives from the code object when it makes the function
            from .constant import wrap_constant_result

            cells = tuple(types.CellType() for _ in self.code.co_freevars)
            return wrap_constant_result(getattr(types.FunctionType(self.code, {}, closure=cells), name))
        if name == "__module__" and "__name__" in self.f_globals:
            from ..builder import wrap_value

            return wrap_value(tx, self.f_globals["__name__"], self.globals_source.for_global("__name__"))
        if name == "__annotations__" and not getattr(self, "has_annotations", True):
            from .containers import DictVariable

            # made on first read and kept: every read gives the same dict, as in CPython
            self.attrs[name] = DictVariable({})
            return self.attrs[name]
        raise unsupported(f"attribute {name!r} of function {self.qualname} made by the frame")

    def instance_dict_items(self) -> dict[str, VariableTracker]:
        """The entries of the function's ``__dict__``: what the frame set, less the
        attributes CPython keeps in the function's own slots."""
        return {k: v for k, v in self.attrs.items() if k not in functools.WRAPPER_ASSIGNMENTS}

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if name.startswith("__") and name not in WRAPPER_ATTRIBUTES:
            raise unsupported(f"assignment to {name} of a function made by the frame")
        self.attrs[name] = value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        cells = dict(zip(self.code.co_freevars, self.closure, strict=True))
        return self.inline(tx, self.code, args, kwargs, self.defaults, self.kwdefaults, cells,
                           self.f_globals, self.globals_source, self.qualname)

    def describe(self) -> str:
        return f"NestedFunctionVariable({self.qualname})"


class UserMethodVariable(VariableTracker):
    """``obj.method``: a function with its first argument bound."""

    def __init__(self, fn: VariableTracker, self_var: VariableTracker, source=None):
        self.fn = fn
        self.self_var = self_var
        self.source = source

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.fn.call_function(tx, [self.self_var, *args], kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """As ``method_getattro``: the method type's own attributes, then the function's."""
        if name == "__func__":
            return self.fn
        if name == "__self__":
            return self.self_var
        if name == "__doc__" or name not in _METHOD_TYPE_ATTRIBUTES:
            return self.fn.var_getattr(tx, name)  # (the type's __doc__ reads the function's)
        raise unsupported(f"attribute {name!r} of a bound method")

    def describe(self) -> str:
        return f"UserMethodVariable({self.fn.describe()})"


# What ``types.MethodType`` itself answers (found on the type before the function is asked).
_METHOD_TYPE_ATTRIBUTES = frozenset(dir(types.MethodType))


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)``."""

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict, source=None):
        self.fn = fn
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.source = source
        self.instance_dict: dict = {}

    def python_type(self) -> type:
        return functools.partial

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.fn.call_function(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(self.kwargs)
        raise unsupported(f"attribute {name!r} of functools.partial")

    def describe(self) -> str:
        return f"PartialVariable({self.fn.describe()})"


def update_wrapper(tx, wrapper: VariableTracker, wrapped: VariableTracker,
                   assigned: tuple, updated: tuple) -> VariableTracker:
    """``functools.update_wrapper(wrapper, wrapped)`` for a wrapper made by the frame:
    the wrapped function's name, doc, module... copied onto it, and ``__wrapped__``."""
    from ..builder import is_plain_constant, wrap_value

    if not isinstance(wrapper, NestedFunctionVariable) or tuple(updated) not in ((), ("__dict__",)):
        raise unsupported("functools.update_wrapper on something other than a function made by the frame")
    if isinstance(wrapped, NestedFunctionVariable):
        return _update_from_frame_function(tx, wrapper, wrapped, assigned, updated)
    real = wrapped.fn if isinstance(wrapped, UserFunctionVariable) else wrapped.as_python_constant()
    source = wrapped.source
    if updated and getattr(real, "__dict__", {}):
        raise unsupported("functools.wraps of a function with attributes of its own")
    if updated and source is not None and isinstance(getattr(real, "__dict__", None), dict):
        tx.output.add_guard(AttrSource(source, "__dict__"), len_is(0))
    for name in assigned:
        try:
            value = getattr(real, name)
        except AttributeError:
            continue
        attr_source = AttrSource(source, name) if source is not None else None
        if not is_plain_constant(value) and type(value) is not dict:
            raise unsupported(f"functools.wraps copying a {type(value).__name__} {name}")
        wrapper.attrs[name] = wrap_value(tx, value, attr_source) if attr_source is not None \
            else _constant_value(value)
    wrapper.attrs["__wrapped__"] = wrapped
    return wrapper


def _update_from_frame_function(tx, wrapper: NestedFunctionVariable, wrapped: NestedFunctionVariable,
                                assigned: tuple, updated: tuple) -> VariableTracker:
    """``update_wrapper`` copying from a function the frame made too (``wraps`` applied
    to a lambda): its attributes as the frame sees them, then its ``__dict__``."""
    for name in assigned:
        if name == "__type_params__" and not hasattr(types.FunctionType, name):
            continue  # not an attribute before 3.12: update_wrapper skips it
        wrapper.attrs[name] = wrapped.var_getattr(tx, name)
    if updated:
        wrapper.attrs.update(wrapped.instance_dict_items())
    wrapper.attrs["__wrapped__"] = wrapped
    return wrapper


def _constant_value(value: Any) -> VariableTracker:
    from .containers import DictVariable

    if type(value) is dict:
        if value:
            raise unsupported("functools.wraps copying annotations without a source")
        return DictVariable({})
    return ConstantVariable(value)
