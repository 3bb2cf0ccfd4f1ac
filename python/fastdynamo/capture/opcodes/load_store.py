"""Loads and stores: locals, constants, globals, cells, attributes."""
from __future__ import annotations

from types import CodeType
from typing import Any

from ...bytecode import version
from ...exc import unsupported
from ...guards import contains
from .. import translator  # a cycle (the translator imports the opcodes): read at call time
from ..builder import GlobalsSource, wrap_code_constant, wrap_value
from ..side_effects import where_of
from ..variables.base import NULL
from ..variables.functions import CellVariable


class LoadStoreOpcodes:
    # from InstructionTranslator, which mixes this class in
    code: CodeType
    cells: dict[str, CellVariable]
    f_builtins: dict
    output: Any  # OutputGraph
    locals: dict[str, Any]
    f_globals: dict
    root_globals: dict
    globals_source: GlobalsSource

    def _load_local(self, name: str):
        if name not in self.locals:
            raise unsupported(f"local variable {name!r} referenced before assignment")
        value = self.locals[name]
        if isinstance(value, translator.LazyArgument):
            if self._is_varkeywords(name) and type(value.value) is dict:
                self.output.side_effects.mark_fresh(value.value)
            value = wrap_value(self, value.value, value.source)
            self.locals[name] = value
        return value

    def _is_varkeywords(self, name: str) -> bool:
        """``name`` is the compiled frame's ``**kwargs``: a dict CPython makes for each
        call, which nothing else can reach when the frame starts."""
        code = self.code
        if self.depth or not code.co_flags & version.CO_VARKEYWORDS:  # type: ignore[attr-defined]
            return False
        index = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & version.CO_VARARGS)
        return code.co_varnames[index] == name

    def LOAD_FAST(self, inst):
        self.push(self._load_fast(inst.argval))

    def _load_fast(self, name: str):
        # 3.12+ compiles LOAD_CLOSURE (a closure's cell) to a LOAD_FAST of the cell's slot.
        if version.PY_3_12 and (name in self.code.co_cellvars or name in self.code.co_freevars):
            return self._closure_cell(name)
        return self._load_local(name)

    def STORE_FAST(self, inst):
        self._store_local(inst.argval, self.pop())

    def _store_local(self, name: str, value) -> None:
        # 3.12+: a STORE_FAST to a cell's slot puts back the cell an inlined comprehension
        # hid (LOAD_FAST_AND_CLEAR); NULL means it was unbound.
        slots = self.cells if name in self.code.co_cellvars else self.locals
        if value is NULL:
            slots.pop(name, None)
        else:
            slots[name] = value

    def LOAD_FAST_AND_CLEAR(self, inst):
        # 3.12+, around an inlined comprehension: its variable hides the frame's local
        # (or cell) of the same name, which STORE_FAST puts back afterwards.
        name = inst.argval
        if name in self.code.co_cellvars:
            self.push(self.cells.pop(name, NULL))
            return
        self.push(self._load_local(name) if name in self.locals else NULL)
        self.locals.pop(name, None)

    # 3.13's pairs: two locals in one instruction (argval: the two names).
    def LOAD_FAST_LOAD_FAST(self, inst):
        for name in inst.argval:
            self.push(self._load_fast(name))

    def STORE_FAST_STORE_FAST(self, inst):
        for name in inst.argval:
            self._store_local(name, self.pop())

    def STORE_FAST_LOAD_FAST(self, inst):
        store, load = inst.argval
        self._store_local(store, self.pop())
        self.push(self._load_fast(load))

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_CONST(self, inst):
        self.push(wrap_code_constant(inst.argval))

    def _stores_root_globals(self) -> bool:
        return self.globals_source.root and self.f_globals is self.root_globals

    def LOAD_GLOBAL(self, inst):
        value = self._global_value(inst.argval)
        if inst.arg & version.PUSH_NULL_BIT:
            self.push_null_and(value)
        else:
            self.push(value)

    def _global_value(self, name: str):
        pending = self.output.side_effects.load_global(name) if self._stores_root_globals() else None
        if pending is not None:
            return pending
        if name in self.f_globals:
            value = self.f_globals[name]
            source = self.globals_source.for_global(name)
        elif name in self.f_builtins:
            value = self.f_builtins[name]
            source = self.globals_source.for_builtin(name)
            if self.globals_source.base is not None:
                # another module's globals: they must stay without the name for the builtin
                # to be what it means (the root's are checked by the builtin's own source)
                self.output.add_guard(self.globals_source.base, contains(name, False))
        else:
            raise unsupported(f"name {name!r} is not defined")
        return wrap_value(self, value, source)

    def STORE_GLOBAL(self, inst):
        if not self._stores_root_globals():
            raise unsupported(f"assignment to global {inst.argval!r} of another module (side effect)")
        self.output.side_effects.store_global(inst.argval, self.pop(), where_of(self))

    def MAKE_CELL(self, inst):
        name = inst.argval
        initial = self._load_local(name) if name in self.locals else None
        self.cells[name] = CellVariable(initial)

    def LOAD_CLOSURE(self, inst):
        self.push(self._closure_cell(inst.argval))

    def _closure_cell(self, name: str) -> CellVariable:
        if name not in self.cells:
            self.cells[name] = CellVariable()
        return self.cells[name]

    def LOAD_DEREF(self, inst):
        name = inst.argval
        if name not in self.cells:
            raise unsupported(f"free variable {name!r} has no cell")
        self.push(self.cells[name].load(self))

    def STORE_DEREF(self, inst):
        self.cells.setdefault(inst.argval, CellVariable()).store(self, self.pop())

    def LOAD_ATTR(self, inst):
        if version.loads_method(inst):
            self.LOAD_METHOD(inst)
            return
        obj = self.pop()
        self.push(obj.var_getattr(self, inst.argval))

    def LOAD_METHOD(self, inst):
        # Pushed as NULL + bound attribute: CALL treats it like a plain call.
        obj = self.pop()
        self.push_null_and(obj.var_getattr(self, inst.argval))

    def LOAD_SUPER_ATTR(self, inst):
        # 3.12+: ``super().name`` (and ``super(C, self).name``) in one instruction: the
        # global ``super`` called as CPython calls it (no arguments for the zero-argument
        # form, which reads the frame), then the attribute.
        obj = self.pop()
        cls = self.pop()
        global_super = self.pop()
        args = [cls, obj] if inst.arg & version.SUPER_TWO_ARGS_BIT else []
        attr = global_super.call_function(self, args, {}).var_getattr(self, inst.argval)
        if inst.arg & version.SUPER_METHOD_BIT:
            self.push_null_and(attr)
        else:
            self.push(attr)

    def STORE_ATTR(self, inst):
        obj = self.pop()
        obj.store_attr(self, inst.argval, self.pop())

    def DELETE_ATTR(self, inst):
        self.pop().delete_attr(self, inst.argval)

    def LOAD_ASSERTION_ERROR(self, inst):
        from ..variables.misc import ClassVariable

        self.push(ClassVariable(AssertionError))
