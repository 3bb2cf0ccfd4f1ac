"""User functions, closures, lambdas, bound methods and ``functools.partial``.

Calls to user functions are inlined: a child translator walks the callee's bytecode
with the caller's symbolic arguments, so the callee's tensor ops land in the same graph.

>>> def double(x): return x * 2
>>> UserFunctionVariable(double).describe()
'UserFunctionVariable(double)'
"""
from __future__ import annotations

import types
from typing import Any

from ...bytecode import version
from ...exc import unsupported
from ...guards.sources import AttrSource, ClosureSource, ItemSource
from .base import VariableTracker
from .constant import ConstantVariable


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
        from ..binding import bind_arguments
        from .containers import DictVariable, TupleVariable

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
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
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

    def python_type(self) -> type:
        return types.FunctionType

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

    def describe(self) -> str:
        return f"UserMethodVariable({self.fn.describe()})"


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)``."""

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict, source=None):
        self.fn = fn
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.source = source

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.fn.call_function(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .containers import DictVariable, TupleVariable

        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(self.kwargs)
        raise unsupported(f"attribute {name!r} of functools.partial")

    def describe(self) -> str:
        return f"PartialVariable({self.fn.describe()})"
