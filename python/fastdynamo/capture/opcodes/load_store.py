"""Loads and stores: locals, constants, globals, cells, attributes."""
from __future__ import annotations

from typing import Any

from ...bytecode import version
from ...exc import unsupported
from ..builder import GlobalsSource, wrap_code_constant, wrap_value
from ..side_effects import where_of
from ..variables.base import NULL
from ..variables.functions import CellVariable


class LoadStoreOpcodes:
    # from InstructionTranslator, which mixes this class in
    locals: dict[str, Any]
    f_globals: dict
    root_globals: dict
    globals_source: GlobalsSource

    def _load_local(self, name: str):
        from ..translator import LazyArgument

        if name not in self.locals:
            raise unsupported(f"local variable {name!r} referenced before assignment")
        value = self.locals[name]
        if isinstance(value, LazyArgument):
            if self._is_varkeywords(name) and type(value.value) is dict:
                self.output.side_effects.mark_fresh(value.value)  # type: ignore[attr-defined]
            value = wrap_value(self, value.value, value.source)
            self.locals[name] = value
        return value

    def _is_varkeywords(self, name: str) -> bool:
        """``name`` is the compiled frame's ``**kwargs``: a dict CPython makes for each
        call, which nothing else can reach when the frame starts."""
        code = self.code  # type: ignore[attr-defined]
        if self.depth or not code.co_flags & version.CO_VARKEYWORDS:  # type: ignore[attr-defined]
            return False
        index = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & version.CO_VARARGS)
        return code.co_varnames[index] == name

    def LOAD_FAST(self, inst):
        self.push(self._load_local(inst.argval))

    def STORE_FAST(self, inst):
        self.locals[inst.argval] = self.pop()

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_CONST(self, inst):
        self.push(wrap_code_constant(inst.argval))

    def _stores_root_globals(self) -> bool:
        return self.globals_source.root and self.f_globals is self.root_globals

    def LOAD_GLOBAL(self, inst):
        name = inst.argval
        if inst.arg & version.PUSH_NULL_BIT:
            self.push(NULL)
        pending = self.output.side_effects.load_global(name) if self._stores_root_globals() else None
        if pending is not None:
            self.push(pending)
            return
        if name in self.f_globals:
            value = self.f_globals[name]
            source = self.globals_source.for_global(name)
        elif name in self.f_builtins:
            value = self.f_builtins[name]
            source = self.globals_source.for_builtin(name)
            if source is not None and self.globals_source.root:
                # the global must stay absent for the builtin to be what the name means
                pass
        else:
            raise unsupported(f"name {name!r} is not defined")
        self.push(wrap_value(self, value, source))

    def STORE_GLOBAL(self, inst):
        if not self._stores_root_globals():
            raise unsupported(f"assignment to global {inst.argval!r} of another module (side effect)")
        self.output.side_effects.store_global(inst.argval, self.pop(), where_of(self))

    def MAKE_CELL(self, inst):
        name = inst.argval
        initial = self._load_local(name) if name in self.locals else None
        self.cells[name] = CellVariable(initial)

    def LOAD_CLOSURE(self, inst):
        name = inst.argval
        if name not in self.cells:
            self.cells[name] = CellVariable()
        self.push(self.cells[name])

    def LOAD_DEREF(self, inst):
        name = inst.argval
        if name not in self.cells:
            raise unsupported(f"free variable {name!r} has no cell")
        self.push(self.cells[name].load(self))

    def STORE_DEREF(self, inst):
        self.cells.setdefault(inst.argval, CellVariable()).store(self, self.pop())

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        self.push(obj.var_getattr(self, inst.argval))

    def LOAD_METHOD(self, inst):
        # Pushed as NULL + bound attribute: CALL treats it like a plain call.
        obj = self.pop()
        self.push(NULL)
        self.push(obj.var_getattr(self, inst.argval))

    def STORE_ATTR(self, inst):
        obj = self.pop()
        obj.store_attr(self, inst.argval, self.pop())

    def LOAD_ASSERTION_ERROR(self, inst):
        from ..variables.misc import ClassVariable

        self.push(ClassVariable(AssertionError))
